"""Named model state of a running Estimator: ``get_module``, ``get_optimizer``, ``minimize``.

These are the eager counterparts of ``tf.compat.v1.get_variable`` and ``optimizer.minimize``: a
``model_fn`` is called once per batch, and ``get_module(name, factory)`` returns the same module on
every call, built by ``factory()`` the first time. The Estimator owns the ``ModelState`` holding
them; creating a module is where it is moved to the device and restored from the checkpoint (or
warm-started), so the ``model_fn`` never deals with checkpoints.
"""

from __future__ import annotations

import contextlib
import copy
import logging
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

import numpy as np
import torch

from estimator_engine import checkpoints, learning_rate
from estimator_engine.mode_keys import ModeKeys

__all__ = ["ModelState", "TrainOp", "get_global_step", "get_module", "get_optimizer", "identity", "minimize",
           "trainable_variables", "use_fastest_kernel"]

_log = logging.getLogger("estimator_engine")

ModuleT = TypeVar("ModuleT", bound=torch.nn.Module)
OptimizerT = TypeVar("OptimizerT", bound=torch.optim.Optimizer)

# What every nn.Module keeps in its __dict__; anything else there is the module's own state.
_MODULE_INTERNALS = frozenset(vars(torch.nn.Module()))

# The state of the Estimator call in progress. A plain global rather than a contextvar: it is
# read on every get_module call, and an Estimator runs one call at a time per process.
_active: ModelState | None = None


def _same(current: Any, pristine: Any) -> bool:
    """Whether ``current`` still equals the deep copy ``pristine`` (unknown kinds: identity or ==)."""
    if current is pristine:
        return True
    if type(current) is not type(pristine):
        return False
    if isinstance(current, torch.Tensor):
        return (current.shape == pristine.shape and current.dtype == pristine.dtype
                and current.device == pristine.device and torch.equal(current, pristine))
    if isinstance(current, np.ndarray):
        return current.dtype == pristine.dtype and np.array_equal(current, pristine)
    if isinstance(current, Mapping):
        return current.keys() == pristine.keys() and all(_same(current[k], pristine[k]) for k in current)
    if isinstance(current, (list, tuple)):
        return len(current) == len(pristine) and all(map(_same, current, pristine))
    try:
        return bool(current == pristine)
    except Exception:  # e.g. an object whose == is elementwise
        return False


class _Pristine:
    """A module as built and restored: what lets a reused module be proven equal to a fresh build.

    Checkpoint variables (parameters, persistent buffers) are tracked by identity and version
    counter (every in-place change bumps it), so an unchanged one costs nothing to verify and a
    changed one is restored from the checkpoint. What no checkpoint holds is copied here at
    creation: non-persistent buffers (put back on reuse) and each submodule's own attributes
    (compared on reuse; a difference means the module cannot be reused).
    """

    __slots__ = ("attributes", "buffers", "submodules", "variables")

    def __init__(self, module: torch.nn.Module) -> None:
        self.submodules = list(module.modules())
        self.buffers: list[tuple[torch.nn.Module, str, torch.Tensor]] = []
        self.attributes: list[tuple[torch.nn.Module, Any]] = []
        for sub in self.submodules:
            for name in sub._non_persistent_buffers_set:
                buffer = sub._buffers.get(name)
                if buffer is not None:
                    self.buffers.append((sub, name, buffer.detach().clone()))
            own = {k: v for k, v in vars(sub).items() if k not in _MODULE_INTERNALS}
            if own:
                try:
                    self.attributes.append((sub, copy.deepcopy(own)))
                except Exception:  # not copyable: never provably unchanged
                    self.attributes.append((sub, _NOT_COPYABLE))
        self.variables: list[tuple[dict[str, Any], str, torch.Tensor, int]] = []
        self.record_variables()

    def record_variables(self) -> None:
        """Notes the current parameters and persistent buffers as equal to the checkpoint."""
        self.variables = [
            (store, name, tensor, tensor._version)
            for sub in self.submodules
            for store in (sub._parameters, sub._buffers)
            for name, tensor in store.items()
            if tensor is not None and not (store is sub._buffers and name in sub._non_persistent_buffers_set)]

    def unchanged_structure(self, module: torch.nn.Module) -> bool:
        """Same submodules, same own attributes and the same variable objects as when built."""
        if list(module.modules()) != self.submodules:
            return False
        for sub, pristine in self.attributes:
            own = {k: v for k, v in vars(sub).items() if k not in _MODULE_INTERNALS}
            if pristine is _NOT_COPYABLE or not _same(own, pristine):
                return False
        return all(store.get(name) is tensor for store, name, tensor, _ in self.variables)

    def variables_changed(self) -> bool:
        return any(tensor._version != version for _, _, tensor, version in self.variables)

    def restore_buffers(self) -> None:
        with torch.no_grad():
            for sub, name, pristine in self.buffers:
                buffer = sub._buffers.get(name)
                if buffer is None or buffer.shape != pristine.shape or buffer.dtype != pristine.dtype:
                    sub._buffers[name] = pristine.clone()
                else:
                    buffer.copy_(pristine)


_NOT_COPYABLE = object()


class ModelState:
    """Modules, optimizers and the global step of one Estimator, with their restore source.

    Args:
        device: where modules are placed.
        checkpoint_path: the checkpoint this state is restored from (``None``: fresh or warm start).
        checkpoint: the loaded checkpoint dict, if already read.
        warm_starter: a ``warm_start.WarmStarter`` applied to each created module when there is
            no checkpoint to restore.
        module_wrapper: optional ``fn(name, module) -> module`` applied after restore (DDP, compile).

    Example:
        >>> state = ModelState(torch.device('cpu'))
        >>> with state.activated(ModeKeys.TRAIN):
        ...     layer = get_module('dense', lambda: torch.nn.Linear(2, 1))
        >>> sorted(state.variables())
        ['dense/bias', 'dense/weight']
    """

    def __init__(self, device: torch.device, checkpoint_path: str | None = None,
                 checkpoint: Mapping[str, Any] | None = None, warm_starter: Any = None,
                 module_wrapper: Callable[[str, torch.nn.Module], torch.nn.Module] | None = None) -> None:
        self.device = device
        self.checkpoint_path = checkpoint_path
        self._checkpoint = checkpoint
        self.warm_starter = warm_starter
        self.module_wrapper = module_wrapper
        self.inference_wrapper: Callable[[str, torch.nn.Module], torch.nn.Module] | None = None
        self.grad_scaler: Any = None
        self._raw_modules: dict[str, torch.nn.Module] = {}
        # TRAIN sees the wrapped modules (DDP, torch.compile); EVAL and PREDICT the plain or
        # compiled ones, so uneven evaluation shards never wait on DDP collectives.
        self._train_modules: dict[str, torch.nn.Module] = {}
        self._inference_modules: dict[str, torch.nn.Module] = {}
        self.modules: dict[str, torch.nn.Module] = self._train_modules
        self.optimizers: dict[str, torch.optim.Optimizer] = {}
        self.global_step = int(checkpoint["global_step"]) if checkpoint else 0
        self.mode: ModeKeys | None = None
        # Values the current model_fn call named (``identity``) or summarised (``summary.scalar``);
        # emptied before each call, read by hooks after the step.
        self.named_tensors: dict[str, Any] = {}
        self.summaries: dict[str, Any] = {}
        self._pristine: dict[str, _Pristine] = {}
        self._synced_step = self.global_step
        # (checkpoint path, file stat) this in-memory state equals, or None once it has diverged.
        self.synced_with: tuple[str, int, int] | None = None
        # (checkpoint path, module names) whose unused checkpoint variables were last reported.
        self.unused_variables_checked: tuple[str | None, tuple[str, ...]] | None = None

    @property
    def restored(self) -> bool:
        return self.checkpoint_path is not None

    @property
    def checkpoint(self) -> Mapping[str, Any] | None:
        """The restore source's contents, read from disk on first use."""
        if self._checkpoint is None and self.checkpoint_path is not None:
            self._checkpoint = checkpoints.load_checkpoint(self.checkpoint_path)
        return self._checkpoint

    def _restored_checkpoint(self) -> Mapping[str, Any]:
        """``checkpoint`` where ``restored`` holds: a set ``checkpoint_path`` always loads one."""
        checkpoint = self.checkpoint
        if checkpoint is None:
            raise RuntimeError("ModelState has no checkpoint to restore from (checkpoint_path is None)")
        return checkpoint

    @contextlib.contextmanager
    def activated(self, mode: ModeKeys) -> Iterator[ModelState]:
        """Makes this the state ``get_module``/``get_optimizer`` use, with modules in ``mode``."""
        global _active
        previous, _active = _active, self
        self.mode = mode
        training = mode == ModeKeys.TRAIN
        self.modules = self._train_modules if training else self._inference_modules
        for name, module in self._raw_modules.items():
            module.train(training)
            if training and name not in self._train_modules:
                # Created in EVAL/PREDICT: wrapped (DDP's collective broadcast) only when a
                # training call needs it, which every rank reaches together.
                self._train_modules[name] = self.module_wrapper(name, module) if self.module_wrapper else module
        try:
            yield self
        finally:
            _active = previous

    def reentered(self) -> _Reentry:
        """Makes this state active again, in the mode last set by ``activated`` (modules untouched).

        For ``predict``, which leaves the state between batches (it yields to its caller) and
        re-enters it per batch: cheaper than ``activated``, which also sets every module's mode.
        """
        return _Reentry(self)

    def create_module(self, name: str, factory: Callable[[], torch.nn.Module]) -> torch.nn.Module:
        if not isinstance(name, str) or not name or name.startswith("/") or name.endswith("/"):
            raise ValueError(f"get_module name must be a non-empty string without leading or trailing '/', given: {name!r}")
        if not callable(factory):
            raise TypeError(f"get_module({name!r}, factory): factory must be a zero-argument callable returning an nn.Module, given: {factory!r}")
        if self.restored:
            # Building the module draws from the RNG; restoring must not shift the stream that
            # the checkpoint's RNG state continues, so the draws happen on a forked RNG.
            with torch.random.fork_rng(devices=[]):
                module = factory()
        else:
            module = factory()
        if not isinstance(module, torch.nn.Module):
            raise TypeError(f"get_module({name!r}, factory): factory must return a torch.nn.Module, returned {type(module).__name__}: {module!r}")
        module.to(self.device)
        if self.restored:
            checkpoints.assign_module_variables(name, module, self._restored_checkpoint()["variables"], self.checkpoint_path)
        elif self.warm_starter is not None:
            self.warm_starter.apply(name, module)
        module.train(self.mode == ModeKeys.TRAIN)
        self._pristine[name] = _Pristine(module)
        self._raw_modules[name] = module
        if self.mode == ModeKeys.TRAIN:
            self._train_modules[name] = self.module_wrapper(name, module) if self.module_wrapper else module
        self._inference_modules[name] = (self.inference_wrapper(name, module)
                                         if self.inference_wrapper else module)
        return self.modules[name]

    def create_optimizer(self, name: str, factory: Callable[[], torch.optim.Optimizer],
                         fastest_kernel: bool = True) -> torch.optim.Optimizer:
        if not callable(factory):
            raise TypeError(f"get_optimizer({name!r}, factory): factory must be a zero-argument callable returning a torch.optim.Optimizer, given: {factory!r}")
        optimizer = factory()
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise TypeError(f"get_optimizer({name!r}, factory): factory must return a torch.optim.Optimizer, returned {type(optimizer).__name__}: {optimizer!r}")
        # Chosen before the state is restored: load_state_dict places step counters by kernel.
        if fastest_kernel:
            use_fastest_kernel(optimizer)
        optimizer._ee_kernel_chosen = True  # type: ignore[attr-defined]  # minimize leaves it alone
        saved = (self.checkpoint or {}).get("optimizers", {}).get(name) if self.restored else None
        if saved is not None:
            # State (moments, step counts) comes from the checkpoint; hyper-parameters such as
            # the learning rate from the factory, as in TF where they are part of the graph.
            hyperparameters = [{k: v for k, v in group.items() if k != "params"}
                               for group in optimizer.param_groups]
            optimizer.load_state_dict(saved)
            for group, values in zip(optimizer.param_groups, hyperparameters):
                group.update(values)
        elif self.restored and (self.checkpoint or {}).get("tf_checkpoint"):
            self._restore_tf_optimizer(name, optimizer)
        elif self.restored:
            _log.info("Checkpoint %s has no state for optimizer %r; it starts fresh.", self.checkpoint_path, name)
        self.optimizers[name] = optimizer
        return optimizer

    def _restore_tf_optimizer(self, name: str, optimizer: torch.optim.Optimizer) -> None:
        """Carries a TF checkpoint's optimizer slots (training/<Opt>/<variable>/<slot>) over."""
        names = {id(parameter): f"{module_name}/{path.replace('.', '/')}"
                 for module_name, module in self._raw_modules.items()
                 for path, parameter in module.named_parameters()}
        restored = checkpoints.restore_tf_optimizer_state(optimizer, names, self._restored_checkpoint())
        wanted = sum(len(group["params"]) for group in optimizer.param_groups)
        if len(restored) < wanted:
            _log.info("TF checkpoint %s holds the %s state of %d of the %d parameters of optimizer %r; "
                      "the others start fresh.", self.checkpoint_path, type(optimizer).__name__,
                      len(restored), wanted, name)

    def variables(self) -> dict[str, torch.Tensor]:
        """All module variables by TF-style name (``<module>/<param path>``), detached."""
        out: dict[str, torch.Tensor] = {}
        for name, module in self._raw_modules.items():
            out.update(checkpoints.module_variables(name, module))
        return out

    def modules_outside_optimizers(self) -> list[str]:
        """Modules with trainable parameters that no optimizer of this state updates."""
        if not self.optimizers:
            return []
        optimized = {id(p) for optimizer in self.optimizers.values()
                     for group in optimizer.param_groups for p in group["params"]}
        return [name for name, module in self._raw_modules.items()
                if any(p.requires_grad and id(p) not in optimized for p in module.parameters())]

    def unwrapped(self, name: str) -> torch.nn.Module:
        return self._raw_modules[name]

    def state_dict(self) -> dict[str, Any]:
        """The model part of a checkpoint: variables, optimizer states and the global step."""
        state = {
            "global_step": self.global_step,
            "variables": {k: v.detach().cpu() if v.device.type != "cpu" else v.detach()
                          for k, v in self.variables().items()},
            "optimizers": {name: opt.state_dict() for name, opt in self.optimizers.items()},
        }
        if self.grad_scaler is not None:
            state["grad_scaler"] = self.grad_scaler.state_dict()
        return state

    def mark_synced(self, checkpoint_path: str, marker: tuple[str, int, int]) -> None:
        """Records that the modules now equal ``checkpoint_path`` (just saved from this state).

        From here on, a module created in this state is restored from that checkpoint, as in a
        fresh build on it; the file is read only if needed.
        """
        self.checkpoint_path = checkpoint_path
        self._checkpoint = None
        self.warm_starter = None
        self.synced_with = marker
        self._synced_step = self.global_step
        for pristine in self._pristine.values():
            pristine.record_variables()

    def reset_to_checkpoint(self) -> bool:
        """Makes this state what a fresh build restored from its checkpoint gives, if provable.

        Parameters and persistent buffers changed in place are restored from the checkpoint,
        non-persistent buffers put back to their values as built, gradients and optimizers
        dropped (an optimizer is restored again when ``model_fn`` asks for it). Returns ``False``
        and changes nothing when a module's structure or own attributes changed since it was built:
        then only a fresh build is known to be right.
        """
        if self.synced_with is None or not self.restored:
            return False
        if not all(self._pristine[name].unchanged_structure(module)
                   for name, module in self._raw_modules.items()):
            return False
        for name, module in self._raw_modules.items():
            pristine = self._pristine[name]
            if pristine.variables_changed():
                checkpoints.assign_module_variables(name, module, self._restored_checkpoint()["variables"], self.checkpoint_path)
                pristine.record_variables()
            pristine.restore_buffers()
            for parameter in module.parameters():
                parameter.grad = None
        self.optimizers.clear()
        self.global_step = self._synced_step
        self.mode = None
        return True

    def unused_checkpoint_variables(self) -> list[str]:
        if not self.restored or self._checkpoint is None:  # not read from disk just to log this
            return []
        used = set(self.variables())
        return sorted(set(self._restored_checkpoint()["variables"]) - used)


class _Reentry:
    """Context manager of ``ModelState.reentered`` (a class: entered once per predict batch)."""

    __slots__ = ("_previous", "_state")

    def __init__(self, state: ModelState) -> None:
        self._state = state
        self._previous: ModelState | None = None

    def __enter__(self) -> ModelState:
        global _active
        self._previous, _active = _active, self._state
        return self._state

    def __exit__(self, *exc_info: Any) -> None:
        global _active
        _active = self._previous


def _require_active(what: str) -> ModelState:
    if _active is None:
        raise RuntimeError(
            f"{what} must be called inside a model_fn that an Estimator is running "
            "(train, evaluate, predict or export). Outside an Estimator, build the module directly."
        )
    return _active


def get_module(name: str, factory: Callable[[], ModuleT]) -> ModuleT:
    """Returns the module registered as ``name`` in the running Estimator, creating it once.

    The first call runs ``factory()``, moves the module to the Estimator's device and restores it
    from the checkpoint (or warm start). Its variables are named ``<name>/<parameter path>``,
    e.g. ``mlp/0/weight``.

    Example:
        >>> def model_fn(features, labels, mode):
        ...     net = get_module('mlp', lambda: torch.nn.Linear(4, 3))
        ...     logits = net(features['x'])
    """
    state = _active
    if state is None:
        state = _require_active("ee.get_module")
    module = state.modules.get(name)
    if module is None:
        module = state.create_module(name, factory)
    return module  # type: ignore[return-value]


# CPU kernels faster than torch's CPU default for these optimizers (a Python loop over the
# tensors), with the same update rule (parameters within ~1e-7 after 300 steps). Measured on the
# mid MLP (20-64-32-3, batch 128, one thread, alternated runs): fused Adam 1.4x, AdamW 1.9x,
# Adagrad 1.2x, SGD with momentum 1.2x, RMSprop's foreach 1.2x; plain SGD's loop was the fastest.
# On other devices torch's own default (foreach on CUDA) is kept.
_CPU_KERNELS: dict[type, str] = {torch.optim.Adam: "fused", torch.optim.AdamW: "fused",
                                 torch.optim.Adagrad: "fused", torch.optim.SGD: "fused",
                                 torch.optim.RMSprop: "foreach"}


def use_fastest_kernel(optimizer: torch.optim.Optimizer) -> str | None:
    """Switches ``optimizer`` to torch's fastest kernel for its device when its user chose none.

    ``get_optimizer`` (and ``minimize``, for an optimizer it has not seen) call this, so
    ``torch.optim.Adam(params, lr)`` written as TF's Adam was ported runs fused on CPU, as TF's
    ``ApplyAdam`` kernel did. Nothing changes when ``fused`` or ``foreach`` was given (either
    value), for a subclass, ``differentiable=True``, parameters off the CPU or not floating point,
    or SGD without momentum. Returns the kernel chosen (``'fused'``/``'foreach'``) or ``None``.
    Keep torch's default with ``get_optimizer(name, factory, fastest_kernel=False)`` or by
    passing ``fused=False`` / ``foreach=False`` to the optimizer.

    Example:
        >>> w = torch.nn.Parameter(torch.ones(2))
        >>> use_fastest_kernel(torch.optim.Adam([w], lr=0.1))
        'fused'
        >>> use_fastest_kernel(torch.optim.Adam([w], lr=0.1, foreach=False)) is None
        True
    """
    kernel = _CPU_KERNELS.get(type(optimizer))
    groups = optimizer.param_groups
    if kernel is None or any(g.get("fused") is not None or g.get("foreach") is not None
                             or g.get("differentiable") for g in groups):
        return None
    params = [p for g in groups for p in g["params"]]
    if not params or any(p.device.type != "cpu" or not p.is_floating_point() or p.is_sparse for p in params):
        return None
    if type(optimizer) is torch.optim.SGD and not all(g.get("momentum") for g in groups):
        return None
    for group in groups:
        group[kernel] = True
    optimizer.defaults[kernel] = True
    if kernel == "fused":
        # What the constructors do for fused=True: a dtype/device check of the parameters at the
        # first step, and Adagrad's eagerly made step counters in the fused kernels' dtype.
        optimizer._need_device_dtype_check_for_fused = True  # type: ignore[attr-defined]
        for state in optimizer.state.values():
            if isinstance(state.get("step"), torch.Tensor) and state["step"].dtype != torch.float32:
                state["step"] = state["step"].to(torch.float32)
    return kernel


def get_optimizer(name: str, factory: Callable[[], OptimizerT], fastest_kernel: bool = True) -> OptimizerT:
    """Returns the optimizer registered as ``name``, creating it (and restoring its state) once.

    With ``fastest_kernel`` (the default), an optimizer whose ``fused``/``foreach`` were left
    unset gets torch's fastest kernel for its device with the same update rule (fused Adam, AdamW,
    Adagrad and momentum SGD, foreach RMSprop on CPU: see ``use_fastest_kernel``); ``False`` keeps
    torch's default.

    Example:
        >>> def model_fn(features, labels, mode):
        ...     net = get_module('mlp', lambda: torch.nn.Linear(4, 3))
        ...     opt = get_optimizer('adam', lambda: torch.optim.Adam(net.parameters(), lr=1e-3))
    """
    state = _active
    if state is None:
        state = _require_active("ee.get_optimizer")
    optimizer = state.optimizers.get(name)
    if optimizer is None:
        optimizer = state.create_optimizer(name, factory, fastest_kernel)
    return optimizer  # type: ignore[return-value]


def trainable_variables() -> list[torch.nn.Parameter]:
    """Parameters (``requires_grad``) of every module of the running Estimator, in creation order.

    TF's ``tf.compat.v1.trainable_variables()``: give it to an optimizer so that none of the
    model's modules is left out. Only modules registered with ``get_module`` *so far* are
    included (the eager counterpart of a graph built so far), so ask for it after the model's
    last ``get_module`` of the step, as below. A parameter shared by two modules appears once.
    Training warns when a module's trainable parameters are in no optimizer.

    Example:
        >>> def model_fn(features, labels, mode):
        ...     encoder = get_module('encoder', lambda: torch.nn.Linear(4, 8))
        ...     head = get_module('head', lambda: torch.nn.Linear(8, 1))
        ...     loss = head(encoder(features['x'])).mean()
        ...     opt = get_optimizer('sgd', lambda: torch.optim.SGD(trainable_variables(), lr=0.1))
    """
    state = _active
    if state is None:
        state = _require_active("ee.trainable_variables")
    seen: set[int] = set()
    parameters = []
    for module in state._raw_modules.values():
        for parameter in module.parameters():
            if parameter.requires_grad and id(parameter) not in seen:
                seen.add(id(parameter))
                parameters.append(parameter)
    return parameters


def identity(value: Any, name: str) -> Any:
    """Names ``value`` for hooks, TF's ``tf.identity(x, name=...)`` idiom; returns ``value``.

    Inside a running ``model_fn``, ``LoggingTensorHook``, ``SessionRunArgs`` and
    ``session.run`` can then fetch it by ``name`` in that step (as a Python number or numpy
    array). Outside an Estimator it only returns ``value``.

    Example:
        >>> def model_fn(features, labels, mode):
        ...     net = get_module('net', lambda: torch.nn.Linear(4, 1))
        ...     error = identity((net(features['x']) - labels).abs().mean(), name='abs_error')
        ...     # ee.LoggingTensorHook({'abs_error': 'abs_error'}, every_n_iter=100) logs it
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"identity(value, name): name must be a non-empty string, given {name!r}.")
    state = _active
    if state is not None:
        state.named_tensors[name] = value
    return value


def get_global_step() -> int | None:
    """The global step of the running Estimator (steps taken so far), or ``None`` outside one."""
    return None if _active is None else _active.global_step


class TrainOp:
    """One optimisation step: backward, optional clipping, optimizer step, scheduler, zero_grad.

    Built by ``minimize``; the Estimator calls it once per training step.

    Example:
        >>> w = torch.nn.Parameter(torch.ones(1))
        >>> opt = torch.optim.SGD([w], lr=0.5)
        >>> minimize(opt, (w * 2).sum())()
        >>> w.item()
        0.0
    """

    __slots__ = ("clip_grad_norm", "clip_grad_value", "grad_scaler", "learning_rate_schedule", "loss", "optimizer",
                 "scheduler")

    def __init__(self, optimizer: torch.optim.Optimizer, loss: torch.Tensor,
                 clip_grad_norm: float | None = None, clip_grad_value: float | None = None,
                 scheduler: Any = None, grad_scaler: Any = None) -> None:
        self.optimizer = optimizer
        self.loss = loss
        self.clip_grad_norm = clip_grad_norm
        self.clip_grad_value = clip_grad_value
        self.scheduler = scheduler
        self.grad_scaler = grad_scaler
        self.learning_rate_schedule = learning_rate.schedule_of(optimizer)  # ee.learning_rate.attach

    def _params(self) -> list[torch.Tensor]:
        return [p for group in self.optimizer.param_groups for p in group["params"]]

    def __call__(self) -> None:
        optimizer, scaler = self.optimizer, self.grad_scaler
        if scaler is not None:
            scaler.scale(self.loss).backward()
        else:
            self.loss.backward()
        if self.clip_grad_norm is not None or self.clip_grad_value is not None:
            if scaler is not None:
                scaler.unscale_(optimizer)
            if self.clip_grad_norm is not None:
                torch.nn.utils.clip_grad_norm_(self._params(), self.clip_grad_norm)
            if self.clip_grad_value is not None:
                torch.nn.utils.clip_grad_value_(self._params(), self.clip_grad_value)
        if self.learning_rate_schedule is not None:  # TF: the rate at the step's global step
            learning_rate.set_learning_rate(optimizer, _active.global_step if _active is not None else 0)
        if scaler is not None:
            scaler.step(optimizer)
            scaler.update()
        else:
            optimizer.step()
        if self.scheduler is not None:
            self.scheduler.step()
        optimizer.zero_grad(set_to_none=True)

    def __repr__(self) -> str:
        return f"TrainOp(optimizer={type(self.optimizer).__name__})"


def minimize(optimizer: torch.optim.Optimizer, loss: torch.Tensor, *,
             clip_grad_norm: float | None = None, clip_grad_value: float | None = None,
             scheduler: Any = None, fastest_kernel: bool = True) -> TrainOp:
    """The ``train_op`` for ``EstimatorSpec``: minimises ``loss`` with ``optimizer`` (TF's ``minimize``).

    The Estimator advances ``global_step`` after running it, so there is no ``global_step``
    argument. ``scheduler`` (a ``torch.optim.lr_scheduler``) is stepped once per training step.
    An optimizer not made by ``get_optimizer`` that has not stepped yet gets torch's fastest
    kernel for its device as there (``use_fastest_kernel``), unless ``fastest_kernel=False``.

    Example:
        >>> # in model_fn, TRAIN mode:
        >>> # return ee.EstimatorSpec(mode, loss=loss, train_op=ee.minimize(optimizer, loss))
    """
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError(f"minimize: optimizer must be a torch.optim.Optimizer, given: {optimizer!r}. "
                        "Create it with ee.get_optimizer(name, factory).")
    if not isinstance(loss, torch.Tensor):
        raise TypeError(f"minimize: loss must be a scalar torch.Tensor, given: {loss!r}.")
    if not getattr(optimizer, "_ee_kernel_chosen", False):
        # Not once it has stepped (Adagrad makes its state, at step 0, in its constructor).
        if fastest_kernel and not any(float(s.get("step", 0)) for s in optimizer.state.values()):
            use_fastest_kernel(optimizer)
        optimizer._ee_kernel_chosen = True  # type: ignore[attr-defined]
    state = _active
    scaler = getattr(state, "grad_scaler", None) if state is not None else None
    return TrainOp(optimizer, loss, clip_grad_norm, clip_grad_value, scheduler, scaler)
