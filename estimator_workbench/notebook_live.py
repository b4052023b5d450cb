"""``run.live()``: the run page's curves in a notebook cell, updated while the run trains.

In a Jupyter kernel the chart is a plotly ``FigureWidget`` (anywidget, the ``notebook`` extra)
redrawn by a background thread from the run's metrics stream (read incrementally, by byte
offset, as the UI reads it), so the kernel stays free for other cells; the thread ends by itself
once the run has finished and the last rows are drawn. Elsewhere (a terminal, a frontend without
widgets, or without anywidget) ``live()`` gives the static figure of what is there now, plus a
one-line status. The figure is the UI's (``estimator_workbench.ui.figures.curves_figure``).

``ws.compare([...])`` (``CompareChart``) does the same for the Compare page's charts of several
runs: the overlaid curves, the parallel coordinates of what differs against the chosen metric
and the scatter of one param against it, drawn by the page's own functions
(``estimator_workbench.ui.compare``, ``estimator_workbench.ui.figures``).

Example:
    >>> chart = run.live()            # in a notebook: the chart appears and updates   # doctest: +SKIP
    >>> chart.stop()                  # stops updating (the run goes on)               # doctest: +SKIP
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from estimator_workbench.store import paths

if TYPE_CHECKING:
    from estimator_workbench.api import Run

__all__ = ["CompareChart", "LiveChart", "widgets_available"]

MAX_POINTS = 2000  # per series, as the UI draws them


def widgets_available() -> bool:
    """Whether a live widget can be shown: a Jupyter kernel with anywidget installed."""
    from estimator_engine.hooks.progress import in_jupyter_kernel

    if not in_jupyter_kernel():
        return False
    try:
        import anywidget  # noqa: F401  (plotly's FigureWidget is built on it)
    except ImportError:
        return False
    return True


class LiveChart:
    """The curves of one run, live in a widget (``widget=True``) or as a static figure.

    Args:
        run: the ``Run``.
        interval: seconds between reads of the metrics stream.
        widget: draw a ``FigureWidget`` updated by a background thread; default: when
            ``widgets_available()``.
        smoothing: EMA weight of the curves (the UI's smoothing control).

    Attributes:
        figure: the plotly figure (a ``FigureWidget`` while live).
    """

    def __init__(self, run: Run, interval: float = 1.0, *, widget: bool | None = None,
                 smoothing: float = 0.0) -> None:
        from estimator_workbench.store.metrics_store import MetricsTail, rows_to_frame

        self.run = run
        self.interval = float(interval)
        self.smoothing = smoothing
        self._tail = MetricsTail(run.folder / paths.METRICS_FILE)
        self._frame = rows_to_frame([])
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.updates = 0
        self._read()
        static = self._build()
        if widget is None:
            widget = widgets_available()
        if not widget:
            self.figure = static
            return
        import plotly.graph_objects as go

        self.figure = go.FigureWidget(static)
        self._thread = threading.Thread(target=self._follow, name=f"live-{run.id}", daemon=True)
        self._thread.start()

    def __repr__(self) -> str:
        return f"LiveChart({self.run.id!r}, running={self.running})"

    @property
    def running(self) -> bool:
        """Whether the background thread still updates the chart."""
        return self._thread is not None and self._thread.is_alive()

    def stop(self) -> None:
        """Stops updating the chart (the run itself goes on)."""
        self._stop.set()

    def join(self, timeout: float | None = None) -> LiveChart:
        """Waits for the updates to end (the run finished, or ``stop()``)."""
        if self._thread is not None:
            self._thread.join(timeout)
        return self

    def _read(self) -> bool:
        import pandas as pd

        generation = self._tail.generation
        new = self._tail.read_frame()
        if self._tail.generation != generation:  # the file was replaced (a resume dropped rows)
            self._frame = new
            return True
        if len(new):
            self._frame = pd.concat([self._frame, new], ignore_index=True) if len(self._frame) else new
            return True
        return False

    def _build(self) -> Any:
        from estimator_workbench.store.metrics_store import downsample
        from estimator_workbench.ui.figures import curves_figure

        frame = downsample(self._frame, MAX_POINTS) if len(self._frame) else self._frame
        figure = curves_figure(frame, smoothing=self.smoothing)
        figure.update_layout(title=f"{self.run.id}: {self.run.status}")
        return figure

    def _redraw(self) -> None:
        fresh = self._build()
        with self.figure.batch_update():
            self.figure.data = ()
            self.figure.add_traces(list(fresh.data))
            self.figure.layout = fresh.layout
        self.updates += 1

    def _follow(self) -> None:
        last_status = None
        while not self._stop.is_set():
            status = self.run.status
            finished = self.run.record.is_finished
            if self._read() or status != last_status:
                self._redraw()
                last_status = status
            if finished:
                return
            self._stop.wait(self.interval)

    def _ipython_display_(self) -> None:
        """Shows the figure (the widget while live) when the chart is a cell's value."""
        from IPython.display import display

        display(self.figure)


class CompareChart:
    """The Compare page's charts of several runs, live in widgets (``widget=True``) or static.

    The same figures as the page, built by its functions: ``curves`` (every run's curves
    overlaid), and with two or more runs that differ in a param, RunConfig, seed or steps,
    ``parallel`` (parallel coordinates of those against ``metric``) and ``scatter`` (``param``
    against ``metric``, the best run starred). ``table`` is the page's "What differs" table and
    ``best`` the best run's id for ``metric``. While live, a background thread rebuilds them every
    ``interval`` seconds until every run has finished (or ``stop()``).

    Args:
        workspace: the ``Workspace``.
        run_ids: the runs, in the order of their colours.
        metric: ``final eval <name>``, ``best eval <name>`` (``eval <name>``: the final value) or
            ``train loss (smoothed)`` (default: the page's first option,
            an eval metric when a run has one).
        direction: ``maximize`` or ``minimize`` (default: by the metric's name, as the page).
        param: the scatter's x (default: the first differing param).
        smoothing, x_axis, log_y: the curves' controls, as on the page.

    Example:
        >>> view = ws.compare([run_a.id, run_b.id])                         # doctest: +SKIP
        >>> view.best, sorted(view.figures)                                 # doctest: +SKIP
        ('r-...', ['curves', 'parallel', 'scatter'])
    """

    def __init__(self, workspace: Any, run_ids: Sequence[str], interval: float = 1.0, *,
                 widget: bool | None = None, metric: str | None = None, direction: str | None = None,
                 param: str | None = None, smoothing: float = 0.0, x_axis: str = "step",
                 log_y: bool = False) -> None:
        ids = list(dict.fromkeys(run_ids))
        if not ids:
            raise ValueError("compare() needs at least one run id, e.g. ws.compare([run.id for run in runs]).")
        known = {r.run_id for r in workspace.registry.list_runs(trashed=None)}
        unknown = [i for i in ids if i not in known]
        if unknown:
            raise ValueError(f"compare(): no run {', '.join(map(repr, unknown))} in {workspace.root} "
                             "(ws.runs() lists the run ids).")
        if direction not in (None, "maximize", "minimize"):
            raise ValueError(f"compare(): direction must be 'maximize' or 'minimize', given: {direction!r}.")
        self.workspace = workspace
        self.run_ids = ids
        self.interval = float(interval)
        self.controls = {"smoothing": smoothing, "x_axis": x_axis, "log_y": log_y}
        self._choice = {"metric": metric, "direction": direction, "param": param}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.updates = 0
        self.metric = self.direction = self.param = self.best = None
        self.table: Any = None
        static = self._build()
        if widget is None:
            widget = widgets_available()
        if not widget:
            self.figures: dict[str, Any] = static
            return
        import plotly.graph_objects as go

        self.figures = {key: go.FigureWidget(figure) for key, figure in static.items()}
        self._thread = threading.Thread(target=self._follow, name="live-compare", daemon=True)
        self._thread.start()

    def __repr__(self) -> str:
        return f"CompareChart({self.run_ids!r}, running={self.running})"

    @property
    def running(self) -> bool:
        """Whether the background thread still updates the charts."""
        return self._thread is not None and self._thread.is_alive()

    def stop(self) -> None:
        """Stops updating the charts (the runs go on)."""
        self._stop.set()

    def join(self, timeout: float | None = None) -> CompareChart:
        """Waits for the updates to end (every run finished, or ``stop()``)."""
        if self._thread is not None:
            self._thread.join(timeout)
        return self

    def _records(self) -> list[Any]:
        by_id = {r.run_id: r for r in self.workspace.registry.list_runs(trashed=None) if r.run_id in self.run_ids}
        return [by_id[i] for i in self.run_ids if i in by_id]

    def _build(self) -> dict[str, Any]:
        """The page's figures for the runs as they are now (``compare_view``'s steps, without streamlit)."""
        from estimator_workbench.ui import compare, figures

        records = self._records()
        self._finished = all(r.is_finished for r in records)
        labels = figures.unique_run_labels([(r.run_id, r.name) for r in records], max_length=32)
        data, losses = compare.overlay_frame(records, self.workspace.root)
        built = {"curves": figures.curves_figure(data, run_labels=labels, **self.controls)}
        smoothing = self.controls["smoothing"] or compare.DEFAULT_SMOOTHING
        table, differing = compare.comparison_frame(records, labels, losses, smoothing)
        options = compare.metric_options(records)
        metric = compare.resolve_metric(self._choice["metric"], options) if self._choice["metric"] else options[0]
        if metric not in table.columns:
            raise ValueError(f"compare(): metric {metric!r} is not one of these runs' metrics: {options}.")
        direction = self._choice["direction"] or compare.default_direction(metric)
        best = compare.best_run(table, metric, direction)
        dims = [c for c in differing if c not in ("template", "dataset")]
        param = None
        if len(records) > 1 and dims:
            param = self._choice["param"] or next((d for d in dims if d.startswith("param: ")), dims[0])
            if param not in dims:
                raise ValueError(f"compare(): param {param!r} does not differ between these runs; "
                                 f"those that do: {dims}.")
            built["parallel"] = figures.parallel_coordinates_figure(table, dims, metric, direction=direction,
                                                                    label_column="name")
            built["scatter"] = figures.param_scatter_figure(table, param, metric, label_column="name",
                                                            best=labels.get(best) if best else None)
        self.table = table.assign(best=table["run"] == best)
        self.metric, self.direction, self.param, self.best = metric, direction, param, best
        return built

    def _redraw(self) -> None:
        fresh = self._build()
        for key, widget in self.figures.items():
            figure = fresh.get(key)
            if figure is None:  # (a run left the comparison: its last drawing stays)
                continue
            with widget.batch_update():
                widget.data = ()
                widget.add_traces(list(figure.data))
                widget.layout = figure.layout
        self.updates += 1

    def _follow(self) -> None:
        while not self._stop.is_set():
            self._redraw()
            if self._finished:  # this redraw showed every run's end
                return
            self._stop.wait(self.interval)

    def _ipython_display_(self) -> None:
        """Shows the charts (widgets while live) and the table, in the page's order."""
        from IPython.display import display

        display(self.figures["curves"])
        if self.table is not None:
            display(self.table)
        for key in ("parallel", "scatter"):
            if key in self.figures:
                display(self.figures[key])
