"""Filtering runs by a metric condition (issue 28 item 10): ``accuracy > 0.7``,
``eval/loss <= 0.3 and train/loss < 1``. Parsed by a regular expression into
``(metric, operator, number)`` comparisons joined by ``and``, never evaluated as Python."""

from __future__ import annotations

import dataclasses
import math
import operator
import re
from collections.abc import Callable, Sequence

from estimator_workbench.store.records import RunRecord

__all__ = ["MetricCondition", "filter_by_condition", "parse_condition"]

_OPERATORS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge, "<=": operator.le, "==": operator.eq, "!=": operator.ne, ">": operator.gt,
    "<": operator.lt, "=": operator.eq}
_CLAUSE = re.compile(r"^\s*([A-Za-z_][\w./-]*)\s*(>=|<=|==|!=|>|<|=)\s*"
                     r"([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*$")


@dataclasses.dataclass(frozen=True)
class MetricCondition:
    """One comparison of a run's metric with a number, on the last value the run logged of it
    (``eval/<name>`` unless the name has a split, e.g. ``train/loss``).

    Example:
        >>> parse_condition("accuracy > 0.7")
        [MetricCondition(metric='eval/accuracy', op='>', value=0.7)]
    """

    metric: str
    op: str
    value: float

    def holds(self, record: RunRecord) -> bool:
        """Whether ``record``'s last value of the metric satisfies it (a run without it: no)."""
        entry = record.summary.get(self.metric) or {}
        last = entry.get("last")
        if not isinstance(last, (int, float)) or isinstance(last, bool) or not math.isfinite(last):
            return False
        return _OPERATORS[self.op](float(last), self.value)


def parse_condition(text: str) -> list[MetricCondition]:
    """The comparisons in ``text`` (joined by ``and`` or ``,``); ``ValueError`` naming the part
    that is not ``<metric> <operator> <number>``.

    Example:
        >>> parse_condition("eval/loss <= 0.3 and train/loss < 1e1")
        [MetricCondition(metric='eval/loss', op='<=', value=0.3), MetricCondition(metric='train/loss', op='<', value=10.0)]
    """
    conditions = []
    for part in re.split(r"\s+and\s+|,", text.strip(), flags=re.IGNORECASE):
        if not part.strip():
            continue
        match = _CLAUSE.match(part)
        if match is None:
            raise ValueError(f"Metric condition {part.strip()!r} is not '<metric> <operator> <number>' "
                             "(e.g. accuracy > 0.7; operators > >= < <= == !=; join several with 'and').")
        name, op, number = match.groups()
        conditions.append(MetricCondition(name if "/" in name else f"eval/{name}", op, float(number)))
    return conditions


def filter_by_condition(records: Sequence[RunRecord], text: str) -> list[RunRecord]:
    """The runs of ``records`` for which every comparison in ``text`` holds (all when empty)."""
    conditions = parse_condition(text)
    return [r for r in records if all(c.holds(r) for c in conditions)]
