"""``DNNClassifier`` / ``DNNRegressor``: feed-forward networks over feature columns (TF's ``canned/dnn.py``).

The model is TF's ``_DNNModel``: ``DenseFeatures`` input layer, hidden ``Dense`` layers with
``activation_fn``, then dropout (training only) and batch norm when asked, and a linear logits layer
of ``head.logits_dimension`` units. Each layer is its own named module so that the variables carry
TF's names and layouts::

    dnn/input_from_feature_columns/input_layer/<column>_embedding/embedding_weights
    dnn/hiddenlayer_<i>/kernel        [in, out]   (glorot-uniform)
    dnn/hiddenlayer_<i>/bias          [out]       (zeros)
    dnn/hiddenlayer_<i>/batchnorm_<i>/{gamma, beta, moving_mean, moving_variance}
    dnn/logits/kernel, dnn/logits/bias

so a TF user's warm-start regexes and weights carry over.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import torch
import torch.nn.functional as F

from estimator_engine.canned.heads import Head, LossReduction, RegressionHead, classification_head
from estimator_engine.canned.optimizers import build_optimizer, get_optimizer_factory
from estimator_engine.estimator import Estimator
from estimator_engine.mode_keys import ModeKeys
from estimator_engine.model_state import get_module, get_optimizer
from estimator_engine.run_config import RunConfig
from estimator_engine.spec import EstimatorSpec

__all__ = ["DNNClassifier", "DNNEstimator", "DNNRegressor", "Dense", "check_head", "dnn_logits"]

# TF 2's DNN estimators build a named optimizer with Keras' default learning rate
# (get_optimizer_instance_v2(optimizer) without one: 0.001, SGD 0.01); TF 1's 0.05 is not used.
_LEARNING_RATE = None


class _BatchNorm(torch.nn.Module):
    """Keras ``BatchNormalization`` (momentum 0.999, epsilon 1e-3) with TF's variable names."""

    moving_mean: torch.Tensor  # buffers, registered in __init__
    moving_variance: torch.Tensor

    def __init__(self, units: int, momentum: float = 0.999, epsilon: float = 1e-3) -> None:
        super().__init__()
        self.gamma = torch.nn.Parameter(torch.ones(units))
        self.beta = torch.nn.Parameter(torch.zeros(units))
        self.register_buffer("moving_mean", torch.zeros(units))
        self.register_buffer("moving_variance", torch.ones(units))
        self.momentum = momentum
        self.epsilon = epsilon

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # torch's momentum weighs the new batch statistic: Keras' 0.999 decay is 0.001 here.
        return F.batch_norm(x, self.moving_mean, self.moving_variance, self.gamma, self.beta,
                            training=self.training, momentum=1.0 - self.momentum, eps=self.epsilon)


class Dense(torch.nn.Module):
    """A dense layer with TF's layout: ``kernel`` ``[in, out]`` (glorot-uniform) and ``bias`` (zeros).

    Args:
        in_features: input width.
        units: output width.
        batch_norm_index: when set, the layer owns a ``batchnorm_<index>`` submodule (TF names the
            batch norm variables ``dnn/hiddenlayer_<i>/batchnorm_<i>/...``).

    Example:
        >>> layer = Dense(3, 2)
        >>> tuple(layer.kernel.shape), layer(torch.ones(4, 3)).shape
        ((3, 2), torch.Size([4, 2]))
    """

    def __init__(self, in_features: int, units: int, batch_norm_index: int | None = None) -> None:
        super().__init__()
        limit = math.sqrt(6.0 / (in_features + units)) if in_features + units > 0 else 0.0
        self.kernel = torch.nn.Parameter(torch.empty(in_features, units).uniform_(-limit, limit))
        self.bias = torch.nn.Parameter(torch.zeros(units))
        self.batch_norm_name = None if batch_norm_index is None else f"batchnorm_{batch_norm_index}"
        if self.batch_norm_name is not None:
            self.add_module(self.batch_norm_name, _BatchNorm(units))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype != self.kernel.dtype:
            x = x.to(self.kernel.dtype)
        return torch.addmm(self.bias, x, self.kernel)

    def batch_norm(self, x: torch.Tensor) -> torch.Tensor:
        """Applies this layer's batch norm (only when built with ``batch_norm_index``)."""
        if self.batch_norm_name is None:
            raise RuntimeError("This Dense layer has no batch norm: build it with batch_norm_index=<layer index>.")
        return getattr(self, self.batch_norm_name)(x)


def check_features(features: Any) -> Mapping[str, Any]:
    """TF's check that ``features`` is a dict."""
    if not isinstance(features, Mapping):
        raise ValueError(f"features should be a dictionary of `Tensor`s. Given type: {type(features)}. "
                         "Make input_fn return (features_dict, labels), e.g. with "
                         "ee.inputs.numpy_input_fn({'x': x}, y).")
    return features


def check_feature_columns(feature_columns: Any, argument: str = "feature_columns") -> tuple[Any, ...]:
    """Feature columns as a tuple; a non-empty iterable (not a dict, not a string) is required."""
    if feature_columns is None or isinstance(feature_columns, (str, Mapping)):
        raise ValueError(f"{argument} must be a non-empty list of feature columns, given: {feature_columns!r:.200}.")
    columns = tuple(feature_columns)
    if not columns:
        raise ValueError(f"{argument} must not be empty; pass e.g. [fc.numeric_column('x')].")
    return columns


def check_hidden_units(hidden_units: Any, argument: str = "hidden_units") -> tuple[int, ...]:
    if hidden_units is None or isinstance(hidden_units, (str, Mapping)):
        raise ValueError(f"{argument} must be a list of positive layer sizes, e.g. [64, 32], given: {hidden_units!r}.")
    units = tuple(hidden_units)
    bad = [u for u in units if isinstance(u, bool) or not isinstance(u, int) or u <= 0]
    if bad:
        raise ValueError(f"{argument} must hold positive integers, given: {list(units)!r} (bad: {bad!r}).")
    return units


def check_dropout(dropout: Any, argument: str = "dropout") -> float | None:
    if dropout is None:
        return None
    if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not 0 <= dropout < 1:
        raise ValueError(f"{argument} must be None or a probability in [0, 1), given: {dropout!r}.")
    return float(dropout) or None


def _module_params(modules: Iterable[torch.nn.Module]) -> list[torch.nn.Parameter]:
    seen: dict[int, torch.nn.Parameter] = {}
    for module in modules:
        for param in module.parameters():
            if param.requires_grad:
                seen.setdefault(id(param), param)
    return list(seen.values())


def dnn_logits(features: Mapping[str, Any], mode: ModeKeys, hidden_units: Sequence[int],
               feature_columns: Sequence[Any], logits_dimension: int,
               activation_fn: Callable[[torch.Tensor], torch.Tensor] = torch.relu,
               dropout: float | None = None, batch_norm: bool = False, scope: str = "dnn"
               ) -> tuple[torch.Tensor, list[torch.nn.Module]]:
    """Builds (first call) or reuses TF's DNN modules and returns ``(logits, modules)``.

    Must run inside a ``model_fn`` (it uses ``ee.get_module``).
    """
    from estimator_engine.feature_column import DenseFeatures  # sibling module, imported on use

    columns = tuple(feature_columns)
    input_layer = get_module(f"{scope}/input_from_feature_columns/input_layer",
                             lambda: DenseFeatures(columns))
    modules: list[torch.nn.Module] = [input_layer]
    net = input_layer(features)
    width = int(net.shape[-1])
    training = mode == ModeKeys.TRAIN
    for index, units in enumerate(hidden_units):
        layer = get_module(f"{scope}/hiddenlayer_{index}",
                           functools.partial(Dense, width, units, index if batch_norm else None))
        modules.append(layer)
        net = layer(net)
        if activation_fn is not None:
            net = activation_fn(net)
        if dropout and training:
            net = F.dropout(net, p=dropout, training=True)
        if batch_norm:
            net = _unwrap(layer).batch_norm(net)
        width = units
    logits_layer = get_module(f"{scope}/logits", functools.partial(Dense, width, logits_dimension))
    modules.append(logits_layer)
    return logits_layer(net), modules


def _unwrap(layer: torch.nn.Module) -> Dense:
    # DDP wraps the layer; the batch norm submodule is reached on the inner one.
    inner = getattr(layer, "module", layer)
    if not isinstance(inner, Dense):
        raise TypeError(f"Expected a DNN Dense layer (or DDP around one), found {type(inner).__name__}.")
    return inner


def _dnn_model_fn(features: Any, labels: Any, mode: ModeKeys, head: Head, hidden_units: Sequence[int],
                  feature_columns: Sequence[Any], optimizer_factory: Callable[..., torch.optim.Optimizer],
                  activation_fn: Callable[[torch.Tensor], torch.Tensor], dropout: float | None,
                  batch_norm: bool) -> EstimatorSpec:
    features = check_features(features)
    logits, modules = dnn_logits(features, mode, hidden_units, feature_columns, head.logits_dimension,
                                 activation_fn, dropout, batch_norm)
    if mode != ModeKeys.TRAIN:
        return head.create_estimator_spec(features, mode, logits, labels)
    optimizer = get_optimizer("dnn", lambda: build_optimizer(optimizer_factory, _module_params(modules)))
    return head.create_estimator_spec(features, mode, logits, labels, optimizer=optimizer)


def check_head(head: Any) -> Head:
    """The ``head`` argument of the ``*Estimator`` classes: a ``Head`` instance."""
    if not isinstance(head, Head):
        raise TypeError(f"head must be a Head instance (e.g. ee.canned.MultiLabelHead(n_classes=3)), "
                        f"given: {head!r:.200}.")
    return head


def _check_activation(activation_fn: Any) -> Callable[[torch.Tensor], torch.Tensor]:
    if activation_fn is not None and not callable(activation_fn):
        raise TypeError(f"activation_fn must be callable (e.g. torch.relu), given: {activation_fn!r}.")
    return activation_fn


def _dnn_estimator_model_fn(head: Head, hidden_units: Sequence[int], feature_columns: Iterable[Any],
                            optimizer: Any, activation_fn: Callable[[torch.Tensor], torch.Tensor],
                            dropout: float | None, batch_norm: bool) -> Callable[..., Any]:
    """The model_fn of DNNClassifier/DNNRegressor/DNNEstimator: arguments checked once, at construction."""
    units = check_hidden_units(hidden_units)
    columns = check_feature_columns(feature_columns)
    factory = get_optimizer_factory(optimizer, _LEARNING_RATE)
    activation = _check_activation(activation_fn)
    rate = check_dropout(dropout)
    use_batch_norm = bool(batch_norm)

    def _model_fn(features, labels, mode):
        return _dnn_model_fn(features, labels, mode, head, units, columns, factory, activation,
                             rate, use_batch_norm)

    return _model_fn


class DNNClassifier(Estimator):
    """A feed-forward classifier (TF's ``tf.estimator.DNNClassifier``).

    Args:
        hidden_units: sizes of the hidden layers, e.g. ``[64, 32]``.
        feature_columns: dense feature columns (numeric, embedding, indicator, bucketized).
        model_dir: where checkpoints go.
        n_classes: number of classes (2: binary head; > 2: multi-class head).
        weight_column: feature key or numeric_column of example weights.
        label_vocabulary: class names when labels are strings.
        optimizer: a name ('Adagrad', 'Adam', 'Ftrl', 'RMSProp', 'SGD'), built with Keras'
            default learning rate as in TF 2 (0.001; SGD 0.01), an Optimizer class, or a factory
            ``fn(params) -> Optimizer`` (e.g. ``functools.partial(torch.optim.Adagrad, lr=0.05)``).
        activation_fn: activation after each hidden layer.
        dropout: probability of dropping a hidden unit during training.
        config: a ``RunConfig``.
        warm_start_from: a model_dir, checkpoint or ``WarmStartSettings``.
        loss_reduction: ``'sum_over_batch_size'`` (default) or ``'sum'``.
        batch_norm: batch-normalise after each hidden layer.

    Example:
        >>> from estimator_engine import feature_column as fc
        >>> est = DNNClassifier(hidden_units=[8], feature_columns=[fc.numeric_column('x')])  # doctest: +SKIP
        >>> # est.train(input_fn, steps=100); est.evaluate(input_fn)['accuracy']
    """

    def __init__(self, hidden_units: Sequence[int], feature_columns: Iterable[Any],
                 model_dir: str | os.PathLike | None = None, n_classes: int = 2,
                 weight_column: Any = None, label_vocabulary: Sequence[str] | None = None,
                 optimizer: Any = "Adagrad",
                 activation_fn: Callable[[torch.Tensor], torch.Tensor] = torch.relu,
                 dropout: float | None = None, config: RunConfig | None = None,
                 warm_start_from: Any = None,
                 loss_reduction: str = LossReduction.SUM_OVER_BATCH_SIZE, batch_norm: bool = False) -> None:
        head = classification_head(n_classes, weight_column, label_vocabulary, loss_reduction)
        model_fn = _dnn_estimator_model_fn(head, hidden_units, feature_columns, optimizer, activation_fn,
                                           dropout, batch_norm)
        super().__init__(model_fn=model_fn, model_dir=model_dir, config=config,
                         warm_start_from=warm_start_from)


class DNNRegressor(Estimator):
    """A feed-forward regressor (TF's ``tf.estimator.DNNRegressor``).

    Args:
        hidden_units, feature_columns, model_dir, weight_column, optimizer, activation_fn, dropout,
        config, warm_start_from, loss_reduction, batch_norm: as in ``DNNClassifier``.
        label_dimension: number of regression targets per example.

    Example:
        >>> from estimator_engine import feature_column as fc
        >>> est = DNNRegressor(hidden_units=[8], feature_columns=[fc.numeric_column('x')])  # doctest: +SKIP
    """

    def __init__(self, hidden_units: Sequence[int], feature_columns: Iterable[Any],
                 model_dir: str | os.PathLike | None = None, label_dimension: int = 1,
                 weight_column: Any = None, optimizer: Any = "Adagrad",
                 activation_fn: Callable[[torch.Tensor], torch.Tensor] = torch.relu,
                 dropout: float | None = None, config: RunConfig | None = None,
                 warm_start_from: Any = None,
                 loss_reduction: str = LossReduction.SUM_OVER_BATCH_SIZE, batch_norm: bool = False) -> None:
        head = RegressionHead(label_dimension, weight_column=weight_column, loss_reduction=loss_reduction)
        model_fn = _dnn_estimator_model_fn(head, hidden_units, feature_columns, optimizer, activation_fn,
                                           dropout, batch_norm)
        super().__init__(model_fn=model_fn, model_dir=model_dir, config=config,
                         warm_start_from=warm_start_from)


class DNNEstimator(Estimator):
    """A feed-forward network with a given head (TF's ``tf.estimator.DNNEstimator``).

    Args:
        head: a ``Head`` (loss, predictions, metrics), e.g. ``MultiLabelHead(n_classes=4)``.
        hidden_units, feature_columns, model_dir, optimizer, activation_fn, dropout, config,
        warm_start_from, batch_norm: as in ``DNNClassifier``.

    Example:
        >>> from estimator_engine import feature_column as fc
        >>> from estimator_engine.canned.heads import RegressionHead
        >>> est = DNNEstimator(RegressionHead(), [8], [fc.numeric_column('x')])  # doctest: +SKIP
    """

    def __init__(self, head: Head, hidden_units: Sequence[int], feature_columns: Iterable[Any],
                 model_dir: str | os.PathLike | None = None, optimizer: Any = "Adagrad",
                 activation_fn: Callable[[torch.Tensor], torch.Tensor] = torch.relu,
                 dropout: float | None = None, config: RunConfig | None = None,
                 warm_start_from: Any = None, batch_norm: bool = False) -> None:
        head = check_head(head)
        model_fn = _dnn_estimator_model_fn(head, hidden_units, feature_columns, optimizer, activation_fn,
                                           dropout, batch_norm)
        super().__init__(model_fn=model_fn, model_dir=model_dir, config=config,
                         warm_start_from=warm_start_from)
