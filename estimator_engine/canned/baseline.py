"""``BaselineClassifier`` / ``BaselineRegressor``: a learned bias only (TF's ``canned/baseline.py``).

The model ignores feature values: its logits are one ``baseline/bias`` variable of
``[logits_dimension]`` (zeros at first), repeated over the batch. Trained, it predicts the class
prior (classifier) or the label mean (regressor) — the sanity baseline other models must beat.
The default optimizer is FTRL with learning rate 0.3, as in TF.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch

from estimator_engine.canned.dnn import check_features
from estimator_engine.canned.heads import Head, LossReduction, RegressionHead, classification_head
from estimator_engine.canned.optimizers import build_optimizer, get_optimizer_factory
from estimator_engine.estimator import Estimator
from estimator_engine.mode_keys import ModeKeys
from estimator_engine.model_state import get_module, get_optimizer
from estimator_engine.run_config import RunConfig
from estimator_engine.spec import EstimatorSpec

__all__ = ["BaselineClassifier", "BaselineRegressor"]

# TF's learning rate for the baseline optimizer given by name.
_LEARNING_RATE = 0.3


class _Bias(torch.nn.Module):
    """The baseline's only variable: ``bias`` of ``[units]``, zeros."""

    def __init__(self, units: int) -> None:
        super().__init__()
        self.bias = torch.nn.Parameter(torch.zeros(units))

    def forward(self, batch_size: int) -> torch.Tensor:
        return self.bias.unsqueeze(0).expand(batch_size, -1)


def _batch_size(features: Mapping[str, Any]) -> int:
    """TF's rule: every feature must have the same leading dimension, which is the batch size."""
    sizes = {}
    for key, value in features.items():
        shape = getattr(value, "shape", None)
        if shape is None:
            shape = np.shape(value)
        if len(shape) == 0:
            raise ValueError(f"Feature {key!r} is a scalar; every feature needs a leading batch dimension.")
        sizes[key] = int(shape[0])
    if not sizes:
        raise ValueError("features is empty; the baseline needs at least one feature to know the batch size.")
    if len(set(sizes.values())) != 1:
        raise ValueError(f"Batch size of all features must be the same, got {sizes!r:.200}.")
    return next(iter(sizes.values()))


def _baseline_model_fn(features: Any, labels: Any, mode: ModeKeys, head: Head,
                       optimizer_factory: Callable[..., torch.optim.Optimizer]) -> EstimatorSpec:
    features = check_features(features)
    module = get_module("baseline", lambda: _Bias(head.logits_dimension))
    logits = module(_batch_size(features))
    if mode != ModeKeys.TRAIN:
        return head.create_estimator_spec(features, mode, logits, labels)
    optimizer = get_optimizer("baseline", lambda: build_optimizer(optimizer_factory, list(module.parameters())))
    return head.create_estimator_spec(features, mode, logits, labels, optimizer=optimizer)


class BaselineClassifier(Estimator):
    """Predicts the class prior, learned from the labels (TF's ``tf.estimator.BaselineClassifier``).

    Args:
        model_dir: where checkpoints go.
        n_classes: number of classes (2: binary head; > 2: multi-class head).
        weight_column: feature key or numeric_column of example weights.
        label_vocabulary: class names when labels are strings.
        optimizer: a name (default 'Ftrl', learning rate 0.3), an Optimizer class or a factory.
        config: a ``RunConfig``.
        loss_reduction: ``'sum_over_batch_size'`` (default) or ``'sum'``.

    Example:
        >>> est = BaselineClassifier(n_classes=3)  # doctest: +SKIP
    """

    def __init__(self, model_dir: str | os.PathLike | None = None, n_classes: int = 2,
                 weight_column: Any = None, label_vocabulary: Sequence[str] | None = None,
                 optimizer: Any = "Ftrl", config: RunConfig | None = None,
                 loss_reduction: str = LossReduction.SUM_OVER_BATCH_SIZE) -> None:
        head = classification_head(n_classes, weight_column, label_vocabulary, loss_reduction)
        factory = get_optimizer_factory(optimizer, _LEARNING_RATE)

        def _model_fn(features, labels, mode):
            return _baseline_model_fn(features, labels, mode, head, factory)

        super().__init__(model_fn=_model_fn, model_dir=model_dir, config=config)


class BaselineRegressor(Estimator):
    """Predicts the (weighted) label mean (TF's ``tf.estimator.BaselineRegressor``).

    Args:
        model_dir, weight_column, optimizer, config, loss_reduction: as in ``BaselineClassifier``.
        label_dimension: number of regression targets per example.

    Example:
        >>> est = BaselineRegressor(label_dimension=2)  # doctest: +SKIP
    """

    def __init__(self, model_dir: str | os.PathLike | None = None, label_dimension: int = 1,
                 weight_column: Any = None, optimizer: Any = "Ftrl", config: RunConfig | None = None,
                 loss_reduction: str = LossReduction.SUM_OVER_BATCH_SIZE) -> None:
        head = RegressionHead(label_dimension, weight_column=weight_column, loss_reduction=loss_reduction)
        factory = get_optimizer_factory(optimizer, _LEARNING_RATE)

        def _model_fn(features, labels, mode):
            return _baseline_model_fn(features, labels, mode, head, factory)

        super().__init__(model_fn=_model_fn, model_dir=model_dir, config=config)
