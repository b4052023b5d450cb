"""Keeps Streamlit's garbage collection between reruns cheap: the UI's import objects are frozen.

Streamlit runs a full collection (``gc.collect(2)``, its ``runner.postScriptGC``) after every
script run and every fragment run. Over the ~130,000 objects of streamlit, pandas and plotly it
took 0.07 s on a quiet machine and ~0.2 s beside a browser and a runner: between the Train
button's submit and the run page, and again on every live-chart tick. ``app.py`` calls
``freeze_import_heap`` once per server process.

Example:
    >>> from estimator_workbench.ui import heap
    >>> heap.freeze_import_heap()  # doctest: +SKIP
"""

from __future__ import annotations

import gc

__all__ = ["freeze_import_heap"]

_frozen = False


def freeze_import_heap() -> None:
    """Imports what every page uses, then moves all objects alive now out of the collector's
    reach (``gc.freeze``); later calls do nothing. New objects are still collected as usual."""
    global _frozen
    if _frozen:
        return
    _frozen = True
    from estimator_workbench.ui import context, figures, forms, live, panels, runs_hub, tables  # noqa: F401

    gc.collect()
    gc.freeze()
