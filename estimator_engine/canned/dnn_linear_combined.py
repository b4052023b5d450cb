"""Wide & deep: ``DNNLinearCombinedClassifier`` / ``Regressor`` (TF's ``canned/dnn_linear_combined.py``).

logits = DNN logits + linear logits (either alone when the other column set is empty). The two
parts keep their TF variable names (``dnn/...``, ``linear/linear_model/...``) and have their own
optimizers: by default Adagrad with learning rate 0.001 for the DNN, FTRL with
``min(0.005, 1 / sqrt(len(linear_feature_columns)))`` for the linear part. One training step
back-propagates the loss once and steps both optimizers.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch

from estimator_engine.canned.dnn import (
    _check_activation,
    _module_params,
    check_dropout,
    check_features,
    check_head,
    check_hidden_units,
    dnn_logits,
)
from estimator_engine.canned.heads import Head, LossReduction, RegressionHead, classification_head
from estimator_engine.canned.linear import check_sparse_combiner, linear_logits
from estimator_engine.canned.optimizers import (
    build_optimizer,
    default_linear_learning_rate,
    get_optimizer_factory,
)
from estimator_engine.estimator import Estimator
from estimator_engine.mode_keys import ModeKeys
from estimator_engine.model_state import get_optimizer
from estimator_engine.run_config import RunConfig
from estimator_engine.spec import EstimatorSpec

__all__ = ["DNNLinearCombinedClassifier", "DNNLinearCombinedEstimator", "DNNLinearCombinedRegressor"]

# TF's defaults for the optimizers given by name.
_DNN_LEARNING_RATE = 0.001
_LINEAR_LEARNING_RATE = 0.005


class _JointTrainOp:
    """One step of several optimizers over one loss: backward once, step each, zero grads."""

    __slots__ = ("loss", "optimizers")

    def __init__(self, loss: torch.Tensor, optimizers: Sequence[torch.optim.Optimizer]) -> None:
        self.loss = loss
        self.optimizers = tuple(optimizers)

    def __call__(self) -> None:
        self.loss.backward()
        for optimizer in self.optimizers:
            optimizer.step()
        for optimizer in self.optimizers:
            optimizer.zero_grad(set_to_none=True)

    def __repr__(self) -> str:
        return f"_JointTrainOp(optimizers={[type(o).__name__ for o in self.optimizers]})"


def _optional_columns(columns: Any, argument: str) -> tuple[Any, ...]:
    if columns is None:
        return ()
    if isinstance(columns, (str, dict)):
        raise ValueError(f"{argument} must be a list of feature columns, given: {columns!r:.200}.")
    return tuple(columns)


class _Config:
    """The validated pieces of a combined estimator (shared by the classifier and the regressor)."""

    def __init__(self, linear_feature_columns: Any, linear_optimizer: Any, dnn_feature_columns: Any,
                 dnn_optimizer: Any, dnn_hidden_units: Any, dnn_activation_fn: Any, dnn_dropout: Any,
                 batch_norm: Any, linear_sparse_combiner: Any) -> None:
        # The raw constructor arguments, checked here (as TF's canned estimators take them).
        self.linear_columns = _optional_columns(linear_feature_columns, "linear_feature_columns")
        self.dnn_columns = _optional_columns(dnn_feature_columns, "dnn_feature_columns")
        if not self.linear_columns and not self.dnn_columns:
            raise ValueError("Either linear_feature_columns or dnn_feature_columns must be defined.")
        self.hidden_units: tuple[int, ...] = ()
        if self.dnn_columns:
            if not dnn_hidden_units:
                raise ValueError(f"dnn_hidden_units must be defined when dnn_feature_columns is specified. "
                                 f"dnn_feature_columns: {list(self.dnn_columns)!r:.200}.")
            self.hidden_units = check_hidden_units(dnn_hidden_units, "dnn_hidden_units")
        self.dnn_factory = get_optimizer_factory(dnn_optimizer, _DNN_LEARNING_RATE, "dnn_optimizer")
        self.linear_factory = get_optimizer_factory(
            linear_optimizer, default_linear_learning_rate(len(self.linear_columns), _LINEAR_LEARNING_RATE),
            "linear_optimizer")
        self.activation = _check_activation(dnn_activation_fn)
        self.dropout = check_dropout(dnn_dropout, "dnn_dropout")
        self.batch_norm = bool(batch_norm)
        self.sparse_combiner = check_sparse_combiner(linear_sparse_combiner, "linear_sparse_combiner")

    def model_fn(self, features: Any, labels: Any, mode: ModeKeys, head: Head) -> EstimatorSpec:
        features = check_features(features)
        parts: list[torch.Tensor] = []  # the dnn's logits, then the linear model's (__init__ asks for one)
        dnn_modules: list[torch.nn.Module] = []
        linear_modules: list[torch.nn.Module] = []
        if self.dnn_columns:
            deep, dnn_modules = dnn_logits(features, mode, self.hidden_units, self.dnn_columns,
                                           head.logits_dimension, self.activation, self.dropout,
                                           self.batch_norm)
            parts.append(deep)
        if self.linear_columns:
            linear, linear_modules = linear_logits(features, self.linear_columns, head.logits_dimension,
                                                   self.sparse_combiner)
            parts.append(linear)
        logits = parts[0] if len(parts) == 1 else parts[0] + parts[1]
        if mode != ModeKeys.TRAIN:
            return head.create_estimator_spec(features, mode, logits, labels)
        optimizers = []
        if dnn_modules:
            optimizers.append(get_optimizer("dnn", lambda: build_optimizer(
                self.dnn_factory, _module_params(dnn_modules), "dnn_optimizer")))
        if linear_modules:
            optimizers.append(get_optimizer("linear", lambda: build_optimizer(
                self.linear_factory, _module_params(linear_modules), "linear_optimizer")))
        return head.create_estimator_spec(features, mode, logits, labels,
                                          train_op_fn=lambda loss: _JointTrainOp(loss, optimizers))


class DNNLinearCombinedClassifier(Estimator):
    """Wide & deep classifier (TF's ``tf.estimator.DNNLinearCombinedClassifier``).

    Args:
        model_dir: where checkpoints go.
        linear_feature_columns: columns of the linear (wide) part.
        linear_optimizer: optimizer of the linear part (default 'Ftrl').
        dnn_feature_columns: dense columns of the DNN (deep) part.
        dnn_optimizer: optimizer of the DNN part (default 'Adagrad', learning rate 0.001).
        dnn_hidden_units: hidden layer sizes; required with ``dnn_feature_columns``.
        dnn_activation_fn: activation of the hidden layers.
        dnn_dropout: dropout probability of the hidden layers during training.
        n_classes, weight_column, label_vocabulary, config, warm_start_from, loss_reduction,
        batch_norm: as in ``DNNClassifier``.
        linear_sparse_combiner: 'sum', 'mean' or 'sqrtn'.

    Example:
        >>> from estimator_engine import feature_column as fc
        >>> est = DNNLinearCombinedClassifier(  # doctest: +SKIP
        ...     linear_feature_columns=[fc.numeric_column('x')],
        ...     dnn_feature_columns=[fc.numeric_column('x')], dnn_hidden_units=[4])
    """

    def __init__(self, model_dir: str | os.PathLike | None = None,
                 linear_feature_columns: Iterable[Any] | None = None, linear_optimizer: Any = "Ftrl",
                 dnn_feature_columns: Iterable[Any] | None = None, dnn_optimizer: Any = "Adagrad",
                 dnn_hidden_units: Sequence[int] | None = None,
                 dnn_activation_fn: Callable[[torch.Tensor], torch.Tensor] = torch.relu,
                 dnn_dropout: float | None = None, n_classes: int = 2, weight_column: Any = None,
                 label_vocabulary: Sequence[str] | None = None, config: RunConfig | None = None,
                 warm_start_from: Any = None, loss_reduction: str = LossReduction.SUM_OVER_BATCH_SIZE,
                 batch_norm: bool = False, linear_sparse_combiner: str = "sum") -> None:
        parts = _Config(linear_feature_columns, linear_optimizer, dnn_feature_columns, dnn_optimizer,
                        dnn_hidden_units, dnn_activation_fn, dnn_dropout, batch_norm, linear_sparse_combiner)
        head = classification_head(n_classes, weight_column, label_vocabulary, loss_reduction)

        def _model_fn(features, labels, mode):
            return parts.model_fn(features, labels, mode, head)

        super().__init__(model_fn=_model_fn, model_dir=model_dir, config=config,
                         warm_start_from=warm_start_from)


class DNNLinearCombinedRegressor(Estimator):
    """Wide & deep regressor (TF's ``tf.estimator.DNNLinearCombinedRegressor``).

    Args: as ``DNNLinearCombinedClassifier``, with ``label_dimension`` instead of ``n_classes``
    and ``label_vocabulary``.

    Example:
        >>> from estimator_engine import feature_column as fc
        >>> est = DNNLinearCombinedRegressor(linear_feature_columns=[fc.numeric_column('x')])  # doctest: +SKIP
    """

    def __init__(self, model_dir: str | os.PathLike | None = None,
                 linear_feature_columns: Iterable[Any] | None = None, linear_optimizer: Any = "Ftrl",
                 dnn_feature_columns: Iterable[Any] | None = None, dnn_optimizer: Any = "Adagrad",
                 dnn_hidden_units: Sequence[int] | None = None,
                 dnn_activation_fn: Callable[[torch.Tensor], torch.Tensor] = torch.relu,
                 dnn_dropout: float | None = None, label_dimension: int = 1, weight_column: Any = None,
                 config: RunConfig | None = None, warm_start_from: Any = None,
                 loss_reduction: str = LossReduction.SUM_OVER_BATCH_SIZE, batch_norm: bool = False,
                 linear_sparse_combiner: str = "sum") -> None:
        parts = _Config(linear_feature_columns, linear_optimizer, dnn_feature_columns, dnn_optimizer,
                        dnn_hidden_units, dnn_activation_fn, dnn_dropout, batch_norm, linear_sparse_combiner)
        head = RegressionHead(label_dimension, weight_column=weight_column, loss_reduction=loss_reduction)

        def _model_fn(features, labels, mode):
            return parts.model_fn(features, labels, mode, head)

        super().__init__(model_fn=_model_fn, model_dir=model_dir, config=config,
                         warm_start_from=warm_start_from)


class DNNLinearCombinedEstimator(Estimator):
    """Wide & deep with a given head (TF's ``tf.estimator.DNNLinearCombinedEstimator``).

    Args:
        head: a ``Head``, e.g. ``MultiLabelHead(n_classes=3)``.
        model_dir, linear_feature_columns, linear_optimizer, dnn_feature_columns, dnn_optimizer,
        dnn_hidden_units, dnn_activation_fn, dnn_dropout, config, batch_norm,
        linear_sparse_combiner, warm_start_from: as in ``DNNLinearCombinedClassifier``.

    Example:
        >>> from estimator_engine import feature_column as fc
        >>> from estimator_engine.canned.heads import RegressionHead
        >>> est = DNNLinearCombinedEstimator(RegressionHead(),  # doctest: +SKIP
        ...     linear_feature_columns=[fc.numeric_column('x')])
    """

    def __init__(self, head: Head, model_dir: str | os.PathLike | None = None,
                 linear_feature_columns: Iterable[Any] | None = None, linear_optimizer: Any = "Ftrl",
                 dnn_feature_columns: Iterable[Any] | None = None, dnn_optimizer: Any = "Adagrad",
                 dnn_hidden_units: Sequence[int] | None = None,
                 dnn_activation_fn: Callable[[torch.Tensor], torch.Tensor] = torch.relu,
                 dnn_dropout: float | None = None, config: RunConfig | None = None,
                 batch_norm: bool = False, linear_sparse_combiner: str = "sum",
                 warm_start_from: Any = None) -> None:
        head = check_head(head)
        parts = _Config(linear_feature_columns, linear_optimizer, dnn_feature_columns, dnn_optimizer,
                        dnn_hidden_units, dnn_activation_fn, dnn_dropout, batch_norm, linear_sparse_combiner)

        def _model_fn(features, labels, mode):
            return parts.model_fn(features, labels, mode, head)

        super().__init__(model_fn=_model_fn, model_dir=model_dir, config=config,
                         warm_start_from=warm_start_from)
