"""Learning-rate schedules read from the global step (TF's ``exponential_decay``, ``piecewise_constant``).

TF decays a learning rate with the global step: ``tf.compat.v1.train.exponential_decay(lr,
global_step, ...)`` or a Keras schedule (``tf.keras.optimizers.schedules.ExponentialDecay``) given
as an optimizer's ``learning_rate``. Here a schedule is a callable ``schedule(step) -> float``
with TF's formula, and ``scheduled(torch.optim.Adam, schedule, ...)`` is an optimizer factory
(what canned estimators and ``get_optimizer`` take) whose optimizer the Estimator sets to
``schedule(global_step)`` before each step, the global step being the value that step reads
(before its increment), as in TF. ``attach`` does the same for an optimizer built by hand.

Example:
    >>> schedule = ExponentialDecay(0.1, decay_steps=100, decay_rate=0.5, staircase=True)
    >>> schedule(0), schedule(150)
    (0.1, 0.05)
    >>> # ee.DNNClassifier(..., optimizer=scheduled(torch.optim.Adagrad, schedule))
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch

__all__ = ["ExponentialDecay", "LearningRateSchedule", "PiecewiseConstantDecay", "attach",
           "exponential_decay", "piecewise_constant", "scheduled"]

_SCHEDULE_ATTRIBUTE = "_ee_learning_rate_schedule"


class LearningRateSchedule:
    """Base of the schedules: ``schedule(step) -> float``."""

    def __call__(self, step: int) -> float:
        raise NotImplementedError


class ExponentialDecay(LearningRateSchedule):
    """``learning_rate * decay_rate ** (step / decay_steps)`` (the exponent floored with ``staircase``).

    TF's ``tf.keras.optimizers.schedules.ExponentialDecay`` and ``tf.compat.v1.train.exponential_decay``.

    Example:
        >>> round(ExponentialDecay(0.1, 100, 0.96)(250), 6)
        0.090298
    """

    def __init__(self, initial_learning_rate: float, decay_steps: int, decay_rate: float,
                 staircase: bool = False) -> None:
        if not decay_steps or decay_steps <= 0:
            raise ValueError(f"decay_steps must be > 0, given {decay_steps!r}.")
        self.initial_learning_rate = float(initial_learning_rate)
        self.decay_steps = decay_steps
        self.decay_rate = float(decay_rate)
        self.staircase = bool(staircase)

    def __call__(self, step: int) -> float:
        exponent = step / self.decay_steps
        if self.staircase:
            exponent = math.floor(exponent)
        return self.initial_learning_rate * self.decay_rate ** exponent

    def __repr__(self) -> str:
        return (f"ExponentialDecay({self.initial_learning_rate}, decay_steps={self.decay_steps}, "
                f"decay_rate={self.decay_rate}, staircase={self.staircase})")


class PiecewiseConstantDecay(LearningRateSchedule):
    """``values[0]`` up to ``boundaries[0]`` (included), ``values[1]`` up to ``boundaries[1]``, ...

    TF's ``tf.keras.optimizers.schedules.PiecewiseConstantDecay`` and
    ``tf.compat.v1.train.piecewise_constant``: ``len(values) == len(boundaries) + 1``.

    Example:
        >>> schedule = PiecewiseConstantDecay([100, 1000], [1.0, 0.5, 0.1])
        >>> schedule(100), schedule(101), schedule(5000)
        (1.0, 0.5, 0.1)
    """

    def __init__(self, boundaries: Sequence[int], values: Sequence[float]) -> None:
        if len(boundaries) != len(values) - 1:
            raise ValueError("The length of boundaries should be 1 less than the length of values, given "
                             f"boundaries={list(boundaries)!r}, values={list(values)!r}.")
        if list(boundaries) != sorted(boundaries):
            raise ValueError(f"boundaries must be increasing, given {list(boundaries)!r}.")
        self.boundaries = list(boundaries)
        self.values = [float(v) for v in values]

    def __call__(self, step: int) -> float:
        return self.values[bisect.bisect_left(self.boundaries, step)]

    def __repr__(self) -> str:
        return f"PiecewiseConstantDecay({self.boundaries}, {self.values})"


def exponential_decay(learning_rate: float, global_step: int, decay_steps: int, decay_rate: float,
                      staircase: bool = False) -> float:
    """TF 1's ``tf.compat.v1.train.exponential_decay`` at ``global_step`` (e.g. ``ee.get_global_step()``).

    Example:
        >>> exponential_decay(0.1, 200, 100, 0.5)
        0.025
    """
    return ExponentialDecay(learning_rate, decay_steps, decay_rate, staircase)(int(global_step))


def piecewise_constant(x: int, boundaries: Sequence[int], values: Sequence[float]) -> float:
    """TF 1's ``tf.compat.v1.train.piecewise_constant`` at step ``x``.

    Example:
        >>> piecewise_constant(150, [100], [1.0, 0.1])
        0.1
    """
    return PiecewiseConstantDecay(boundaries, values)(int(x))


def attach(optimizer: torch.optim.Optimizer, learning_rate: Callable[[int], float]) -> torch.optim.Optimizer:
    """Sets every group of ``optimizer`` to ``learning_rate(global_step)`` before each training step.

    Applied by ``ee.minimize``'s train op (so by canned estimators too); returns ``optimizer``.

    Example:
        >>> opt = attach(torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0),
        ...              PiecewiseConstantDecay([10], [0.1, 0.01]))
        >>> opt.param_groups[0]['lr']
        0.1
    """
    if not callable(learning_rate):
        raise TypeError(f"learning_rate must be a schedule callable(step) -> float, given {learning_rate!r}.")
    setattr(optimizer, _SCHEDULE_ATTRIBUTE, learning_rate)
    set_learning_rate(optimizer, 0)
    return optimizer


def scheduled(optimizer_class: Callable[..., torch.optim.Optimizer], learning_rate: Callable[[int], float],
              **kwargs: Any) -> Callable[[Iterable[torch.nn.Parameter]], torch.optim.Optimizer]:
    """An optimizer factory ``fn(params)`` whose learning rate follows ``learning_rate(global_step)``.

    Example:
        >>> make = scheduled(torch.optim.Adam, ExponentialDecay(0.01, 1000, 0.9), eps=1e-7)
        >>> make([torch.nn.Parameter(torch.zeros(1))]).param_groups[0]['lr']
        0.01
    """
    if not callable(learning_rate):
        raise TypeError(f"learning_rate must be a schedule callable(step) -> float, given {learning_rate!r}.")

    def factory(params: Iterable[torch.nn.Parameter]) -> torch.optim.Optimizer:
        return attach(optimizer_class(params, lr=learning_rate(0), **kwargs), learning_rate)

    return factory


def schedule_of(optimizer: torch.optim.Optimizer) -> Callable[[int], float] | None:
    """The schedule ``attach`` gave ``optimizer``, or ``None``."""
    return getattr(optimizer, _SCHEDULE_ATTRIBUTE, None)


def set_learning_rate(optimizer: torch.optim.Optimizer, step: int) -> None:
    """Sets ``optimizer``'s groups to its schedule's rate at ``step`` (nothing without a schedule)."""
    schedule = schedule_of(optimizer)
    if schedule is not None:
        rate = float(schedule(step))
        for group in optimizer.param_groups:
            group["lr"] = rate
