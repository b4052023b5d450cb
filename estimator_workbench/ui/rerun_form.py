"""'Re-run with these settings' (issue 28 item 10): any run's dataset, template code, params,
RunConfig and schedule put into the Train form, which then shows them for a new launch.

``train_form_values`` (no Streamlit) maps a run onto the Train form's widget keys; ``rerun_button``
makes the run's dataset and template the session's, remembers those values as the Train form's
and opens the Train page."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import streamlit as st

from estimator_workbench.store.records import RunRecord
from estimator_workbench.ui import context, session

__all__ = ["FORM", "rerun_button", "rerun_notice", "train_form_values"]

FORM = "train"  # the Train page's remembered form

# schedule / run_config field -> the Train form's widget key (``forms.run_config_form``, key 'rc')
_SCHEDULE_KEYS = {"max_steps": "rc-steps", "batch_size": "rc-batch", "metrics_every_n_steps": "rc-metrics",
                  "eval_every_steps": "rc-eval", "eval_steps": "rc-evalsteps", "nan_policy": "rc-nan"}
_CONFIG_KEYS = {"tf_random_seed": "rc-seed", "save_checkpoints_steps": "rc-ckpt", "keep_checkpoint_max": "rc-keep",
                "log_step_count_steps": "rc-log", "device": "rc-device"}
_EARLY_KEYS = {"metric": "rc-es-metric", "mode": "rc-es-mode", "patience": "rc-es-patience",
               "min_delta": "rc-es-delta"}


def _plain(value: Any) -> Any:
    return value if isinstance(value, (str, int, float, bool)) or value is None else str(value)


def train_form_values(record: RunRecord) -> dict[str, Any]:
    """The Train form's widget values (key -> value) that launch ``record``'s settings again.

    Example:
        >>> train_form_values(record)["rc-steps"], train_form_values(record)["p-mlp_classifier-learning_rate"]  # doctest: +SKIP
        (1500, 0.01)
    """
    template = str(record.template_name or (record.template or {}).get("name") or "template")
    values: dict[str, Any] = {"rc-action": record.action, "rc-procs": int(record.num_processes or 1)}
    for field, key in _SCHEDULE_KEYS.items():
        if record.schedule.get(field) is not None:
            values[key] = _plain(record.schedule[field])
    for field, key in _CONFIG_KEYS.items():
        if field in record.run_config:
            value = record.run_config[field]
            values[key] = 0 if field == "keep_checkpoint_max" and value is None else _plain(value)
    early = record.schedule.get("early_stopping") or {}
    values["rc-es"] = bool(early)
    for field, key in _EARLY_KEYS.items():
        if field in early:
            values[key] = _plain(early[field])
    for name, value in record.params.items():
        values[f"p-{template}-{name}"] = _plain(value)
    # where it started from: a warm start's parent, the model an evaluate/predict run used
    values["start-from"] = record.parent_run_id if record.parent_relation in (
        "warm_start", "evaluate_from", "predict_from") else ""
    return values


def _apply(record: RunRecord) -> None:
    """The button's callback (before any widget of the next run exists): the run's context in
    the session and the Train form's remembered values; the form's widgets are dropped so that
    they are created again with these values."""
    context.set_dataset(dict(record.dataset))
    template = record.template or {}
    session.use_template(str(template.get("name") or record.template_name), str(template.get("code") or ""))
    values = train_form_values(record)
    for key in [k for k in st.session_state if isinstance(k, str) and k.startswith(("rc-", "p-", "start-from"))]:
        del st.session_state[key]
    context.remember_form(FORM, values)
    st.session_state["_rerun_of"] = (record.run_id, record.name)


def rerun_button(record: RunRecord, key: str = "rerun") -> None:
    """'Re-run with these settings': opens the Train page filled with ``record``'s settings."""
    if st.button("Re-run with these settings", key=f"{key}-{record.run_id}", icon=":material/replay:",
                 on_click=_apply, args=(record,),
                 help="Opens Train with this run's dataset, template code, params, RunConfig and schedule."):
        session.switch_to("train")


def rerun_notice() -> Mapping[str, str] | None:
    """On the Train page, once: which run the form was filled from."""
    found = st.session_state.pop("_rerun_of", None)
    if found:
        run_id, name = found
        st.info(f"Filled from run {session.md(name)} ({run_id}): change what you like, then Train.",
                icon=":material/replay:")
        return {"run_id": run_id, "name": name}
    return None
