"""The ``Estimator``: TF's train / evaluate / predict contract, run eagerly on PyTorch.

Separation of concerns:

* ``model_fn`` (user code) builds the step: it is called once per batch and returns an
  ``EstimatorSpec``. State lives in named modules (``get_module``) owned by a ``ModelState``.
* This module owns *when* things happen: restoring (resume > warm start > fresh), the three loops,
  the hook lifecycle, and what is written to ``model_dir``. Each loop is one readable function.
* ``hooks`` hold everything optional (stopping, logging, NaN checks, checkpoints, summaries);
  ``default_training_hooks`` builds TF's standard list so it can be printed or replaced.
* ``checkpoints`` owns the file format; ``inputs`` the input_fn contract.

Unlike TF, the built model is cached between calls while the checkpoint on disk is unchanged,
so repeated ``evaluate``/``predict`` calls do not rebuild and reload it (disk stays the source of
truth: a new checkpoint, or a different ``checkpoint_path``, rebuilds it). A reuse is exactly a
fresh restore of that checkpoint (``ModelState.reset_to_checkpoint``); where that cannot be
proven, the model is rebuilt.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import copy
import itertools
import logging
import os
import random
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, cast

import numpy as np
import torch

from estimator_engine import checkpoints, distribute, gfile
from estimator_engine import model_state as _model_state
from estimator_engine import spec as spec_lib
from estimator_engine._fn_args import call_with_declared, fn_args
from estimator_engine._validation import step_count
from estimator_engine.export_output import string_array
from estimator_engine.hooks import (
    CheckpointSaverHook,
    CheckpointSaverListener,
    LoggingTensorHook,
    NanTensorHook,
    OnDevice,
    ScheduledHook,
    SessionRunContext,
    SessionRunHook,
    SessionRunValues,
    StepCounterHook,
    StopAtStepHook,
    SummarySaverHook,
    map_fetches,
)
from estimator_engine.hooks.progress import ProgressBarHook, progress_bar_enabled
from estimator_engine.hooks.timer import NEVER
from estimator_engine.inputs import parse_input_fn_result, split_batch
from estimator_engine.metric_op import MetricOp
from estimator_engine.mode_keys import ModeKeys
from estimator_engine.model_state import ModelState
from estimator_engine.run_config import RunConfig
from estimator_engine.spec import EstimatorSpec
from estimator_engine.summary import SummaryWriterCache
from estimator_engine.warm_start import WarmStarter, WarmStartSettings, warm_start_settings_from

__all__ = ["Estimator", "default_training_hooks"]

_log = logging.getLogger("estimator_engine")
_END = object()
_MODEL_FN_ARGS = ("features", "labels", "mode", "params", "config")
# Members a subclass may override (TF's allow-list, plus the hooks canned estimators use).
_OVERRIDABLE = frozenset({"model_fn", "latest_checkpoint", "__init__"})
_NO_VALUES = SessionRunValues(None)
# Off only in tests that compare a run calling every hook on every step with the scheduled one.
_SCHEDULE_HOOKS = True
_AUTOCAST_DTYPES = {"bf16-mixed": torch.bfloat16, "16-mixed": torch.float16}


def _to_python(value: Any) -> Any:
    """A fetched value as hooks receive it: Python scalars, numpy arrays, dicts thereof."""
    if isinstance(value, torch.Tensor):
        if value.dim() == 0:
            return value.item()  # no detach needed (it would allocate a tensor every step)
        return value.detach().cpu().numpy()
    if isinstance(value, MetricOp):
        return _to_python(value.result())
    if isinstance(value, Mapping):
        return {k: _to_python(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):  # a metric whose result is a tuple/list (TF: nested numpy)
        converted = [_to_python(v) for v in value]
        return type(value)(*converted) if hasattr(value, "_fields") else type(value)(converted)
    return value


def _to_device(obj: Any, device: torch.device) -> Any:
    if isinstance(obj, torch.Tensor):
        if device.type == "cuda" and obj.device.type == "cpu" and not obj.is_pinned():
            # From pageable memory the copy blocks the host until it is done; from pinned memory
            # it is queued and the host goes on to the next batch (as a tuned torch loop does).
            obj = obj.pin_memory()
        return obj.to(device, non_blocking=True)
    if isinstance(obj, Mapping):
        return {k: _to_device(v, device) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)) and obj and isinstance(obj[0], torch.Tensor):
        return type(obj)(_to_device(v, device) for v in obj)
    return obj


def _rng_state() -> dict[str, Any]:
    version, internal, gauss = random.getstate()
    np_state = cast("tuple[str, np.ndarray, int, int, float]", np.random.get_state(legacy=True))
    np_name, np_keys, np_pos, np_has_gauss, np_gauss = np_state
    state = {
        "torch": torch.get_rng_state(),
        # One int64 tensor, not a list of 625 ints: torch.load's weights-only unpickler reads a list
        # item by item in Python, which was most of the time a resumed train() spent loading the RNG.
        "python": [version, torch.tensor(internal, dtype=torch.int64), gauss],
        "numpy": [np_name, torch.from_numpy(np_keys.astype(np.int64)), np_pos, np_has_gauss, np_gauss],
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: Mapping[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    version, internal, gauss = state["python"]
    if isinstance(internal, torch.Tensor):
        internal = internal.tolist()
    random.setstate((version, tuple(internal), gauss))  # a list in checkpoints written before 2026-12-03
    name, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((name, keys.numpy().astype(np.uint32), pos, has_gauss, cached))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _file_marker(path: str) -> tuple[str, int, int]:
    if gfile.is_remote(path):
        return gfile.version(path)
    # A TensorFlow checkpoint is a prefix, not a file: its .index stands for it.
    stat = os.stat(path if os.path.isfile(path) or not os.path.isfile(path + ".index") else path + ".index")
    return (os.path.abspath(path), stat.st_mtime_ns, stat.st_size)


def default_training_hooks(config: RunConfig, model_dir: str, *, steps: int | None = None,
                           max_steps: int | None = None,
                           progress_bar: bool | None = None) -> tuple[list[SessionRunHook], list[SessionRunHook]]:
    """TF's standard training hooks for ``config``: ``(hooks, chief_only_hooks)``.

    ``hooks`` = step limit, NaN check, loss logging; ``chief_only_hooks`` = steps/s counter, loss
    summaries, the checkpoint saver (when a save frequency is set) and a progress bar when
    ``progress_bar`` (else ``config.progress_bar``) asks for one (``progress_bar_enabled``).

    Example:
        >>> hooks, chief = default_training_hooks(RunConfig(), '/tmp/m', steps=10)
        >>> [type(h).__name__ for h in hooks]
        ['StopAtStepHook', 'NanTensorHook', 'LoggingTensorHook']
    """
    hooks: list[SessionRunHook] = []
    if steps is not None or max_steps is not None:
        hooks.append(StopAtStepHook(num_steps=steps, last_step=max_steps))
    hooks.append(NanTensorHook("loss"))
    chief: list[SessionRunHook] = []
    if config.log_step_count_steps is not None:
        hooks.append(LoggingTensorHook({"loss": "loss", "step": "global_step"},
                                       every_n_iter=config.log_step_count_steps))
        chief.append(StepCounterHook(every_n_steps=config.log_step_count_steps, output_dir=model_dir))
    if config.save_summary_steps:
        # 'summaries': every ee.summary.scalar of the model_fn (TF's merged summary op).
        chief.append(SummarySaverHook(save_steps=config.save_summary_steps, output_dir=model_dir,
                                      summary_op={"loss": "loss", "summaries": "summaries"}))
    if config.save_checkpoints_steps or config.save_checkpoints_secs:
        chief.append(CheckpointSaverHook(model_dir, save_secs=config.save_checkpoints_secs,
                                         save_steps=config.save_checkpoints_steps))
    if progress_bar_enabled(config.progress_bar if progress_bar is None else progress_bar):
        chief.append(ProgressBarHook(total=max_steps, num_steps=steps))
    return hooks, chief


class _Session:
    """What hooks see of a running call (the ``Session`` protocol of ``hooks.base``)."""

    __slots__ = ("_before_checkpoint", "_last_saved_path", "_last_saved_step", "_restored_from", "batches", "config", "estimator", "failed", "features",
                 "hooks", "labels", "metrics", "mode", "model_dir", "spec", "state", "writer")

    def __init__(self, estimator: Estimator, state: ModelState, mode: ModeKeys, batches: Any) -> None:
        self.estimator = estimator
        self.state = state
        self.mode = mode
        self.model_dir = estimator.model_dir
        self.config = estimator.config
        self.batches = batches
        self.hooks: Sequence[SessionRunHook] = ()
        self.spec: EstimatorSpec | None = None
        self.features: Any = None
        self.labels: Any = None
        self.metrics: dict[str, MetricOp] = {}
        self.failed = False
        self._last_saved_step: int | None = None
        self._last_saved_path: str | None = None
        # The checkpoint file this state was restored from: saving again before any step would
        # write the same state under the same name (a resumed call's first save).
        restored_path = state.checkpoint_path
        self._restored_from = (gfile.abspath(restored_path), state.global_step) if restored_path is not None else None
        self.writer = _CheckpointWriter()
        self._before_checkpoint: list[Callable[[], None]] = []

    @property
    def global_step(self) -> int:
        return self.state.global_step

    def resolve(self, name: str | OnDevice) -> Any:
        spec = self.spec
        if spec is None:  # hooks run only once the first model_fn call has built a step
            raise RuntimeError(f"Cannot fetch {name!r} before the first model_fn call has built a step.")
        if isinstance(name, OnDevice):
            if name.name == "loss" and isinstance(spec.loss, torch.Tensor):
                return spec.loss.detach()
            return self.resolve(name.name)  # only the loss is kept on the device so far
        if name == "loss":
            return _to_python(spec.loss)
        if name == "global_step":
            return self.state.global_step
        named = self.state.named_tensors
        if name in named:
            return _to_python(named[name])
        if name == "summaries":
            return {tag: _to_python(value) for tag, value in self.state.summaries.items()}
        predictions = spec.predictions
        if isinstance(predictions, Mapping) and name in predictions:
            return _to_python(predictions[name])
        if name == "predictions":
            return _to_python(predictions)
        if name.startswith("predictions/") and isinstance(predictions, Mapping):
            key = name[len("predictions/"):]
            if key in predictions:
                return _to_python(predictions[key])
        if name in self.metrics:
            return _to_python(self.metrics[name])
        if name == "labels":
            return _to_python(self.labels)
        if name == "features":
            return _to_python(self.features)
        if name.startswith("features/") and isinstance(self.features, Mapping):
            key = name[len("features/"):]
            if key in self.features:
                return _to_python(self.features[key])
        available = ["loss", "global_step", "predictions", "labels", "features", "summaries", *sorted(named)]
        if isinstance(predictions, Mapping):
            available += sorted(predictions)
        available += sorted(self.metrics)
        raise KeyError(f"Unknown fetch name {name!r} in {self.mode} mode. Available names: {available}. "
                       "Name a model_fn value with ee.identity(value, name=...) to fetch it.")

    def run(self, fetches: Any) -> Any:
        return map_fetches(fetches, self.resolve)

    def before_checkpoint(self, callback: Callable[[], None]) -> None:
        self._before_checkpoint.append(callback)

    def fetcher(self) -> tuple[Callable[[Any], Any], Callable[[], None]]:
        """``(fetch, new_step)`` for the loop: ``fetch`` resolves each name once per step.

        The loop fetches after the step ran; ``'global_step'`` is then the value the step read
        (before its increment), as TF's hooks see it: TF's model_fn ops depend on the global
        step's read, so a fetch of it in the training ``session.run`` returns the old value.
        """
        resolved: dict[str, Any] = {}
        resolve = self.resolve
        # TRAIN advances the step by exactly one per step, before the fetches are resolved.
        increment = 1 if self.mode == ModeKeys.TRAIN else 0

        def resolve_once(name: str) -> Any:
            value = resolved.get(name, _END)
            if value is _END:
                value = resolved[name] = (self.state.global_step - increment if name == "global_step"
                                          else resolve(name))
            return value

        def fetch(fetches: Any) -> Any:
            return resolve_once(fetches) if type(fetches) is str else map_fetches(fetches, resolve_once)

        return fetch, resolved.clear

    def save_checkpoint(self, checkpoint_dir: str | None = None,
                        checkpoint_basename: str = "model.ckpt") -> str | None:
        path = self.save_checkpoint_async(checkpoint_dir, checkpoint_basename)
        self.wait_for_checkpoints()
        return path

    def save_checkpoint_async(self, checkpoint_dir: str | None = None,
                              checkpoint_basename: str = "model.ckpt") -> str | None:
        if self.mode != ModeKeys.TRAIN:
            raise RuntimeError(f"save_checkpoint is only available in TRAIN mode, not {self.mode}.")
        for settle in self._before_checkpoint:  # a NaN found here fails the step: nothing is saved
            settle()
        if self.failed:
            _log.warning("Not saving a checkpoint at step %d: the step failed.", self.global_step)
            return None
        if not self.config.is_chief:
            return None
        directory, step = checkpoint_dir or self.model_dir, self.global_step
        path = gfile.abspath(gfile.join(directory, f"{checkpoint_basename}-{step}"))
        if self._restored_from == (path, step) or (self._last_saved_step, self._last_saved_path) == (step, path):
            # Nothing trained since the restore from (or the last save to) this very file: it
            # already holds this state.
            self._last_saved_step, self._last_saved_path = step, path
            return path
        # The snapshot is taken now (tensors copied), so training can go on while it is written.
        state = _snapshot(self.state.state_dict())
        state["rng"] = _rng_state()
        state["input"] = self.batches.state_dict() if hasattr(self.batches, "state_dict") else None
        state["hooks"] = _snapshot({_hook_key(h): h.state_dict() for h in self.hooks
                                    if hasattr(h, "state_dict") and hasattr(h, "load_state_dict")})
        self.writer.submit(lambda: checkpoints.save_checkpoint(
            directory, state, step, keep_checkpoint_max=self.config.keep_checkpoint_max,
            keep_checkpoint_every_n_hours=self.config.keep_checkpoint_every_n_hours,
            basename=checkpoint_basename))
        self._last_saved_step, self._last_saved_path = step, path
        return path

    def wait_for_checkpoints(self) -> None:
        """Blocks until every submitted checkpoint is on disk; re-raises a failed write."""
        self.writer.wait()

    def evaluate(self, input_fn: Callable[..., Any], steps: int | None = None,
                 hooks: Iterable[SessionRunHook] | None = None, name: str | None = None,
                 checkpoint_path: str | None = None) -> dict[str, Any]:
        """Evaluates the training state as it is now, in process (no checkpoint is read), and
        writes the results where ``Estimator.evaluate`` writes them; training then goes on."""
        if self.mode != ModeKeys.TRAIN:
            raise RuntimeError(f"session.evaluate is only available in TRAIN mode, not {self.mode}.")
        state = self.state
        summaries: dict[str, float] = {}
        try:
            with state.activated(ModeKeys.EVAL), torch.no_grad():
                results = self.estimator._evaluate_state(state, input_fn, steps, list(hooks or ()),
                                                         summaries_out=summaries)
        finally:
            # ``activated`` restores the active state, not the modules' mode.
            state.mode = ModeKeys.TRAIN
            for module in state.modules.values():
                module.train(True)
        self.estimator._write_eval_results(results, name, checkpoint_path, summaries)
        return results


@contextlib.contextmanager
def _hook_lifecycle(session: _Session, hooks: Sequence[SessionRunHook]) -> Iterator[None]:
    """The one hook lifecycle of train, evaluate and predict (see ``hooks/base.py``).

    ``begin`` and ``after_create_session`` before the loop; an exception ending the loop is shown
    to every ``on_exception`` and re-raised; ``end`` always runs. ``GeneratorExit`` (the caller of
    ``predict`` stopped iterating) is a normal end, not a failure.
    """
    for hook in hooks:
        hook.begin()
    for hook in hooks:
        hook.after_create_session(session, None)
    try:
        yield
    except GeneratorExit:
        raise
    except BaseException as exc:
        session.failed = True
        for hook in hooks:
            hook.on_exception(exc)
        raise
    finally:
        for hook in hooks:
            hook.end(session)


class _CheckpointWriter:
    """Writes checkpoints in order on one background thread, started on first use."""

    def __init__(self) -> None:
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._pending: list[concurrent.futures.Future] = []
        self.failed = False

    def submit(self, write: Callable[[], Any]) -> None:
        self._raise_failures(block=False)
        if self._executor is None:
            self._executor = concurrent.futures.ThreadPoolExecutor(
                max_workers=1, thread_name_prefix="checkpoint-writer")
        future = self._executor.submit(write)
        future.add_done_callback(self._note_failure)
        self._pending.append(future)

    def _note_failure(self, future: concurrent.futures.Future) -> None:
        if not future.cancelled() and future.exception() is not None:
            self.failed = True  # read by the training loop after every step

    def raise_failure(self) -> None:
        """Re-raises a failed background write in the training thread (e.g. disk full)."""
        self.failed = False
        self._raise_failures(block=False)

    def _raise_failures(self, block: bool) -> None:
        pending, self._pending = self._pending, []
        for future in pending:
            if not block and not future.done():
                self._pending.append(future)
                continue
            future.result()  # re-raises the write's error (e.g. disk full) in the training thread

    def wait(self) -> None:
        self._raise_failures(block=True)

    def close(self) -> None:
        try:
            self.wait()
        finally:
            if self._executor is not None:
                self._executor.shutdown(wait=True)
                self._executor = None


def _follows_its_schedule(hook: SessionRunHook) -> bool:
    """Whether the loop may leave ``hook`` out of the steps its ``steps_until_due`` skips.

    A ``ScheduledHook`` whose ``before_run`` and ``after_run`` come from the class that wrote its
    schedule (or from a base of it). A subclass that overrode them without a schedule of its own
    may act on any step, so it is called on every step, as TF calls every hook.
    """
    if not isinstance(hook, ScheduledHook):
        return False
    mro = type(hook).__mro__

    def owner(name: str) -> type:
        return next(cls for cls in mro if name in vars(cls))

    scheduled_by = owner("steps_until_due")
    return all(issubclass(scheduled_by, owner(name)) for name in ("before_run", "after_run"))


class _StepHooks:
    """Which hooks the training loop calls on a step: precomputed triggers.

    ``before_runs`` / ``after_runs`` are the ``(position, bound method)`` pairs of a step on which
    no scheduled hook is due: every hook without a known schedule, in list order. A scheduled hook
    is due from loop iteration ``_due_step[i]`` or from time ``_due_time[i]``; ``next_step``,
    ``next_time_start`` (hooks that decide in ``before_run``, checked when a step starts) and
    ``next_time_end`` (hooks that act in ``after_run`` only, checked once the step has run, where
    they would look at the clock) say when the next one is. ``plan`` and ``plan_late`` then give the
    pairs of that step, with the due hooks in their list places.
    """

    __slots__ = ("_after_all", "_before_all", "_decides_before", "_due_step", "_due_time", "_last_called",
                 "_scheduled", "_unscheduled", "after_runs", "before_runs", "next_step", "next_time_end",
                 "next_time_start")

    def __init__(self, hooks: Sequence[SessionRunHook], scheduled: bool) -> None:
        # Only hooks that override a method are called (a bound-method call per hook per step is
        # measurable on tiny models); after_run always gets its values object.
        self._before_all = [(i, hook.before_run) for i, hook in enumerate(hooks)
                            if type(hook).before_run is not SessionRunHook.before_run]
        self._after_all = [(i, hook.after_run) for i, hook in enumerate(hooks)
                           if type(hook).after_run is not SessionRunHook.after_run]
        self._scheduled: dict[int, Any] = {i: hook for i, hook in enumerate(hooks)
                                           if scheduled and _follows_its_schedule(hook)}
        self._decides_before = {i for i, _ in self._before_all if i in self._scheduled}
        self._unscheduled = {i for i in range(len(hooks)) if i not in self._scheduled}
        self.before_runs = [(i, f) for i, f in self._before_all if i in self._unscheduled]
        self.after_runs = [(i, f) for i, f in self._after_all if i in self._unscheduled]
        self._due_step: dict[int, int] = {}
        self._due_time: dict[int, float | None] = {}
        self._last_called = dict.fromkeys(self._scheduled, -1)
        self.next_step = NEVER
        self.next_time_start: float | None = None
        self.next_time_end: float | None = None

    def start(self, session: _Session) -> None:
        """Asks every scheduled hook when it first acts (after ``after_create_session``)."""
        self.reschedule(list(self._scheduled), 0, session)

    def reschedule(self, positions: Iterable[int], iteration: int, session: _Session) -> None:
        """Asks the hooks at ``positions``, just called, when they act next (from ``iteration``)."""
        for i in positions:
            idle_steps, due_time = self._scheduled[i].steps_until_due(session)
            self._due_step[i] = iteration + idle_steps
            self._due_time[i] = due_time
        self.next_step = min(self._due_step.values(), default=NEVER)
        times = [(t, i in self._decides_before) for i, t in self._due_time.items() if t is not None]
        self.next_time_start = min((t for t, start in times if start), default=None)
        self.next_time_end = min((t for t, start in times if not start), default=None)

    def plan(self, iteration: int) -> tuple[list[tuple[int, Any]], list[tuple[int, Any]], list[int]]:
        """``(before_runs, after_runs, due positions)`` of iteration ``iteration``, as it starts."""
        now = time.time() if self.next_time_start is not None else 0.0
        due = [i for i in self._scheduled if self._due_step[i] <= iteration or (
               i in self._decides_before and (t := self._due_time[i]) is not None and now >= t)]
        return (*self._calls(due, iteration), due)

    def plan_late(self, iteration: int, after_runs: list[tuple[int, Any]],
                  due: list[int] | None) -> tuple[list[tuple[int, Any]], list[int] | None]:
        """``(after_runs, due positions)`` of iteration ``iteration`` once its step has run: adds
        the ``after_run``-only hooks whose time has come meanwhile."""
        now = time.time()
        late = [i for i in self._scheduled if i not in self._decides_before and (due is None or i not in due)
                and (t := self._due_time[i]) is not None and now >= t]
        if not late:
            return after_runs, due
        self._catch_up(late, iteration)
        due = sorted([*(due or ()), *late])
        called = self._unscheduled.union(due)
        return [(i, f) for i, f in self._after_all if i in called], due

    def _calls(self, due: list[int], iteration: int) -> tuple[list[tuple[int, Any]], list[tuple[int, Any]]]:
        self._catch_up(due, iteration)
        called = self._unscheduled.union(due)
        return ([(i, f) for i, f in self._before_all if i in called],
                [(i, f) for i, f in self._after_all if i in called])

    def catch_up(self, iterations_run: int) -> None:
        """Tells every scheduled hook about the iterations it sat out (at the end of the loop)."""
        self._catch_up(list(self._scheduled), iterations_run)

    def _catch_up(self, positions: Iterable[int], iteration: int) -> None:
        for i in positions:
            skipped = iteration - self._last_called[i] - 1
            if skipped > 0:
                self._scheduled[i].skip_steps(skipped)
            self._last_called[i] = iteration


def _ignore_batch(spec: EstimatorSpec) -> None:
    """The ``on_batch`` of a loop that has none (TRAIN runs ``train_op`` instead)."""


def _snapshot(obj: Any) -> Any:
    """A copy of nested state whose tensors no longer share memory with the live model."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().clone()
    if isinstance(obj, dict):
        return {k: _snapshot(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_snapshot(v) for v in obj]
    if isinstance(obj, tuple):
        return tuple(_snapshot(v) for v in obj)
    return obj


def _hook_key(hook: Any) -> str:
    return getattr(hook, "checkpoint_key", type(hook).__name__)


class Estimator:
    """Trains, evaluates and predicts with a ``model_fn`` (TF's ``tf.estimator.Estimator``).

    Args:
        model_fn: ``model_fn(features, labels, mode, params, config) -> EstimatorSpec``; any
            argument but ``features`` may be left out of its signature.
        model_dir: where checkpoints and summaries are written (default: ``config.model_dir``,
            else a new temporary directory).
        config: a ``RunConfig``.
        params: hyper-parameters passed to ``model_fn`` (deep-copied): a dict, or an object with
            attributes (TF 1's ``HParams``, a ``SimpleNamespace``), kept as it is.
        warm_start_from: a checkpoint path, a model_dir or ``WarmStartSettings``.

    Example:
        >>> import torch, estimator_engine as ee
        >>> def model_fn(features, labels, mode):
        ...     net = ee.get_module('linear', lambda: torch.nn.Linear(1, 1))
        ...     y = net(features['x'])
        ...     if mode == ee.ModeKeys.PREDICT:
        ...         return ee.EstimatorSpec(mode, predictions={'y': y})
        ...     loss = torch.nn.functional.mse_loss(y, labels)
        ...     opt = ee.get_optimizer('sgd', lambda: torch.optim.SGD(net.parameters(), lr=0.1))
        ...     return ee.EstimatorSpec(mode, loss=loss, train_op=ee.minimize(opt, loss))
        >>> x = torch.rand(64, 1)
        >>> est = ee.Estimator(model_fn)
        >>> est = est.train(ee.inputs.numpy_input_fn({'x': x}, 2 * x + 3, shuffle=True, num_epochs=None), steps=5)
        >>> est.get_variable_value('global_step')
        5
    """

    def __init__(self, model_fn: Callable[..., EstimatorSpec], model_dir: str | os.PathLike | None = None,
                 config: RunConfig | None = None, params: Mapping[str, Any] | Any = None,
                 warm_start_from: str | os.PathLike | WarmStartSettings | None = None) -> None:
        self._check_no_overrides()
        # TF's order: the config (and its model_dir) is checked before the model_fn.
        if config is None:
            config = RunConfig()
        elif not isinstance(config, RunConfig):
            raise ValueError(f"config must be an instance of `RunConfig`, but provided {config!r}.")
        model_dir = self._check_model_dir(model_dir, config)
        if model_fn is None:
            raise ValueError("model_fn must be provided to Estimator.")
        self._model_fn_args = _verify_model_fn_args(model_fn, params)
        self._model_fn = model_fn
        # A dict is copied as a dict; any other object (TF 1's HParams, a SimpleNamespace) is
        # deep-copied as it is, as TF does, so model_fn keeps its attribute access.
        self._params: Any = copy.deepcopy(
            {} if params is None else dict(params) if isinstance(params, Mapping) else params)
        self._model_dir = model_dir or self._temporary_model_dir()
        self._config = config.replace(model_dir=self._model_dir)
        self._warm_start_settings = warm_start_settings_from(warm_start_from)
        self._device = self._config.resolved_device()
        self._cached_state: ModelState | None = None

    # -- properties ------------------------------------------------------------------------

    @property
    def model_dir(self) -> str:
        return self._model_dir

    @property
    def config(self) -> RunConfig:
        return self._config

    @property
    def params(self) -> Any:
        """A copy of ``params``: a dict, or the attribute object given (as TF keeps it)."""
        return copy.deepcopy(self._params)

    @property
    def model_fn(self) -> Callable[..., EstimatorSpec]:
        """The model_fn with params bound, with TF's fixed signature ``(features, labels, mode, config)``."""
        def public_model_fn(features, labels, mode, config):
            return self._call_model_fn(features, labels, mode, config)
        return public_model_fn

    # -- checkpoints and variables -------------------------------------------------------

    def latest_checkpoint(self) -> str | None:
        """Path of the newest checkpoint in ``model_dir``, or ``None``."""
        return checkpoints.latest_checkpoint(self._model_dir)

    def get_variable_names(self) -> list[str]:
        """Names of the variables in the newest checkpoint (``global_step`` included)."""
        return [name for name, _ in checkpoints.list_variables(self._require_checkpoint())]

    def get_variable_value(self, name: str) -> Any:
        """Value of a variable in the newest checkpoint, as a numpy array (an int for global_step)."""
        value = checkpoints.load_variable(self._require_checkpoint(), name)
        return int(value) if name == "global_step" else value

    def export_saved_model(self, export_dir_base: str | bytes | os.PathLike, serving_input_receiver_fn: Callable[[], Any],
                           assets_extra: Mapping[str, str] | None = None, as_text: bool = False,
                           checkpoint_path: str | None = None,
                           experimental_mode: ModeKeys = ModeKeys.PREDICT, format: str = "torch.export") -> str:
        """Exports the model for serving to ``<export_dir_base>/<timestamp>/``; returns that path.

        The folder holds a program that runs without the model_fn's source (see ``ee.export``);
        ``format="onnx"`` adds ``model.onnx`` (checked with onnxruntime).
        ``as_text`` is accepted for TF compatibility (there is no text form of a program).
        """
        from estimator_engine.export import export_saved_model

        del as_text
        return export_saved_model(self, export_dir_base, serving_input_receiver_fn, assets_extra=assets_extra,
                                  checkpoint_path=checkpoint_path, experimental_mode=experimental_mode,
                                  format=format)

    @property
    def export_savedmodel(self) -> Any:
        """Removed in TF 2 (``EstimatorV2``): reading it raises TF's ``AttributeError``."""
        raise AttributeError("`Estimator.export_savedmodel` has been deprecated. Please use "
                             "`export_saved_model` instead.")

    def eval_dir(self, name: str | None = None) -> str:
        """Where ``evaluate(name=...)`` writes its results: ``model_dir/eval`` or ``eval_<name>``."""
        return gfile.join(self._model_dir, "eval" if not name else f"eval_{name}")

    def _require_checkpoint(self) -> str:
        path = self.latest_checkpoint()
        if path is None:
            raise ValueError(f"Could not find trained model in model_dir: {self._model_dir}. "
                             "Train first, or point model_dir at a directory with checkpoints.")
        return path

    # -- train -----------------------------------------------------------------------------

    def train(self, input_fn: Callable[..., Any], hooks: Iterable[SessionRunHook] | None = None,
              steps: int | None = None, max_steps: int | None = None,
              saving_listeners: Iterable[CheckpointSaverListener] | None = None, *,
              progress_bar: bool | None = None) -> Estimator:
        """Trains a model given training data ``input_fn``; returns ``self``.

        ``steps`` trains that many more steps (incremental); ``max_steps`` trains until the global
        step reaches it (absolute; a no-op when already reached). Neither: until the input ends.
        ``progress_bar`` overrides ``RunConfig.progress_bar`` for this call (None: the config's).
        """
        if self._config.task_type in ("evaluator", "ps"):
            raise ValueError(f"Train has been called wrong configuration. Please use "
                             f"tf.estimator.train_and_evaluate which calls proper API according "
                             f"to given configuration. Current configuration: {self._config}.")
        if steps is not None and max_steps is not None:
            raise ValueError("Can not provide both steps and max_steps.")
        steps, max_steps = step_count("steps", steps), step_count("max_steps", max_steps)
        if max_steps is not None:
            start_step = checkpoints.read_global_step(self._model_dir)
            if max_steps <= start_step:
                _log.info("Skipping training since max_steps has already saved.")
                return self
        hooks = list(hooks or ())
        for hook in hooks:
            if not isinstance(hook, SessionRunHook):
                raise TypeError(f"Hooks must be a SessionRunHook, given: {hook!r}")
        saving_listeners = list(saving_listeners or ())
        for listener in saving_listeners:
            if not isinstance(listener, CheckpointSaverListener):
                raise TypeError(f"saving_listeners must be a list of CheckpointSaverListener, given: {listener!r}")
        with self._config.thread_scope():  # torch's thread counts are process-wide: set per call
            loss = self._train_model(input_fn, hooks, saving_listeners, steps, max_steps, progress_bar)
        _log.info("Loss for final step: %s.", loss)
        return self

    def _train_model(self, input_fn, user_hooks, saving_listeners, steps, max_steps,
                     progress_bar: bool | None = None) -> float | None:
        strategy = self._strategy(ModeKeys.TRAIN)
        state, checkpoint = self._build_state(ModeKeys.TRAIN, checkpoint_path=None, strategy=strategy)
        self._cached_state = None  # training changes the in-memory model: the cache is stale
        with state.activated(ModeKeys.TRAIN):
            batches = self._call_input_fn(input_fn, ModeKeys.TRAIN, strategy)
            if checkpoint is not None:
                self._restore_run_state(checkpoint, batches)
            session = _Session(self, state, ModeKeys.TRAIN, batches)
            batch = next(batches, _END)
            if batch is _END:
                _log.warning("Training with estimator made no steps: input_fn produced no batches.")
                return None
            session.features, session.labels = split_batch(batch)
            call = self.model_fn_caller(ModeKeys.TRAIN)
            spec = session.spec = self._first_spec(call, session)
            hooks = self._assemble_training_hooks(spec, user_hooks, saving_listeners, steps, max_steps,
                                                  progress_bar)
            session.hooks = hooks
            if checkpoint is not None:
                self._restore_hook_states(checkpoint, hooks)
            elif spec.scaffold is not None and spec.scaffold.init_fn is not None:
                spec.scaffold.init_fn(spec.scaffold, session)
            try:
                with strategy.join(list(state.modules.values())) if strategy else contextlib.nullcontext():
                    self._run_loop(session, hooks, call, train=True)
            except BaseException:
                with contextlib.suppress(Exception):  # the loop's own error is the one to report
                    session.writer.close()
                raise
            session.writer.close()
            if strategy:
                strategy.barrier()  # no rank reads model_dir before the chief's last save is there
            if session._last_saved_step == state.global_step and session._last_saved_path:
                # The model in memory equals the newest checkpoint: evaluate/predict may reuse it.
                state.mark_synced(session._last_saved_path, _file_marker(session._last_saved_path))
                self._cached_state = state
            return None if session.spec is None else _to_python(session.spec.loss)

    def _run_loop(self, session: _Session, hooks: Sequence[SessionRunHook],
                  call: Callable[[Any, Any], EstimatorSpec], train: bool,
                  max_batches: int | None = None, on_batch: Callable[[EstimatorSpec], None] | None = None) -> int:
        """The one loop: hooks around ``train_op`` (TRAIN) or ``on_batch`` (EVAL); returns batches run."""
        state, batches, writer = session.state, session.batches, session.writer
        # The engine's own hooks with a known schedule are called only on the steps they act on
        # (TRAIN); every other hook on every step, as in TF (see ``hooks/base.py``).
        step_hooks = _StepHooks(hooks, scheduled=train and _SCHEDULE_HOOKS)
        # Reused every step: a stop request ends the loop, so the context starts each step clean.
        run_context = SessionRunContext(original_args=None, session=session)
        requests: list[Any] = [None] * len(hooks)
        values: list[SessionRunValues] = [_NO_VALUES] * len(hooks)
        fetch, new_step = session.fetcher()
        clock = time.time
        accumulate = on_batch if on_batch is not None else _ignore_batch
        batches_run = 0
        with _hook_lifecycle(session, hooks), spec_lib.cheap_validation():
            step_hooks.start(session)
            idle_before, idle_after = step_hooks.before_runs, step_hooks.after_runs
            try:
                while True:
                    spec = cast(EstimatorSpec, session.spec)  # set by the first model_fn call
                    if batches_run < step_hooks.next_step and (
                            step_hooks.next_time_start is None or clock() < step_hooks.next_time_start):
                        before_runs, after_runs, due = idle_before, idle_after, None
                    else:
                        before_runs, after_runs, due = step_hooks.plan(batches_run)
                    for i, before_run in before_runs:
                        requests[i] = before_run(run_context)
                    if train:
                        spec.train_op()  # type: ignore[misc]  # a TRAIN EstimatorSpec always holds one
                        state.global_step += 1
                    else:
                        accumulate(spec)
                    batches_run += 1
                    # All fetches are resolved before any after_run, as one TF session.run would,
                    # and a name several hooks ask for is resolved once.
                    for i, _ in before_runs:
                        request = requests[i]
                        if request is not None:
                            values[i] = SessionRunValues(fetch(request.fetches))
                            requests[i] = None
                    new_step()
                    if step_hooks.next_time_end is not None and clock() >= step_hooks.next_time_end:
                        after_runs, due = step_hooks.plan_late(batches_run - 1, after_runs, due)
                    for i, after_run in after_runs:
                        after_run(run_context, values[i])
                        values[i] = _NO_VALUES
                    if due:
                        step_hooks.reschedule(due, batches_run, session)
                    if writer.failed:
                        writer.raise_failure()
                    # The attribute behind `stop_requested` (a property call per step saved).
                    if run_context._stop_requested or batches_run == max_batches:
                        break
                    batch = next(batches, _END)
                    if batch is _END:
                        break
                    session.features, session.labels = split_batch(batch)
                    session.spec = call(session.features, session.labels)
            finally:
                step_hooks.catch_up(batches_run)
        return batches_run

    def _assemble_training_hooks(self, spec, user_hooks, saving_listeners, steps, max_steps, progress_bar=None):
        defaults, chief_defaults = default_training_hooks(self._config, self._model_dir, steps=steps,
                                                          max_steps=max_steps, progress_bar=progress_bar)
        given = (*user_hooks, *spec.training_hooks, *spec.training_chief_hooks)
        # A hook the user configured replaces the default of its kind (TF does this for the
        # saver; for the NaN check it lets a run choose NanTensorHook(fail_on_nan_loss=False)).
        if any(isinstance(h, CheckpointSaverHook) for h in given):
            chief_defaults = [h for h in chief_defaults if not isinstance(h, CheckpointSaverHook)]
        if any(isinstance(h, NanTensorHook) for h in given):
            defaults = [h for h in defaults if not isinstance(h, NanTensorHook)]
        hooks = [*user_hooks, *defaults, *spec.training_hooks]
        if self._config.is_chief:
            hooks += [*chief_defaults, *spec.training_chief_hooks]
        if saving_listeners:
            saver = next((h for h in hooks if isinstance(h, CheckpointSaverHook)), None)
            if saver is None:
                raise ValueError("There should be a CheckpointSaverHook to use saving_listeners. "
                                 "Set RunConfig(save_checkpoints_steps=N) or save_checkpoints_secs, "
                                 "or pass a CheckpointSaverHook in hooks.")
            # A hook reused across train() calls must not collect the same listener twice.
            saver.listeners.extend(listener for listener in saving_listeners if listener not in saver.listeners)
        return hooks

    def _restore_run_state(self, checkpoint: Mapping[str, Any], batches: Any) -> None:
        """Continues the RNG streams, and the input position saved in the checkpoint when the
        input repeats forever.

        A finite input (``num_epochs=N``) starts from its beginning on every ``train`` call, as
        TF runs ``input_fn`` afresh: a loop of ``train(input_fn)`` calls trains N epochs each time.
        An endless one continues where the checkpoint left it, so ``train(steps=N)`` twice sees
        the same batches as ``train(steps=2N)`` instead of the first ones again.
        """
        if checkpoint.get("rng"):
            _set_rng_state(checkpoint["rng"])
        saved_input = checkpoint.get("input")
        if saved_input and hasattr(batches, "load_state_dict") and getattr(batches, "num_epochs", 0) is None:
            try:
                batches.load_state_dict(saved_input)
            except ValueError as exc:
                _log.warning("Input position from the checkpoint not restored (%s); the input starts from the beginning.", exc)

    def _restore_hook_states(self, checkpoint: Mapping[str, Any], hooks: Sequence[SessionRunHook]) -> None:
        saved = checkpoint.get("hooks") or {}
        for hook in hooks:
            key = _hook_key(hook)
            if key in saved and hasattr(hook, "load_state_dict"):
                hook.load_state_dict(saved[key])

    # -- evaluate --------------------------------------------------------------------------

    def evaluate(self, input_fn: Callable[..., Any], steps: int | None = None,
                 hooks: Iterable[SessionRunHook] | None = None, checkpoint_path: str | None = None,
                 name: str | None = None, *, progress_bar: bool | None = None) -> dict[str, Any]:
        """Evaluates the model on ``input_fn``; returns ``loss``, ``global_step`` and every metric.

        Metrics are computed over all evaluated examples; ``loss`` is the mean of the batch losses.
        Results are written to ``eval_dir(name)`` so that early stopping and exporters can read them.
        ``progress_bar`` overrides ``RunConfig.progress_bar`` for this call.
        """
        steps = step_count("steps", steps)
        hooks = list(hooks or ())
        for hook in hooks:
            if not isinstance(hook, SessionRunHook):
                raise TypeError(f"Hooks must be a SessionRunHook, given: {hook!r}")
        hooks += self._progress_hooks(progress_bar, total=steps)
        with self._config.thread_scope():
            strategy = self._strategy(ModeKeys.EVAL)
            state, _ = self._build_state(ModeKeys.EVAL, checkpoint_path, strategy=strategy)
            summaries: dict[str, float] = {}
            with state.activated(ModeKeys.EVAL), torch.no_grad():
                results = self._evaluate_state(state, input_fn, steps, hooks, strategy, summaries)
        self._write_eval_results(results, name, state.checkpoint_path, summaries)
        return results

    def _evaluate_state(self, state: ModelState, input_fn, steps, user_hooks,
                        strategy: distribute.DDPStrategy | None = None,
                        summaries_out: dict[str, float] | None = None) -> dict[str, Any]:
        """Evaluates ``state``; ``summaries_out`` receives the mean of each ``summary.scalar``."""
        batches = self._call_input_fn(input_fn, ModeKeys.EVAL, strategy)
        session = _Session(self, state, ModeKeys.EVAL, batches)
        batch = next(batches, _END)
        if batch is _END:
            _log.warning("evaluate: input_fn produced no batches; returning only global_step.")
            return {"global_step": state.global_step}
        session.features, session.labels = split_batch(batch)
        call = self.model_fn_caller(ModeKeys.EVAL)
        spec = session.spec = self._first_spec(call, session)
        for reserved in ("loss", "global_step"):
            if reserved in spec.eval_metric_ops:
                raise ValueError(f'Metric with name "{reserved}" is not allowed, because Estimator '
                                 "already defines a default metric with the same name. Rename it in eval_metric_ops.")
        loss_total = torch.zeros((), device=state.device, dtype=torch.float64)
        metrics = session.metrics
        summary_totals: dict[str, list[Any]] = {}  # tag -> [sum, batches]

        def accumulate(step_spec: EstimatorSpec) -> None:
            nonlocal loss_total
            loss_total = loss_total + step_spec.loss.detach()  # type: ignore[union-attr]  # EVAL specs hold a loss
            for tag, value in state.summaries.items():
                total = summary_totals.setdefault(tag, [0.0, 0])
                total[0] = total[0] + (value.detach().double() if isinstance(value, torch.Tensor) else float(value))
                total[1] += 1
            for key, op in step_spec.eval_metric_ops.items():
                merged = metrics.get(key)
                if merged is None:
                    metrics[key] = MetricOp(dict(op.state), op.result_fn)
                else:
                    merged.merge_(op)

        hooks = [*user_hooks, *spec.evaluation_hooks]
        n_batches = self._run_loop(session, hooks, call, train=False, max_batches=steps, on_batch=accumulate)
        n_batches_total = torch.tensor(float(n_batches), dtype=torch.float64, device=state.device)
        if strategy:
            # Sum the statistics of every rank's shard: the result is the metric over all of them.
            keys = sorted(metrics)
            tensors = [loss_total, n_batches_total] + [t for k in keys for _, t in sorted(metrics[k].state.items())]
            reduced = iter(strategy.all_reduce_sum(tensors))
            loss_total, n_batches_total = next(reduced), next(reduced)
            for key in keys:
                metrics[key].state = {name: next(reduced) for name in sorted(metrics[key].state)}
        results = {key: _to_python(op.result()) for key, op in metrics.items()}
        results["loss"] = float(loss_total.item() / n_batches_total.item())
        results["global_step"] = state.global_step
        if summaries_out is not None:
            summaries_out.update({tag: float(total) / count for tag, (total, count) in summary_totals.items()})
        return results

    def _write_eval_results(self, results: Mapping[str, Any], name: str | None,
                            checkpoint_path: str | None, summaries: Mapping[str, float] | None = None) -> None:
        if not self._config.is_chief:
            return
        writer = SummaryWriterCache.get(self.eval_dir(name))
        step = int(results["global_step"])
        scalars: dict[str, float] = {}
        for key, value in results.items():
            if key == "global_step":
                continue
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                scalars[key] = float(value)
            elif isinstance(value, np.ndarray) and value.size == 1:
                scalars[key] = float(value.reshape(()))
        if summaries:
            scalars.update({tag: value for tag, value in summaries.items() if tag not in results})
        writer.add_scalars(scalars, step)  # one event, as TF writes its evaluation's summary
        if checkpoint_path:
            writer.add_text("checkpoint_path", checkpoint_path, step)
        # Readers (early stopping, exporters, the workbench, TensorBoard) see the results now; the
        # fsync is left to the writer's periodic flush and close: repeated evaluates stay cheap.
        writer.flush(sync=False)

    # -- predict ---------------------------------------------------------------------------

    def predict(self, input_fn: Callable[..., Any], predict_keys: Sequence[str] | None = None,
                hooks: Iterable[SessionRunHook] | None = None, checkpoint_path: str | None = None,
                yield_single_examples: bool = True, *, progress_bar: bool | None = None) -> Iterator[Any]:
        """Yields predictions for the features of ``input_fn``, lazily (a generator).

        Nothing runs, not even ``input_fn``, until the first ``next()``. ``progress_bar``
        overrides ``RunConfig.progress_bar`` for this call (the bar counts batches).
        """
        hooks = list(hooks or ())
        for hook in hooks:
            if not isinstance(hook, SessionRunHook):
                raise TypeError(f"Hooks must be a SessionRunHook, given: {hook!r}")
        hooks += self._progress_hooks(progress_bar)
        state, _ = self._build_state(ModeKeys.PREDICT, checkpoint_path)
        # Grad mode, thread counts and the active state are entered once per batch, never held
        # across a `yield`: the caller's code between two next() calls must run with its own settings.
        threads = self._config.thread_scope()
        with state.activated(ModeKeys.PREDICT), torch.no_grad(), threads:
            batches = self._call_input_fn(input_fn, ModeKeys.PREDICT)
            session = _Session(self, state, ModeKeys.PREDICT, batches)
            batch = next(batches, _END)
            if batch is _END:
                return
            session.features, _ = split_batch(batch)
            call = self.model_fn_caller(ModeKeys.PREDICT)
            spec = session.spec = self._first_spec(call, session)
        hooks = [*hooks, *spec.prediction_hooks]
        run_context = SessionRunContext(original_args=None, session=session)
        fetch, new_step = session.fetcher()
        first = True
        # Made once, entered per batch (each can be entered again once left).
        reentry, no_grad = state.reentered(), torch.no_grad()
        with _hook_lifecycle(session, hooks):
            while True:
                with reentry, no_grad, threads, spec_lib.cheap_validation():
                    if not first:
                        batch = next(batches, _END)
                        if batch is _END:
                            break
                        session.features, _ = split_batch(batch)
                        session.spec = call(session.features, None)
                    first = False
                    requests = [hook.before_run(run_context) for hook in hooks]
                    predictions = _numpy_predictions(_filter_predictions(session.spec.predictions, predict_keys))
                    results = [None if r is None else fetch(r.fetches) for r in requests]
                    new_step()
                    for hook, result in zip(hooks, results):
                        hook.after_run(run_context, SessionRunValues(result))
                yield from _unbatch(predictions, yield_single_examples)
                if run_context.stop_requested:
                    break

    # -- shared machinery --------------------------------------------------------------------

    def _progress_hooks(self, progress_bar: bool | None, total: int | None = None) -> list[SessionRunHook]:
        """A progress bar for an evaluate/predict call when one is wanted (chief only), else none."""
        wanted = progress_bar_enabled(self._config.progress_bar if progress_bar is None else progress_bar)
        return [ProgressBarHook(total=total)] if wanted and self._config.is_chief else []

    def _strategy(self, mode: ModeKeys) -> distribute.DDPStrategy | None:
        """The distribution strategy of a TRAIN or EVAL call (set up on first use); PREDICT runs locally."""
        if mode == ModeKeys.PREDICT:
            return None
        config = self._config
        chosen = config.train_distribute if mode == ModeKeys.TRAIN else (config.eval_distribute or config.train_distribute)
        strategy = distribute.strategy_for(chosen)
        if strategy is not None:
            strategy.setup(self._device)
        return strategy

    def _configure_state(self, state: ModelState, strategy: distribute.DDPStrategy | None,
                         checkpoint: Mapping[str, Any] | None) -> ModelState:
        """Wrapping (DDP, torch.compile) and mixed precision of a freshly built state."""
        compile_modules = bool(self._config.compile)

        def for_training(name: str, module: torch.nn.Module) -> torch.nn.Module:
            if strategy is not None:
                module = strategy.wrap(name, module)
            # torch.compile of a module returns the (optimized) module; its stub says any callable.
            return cast(torch.nn.Module, torch.compile(module)) if compile_modules else module

        def for_inference(name: str, module: torch.nn.Module) -> torch.nn.Module:
            return cast(torch.nn.Module, torch.compile(module))

        state.module_wrapper = for_training
        state.inference_wrapper = for_inference if compile_modules else None
        if self._config.precision == "16-mixed":
            state.grad_scaler = torch.amp.GradScaler(self._device.type)
            if checkpoint and checkpoint.get("grad_scaler"):
                state.grad_scaler.load_state_dict(checkpoint["grad_scaler"])
        return state

    def _build_state(self, mode: ModeKeys, checkpoint_path: str | None,
                     strategy: distribute.DDPStrategy | None = None) -> tuple[ModelState, Mapping[str, Any] | None]:
        """Resume > warm start > fresh: returns the state to run and, for TRAIN, the checkpoint read."""
        if self._config.tf_random_seed is not None:
            torch.manual_seed(self._config.tf_random_seed)
            random.seed(self._config.tf_random_seed)
            np.random.seed(self._config.tf_random_seed)
        path = checkpoints.resolve_checkpoint(checkpoint_path) if checkpoint_path else self.latest_checkpoint()
        if path is None:
            warm = WarmStarter(self._warm_start_settings) if self._warm_start_settings else None
            if mode != ModeKeys.TRAIN:
                _log.info("Could not find trained model in model_dir: %s, running initialization to %s.",
                          self._model_dir, "evaluate" if mode == ModeKeys.EVAL else "predict")
            return self._configure_state(ModelState(self._device, warm_starter=warm), strategy, None), None
        if mode != ModeKeys.TRAIN:
            cached = self._cached_state
            # Reused only when provably equal to restoring `path` into a fresh build.
            if cached is not None and cached.synced_with == _file_marker(path) and cached.reset_to_checkpoint():
                return cached, None
        checkpoint = checkpoints.load_checkpoint(path)
        state = self._configure_state(ModelState(self._device, checkpoint_path=path, checkpoint=checkpoint),
                                      strategy, checkpoint)
        if mode != ModeKeys.TRAIN:
            state.synced_with = _file_marker(path)
            self._cached_state = state
        return state, checkpoint

    def _call_input_fn(self, input_fn: Callable[..., Any], mode: ModeKeys,
                       strategy: distribute.DDPStrategy | None = None) -> Iterator[Any]:
        if not callable(input_fn):
            raise TypeError(f"input_fn must be callable, given: {input_fn!r}")
        available = {"mode": mode, "params": self.params, "config": self._config,
                     "input_context": strategy.input_context() if strategy else None}
        result = call_with_declared(input_fn, available)
        iterable = parse_input_fn_result(result)
        if mode == ModeKeys.PREDICT and getattr(iterable, "is_single_batch", False):
            _log.warning("input_fn returned one batch of tensors, not an iterable of batches. "
                         "That means predict yields forever.")
        iterator = iter(iterable)
        if iterator is not iterable and hasattr(iterable, "state_dict"):
            return _StatefulIterator(iterable, iterator)
        return iterator

    def model_fn_caller(self, mode: ModeKeys | str,
                        device: str | torch.device | None = None) -> Callable[[Any, Any], EstimatorSpec]:
        """``(features, labels) -> EstimatorSpec``: one ``model_fn`` call as train, evaluate and
        predict make it (params, config, the batch moved to ``device``, the precision's autocast).

        ``device`` defaults to the estimator's own; an exporter traces on ``'cpu'``. The call
        builds or reuses modules through ``ee.get_module``, so it runs inside the loop of one of
        those methods, or of ``export_saved_model``.
        """
        mode = ModeKeys(mode)
        static = {"mode": mode, "params": copy.deepcopy(self._params), "config": self._config}
        static = {k: v for k, v in static.items() if k in self._model_fn_args}
        takes_labels = "labels" in self._model_fn_args
        model_fn = self._model_fn
        device = self._device if device is None else torch.device(device)
        on_cpu = device.type == "cpu"
        autocast_dtype = _AUTOCAST_DTYPES.get(self._config.precision or "32")

        def call(features: Any, labels: Any) -> EstimatorSpec:
            state = _model_state._active
            if state is not None and (state.named_tensors or state.summaries):
                # A name or summary holds for the model_fn call that made it.
                state.named_tensors.clear()
                state.summaries.clear()
            if not on_cpu:
                features, labels = _to_device(features, device), _to_device(labels, device)
            if takes_labels:
                spec = model_fn(features=features, labels=labels, **static)
            elif labels is not None:
                raise ValueError("model_fn does not take labels, but input_fn returns labels.")
            else:
                spec = model_fn(features=features, **static)
            if type(spec) is not EstimatorSpec and not isinstance(spec, EstimatorSpec):
                raise ValueError(f"model_fn should return an EstimatorSpec, returned {type(spec).__name__}: {spec!r:.200}")
            return spec

        if autocast_dtype is None:
            return call

        def call_with_autocast(features: Any, labels: Any) -> EstimatorSpec:
            # Only the forward pass runs under autocast; train_op's backward runs outside it.
            with torch.autocast(device.type, dtype=autocast_dtype):
                return call(features, labels)

        return call_with_autocast

    def _first_spec(self, call: Callable[[Any, Any], EstimatorSpec], session: _Session) -> EstimatorSpec:
        """Runs the first model_fn call with full validation and finishes module creation."""
        spec = call(session.features, session.labels)
        if spec.mode is not None and spec.mode != session.mode:
            raise ValueError(f"model_fn returned EstimatorSpec(mode={str(spec.mode)!r}) when called "
                             f"with mode={str(session.mode)!r}; return EstimatorSpec(mode, ...) with the mode it was given.")
        state = session.state
        if state.warm_starter is not None:
            report = state.warm_starter.finish()
            _log.info("Warm-started %d variables from %s.", len(getattr(report, "warm_started", ())),
                      getattr(self._warm_start_settings, "ckpt_to_initialize_from", None))
            state.warm_starter = None
        if session.mode == ModeKeys.TRAIN:
            missed = state.modules_outside_optimizers()
            if missed:
                _log.warning("Modules %s have trainable parameters that no optimizer updates: they will not "
                             "train. Build the optimizer from ee.trainable_variables() after the last "
                             "get_module, or set requires_grad=False on what should stay frozen.", missed)
        # Once per checkpoint and set of modules: a reused state would log (and compute) it again
        # on every evaluate/predict call.
        modules_and_source = (state.checkpoint_path, tuple(state.modules))
        if state.unused_variables_checked != modules_and_source:
            state.unused_variables_checked = modules_and_source
            unused = state.unused_checkpoint_variables()
            if unused:
                _log.info("Variables in %s not used by the model: %s", state.checkpoint_path, unused)
        return spec

    def _call_model_fn(self, features, labels, mode, config=None) -> EstimatorSpec:
        available = {"features": features, "labels": labels, "mode": mode,
                     "params": self.params, "config": config or self._config}
        spec = self._model_fn(**{k: v for k, v in available.items() if k in self._model_fn_args})
        if not isinstance(spec, EstimatorSpec):
            raise ValueError("model_fn should return an EstimatorSpec.")
        return spec

    @staticmethod
    def _check_model_dir(model_dir: Any, config: RunConfig) -> str | None:
        """The model_dir given by the constructor or the config (they must agree), or ``None``."""
        # A file:// URL is its local path; any other URL (s3://, gs://, ...) goes through fsspec.
        model_dir = gfile.normalize(model_dir) if model_dir else None
        configured = gfile.normalize(config.model_dir) if config.model_dir else None
        if model_dir and configured and gfile.abspath(model_dir) != gfile.abspath(configured):
            raise ValueError(
                "`model_dir` are set both in constructor and `RunConfig`, but with different values. "
                f"In constructor: '{model_dir}', in `RunConfig`: '{config.model_dir}'. Set only one.")
        chosen = model_dir or configured or None
        if chosen and gfile.is_remote(chosen):
            gfile.filesystem(chosen)  # a missing fsspec / s3fs is reported now, not at the first save
        return chosen

    @staticmethod
    def _temporary_model_dir() -> str:
        model_dir = tempfile.mkdtemp(prefix="estimator_")
        _log.warning("Using temporary folder as model directory: %s", model_dir)
        return model_dir

    def _check_no_overrides(self) -> None:
        cls = type(self)
        if cls is Estimator:
            return
        overridden = sorted(
            name for klass in cls.__mro__ if klass not in (Estimator, object) and issubclass(klass, Estimator)
            for name in vars(klass)
            if name in vars(Estimator) and not name.startswith("__") and name not in _OVERRIDABLE
            and vars(klass)[name] is not vars(Estimator)[name])
        if overridden:
            raise ValueError(f"Subclasses of Estimator cannot override members of Estimator. "
                             f"{cls} does override {overridden}. Give your methods new names, or "
                             "customise behaviour through model_fn and hooks.")


class _StatefulIterator:
    """Iterates an input and exposes its ``state_dict``/``load_state_dict`` (for resume)."""

    __slots__ = ("_iterable", "_iterator")

    def __init__(self, iterable: Any, iterator: Iterator[Any]) -> None:
        self._iterable = iterable
        self._iterator = iterator

    def __iter__(self) -> _StatefulIterator:
        return self

    def __next__(self) -> Any:
        return next(self._iterator)

    def state_dict(self) -> dict[str, Any]:
        return self._iterable.state_dict()

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self._iterable.load_state_dict(state)
        self._iterator = iter(self._iterable)


def _verify_model_fn_args(model_fn: Callable[..., Any], params: Mapping[str, Any] | None) -> tuple[str, ...]:
    args = fn_args(model_fn)
    if "features" not in args:
        raise ValueError(f"model_fn ({model_fn}) must include features argument.")
    if params is not None and "params" not in args:
        raise ValueError(f"model_fn ({model_fn}) does not include params argument, but params "
                         f"({params!r}) is passed to Estimator.")
    if params is None and "params" in args:
        _log.warning("Estimator's model_fn (%s) includes params argument, but params are not passed to Estimator.", model_fn)
    unexpected = sorted(set(args) - set(_MODEL_FN_ARGS))
    if unexpected:
        raise ValueError(f"model_fn ({model_fn}) has following not expected args: {unexpected}. "
                         f"Allowed: {list(_MODEL_FN_ARGS)}.")
    return args


def _filter_predictions(predictions: Any, predict_keys: Sequence[str] | str | None) -> Any:
    if not predict_keys:  # None or empty: every prediction, as TF's _extract_keys
        return predictions
    if not isinstance(predictions, Mapping):
        raise ValueError("predict_keys argument is not valid in case of non-dict predictions.")
    if isinstance(predict_keys, str):  # one key (TF tests `key in predict_keys`, a substring test)
        predict_keys = [predict_keys]
    filtered = {k: predictions[k] for k in predict_keys if k in predictions}
    if not filtered:
        raise ValueError(f"Expected to run at least one output from {sorted(predictions)}, provided {list(predict_keys)}.")
    return filtered


def _as_numpy(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    if isinstance(value, np.ndarray) and value.dtype.kind not in "OUS":
        return value
    # Strings come out as TF's string tensors do: numpy arrays of bytes.
    strings = string_array(value)
    return value if strings is None else strings


def _numpy_predictions(predictions: Any) -> Any:
    if isinstance(predictions, Mapping):
        return {k: _as_numpy(v) for k, v in predictions.items()}
    return _as_numpy(predictions)


def _unbatch(predictions: Any, single: bool) -> Iterator[Any]:
    """The examples (or the one batch) to yield, checked first; iterated at C speed."""
    if isinstance(predictions, Mapping):
        arrays = predictions
        if not single:
            return iter((arrays,))
        scalars = [k for k, v in arrays.items() if np.ndim(v) == 0]
        if scalars:
            raise ValueError(f"Predictions {scalars} have no batch dimension (a scalar each); every "
                             "prediction needs the batch as its first dimension to yield single "
                             "examples. Return a value per example, or predict(yield_single_examples=False).")
        lengths = {k: len(v) for k, v in arrays.items()}
        first_key = next(iter(arrays))
        for key, length in lengths.items():
            if length != lengths[first_key]:
                raise ValueError(f"Batch length of predictions should be same. {key} has different "
                                 f"batch length than others ({length} vs {lengths[first_key]} for {first_key}).")
        # Rows are split by list() of each array, then one dict per example is built by
        # dict(zip(keys, row)) -- all in C, no Python frame per example.
        keys = list(arrays)
        rows = zip(*(list(arrays[k]) for k in keys))
        return map(dict, map(zip, itertools.repeat(keys), rows))
    array = predictions
    if not single:
        return iter((array,))
    if np.ndim(array) == 0:
        raise ValueError("The predictions tensor has no batch dimension (a scalar); it needs the "
                         "batch as its first dimension to yield single examples. Return a value "
                         "per example, or predict(yield_single_examples=False).")
    return iter(array)
