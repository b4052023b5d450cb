"""``LinearClassifier`` / ``LinearRegressor``: linear models over feature columns (TF's ``canned/linear.py``).

The logits come from ``feature_column.LinearModel`` registered as ``linear/linear_model``, so the
variables are TF's ``linear/linear_model/<column>/weights`` (``[dim, units]``) and
``linear/linear_model/bias_weights`` (``[units]``), zero-initialised. The default optimizer is
``'Ftrl'``, which TF 2 builds with learning rate 0.2 (as every name); ``optimizer=None`` is TF's
other default, FTRL with ``min(0.2, 1 / sqrt(len(feature_columns)))``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import torch

from estimator_engine.canned.dnn import (
    _module_params,
    check_feature_columns,
    check_features,
    check_head,
)
from estimator_engine.canned.heads import Head, LossReduction, RegressionHead, classification_head
from estimator_engine.canned.optimizers import (
    build_optimizer,
    default_linear_learning_rate,
    get_optimizer_factory,
)
from estimator_engine.estimator import Estimator
from estimator_engine.mode_keys import ModeKeys
from estimator_engine.model_state import get_module, get_optimizer
from estimator_engine.run_config import RunConfig
from estimator_engine.spec import EstimatorSpec

__all__ = ["LinearClassifier", "LinearEstimator", "LinearRegressor", "linear_logits", "linear_optimizer_factory"]

# TF's learning rate of a named linear optimizer, and the cap of optimizer=None's FTRL rate.
_LEARNING_RATE = 0.2
_SPARSE_COMBINERS = ("sum", "mean", "sqrtn")


def check_sparse_combiner(sparse_combiner: Any, argument: str = "sparse_combiner") -> str:
    if sparse_combiner not in _SPARSE_COMBINERS:
        raise ValueError(f"{argument} must be one of {list(_SPARSE_COMBINERS)}, given: {sparse_combiner!r}.")
    return sparse_combiner


def linear_optimizer_factory(optimizer: Any, num_columns: int) -> Callable[..., torch.optim.Optimizer]:
    """TF 2's ``get_optimizer_instance_v2(optimizer or _get_default_optimizer_v2(columns), 0.2)``.

    Example:
        >>> params = [torch.nn.Parameter(torch.zeros(1))]
        >>> linear_optimizer_factory('Ftrl', 100)(params).defaults['lr']
        0.2
        >>> linear_optimizer_factory(None, 100)(params).defaults['lr']
        0.1
    """
    if optimizer is None:
        return get_optimizer_factory("Ftrl", default_linear_learning_rate(num_columns, _LEARNING_RATE))
    return get_optimizer_factory(optimizer, _LEARNING_RATE)


def linear_logits(features: Mapping[str, Any], feature_columns: Sequence[Any], units: int,
                  sparse_combiner: str = "sum", scope: str = "linear"
                  ) -> tuple[torch.Tensor, list[torch.nn.Module]]:
    """Builds (first call) or reuses ``<scope>/linear_model``; returns ``(logits, [module])``.

    Must run inside a ``model_fn`` (it uses ``ee.get_module``).
    """
    from estimator_engine.feature_column import LinearModel  # sibling module, imported on use

    columns = tuple(feature_columns)
    model = get_module(f"{scope}/linear_model",
                       lambda: LinearModel(columns, units=units, sparse_combiner=sparse_combiner))
    return model(features), [model]


def _linear_model_fn(features: Any, labels: Any, mode: ModeKeys, head: Head, feature_columns: Sequence[Any],
                     optimizer_factory: Callable[..., torch.optim.Optimizer], sparse_combiner: str
                     ) -> EstimatorSpec:
    features = check_features(features)
    logits, modules = linear_logits(features, feature_columns, head.logits_dimension, sparse_combiner)
    if mode != ModeKeys.TRAIN:
        return head.create_estimator_spec(features, mode, logits, labels)
    optimizer = get_optimizer("linear", lambda: build_optimizer(optimizer_factory, _module_params(modules)))
    return head.create_estimator_spec(features, mode, logits, labels, optimizer=optimizer)


def _linear_estimator_model_fn(head: Head, feature_columns: Iterable[Any], optimizer: Any,
                               sparse_combiner: str) -> Callable[..., Any]:
    """The model_fn of LinearClassifier/LinearRegressor/LinearEstimator: arguments checked once."""
    columns = check_feature_columns(feature_columns)
    combiner = check_sparse_combiner(sparse_combiner)
    factory = linear_optimizer_factory(optimizer, len(columns))

    def _model_fn(features, labels, mode):
        return _linear_model_fn(features, labels, mode, head, columns, factory, combiner)

    return _model_fn


class LinearClassifier(Estimator):
    """A linear classifier (TF's ``tf.estimator.LinearClassifier``).

    Args:
        feature_columns: feature columns (categorical columns are used directly, as sparse weights).
        model_dir: where checkpoints go.
        n_classes: number of classes (2: binary head; > 2: multi-class head).
        weight_column: feature key or numeric_column of example weights.
        label_vocabulary: class names when labels are strings.
        optimizer: a name (learning rate 0.2, as TF 2 builds a named optimizer; default 'Ftrl'),
            ``None`` (FTRL with learning rate ``min(0.2, 1/sqrt(n_columns))``), an Optimizer
            class, or a factory ``fn(params) -> Optimizer``.
        config: a ``RunConfig``.
        warm_start_from: a model_dir, checkpoint or ``WarmStartSettings``.
        loss_reduction: ``'sum_over_batch_size'`` (default) or ``'sum'``.
        sparse_combiner: how multi-valued categorical inputs combine: 'sum', 'mean' or 'sqrtn'.

    Example:
        >>> from estimator_engine import feature_column as fc
        >>> est = LinearClassifier(feature_columns=[fc.numeric_column('x')])  # doctest: +SKIP
    """

    def __init__(self, feature_columns: Iterable[Any], model_dir: str | os.PathLike | None = None,
                 n_classes: int = 2, weight_column: Any = None,
                 label_vocabulary: Sequence[str] | None = None, optimizer: Any = "Ftrl",
                 config: RunConfig | None = None, warm_start_from: Any = None,
                 loss_reduction: str = LossReduction.SUM_OVER_BATCH_SIZE, sparse_combiner: str = "sum") -> None:
        head = classification_head(n_classes, weight_column, label_vocabulary, loss_reduction)
        model_fn = _linear_estimator_model_fn(head, feature_columns, optimizer, sparse_combiner)
        super().__init__(model_fn=model_fn, model_dir=model_dir, config=config,
                         warm_start_from=warm_start_from)


class LinearRegressor(Estimator):
    """A linear regressor (TF's ``tf.estimator.LinearRegressor``).

    Args:
        feature_columns, model_dir, weight_column, optimizer, config, warm_start_from,
        loss_reduction, sparse_combiner: as in ``LinearClassifier``.
        label_dimension: number of regression targets per example.

    Example:
        >>> from estimator_engine import feature_column as fc
        >>> est = LinearRegressor(feature_columns=[fc.numeric_column('x')])  # doctest: +SKIP
    """

    def __init__(self, feature_columns: Iterable[Any], model_dir: str | os.PathLike | None = None,
                 label_dimension: int = 1, weight_column: Any = None, optimizer: Any = "Ftrl",
                 config: RunConfig | None = None, warm_start_from: Any = None,
                 loss_reduction: str = LossReduction.SUM_OVER_BATCH_SIZE, sparse_combiner: str = "sum") -> None:
        head = RegressionHead(label_dimension, weight_column=weight_column, loss_reduction=loss_reduction)
        model_fn = _linear_estimator_model_fn(head, feature_columns, optimizer, sparse_combiner)
        super().__init__(model_fn=model_fn, model_dir=model_dir, config=config,
                         warm_start_from=warm_start_from)


class LinearEstimator(Estimator):
    """A linear model with a given head (TF's ``tf.estimator.LinearEstimator``).

    Args:
        head: a ``Head``, e.g. ``PoissonRegressionHead()``.
        feature_columns, model_dir, optimizer, config, sparse_combiner, warm_start_from: as in
        ``LinearClassifier``.

    Example:
        >>> from estimator_engine import feature_column as fc
        >>> from estimator_engine.canned.heads import RegressionHead
        >>> est = LinearEstimator(RegressionHead(), [fc.numeric_column('x')])  # doctest: +SKIP
    """

    def __init__(self, head: Head, feature_columns: Iterable[Any], model_dir: str | os.PathLike | None = None,
                 optimizer: Any = "Ftrl", config: RunConfig | None = None, sparse_combiner: str = "sum",
                 warm_start_from: Any = None) -> None:
        head = check_head(head)
        model_fn = _linear_estimator_model_fn(head, feature_columns, optimizer, sparse_combiner)
        super().__init__(model_fn=model_fn, model_dir=model_dir, config=config,
                         warm_start_from=warm_start_from)
