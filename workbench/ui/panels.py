"""Panels of the run and predict pages: status badge, run actions (stop, cancel, resume, ...),
reproduce commands and bundle, checkpoints, evaluation plots, and prediction inputs/results."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import streamlit as st

from workbench.store import paths
from workbench.store.records import TRAINING_ACTIONS, RunNotFoundError, RunRecord
from workbench.ui import figures
from workbench.ui.forms import launch_run
from workbench.ui.session import (
    get_launcher,
    get_registry,
    load_dataset_frame,
    md,
    predictions_frame,
    set_selected_run,
    show_error,
    switch_to,
    workspace,
)
from workbench.ui.tables import (
    _STATUS_COLOURS,
    STATUS_ICONS,
    _probability_columns,
    list_checkpoints,
)

__all__ = ['bundle_bytes', 'checkpoints_panel', 'evaluation_plots', 'launch_from', 'prediction_dataset', 'reproduce_panel', 'run_actions', 'single_prediction', 'status_badge']


def status_badge(record: RunRecord) -> None:
    """A coloured badge with the run's status (in a container keyed ``status-<run id>``)."""
    colour = _STATUS_COLOURS.get(record.status, "gray")
    with st.container(key=f"status-{record.run_id}"):
        st.badge(record.status, icon=STATUS_ICONS.get(record.status), color=colour)


def reproduce_panel(record: RunRecord) -> None:
    """The shell commands that re-run this run: one process, torchrun, multi-node, SLURM, Kubernetes."""
    from workbench.execution.reproduce import reproduce_commands

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


def run_actions(record: RunRecord, key: str = "act") -> None:
    """Stop / Cancel / Resume / Delete buttons for one run, enabled by its status."""
    launcher = get_launcher()
    c1, c2, c3, c4 = st.columns(4)
    active = record.status in ("queued", "running")
    try:
        if c1.button("Stop", key=f"{key}-stop-{record.run_id}", disabled=not active, icon=":material/stop:",
                     help="Graceful: checkpoint, then 'stopped' (resumable)."):
            launcher.stop(record.run_id)
            st.toast(f"Stop requested for {record.run_id}.")
        if c2.button("Cancel", key=f"{key}-cancel-{record.run_id}", disabled=not active, icon=":material/cancel:",
                     help="SIGTERM now, SIGKILL after a grace period."):
            launcher.cancel(record.run_id, grace=5.0, wait=False)  # SIGKILL later, in the background
            st.toast(f"Cancel sent to {record.run_id}: it ends once its processes are gone.")
            st.rerun()
        if c3.button("Resume", key=f"{key}-resume-{record.run_id}", icon=":material/play_arrow:",
                     disabled=active or record.action not in TRAINING_ACTIONS,
                     help="Continue from the last checkpoint in the same run."):
            launcher.resume(record.run_id)
            st.toast(f"Run {record.run_id} resumed.")
            st.rerun()
        if c4.button("Delete", key=f"{key}-delete-{record.run_id}", disabled=active, icon=":material/delete:"):
            get_registry().delete(record.run_id)
            set_selected_run(None)
            st.toast(f"Run {record.run_id} deleted.")
            st.rerun()
    except (ValueError, RunNotFoundError) as exc:
        show_error(exc)


def bundle_bytes(run_id: str) -> Callable[[], bytes]:
    """A callable writing the run's reproducible zip (``cli.export_bundle``) and returning it."""
    def build() -> bytes:
        from workbench.execution.bundle import export_bundle

        return Path(export_bundle(workspace(), run_id)).read_bytes()

    return build


def _children(record: RunRecord, relation: str) -> list[RunRecord]:
    return [r for r in get_registry().list_runs(action=relation.split("_")[0])
            if r.parent_run_id == record.run_id and r.parent_relation == relation]


def launch_from(record: RunRecord, action: str, checkpoint_path: str | None = None,
                dataset: Mapping[str, Any] | None = None, name: str | None = None) -> RunRecord:
    """Launches an ``evaluate`` or ``predict`` run from ``record``'s model (latest checkpoint by
    default), on its dataset unless another is given."""
    relation = {"evaluate": "evaluate_from", "predict": "predict_from"}[action]
    return launch_run(
        name=name or f"{action} with {record.name}", action=action,
        dataset=dataset if dataset is not None else record.dataset,
        template=record.template, params=record.params, run_config=record.run_config,
        # No pre-flight: the code already ran in the parent, and the check's TRAIN stage needs
        # labels that data to predict on usually lacks.
        schedule={k: v for k, v in record.schedule.items() if k in ("batch_size", "eval_steps")}
        | {"preflight": False},
        parent_run_id=record.run_id, parent_relation=relation, checkpoint_path=checkpoint_path)


def checkpoints_panel(record: RunRecord) -> None:
    """The run's checkpoints, with Evaluate / Predict from a chosen one."""
    folder = get_registry().run_dir(record.run_id)
    ckpts = list_checkpoints(folder)
    if not len(ckpts):
        st.caption("No checkpoints yet.")
        return
    st.dataframe(ckpts, hide_index=True)
    files = ckpts["file"].tolist()
    chosen = st.selectbox("Checkpoint", files, index=len(files) - 1, key=f"ckpt-{record.run_id}")
    path = str(folder / paths.MODEL_DIR / chosen)
    c1, c2 = st.columns(2)
    if c1.button("Evaluate this checkpoint", key=f"ckpt-eval-{record.run_id}"):
        child = launch_from(record, "evaluate", checkpoint_path=path)
        switch_to("run", child.run_id)
    if c2.button("Predict with this checkpoint", key=f"ckpt-pred-{record.run_id}"):
        child = launch_from(record, "predict", checkpoint_path=path)
        switch_to("run", child.run_id)


def evaluation_plots(record: RunRecord) -> None:
    """Confusion matrix and ROC/PR curves (classifiers) or residuals (regressors) on the run's
    evaluation split, from a predict run of its model (launched on demand: the UI never loads
    the model itself)."""
    from workbench.data import datasets

    if record.action not in TRAINING_ACTIONS:
        st.caption("Evaluation plots are drawn for training runs.")
        return
    done = [c for c in _children(record, "predict_from")
            if c.status == "succeeded" and c.dataset.get("fingerprint") == record.dataset.get("fingerprint")]
    pending = [c for c in _children(record, "predict_from") if c.is_active]
    if not done:
        if pending:
            st.info(f"Predicting with the model (run {pending[0].run_id})… reload the tab when it ends.")
        elif st.button("Compute evaluation plots", key=f"evalplots-{record.run_id}",
                       disabled=not record.is_finished, help="Runs predict on the dataset in a runner process."):
            launch_from(record, "predict", name=f"eval plots of {record.name}")
            st.rerun()
        return
    preds = predictions_frame(done[0].run_id)
    try:
        spec = datasets.DatasetSpec.from_dict(record.dataset)
        df = load_dataset_frame(spec.path)
    except (ValueError, OSError) as exc:
        show_error(exc, level="warning", prefix="The run's dataset cannot be read: ")
        return
    if preds is None or len(preds) != len(df):
        st.warning("The predictions do not line up with the dataset rows.")
        return
    _, eval_df = datasets.split(df, spec)
    rows = df.index.get_indexer(eval_df.index) if len(eval_df) else np.arange(len(df))
    label = spec.schema.label
    info = datasets.task_info(df, spec)
    part = preds.iloc[rows]
    st.caption(f"{len(rows)} evaluation rows · predictions from run {done[0].run_id}")
    if spec.task == "classification" and "class_ids" in preds.columns:
        y = datasets.encode_labels(df[label].iloc[rows], info)
        names = info["label_vocabulary"]
        matrix = figures.confusion_matrix(y, part["class_ids"].to_numpy(), len(names))
        normalize = st.toggle("Normalise rows", key=f"cm-norm-{record.run_id}")
        st.plotly_chart(figures.confusion_matrix_figure(matrix, names, normalize=normalize),
                        key=f"cm-{record.run_id}")
        prob_cols = _probability_columns(preds)
        if len(prob_cols) == len(names):
            st.plotly_chart(figures.roc_pr_figure(y, part[prob_cols].to_numpy(), names), key=f"roc-{record.run_id}")
    elif spec.task == "regression":
        column = next((c for c in ("predictions", "prediction", "predictions_0") if c in preds.columns), None)
        if column is None:
            st.caption("No numeric prediction column found.")
            return
        y = pd.to_numeric(df[label].iloc[rows], errors="coerce").to_numpy()
        st.plotly_chart(figures.residuals_figure(y, part[column].to_numpy()), key=f"res-{record.run_id}")


def prediction_dataset(base: Any, upload_name: str | None, upload_bytes: bytes | None) -> dict[str, Any]:
    """The dataset dict of a predict run: the training run's own (``upload_bytes`` None) or an
    uploaded file with the training roles (columns the file lacks, e.g. the label, are dropped)."""
    from workbench.data import datasets

    if upload_bytes is None:
        spec = base
    else:
        with st.spinner("Checking the file…"):
            path = datasets.save_upload(workspace(), upload_name or "upload.csv", upload_bytes)
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
    prob_cols = _probability_columns(preds)
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
