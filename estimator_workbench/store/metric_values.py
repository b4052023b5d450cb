"""A run's value of a metric: one definition for every view (the Runs table, Compare, the run
page, the notebook API's ``ws.runs()``), always shown with its name.

Two values are kept per metric in the registry's summary (``RunRecord.summary``, merged as the run
logs):

- **final**: the value at the last step the run logged it, as MLflow's ``search_runs()`` and the
  end of a TensorBoard curve show it. It is the headline value: the model the run ended with (and
  the checkpoint that evaluate, predict and serve use) has it.
- **best**: the best value the run reached (the minimum for names holding 'loss' or 'error', else
  the maximum: ``records.is_lower_better``), with the step it was reached at. Without early
  stopping, no checkpoint may hold that model any more; it is shown next to the final value,
  never instead of it.

Example:
    >>> summary = {"eval/accuracy": {"last": 0.9, "last_step": 500, "best": 0.95, "best_step": 300}}
    >>> metric_value(summary, "eval/accuracy").text()
    '0.9 (final, step 500)'
    >>> metric_value(summary, "eval/accuracy", BEST).text()
    '0.95 (best, at step 300)'
    >>> metric_label("eval/accuracy"), metric_label("eval/accuracy", BEST)
    ('final eval accuracy', 'best eval accuracy')
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

__all__ = ["BEST", "FINAL", "KINDS", "MetricValue", "metric_label", "metric_value"]

FINAL = "final"
BEST = "best"
KINDS = (FINAL, BEST)
_SUMMARY_KEYS = {FINAL: ("last", "last_step"), BEST: ("best", "best_step")}


@dataclasses.dataclass(frozen=True)
class MetricValue:
    """One value of a run's metric: ``tag`` (``'eval/accuracy'``), ``kind`` (``'final'`` or
    ``'best'``), the ``value`` (None when the run has not logged the metric) and its ``step``.

    Example:
        >>> MetricValue("eval/loss", FINAL, 0.25, 100).label
        'final eval loss'
    """

    tag: str
    kind: str
    value: float | None
    step: int | None

    @property
    def label(self) -> str:
        """The name every view gives this value (``metric_label``)."""
        return metric_label(self.tag, self.kind)

    def text(self, digits: int = 4) -> str:
        """``'0.9667 (final, step 500)'`` (``digits`` significant digits); ``''`` without a value."""
        if self.value is None:
            return ""
        where = "" if self.step is None else (f", at step {self.step}" if self.kind == BEST else f", step {self.step}")
        return f"{self.value:.{digits}g} ({self.kind}{where})"


def metric_label(tag: str, kind: str = FINAL) -> str:
    """How views name a value of a metric: ``'final eval accuracy'`` for ``('eval/accuracy',
    'final')``; a bare name (``'accuracy'``) is taken as an eval metric.

    Example:
        >>> metric_label("accuracy", BEST), metric_label("train/loss")
        ('best eval accuracy', 'final train loss')
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {list(KINDS)}, given: {kind!r}.")
    split, _, name = tag.rpartition("/")
    return f"{kind} {split or 'eval'} {name}"


def metric_value(summary: Mapping[str, Mapping[str, Any]], tag: str, kind: str = FINAL) -> MetricValue:
    """The ``kind`` value of metric ``tag`` in a run's ``summary`` (``RunRecord.summary``); a bare
    name (``'accuracy'``) means ``'eval/accuracy'``. Non-finite values read as missing (None).

    Example:
        >>> metric_value({}, "accuracy")
        MetricValue(tag='eval/accuracy', kind='final', value=None, step=None)
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {list(KINDS)}, given: {kind!r}.")
    tag = tag if "/" in tag else f"eval/{tag}"
    entry = summary.get(tag) or {}
    value_key, step_key = _SUMMARY_KEYS[kind]
    value, step = entry.get(value_key), entry.get(step_key)
    try:
        number = None if value is None else float(value)
    except (TypeError, ValueError):
        number = None
    if number is not None and not math.isfinite(number):
        number = None
    return MetricValue(tag, kind, number, None if number is None or step is None else int(step))
