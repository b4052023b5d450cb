"""``run.live()``: the run page's curves in a notebook cell, updated while the run trains.

In a Jupyter kernel the chart is a plotly ``FigureWidget`` (anywidget, the ``notebook`` extra)
redrawn by a background thread from the run's metrics stream (read incrementally, by byte
offset, as the UI reads it), so the kernel stays free for other cells; the thread ends by itself
once the run has finished and the last rows are drawn. Elsewhere (a terminal, a frontend without
widgets, or without anywidget) ``live()`` gives the static figure of what is there now, plus a
one-line status. The figure is the UI's (``estimator_workbench.ui.figures.curves_figure``).

Example:
    >>> chart = run.live()            # in a notebook: the chart appears and updates   # doctest: +SKIP
    >>> chart.stop()                  # stops updating (the run goes on)               # doctest: +SKIP
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from estimator_workbench.store import paths

if TYPE_CHECKING:
    from estimator_workbench.api import Run

__all__ = ["LiveChart", "widgets_available"]

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
