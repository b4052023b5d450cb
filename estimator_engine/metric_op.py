"""The mergeable metric op: what ``eval_metric_ops`` values are.

TF's ``(value, update_op)`` pair becomes one object holding a batch's *additive* statistics and the
function that turns merged statistics into the metric value. The Estimator sums the states of all
evaluated batches key by key (and all-reduces them under DDP), so the result equals the metric
over every evaluated example, as TF's streaming metrics do.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import torch

__all__ = ["MetricOp"]


class MetricOp:
    """One batch's sufficient statistics plus the function that reads the metric off them.

    Args:
        state: name -> tensor of additive statistics for this batch (sums, counts, histograms).
        result_fn: maps a merged state to the metric value; must be the same function for every
            batch of one metric key.

    Example:
        >>> op = MetricOp({'total': torch.tensor(3.0), 'count': torch.tensor(2.0)},
        ...               lambda s: s['total'] / s['count'])
        >>> float(op.merge(op).result())
        1.5
    """

    __slots__ = ("result_fn", "state")

    def __init__(self, state: Mapping[str, torch.Tensor],
                 result_fn: Callable[[Mapping[str, torch.Tensor]], torch.Tensor]) -> None:
        self.state = dict(state)
        self.result_fn = result_fn

    def merge(self, other: MetricOp) -> MetricOp:
        """Returns the op over both batches (states added key by key)."""
        if self.state.keys() != other.state.keys():
            raise ValueError(
                f"Cannot merge metric states with different keys: {sorted(self.state)} vs "
                f"{sorted(other.state)}. The same eval_metric_ops key must always hold the same metric."
            )
        return MetricOp({k: v + other.state[k] for k, v in self.state.items()}, self.result_fn)

    def merge_(self, other: MetricOp) -> None:
        """In-place ``merge`` (the evaluation loop's accumulator)."""
        state = self.state
        for key, value in other.state.items():
            state[key] = state[key] + value

    def result(self) -> torch.Tensor:
        """The metric value over all merged batches."""
        return self.result_fn(self.state)

    def __repr__(self) -> str:
        return f"MetricOp(keys={sorted(self.state)}, result_fn={getattr(self.result_fn, '__name__', self.result_fn)!r})"
