"""Optimizers of the canned estimators: TF's names and defaults, and an FTRL-Proximal optimizer.

A canned estimator's ``optimizer`` argument may be

* a name: ``'Adagrad'``, ``'Adam'``, ``'Ftrl'``, ``'RMSProp'`` or ``'SGD'``, built as TF 2's
  ``optimizers.get_optimizer_instance_v2`` builds them: the Keras (legacy) optimizer with its
  hyper-parameters (``epsilon=1e-7``, Adagrad's ``initial_accumulator_value=0.1``, RMSprop's
  ``rho=0.9``) and the learning rate the estimator passes, or, where it passes none (TF 2's
  ``DNNClassifier``/``DNNRegressor``), Keras' default learning rate (``KERAS_LEARNING_RATES``:
  0.001, and 0.01 for SGD);
* a ``torch.optim.Optimizer`` subclass, called as ``cls(params)`` (its own defaults);
* a factory ``fn(params) -> torch.optim.Optimizer``, e.g. ``functools.partial(torch.optim.Adam,
  lr=0.01)``.

An optimizer *instance* cannot be passed: the canned model's parameters do not exist until its
``model_fn`` first runs, so the optimizer is built then, from the factory.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import torch

__all__ = [
    "KERAS_LEARNING_RATES",
    "OPTIMIZER_NAMES",
    "Ftrl",
    "OptimizerSpec",
    "TFAdam",
    "build_optimizer",
    "default_linear_learning_rate",
    "get_optimizer_factory",
]

OptimizerSpec = str | type | Callable[[Iterable[torch.nn.Parameter]], torch.optim.Optimizer]

# Keras' backend epsilon, used by TF's optimizers where torch's defaults differ.
_EPSILON = 1e-7

OPTIMIZER_NAMES = ("Adagrad", "Adam", "Ftrl", "RMSProp", "SGD")

# The default learning rates of tf_keras.optimizers.legacy.*, which TF 2's
# get_optimizer_instance_v2 uses for a name given without a learning rate.
KERAS_LEARNING_RATES = {"Adagrad": 0.001, "Adam": 0.001, "Ftrl": 0.001, "RMSProp": 0.001, "SGD": 0.01}


class Ftrl(torch.optim.Optimizer):
    """FTRL-Proximal (McMahan et al., 2013), with TF's update rule and defaults.

    Per element, with gradient ``g``, accumulator ``n`` and linear term ``z``::

        g' = g + 2 * l2_shrinkage_regularization_strength * w
        n_new = n + g ** 2
        z += g' - (n_new ** -p - n ** -p) / lr * w        # p = learning_rate_power
        w = (sign(z) * l1 - z) / (n_new ** -p / lr + 2 * l2')  if |z| > l1  else 0
        n = n_new

    where ``l2' = l2 + beta / (2 * lr)`` (Keras' ``beta``). The accumulator starts at
    ``initial_accumulator_value`` and ``z`` at 0, as in TF.

    Args:
        params: parameters (or parameter groups) to optimise.
        lr: learning rate, > 0.
        learning_rate_power: ``p`` above, <= 0 (-0.5 is the classic rule).
        initial_accumulator_value: starting accumulator, >= 0.
        l1: L1 regularization strength, >= 0.
        l2: L2 regularization strength, >= 0.
        l2_shrinkage_regularization_strength: L2 shrinkage on the gradient, >= 0.
        beta: Keras' ``beta``, >= 0.

    Example:
        >>> w = torch.nn.Parameter(torch.tensor([1.0]))
        >>> opt = Ftrl([w], lr=0.1)
        >>> w.grad = torch.tensor([0.5])
        >>> opt.step()
        >>> round(w.item(), 5)
        0.38096
    """

    def __init__(self, params: Iterable[Any], lr: float = 0.001, learning_rate_power: float = -0.5,
                 initial_accumulator_value: float = 0.1, l1: float = 0.0, l2: float = 0.0,
                 l2_shrinkage_regularization_strength: float = 0.0, beta: float = 0.0) -> None:
        if not lr > 0:
            raise ValueError(f"Ftrl: lr must be > 0, got lr={lr!r}.")
        if learning_rate_power > 0:
            raise ValueError(f"Ftrl: learning_rate_power must be <= 0, got {learning_rate_power!r}.")
        for name, value in (("initial_accumulator_value", initial_accumulator_value), ("l1", l1),
                            ("l2", l2), ("l2_shrinkage_regularization_strength",
                                         l2_shrinkage_regularization_strength), ("beta", beta)):
            if value < 0:
                raise ValueError(f"Ftrl: {name} must be >= 0, got {name}={value!r}.")
        defaults = dict(lr=lr, learning_rate_power=learning_rate_power,
                        initial_accumulator_value=initial_accumulator_value, l1=l1, l2=l2,
                        l2_shrinkage_regularization_strength=l2_shrinkage_regularization_strength,
                        beta=beta)
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Performs one FTRL step for every parameter that has a gradient."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            lr, power = group["lr"], -group["learning_rate_power"]
            l1 = group["l1"]
            l2 = group["l2"] + group["beta"] / (2.0 * lr)
            shrinkage = group["l2_shrinkage_regularization_strength"]
            for param in group["params"]:
                if param.grad is None:
                    continue
                if param.grad.is_sparse:
                    raise RuntimeError("Ftrl does not support sparse gradients.")
                grad = param.grad
                state = self.state[param]
                if not state:
                    state["accumulator"] = torch.full_like(
                        param, group["initial_accumulator_value"], memory_format=torch.preserve_format)
                    state["linear"] = torch.zeros_like(param, memory_format=torch.preserve_format)
                accum, linear = state["accumulator"], state["linear"]
                shrunk = grad + 2.0 * shrinkage * param if shrinkage > 0 else grad
                new_accum = accum + grad * grad
                if power == 0.5:
                    new_pow, old_pow = new_accum.sqrt(), accum.sqrt()
                else:
                    new_pow, old_pow = new_accum.pow(power), accum.pow(power)
                linear.add_(shrunk - (new_pow - old_pow) / lr * param)
                quadratic = new_pow / lr + 2.0 * l2
                if l1 > 0:
                    updated = (linear.sign() * l1 - linear) / quadratic
                    param.copy_(torch.where(linear.abs() > l1, updated, torch.zeros_like(updated)))
                else:
                    param.copy_(-linear / quadratic)
                accum.copy_(new_accum)
        return loss


class TFAdam(torch.optim.Adam):
    """torch's Adam with TF's epsilon placement (Keras' legacy Adam, TF's ``ApplyAdam`` kernel).

    TF adds epsilon to ``sqrt(v)`` before the bias correction of the step size::

        w -= lr * sqrt(1 - beta2 ** t) / (1 - beta1 ** t) * m / (sqrt(v) + epsilon)

    while torch adds it after (``m_hat / (sqrt(v_hat) + eps)``). The two agree when
    ``eps = epsilon / sqrt(1 - beta2 ** t)``, so each step sets that ``eps`` and runs torch's own
    (fused) kernel: TF's numbers at torch's speed. The difference matters in the first steps and
    for tiny gradients (a 1e-6 gradient moves a weight by 2.4e-4 in TF, 9.1e-4 in torch's Adam).

    Example:
        >>> w = torch.nn.Parameter(torch.tensor([1.0]))
        >>> opt = TFAdam([w], lr=0.001, eps=1e-7)
        >>> w.grad = torch.tensor([1e-6]); opt.step()
        >>> round(w.item(), 7)
        0.9997597
    """

    def __init__(self, params: Iterable[Any], lr: float = 0.001, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = _EPSILON, **kwargs: Any) -> None:
        super().__init__(params, lr=lr, betas=betas, eps=eps, **kwargs)
        self.defaults["tf_epsilon"] = eps
        for group in self.param_groups:
            group.setdefault("tf_epsilon", eps)

    @torch.no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        for group in self.param_groups:
            # A group restored from a checkpoint written before TFAdam keeps TF's epsilon in "eps".
            tf_epsilon = group.setdefault("tf_epsilon", group["eps"])
            step = next((float(self.state[p].get("step", 0)) for p in group["params"]
                         if p.grad is not None), 0.0) + 1
            group["eps"] = tf_epsilon / math.sqrt(1 - group["betas"][1] ** step)
        return super().step(closure)


def _on_cpu(params: list[Any]) -> bool:
    tensors = [t for p in params for t in (p["params"] if isinstance(p, dict) else [p])]
    return bool(tensors) and all(t.device.type == "cpu" for t in tensors)


def _named_optimizer(name: str, learning_rate: float
                     ) -> Callable[[Iterable[torch.nn.Parameter]], torch.optim.Optimizer]:
    """TF's hyper-parameters (Keras defaults), where torch's defaults differ, with torch's fastest
    kernel that keeps the update rule: on CPU fused Adam and Adagrad (torch's default there is
    the per-tensor loop; fused was 2.3x / 1.6x faster per step on the mid MLP, same rule, float
    differences ~1e-7), RMSprop's foreach kernel (1.3x); SGD's loop is already the fastest. On
    other devices torch's own default (foreach on CUDA) applies."""

    def adagrad(params: Iterable[Any]) -> torch.optim.Optimizer:
        params = list(params)
        return torch.optim.Adagrad(params, lr=learning_rate, initial_accumulator_value=0.1,
                                   eps=_EPSILON, fused=True if _on_cpu(params) else None)

    def adam(params: Iterable[Any]) -> torch.optim.Optimizer:
        params = list(params)
        return TFAdam(params, lr=learning_rate, eps=_EPSILON, fused=True if _on_cpu(params) else None)

    def rmsprop(params: Iterable[Any]) -> torch.optim.Optimizer:
        params = list(params)
        return torch.optim.RMSprop(params, lr=learning_rate, alpha=0.9, eps=_EPSILON,
                                   foreach=True if _on_cpu(params) else None)

    builders = {"Adagrad": adagrad, "Adam": adam, "RMSProp": rmsprop,
                "Ftrl": lambda params: Ftrl(params, lr=learning_rate),
                "SGD": lambda params: torch.optim.SGD(params, lr=learning_rate)}
    return builders[name]


def get_optimizer_factory(optimizer: Any, learning_rate: float | None = None, argument: str = "optimizer"
                          ) -> Callable[[Iterable[torch.nn.Parameter]], torch.optim.Optimizer]:
    """Turns a canned estimator's ``optimizer`` argument into ``fn(params) -> Optimizer``.

    Args:
        optimizer: a name (see ``OPTIMIZER_NAMES``), an Optimizer subclass or a factory.
        learning_rate: used for names only (the estimator's TF default); ``None``: the Keras
            default of that optimizer (``KERAS_LEARNING_RATES``), as TF 2's DNN estimators do.
        argument: the argument's name, for error messages.

    Raises:
        ValueError: an unknown name.
        TypeError: an optimizer instance, or anything else that is not callable.

    Example:
        >>> make = get_optimizer_factory('SGD', 0.1)
        >>> make([torch.nn.Parameter(torch.zeros(1))]).param_groups[0]['lr']
        0.1
    """
    if isinstance(optimizer, str):
        for name in OPTIMIZER_NAMES:
            if optimizer == name or optimizer.lower() == name.lower():
                rate = KERAS_LEARNING_RATES[name] if learning_rate is None else learning_rate
                return _named_optimizer(name, rate)
        raise ValueError(f"Unsupported optimizer name: {optimizer!r} for {argument}. Supported names "
                         f"are: {list(OPTIMIZER_NAMES)}, or pass an Optimizer class or a factory "
                         "fn(params) -> torch.optim.Optimizer.")
    if isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError(
            f"{argument} must be a name, a torch.optim.Optimizer class or a factory "
            f"fn(params) -> Optimizer, not an optimizer instance ({type(optimizer).__name__}): the "
            "canned model's parameters are created when it first runs. Pass e.g. "
            f"functools.partial(torch.optim.{type(optimizer).__name__}, lr=...) instead.")
    if isinstance(optimizer, type):
        if not issubclass(optimizer, torch.optim.Optimizer):
            raise TypeError(f"{argument} class must be a torch.optim.Optimizer subclass, given: {optimizer!r}.")
        optimizer_class: Callable[..., torch.optim.Optimizer] = optimizer  # a subclass: its own defaults
        return lambda params: optimizer_class(params)
    if callable(optimizer):
        return optimizer
    raise TypeError(f"{argument} must be a name {list(OPTIMIZER_NAMES)}, a torch.optim.Optimizer class "
                    f"or a factory fn(params) -> Optimizer, given: {optimizer!r}.")


def build_optimizer(factory: Callable[[Iterable[torch.nn.Parameter]], torch.optim.Optimizer],
                    params: list[torch.nn.Parameter], argument: str = "optimizer") -> torch.optim.Optimizer:
    """Calls ``factory(params)`` and checks it returned an Optimizer."""
    optimizer = factory(params)
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError(f"The {argument} factory must return a torch.optim.Optimizer, returned "
                        f"{type(optimizer).__name__}: {optimizer!r:.100}.")
    return optimizer


def default_linear_learning_rate(num_columns: int, cap: float) -> float:
    """TF's linear default: ``min(cap, 1 / sqrt(num_columns))``."""
    return min(cap, 1.0 / math.sqrt(num_columns)) if num_columns > 0 else cap

