"""Known-answer fixtures for tests and examples: linear data, a linear ``model_fn``, a recording hook."""

from __future__ import annotations

from typing import Any

import torch

from estimator_engine import metrics
from estimator_engine.hooks.base import SessionRunArgs, SessionRunHook
from estimator_engine.mode_keys import ModeKeys
from estimator_engine.model_state import get_module, get_optimizer, minimize
from estimator_engine.spec import EstimatorSpec

__all__ = ["RecordingHook", "linear_model_fn", "make_linear_data"]


def make_linear_data(a: float = 2.0, b: float = 3.0, n: int = 256, noise: float = 0.0,
                     seed: int = 0) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """``x`` uniform in [-1, 1] and ``y = a * x + b (+ noise)``, as ``({'x': x}, y)`` of shape [n, 1]."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.rand(n, 1, generator=generator) * 2 - 1
    y = a * x + b + noise * torch.randn(n, 1, generator=generator)
    return {"x": x}, y


def linear_model_fn(features: dict[str, torch.Tensor], labels: torch.Tensor | None, mode: ModeKeys,
                    params: dict[str, Any]) -> EstimatorSpec:
    """``y = w * x + b`` trained with SGD (``params['learning_rate']``, default 0.1) on MSE."""
    if labels is None and mode != ModeKeys.PREDICT:
        raise ValueError(f"linear_model_fn needs labels in mode {mode!r}, got labels=None; "
                         "return (features, labels) from the input_fn.")
    linear = get_module("linear", lambda: torch.nn.Linear(1, 1))
    predictions = linear(features["x"])
    if mode == ModeKeys.PREDICT or labels is None:  # labels is None only in PREDICT (checked above)
        return EstimatorSpec(mode, predictions={"y": predictions})
    loss = torch.nn.functional.mse_loss(predictions, labels)
    if mode == ModeKeys.EVAL:
        return EstimatorSpec(mode, loss=loss, eval_metric_ops={
            "mae": metrics.mean_absolute_error(labels=labels, predictions=predictions)})
    optimizer = get_optimizer("sgd", lambda: torch.optim.SGD(
        linear.parameters(), lr=params.get("learning_rate", 0.1)))
    return EstimatorSpec(mode, loss=loss, train_op=minimize(optimizer, loss))


class RecordingHook(SessionRunHook):
    """Records every hook call as a string (``'begin'``, ``'before_run'``, ...) to pin the order.

    Example:
        >>> hook = RecordingHook()
        >>> hook.begin(); hook.calls
        ['begin']
    """

    def __init__(self, fetches: Any = None, tag: str = "") -> None:
        self.fetches = fetches
        self.tag = tag
        self.calls: list[str] = []
        self.results: list[Any] = []

    def _record(self, name: str) -> None:
        self.calls.append(f"{self.tag}{name}")

    def begin(self) -> None:
        self._record("begin")

    def after_create_session(self, session: Any, coord: Any = None) -> None:
        self._record("after_create_session")

    def before_run(self, run_context: Any) -> SessionRunArgs | None:
        self._record("before_run")
        return None if self.fetches is None else SessionRunArgs(self.fetches)

    def after_run(self, run_context: Any, run_values: Any) -> None:
        self._record("after_run")
        self.results.append(run_values.results)

    def on_exception(self, exception: BaseException) -> None:
        self._record("on_exception")

    def end(self, session: Any) -> None:
        self._record("end")
