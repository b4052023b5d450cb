"""Streaming evaluation metrics with TF's names and semantics (``tf.compat.v1.metrics``).

Each function here looks at *one batch* and returns a :class:`~estimator_engine.metric_op.MetricOp`:

* ``op.state`` is a dict of tensors that are **additive** over batches (weighted sums, weighted
  counts, per-threshold confusion counts). Two batches are combined by adding their states key by
  key, which is all the Estimator does during ``evaluate`` (and what an all-reduce with SUM does
  under DDP), so the final value is the metric over every evaluated example, as TF's
  ``(value, update_op)`` pairs give.
* ``op.result_fn`` (a module-level function or a ``functools.partial`` of one, so it pickles and is
  the same for every batch) reads the metric off a merged state.

Use them as ``eval_metric_ops`` values in a ``model_fn``::

    eval_metric_ops = {
        'accuracy': metrics.accuracy(labels=labels, predictions=class_ids),
        'auc': metrics.auc(labels=labels, predictions=probabilities),
    }

Conventions shared by every function:

* Inputs may be torch tensors, numpy arrays or (nested) lists; they are converted once, detached,
  and moved to the device of the first torch tensor among them. States stay on that device.
  Counts and sums are float64 (float32 on devices without float64, e.g. MPS) so that long
  evaluations do not lose precision. No function forces a device sync (no ``.item()``), except
  the range check of :func:`auc`, which only runs for CPU tensors.
* Like TF's ``remove_squeezable_dimensions``, labels and predictions whose ranks differ by one with
  a trailing dimension of 1 (``[B, 1]`` vs ``[B]``) are squeezed to match; after that their shapes
  must be equal.
* ``weights`` may be a scalar, have the values' shape, or broadcast to it: weights of rank one less
  than the values get a trailing axis (``[B]`` against ``[B, k]``), weights of rank one more with a
  trailing 1 lose it; after that each weight dimension must be 1 or equal the values' dimension.
* A metric whose denominator is 0 (no examples, no positive predictions, ...) is 0, as TF's
  ``div_no_nan`` gives.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import torch

from estimator_engine.metric_op import MetricOp

__all__ = [
    "accuracy",
    "auc",
    "mean",
    "mean_absolute_error",
    "mean_squared_error",
    "merge_metric_ops",
    "precision",
    "recall",
    "root_mean_squared_error",
]

State = Mapping[str, torch.Tensor]

# Keras' ``backend.epsilon()``: the AUC threshold endpoints sit this far outside [0, 1].
_THRESHOLD_EPSILON = 1e-7
# ``tf.compat.v1.metrics.auc``'s smoothing term in its 'trapezoidal' / 'careful_interpolation' rules.
_V1_AUC_EPSILON = 1e-6
_CURVES = ("ROC", "PR")
_SUMMATION_METHODS = ("interpolation", "trapezoidal", "careful_interpolation", "minoring", "majoring")


# --------------------------------------------------------------------------------------------
# Input handling
# --------------------------------------------------------------------------------------------


def _first_device(*values: Any) -> torch.device:
    for value in values:
        if isinstance(value, torch.Tensor):
            return value.device
    return torch.device("cpu")


def _to_tensor(value: Any, arg: str, metric: str, device: torch.device) -> torch.Tensor:
    """Converts one argument once: detached, on ``device``."""
    if isinstance(value, torch.Tensor):
        tensor = value.detach()
    else:
        try:
            tensor = torch.as_tensor(np.asarray(value) if not isinstance(value, np.ndarray) else value)
        except (TypeError, ValueError, RuntimeError) as exc:
            raise TypeError(
                f"{metric}: {arg} must be a torch tensor, a numpy array or a (nested) list of "
                f"numbers, got {type(value).__name__} {_short_repr(value)} ({exc}). Convert it to "
                f"a numeric array first."
            ) from None
    if tensor.is_complex() or not (tensor.is_floating_point() or tensor.dtype == torch.bool
                                   or _is_integer(tensor.dtype)):
        raise TypeError(f"{metric}: {arg} must hold real numbers or booleans, got dtype {tensor.dtype}.")
    if tensor.device != device:
        tensor = tensor.to(device)
    return tensor


def _is_integer(dtype: torch.dtype) -> bool:
    return not dtype.is_floating_point and not dtype.is_complex and dtype != torch.bool


def _short_repr(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _count_dtype(device: torch.device) -> torch.dtype:
    return torch.float32 if device.type == "mps" else torch.float64


def _squeeze_pair(labels: torch.Tensor, predictions: torch.Tensor, metric: str
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """TF's ``remove_squeezable_dimensions`` + ``assert_is_compatible_with``."""
    rank_diff = predictions.dim() - labels.dim()
    if rank_diff == 1 and predictions.shape[-1] == 1:
        predictions = predictions.squeeze(-1)
    elif rank_diff == -1 and labels.shape[-1] == 1:
        labels = labels.squeeze(-1)
    if labels.shape != predictions.shape:
        raise ValueError(
            f"{metric}: labels shape {tuple(labels.shape)} and predictions shape "
            f"{tuple(predictions.shape)} are not compatible; they must be equal (a trailing "
            f"dimension of 1 on either side is squeezed). Pass one label per prediction."
        )
    return labels, predictions


def _broadcast_weights(weights: torch.Tensor, values: torch.Tensor, metric: str) -> torch.Tensor:
    """TF's weight squeezing + ``broadcast_weights``: returns weights of the values' shape."""
    if weights.dim() == 0:
        return weights.expand(values.shape)
    adjusted = weights
    if weights.dim() - values.dim() == 1 and weights.shape[-1] == 1:
        adjusted = weights.squeeze(-1)
    elif values.dim() - weights.dim() == 1:
        adjusted = weights.unsqueeze(-1)
    ok = adjusted.dim() == values.dim() and all(
        w in (1, v) for w, v in zip(adjusted.shape, values.shape))
    if not ok:
        raise ValueError(
            f"{metric}: weights shape {tuple(weights.shape)} cannot be broadcast to values shape "
            f"{tuple(values.shape)}; pass a scalar, weights of the values' shape, or one weight "
            f"per example of shape [batch] or [batch, 1]."
        )
    return adjusted.expand(values.shape)


def _convert(metric: str, labels: Any, predictions: Any, weights: Any
             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    device = _first_device(predictions, labels, weights)
    labels_t = _to_tensor(labels, "labels", metric, device)
    predictions_t = _to_tensor(predictions, "predictions", metric, device)
    labels_t, predictions_t = _squeeze_pair(labels_t, predictions_t, metric)
    weights_t = None
    if weights is not None:
        weights_t = _broadcast_weights(
            _to_tensor(weights, "weights", metric, device), predictions_t, metric)
    return labels_t, predictions_t, weights_t


# --------------------------------------------------------------------------------------------
# Result functions (module level so that MetricOps pickle and compare equal across batches)
# --------------------------------------------------------------------------------------------


def _div_no_nan(numerator: torch.Tensor, denominator: torch.Tensor) -> torch.Tensor:
    zero = torch.zeros((), dtype=numerator.dtype, device=numerator.device)
    return torch.where(denominator != 0, numerator / torch.where(denominator != 0, denominator, 1),
                       zero)


def _mean_result(state: State) -> torch.Tensor:
    return _div_no_nan(state["total"], state["count"])


def _rmse_result(state: State) -> torch.Tensor:
    return torch.sqrt(_mean_result(state))


def _precision_result(state: State) -> torch.Tensor:
    tp = state["true_positives"]
    return _div_no_nan(tp, tp + state["false_positives"])


def _recall_result(state: State) -> torch.Tensor:
    tp = state["true_positives"]
    return _div_no_nan(tp, tp + state["false_negatives"])


def _interpolate_pr_auc(tp: torch.Tensor, fp: torch.Tensor, fn: torch.Tensor) -> torch.Tensor:
    """Davis & Goadrich (2006) PR-AUC, as Keras ``AUC.interpolate_pr_auc`` computes it.

    Between two adjacent thresholds precision is interpolated with the true positives growing
    linearly in the predicted positives ``p = tp + fp``; the integral has a closed form.
    """
    dtp = tp[:-1] - tp[1:]
    p = tp + fp
    prec_slope = _div_no_nan(dtp, torch.clamp(p[:-1] - p[1:], min=0))
    intercept = tp[1:] - prec_slope * p[1:]
    both_positive = (p[:-1] > 0) & (p[1:] > 0)
    safe_p_ratio = torch.where(both_positive, _div_no_nan(p[:-1], torch.clamp(p[1:], min=0)),
                               torch.ones_like(p[1:]))
    increments = _div_no_nan(prec_slope * (dtp + intercept * torch.log(safe_p_ratio)),
                             torch.clamp(tp[1:] + fn[1:], min=0))
    return increments.sum()


def _auc_result(state: State, *, curve: str, summation_method: str) -> torch.Tensor:
    tp, fp = state["true_positives"], state["false_positives"]
    tn, fn = state["true_negatives"], state["false_negatives"]
    if curve == "PR" and summation_method in ("interpolation", "careful_interpolation"):
        return _interpolate_pr_auc(tp, fp, fn)
    if summation_method in ("trapezoidal", "careful_interpolation"):
        # tf.compat.v1.metrics.auc smooths the ratios instead of using div_no_nan.
        eps = _V1_AUC_EPSILON
        recall_ = (tp + eps) / (tp + fn + eps)
        if curve == "ROC":
            x, y = fp / (fp + tn + eps), recall_
        else:
            x, y = recall_, (tp + eps) / (tp + fp + eps)
    else:
        recall_ = _div_no_nan(tp, tp + fn)
        if curve == "ROC":
            x, y = _div_no_nan(fp, fp + tn), recall_
        else:
            x, y = recall_, _div_no_nan(tp, tp + fp)
    if summation_method == "minoring":
        heights = torch.minimum(y[:-1], y[1:])
    elif summation_method == "majoring":
        heights = torch.maximum(y[:-1], y[1:])
    else:
        heights = (y[:-1] + y[1:]) / 2
    return ((x[:-1] - x[1:]) * heights).sum()


# --------------------------------------------------------------------------------------------
# Public metrics
# --------------------------------------------------------------------------------------------


def _weighted_mean_op(values: torch.Tensor, weights: torch.Tensor | None,
                      result_fn: Callable[[State], torch.Tensor] = _mean_result) -> MetricOp:
    dtype = _count_dtype(values.device)
    values = values.to(dtype)
    if weights is None:
        total = values.sum()
        count = torch.full((), values.numel(), dtype=dtype, device=values.device)
    else:
        weights = weights.to(dtype)
        total = (values * weights).sum()
        count = weights.sum()
    return MetricOp({"total": total, "count": count}, result_fn)


def _tf_v1_keywords(metric: Callable[..., MetricOp]) -> Callable[..., MetricOp]:
    """Accepts TF v1's ``metrics_collections``, ``updates_collections`` and ``name`` keywords, so
    ``metrics.accuracy(labels=l, predictions=p, name='acc_op')`` ports unchanged. They change
    nothing: there are no graph collections, and the ``eval_metric_ops`` key names the metric."""

    @functools.wraps(metric)
    def with_tf_keywords(*args: Any, metrics_collections: Any = None, updates_collections: Any = None,
                         name: str | None = None, **kwargs: Any) -> MetricOp:
        return metric(*args, **kwargs)

    return with_tf_keywords


@_tf_v1_keywords
def mean(values: Any, weights: Any = None) -> MetricOp:
    """The (weighted) mean of ``values``: ``sum(values * weights) / sum(weights)``.

    Args:
        values: a tensor, array or list of numbers, any shape.
        weights: optional; a scalar or a tensor broadcastable to ``values`` (see the module
            docstring). Without weights every element counts once.

    Returns:
        A MetricOp with state ``total`` and ``count``; its result is 0 when ``count`` is 0.

    Example:
        >>> float(mean([1.0, 2.0, 3.0, 4.0], weights=[1.0, 1.0, 0.0, 2.0]).result())
        2.75
    """
    device = _first_device(values, weights)
    values_t = _to_tensor(values, "values", "mean", device)
    weights_t = None
    if weights is not None:
        weights_t = _broadcast_weights(_to_tensor(weights, "weights", "mean", device), values_t,
                                       "mean")
    return _weighted_mean_op(values_t, weights_t)


@_tf_v1_keywords
def accuracy(labels: Any, predictions: Any, weights: Any = None) -> MetricOp:
    """How often ``predictions`` equal ``labels`` (weighted).

    As in TF, predictions are cast to the labels' dtype when the two differ (so float
    predictions against integer labels are truncated); pass class ids, not probabilities.

    Args:
        labels: ground-truth values, the predictions' shape (a trailing 1 is squeezed).
        predictions: predicted values.
        weights: optional per-example or per-element weights (see the module docstring).

    Returns:
        A MetricOp with state ``total`` (weighted correct) and ``count`` (total weight).

    Example:
        >>> float(accuracy(labels=[1, 0, 1, 1], predictions=[1, 1, 1, 0]).result())
        0.5
    """
    labels_t, predictions_t, weights_t = _convert("accuracy", labels, predictions, weights)
    if predictions_t.dtype != labels_t.dtype:
        predictions_t = predictions_t.to(labels_t.dtype)
    return _weighted_mean_op(predictions_t == labels_t, weights_t)


def _confusion_op(metric: str, labels: Any, predictions: Any, weights: Any,
                  keys: Sequence[str], result_fn: Callable[[State], torch.Tensor]) -> MetricOp:
    labels_t, predictions_t, weights_t = _convert(metric, labels, predictions, weights)
    dtype = _count_dtype(predictions_t.device)
    label_pos = labels_t.to(torch.bool)
    pred_pos = predictions_t.to(torch.bool)
    w = torch.ones((), dtype=dtype, device=pred_pos.device) if weights_t is None else weights_t.to(dtype)
    masks = {
        "true_positives": label_pos & pred_pos,
        "false_positives": ~label_pos & pred_pos,
        "false_negatives": label_pos & ~pred_pos,
    }
    state = {key: (masks[key] * w).sum(dtype=dtype) for key in keys}
    return MetricOp(state, result_fn)


@_tf_v1_keywords
def precision(labels: Any, predictions: Any, weights: Any = None) -> MetricOp:
    """Binary precision ``tp / (tp + fp)``; labels and predictions are cast to bool (non-zero = True).

    Pass thresholded predictions (class ids 0/1): a probability of 0.1 casts to True, as in TF.
    The result is 0 when nothing is predicted positive.

    Args:
        labels: ground truth, cast to bool.
        predictions: predicted classes, cast to bool.
        weights: optional weights (see the module docstring).

    Returns:
        A MetricOp with state ``true_positives`` and ``false_positives`` (weighted counts).

    Example:
        >>> float(precision(labels=[1, 0, 1, 0], predictions=[1, 1, 0, 0]).result())
        0.5
    """
    return _confusion_op("precision", labels, predictions, weights,
                         ("true_positives", "false_positives"), _precision_result)


@_tf_v1_keywords
def recall(labels: Any, predictions: Any, weights: Any = None) -> MetricOp:
    """Binary recall ``tp / (tp + fn)``; labels and predictions are cast to bool (non-zero = True).

    The result is 0 when there are no positive labels.

    Args:
        labels: ground truth, cast to bool.
        predictions: predicted classes, cast to bool.
        weights: optional weights (see the module docstring).

    Returns:
        A MetricOp with state ``true_positives`` and ``false_negatives`` (weighted counts).

    Example:
        >>> float(recall(labels=[1, 1, 1, 0], predictions=[1, 0, 0, 1]).result())
        0.3333333333333333
    """
    return _confusion_op("recall", labels, predictions, weights,
                         ("true_positives", "false_negatives"), _recall_result)


def _regression_pair(metric: str, labels: Any, predictions: Any, weights: Any
                     ) -> tuple[torch.Tensor, torch.Tensor | None]:
    labels_t, predictions_t, weights_t = _convert(metric, labels, predictions, weights)
    dtype = _count_dtype(predictions_t.device)
    return predictions_t.to(dtype) - labels_t.to(dtype), weights_t


@_tf_v1_keywords
def mean_squared_error(labels: Any, predictions: Any, weights: Any = None) -> MetricOp:
    """The (weighted) mean of ``(predictions - labels) ** 2``.

    Example:
        >>> float(mean_squared_error(labels=[1.0, 2.0], predictions=[2.0, 4.0]).result())
        2.5
    """
    diff, weights_t = _regression_pair("mean_squared_error", labels, predictions, weights)
    return _weighted_mean_op(diff.square(), weights_t)


@_tf_v1_keywords
def root_mean_squared_error(labels: Any, predictions: Any, weights: Any = None) -> MetricOp:
    """The square root of :func:`mean_squared_error` over all merged batches.

    Example:
        >>> float(root_mean_squared_error(labels=[1.0, 1.0], predictions=[4.0, -2.0]).result())
        3.0
    """
    diff, weights_t = _regression_pair("root_mean_squared_error", labels, predictions, weights)
    return _weighted_mean_op(diff.square(), weights_t, _rmse_result)


@_tf_v1_keywords
def mean_absolute_error(labels: Any, predictions: Any, weights: Any = None) -> MetricOp:
    """The (weighted) mean of ``|predictions - labels|``.

    Example:
        >>> float(mean_absolute_error(labels=[1.0, 2.0], predictions=[2.0, 4.0]).result())
        1.5
    """
    diff, weights_t = _regression_pair("mean_absolute_error", labels, predictions, weights)
    return _weighted_mean_op(diff.abs(), weights_t)


@functools.lru_cache(maxsize=64)
def _threshold_tensor(thresholds: tuple[float, ...], dtype: torch.dtype, device: torch.device
                      ) -> torch.Tensor:
    # Built from Python floats and then cast, like TF's constant, so edge cases round alike.
    return torch.tensor(thresholds, dtype=torch.float64).to(dtype=dtype, device=device)


def _auc_thresholds(num_thresholds: int, thresholds: Sequence[float] | None) -> tuple[float, ...]:
    if thresholds is not None:
        try:
            inner = sorted(float(t) for t in thresholds)
        except (TypeError, ValueError):
            raise TypeError(
                f"auc: thresholds must be a sequence of numbers in [0, 1], got "
                f"{_short_repr(thresholds)}."
            ) from None
        bad = [t for t in inner if not 0.0 <= t <= 1.0]
        if bad:
            raise ValueError(
                f"auc: thresholds must be in [0, 1], got {bad!r} in thresholds={_short_repr(thresholds)}."
            )
    else:
        if isinstance(num_thresholds, bool) or not isinstance(num_thresholds, int) or num_thresholds <= 1:
            raise ValueError(
                f"auc: num_thresholds must be an integer > 1, got num_thresholds={num_thresholds!r}."
            )
        inner = [(i + 1) / (num_thresholds - 1) for i in range(num_thresholds - 2)]
    return (0.0 - _THRESHOLD_EPSILON, *inner, 1.0 + _THRESHOLD_EPSILON)


@_tf_v1_keywords
def auc(labels: Any, predictions: Any, weights: Any = None, num_thresholds: int = 200,
        curve: str = "ROC", summation_method: str = "interpolation",
        thresholds: Sequence[float] | None = None) -> MetricOp:
    """Approximate area under the ROC or precision-recall curve, as TF / Keras compute it.

    The state is the weighted confusion matrix at a fixed set of thresholds (``true_positives``,
    ``false_positives``, ``true_negatives``, ``false_negatives``, each of shape
    ``[num_thresholds]``); a prediction is positive at threshold ``t`` when ``prediction > t``.
    The thresholds are Keras' ``AUC`` thresholds: ``num_thresholds - 2`` evenly spaced
    ``(i + 1) / (num_thresholds - 1)`` plus the endpoints ``-1e-7`` and ``1 + 1e-7`` (with
    ``thresholds`` given: those, sorted, plus the same endpoints).

    Summation methods:

    * ``'interpolation'`` (default; Keras' default, what TF's canned heads report as ``auc`` and
      ``auc_precision_recall``): ROC by the trapezoidal rule, PR by Davis & Goadrich interpolation.
    * ``'trapezoidal'`` and ``'careful_interpolation'``: ``tf.compat.v1.metrics.auc``'s rules, with
      its 1e-6 smoothing of the ratios; ``'careful_interpolation'`` uses Davis & Goadrich for PR,
      ``'trapezoidal'`` the trapezoidal rule for PR too (known to overestimate).
    * ``'minoring'`` / ``'majoring'``: left / right Riemann sums (lower / upper bound).

    Args:
        labels: ground truth, cast to bool (non-zero = positive).
        predictions: scores in [0, 1] (e.g. probabilities), the labels' shape.
        weights: optional weights (see the module docstring).
        num_thresholds: number of thresholds, > 1; ignored when ``thresholds`` is given.
        curve: ``'ROC'`` or ``'PR'``.
        summation_method: see above.
        thresholds: optional explicit thresholds in [0, 1].

    Raises:
        ValueError: bad shapes or arguments, or (for CPU tensors) predictions outside [0, 1].

    Example:
        >>> float(auc(labels=[0, 0, 1, 1], predictions=[0.0, 0.5, 0.3, 0.9], num_thresholds=3).result())
        0.75
    """
    if curve not in _CURVES:
        raise ValueError(f"auc: curve must be one of {_CURVES}, got curve={curve!r}.")
    if summation_method not in _SUMMATION_METHODS:
        raise ValueError(
            f"auc: summation_method must be one of {_SUMMATION_METHODS}, got "
            f"summation_method={summation_method!r}."
        )
    threshold_values = _auc_thresholds(num_thresholds, thresholds)
    labels_t, predictions_t, weights_t = _convert("auc", labels, predictions, weights)
    if not predictions_t.is_floating_point() or predictions_t.dtype in (torch.float16, torch.bfloat16):
        predictions_t = predictions_t.to(torch.float32)
    if predictions_t.device.type == "cpu":
        in_range = (predictions_t >= 0) & (predictions_t <= 1)
        if not bool(in_range.all()):
            bad = predictions_t[~in_range]
            raise ValueError(
                f"auc: predictions must be in [0, 1], got {bad.numel()} value(s) outside it "
                f"(e.g. {bad[:3].tolist()}). Pass probabilities (e.g. torch.sigmoid(logits)), "
                f"not logits."
            )
    device = predictions_t.device
    dtype = _count_dtype(device)
    thr = _threshold_tensor(threshold_values, predictions_t.dtype, device)
    num = thr.numel()

    # bucket[i] = number of thresholds strictly below prediction i, so the prediction counts as
    # positive at thresholds 0 .. bucket[i] - 1. A weighted histogram over buckets followed by a
    # reversed cumulative sum gives the counts at every threshold at once.
    preds = predictions_t.reshape(-1)
    bucket = torch.searchsorted(thr, preds)
    label_pos = labels_t.reshape(-1).to(torch.bool)
    w = (torch.ones(preds.shape, dtype=dtype, device=device) if weights_t is None
         else weights_t.reshape(-1).to(dtype))
    zero = torch.zeros((), dtype=dtype, device=device)
    hist = torch.zeros(2, num + 1, dtype=dtype, device=device)
    hist[0].index_add_(0, bucket, torch.where(label_pos, w, zero))
    hist[1].index_add_(0, bucket, torch.where(label_pos, zero, w))
    at_or_above = hist.flip(-1).cumsum(-1).flip(-1)  # [:, m] = weight in buckets >= m
    totals = at_or_above[:, :1]
    predicted_pos = at_or_above[:, 1:]
    tp, fp = predicted_pos[0], predicted_pos[1]
    fn, tn = totals[0] - tp, totals[1] - fp
    state = {"true_positives": tp, "false_positives": fp, "true_negatives": tn,
             "false_negatives": fn}
    return MetricOp(state, functools.partial(_auc_result, curve=curve,
                                             summation_method=summation_method))


def merge_metric_ops(ops: Iterable[MetricOp]) -> MetricOp:
    """Merges the ops of several batches of one metric into one (states added key by key).

    Example:
        >>> ops = [mean([1.0, 2.0]), mean([3.0])]
        >>> float(merge_metric_ops(ops).result())
        2.0
    """
    ops = list(ops)
    if not ops:
        raise ValueError("merge_metric_ops: got no MetricOps; pass at least one.")
    for op in ops:
        if not isinstance(op, MetricOp):
            raise TypeError(f"merge_metric_ops: expected MetricOp values, got {type(op).__name__} "
                            f"{_short_repr(op)}.")
    merged = MetricOp(ops[0].state, ops[0].result_fn)
    for op in ops[1:]:
        merged.merge_(op)
    return merged

