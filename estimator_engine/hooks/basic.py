"""TF's standard hooks (``basic_session_run_hooks.py``), eager: values are fetched by name.

Hooks that only need the global step read ``session.global_step`` instead of fetching it, and a
hook that logs or writes on a timer returns ``None`` from ``before_run`` on the steps where it does
nothing, so the loop resolves no values for it.

Unlike TF, the loop calls ``end`` also after an exception (see ``hooks/base.py``). Hooks that would
run fetches in ``end`` (``LoggingTensorHook(at_end=True)``, ``FinalOpsHook``) skip them when
``on_exception`` saw the loop fail, as TF, which does not call ``end`` then.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping
from numbers import Integral, Real
from typing import Any

import numpy as np
import torch

from estimator_engine.errors import NanLossDuringTrainingError
from estimator_engine.hooks.base import (
    OnDevice,
    ScheduledHook,
    Session,
    SessionRunArgs,
    SessionRunContext,
    SessionRunHook,
    SessionRunValues,
    _session_of,
    map_fetches,
)
from estimator_engine.hooks.timer import NEVER, NeverTriggerTimer, SecondOrStepTimer
from estimator_engine.summary import SummaryWriter, SummaryWriterCache

__all__ = [
    "FinalOpsHook",
    "GlobalStepWaiterHook",
    "LoggingTensorHook",
    "NanTensorHook",
    "StepCounterHook",
    "StopAtStepHook",
    "SummarySaverHook",
]

_LOG = logging.getLogger("estimator_engine")


def _format_repr(obj: object, **fields: Any) -> str:
    args = ", ".join(f"{name}={value!r}" for name, value in fields.items())
    return f"{type(obj).__name__}({args})"


def _check_fetches(fetches: Any, argument: str) -> None:
    """Fails at construction, not mid-training, when a fetch structure holds a non-name."""
    try:
        map_fetches(fetches, lambda name: name)
    except TypeError as exc:
        raise TypeError(f"{argument}: {exc}") from None


def _is_int(value: Any) -> bool:
    return isinstance(value, Integral) and not isinstance(value, bool)


class StopAtStepHook(ScheduledHook):
    """Requests a stop once the global step reaches a last step.

    Exactly one of ``num_steps`` (counted from the global step when the session starts) and
    ``last_step`` (an absolute global step) is given. The step is checked after every run.

    Args:
        num_steps: number of steps to run from the starting global step.
        last_step: the global step to stop at.

    Example:
        >>> hook = StopAtStepHook(num_steps=100)   # train(steps=100)
        >>> hook = StopAtStepHook(last_step=1000)  # train(max_steps=1000)
    """

    def __init__(self, num_steps: int | None = None, last_step: int | None = None) -> None:
        if num_steps is None and last_step is None:
            raise ValueError(
                "One of num_steps or last_step must be specified, given num_steps=None and "
                "last_step=None. Use num_steps=N to run N more steps or last_step=N to stop at "
                "global step N."
            )
        if num_steps is not None and last_step is not None:
            raise ValueError(
                f"Only one of num_steps or last_step can be specified, given num_steps={num_steps!r} "
                f"and last_step={last_step!r}."
            )
        for name, value in (("num_steps", num_steps), ("last_step", last_step)):
            if value is not None and (not _is_int(value) or value < 0):
                raise ValueError(f"{name} must be an integer >= 0, given {value!r}.")
        self._num_steps = None if num_steps is None else int(num_steps)
        self._last_step = None if last_step is None else int(last_step)

    def __repr__(self) -> str:
        return _format_repr(self, num_steps=self._num_steps, last_step=self._last_step)

    @property
    def last_step(self) -> int | None:
        """The global step to stop at (known after ``after_create_session`` with ``num_steps``)."""
        return self._last_step

    def after_create_session(self, session: Session, coord: Any = None) -> None:
        # Recomputed per session (TF computes it once), so one hook can serve several train calls.
        if self._num_steps is not None:
            self._last_step = session.global_step + self._num_steps

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        if self._last_step is not None and _session_of(run_context).global_step >= self._last_step:
            run_context.request_stop()

    def steps_until_due(self, session: Session) -> tuple[int, float | None]:
        # It acts on the step that brings the global step (one more per step) to last_step.
        if self._last_step is None:
            return NEVER, None
        return max(0, self._last_step - session.global_step - 1), None


class LoggingTensorHook(ScheduledHook):
    """Logs fetched values every N local iterations, every N seconds, and/or at the end.

    Logs to the ``'estimator_engine'`` logger at INFO as ``"tag = value, tag = value (x.xxx sec)"``
    (dict tags in sorted order, list names in list order; the seconds since the previous log are
    left out the first time). The first iteration is always logged. Only the iterations that log
    fetch anything.

    Args:
        tensors: dict of tag -> fetch name, or a list of fetch names (each its own tag).
        every_n_iter: log every N iterations of this loop (not global steps).
        every_n_secs: log at most once every N seconds.
        at_end: also log the values fetched in ``end``.
        formatter: ``callable(dict tag -> value) -> str`` replacing the default line.

    Example:
        >>> hook = LoggingTensorHook({'loss': 'loss', 'step': 'global_step'}, every_n_iter=100)
    """

    def __init__(self, tensors: Mapping[str, Any] | list[str] | tuple[str, ...] | str,
                 every_n_iter: int | None = None, every_n_secs: float | None = None,
                 at_end: bool = False,
                 formatter: Callable[[dict[str, Any]], str] | None = None) -> None:
        only_log_at_end = at_end and every_n_iter is None and every_n_secs is None
        if not only_log_at_end and (every_n_iter is None) == (every_n_secs is None):
            raise ValueError(
                "either at_end and/or exactly one of every_n_iter and every_n_secs must be "
                f"provided, given every_n_iter={every_n_iter!r}, every_n_secs={every_n_secs!r}, "
                f"at_end={at_end!r}."
            )
        if every_n_iter is not None and (not _is_int(every_n_iter) or every_n_iter <= 0):
            raise ValueError(f"invalid every_n_iter={every_n_iter!r}. Pass an integer > 0.")
        if formatter is not None and not callable(formatter):
            raise TypeError(f"formatter must be callable(dict) -> str, given {formatter!r}.")
        if isinstance(tensors, str):
            tensors = [tensors]
        if isinstance(tensors, Mapping):
            self._tag_order = sorted(tensors)
            self._tensors = dict(tensors)
        elif isinstance(tensors, (list, tuple)):
            self._tag_order = list(tensors)
            self._tensors = {name: name for name in tensors}
        else:
            raise TypeError(
                f"tensors must be a dict of tag -> fetch name or a list of fetch names, given "
                f"{tensors!r}."
            )
        _check_fetches(self._tensors, "tensors")
        self._every_n_iter = every_n_iter
        self._every_n_secs = every_n_secs
        self._formatter = formatter
        self._log_at_end = at_end
        self._timer = (NeverTriggerTimer() if only_log_at_end
                       else SecondOrStepTimer(every_secs=every_n_secs, every_steps=every_n_iter))
        self._iter_count = 0
        self._should_trigger = False
        self._failed = False

    def __repr__(self) -> str:
        return _format_repr(self, tensors=self._tensors, every_n_iter=self._every_n_iter,
                            every_n_secs=self._every_n_secs, at_end=self._log_at_end)

    def begin(self) -> None:
        self._timer.reset()
        self._iter_count = 0
        self._failed = False

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs | None:
        self._should_trigger = self._timer.should_trigger_for_step(self._iter_count)
        return SessionRunArgs(self._tensors) if self._should_trigger else None

    def _log_tensors(self, tensor_values: Mapping[str, Any]) -> None:
        elapsed_secs, _ = self._timer.update_last_triggered_step(self._iter_count)
        if self._formatter is not None:
            _LOG.info("%s", self._formatter(dict(tensor_values)))
            return
        with np.printoptions(suppress=True):
            line = ", ".join(f"{tag} = {tensor_values[tag]}" for tag in self._tag_order)
        if elapsed_secs is None:
            _LOG.info("%s", line)
        else:
            _LOG.info("%s (%.3f sec)", line, elapsed_secs)

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        if self._should_trigger:
            self._log_tensors(run_values.results)
        self._iter_count += 1

    def steps_until_due(self, session: Session) -> tuple[int, float | None]:
        return self._timer.steps_until_trigger(self._iter_count)

    def skip_steps(self, steps: int) -> None:
        self._iter_count += steps  # the iterations the loop ran without calling this hook

    def on_exception(self, exception: BaseException) -> None:
        self._failed = True

    def end(self, session: Session) -> None:
        if self._log_at_end and not self._failed:
            self._log_tensors(session.run(self._tensors))


class StepCounterHook(ScheduledHook):
    """Measures global steps per second, logs it and writes the ``global_step/sec`` summary.

    The rate is measured between triggers (every ``every_n_steps`` global steps or
    ``every_n_secs`` seconds), so the first step, often slow, is not counted. The last value is
    kept in ``last_steps_per_sec``.

    Args:
        every_n_steps: measure every N global steps.
        every_n_secs: measure every N seconds instead (pass ``every_n_steps=None``).
        output_dir: write the summary with ``SummaryWriterCache.get(output_dir)``.
        summary_writer: write the summary with this writer; with neither, only log.

    Example:
        >>> hook = StepCounterHook(every_n_steps=100)
    """

    _SUMMARY_TAG = "global_step/sec"
    _MAX_STALE_WARNINGS = 5

    def __init__(self, every_n_steps: int | None = 100, every_n_secs: float | None = None,
                 output_dir: str | None = None,
                 summary_writer: SummaryWriter | None = None) -> None:
        if (every_n_steps is None) == (every_n_secs is None):
            raise ValueError(
                "exactly one of every_n_steps and every_n_secs should be provided, given "
                f"every_n_steps={every_n_steps!r}, every_n_secs={every_n_secs!r}. To measure by "
                "time pass every_n_steps=None."
            )
        self._every_n_steps = every_n_steps
        self._every_n_secs = every_n_secs
        self._timer = SecondOrStepTimer(every_steps=every_n_steps, every_secs=every_n_secs)
        self._output_dir = output_dir
        self._summary_writer = summary_writer
        self._last_global_step: int | None = None
        self._stale_warnings = 0
        self._unflushed = False
        self.last_steps_per_sec: float | None = None

    def __repr__(self) -> str:
        return _format_repr(self, every_n_steps=self._every_n_steps,
                            every_n_secs=self._every_n_secs, output_dir=self._output_dir)

    def begin(self) -> None:
        if self._summary_writer is None and self._output_dir:
            self._summary_writer = SummaryWriterCache.get(self._output_dir)
        self._timer.reset()
        self._last_global_step = None
        self._unflushed = False

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        global_step = _session_of(run_context).global_step
        if self._timer.should_trigger_for_step(global_step):
            elapsed_secs, elapsed_steps = self._timer.update_last_triggered_step(global_step)
            if elapsed_secs is not None and elapsed_steps is not None and elapsed_secs > 0:
                self._log_and_record(elapsed_steps / elapsed_secs, global_step)
        if global_step == self._last_global_step and self._stale_warnings < self._MAX_STALE_WARNINGS:
            self._stale_warnings += 1
            _LOG.warning(
                "It seems that global step has not been increased. Current value (could be "
                "stable): %s vs previous value: %s. The Estimator advances it once per train_op "
                "run; StepCounterHook measures nothing outside training.",
                global_step, self._last_global_step,
            )
        self._last_global_step = global_step

    def steps_until_due(self, session: Session) -> tuple[int, float | None]:
        # Checked on the global step after a step: the next step produces global_step + 1.
        return self._timer.steps_until_trigger(session.global_step + 1)

    def _log_and_record(self, steps_per_sec: float, global_step: int) -> None:
        self.last_steps_per_sec = steps_per_sec
        if self._summary_writer is not None:
            self._summary_writer.add_scalar(self._SUMMARY_TAG, steps_per_sec, global_step)
            self._unflushed = True
        _LOG.info("%s: %g", self._SUMMARY_TAG, steps_per_sec)

    def end(self, session: Session) -> None:
        # Only what this hook wrote: a flush of the event file costs an fsync, and the summary
        # hook sharing the writer flushes its own (a short train() call writes no rate at all).
        if self._summary_writer is not None and self._unflushed:
            self._summary_writer.flush()
            self._unflushed = False


def _reads_late(tensor: torch.Tensor) -> bool:
    """Whether reading ``tensor`` now would make the host wait for the device (a GPU's queue)."""
    return tensor.device.type != "cpu"


class _PendingRead:
    """A device value's copy to the host, queued right behind the step that computed it.

    ``.item()`` a step later would wait for everything queued since, the next step included, so
    the host would still idle while the GPU ran each step (a profile on an H200 showed one stream
    synchronisation per step). Waiting on this copy's event waits for its own step only.
    """

    def __init__(self, tensor: torch.Tensor) -> None:
        self._tensor: torch.Tensor | None = None
        self._event: torch.cuda.Event | None = None
        if tensor.device.type == "cuda":
            self._host = torch.empty(tensor.shape, dtype=tensor.dtype, pin_memory=True)
            self._host.copy_(tensor.detach(), non_blocking=True)
            self._event = torch.cuda.Event()
            self._event.record()
        else:  # other devices: read the tensor itself later
            self._tensor = tensor

    def value(self) -> Any:
        if self._event is not None:
            self._event.synchronize()
            host = self._host
        else:
            assert self._tensor is not None
            host = self._tensor.detach().cpu()
        return host.item() if host.dim() == 0 else host.numpy()


class NanTensorHook(SessionRunHook):
    """Stops training when the loss is NaN: raises, or logs and requests a stop.

    Args:
        loss_tensor: fetch name of the loss (default ``'loss'``).
        fail_on_nan_loss: raise ``NanLossDuringTrainingError``; otherwise log an error and request
            a stop after this step.

    Attributes:
        last_finite_loss: the last loss that was not NaN (``None`` before the first one).
        diverged_at: the global step whose loss was NaN (``None`` while every loss is finite).

    Unlike TF, a stop on NaN (``fail_on_nan_loss=False``) does not checkpoint the diverged step:
    its update has already made the weights NaN, so the newest checkpoint stays the last finite
    one, and a resume or an evaluate starts from weights that still work.

    On a GPU the loss is read one step late (``OnDevice``): reading it at once would make the host
    wait for every step, leaving the GPU idle while the next batch is prepared. The verdict and
    ``diverged_at`` name the same step as an immediate check; the run stops one step later, and a
    checkpoint is never taken over an unchecked loss (the check is settled first).

    Example:
        >>> hook = NanTensorHook('loss', fail_on_nan_loss=True)
    """

    def __init__(self, loss_tensor: str = "loss", fail_on_nan_loss: bool = True) -> None:
        _check_fetches(loss_tensor, "loss_tensor")
        self._loss_tensor = loss_tensor
        self._fail_on_nan_loss = fail_on_nan_loss
        self._args = SessionRunArgs(OnDevice(loss_tensor))  # built once: this hook runs every step
        self._unchecked: tuple[int | None, _PendingRead, SessionRunContext] | None = None
        self.last_finite_loss: float | None = None
        self.diverged_at: int | None = None

    def __repr__(self) -> str:
        return _format_repr(self, loss_tensor=self._loss_tensor,
                            fail_on_nan_loss=self._fail_on_nan_loss)

    def after_create_session(self, session: Session, coord: Any = None) -> None:
        self._unchecked = None
        before_checkpoint = getattr(session, "before_checkpoint", None)
        if before_checkpoint is not None:
            before_checkpoint(self._settle)

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs:
        return self._args

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        loss = run_values.results
        session = run_context.session
        step = None if session is None else session.global_step
        if isinstance(loss, torch.Tensor):
            if _reads_late(loss):  # asynchronous: look at it once the next step is queued
                if self._settle():  # the step before diverged: the run stops on its verdict
                    return
                self._unchecked = (step, _PendingRead(loss), run_context)
                if run_context.stop_requested:  # the last step: no next step to wait for
                    self._settle()
                return
            loss = loss.item() if loss.dim() == 0 else loss.numpy()
        self._check(step, loss, run_context)

    def end(self, session: Session) -> None:
        self._settle()

    def _settle(self) -> bool:
        """Checks the loss left unchecked by the last step, if any; True when it was NaN."""
        if self._unchecked is None:
            return False
        step, loss, run_context = self._unchecked
        self._unchecked = None
        return self._check(step, loss.value(), run_context)

    def _check(self, step: int | None, loss: Any, run_context: SessionRunContext) -> bool:
        """Raises, or requests a stop and returns True, when ``loss`` is NaN."""
        if isinstance(loss, float):  # the usual case: a Python float, checked without numpy
            is_nan = math.isnan(loss)
        else:
            is_nan = bool(np.isnan(np.asarray(loss, dtype=np.float64)).any())
        if not is_nan:
            self.last_finite_loss = loss if isinstance(loss, float) else float(np.mean(loss))
            return False
        session = run_context.session
        self.diverged_at = step
        if self._fail_on_nan_loss:
            error = NanLossDuringTrainingError(step=step, last_finite_loss=self.last_finite_loss)
            _LOG.error("Model diverged with loss = NaN. %s", error)
            raise error
        _LOG.error("Model diverged with loss = NaN at global step %s; stopping training "
                   "(fail_on_nan_loss=False).", step)
        if session is not None and hasattr(session, "failed"):
            session.failed = True  # the saver skips this step and the end-of-training checkpoint
        run_context.request_stop()
        return True


def _scalar_fetches(summary_op: Any) -> dict[str, Any]:
    """A summary_op (name, list of names or dict tag -> name) as a dict tag -> fetch name."""
    if isinstance(summary_op, str):
        return {summary_op: summary_op}
    if isinstance(summary_op, Mapping):
        return dict(summary_op)
    if isinstance(summary_op, (list, tuple)):
        return {name: name for name in summary_op}
    raise TypeError(
        f"summary_op must be a fetch name, a list of names or a dict of tag -> name, given "
        f"{summary_op!r}."
    )


def _flattened(results: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """Tag-value pairs; a fetched dict (``'summaries'``) contributes its own tags."""
    pairs: list[tuple[str, Any]] = []
    for tag, value in results.items():
        if isinstance(value, Mapping):
            pairs.extend(value.items())
        else:
            pairs.append((tag, value))
    return pairs


class SummarySaverHook(ScheduledHook):
    """Writes scalar values fetched by name as summaries every N steps or N seconds.

    Exactly one of ``scaffold`` (an object whose ``summary_op`` attribute is used) and
    ``summary_op`` is given; exactly one of ``save_steps`` and ``save_secs``. The first step is
    always written. Summaries are written at the global step after the step ran.

    Args:
        save_steps: write every N global steps.
        save_secs: write every N seconds.
        output_dir: write with ``SummaryWriterCache.get(output_dir)``.
        summary_writer: write with this writer (takes precedence over ``output_dir``).
        scaffold: an object with a ``summary_op`` attribute (TF's ``Scaffold``).
        summary_op: a fetch name, a list of names, or a dict of tag -> name; scalar values. A
            name whose value is a dict (``'summaries'``: the model_fn's ``ee.summary.scalar``
            values) writes each of its entries under its own tag.

    Example:
        >>> hook = SummarySaverHook(save_steps=100, output_dir='/tmp/m', summary_op=['loss'])
    """

    def __init__(self, save_steps: int | None = None, save_secs: float | None = None,
                 output_dir: str | None = None, summary_writer: SummaryWriter | None = None,
                 scaffold: Any = None, summary_op: Any = None) -> None:
        if (scaffold is None) == (summary_op is None):
            raise ValueError(
                "Exactly one of scaffold or summary_op must be provided, given "
                f"scaffold={scaffold!r}, summary_op={summary_op!r}."
            )
        if (save_steps is None) == (save_secs is None):
            raise ValueError(
                "Exactly one of save_steps or save_secs should be provided, given "
                f"save_steps={save_steps!r}, save_secs={save_secs!r}."
            )
        if summary_op is not None:
            summary_op = _scalar_fetches(summary_op)
            _check_fetches(summary_op, "summary_op")
        self._summary_op = summary_op
        self._scaffold = scaffold
        self._save_steps = save_steps
        self._save_secs = save_secs
        self._timer = SecondOrStepTimer(every_secs=save_secs, every_steps=save_steps)
        self._output_dir = output_dir
        self._summary_writer = summary_writer
        self._fetches: dict[str, Any] | None = None
        self._request_summary = False

    def __repr__(self) -> str:
        return _format_repr(self, save_steps=self._save_steps, save_secs=self._save_secs,
                            output_dir=self._output_dir, summary_op=self._summary_op)

    def begin(self) -> None:
        if self._summary_writer is None and self._output_dir:
            self._summary_writer = SummaryWriterCache.get(self._output_dir)
        if self._summary_op is not None:
            self._fetches = self._summary_op
        else:
            scaffold_op = getattr(self._scaffold, "summary_op", None)
            self._fetches = None if scaffold_op is None else _scalar_fetches(scaffold_op)
        self._timer.reset()

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs | None:
        if self._summary_writer is None or not self._fetches:
            return None
        next_step = _session_of(run_context).global_step + 1  # the step this run will produce
        self._request_summary = self._timer.should_trigger_for_step(next_step)
        return SessionRunArgs(self._fetches) if self._request_summary else None

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        writer = self._summary_writer
        if not self._request_summary or writer is None:
            return
        self._request_summary = False
        global_step = _session_of(run_context).global_step
        self._timer.update_last_triggered_step(global_step)
        values = {}
        for tag, value in _flattened(run_values.results):
            array = np.asarray(value)
            if array.size != 1:
                raise ValueError(
                    f"SummarySaverHook writes scalars; summary {tag!r} fetched a value of shape "
                    f"{array.shape}. Fetch a scalar (e.g. a metric or the loss)."
                )
            values[tag] = float(array.reshape(()))
        writer.add_scalars(values, global_step)

    def steps_until_due(self, session: Session) -> tuple[int, float | None]:
        if self._summary_writer is None or not self._fetches:
            return NEVER, None
        return self._timer.steps_until_trigger(session.global_step + 1)

    def end(self, session: Session) -> None:
        if self._summary_writer is not None:
            self._summary_writer.flush()


class FinalOpsHook(SessionRunHook):
    """Fetches values by name at the end of the loop and keeps them in ``final_ops_values``.

    Args:
        final_ops: a fetch name or a list, tuple or dict of names.
        final_ops_feed_dict: must be ``None`` (there is nothing to feed in eager PyTorch).

    Example:
        >>> hook = FinalOpsHook({'accuracy': 'accuracy'})
        >>> hook.final_ops_values is None
        True
    """

    def __init__(self, final_ops: Any, final_ops_feed_dict: Any = None) -> None:
        if final_ops_feed_dict is not None:
            raise ValueError(
                f"final_ops_feed_dict is not supported (nothing is fed in eager PyTorch), given "
                f"{final_ops_feed_dict!r}. Pass final_ops_feed_dict=None."
            )
        _check_fetches(final_ops, "final_ops")
        self._final_ops = final_ops
        self._final_ops_values: Any = None
        self._failed = False

    def __repr__(self) -> str:
        return _format_repr(self, final_ops=self._final_ops)

    @property
    def final_ops_values(self) -> Any:
        """The values fetched in ``end``, in the structure of ``final_ops`` (``None`` before)."""
        return self._final_ops_values

    def begin(self) -> None:
        self._failed = False

    def on_exception(self, exception: BaseException) -> None:
        self._failed = True

    def end(self, session: Session) -> None:
        if self._final_ops is not None and not self._failed:
            self._final_ops_values = session.run(self._final_ops)


class GlobalStepWaiterHook(ScheduledHook):
    """Delays the first step until the global step reaches ``wait_until_step`` (polling).

    Meant for workers that should start once others have trained a while; in a single process
    the global step only advances by this loop, so ``wait_until_step`` above it waits forever.

    Args:
        wait_until_step: the global step to wait for; ``<= 0`` does not wait.

    Example:
        >>> hook = GlobalStepWaiterHook(wait_until_step=0)
    """

    _POLL_SECS = 0.5
    _LOG_EVERY_STEPS = 1000

    def __init__(self, wait_until_step: int) -> None:
        if not isinstance(wait_until_step, Real) or isinstance(wait_until_step, bool):
            raise TypeError(f"wait_until_step must be an integer, given {wait_until_step!r}.")
        self._wait_until_step: float = wait_until_step
        self._worker_is_started: bool = False

    def __repr__(self) -> str:
        return _format_repr(self, wait_until_step=self._wait_until_step)

    def begin(self) -> None:
        self._worker_is_started = False

    def steps_until_due(self, session: Session) -> tuple[int, float | None]:
        return (NEVER, None) if self._worker_is_started else (0, None)

    def before_run(self, run_context: SessionRunContext) -> None:
        if self._worker_is_started:
            return None
        if self._wait_until_step <= 0:
            self._worker_is_started = True
            return None
        _LOG.info("Waiting for global step %d before starting training.", self._wait_until_step)
        last_logged_step = 0
        while True:
            current_step = _session_of(run_context).global_step
            if current_step >= self._wait_until_step:
                self._worker_is_started = True
                return None
            if current_step - last_logged_step > self._LOG_EVERY_STEPS:
                _LOG.info("Waiting for global step %d before starting training. Current step is "
                          "%d.", self._wait_until_step, current_step)
                last_logged_step = current_step
            time.sleep(self._POLL_SECS)
