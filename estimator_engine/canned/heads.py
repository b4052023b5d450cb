"""Heads: loss, predictions, eval metrics and export outputs on top of logits (TF's ``tf.estimator.*Head``).

A canned estimator's ``model_fn`` is a logit builder plus a head::

    logits = build_logits(features, mode)
    return head.create_estimator_spec(features, mode, logits, labels, train_op_fn=...)

Heads follow TF 2's ``BinaryClassHead``, ``MultiClassHead`` and ``RegressionHead``:

* per-example loss: sigmoid cross-entropy, sparse softmax cross-entropy, squared error;
  weighted by ``weight_column``; reduced with ``loss_reduction`` (``'sum_over_batch_size'``: the
  weighted sum divided by the number of loss elements, TF 2's default; ``'sum'``: the weighted sum);
* prediction keys and eval metric keys as in TF (see each class); ``classes`` are numpy arrays of
  ``bytes`` (``b'0'``/``b'1'`` or the vocabulary, UTF-8 encoded), as TF's string tensors come out;
* ``export_outputs`` in PREDICT: ``serving_default`` plus ``classification`` / ``regression`` /
  ``predict`` as TF builds them: ``classification`` holds the ``scores`` and the class names tiled per
  example; ``predict`` every prediction. String classes cannot be torch tensors, so they are
  ``StringLookup``s (an id tensor plus the names) that the export records and ``ee.export.load`` turns
  back into the same numpy ``bytes`` arrays predict() returns.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from estimator_engine import metrics
from estimator_engine import spec as spec_lib
from estimator_engine.export_output import (
    ClassificationOutput,
    PredictOutput,
    RegressionOutput,
    StringLookup,
)
from estimator_engine.metric_op import MetricOp
from estimator_engine.mode_keys import ModeKeys
from estimator_engine.model_state import minimize
from estimator_engine.spec import DEFAULT_SERVING_KEY, EstimatorSpec

__all__ = [
    "BinaryClassHead",
    "Head",
    "LogisticRegressionHead",
    "LossReduction",
    "MetricKeys",
    "MultiClassHead",
    "MultiHead",
    "MultiLabelHead",
    "PoissonRegressionHead",
    "PredictionKeys",
    "RegressionHead",
    "classification_head",
]


class LossReduction:
    """The ``loss_reduction`` values a head accepts (TF's ``tf.losses.Reduction`` names)."""

    SUM = "sum"
    SUM_OVER_BATCH_SIZE = "sum_over_batch_size"
    ALL = (SUM, SUM_OVER_BATCH_SIZE)


class PredictionKeys:
    """TF's ``prediction_keys.PredictionKeys``."""

    CLASSES = "classes"
    CLASS_IDS = "class_ids"
    ALL_CLASSES = "all_classes"
    ALL_CLASS_IDS = "all_class_ids"
    LOGISTIC = "logistic"
    LOGITS = "logits"
    PREDICTIONS = "predictions"
    PROBABILITIES = "probabilities"


class MetricKeys:
    """TF's ``metric_keys.MetricKeys`` (the keys a head reports)."""

    LOSS = "loss"
    LOSS_MEAN = "average_loss"
    LOSS_REGULARIZATION = "regularization_loss"
    ACCURACY = "accuracy"
    PRECISION = "precision"
    RECALL = "recall"
    ACCURACY_BASELINE = "accuracy_baseline"
    AUC = "auc"
    AUC_PR = "auc_precision_recall"
    LABEL_MEAN = "label/mean"
    PREDICTION_MEAN = "prediction/mean"


# Export signature keys (TF's signature_constants).
_CLASSIFY_KEY = "classification"
_REGRESS_KEY = "regression"
_PREDICT_KEY = "predict"


def _accuracy_baseline_result(state: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """``max(m, 1 - m)`` of the weighted label mean ``m`` (0 when nothing was weighted)."""
    total, count = state["total"], state["count"]
    mean = torch.where(count != 0, total / torch.where(count != 0, count, 1), torch.zeros_like(total))
    return torch.maximum(mean, 1 - mean)


def _check_loss_reduction(loss_reduction: Any) -> str:
    value = loss_reduction.lower() if isinstance(loss_reduction, str) else loss_reduction
    if value not in LossReduction.ALL:
        raise ValueError(f"Invalid loss_reduction: {loss_reduction!r}. Expected one of "
                         f"{list(LossReduction.ALL)} (TF's SUM or SUM_OVER_BATCH_SIZE; 'none' is "
                         "not allowed for a head).")
    return value


def _check_vocabulary(label_vocabulary: Any, n_classes: int) -> tuple[str, ...] | None:
    if label_vocabulary is None:
        return None
    if not isinstance(label_vocabulary, (list, tuple)):
        raise ValueError(f"label_vocabulary should be a list or a tuple. Given type: "
                         f"{type(label_vocabulary)} ({label_vocabulary!r:.80}).")
    vocab = tuple(v.decode("utf-8") if isinstance(v, bytes) else v for v in label_vocabulary)
    bad = [v for v in vocab if not isinstance(v, str)]
    if bad:
        raise ValueError(f"label_vocabulary must hold strings, got {bad[:3]!r} in {label_vocabulary!r:.80}.")
    if len(vocab) != n_classes:
        raise ValueError(f'"label_vocabulary" does not have "n_classes" items. '
                         f"len(label_vocabulary)={len(vocab)}, n_classes={n_classes}, "
                         f"label_vocabulary={list(vocab)!r:.200}.")
    if len(set(vocab)) != len(vocab):
        raise ValueError(f"label_vocabulary has duplicate entries: {list(vocab)!r:.200}.")
    return vocab


def _is_text(values: np.ndarray) -> bool:
    if values.dtype.kind in "USa":
        return True
    if values.dtype == object and values.size:
        return isinstance(values.flat[0], (str, bytes))
    return False


def _as_str_array(values: np.ndarray) -> np.ndarray:
    if values.dtype.kind == "S" or (values.dtype == object and isinstance(values.flat[0], bytes)):
        return np.char.decode(values.astype(bytes), "utf-8")
    return values.astype(str)


class _Vocabulary:
    """Vectorised string -> id lookup (sorted vocabulary + searchsorted, no per-row Python)."""

    def __init__(self, tokens: Sequence[str]) -> None:
        self.tokens = np.asarray(tokens, dtype=str)
        self.order = np.argsort(self.tokens, kind="stable")
        self.sorted = self.tokens[self.order]
        self.encoded = np.array([t.encode("utf-8") for t in tokens], dtype=object)

    def lookup(self, values: np.ndarray) -> np.ndarray:
        flat = _as_str_array(values.reshape(-1))
        pos = np.searchsorted(self.sorted, flat).clip(0, len(self.sorted) - 1)
        found = self.sorted[pos] == flat
        if not found.all():
            unknown = sorted(set(flat[~found].tolist()))
            raise ValueError(f"Labels must be in label_vocabulary {self.tokens.tolist()!r:.200}; got "
                             f"unknown label(s) {unknown[:10]!r}. Fix the labels or extend "
                             "label_vocabulary.")
        return self.order[pos].reshape(values.shape).astype(np.int64)


class _LazyPredictions(Mapping):
    """A TRAIN spec's predictions, computed on first access (a hook fetching ``predictions`` or
    ``class_ids``), not on every training step: TF's TRAIN spec carries them for hooks, but a
    step that nobody asks them of should not pay for softmax, argmax and class names."""

    __slots__ = ("_compute", "_keys", "_values")

    def __init__(self, compute: Callable[[], dict[str, Any]], keys: Sequence[str]) -> None:
        self._compute = compute
        self._keys = tuple(keys)
        self._values: dict[str, Any] | None = None

    def _materialized(self) -> dict[str, Any]:
        if self._values is None:
            self._values = self._compute()
        return self._values

    def __getitem__(self, key: str) -> Any:
        if key not in self._keys:
            raise KeyError(key)
        return self._materialized()[key]

    def __contains__(self, key: object) -> bool:
        return key in self._keys

    def __iter__(self):
        return iter(self._materialized() if self._values is not None else self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def __repr__(self) -> str:
        state = "computed" if self._values is not None else "not computed yet"
        return f"_LazyPredictions(keys={list(self._keys)}, {state})"


def _first_batch_of_call() -> bool:
    """True until the Estimator has fully validated the first step of this call (then it relaxes
    the spec checks for the remaining steps, ``spec.cheap_validation``); True outside a loop."""
    return not getattr(spec_lib._validation, "cheap", False)


class Head:
    """Base of the canned heads: weights, reduction, logits checks and the spec assembly.

    Subclasses define ``logits_dimension``, ``_labels``, ``_unweighted_loss``, ``predictions``,
    ``_metric_ops`` and ``_export_outputs``.
    """

    logits_dimension: int

    def __init__(self, weight_column: Any = None, loss_reduction: str = LossReduction.SUM_OVER_BATCH_SIZE,
                 name: str | None = None) -> None:
        if weight_column is not None and not isinstance(weight_column, str) and not hasattr(weight_column, "key"):
            raise TypeError(f"weight_column must be a string (feature key) or a numeric_column, "
                            f"given: {weight_column!r}.")
        self.weight_column = weight_column
        self.loss_reduction = _check_loss_reduction(loss_reduction)
        self.name = name

    # -- shared helpers ----------------------------------------------------------------------

    def _key(self, key: str) -> str:
        return key if not self.name else f"{key}/{self.name}"

    def _check_logits(self, logits: Any) -> torch.Tensor:
        if not isinstance(logits, torch.Tensor):
            raise TypeError(f"logits must be a torch.Tensor, given: {type(logits).__name__}.")
        if logits.dim() == 1 and self.logits_dimension == 1:
            logits = logits.unsqueeze(-1)
        if logits.dim() != 2 or logits.shape[-1] != self.logits_dimension:
            raise ValueError(f"logits shape must be [D0, {self.logits_dimension}] "
                             f"(logits_dimension={self.logits_dimension}), got {tuple(logits.shape)}.")
        if not logits.is_floating_point():
            logits = logits.float()
        return logits

    def _weights(self, features: Any, logits: torch.Tensor) -> torch.Tensor | None:
        if self.weight_column is None:
            return None
        key = self.weight_column if isinstance(self.weight_column, str) else self.weight_column.key
        if not isinstance(features, Mapping) or key not in features:
            raise ValueError(f"weight_column {key!r} is not in features "
                             f"{sorted(features) if isinstance(features, Mapping) else features!r:.200}. "
                             "Add the weights to the features dict under that key.")
        weights = features[key]
        if not isinstance(weights, torch.Tensor):
            weights = torch.as_tensor(np.asarray(weights))
        weights = weights.to(device=logits.device, dtype=logits.dtype)
        normalizer = getattr(self.weight_column, "normalizer_fn", None)
        if normalizer is not None:
            weights = normalizer(weights)
        if weights.dim() == 1:
            weights = weights.unsqueeze(-1)
        widths = (1, logits.shape[1]) if self._per_element_weights else (1,)
        if weights.dim() != 2 or weights.shape[0] != logits.shape[0] or weights.shape[1] not in widths:
            raise ValueError(f"weights (weight_column {key!r}) must have shape [batch_size] or "
                             f"[batch_size, 1] = [{logits.shape[0]}, 1], got {tuple(weights.shape)}.")
        return weights

    _per_element_weights = False

    def _require_labels(self, labels: Any) -> None:
        if labels is None:
            raise ValueError("You must provide a labels Tensor. Given: None. Suggested "
                             "troubleshooting steps: Check that your data contain your label feature. "
                             "Check that your input_fn properly parses and returns labels.")
        if isinstance(labels, Mapping):
            raise ValueError(f"labels must be a tensor or an array for a single head, got a dict with "
                             f"keys {sorted(labels)!r:.200}.")

    def _check_label_shape(self, labels: torch.Tensor, logits: torch.Tensor, expected_dim: int) -> torch.Tensor:
        if labels.dim() == 1:
            labels = labels.unsqueeze(-1)
        if labels.dim() != 2 or labels.shape[-1] != expected_dim:
            raise ValueError(f"Mismatched label shape. Expected labels dimension={expected_dim}.  "
                             f"Received {labels.shape[-1] if labels.dim() else 'a scalar'} "
                             f"(labels shape {tuple(labels.shape)}).")
        if labels.shape[0] != logits.shape[0]:
            raise ValueError(f"labels shape must be [D0, {expected_dim}] with D0 the batch size of the "
                             f"logits ({logits.shape[0]}), got {tuple(labels.shape)}.")
        return labels

    # -- public API --------------------------------------------------------------------------

    def loss(self, labels: Any, logits: torch.Tensor, features: Any = None, mode: Any = None,
             regularization_losses: Sequence[torch.Tensor] | None = None) -> torch.Tensor:
        """The training loss: weighted per-example losses reduced by ``loss_reduction``, plus regularization."""
        del mode
        logits = self._check_logits(logits)
        self._require_labels(labels)
        labels_t = self._labels(labels, logits)
        unweighted = self._unweighted_loss(labels_t, logits)
        weights = self._weights(features, logits)
        return self._reduce(unweighted, weights, regularization_losses)

    def _reduce(self, unweighted: torch.Tensor, weights: torch.Tensor | None,
                regularization_losses: Sequence[torch.Tensor] | None) -> torch.Tensor:
        weighted = unweighted if weights is None else unweighted * weights
        loss = weighted.sum()
        if self.loss_reduction == LossReduction.SUM_OVER_BATCH_SIZE:
            loss = loss / max(unweighted.numel(), 1)
        if regularization_losses:
            loss = loss + sum(regularization_losses)
        return loss

    def predictions(self, logits: torch.Tensor) -> dict[str, Any]:
        """The prediction dict for ``logits``."""
        raise NotImplementedError

    def metrics(self, labels: Any = None, logits: torch.Tensor | None = None, features: Any = None,
                regularization_losses: Sequence[torch.Tensor] | None = None) -> dict[str, MetricOp]:
        """The eval metric ops (TF's keys) for one batch.

        Called without logits it is TF 2's ``Head.metrics(regularization_losses=None)``: an empty
        dict for ``update_metrics`` to fill (``head.metrics()`` then
        ``head.update_metrics(eval_metrics, features, logits, labels)``, as a TF 2 model_fn does).

        Example:
            >>> head = BinaryClassHead()
            >>> ops = head.update_metrics(head.metrics(), None, torch.tensor([[2.0], [-1.0]]),
            ...                           torch.tensor([[1], [1]]))
            >>> round(float(ops['accuracy'].result()), 2)
            0.5
        """
        if logits is None:
            if labels is not None and regularization_losses is None:
                regularization_losses = labels  # TF 2's positional metrics(regularization_losses)
            return {}
        logits = self._check_logits(logits)
        self._require_labels(labels)
        labels_t = self._labels(labels, logits)
        unweighted = self._unweighted_loss(labels_t, logits)
        weights = self._weights(features, logits)
        with torch.no_grad():
            ops = self._all_metric_ops(labels_t, logits, self.predictions(logits), unweighted, weights,
                                       regularization_losses)
        return {self._key(k): v for k, v in ops.items()}

    def update_metrics(self, eval_metrics: dict[str, MetricOp], features: Any, logits: torch.Tensor,
                       labels: Any, regularization_losses: Sequence[torch.Tensor] | None = None,
                       mode: Any = None) -> dict[str, MetricOp]:
        """TF 2's ``Head.update_metrics``: adds one batch to ``eval_metrics`` and returns it.

        A key already in ``eval_metrics`` is merged with the batch (the metric over both), so the
        dict can be updated batch after batch outside an Estimator too; in a ``model_fn`` it is
        what ``eval_metric_ops`` takes.
        """
        del mode
        for key, op in self.metrics(labels, logits, features, regularization_losses).items():
            eval_metrics[key] = eval_metrics[key].merge(op) if key in eval_metrics else op
        return eval_metrics

    def _all_metric_ops(self, labels, logits, predictions, unweighted, weights,
                        regularization_losses) -> dict[str, MetricOp]:
        ops = self._metric_ops(labels, logits, predictions, unweighted, weights)
        if regularization_losses:
            total = sum(torch.as_tensor(r).detach().reshape(()) for r in regularization_losses)
            ops[MetricKeys.LOSS_REGULARIZATION] = metrics.mean(total)
        return ops

    def create_estimator_spec(self, features: Any, mode: ModeKeys | str, logits: torch.Tensor,
                              labels: Any = None, optimizer: torch.optim.Optimizer | None = None,
                              train_op_fn: Callable[[torch.Tensor], Any] | None = None,
                              regularization_losses: Sequence[torch.Tensor] | None = None
                              ) -> EstimatorSpec:
        """The ``EstimatorSpec`` for ``mode``.

        Args:
            features: the features dict (for ``weight_column``).
            mode: a ``ModeKeys``.
            logits: ``[batch_size, logits_dimension]``.
            labels: required in TRAIN and EVAL.
            optimizer: TRAIN: the ``train_op`` is ``ee.minimize(optimizer, loss)``.
            train_op_fn: TRAIN, instead of ``optimizer``: ``fn(loss) -> train_op``.
            regularization_losses: added to the training loss (and reported in EVAL).
        """
        mode = ModeKeys(mode)
        logits = self._check_logits(logits)
        predictions: Mapping[str, Any]
        if mode == ModeKeys.PREDICT:
            predictions = self.predictions(logits)
            return EstimatorSpec(mode, predictions=predictions,
                                 export_outputs=self._export_outputs(predictions))
        self._require_labels(labels)
        if mode == ModeKeys.EVAL:
            predictions = self.predictions(logits)
            labels_t = self._labels(labels, logits)
        else:
            # TRAIN: predictions only when a hook asks; label ranges on the first batch of the call.
            predictions = _LazyPredictions(lambda: self.predictions(logits), self._prediction_keys())
            labels_t = self._labels(labels, logits, check_range=_first_batch_of_call())
        unweighted = self._unweighted_loss(labels_t, logits)
        weights = self._weights(features, logits)
        loss = self._reduce(unweighted, weights, regularization_losses)
        if mode == ModeKeys.EVAL:
            with torch.no_grad():
                ops = self._all_metric_ops(labels_t, logits, predictions, unweighted, weights,
                                           regularization_losses)
            return EstimatorSpec(mode, predictions=predictions, loss=loss,
                                 eval_metric_ops={self._key(k): v for k, v in ops.items()})
        train_op = _train_op(optimizer, train_op_fn, loss)
        return EstimatorSpec(mode, predictions=predictions, loss=loss, train_op=train_op)

    def _prediction_keys(self) -> tuple[str, ...]:
        """The keys ``predictions`` returns (known without computing them)."""
        raise NotImplementedError

    # -- subclass hooks ----------------------------------------------------------------------

    def _labels(self, labels: Any, logits: torch.Tensor, check_range: bool = True) -> torch.Tensor:
        raise NotImplementedError

    def _unweighted_loss(self, labels: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def _metric_ops(self, labels: torch.Tensor, logits: torch.Tensor, predictions: Mapping[str, Any],
                    unweighted: torch.Tensor, weights: torch.Tensor | None) -> dict[str, MetricOp]:
        raise NotImplementedError

    def _export_outputs(self, predictions: Mapping[str, Any]) -> dict[str, Any]:
        raise NotImplementedError


def _train_op(optimizer: torch.optim.Optimizer | None, train_op_fn: Callable[[torch.Tensor], Any] | None,
              loss: torch.Tensor) -> Any:
    """TRAIN's ``train_op``: ``minimize(optimizer, loss)`` or ``train_op_fn(loss)``, exactly one given."""
    if optimizer is not None and train_op_fn is None:
        return minimize(optimizer, loss)
    if optimizer is None and train_op_fn is not None:
        return train_op_fn(loss)
    raise ValueError("In TRAIN mode, exactly one of optimizer and train_op_fn must be set; "
                     f"given optimizer={optimizer!r}, train_op_fn={train_op_fn!r}.")


def _name_keys() -> tuple[str, ...]:
    # classes/all_classes are numpy names, left out while torch.export traces (_with_class_names).
    return () if torch.compiler.is_compiling() else (PredictionKeys.CLASSES, PredictionKeys.ALL_CLASSES)


def _tensor_predictions(predictions: Mapping[str, Any]) -> dict[str, torch.Tensor]:
    return {k: v for k, v in predictions.items() if isinstance(v, torch.Tensor)}


class _ClassHead(Head):
    """Label handling shared by the classification heads."""

    n_classes: int

    def __init__(self, n_classes: int, weight_column: Any, label_vocabulary: Any, loss_reduction: str,
                 name: str | None) -> None:
        super().__init__(weight_column, loss_reduction, name)
        self.n_classes = n_classes
        self.label_vocabulary = _check_vocabulary(label_vocabulary, n_classes)
        tokens = self.label_vocabulary or tuple(str(i) for i in range(n_classes))
        self._vocab = _Vocabulary(tokens) if self.label_vocabulary else None
        self._class_names = np.array([t.encode("utf-8") for t in tokens], dtype=object)

    def _label_ids(self, labels: Any, logits: torch.Tensor) -> torch.Tensor:
        """Labels as a tensor on the logits' device: ids when a vocabulary is set, else as given."""
        if isinstance(labels, torch.Tensor):
            if self._vocab is not None:
                raise ValueError(f"Labels dtype should be string if there is a vocabulary "
                                 f"(label_vocabulary={list(self.label_vocabulary or ())!r:.100}). Instead got "
                                 f"{labels.dtype}. Pass the class names as labels, or drop label_vocabulary.")
            return labels.to(logits.device)
        array = np.asarray(labels)
        if _is_text(array):
            if self._vocab is None:
                raise ValueError(f"Labels dtype should be integer. Instead got strings (e.g. "
                                 f"{array.reshape(-1)[:3].tolist()!r}). Set label_vocabulary to the "
                                 "list of class names to use string labels.")
            return torch.from_numpy(self._vocab.lookup(array)).to(logits.device)
        if self._vocab is not None:
            raise ValueError(f"Labels dtype should be string if there is a vocabulary "
                             f"(label_vocabulary={list(self.label_vocabulary or ())!r:.100}). Instead got "
                             f"{array.dtype}.")
        if array.dtype.kind not in "biuf":
            raise ValueError(f"Labels must be numbers or strings, got dtype {array.dtype}.")
        return torch.as_tensor(array).to(logits.device)

    def _check_range(self, labels: torch.Tensor, upper: int) -> None:
        if labels.numel() == 0:
            return
        if bool((labels < 0).any()):
            raise ValueError(f"Labels must be >= 0; got {labels.min().item()!r}.")
        if bool((labels > upper).any()):
            raise ValueError(f"Labels must be <= n_classes - 1 = {upper}; got "
                             f"{labels.max().item()!r} (n_classes={self.n_classes}).")

    def _with_class_names(self, predictions: dict[str, Any]) -> dict[str, Any]:
        """Adds the ``classes``/``all_classes`` names (numpy bytes) unless torch.export is tracing:
        names are not tensors, so an exported program serves the ids and scores only."""
        if not torch.compiler.is_compiling():
            predictions[PredictionKeys.CLASSES], predictions[PredictionKeys.ALL_CLASSES] = (
                self._classes(predictions[PredictionKeys.CLASS_IDS]))
        return predictions

    def _all_class_ids(self, scores: torch.Tensor) -> torch.Tensor:
        return torch.arange(self.n_classes, dtype=torch.int32, device=scores.device).expand(
            scores.shape[0], self.n_classes)

    def _name_lookup(self, ids: torch.Tensor) -> StringLookup:
        return StringLookup(ids, list(self._class_names))

    def _class_export_outputs(self, predictions: Mapping[str, Any]) -> dict[str, Any]:
        """TF's ``classification`` (scores + the class names tiled per example) and ``predict`` (every
        prediction; ``classes``/``all_classes`` as lookups of the id tensors)."""
        probabilities = predictions[PredictionKeys.PROBABILITIES]
        all_ids = predictions.get(PredictionKeys.ALL_CLASS_IDS)
        if all_ids is None:
            all_ids = self._all_class_ids(probabilities)
        classification = ClassificationOutput(scores=probabilities, classes=self._name_lookup(all_ids))
        everything: dict[str, Any] = _tensor_predictions(predictions)
        if PredictionKeys.CLASS_IDS in predictions:
            everything[PredictionKeys.CLASSES] = self._name_lookup(predictions[PredictionKeys.CLASS_IDS])
            everything[PredictionKeys.ALL_CLASSES] = self._name_lookup(all_ids)
        else:  # multi-label: ``classes`` are all the names, tiled
            everything[PredictionKeys.CLASSES] = self._name_lookup(all_ids)
        return {DEFAULT_SERVING_KEY: classification, _CLASSIFY_KEY: classification,
                _PREDICT_KEY: PredictOutput(everything)}

    def _classes(self, class_ids: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
        ids = class_ids.detach().cpu().numpy()
        classes = self._class_names[ids]
        all_classes = np.broadcast_to(self._class_names, (ids.shape[0], self.n_classes)).copy()
        return classes, all_classes


class BinaryClassHead(_ClassHead):
    """Binary classification: sigmoid cross-entropy on one logit (TF's ``BinaryClassHead``).

    Predictions: ``logits`` [B,1], ``logistic`` [B,1], ``probabilities`` [B,2], ``class_ids`` [B,1],
    ``classes`` [B,1] (bytes), ``all_class_ids`` [B,2], ``all_classes`` [B,2] (bytes).
    Eval metrics: ``accuracy``, ``accuracy_baseline``, ``auc``, ``auc_precision_recall``,
    ``average_loss``, ``label/mean``, ``prediction/mean``, ``precision``, ``recall``.

    Args:
        weight_column: feature key (or numeric_column) of per-example weights.
        thresholds: probabilities in (0, 1); each ``t`` adds TF's ``accuracy/positive_threshold_<t>``,
            ``precision/positive_threshold_<t>`` and ``recall/positive_threshold_<t>`` (the logistic
            above ``t`` counts as the positive class).
        label_vocabulary: two class names (labels are then strings).
        loss_reduction: ``'sum_over_batch_size'`` (default) or ``'sum'``.
        name: suffix of the metric keys (``accuracy/<name>``).

    Example:
        >>> head = BinaryClassHead()
        >>> p = head.predictions(torch.tensor([[0.3], [-0.4]]))
        >>> p['class_ids'].tolist(), p['classes'].tolist()
        ([[1], [0]], [[b'1'], [b'0']])
    """

    logits_dimension = 1

    def __init__(self, weight_column: Any = None, thresholds: Sequence[float] | None = None,
                 label_vocabulary: Sequence[str] | None = None,
                 loss_reduction: str = LossReduction.SUM_OVER_BATCH_SIZE, name: str | None = None) -> None:
        super().__init__(2, weight_column, label_vocabulary, loss_reduction, name)
        thresholds = tuple(thresholds) if thresholds else ()
        for threshold in thresholds:
            if threshold <= 0.0 or threshold >= 1.0:
                raise ValueError(f"thresholds not in (0, 1): {(thresholds,)}.")  # TF's message
        self.thresholds = thresholds

    def _labels(self, labels: Any, logits: torch.Tensor, check_range: bool = True) -> torch.Tensor:
        labels_t = self._check_label_shape(self._label_ids(labels, logits), logits, 1)
        labels_t = labels_t.to(logits.dtype)
        if check_range:
            self._check_range(labels_t, 1)
        return labels_t

    def _prediction_keys(self) -> tuple[str, ...]:
        return (PredictionKeys.LOGITS, PredictionKeys.LOGISTIC, PredictionKeys.PROBABILITIES,
                PredictionKeys.CLASS_IDS, PredictionKeys.ALL_CLASS_IDS, *_name_keys())

    def _unweighted_loss(self, labels: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
        return F.binary_cross_entropy_with_logits(logits, labels, reduction="none")

    def predictions(self, logits: torch.Tensor) -> dict[str, Any]:
        logits = self._check_logits(logits)
        logistic = torch.sigmoid(logits)
        two_class_logits = torch.cat([torch.zeros_like(logits), logits], dim=-1)
        probabilities = torch.softmax(two_class_logits, dim=-1)
        class_ids = torch.argmax(two_class_logits, dim=-1, keepdim=True)
        return self._with_class_names({
            PredictionKeys.LOGITS: logits,
            PredictionKeys.LOGISTIC: logistic,
            PredictionKeys.PROBABILITIES: probabilities,
            PredictionKeys.CLASS_IDS: class_ids,
            PredictionKeys.ALL_CLASS_IDS: torch.arange(2, dtype=torch.int32, device=logits.device).expand(logits.shape[0], 2),
        })

    def _metric_ops(self, labels, logits, predictions, unweighted, weights) -> dict[str, MetricOp]:
        logistic = predictions[PredictionKeys.LOGISTIC]
        class_ids = predictions[PredictionKeys.CLASS_IDS]
        label_mean = metrics.mean(labels, weights=weights)
        ops = {
            MetricKeys.LOSS_MEAN: metrics.mean(unweighted, weights=weights),
            MetricKeys.ACCURACY: metrics.accuracy(labels, class_ids, weights=weights),
            MetricKeys.PRECISION: metrics.precision(labels, class_ids, weights=weights),
            MetricKeys.RECALL: metrics.recall(labels, class_ids, weights=weights),
            MetricKeys.PREDICTION_MEAN: metrics.mean(logistic, weights=weights),
            MetricKeys.LABEL_MEAN: label_mean,
            MetricKeys.ACCURACY_BASELINE: MetricOp(dict(label_mean.state), _accuracy_baseline_result),
            MetricKeys.AUC: metrics.auc(labels, logistic, weights=weights, curve="ROC"),
            MetricKeys.AUC_PR: metrics.auc(labels, logistic, weights=weights, curve="PR"),
        }
        for threshold in self.thresholds:  # Keras' BinaryAccuracy/Precision/Recall(threshold)
            above = (logistic > threshold).to(labels.dtype)
            ops[f"accuracy/positive_threshold_{threshold:g}"] = metrics.accuracy(labels, above, weights=weights)
            ops[f"precision/positive_threshold_{threshold:g}"] = metrics.precision(labels, above, weights=weights)
            ops[f"recall/positive_threshold_{threshold:g}"] = metrics.recall(labels, above, weights=weights)
        return ops

    def _export_outputs(self, predictions: Mapping[str, Any]) -> dict[str, Any]:
        outputs = self._class_export_outputs(predictions)
        outputs[_REGRESS_KEY] = RegressionOutput(predictions[PredictionKeys.LOGISTIC])
        return outputs


class MultiClassHead(_ClassHead):
    """Multi-class classification: softmax cross-entropy over ``n_classes`` logits.

    Predictions: ``logits``, ``probabilities``, ``class_ids`` [B,1], ``classes`` [B,1] (bytes),
    ``all_class_ids`` [B,n], ``all_classes`` [B,n]. Eval metrics: ``accuracy``, ``average_loss``.

    Args:
        n_classes: number of classes, > 2 (use ``BinaryClassHead`` for 2).
        weight_column, label_vocabulary, loss_reduction, name: as in ``BinaryClassHead``.

    Example:
        >>> head = MultiClassHead(3, label_vocabulary=['a', 'b', 'c'])
        >>> head.predictions(torch.tensor([[0.0, 2.0, 1.0]]))['classes'].tolist()
        [[b'b']]
    """

    def __init__(self, n_classes: int, weight_column: Any = None, label_vocabulary: Sequence[str] | None = None,
                 loss_reduction: str = LossReduction.SUM_OVER_BATCH_SIZE, name: str | None = None) -> None:
        if isinstance(n_classes, bool) or not isinstance(n_classes, (int, np.integer)) or n_classes <= 2:
            raise ValueError(f"n_classes must be > 2: {n_classes!r}. Use BinaryClassHead (n_classes=2) "
                             "for two classes.")
        super().__init__(int(n_classes), weight_column, label_vocabulary, loss_reduction, name)
        self.logits_dimension = int(n_classes)

    def _prediction_keys(self) -> tuple[str, ...]:
        return (PredictionKeys.LOGITS, PredictionKeys.PROBABILITIES, PredictionKeys.CLASS_IDS,
                PredictionKeys.ALL_CLASS_IDS, *_name_keys())

    def _labels(self, labels: Any, logits: torch.Tensor, check_range: bool = True) -> torch.Tensor:
        labels_t = self._check_label_shape(self._label_ids(labels, logits), logits, 1)
        if labels_t.is_floating_point():
            # A value check (a device sync), done with the range check.
            if check_range and not bool((labels_t == labels_t.round()).all()):
                raise ValueError(f"Labels dtype should be integer. Instead got {labels_t.dtype} with "
                                 "non-integral values; pass class ids 0..n_classes-1.")
        elif labels_t.dtype == torch.bool:
            raise ValueError("Labels dtype should be integer. Instead got bool.")
        labels_t = labels_t.to(torch.int64)
        if check_range:
            self._check_range(labels_t, self.n_classes - 1)
        return labels_t

    def _unweighted_loss(self, labels: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits, labels.reshape(-1), reduction="none").unsqueeze(-1)

    def predictions(self, logits: torch.Tensor) -> dict[str, Any]:
        logits = self._check_logits(logits)
        class_ids = torch.argmax(logits, dim=-1, keepdim=True)
        n = self.n_classes
        return self._with_class_names({
            PredictionKeys.LOGITS: logits,
            PredictionKeys.PROBABILITIES: torch.softmax(logits, dim=-1),
            PredictionKeys.CLASS_IDS: class_ids,
            PredictionKeys.ALL_CLASS_IDS: torch.arange(n, dtype=torch.int32, device=logits.device).expand(logits.shape[0], n),
        })

    def _metric_ops(self, labels, logits, predictions, unweighted, weights) -> dict[str, MetricOp]:
        return {
            MetricKeys.LOSS_MEAN: metrics.mean(unweighted, weights=weights),
            MetricKeys.ACCURACY: metrics.accuracy(labels, predictions[PredictionKeys.CLASS_IDS],
                                                  weights=weights),
        }

    def _export_outputs(self, predictions: Mapping[str, Any]) -> dict[str, Any]:
        return self._class_export_outputs(predictions)


class MultiLabelHead(_ClassHead):
    """Multi-label classification: an independent sigmoid per class (TF's ``MultiLabelHead``).

    Labels are multi-hot ``[B, n_classes]`` (0/1 numbers). The per-example loss is the sigmoid
    cross-entropy averaged over the classes (TF's), then weighted and reduced.
    Predictions: ``logits``, ``probabilities`` [B,n] (sigmoid), ``classes`` [B,n] (every class
    name, bytes). Eval metrics: ``average_loss``, ``auc``, ``auc_precision_recall`` and, per
    threshold ``t`` in ``thresholds``, ``accuracy/positive_threshold_<t>``,
    ``precision/positive_threshold_<t>``, ``recall/positive_threshold_<t>``.

    Args:
        n_classes: number of classes, > 1.
        weight_column: feature key (or numeric_column) of per-example weights.
        thresholds: probabilities in (0, 1) for the thresholded metrics.
        label_vocabulary: class names (used for ``classes``; labels stay multi-hot).
        loss_reduction: ``'sum_over_batch_size'`` (default) or ``'sum'``.
        name: suffix of the metric keys.

    Example:
        >>> head = MultiLabelHead(3)
        >>> round(float(head.loss(torch.tensor([[1, 0, 1]]), torch.zeros(1, 3))), 4)
        0.6931
    """

    def __init__(self, n_classes: int, weight_column: Any = None, thresholds: Sequence[float] | None = None,
                 label_vocabulary: Sequence[str] | None = None,
                 loss_reduction: str = LossReduction.SUM_OVER_BATCH_SIZE, name: str | None = None) -> None:
        if isinstance(n_classes, bool) or not isinstance(n_classes, (int, np.integer)) or n_classes <= 1:
            raise ValueError(f"n_classes must be > 1 for multi-label classification. Given: {n_classes!r}")
        thresholds = tuple(thresholds or ())
        for threshold in thresholds:
            if not 0 < threshold < 1:
                raise ValueError(f"thresholds must be in (0, 1) range. Given: {threshold!r}")
        super().__init__(int(n_classes), weight_column, label_vocabulary, loss_reduction, name)
        self.logits_dimension = int(n_classes)
        self.thresholds = thresholds

    def _labels(self, labels: Any, logits: torch.Tensor, check_range: bool = True) -> torch.Tensor:
        if not isinstance(labels, torch.Tensor):
            array = np.asarray(labels)
            if array.dtype.kind not in "biuf":
                raise ValueError(f"labels must be a multi-hot tensor of 0/1 numbers [batch, "
                                 f"{self.n_classes}], got dtype {array.dtype}.")
            labels = torch.as_tensor(array)
        labels_t = self._check_label_shape(labels.to(logits.device), logits, self.n_classes)
        if check_range and labels_t.numel() and not bool(((labels_t == 0) | (labels_t == 1)).all()):
            raise ValueError("labels must be an integer indicator Tensor with values in [0, 1] "
                             f"(multi-hot, shape [batch, {self.n_classes}]).")
        return labels_t.to(logits.dtype)

    def _unweighted_loss(self, labels: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
        losses = F.binary_cross_entropy_with_logits(logits, labels, reduction="none")
        return losses.mean(dim=-1, keepdim=True)

    def _prediction_keys(self) -> tuple[str, ...]:
        names = () if torch.compiler.is_compiling() else (PredictionKeys.CLASSES,)
        return (PredictionKeys.LOGITS, PredictionKeys.PROBABILITIES, *names)

    def predictions(self, logits: torch.Tensor) -> dict[str, Any]:
        logits = self._check_logits(logits)
        predictions: dict[str, Any] = {PredictionKeys.LOGITS: logits,
                                       PredictionKeys.PROBABILITIES: torch.sigmoid(logits)}
        if not torch.compiler.is_compiling():
            predictions[PredictionKeys.CLASSES] = np.broadcast_to(
                self._class_names, (logits.shape[0], self.n_classes)).copy()
        return predictions

    def _metric_ops(self, labels, logits, predictions, unweighted, weights) -> dict[str, MetricOp]:
        probabilities = predictions[PredictionKeys.PROBABILITIES]
        element_weights = None if weights is None else weights.expand_as(probabilities)
        ops = {
            MetricKeys.LOSS_MEAN: metrics.mean(unweighted, weights=weights),
            MetricKeys.AUC: metrics.auc(labels, probabilities, weights=element_weights, curve="ROC"),
            MetricKeys.AUC_PR: metrics.auc(labels, probabilities, weights=element_weights, curve="PR"),
        }
        for threshold in self.thresholds:
            above = (probabilities > threshold).to(labels.dtype)
            ops[f"accuracy/positive_threshold_{threshold:g}"] = metrics.accuracy(
                labels, above, weights=element_weights)
            ops[f"precision/positive_threshold_{threshold:g}"] = metrics.precision(
                labels, above, weights=element_weights)
            ops[f"recall/positive_threshold_{threshold:g}"] = metrics.recall(
                labels, above, weights=element_weights)
        return ops

    def _export_outputs(self, predictions: Mapping[str, Any]) -> dict[str, Any]:
        return self._class_export_outputs(predictions)


class RegressionHead(Head):
    """Regression: mean squared error on ``label_dimension`` outputs (TF's ``RegressionHead``).

    Predictions: ``predictions`` [B, label_dimension] (``inverse_link_fn(logits)`` when given,
    then also ``logits``). Eval metrics: ``average_loss``, ``label/mean``, ``prediction/mean``.

    Args:
        label_dimension: number of regression targets per example, >= 1.
        weight_column, loss_reduction, name: as in ``BinaryClassHead``.
        loss_fn: ``fn(labels, logits) -> per-element loss`` of ``logits``' shape (default: squared
            error), as TF's ``loss_fn``.
        inverse_link_fn: maps logits to the predicted values (e.g. ``torch.exp``).

    Example:
        >>> head = RegressionHead()
        >>> float(head.loss(torch.tensor([[1.0], [3.0]]), torch.tensor([[2.0], [1.0]])))
        2.5
    """

    _per_element_weights = True

    def __init__(self, label_dimension: int = 1, weight_column: Any = None,
                 loss_reduction: str = LossReduction.SUM_OVER_BATCH_SIZE,
                 loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
                 inverse_link_fn: Callable[[torch.Tensor], torch.Tensor] | None = None,
                 name: str | None = None) -> None:
        if isinstance(label_dimension, bool) or not isinstance(label_dimension, (int, np.integer)) or label_dimension < 1:
            raise ValueError(f"Invalid label_dimension {label_dimension!r}. It must be an integer >= 1.")
        for argument, value in (("loss_fn", loss_fn), ("inverse_link_fn", inverse_link_fn)):
            if value is not None and not callable(value):
                raise ValueError(f"{argument} must be callable, given: {value!r}.")
        super().__init__(weight_column, loss_reduction, name)
        self.logits_dimension = int(label_dimension)
        self.loss_fn = loss_fn
        self.inverse_link_fn = inverse_link_fn

    def _labels(self, labels: Any, logits: torch.Tensor, check_range: bool = True) -> torch.Tensor:
        if not isinstance(labels, torch.Tensor):
            array = np.asarray(labels)
            if array.dtype.kind not in "biuf":
                raise ValueError(f"Regression labels must be numbers, got dtype {array.dtype} "
                                 f"(e.g. {array.reshape(-1)[:3].tolist()!r}).")
            labels = torch.as_tensor(array)
        labels = self._check_label_shape(labels.to(logits.device), logits, self.logits_dimension)
        return labels.to(logits.dtype)

    def _unweighted_loss(self, labels: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
        if self.loss_fn is None:
            return (logits - labels).square()
        loss = self.loss_fn(labels, logits)
        if not isinstance(loss, torch.Tensor) or loss.shape != logits.shape:
            raise ValueError(f"loss_fn must return a tensor of the logits' shape {tuple(logits.shape)} "
                             f"(one loss per element), got {getattr(loss, 'shape', type(loss).__name__)}.")
        return loss

    def _prediction_keys(self) -> tuple[str, ...]:
        if self.inverse_link_fn is None:
            return (PredictionKeys.PREDICTIONS,)
        return (PredictionKeys.PREDICTIONS, PredictionKeys.LOGITS)

    def predictions(self, logits: torch.Tensor) -> dict[str, Any]:
        logits = self._check_logits(logits)
        if self.inverse_link_fn is None:
            return {PredictionKeys.PREDICTIONS: logits}
        return {PredictionKeys.PREDICTIONS: self.inverse_link_fn(logits), PredictionKeys.LOGITS: logits}

    def _metric_ops(self, labels, logits, predictions, unweighted, weights) -> dict[str, MetricOp]:
        return {
            MetricKeys.LOSS_MEAN: metrics.mean(unweighted, weights=weights),
            MetricKeys.PREDICTION_MEAN: metrics.mean(predictions[PredictionKeys.PREDICTIONS], weights=weights),
            MetricKeys.LABEL_MEAN: metrics.mean(labels, weights=weights),
        }

    def _export_outputs(self, predictions: Mapping[str, Any]) -> dict[str, Any]:
        regression = RegressionOutput(predictions[PredictionKeys.PREDICTIONS])
        return {
            DEFAULT_SERVING_KEY: regression,
            _REGRESS_KEY: regression,
            _PREDICT_KEY: PredictOutput(_tensor_predictions(predictions)),
        }


class PoissonRegressionHead(RegressionHead):
    """Poisson regression (TF's ``PoissonRegressionHead``): ``log_poisson_loss`` on log-rates.

    Per element, with label ``z`` and logit ``c`` (the log of the predicted rate)::

        loss = exp(c) - z * c [+ z * log(z) - z + 0.5 * log(2 * pi * z)  where z > 1]

    (the bracket is Stirling's ``log(z!)``, ``compute_full_loss=True`` as in TF). Predictions:
    ``predictions = exp(logits)`` and ``logits``.

    Example:
        >>> head = PoissonRegressionHead()
        >>> round(float(head.loss(torch.tensor([[1.0]]), torch.tensor([[0.0]]))), 4)
        1.0
    """

    def __init__(self, label_dimension: int = 1, weight_column: Any = None,
                 loss_reduction: str = LossReduction.SUM_OVER_BATCH_SIZE, compute_full_loss: bool = True,
                 name: str | None = None) -> None:
        self.compute_full_loss = bool(compute_full_loss)
        super().__init__(label_dimension, weight_column, loss_reduction, loss_fn=self._poisson_loss,
                         inverse_link_fn=torch.exp, name=name)

    def _poisson_loss(self, labels: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
        loss = torch.exp(logits) - labels * logits
        if self.compute_full_loss:
            safe = torch.where(labels > 1, labels, torch.ones_like(labels))
            stirling = safe * torch.log(safe) - safe + 0.5 * torch.log(2 * np.pi * safe)
            loss = loss + torch.where(labels > 1, stirling, torch.zeros_like(labels))
        return loss


class LogisticRegressionHead(RegressionHead):
    """Logistic regression on a probability label in [0, 1] (TF's ``LogisticRegressionHead``).

    Loss: sigmoid cross-entropy; predictions: ``predictions = sigmoid(logits)`` and ``logits``;
    metrics as ``RegressionHead``. Labels outside [0, 1] raise.

    Example:
        >>> head = LogisticRegressionHead()
        >>> round(float(head.loss(torch.tensor([[0.5]]), torch.tensor([[0.0]]))), 4)
        0.6931
    """

    def __init__(self, weight_column: Any = None, loss_reduction: str = LossReduction.SUM_OVER_BATCH_SIZE,
                 name: str | None = None) -> None:
        super().__init__(1, weight_column, loss_reduction, loss_fn=self._logistic_loss,
                         inverse_link_fn=torch.sigmoid, name=name)

    def _labels(self, labels: Any, logits: torch.Tensor, check_range: bool = True) -> torch.Tensor:
        labels_t = super()._labels(labels, logits, check_range)
        if check_range and labels_t.numel() and bool(((labels_t < 0) | (labels_t > 1)).any()):
            raise ValueError(f"Labels must be in range [0, 1]; got values in "
                             f"[{labels_t.min().item()!r}, {labels_t.max().item()!r}].")
        return labels_t

    @staticmethod
    def _logistic_loss(labels: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
        return F.binary_cross_entropy_with_logits(logits, labels, reduction="none")


class MultiHead(Head):
    """Several heads trained together on one set of logits (TF's ``MultiHead``).

    ``logits`` is a dict ``{head.name: logits}`` or one tensor ``[B, sum of the heads'
    logits_dimension]``, split in head order; ``labels`` a dict ``{head.name: labels}``. The
    training loss is ``sum(head_weight * head loss)``. Predictions are keyed ``'<head name>/<key>'``
    (TF keys them by the tuple ``(head name, key)``; an EstimatorSpec here needs string keys);
    eval metrics are each head's (suffixed with its name) plus ``loss/<head name>``. Export:
    ``serving_default`` serves the first head, each head's outputs are also under
    ``<head name>`` / ``<head name>/<key>``, and ``predict`` merges every head's predict outputs.

    Args:
        heads: heads with distinct, non-empty names.
        head_weights: optional loss weight per head.

    Example:
        >>> head = MultiHead([RegressionHead(name='a'), BinaryClassHead(name='b')])
        >>> head.logits_dimension, sorted(head.predictions(torch.zeros(1, 2)))[:2]
        (2, ['a/predictions', 'b/all_class_ids'])
    """

    def __init__(self, heads: Sequence[Head], head_weights: Sequence[float] | None = None) -> None:
        if not heads:
            raise ValueError(f"Must specify heads. Given: {heads!r}")
        heads = tuple(heads)
        if head_weights:
            if len(head_weights) != len(heads):
                raise ValueError(f"heads and head_weights must have the same size. Given len(heads): "
                                 f"{len(heads)}. Given len(head_weights): {len(head_weights)}.")
        names: list[str] = []
        for head in heads:
            if not isinstance(head, Head) or isinstance(head, MultiHead):
                raise ValueError(f"heads must be single Head instances, given: {head!r:.200}.")
            if not head.name:
                raise ValueError(f"All given heads must have name specified. Given: {head!r:.200}")
            names.append(head.name)
        if len(set(names)) != len(names):
            raise ValueError(f"Heads must have distinct names, given: {names}.")
        reductions = {head.loss_reduction for head in heads}
        if len(reductions) > 1:
            raise ValueError(f"The loss_reduction must be the same for different heads. Given: "
                             f"{[head.loss_reduction for head in heads]}")
        super().__init__(None, reductions.pop(), "_".join(names))
        self.heads = heads
        self._names = tuple(names)  # the heads' names (each checked to be set)
        self.head_weights = tuple(float(w) for w in head_weights) if head_weights else ()
        self.logits_dimension = sum(head.logits_dimension for head in heads)

    def _key(self, key: str) -> str:
        return key  # each head already suffixes its own keys

    def _split_logits(self, logits: Any) -> dict[str, torch.Tensor]:
        if isinstance(logits, Mapping):
            missing = [h.name for h in self.heads if h.name not in logits]
            if missing:
                raise ValueError(f"logits has missing values for head(s): {missing}")
            return {name: logits[name] for name in self._names}
        logits = Head._check_logits(self, logits)
        parts = torch.split(logits, [h.logits_dimension for h in self.heads], dim=-1)
        return dict(zip(self._names, parts))

    def _split_labels(self, labels: Any) -> Mapping[str, Any]:
        if not isinstance(labels, Mapping):
            raise ValueError(f"labels must be a dict. Given: {labels!r:.200}")
        missing = [h.name for h in self.heads if h.name not in labels]
        if missing:
            raise ValueError(f"labels has missing values for head(s): {missing}")
        return labels

    def _head_losses(self, features, logits_dict, labels) -> list[torch.Tensor]:
        return [head.loss(labels[head.name], logits_dict[head.name], features) for head in self.heads]

    def _merged_loss(self, losses: Sequence[torch.Tensor],
                     regularization_losses: Sequence[torch.Tensor] | None) -> torch.Tensor:
        if self.head_weights:
            losses = [loss * weight for loss, weight in zip(losses, self.head_weights)]
        total = losses[0]
        for loss in losses[1:]:
            total = total + loss
        if regularization_losses:
            total = total + sum(regularization_losses)
        return total

    def loss(self, labels: Any, logits: Any, features: Any = None, mode: Any = None,
             regularization_losses: Sequence[torch.Tensor] | None = None) -> torch.Tensor:
        """``sum(head_weight * head.loss)`` plus the regularization losses."""
        logits_dict = self._split_logits(logits)
        labels = self._split_labels(labels)
        return self._merged_loss(self._head_losses(features, logits_dict, labels), regularization_losses)

    def _prediction_keys(self) -> tuple[str, ...]:
        return tuple(f"{h.name}/{k}" for h in self.heads for k in h._prediction_keys())

    def predictions(self, logits: Any) -> dict[str, Any]:
        logits_dict = self._split_logits(logits)
        return {f"{name}/{key}": value for name, head in zip(self._names, self.heads)
                for key, value in head.predictions(logits_dict[name]).items()}

    def metrics(self, labels: Any = None, logits: Any = None, features: Any = None,
                regularization_losses: Sequence[torch.Tensor] | None = None) -> dict[str, MetricOp]:
        if logits is None:  # TF 2's metrics(regularization_losses): filled by update_metrics
            return {}
        logits_dict = self._split_logits(logits)
        labels = self._split_labels(labels)
        ops: dict[str, MetricOp] = {}
        with torch.no_grad():
            losses = self._head_losses(features, logits_dict, labels)
            for name, head, loss in zip(self._names, self.heads, losses):
                ops[f"{MetricKeys.LOSS}/{name}"] = metrics.mean(loss.detach())
                ops.update(head.metrics(labels[name], logits_dict[name], features))
            if regularization_losses:
                total = sum(torch.as_tensor(r).detach().reshape(()) for r in regularization_losses)
                ops[MetricKeys.LOSS_REGULARIZATION] = metrics.mean(total)
        return ops

    def _export_outputs(self, predictions: Mapping[str, Any]) -> dict[str, Any]:
        per_head = {}
        for name, head in zip(self._names, self.heads):
            prefix = f"{name}/"
            own = {k[len(prefix):]: v for k, v in predictions.items() if k.startswith(prefix)}
            per_head[name] = head._export_outputs(own)
        first = per_head[self._names[0]]
        if DEFAULT_SERVING_KEY not in first:
            raise ValueError(f"{self.heads[0].name} did not specify default export_outputs.")
        outputs: dict[str, Any] = {DEFAULT_SERVING_KEY: first[DEFAULT_SERVING_KEY]}
        merged: dict[str, Any] = {}
        for name, head_outputs in per_head.items():
            for key, output in head_outputs.items():
                outputs[name if key == DEFAULT_SERVING_KEY else f"{name}/{key}"] = output
                if key == _PREDICT_KEY and isinstance(output, PredictOutput):
                    merged.update({f"{name}/{k}": v for k, v in output.outputs.items()})
        outputs[_PREDICT_KEY] = PredictOutput(merged)
        return outputs

    def create_estimator_spec(self, features: Any, mode: ModeKeys | str, logits: Any,
                              labels: Any = None, optimizer: torch.optim.Optimizer | None = None,
                              train_op_fn: Callable[[torch.Tensor], Any] | None = None,
                              regularization_losses: Sequence[torch.Tensor] | None = None
                              ) -> EstimatorSpec:
        """The merged spec: see the class docstring."""
        mode = ModeKeys(mode)
        logits_dict = self._split_logits(logits)
        if mode == ModeKeys.PREDICT:
            predictions = self.predictions(logits_dict)
            return EstimatorSpec(mode, predictions=predictions, export_outputs=self._export_outputs(predictions))
        self._require_labels_dict(labels)
        labels = self._split_labels(labels)
        loss = self._merged_loss(self._head_losses(features, logits_dict, labels), regularization_losses)
        if mode == ModeKeys.EVAL:
            return EstimatorSpec(mode, predictions=self.predictions(logits_dict), loss=loss,
                                 eval_metric_ops=self.metrics(labels, logits_dict, features,
                                                              regularization_losses))
        train_op = _train_op(optimizer, train_op_fn, loss)
        lazy = _LazyPredictions(lambda: self.predictions(logits_dict), self._prediction_keys())
        return EstimatorSpec(mode, predictions=lazy, loss=loss, train_op=train_op)

    def _require_labels_dict(self, labels: Any) -> None:
        if labels is None:
            raise ValueError("You must provide a labels Tensor. Given: None. Suggested "
                             "troubleshooting steps: Check that your data contain your label feature. "
                             "Check that your input_fn properly parses and returns labels.")


def classification_head(n_classes: int, weight_column: Any = None,
                        label_vocabulary: Sequence[str] | None = None,
                        loss_reduction: str = LossReduction.SUM_OVER_BATCH_SIZE) -> Head:
    """TF's head choice for the canned classifiers: binary for ``n_classes == 2``, else multi-class.

    Example:
        >>> type(classification_head(3)).__name__
        'MultiClassHead'
    """
    if n_classes == 2 and not isinstance(n_classes, bool):
        return BinaryClassHead(weight_column=weight_column, label_vocabulary=label_vocabulary,
                               loss_reduction=loss_reduction)
    return MultiClassHead(n_classes, weight_column=weight_column, label_vocabulary=label_vocabulary,
                          loss_reduction=loss_reduction)
