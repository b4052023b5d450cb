"""An Estimator from a model object (TF's ``tf.keras.estimator.model_to_estimator``).

TF turns a compiled Keras model into an Estimator: the model's loss, optimizer and metrics become
the model_fn's, its current weights the starting point, and ``input_fn`` features are matched to
the model's inputs by name. Here the model is a ``torch.nn.Module``, and what Keras' ``compile``
held is given as arguments. A Keras 3 model on the torch backend is a ``torch.nn.Module`` too: its
input names (``model.inputs[i].name``) and output names (``model.output_names``) are the
defaults, and it is called with the list of its inputs, as Keras calls it.

Example:
    >>> net = torch.nn.Linear(3, 1)
    >>> est = model_to_estimator(net, loss=torch.nn.MSELoss(), optimizer='SGD', metrics=['mae'])
    >>> type(est).__name__
    'Estimator'
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from estimator_engine import metrics as metrics_lib
from estimator_engine.canned.optimizers import get_optimizer_factory
from estimator_engine.estimator import Estimator
from estimator_engine.export_output import PredictOutput
from estimator_engine.mode_keys import ModeKeys
from estimator_engine.model_state import get_module, get_optimizer, minimize
from estimator_engine.run_config import RunConfig
from estimator_engine.spec import EstimatorSpec

__all__ = ["KERAS_MODEL_MODULE_NAME", "model_to_estimator"]

# The module's variables are named keras_model/<parameter path> in checkpoints.
KERAS_MODEL_MODULE_NAME = "keras_model"
# A subclassed Keras model's outputs are named output_1, output_2, ... (TF's predictions keys).
_OUTPUT_NAME = "output_{}"

_METRICS: dict[str, Callable[..., Any]] = {
    "mse": metrics_lib.mean_squared_error, "mean_squared_error": metrics_lib.mean_squared_error,
    "mae": metrics_lib.mean_absolute_error, "mean_absolute_error": metrics_lib.mean_absolute_error,
    "rmse": metrics_lib.root_mean_squared_error, "root_mean_squared_error": metrics_lib.root_mean_squared_error,
}


def _accuracy(labels: torch.Tensor, outputs: torch.Tensor) -> Any:
    """Keras' 'accuracy' as compile picks it: argmax of several scores, else the 0.5 threshold."""
    if outputs.dim() > 1 and outputs.shape[-1] > 1:
        predicted = outputs.argmax(dim=-1)
        if labels.dim() == outputs.dim() and labels.shape[-1] == outputs.shape[-1]:  # one-hot labels
            labels = labels.argmax(dim=-1)
    else:
        predicted = (outputs > 0.5).to(labels.dtype)
    return metrics_lib.accuracy(labels.reshape(predicted.shape), predicted)


def _keras_input_names(model: torch.nn.Module) -> list[str] | None:
    """A Keras 3 functional / sequential model's input names, or ``None`` for other modules."""
    if not type(model).__module__.startswith("keras."):
        return None
    inputs = getattr(model, "inputs", None)
    if not isinstance(inputs, (list, tuple)) or not inputs:
        return None
    return [str(getattr(tensor, "name", f"input_{i + 1}")) for i, tensor in enumerate(inputs)]


def _ordered(value: Any, names: Sequence[str], what: str, order_name: str) -> list[Any]:
    """TF's ``_to_ordered_tensor_list``: a dict by ``names``, a list as is, a tensor as one."""
    if isinstance(value, Mapping):
        different = set(value) ^ set(names)
        if different:
            raise ValueError(
                f"The dictionary passed into {what} does not have the expected {order_name} keys defined in "
                f"the model.\n\tExpected keys: {set(names)}\n\t{what} keys: {set(value)}\n\tDifference: "
                f"{different}")
        return [value[name] for name in names]
    if isinstance(value, (list, tuple)):
        return list(value)
    return [value]


def model_to_estimator(keras_model: torch.nn.Module, *, loss: Callable[..., torch.Tensor] | Mapping[str, Any],
                       optimizer: Any = "SGD",
                       metrics: Sequence[str] | Mapping[str, Callable[..., Any]] | None = None,
                       input_names: Sequence[str] | None = None, output_names: Sequence[str] | None = None,
                       model_dir: str | os.PathLike | None = None, config: RunConfig | None = None,
                       learning_rate: float | None = None) -> Estimator:
    """An Estimator that trains, evaluates, predicts and exports ``keras_model``.

    Like TF's ``tf.keras.estimator.model_to_estimator``: training starts from the model's current
    weights (a copy: the model given is not changed); ``input_fn`` features are matched to the
    model's inputs by name: a dict must have exactly the keys ``input_names`` (TF's
    ``model.input_names``), passed to ``forward`` positionally in that order; a model of one input
    also takes a single tensor, or a dict of one entry when ``input_names`` is not given. Labels
    are matched to ``output_names`` the same way. Predictions are ``{output name: output}``
    (default names ``output_1``, ``output_2``, ... as for a subclassed Keras model).

    Args:
        keras_model: the model, a ``torch.nn.Module``; ``forward`` takes the inputs and returns a
            tensor, or a tuple / list of tensors (several outputs).
        loss: ``loss(outputs, labels) -> scalar`` (torch's order, e.g. ``torch.nn.MSELoss()``),
            applied to each output and summed (Keras' rule), or a dict of output name -> loss.
        optimizer: what ``compile(optimizer=...)`` held, as the canned estimators take it: a factory
            ``fn(params) -> torch.optim.Optimizer``, an Optimizer class or a name ('SGD', 'Adam',
            ...; ``learning_rate`` or Keras' default rate).
        metrics: names (``'accuracy'``, ``'mse'``, ``'mae'``, ``'rmse'`` and their long names) or a
            dict of metric name -> ``fn(labels, outputs) -> MetricOp`` (e.g. ``ee.metrics.auc``),
            computed on the first output; evaluation also reports ``loss``.
        input_names: the model's input names (TF's ``model.input_names``).
        output_names: the model's output names (TF's ``model.output_names``).
        model_dir, config: the Estimator's.
        learning_rate: used with an optimizer name only.

    Raises:
        TypeError: ``keras_model`` is not a ``torch.nn.Module``, or ``loss`` is not callable.
        ValueError: unknown metric names, duplicate input or output names; at run time, features
            or labels whose keys do not match the model's input or output names (TF's message).

    Example:
        >>> est = model_to_estimator(torch.nn.Linear(2, 1), loss=torch.nn.MSELoss(),
        ...                          optimizer=lambda params: torch.optim.SGD(params, lr=0.1))
        >>> # est.train(lambda: ({'x': torch.ones(4, 2)}, torch.zeros(4, 1)), steps=3)
    """
    if not isinstance(keras_model, torch.nn.Module):
        raise TypeError(f"keras_model must be a torch.nn.Module, given {type(keras_model).__name__}. A TF "
                        "Keras model runs on TF only: rebuild it with torch layers.")
    losses = dict(loss) if isinstance(loss, Mapping) else None
    loss_fn = None if isinstance(loss, Mapping) else loss
    if losses is None and not callable(loss):
        raise TypeError(f"loss must be callable as loss(outputs, labels), or a dict of output name -> loss; "
                        f"given {loss!r:.100}.")
    make_optimizer = get_optimizer_factory(optimizer, learning_rate)
    metric_fns: dict[str, Callable[..., Any]] = {}
    if isinstance(metrics, Mapping):
        metric_fns = dict(metrics)
    else:
        for name in metrics or []:
            if name in ("accuracy", "acc"):
                metric_fns["accuracy"] = _accuracy
            elif name in _METRICS:
                metric_fns[name] = _METRICS[name]
            else:
                raise ValueError(f"Unknown metric {name!r}; use one of {['accuracy', *sorted(_METRICS)]} or a dict "
                                 "of name -> fn(labels, outputs) -> MetricOp.")
    for what, names in (("input_names", input_names), ("output_names", output_names)):
        if names is not None and (isinstance(names, str) or len(set(names)) != len(names)):
            raise ValueError(f"{what} must be a list of distinct names, given {names!r}.")
    keras_inputs = _keras_input_names(keras_model)
    if keras_inputs is not None:
        input_names = input_names if input_names is not None else keras_inputs
        named_outputs = getattr(keras_model, "output_names", None)
        if output_names is None and named_outputs:
            output_names = list(named_outputs)
    template = copy.deepcopy(keras_model)  # TF also trains a clone, starting from the model's weights

    def model_fn(features: Any, labels: Any, mode: ModeKeys) -> EstimatorSpec:
        model = get_module(KERAS_MODEL_MODULE_NAME, lambda: copy.deepcopy(template))
        model.train(mode == ModeKeys.TRAIN)  # dropout / batch norm as Keras' training flag
        if isinstance(features, Mapping) and input_names is None:
            if len(features) != 1:
                raise ValueError(f"The features dict has {len(features)} entries {sorted(features)}; give "
                                 "model_to_estimator(..., input_names=[...]) to say which argument of the "
                                 "model's forward each one is (TF matches them to model.input_names).")
            inputs = list(features.values())
        else:
            inputs = _ordered(features, list(input_names or []), "features", "inputs")
        raw = model(*inputs) if keras_inputs is None else model(inputs if len(inputs) > 1 else inputs[0])
        outputs = list(raw) if isinstance(raw, (list, tuple)) else [raw]
        names = list(output_names) if output_names is not None else [
            _OUTPUT_NAME.format(i + 1) for i in range(len(outputs))]
        if len(names) != len(outputs):
            raise ValueError(f"The model returned {len(outputs)} outputs but output_names has {len(names)}: {names}.")
        predictions = dict(zip(names, outputs))
        if mode == ModeKeys.PREDICT:
            return EstimatorSpec(mode, predictions=predictions,
                                 export_outputs={"serving_default": PredictOutput(predictions)})
        if labels is None:
            raise ValueError("Training and evaluating a model_to_estimator Estimator need labels; the input_fn "
                             "returned none.")
        label_list = (_ordered(labels, names, "labels", "outputs") if isinstance(labels, Mapping) or len(names) > 1
                      else [labels])
        if len(label_list) != len(outputs):
            raise ValueError(f"{len(label_list)} labels for {len(outputs)} model outputs {names}.")
        targets = [torch.as_tensor(label, device=output.device) for output, label in zip(outputs, label_list)]
        targets = [target.to(output.dtype) if target.is_floating_point() and output.is_floating_point() else target
                   for output, target in zip(outputs, targets)]
        total: torch.Tensor | None = None
        for name, output, target in zip(names, outputs, targets):
            fn = losses.get(name) if losses is not None else loss_fn
            if fn is None:
                raise ValueError(f"loss has no entry for output {name!r}; it names {sorted(losses or {})}.")
            value = fn(output, target)
            total = value if total is None else total + value
        assert total is not None
        if mode == ModeKeys.EVAL:
            metric_ops = {name: fn(targets[0], outputs[0]) for name, fn in metric_fns.items()}
            return EstimatorSpec(mode, loss=total, eval_metric_ops=metric_ops)
        opt = get_optimizer(KERAS_MODEL_MODULE_NAME, lambda: make_optimizer(model.parameters()))
        return EstimatorSpec(mode, loss=total, train_op=minimize(opt, total))

    return Estimator(model_fn, model_dir=model_dir, config=config)
