"""Panels of the run and predict pages: status badge, run actions (stop, cancel, resume, ...),
reproduce commands and bundle, checkpoints, evaluation plots, and prediction inputs/results."""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import streamlit as st

from estimator_workbench.store import paths
from estimator_workbench.store.records import (
    MODEL_ACTIONS,
    TRAINING_ACTIONS,
    RunNotFoundError,
    RunRecord,
)
from estimator_workbench.ui import figures
from estimator_workbench.ui.forms import launch_run
from estimator_workbench.ui.runs_hub import confirm_cancel, confirm_trash, confirmation_dialogs
from estimator_workbench.ui.session import (
    get_launcher,
    get_registry,
    label,
    load_dataset_frame,
    md,
    predictions_frame,
    set_selected_run,
    show_error,
    show_table,
    workspace,
)
from estimator_workbench.ui.signin import current_actor
from estimator_workbench.ui.tables import (
    STATUS_COLOURS,
    STATUS_ICONS,
    display_status,
    list_checkpoints,
    probability_columns,
)

__all__ = ['EvaluationRows', 'bundle_bytes', 'checkpoint_step', 'checkpoint_text', 'checkpoints_panel', 'evaluation_plots', 'evaluation_rows', 'launch_from', 'launch_plots', 'mlflow_status', 'newest_checkpoint', 'plots_source', 'prediction_dataset', 'reproduce_panel', 'run_actions', 'run_label', 'serve_panel', 'single_prediction', 'source_step', 'status_badge']


def status_badge(record: RunRecord) -> None:
    """A coloured badge with the run's status, 'stalled' included (in a container keyed
    ``status-<run id>``)."""
    status = display_status(record)
    colour = STATUS_COLOURS.get(status, "gray")
    with st.container(key=f"status-{record.run_id}"):
        st.badge(status, icon=STATUS_ICONS.get(status), color=colour)


def reproduce_panel(record: RunRecord) -> None:
    """The shell commands that re-run this run: one process, torchrun, multi-node, SLURM, Kubernetes."""
    from estimator_workbench.execution.reproduce import reproduce_commands

    commands = reproduce_commands(record, run_dir=get_registry().run_dir(record.run_id))
    st.caption("One process")
    st.code(commands["single"], language="bash")
    st.caption("Data parallel on this machine (torchrun)")
    st.code(commands["torchrun"], language="bash")
    st.caption("Several machines (run on every node; the workspace on shared storage)")
    st.code(commands["multi_node"], language="bash")
    with st.expander("SLURM and Kubernetes"):
        st.code(commands["slurm"], language="bash")
        st.code(commands["kubernetes"], language="yaml")
    if commands.get("notes"):
        st.caption(md(commands["notes"]))


def run_label(record: RunRecord, max_name: int = 28) -> str:
    """How an action button names its run: ``r-20260101-abc123 (iris mlp)``, the name cut to
    ``max_name`` characters, escaped for a label (``session.label``).

    Example:
        >>> run_label(record)                                   # doctest: +SKIP
        'r-20260101-abc123 (mlp_classifier on iris)'
    """
    name = record.name if len(record.name) <= max_name else record.name[:max_name - 1] + "…"
    return label(f"{record.run_id} ({name})")


def run_actions(record: RunRecord, key: str = "act") -> None:
    """Stop / Cancel / Resume / Delete buttons for one run, enabled by its status and by who may
    act on it (its owner or an admin: a disabled button says whose run it is), each naming the run
    it acts on ("Stop r-… (name)"). Cancel and Delete ask in a dialog first; Delete moves the run
    to the trash (restorable from the Runs page). Every action goes through
    ``execution.run_actions`` (checked again there, and written to the audit log).

    The launcher is fetched (and polled) only when a button is clicked: drawing the buttons reads
    nothing but ``record``, so a redraw of the Runs page never starts a queued run."""
    from estimator_workbench.execution import run_actions as act
    from estimator_workbench.store.audit import NotAllowedError, refusal

    actor = current_actor()
    c1, c2, c3, c4 = st.columns(4)
    active = record.status in ("queued", "running")
    why = {action: refusal(record, actor, action) for action in ("stop", "cancel", "resume", "trash")}
    which = run_label(record)
    origin = f"{key}-{record.run_id}"
    try:
        if c1.button(f"Stop {which}", key=f"{key}-stop-{record.run_id}", disabled=not active or bool(why["stop"]),
                     icon=":material/stop:", help=why["stop"] or "Graceful: checkpoint, then 'stopped' (resumable)."):
            act.stop(get_launcher(), record.run_id, actor)
            st.toast(f"Stop requested for {record.run_id}.")
        asked = False
        if c2.button(f"Cancel {which}", key=f"{key}-cancel-{record.run_id}", disabled=not active or bool(why["cancel"]),
                     icon=":material/cancel:",
                     help=why["cancel"] or "Asks first; then SIGTERM now, SIGKILL after a grace period."):
            confirm_cancel(record.run_id, record.name, origin=origin)
            asked = True
        if c3.button(f"Resume {which}", key=f"{key}-resume-{record.run_id}", icon=":material/play_arrow:",
                     disabled=active or record.action not in TRAINING_ACTIONS or bool(why["resume"]),
                     help=why["resume"] or "Continue from the last checkpoint in the same run."):
            act.resume(get_launcher(), record.run_id, actor)
            st.toast(f"Run {record.run_id} resumed.")
            st.rerun()
        if c4.button(f"Delete {which}", key=f"{key}-delete-{record.run_id}", disabled=active or bool(why["trash"]),
                     icon=":material/delete:",
                     help=why["trash"] or "Moves the run to the trash (asks first); cancel a queued or running run first."):
            confirm_trash([record.run_id], [record.name], origin=origin)
        elif not asked:
            confirmation_dialogs(origin)
    except (ValueError, RunNotFoundError, NotAllowedError) as exc:
        show_error(exc)


def bundle_bytes(run_id: str) -> Callable[[], bytes]:
    """A callable writing the run's reproducible zip (``cli.export_bundle``) and returning it."""
    def build() -> bytes:
        from estimator_workbench.execution.bundle import export_bundle

        return Path(export_bundle(workspace(), run_id)).read_bytes()

    return build


def _children(record: RunRecord, relation: str) -> list[RunRecord]:
    """The runs launched from ``record`` with ``relation`` (newest first)."""
    return [r for r in get_registry().list_runs(action=relation.split("_")[0])
            if r.parent_run_id == record.run_id and r.parent_relation == relation]


_CKPT_NAME = re.compile(r"^model\.ckpt-(\d+)$")


def checkpoint_step(path: str | os.PathLike[str] | None) -> int | None:
    """The global step in a checkpoint's file name (``.../model.ckpt-1500`` -> 1500), else None.

    Example:
        >>> checkpoint_step("runs/r-1/model/model.ckpt-1500"), checkpoint_step(None)
        (1500, None)
    """
    if not path:
        return None
    match = _CKPT_NAME.match(Path(str(path)).name)
    return int(match.group(1)) if match else None


def checkpoint_text(step: int | None) -> str:
    """How views name a checkpoint: ``checkpoint step 1500 (model.ckpt-1500)``.

    Example:
        >>> checkpoint_text(1500)
        'checkpoint step 1500 (model.ckpt-1500)'
    """
    return "an unknown checkpoint" if step is None else f"checkpoint step {step} (model.ckpt-{step})"


def mlflow_status(record: RunRecord) -> None:
    """One line saying where the run's MLflow mirror stands (``store.mlflow_state.describe``), with
    a link to the MLflow run once it is synced; nothing for a run that is not mirrored."""
    from estimator_workbench.store import mlflow_state

    state = mlflow_state.read_state(get_registry().run_dir(record.run_id))
    if state is None:
        return
    icon = {"synced": ":material/cloud_done:", "failed": ":material/cloud_off:"}.get(state.state,
                                                                                    ":material/cloud_upload:")
    line = mlflow_state.describe(state)
    if state.state == "pending" and record.is_active:
        line = f"MLflow: mirrored to {state.tracking_uri} once the run has finished."
    if state.state == "synced" and state.run_url:
        line = line.replace(state.run_url, f"[{state.run_url}]({state.run_url})")
    st.caption(f"{icon} {line}")


SERVE_PORT = 8501  # TF Serving's REST port, `serve`'s default


def serve_panel(record: RunRecord) -> None:
    """'Serve' (an expander keyed ``serve-<run id>``) for a finished training run: the command that
    serves its model over TF Serving's REST API and a curl ``:predict`` request with one row of its
    dataset in the row (``instances``) format. The UI starts no server itself: exporting runs the
    template, user code, which runs only in processes the analyst (or a runner) starts."""
    import json
    import shlex

    from estimator_workbench.data import datasets
    from estimator_workbench.serve.run_export import example_instance, read_task_info

    if record.action not in TRAINING_ACTIONS:
        return
    with st.expander("Serve", icon=":material/api:", key=f"serve-{record.run_id}"):
        if record.status not in ("succeeded", "stopped") or newest_checkpoint(record) is None:
            st.caption("A run that has finished training with a checkpoint can be served over TensorFlow "
                       f"Serving's REST API; this run is {md(display_status(record))}.")
            return
        command = (f"estimator-workbench --workspace {shlex.quote(str(workspace()))} serve {record.run_id} "
                   f"--port {SERVE_PORT}")
        st.caption("Serve the model (exported on first use) over TensorFlow Serving's REST API; existing TF "
                   "Serving clients work unchanged. Stop it with Ctrl-C.")
        st.code(command, language="bash")
        base = f"http://127.0.0.1:{SERVE_PORT}/v1/models/{record.run_id}"
        task = read_task_info(get_registry().run_dir(record.run_id))
        try:
            spec = datasets.DatasetSpec.from_dict(record.dataset)
            frame = load_dataset_frame(spec.path, **spec.read_options)
        except (ValueError, OSError, KeyError):
            frame = None
        if task is None or frame is None or not len(frame):
            st.caption(f"Then `POST {base}:predict` with `{{\"instances\": [...]}}`, one record of the "
                       "feature columns per row (the run's dataset cannot be read for an example).")
            return
        body = json.dumps({"instances": [example_instance(task, frame.iloc[0])]})
        st.caption("Predict the first row of the run's dataset (the row format, `instances`):")
        st.code(f"curl -s {base}:predict \\\n  -H 'Content-Type: application/json' -d {shlex.quote(body)}",
                language="bash")
        st.caption("The model's inputs and outputs (its signatures):")
        st.code(f"curl -s {base}/metadata", language="bash")


def newest_checkpoint(record: RunRecord) -> tuple[int, str] | None:
    """``(step, path)`` of the run's newest checkpoint file, None when it has none."""
    folder = get_registry().run_dir(record.run_id)
    ckpts = list_checkpoints(folder)
    if not len(ckpts):
        return None
    last = ckpts.iloc[-1]
    return int(last["step"]), str(folder / paths.MODEL_DIR / str(last["file"]))


def source_step(child: RunRecord, parent: RunRecord | None = None) -> int | None:
    """The checkpoint step an evaluate/predict run used: the one it was given, else (a run from
    the CLI or an older version, which used the parent's latest) the parent's newest checkpoint
    written before the child was created; None when that cannot be told."""
    step = checkpoint_step(child.checkpoint_path)
    if step is not None or parent is None:
        return step
    ckpts = list_checkpoints(get_registry().run_dir(parent.run_id))
    if not len(ckpts):
        return None
    written = pd.to_datetime(ckpts["written"]).map(lambda t: t.timestamp())
    before = ckpts.loc[written.to_numpy() <= child.created_at + 1e-3]
    return int(before["step"].iloc[-1]) if len(before) else None


def launch_from(record: RunRecord, action: str, checkpoint_path: str | None = None,
                dataset: Mapping[str, Any] | None = None, name: str | None = None,
                reuse: bool = True) -> RunRecord:
    """Launches an ``evaluate`` or ``predict`` run from ``record``'s model, on its dataset unless
    another is given, from ``checkpoint_path`` (default: the newest checkpoint, named explicitly
    so that the child's views can say which step they show).

    With ``reuse`` (the default) a queued or running child of the same action, checkpoint and
    dataset is returned instead of launching a duplicate (a double click, a second browser tab).
    """
    relation = {"evaluate": "evaluate_from", "predict": "predict_from"}[action]
    if checkpoint_path is None:
        newest = newest_checkpoint(record)
        checkpoint_path = newest[1] if newest else None
    dataset = dict(dataset if dataset is not None else record.dataset)
    if reuse:
        for child in _children(record, relation):
            if (child.is_active and child.checkpoint_path == checkpoint_path
                    and child.dataset.get("fingerprint") == dataset.get("fingerprint")
                    and child.dataset.get("ref") == dataset.get("ref")):
                return child
    step = checkpoint_step(checkpoint_path)
    return launch_run(
        name=name or f"{action} with {record.name}" + (f" @ step {step}" if step is not None else ""),
        action=action, dataset=dataset,
        template=record.template, params=record.params, run_config=record.run_config,
        # No pre-flight: the code already ran in the parent, and the check's TRAIN stage needs
        # labels that data to predict on usually lacks.
        schedule={k: v for k, v in record.schedule.items() if k in ("batch_size", "eval_steps")}
        | {"preflight": False},
        parent_run_id=record.run_id, parent_relation=relation, checkpoint_path=checkpoint_path)


def _open_run(run_id: str) -> None:
    """Shows run ``run_id`` on the run page at its next run. Called from a button's callback, i.e.
    before the page's run picker exists: its state may be set then (``st.switch_page`` to the
    same page kept the picker's old value, and the page never moved)."""
    st.session_state["run_picker"] = run_id
    set_selected_run(run_id)


def _launch_and_open(record: RunRecord, action: str, checkpoint_path: str) -> None:
    try:
        child = launch_from(record, action, checkpoint_path=checkpoint_path)
        if action == "evaluate" and record.action in MODEL_ACTIONS:
            # its Evaluation plots tab: the predictions of the same checkpoint (issue 28 item 6)
            launch_plots(record, checkpoint_path)
    except (ValueError, RunNotFoundError) as exc:
        st.session_state[f"_launch-error-{record.run_id}"] = str(exc)
        return
    _open_run(child.run_id)


def checkpoints_panel(record: RunRecord) -> None:
    """The run's checkpoints, with Evaluate / Predict from a chosen one: one click launches one
    run (a queued or running one for the same checkpoint is reused) and opens it."""
    folder = get_registry().run_dir(record.run_id)
    ckpts = list_checkpoints(folder)
    error = st.session_state.pop(f"_launch-error-{record.run_id}", None)
    if error:
        show_error(error)
    if not len(ckpts):
        st.caption("No checkpoints yet.")
        return
    show_table(ckpts, hide_index=True)
    files = ckpts["file"].tolist()
    chosen = st.selectbox("Checkpoint", files, index=len(files) - 1, key=f"ckpt-{record.run_id}",
                          format_func=lambda f: checkpoint_text(checkpoint_step(f)))
    path = str(folder / paths.MODEL_DIR / chosen)
    c1, c2 = st.columns(2)
    c1.button("Evaluate this checkpoint", key=f"ckpt-eval-{record.run_id}", on_click=_launch_and_open,
              args=(record, "evaluate", path), icon=":material/fact_check:")
    c2.button("Predict with this checkpoint", key=f"ckpt-pred-{record.run_id}", on_click=_launch_and_open,
              args=(record, "predict", path), icon=":material/batch_prediction:")


def _plots_children(model: RunRecord, dataset: Mapping[str, Any]) -> list[RunRecord]:
    """The predict runs of ``model`` on ``dataset`` (same fingerprint): the evaluation plots' data."""
    return [c for c in _children(model, "predict_from")
            if c.dataset.get("fingerprint") == dataset.get("fingerprint")]


def launch_plots(record: RunRecord, checkpoint_path: str,
                  dataset: Mapping[str, Any] | None = None) -> RunRecord | None:
    """The predict run that draws the evaluation plots of ``record``'s checkpoint on ``dataset``
    (default: the run's own); one that succeeded already, or is under way, is returned instead."""
    step = checkpoint_step(checkpoint_path)
    dataset = dict(dataset if dataset is not None else record.dataset)
    for child in _plots_children(record, dataset):
        if child.status == "succeeded" and source_step(child, record) == step and step is not None:
            return child
    try:
        return launch_from(record, "predict", checkpoint_path=checkpoint_path, dataset=dataset,
                           name=f"eval plots of {record.name} @ step {step}")
    except (ValueError, RunNotFoundError) as exc:
        show_error(exc, prefix="The evaluation plots cannot be computed: ")
        return None


def _plots_target(record: RunRecord) -> tuple[RunRecord, dict[str, Any], str | None] | str:
    """What the plots of the run page's ``record`` show: ``(model run, dataset, checkpoint path)``
    (path None: follow the newest checkpoint), or why there are none.

    A training run shows the checkpoint chosen in its Checkpoints tab (the newest by default); an
    evaluate run shows the checkpoint it evaluated, on its own dataset (issue 28 item 6)."""
    if record.action in MODEL_ACTIONS:
        folder = get_registry().run_dir(record.run_id) / paths.MODEL_DIR
        chosen = st.session_state.get(f"ckpt-{record.run_id}")  # the Checkpoints tab, drawn before
        newest = newest_checkpoint(record)
        if chosen and (newest is None or checkpoint_step(chosen) != newest[0]) and (folder / str(chosen)).exists():
            return record, dict(record.dataset), str(folder / str(chosen))
        return record, dict(record.dataset), None
    if record.action == "evaluate" and record.parent_run_id:
        try:
            parent = get_registry().get(record.parent_run_id)
        except RunNotFoundError:
            return f"The run this evaluation used ({record.parent_run_id}) no longer exists."
        path = record.checkpoint_path
        step = source_step(record, parent)
        if path is None and step is not None:
            path = str(get_registry().run_dir(parent.run_id) / paths.MODEL_DIR / f"model.ckpt-{step}")
        if path is None:
            return "The checkpoint this evaluation used cannot be told."
        return parent, dict(record.dataset), path
    return "Evaluation plots are drawn for training runs, TensorFlow imports and evaluate runs."


def evaluation_plots(record: RunRecord, interval: float = 2.0) -> None:
    """Confusion matrix and ROC/PR curves (classifiers) or residuals (regressors) on the run's
    evaluation split, from a predict run of one of its checkpoints (the UI never loads a model).

    Any checkpoint: the one chosen in the Checkpoints tab (issue 28 item 6; computed on a click),
    and for an evaluate run the checkpoint it evaluated. By default the newest: the view names the
    checkpoint step it shows. When the run has a newer checkpoint (a resume, more training) it says
    the plots are out of date and, once the run is not training, recomputes them in a runner
    automatically, once per new checkpoint (the registry's children are the record: a failed
    recomputation is offered again as a button, not relaunched in a loop). The panel refreshes
    itself (``st.fragment``) while the run or its predict run is active."""
    target = _plots_target(record)
    if isinstance(target, str):
        st.caption(target)
        return
    model, dataset, fixed = target
    registry = get_registry()

    def state() -> tuple[RunRecord, list[RunRecord]]:
        current = registry.get(model.run_id)
        return current, _plots_children(current, dataset)

    first, kids = state()
    newest = newest_checkpoint(first)
    shown_steps = {source_step(c, first) for c in kids if c.status == "succeeded"}
    stale = fixed is None and newest is not None and bool(shown_steps) and newest[0] not in shown_steps
    # Poll while something will change: the run trains, a predict run works, or stale plots are
    # about to be recomputed (the launch happens inside the panel).
    every = interval if first.is_active or any(c.is_active for c in kids) or stale else None

    @st.fragment(run_every=every)
    def _panel() -> None:
        current, children = state() if every is not None else (first, kids)
        if fixed is None:
            _evaluation_plots(current, children, key=record.run_id)
        else:
            _checkpoint_plots(current, children, fixed, dataset, key=record.run_id)

    _panel()


def _checkpoint_plots(model: RunRecord, kids: list[RunRecord], checkpoint_path: str,
                      dataset: Mapping[str, Any], key: str) -> None:
    """The plots of one given checkpoint of ``model``: computed on a click, then shown."""
    step = checkpoint_step(checkpoint_path)
    at_step = [c for c in kids if source_step(c, model) == step]
    done = sorted((c for c in at_step if c.status == "succeeded"), key=lambda c: c.created_at, reverse=True)
    if done:
        _draw_plots(model, dataset, done[0], step, key)
        return
    pending = [c for c in at_step if c.is_active]
    if pending:
        st.info(f"Predicting with {checkpoint_text(step)} (run {pending[0].run_id})… the plots appear when "
                "it ends.", icon=":material/hourglass_top:")
        return
    failed = [c for c in at_step if c.is_finished]
    if failed:
        st.warning(f"Computing the plots of {checkpoint_text(step)} failed (run {failed[0].run_id}).",
                   icon=":material/error:")
    st.caption(f"No evaluation plots of {checkpoint_text(step)} yet.")
    if st.button(f"Compute evaluation plots of step {step}", key=f"evalplots-step-{key}",
                 icon=":material/insights:",
                 help="Runs predict on the dataset in a runner process, from this checkpoint."):
        if launch_plots(model, checkpoint_path, dataset) is not None:
            st.rerun()  # a click, not a timer: the page re-registers this panel to poll


def _evaluation_plots(record: RunRecord, kids: list[RunRecord], key: str | None = None) -> None:
    newest = newest_checkpoint(record)
    newest_step = newest[0] if newest else None
    steps = {c.run_id: source_step(c, record) for c in kids}
    done = sorted((c for c in kids if c.status == "succeeded"),
                  key=lambda c: (steps[c.run_id] if steps[c.run_id] is not None else -1, c.created_at), reverse=True)
    for_newest = [c for c in kids if newest_step is not None and steps[c.run_id] == newest_step]
    pending = [c for c in for_newest if c.is_active] or [c for c in kids if c.is_active]
    shown = next((c for c in done if steps[c.run_id] == newest_step), done[0] if done else None)
    if shown is None:
        if pending:
            st.info(f"Predicting with {checkpoint_text(steps[pending[0].run_id])} (run {pending[0].run_id})… "
                    "the plots appear when it ends.", icon=":material/hourglass_top:")
        elif st.button("Compute evaluation plots", key=f"evalplots-{record.run_id}",
                       disabled=not record.is_finished or newest is None,
                       help="Runs predict on the dataset in a runner process, from the newest checkpoint."):
            if newest is not None and launch_plots(record, newest[1]) is not None:
                st.rerun()  # a click, not a timer: the page re-registers this panel to poll
        return
    shown_step = steps[shown.run_id]
    if newest_step is not None and shown_step != newest_step:
        stale = (f"Out of date: these plots come from {checkpoint_text(shown_step)}; the run's newest is "
                 f"{checkpoint_text(newest_step)}.")
        failed = [c for c in for_newest if c.status != "succeeded" and not c.is_active]
        if pending:
            st.warning(f"{stale} Recomputing in run {pending[0].run_id}…", icon=":material/update:")
        elif record.is_active:
            st.warning(f"{stale} They are recomputed when training ends.", icon=":material/update:")
        elif failed:
            st.warning(f"{stale} Recomputing failed (run {failed[0].run_id}).", icon=":material/update:")
            if st.button("Recompute evaluation plots", key=f"evalplots-again-{record.run_id}"):
                if launch_plots(record, newest[1]) is not None:
                    st.rerun()
        else:  # once per new checkpoint: the child launched now is found on the next render
            child = launch_plots(record, newest[1])
            if child is not None:
                st.warning(f"{stale} Recomputing in run {child.run_id}…", icon=":material/update:")
    _draw_plots(record, record.dataset, shown, shown_step, key or record.run_id)


@dataclasses.dataclass(frozen=True)
class EvaluationRows:
    """The evaluation split's labels and the predictions for those rows.

    Example:
        >>> rows = evaluation_rows(record.dataset, predictions_frame(child.run_id))  # doctest: +SKIP
        >>> rows.task, len(rows.y) == len(rows.predictions)                          # doctest: +SKIP
        ('classification', True)
    """

    task: str
    y: np.ndarray  # class ids (classification) or values (regression)
    predictions: pd.DataFrame  # the rows of the predictions file for the evaluation split
    class_names: list[str]


def evaluation_rows(dataset: Mapping[str, Any], preds: pd.DataFrame | None) -> EvaluationRows:
    """The evaluation rows of ``dataset`` with their predictions (a predict run's whole-dataset
    output); ``ValueError`` saying why when they cannot be lined up."""
    from estimator_workbench.data import datasets

    spec = datasets.DatasetSpec.from_dict(dataset)
    try:
        df = load_dataset_frame(spec.path, **spec.read_options)
    except OSError as exc:
        raise ValueError(f"The run's dataset cannot be read: {exc}") from None
    if preds is None or len(preds) != len(df):
        raise ValueError("The predictions do not line up with the dataset rows.")
    _, eval_df = datasets.split(df, spec)
    rows = df.index.get_indexer(eval_df.index) if len(eval_df) else np.arange(len(df))
    label = spec.schema.label
    part = preds.iloc[rows]
    if spec.task == "classification":
        info = datasets.task_info(df, spec)
        return EvaluationRows("classification", datasets.encode_labels(df[label].iloc[rows], info), part,
                              [str(n) for n in info["label_vocabulary"]])
    return EvaluationRows(spec.task, pd.to_numeric(df[label].iloc[rows], errors="coerce").to_numpy(), part, [])


def plots_source(record: RunRecord) -> tuple[RunRecord, int | None] | None:
    """The predict run whose output the evaluation plots of ``record`` (a training run) draw, for
    its newest checkpoint (else its newest finished one), with that checkpoint's step."""
    kids = _plots_children(record, record.dataset)
    steps = {c.run_id: source_step(c, record) for c in kids}
    done = sorted((c for c in kids if c.status == "succeeded"),
                  key=lambda c: (steps[c.run_id] if steps[c.run_id] is not None else -1, c.created_at), reverse=True)
    return (done[0], steps[done[0].run_id]) if done else None


def _draw_plots(record: RunRecord, dataset: Mapping[str, Any], shown: RunRecord, shown_step: int | None,
                key: str) -> None:
    """The figures from the predictions of run ``shown`` on the evaluation rows of ``dataset``."""
    try:
        rows = evaluation_rows(dataset, predictions_frame(shown.run_id))
    except ValueError as exc:
        show_error(exc, level="warning")
        return
    part = rows.predictions
    with st.container(key=f"eval-source-{key}"):
        st.caption(f"{len(part)} evaluation rows · from {checkpoint_text(shown_step)} · "
                   f"predictions of run {shown.run_id}")
    if rows.task == "classification" and "class_ids" in part.columns:
        names = rows.class_names
        matrix = figures.confusion_matrix(rows.y, part["class_ids"].to_numpy(), len(names))
        normalize = st.toggle("Normalise rows", key=f"cm-norm-{key}")
        st.plotly_chart(figures.confusion_matrix_figure(matrix, names, normalize=normalize),
                        key=f"cm-{key}")
        prob_cols = probability_columns(part)
        if len(prob_cols) == len(names):
            st.plotly_chart(figures.roc_pr_figure(rows.y, part[prob_cols].to_numpy(), names), key=f"roc-{key}")
    elif rows.task == "regression":
        column = next((c for c in ("predictions", "prediction", "predictions_0") if c in part.columns), None)
        if column is None:
            st.caption("No numeric prediction column found.")
            return
        st.plotly_chart(figures.residuals_figure(rows.y, part[column].to_numpy()), key=f"res-{key}")


def prediction_dataset(base: Any, upload_name: str | None, upload_bytes: bytes | None, *,
                       typed_row: bool = False) -> dict[str, Any]:
    """The dataset dict of a predict run: the training run's own (``upload_bytes`` None) or an
    uploaded file with the training roles (columns the file lacks, e.g. the label, are dropped).
    A ``typed_row`` (the Single row tab) is kept as the run's input, not stored as an upload."""
    from estimator_workbench.data import datasets
    from estimator_workbench.data.sources import PREDICT_INPUTS_DIR, UPLOADS_DIR

    if upload_bytes is None:
        spec = base
    else:
        with st.spinner("Checking the file…"):
            path = datasets.save_upload(workspace(), upload_name or "upload.csv", upload_bytes,
                                        owner=current_actor().name,
                                        folder_name=PREDICT_INPUTS_DIR if typed_row else UPLOADS_DIR)
            df = load_dataset_frame(path)
        try:
            spec = datasets.prediction_spec(base, {"kind": "file", "path": str(path)}, df)
        except ValueError as exc:
            raise ValueError(f"The file {upload_name!r}: {exc}") from None
    return spec.to_dict() | {"fingerprint": spec.fingerprint()}


def single_prediction(preds: pd.DataFrame) -> None:
    """The first row of a predictions table, readable at a glance: the predicted class and one
    probability per class (classifiers) or the predicted value (regressors).

    ``st.metric`` and ``st.table`` render markdown, so class names (user data) are escaped."""
    row = preds.iloc[0]
    prob_cols = probability_columns(preds)
    value_col = next((c for c in ("class", "class_ids", "predictions", "prediction", "predictions_0")
                      if c in preds.columns), None)
    if value_col is None:
        return
    with st.container(key="single-prediction"):
        c1, c2 = st.columns([1, 2])
        value = row[value_col]
        shown = f"{value:.6g}" if isinstance(value, float) else str(value)
        c1.metric("Predicted class" if value_col.startswith("class") else "Prediction", md(shown))
        if prob_cols:
            names = [str(c).split("_", 1)[1] for c in prob_cols]
            c2.table(pd.DataFrame({"class": [md(n) for n in names],
                                   "probability": [f"{float(row[c]):.4f}" for c in prob_cols]}),
                     hide_index=True)
