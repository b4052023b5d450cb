"""Live fragments: metric charts and a prediction's result, refreshed with
``st.fragment(run_every=...)`` while a run is going."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from estimator_workbench.execution.system_metrics import SYSTEM_SPLIT
from estimator_workbench.store import metrics_store, paths
from estimator_workbench.store.records import RunNotFoundError, RunRecord
from estimator_workbench.ui import figures
from estimator_workbench.ui.panels import (
    checkpoint_text,
    single_prediction,
    source_step,
    status_badge,
)
from estimator_workbench.ui.session import (
    get_launcher,
    get_registry,
    page_link,
    plural,
    predictions_frame,
    show_error,
    show_table,
    workspace,
)
from estimator_workbench.ui.tables import summary_frame

__all__ = ['FIRST_POINT_INTERVAL_S', 'FIRST_POINT_WAIT_S', 'LIVE_INTERVAL_S', 'MAX_POINTS', 'chart_controls', 'evaluation_table', 'live_metrics', 'metrics_summary', 'prediction_result']


LIVE_INTERVAL_S = 1.0


FIRST_POINT_INTERVAL_S = 0.25  # a run just launched: poll faster until its first metric line


FIRST_POINT_WAIT_S = 2.0  # a run started this recently: the page's first render waits for its first line


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
        self._figure: tuple[Any, Any] | None = None  # (key: rows read + controls, figure)

    def figure(self, controls: Mapping[str, Any]) -> Any:
        """The curves figure, rebuilt only when rows arrived or a control changed (the system
        metrics have their own, ``system_figure``)."""
        key = (len(self.frame), self.tail.generation, tuple(sorted(controls.items())))
        if self._figure is None or self._figure[0] != key:
            frame = self.frame[self.frame["split"] != SYSTEM_SPLIT] if len(self.frame) else self.frame
            frame = metrics_store.downsample(frame, MAX_POINTS) if len(frame) else frame
            self._figure = (key, figures.curves_figure(frame, **controls))
        return self._figure[1]

    def system_figure(self, x_axis: str) -> Any | None:
        """CPU, memory and GPU memory of the run's processes over time (None before a sample)."""
        if not len(self.frame):
            return None
        frame = self.frame[self.frame["split"] == SYSTEM_SPLIT]
        if not len(frame):
            return None
        return figures.curves_figure(metrics_store.downsample(frame, MAX_POINTS), x_axis=x_axis, columns=4,
                                     height_per_row=220)

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


def _wait_for_first_line(record: RunRecord, state: _LiveState, wait_s: float = FIRST_POINT_WAIT_S, *,
                         still_running: Callable[[], bool] | None = None,
                         on_end: Callable[[], Any] = get_launcher) -> None:
    """The page opened right after a launch (the Train button switches to it) waits, at most until
    ``wait_s`` after the run started, for the run's first metric line, so the chart is drawn with
    it rather than empty and then filled by a timer tick. Only a run that started that recently and
    has no points yet waits: other pages, queued runs and runs opened later never do. A run that
    ends meanwhile (a failed pre-flight) ends the wait, and ``on_end`` (the launcher's poll) reaps
    its runner, as the live panel's next tick would."""
    if record.status != "running" or record.started_at is None or len(state.frame):
        return
    if still_running is None:
        registry = get_registry()

        def still_running() -> bool:
            try:
                return registry.get(record.run_id).status == "running"
            except RunNotFoundError:
                return False

    deadline = record.started_at + wait_s
    polls = 0
    while time.time() < deadline and not state.update():
        polls += 1
        if polls % 4 == 0 and not still_running():  # every 0.2 s
            on_end()
            return
        time.sleep(0.05)


def live_metrics(run_id: str, controls: Mapping[str, Any], interval: float = LIVE_INTERVAL_S) -> None:
    """Status, progress and the loss/metric chart of a run, refreshed every ``interval`` seconds
    while the run is queued or running (``st.fragment(run_every=...)``), static once it ended.

    Only new lines of ``metrics.jsonl`` are read each tick (byte offset), long series are
    downsampled to ``MAX_POINTS`` per series, and the chart keeps one key so the browser updates
    it in place.

    A tick reruns the page only once, when the run has ended (the controls outside this panel,
    Stop/Resume and the like, follow its new status). It no longer reruns it when the first points
    arrive, about a second after a launch while the page may still be drawing: that timer-fired
    rerun is the suspected cause of run pages seen without their tabs (issue 15, item 3). A run
    opened before its first point keeps polling at ``FIRST_POINT_INTERVAL_S`` until then; the
    figure is rebuilt only when rows arrived or a control changed."""
    registry = get_registry()
    try:
        first = registry.get(run_id)
    except RunNotFoundError:
        st.warning(f"Run {run_id!r} no longer exists.")
        return
    state = _live_state(run_id)
    state.update()  # (a run opened mid-way has points already: no fast poll)
    _wait_for_first_line(first, state)
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
        table = evaluation_table(state.frame) if record.action == "evaluate" else None
        if table is not None:  # one evaluation: its values, not one-point line charts (issue 28 item 6)
            steps = sorted({int(s) for s in state.frame["step"].dropna()})
            st.caption(f"Evaluation at step {', '.join(map(str, steps))}" if steps else "Evaluation")
            st.dataframe(table, hide_index=True, key=f"eval-table-{run_id}",
                         column_config={"value": st.column_config.NumberColumn("value", format="%.4g")})
        else:
            st.plotly_chart(state.figure(controls), key=f"curves-{run_id}", config={"displaylogo": False})
        system = state.system_figure(str(controls.get("x_axis", "step")))
        if system is not None:  # sampled by the runner at a low rate (issue 28 item 10)
            st.caption("System: the run's processes (CPU: 100 % = one core), the machine's memory in use, "
                       "GPU memory when the run uses CUDA")
            st.plotly_chart(system, key=f"system-{run_id}", config={"displaylogo": False})
        if every is not None and record.is_finished:
            st.rerun()  # once, at the end of the run: the page outside this panel follows its status

    _panel()


def evaluation_table(frame: pd.DataFrame) -> pd.DataFrame | None:
    """The metrics of an evaluate run as a table (split, metric, value, step), one row per metric
    at its last step; None while nothing is logged.

    Example:
        >>> rows = [{"step": 7600, "wall_time": 1.0, "split": "eval", "name": "accuracy", "value": 0.9}]
        >>> evaluation_table(metrics_store.rows_to_frame(rows)).to_dict("records")
        [{'split': 'eval', 'metric': 'accuracy', 'value': 0.9, 'step': 7600}]
    """
    frame = frame[frame["split"] != SYSTEM_SPLIT]
    if not len(frame):
        return None
    last = frame.dropna(subset=["value"]).sort_values("step", kind="stable").groupby(
        ["split", "name"], sort=True).tail(1)
    table = last.rename(columns={"name": "metric"})[["split", "metric", "value", "step"]]
    return table.sort_values(["split", "metric"]).reset_index(drop=True)


def metrics_summary(run_id: str, interval: float = LIVE_INTERVAL_S) -> None:
    """The final and best value per metric with their steps (``tables.summary_frame``, from
    ``store.metric_values``), refreshed like the charts while the run is queued or running."""
    registry = get_registry()
    try:
        first = registry.get(run_id)
    except RunNotFoundError:
        return

    @st.fragment(run_every=interval if first.is_active else None)
    def _panel() -> None:
        try:
            record = registry.get(run_id) if first.is_active else first
        except RunNotFoundError:
            return
        if record.summary:
            show_table(summary_frame(record.summary), hide_index=True, key=f"summary-{run_id}")
        else:
            st.caption("No metrics yet: the final and best value per metric appear as the run logs them.")

    _panel()


def _source_caption(record: RunRecord) -> str:
    """Which model a predict run's output comes from: run and checkpoint step."""
    parent = None
    if record.parent_run_id:
        try:
            parent = get_registry().get(record.parent_run_id)
        except RunNotFoundError:
            parent = None
    step = source_step(record, parent)
    model = f" of run {record.parent_run_id}" if record.parent_run_id else ""
    return f"From {checkpoint_text(step)}{model}."


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
        try:
            record = registry.get(run_id)
        except RunNotFoundError:
            st.warning(f"Run {run_id!r} no longer exists.")
            return
        if record.is_active:
            st.info(f"Predicting… run {run_id} is {record.status}.", icon=":material/hourglass_top:")
            return
        if every is not None and record.is_finished:
            # once, at the end: the panel then stops polling, so its download button is not
            # redrawn every tick under a click that is fetching its file (a journey's flake)
            st.rerun()
        if record.status != "succeeded":
            show_error(record.error or "see its worker log", prefix=f"Run {run_id} {record.status}: ")
            page_link("run", "Open the run", run_id=run_id)
            return
        preds = predictions_frame(run_id)
        if preds is None:
            st.error(f"Run {run_id} wrote no predictions file.")
            return
        st.success(f"{plural(len(preds), 'prediction')} · {plural(preds.shape[1], 'column')} (run {run_id})")
        with st.container(key=f"pred-source-{run_id}"):
            st.caption(_source_caption(record))
        if len(preds) == 1:
            single_prediction(preds)
        show_table(preds.head(100), digits=6, hide_index=True)
        path = paths.run_dir(workspace(), run_id) / paths.PREDICTIONS_FILE
        st.download_button("Download predictions CSV", data=lambda: path.read_bytes(),
                           file_name=f"predictions-{run_id}.csv", mime="text/csv", on_click="ignore",
                           icon=":material/download:", key=f"dl-{run_id}")

    _panel()
