"""Context kept across reloads, on top of ``session``: the dataset and template in the URL
(``?dataset=penguins&template=mlp_classifier``; an upload is ``upload:<file name>``), the Train
form's values and the last pre-flight result (with the hash of the code it checked), all saved in
``<workspace>/ui_state.json`` (``session.save_ui_state``) and restored by
``session.restore_context``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import streamlit as st

from estimator_workbench.ui.session import FORMS_KEY, dataset_token, restore_context, save_ui_state

__all__ = ["code_hash", "current_preflight", "remember_form", "remembered_form", "set_dataset", "set_preflight",
           "sync_url"]


def set_dataset(chosen: Mapping[str, Any]) -> None:
    """Makes ``chosen`` (a ``DatasetSpec.to_dict()`` with ``fingerprint``) the session's dataset,
    and saves it in the workspace and the URL."""
    st.session_state["dataset"] = dict(chosen)
    save_ui_state(dataset=dict(chosen))
    sync_url()

def sync_url() -> None:
    """Puts the session's dataset and template in the URL (``?dataset=...&template=...``), so a
    reload or a shared link opens the same context."""
    dataset = st.session_state.get("dataset")
    token = dataset_token(dataset) if dataset else None
    if token and st.query_params.get("dataset") != token:
        st.query_params["dataset"] = token
    template = st.session_state.get("template")
    if template and st.query_params.get("template") != template["name"]:
        st.query_params["template"] = template["name"]


def remembered_form(form: str) -> dict[str, Any]:
    """The widget values of ``form`` as last submitted (this session, else the workspace's)."""
    restore_context()
    return dict(st.session_state.get(FORMS_KEY, {}).get(form, {}))


def remember_form(form: str, values: Mapping[str, Any]) -> None:
    """Saves the widget values of ``form`` (JSON values), for ``remembered_form`` after a reload."""
    forms = dict(st.session_state.get(FORMS_KEY, {}))
    forms[form] = {k: v for k, v in values.items() if isinstance(v, (str, int, float, bool)) or v is None}
    st.session_state[FORMS_KEY] = forms
    save_ui_state(forms=forms)


def code_hash(code: str) -> str:
    """sha256 of a template's code: a pre-flight result belongs to the code it checked."""
    return hashlib.sha256(code.encode("utf-8")).hexdigest()


def set_preflight(report: Mapping[str, Any], code: str, template_name: str) -> None:
    """Keeps a pre-flight result with the hash of the code it checked (session and workspace)."""
    stored = dict(report) | {"code_sha256": code_hash(code), "template": template_name}
    st.session_state["preflight"] = stored
    save_ui_state(preflight=stored)


def current_preflight(code: str) -> dict[str, Any] | None:
    """The last pre-flight result if it checked exactly ``code``; an older one (the code changed
    since) is cleared and None returned."""
    restore_context()
    report = st.session_state.get("preflight")
    if not report:
        return None
    if report.get("code_sha256") != code_hash(code):
        st.session_state.pop("preflight", None)
        save_ui_state(preflight=None)
        return None
    return report
