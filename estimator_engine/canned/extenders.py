"""Estimator extenders: ``add_metrics`` (TF's ``tf.estimator.add_metrics``) and ``forward_features``
(TF 1's ``tf.contrib.estimator.forward_features``).

Each returns a new ``Estimator`` sharing the given one's ``model_dir``, ``config`` and warm start,
whose ``model_fn`` calls the given one's and extends its spec.

Example:
    >>> import estimator_engine as ee
    >>> def my_auc(labels, predictions):
    ...     return {'auc': ee.metrics.auc(labels, predictions['logistic'])}
    >>> # est = add_metrics(ee.DNNClassifier(...), my_auc)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch

from estimator_engine._fn_args import fn_args
from estimator_engine.estimator import Estimator
from estimator_engine.export_output import PredictOutput
from estimator_engine.mode_keys import ModeKeys
from estimator_engine.spec import EstimatorSpec

__all__ = ["add_metrics", "forward_features"]

_VALID_METRIC_FN_ARGS = frozenset({"features", "labels", "predictions", "config"})


def _rebuilt(estimator: Estimator, model_fn: Callable[..., EstimatorSpec]) -> Estimator:
    if not isinstance(estimator, Estimator):
        raise TypeError(f"estimator must be an ee.Estimator, given: {estimator!r:.200}.")
    return Estimator(model_fn=model_fn, model_dir=estimator.model_dir, config=estimator.config,
                     warm_start_from=estimator._warm_start_settings)


def add_metrics(estimator: Estimator, metric_fn: Callable[..., Mapping[str, Any]]) -> Estimator:
    """A new Estimator whose evaluation also reports ``metric_fn``'s metrics (TF's ``add_metrics``).

    Args:
        estimator: the Estimator to extend.
        metric_fn: takes any of ``features``, ``labels``, ``predictions``, ``config`` (by name)
            and returns ``{name: MetricOp}`` (e.g. ``ee.metrics.auc(...)``); a name the
            estimator already reports is overridden.

    Raises:
        ValueError: ``metric_fn`` takes another argument.

    Example:
        >>> def metric_fn(labels, predictions):
        ...     return {'mae': ee.metrics.mean_absolute_error(labels, predictions['predictions'])}
        >>> # add_metrics(ee.LinearRegressor([...]), metric_fn).evaluate(input_fn)['mae']
    """
    if not callable(metric_fn):
        raise TypeError(f"metric_fn must be callable, given: {metric_fn!r}.")
    args = fn_args(metric_fn)
    invalid = sorted(set(args) - _VALID_METRIC_FN_ARGS)
    if invalid:
        raise ValueError(f"metric_fn ({metric_fn}) has following not expected args: {invalid}. "
                         f"It may take only {sorted(_VALID_METRIC_FN_ARGS)}.")
    original = estimator.model_fn

    def new_model_fn(features, labels, mode, config):
        spec = original(features, labels, mode, config)
        if mode != ModeKeys.EVAL:
            return spec
        given = {"features": features, "labels": labels, "predictions": spec.predictions, "config": config}
        new_metrics = metric_fn(**{name: given[name] for name in args})
        if not isinstance(new_metrics, Mapping):
            raise TypeError(f"metric_fn must return a dict of metric name -> MetricOp, returned "
                            f"{type(new_metrics).__name__}: {new_metrics!r:.200}.")
        all_metrics = dict(spec.eval_metric_ops or {})
        all_metrics.update(new_metrics)
        return spec._replace(eval_metric_ops=all_metrics)

    return _rebuilt(estimator, new_model_fn)


def _batch_size(value: Any) -> int | None:
    shape = getattr(value, "shape", None)
    return int(shape[0]) if shape is not None and len(shape) else None


def forward_features(estimator: Estimator, keys: str | Sequence[str] | None = None) -> Estimator:
    """A new Estimator whose predictions also carry the features ``keys`` (e.g. an example id).

    In PREDICT the features are added to the predictions dict, and to the ``predict`` /
    ``serving_default`` export outputs that are ``PredictOutput``\\ s.

    Args:
        estimator: the Estimator to extend; its predictions must be a dict.
        keys: a feature key or a list of them; ``None``: every feature.

    Raises:
        ValueError: a key is not in the features, is already a prediction key, or the feature's
            batch size differs from the predictions'.

    Example:
        >>> # for p in forward_features(est, 'id').predict(input_fn): p['id'], p['class_ids']
    """
    if isinstance(keys, str):
        keys = [keys]
    elif keys is not None:
        keys = list(keys)
        bad = [k for k in keys if not isinstance(k, str)]
        if bad:
            raise TypeError(f"keys must be a string or a list of strings, given: {keys!r}.")
    original = estimator.model_fn

    def new_model_fn(features, labels, mode, config):
        spec = original(features, labels, mode, config)
        if mode != ModeKeys.PREDICT:
            return spec
        predictions = spec.predictions
        if not isinstance(predictions, Mapping):
            raise ValueError(f"Predictions should be a dict to be able to forward features. "
                             f"Given: {type(predictions).__name__}.")
        predictions = dict(predictions)
        batch = next((b for b in map(_batch_size, predictions.values()) if b is not None), None)
        for key in (list(features) if keys is None else keys):
            if key not in features:
                raise ValueError(f"keys should be exist in features. Key {key!r} is not in features "
                                 f"dict. features dict: {sorted(features)!r:.200}.")
            if key in predictions:
                raise ValueError(f"Cannot forward feature key ({key}). Since it does exist in "
                                 f"predictions. Existing keys in predictions: {sorted(predictions)}.")
            value = features[key]
            if not isinstance(value, (torch.Tensor, np.ndarray)):
                value = np.asarray(value)
            if batch is not None and _batch_size(value) != batch:
                raise ValueError(f"Feature ({key}) should have the same batch size as the predictions "
                                 f"({batch}); its shape is {tuple(value.shape)}.")
            predictions[key] = value
        export_outputs = dict(spec.export_outputs or {})
        tensors = {k: v for k, v in predictions.items() if isinstance(v, torch.Tensor)}
        for name in ("predict", "serving_default"):
            if isinstance(export_outputs.get(name), PredictOutput):
                export_outputs[name] = PredictOutput(tensors)
        return spec._replace(predictions=predictions, export_outputs=export_outputs or None)

    return _rebuilt(estimator, new_model_fn)
