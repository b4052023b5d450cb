"""Live fragments: metric charts and a prediction's result, refreshed with
``st.fragment(run_every=...)`` while a run is going."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from workbench.store import metrics_store, paths
from workbench.store.records import RunNotFoundError, RunRecord
from workbench.ui import figures
from workbench.ui.panels import single_prediction, status_badge
from workbench.ui.session import (
    get_launcher,
    get_registry,
    page_link,
    predictions_frame,
    show_error,
    workspace,
)

__all__ = ['FIRST_POINT_INTERVAL_S', 'LIVE_INTERVAL_S', 'MAX_POINTS', 'chart_controls', 'live_metrics', 'prediction_result']


LIVE_INTERVAL_S = 1.0


FIRST_POINT_INTERVAL_S = 0.25  # a run just launched: poll faster until its first metric line


MAX_POINTS = 2000


def chart_controls(key: str = "chart") -> dict[str, Any]:
    """Smoothing slider, x-axis choice and log-scale toggle (shared by the run and compare pages)."""
    c1, c2, c3 = st.columns([2, 2, 1])
    smoothing = c1.slider("Smoothing", 0.0, 0.99, 0.0, 0.01, key=f"{key}-smooth",
                          help="TensorBoard's debiased exponential moving average.")
    x_axis = c2.radio("X axis", figures.X_AXES, horizontal=True, key=f"{key}-x",
                      format_func={"step": "Step", "relative": "Relative", "wall": "Wall"}.get)
    log_y = c3.toggle("Log scale", key=f"{key}-log")
    return {"smoothing": smoothing, "x_axis": x_axis, "log_y": log_y}


class _LiveState:
    """Per session and run: the metrics tail (byte offset) and the rows read so far."""

    def __init__(self, path: Path) -> None:
        self.tail = metrics_store.MetricsTail(path)
        self.frame = metrics_store.rows_to_frame([])

    def update(self) -> int:
        generation = self.tail.generation
        new = self.tail.read_frame()
        if self.tail.generation != generation:  # the file was replaced (a resume dropped rows)
            self.frame = new
        elif len(new):
            self.frame = new if not len(self.frame) else pd.concat([self.frame, new], ignore_index=True)
        return len(new)


def _live_state(run_id: str) -> _LiveState:
    key = f"_live-{run_id}"
    state = st.session_state.get(key)
    if state is None:
        state = _LiveState(paths.run_dir(workspace(), run_id) / paths.METRICS_FILE)
        st.session_state[key] = state
    return state


def _progress(record: RunRecord, frame: pd.DataFrame) -> tuple[int, int | None]:
    total = record.schedule.get("max_steps") or record.schedule.get("steps")
    step = int(frame["step"].max()) if len(frame) and frame["step"].notna().any() else 0
    return step, (int(total) if total else None)


def live_metrics(run_id: str, controls: Mapping[str, Any], interval: float = LIVE_INTERVAL_S) -> None:
    """Status, progress and the loss/metric chart of a run, refreshed every ``interval`` seconds
    while the run is queued or running (``st.fragment(run_every=...)``), static once it ended.

    Only new lines of ``metrics.jsonl`` are read each tick (byte offset), long series are
    downsampled to ``MAX_POINTS`` per series, and the chart keeps one key so the browser updates
    it in place."""
    registry = get_registry()
    try:
        first = registry.get(run_id)
    except RunNotFoundError:
        st.warning(f"Run {run_id!r} no longer exists.")
        return
    # Until the first points arrive (a run just launched) the panel polls every
    # FIRST_POINT_INTERVAL_S, so the chart appears as soon as the runner writes; then a page
    # rerun re-registers it at ``interval``.
    state = _live_state(run_id)
    state.update()  # (a run opened mid-way has points already: no fast poll, no extra rerun)
    waiting = first.is_active and not len(state.frame)
    every = (min(interval, FIRST_POINT_INTERVAL_S) if waiting else interval) if first.is_active else None

    @st.fragment(run_every=every)
    def _panel() -> None:
        if every is not None:
            get_launcher()  # poll: reap the runner when it exits, start queued runs
        try:
            record = registry.get(run_id)
        except RunNotFoundError:
            st.warning(f"Run {run_id!r} no longer exists.")
            return
        state.update()
        step, total = _progress(record, state.frame)
        c1, c2 = st.columns([1, 4])
        with c1:
            status_badge(record)
        with c2:
            if total:
                st.progress(min(1.0, step / total), text=f"step {step} / {total}")
            else:
                st.caption(f"step {step}")
        if record.error and record.status in ("failed", "lost", "cancelled", "stopped"):
            # 'stopped' with an error: nan_policy 'stop' ended it on a NaN loss (a warning)
            show_error(record.error, level="warning" if record.status == "stopped" else "error")
        frame = metrics_store.downsample(state.frame, MAX_POINTS) if len(state.frame) else state.frame
        fig = figures.curves_figure(frame, **controls)
        st.plotly_chart(fig, key=f"curves-{run_id}", config={"displaylogo": False})
        if every is not None and (record.is_finished or (waiting and len(state.frame))):
            st.rerun()  # the whole page: re-registers this fragment at its next pace

    _panel()


def prediction_result(run_id: str, interval: float = LIVE_INTERVAL_S) -> None:
    """Status of a predict run while it works (polling fragment), then a preview of its
    ``predictions.csv`` and a download button (the file is read only when clicked)."""
    registry = get_registry()
    try:
        first = registry.get(run_id)
    except RunNotFoundError:
        return
    every = interval if first.is_active else None

    @st.fragment(run_every=every)
    def _panel() -> None:
        if every is not None:
            get_launcher()
        record = registry.get(run_id)
        if record.is_active:
            st.info(f"Predicting… run {run_id} is {record.status}.", icon=":material/hourglass_top:")
            return
        if every is not None:
            st.rerun()
        if record.status != "succeeded":
            show_error(record.error or "see its worker log", prefix=f"Run {run_id} {record.status}: ")
            page_link("run", "Open the run", run_id=run_id)
            return
        preds = predictions_frame(run_id)
        if preds is None:
            st.error(f"Run {run_id} wrote no predictions file.")
            return
        st.success(f"{len(preds):,} predictions · {preds.shape[1]} columns (run {run_id})")
        if len(preds) == 1:
            single_prediction(preds)
        st.dataframe(preds.head(100), hide_index=True)
        path = paths.run_dir(workspace(), run_id) / paths.PREDICTIONS_FILE
        st.download_button("Download predictions CSV", data=lambda: path.read_bytes(),
                           file_name=f"predictions-{run_id}.csv", mime="text/csv", on_click="ignore",
                           icon=":material/download:", key=f"dl-{run_id}")

    _panel()
