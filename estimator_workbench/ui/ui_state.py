"""``<workspace>/ui_state.json``: the UI context kept across browser reloads (the chosen dataset and
template, the Train form's values, the last pre-flight result), and each browser's unsaved editor
text under that browser's id, so that it never reaches another browser (issue 24.6).

Example::

    >>> save_ui_state(template="linear")  # doctest: +SKIP
    >>> load_ui_state()["template"]  # doctest: +SKIP
    'linear'
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import streamlit as st

from estimator_workbench.store import paths

__all__ = ["EDITS_BY_BROWSER", "UI_STATE_FILE", "browser_id", "load_ui_state", "save_edits",
           "save_ui_state", "saved_edits"]

UI_STATE_FILE = "ui_state.json"
# browser id -> that browser's edits (template name -> code). The old shared "template_edits" key
# is ignored. The most recent browsers are kept.
EDITS_BY_BROWSER = "template_edits_by_browser"
_MAX_BROWSERS = 20
_log = logging.getLogger("estimator_workbench.ui")


def _ui_state_path() -> Path:
    return paths.workspace_root() / UI_STATE_FILE


def load_ui_state() -> dict[str, Any]:
    """The context saved in ``<workspace>/ui_state.json`` (``{}`` when there is none or it cannot
    be read: a broken file is logged and then overwritten, never fatal)."""
    try:
        data = json.loads(_ui_state_path().read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        _log.warning("The saved UI context %s cannot be read (%s); starting from the defaults.",
                     _ui_state_path(), exc)
        return {}
    return data if isinstance(data, dict) else {}


def save_ui_state(**changes: Any) -> None:
    """Merges ``changes`` into ``ui_state.json``; written only when something changed, atomically
    (a temporary file renamed over it), so a crash never leaves half a file."""
    state = load_ui_state()
    merged = {**state, **changes}
    if merged == state:
        return
    path = _ui_state_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=path.parent, prefix=".ui_state-",
                                         suffix=".tmp", delete=False) as f:
            json.dump(merged, f, indent=1, sort_keys=True, default=str)
        os.replace(f.name, path)
    except OSError as exc:  # a read-only or full disk must not break the page
        with contextlib.suppress(OSError, UnboundLocalError):
            Path(f.name).unlink()
        _log.warning("The UI context could not be saved to %s: %s", path, exc)


def browser_id() -> str:
    """This browser's id: the random cookie the access gate gives each browser
    (``access.browser_cookie_name``); "" without one (``AppTest``)."""
    from estimator_workbench.ui import access

    try:
        cookies = st.context.cookies
        return str(cookies.get(access.browser_cookie_name(st.get_option("server.port")), ""))[:64]
    except Exception:  # no request behind this script run (bare mode)
        return ""


def saved_edits(state: Mapping[str, Any]) -> dict[str, str] | None:
    """This browser's edits in a loaded ``ui_state.json`` (None when it has none)."""
    by_browser = state.get(EDITS_BY_BROWSER)
    edits = by_browser.get(browser_id()) if isinstance(by_browser, dict) else None
    return edits if isinstance(edits, dict) else None


def save_edits(edits: Mapping[str, str]) -> None:
    """Saves this browser's unsaved editor text under its id: a reload of the same browser gets it
    back; another browser never does (it could run it by pressing Train)."""
    saved = load_ui_state().get(EDITS_BY_BROWSER)
    by_browser = dict(saved) if isinstance(saved, dict) else {}
    me = browser_id()
    by_browser.pop(me, None)  # re-inserted last: the dict keeps the most recent browsers
    if edits:
        by_browser[me] = dict(edits)
    save_ui_state(**{EDITS_BY_BROWSER: dict(list(by_browser.items())[-_MAX_BROWSERS:])})
