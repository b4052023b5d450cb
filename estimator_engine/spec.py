"""``EstimatorSpec``: what a ``model_fn`` returns, validated per mode (TF's ``model_fn.py``).

PyTorch meaning of the fields (decided once, here):

* ``loss`` is a scalar ``torch.Tensor`` (a shape ``[1]`` tensor is reshaped to a scalar).
* ``train_op`` is what ``estimator_engine.minimize`` returns, or any zero-argument callable. The
  Estimator calls it once per training step and then advances ``global_step`` by one.
* ``predictions`` is a tensor or a dict of tensors (numpy arrays are accepted as values, e.g. the
  class names of a canned head, and strings, e.g. a string feature passed through: ``predict``
  yields them as TF yields string tensors, numpy arrays of ``bytes``).
* ``eval_metric_ops`` values are ``MetricOp`` objects from ``estimator_engine.metrics``.
* ``export_outputs`` values are ``ExportOutput`` objects (``PredictOutput``, ...).
* The four hook fields hold ``SessionRunHook`` instances; ``scaffold`` is a ``Scaffold``.

Like TF, ``EstimatorSpec`` is a namedtuple with 11 fields in TF's order, and ``_replace`` validates
again. The Estimator validates the spec fully on the first step of each call and takes a cheap path
(only the required fields) on later steps, so validation never costs a tiny model its speed.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any, NamedTuple

import numpy as np
import torch

from estimator_engine.export_output import ExportOutput, PredictOutput, string_array
from estimator_engine.hooks.base import SessionRunHook
from estimator_engine.metric_op import MetricOp
from estimator_engine.mode_keys import ModeKeys

__all__ = ["AVERAGE_LOSS_METRIC_KEY", "DEFAULT_SERVING_KEY", "LOSS_METRIC_KEY", "EstimatorSpec", "Scaffold"]

LOSS_METRIC_KEY = "loss"
AVERAGE_LOSS_METRIC_KEY = "average_loss"
DEFAULT_SERVING_KEY = "serving_default"

_HOOK_FIELDS = ("training_chief_hooks", "training_hooks", "evaluation_hooks", "prediction_hooks")

# Set by the Estimator after the first step of a call has passed full validation. Per thread, so
# a loop running in one thread never relaxes the checks of specs built in another.
_validation = threading.local()
_validation.cheap = False


@contextlib.contextmanager
def cheap_validation() -> Iterator[None]:
    """Inside this block ``EstimatorSpec`` checks only the per-mode required fields (this thread only)."""
    previous = getattr(_validation, "cheap", False)
    _validation.cheap = True
    try:
        yield
    finally:
        _validation.cheap = previous


class Scaffold:
    """Optional extras of a spec: ``init_fn(scaffold, session)`` runs after fresh initialisation.

    ``init_fn`` is not called when the state was restored from a checkpoint (TF's rule), so it is
    the place to load pre-trained weights into a freshly built model.

    Example:
        >>> Scaffold(init_fn=lambda scaffold, session: None).init_fn is not None
        True
    """

    def __init__(self, init_fn: Callable[[Scaffold, Any], None] | None = None) -> None:
        if init_fn is not None and not callable(init_fn):
            raise TypeError(f"Scaffold init_fn must be callable, given: {init_fn!r}")
        self.init_fn = init_fn


def _mode_tag(mode: Any) -> str:
    return f"EstimatorSpec(mode={str(mode)!r})"


def _validate_mode(mode: Any) -> ModeKeys | None:
    if mode is None or isinstance(mode, ModeKeys):
        return mode
    try:
        return ModeKeys(mode)
    except ValueError:
        raise ValueError(
            f"EstimatorSpec mode must be one of ModeKeys.TRAIN ('train'), ModeKeys.EVAL ('eval') or "
            f"ModeKeys.PREDICT ('infer'), given: {mode!r}. Pass the `mode` model_fn received."
        ) from None


def _validate_loss(mode: Any, loss: Any) -> torch.Tensor | None:
    if loss is None:
        if mode in (ModeKeys.TRAIN, ModeKeys.EVAL):
            raise ValueError(
                f"{_mode_tag(mode)}: Missing loss. model_fn must return the scalar loss tensor "
                "in TRAIN and EVAL modes, e.g. EstimatorSpec(mode, loss=loss, ...)."
            )
        return None
    if not isinstance(loss, torch.Tensor):
        raise TypeError(
            f"{_mode_tag(mode)}: loss must be Tensor, given: {loss!r}. Return the loss as a "
            "torch.Tensor (not a Python float or .item()), so that it can be back-propagated."
        )
    if loss.dim() != 0:
        if loss.numel() != 1:
            raise ValueError(
                f"{_mode_tag(mode)}: Loss must be scalar, given: tensor of shape {tuple(loss.shape)}. "
                "Reduce it, e.g. loss.mean() or loss.sum()."
            )
        loss = loss.reshape(())
    return loss


def _validate_predictions(mode: Any, predictions: Any) -> Any:
    if predictions is None:
        if mode == ModeKeys.PREDICT:
            raise ValueError(
                f"{_mode_tag(mode)}: Missing predictions. model_fn must return predictions in "
                "PREDICT mode, e.g. EstimatorSpec(mode, predictions={'y': y})."
            )
        return {}
    allowed = (torch.Tensor, np.ndarray)
    if isinstance(predictions, Mapping):
        for key, value in predictions.items():
            if not isinstance(key, str):
                raise TypeError(f"{_mode_tag(mode)}: prediction keys must be strings, given: {key!r}")
            if not isinstance(value, allowed) and string_array(value) is None:
                raise TypeError(
                    f"{_mode_tag(mode)}: predictions[{key!r}] must be Tensor, given: {value!r}"
                )
        return dict(predictions)
    if not isinstance(predictions, allowed):
        raise TypeError(
            f"{_mode_tag(mode)}: predictions must be Tensor, given: {predictions!r}. Return a "
            "tensor or a dict of tensors."
        )
    return predictions


def _validate_train_op(mode: Any, train_op: Any) -> Any:
    if train_op is None:
        if mode == ModeKeys.TRAIN:
            raise ValueError(
                f"{_mode_tag(mode)}: Missing train_op. In TRAIN mode return "
                "train_op=ee.minimize(optimizer, loss) (or any zero-argument callable that takes "
                "one optimisation step)."
            )
        return None
    if not callable(train_op):
        raise TypeError(
            f"{_mode_tag(mode)}: train_op must be a TrainOp from ee.minimize or a zero-argument "
            f"callable, given: {train_op!r}."
        )
    return train_op


def _validate_metrics(mode: Any, eval_metric_ops: Any) -> dict[str, MetricOp]:
    if eval_metric_ops is None:
        return {}
    if not isinstance(eval_metric_ops, Mapping):
        raise TypeError(
            f"{_mode_tag(mode)}: eval_metric_ops must be a dict, given: {eval_metric_ops!r}."
        )
    for key, value in eval_metric_ops.items():
        if not isinstance(key, str):
            raise TypeError(f"{_mode_tag(mode)}: eval_metric_ops keys must be strings, given: {key!r}")
        if not isinstance(value, MetricOp):
            raise TypeError(
                f"{_mode_tag(mode)}: Values of eval_metric_ops must be metric ops from "
                f"estimator_engine.metrics (e.g. ee.metrics.accuracy(labels=..., predictions=...)), "
                f"given: {value!r} for key: {key}"
            )
    return dict(eval_metric_ops)


def _validate_export_outputs(mode: Any, export_outputs: Any, predictions: Any) -> dict[str, ExportOutput]:
    if mode != ModeKeys.PREDICT:
        return {} if export_outputs is None else dict(export_outputs)
    if export_outputs is None:
        tensors: torch.Tensor | dict[Any, torch.Tensor]
        if isinstance(predictions, Mapping):
            tensors = {k: v for k, v in predictions.items() if isinstance(v, torch.Tensor)}
        else:
            tensors = predictions if isinstance(predictions, torch.Tensor) else {}
        return {DEFAULT_SERVING_KEY: PredictOutput(tensors)} if isinstance(tensors, torch.Tensor) or tensors else {}
    if not isinstance(export_outputs, Mapping):
        raise TypeError(f"{_mode_tag(mode)}: export_outputs must be dict, given: {export_outputs!r}")
    for key, value in export_outputs.items():
        if not isinstance(value, ExportOutput):
            raise TypeError(
                f"{_mode_tag(mode)}: Values in export_outputs must be ExportOutput objects "
                f"(ee.export.PredictOutput, ClassificationOutput, RegressionOutput). Given: "
                f"{{{key!r}: {value!r}}}"
            )
    outputs = dict(export_outputs)
    if len(outputs) == 1 and DEFAULT_SERVING_KEY not in outputs:
        outputs[DEFAULT_SERVING_KEY] = next(iter(outputs.values()))
    elif len(outputs) > 1 and DEFAULT_SERVING_KEY not in outputs:
        raise ValueError(
            f"{_mode_tag(mode)}: Multiple export_outputs were provided, but none of them is "
            f"specified as the default. Use '{DEFAULT_SERVING_KEY}' as the key of one of "
            f"{sorted(outputs)}."
        )
    return outputs


def _validate_hooks(mode: Any, field: str, hooks: Any) -> tuple[SessionRunHook, ...]:
    hooks = tuple(hooks or ())
    for hook in hooks:
        if not isinstance(hook, SessionRunHook):
            raise TypeError(
                f"{_mode_tag(mode)}: All hooks must be SessionRunHook instances, given: {hook!r} "
                f"in {field}. Subclass ee.SessionRunHook."
            )
    return hooks


# A typed namedtuple (TF's EstimatorSpec is a namedtuple too), so type checkers see the fields.
class _SpecBase(NamedTuple):
    mode: ModeKeys | None
    predictions: Any
    loss: torch.Tensor | None
    train_op: Callable[[], Any] | None
    eval_metric_ops: Mapping[str, MetricOp]
    export_outputs: Mapping[str, ExportOutput]
    training_chief_hooks: tuple[SessionRunHook, ...]
    training_hooks: tuple[SessionRunHook, ...]
    scaffold: Scaffold | None
    evaluation_hooks: tuple[SessionRunHook, ...]
    prediction_hooks: tuple[SessionRunHook, ...]
_FIELDS = _SpecBase._fields


class EstimatorSpec(_SpecBase):
    """Ops and objects returned from a ``model_fn`` and passed to an ``Estimator``.

    Required per mode: TRAIN needs ``loss`` and ``train_op``; EVAL needs ``loss``; PREDICT needs
    ``predictions``. Every field that is given is validated, whatever the mode.

    Example:
        >>> import torch, estimator_engine as ee
        >>> spec = ee.EstimatorSpec(ee.ModeKeys.PREDICT, predictions={'y': torch.zeros(2)})
        >>> sorted(spec.export_outputs)
        ['serving_default']
    """

    __slots__ = ()

    def __new__(
        cls,
        mode: ModeKeys | str | None,
        predictions: Any = None,
        loss: torch.Tensor | None = None,
        train_op: Callable[[], Any] | None = None,
        eval_metric_ops: Mapping[str, MetricOp] | None = None,
        export_outputs: Mapping[str, ExportOutput] | None = None,
        training_chief_hooks: Any = None,
        training_hooks: Any = None,
        scaffold: Scaffold | None = None,
        evaluation_hooks: Any = None,
        prediction_hooks: Any = None,
    ) -> EstimatorSpec:
        if getattr(_validation, "cheap", False):
            # Hot path: the first step of this call passed the full checks below.
            if mode == ModeKeys.TRAIN:
                if loss is None or train_op is None:
                    _validate_train_op(mode, train_op)
                    _validate_loss(mode, loss)
                if not isinstance(loss, torch.Tensor) or loss.dim() != 0:
                    loss = _validate_loss(mode, loss)
            elif mode == ModeKeys.EVAL:
                if not isinstance(loss, torch.Tensor) or loss.dim() != 0:
                    loss = _validate_loss(mode, loss)
            elif mode == ModeKeys.PREDICT and predictions is None:
                _validate_predictions(mode, predictions)
            return _SpecBase.__new__(
                cls, mode if isinstance(mode, ModeKeys) else _validate_mode(mode),
                {} if predictions is None else predictions, loss, train_op,
                {} if eval_metric_ops is None else eval_metric_ops, export_outputs or {},
                training_chief_hooks or (), training_hooks or (), scaffold,
                evaluation_hooks or (), prediction_hooks or (),
            )
        mode = _validate_mode(mode)
        predictions = _validate_predictions(mode, predictions)
        loss = _validate_loss(mode, loss)
        train_op = _validate_train_op(mode, train_op)
        eval_metric_ops = _validate_metrics(mode, eval_metric_ops)
        export_outputs = _validate_export_outputs(mode, export_outputs, predictions)
        hooks = {field: _validate_hooks(mode, field, value) for field, value in (
            ("training_chief_hooks", training_chief_hooks), ("training_hooks", training_hooks),
            ("evaluation_hooks", evaluation_hooks), ("prediction_hooks", prediction_hooks))}
        if scaffold is None:
            scaffold = Scaffold()
        elif not isinstance(scaffold, Scaffold):
            raise TypeError(f"{_mode_tag(mode)}: scaffold must be ee.Scaffold. Given: {scaffold!r}")
        return _SpecBase.__new__(
            cls, mode, predictions, loss, train_op, eval_metric_ops, export_outputs,
            hooks["training_chief_hooks"], hooks["training_hooks"], scaffold,
            hooks["evaluation_hooks"], hooks["prediction_hooks"],
        )

    def _replace(self, **kwargs: Any) -> EstimatorSpec:
        """Returns a copy with fields replaced, validated again; the mode cannot change."""
        if "mode" in kwargs and kwargs["mode"] != self.mode:
            raise ValueError("mode of EstimatorSpec cannot be changed.")
        unknown = sorted(set(kwargs) - set(_FIELDS))
        if unknown:
            raise ValueError(f"Got unexpected field names: {unknown}; EstimatorSpec fields are {list(_FIELDS)}")
        fields = self._asdict()
        fields.update(kwargs)
        return EstimatorSpec(**fields)
