"""Hook protocol of the engine: TF's ``SessionRunHook`` family, eager.

Call order inside ``Estimator.train`` (``evaluate`` and ``predict`` follow the same shape)::

    input_fn(...)                       -> iterable of batches
    batch = next(batches)
    spec = model_fn(batch...)           # first call: modules created and restored here
    for hook in hooks: hook.begin()
    for hook in hooks: hook.after_create_session(session, coord=None)
    try:
        while not stop_requested:
            if not first step: batch = next(batches); spec = model_fn(batch...)
            args = [hook.before_run(run_context) for hook in hooks]   # fetches by name
            spec.train_op()                                          # global_step += 1
            values = resolve(args)                                  # Python values
            for hook in hooks: hook.after_run(run_context, values)
    except BaseException as exc:
        for hook in hooks: hook.on_exception(exc)   # observes only; the error is re-raised
        raise
    finally:
        for hook in hooks: hook.end(session)        # always, unlike TF

``train``, ``evaluate`` and ``predict`` share this one lifecycle (in ``predict`` the step runs
``model_fn`` for the predictions and no ``train_op``; a caller that stops iterating early ends the
loop normally: ``end`` runs, ``on_exception`` does not). A name that several hooks fetch in the
same step is resolved once, and they receive the same value.

Which steps call a hook: TF calls every hook on every step, and so does the engine for every
``SessionRunHook``. A ``ScheduledHook`` says on which training steps it acts (the standard step
limit, logging, step counter, summary, checkpoint and progress hooks are ones: every N steps, every
N seconds, at the end), and the loop leaves it out of the steps on which it would do nothing: after
acting it tells the loop how many steps it will stay idle and from what time a seconds-based timer
is due (``steps_until_due(session) -> (steps, due_time)``; ``skip_steps(steps)`` catches up a hook
that counts its own iterations). The steps it acts on, what it writes, and the order in which the
hooks called on a step are called are the same as when every hook is called. A seconds-based timer
is looked at when a step starts: one that falls due during a step acts on the next one. A subclass
that overrides ``before_run`` or ``after_run`` without its own ``steps_until_due`` is called on
every step, since its new methods may act on any step.

End of input (``StopIteration``) ends the loop normally. ``run_context.request_stop()`` stops the
loop after the current step. Fetches are *names*, resolved against the step's ``EstimatorSpec``:
``'loss'``, ``'global_step'`` (the value this step read: before its increment, as TF's hooks get it
from ``training_util._get_or_create_global_step_read()``; ``session.global_step`` in ``after_run`` is
the value after), ``'predictions'`` (the whole
dict) and each of its keys, also as ``'predictions/<key>'``, ``'labels'``, ``'features'`` and
``'features/<key>'``, and in EVAL each ``eval_metric_ops`` key (the value over the batches seen so
far). A fetch may be one name or a list, tuple or dict of names; ``SessionRunValues.results`` has
the same structure with tensors turned into Python numbers or numpy arrays. A name wrapped in
``OnDevice`` is the exception: its value stays a tensor where the step computed it, so reading it
on a GPU does not make the host wait for the step (``NanTensorHook`` reads the loss that way).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

if TYPE_CHECKING:
    from estimator_engine.mode_keys import ModeKeys
    from estimator_engine.run_config import RunConfig

__all__ = [
    "CheckpointSaverListener",
    "OnDevice",
    "ScheduledHook",
    "Session",
    "SessionRunArgs",
    "SessionRunContext",
    "SessionRunHook",
    "SessionRunValues",
    "map_fetches",
]


class Session(Protocol):
    """What a hook may use of the running loop (passed as ``session`` / ``run_context.session``)."""

    mode: ModeKeys
    model_dir: str
    config: RunConfig

    @property
    def global_step(self) -> int:
        """The number of training steps taken so far (the value a checkpoint would record)."""
        ...

    def save_checkpoint(self, checkpoint_dir: str | None = None,
                        checkpoint_basename: str = "model.ckpt") -> str | None:
        """Writes a checkpoint of the whole training state now and returns its path (TRAIN only).

        Returns ``None`` when nothing is written: on a worker that is not the chief, or after a
        failed step (its state is not worth keeping).
        """
        ...

    def save_checkpoint_async(self, checkpoint_dir: str | None = None,
                              checkpoint_basename: str = "model.ckpt") -> str | None:
        """Like ``save_checkpoint``, but the file is written in the background (optional method).

        The state is copied before this returns; the loop waits for pending writes before it
        ends, and a failed write is raised at the next save or at the end.
        """
        ...

    def run(self, fetches: Any) -> Any:
        """Resolves fetch names against the current step, like a hook's ``SessionRunArgs``."""
        ...

    def evaluate(self, input_fn: Any, steps: int | None = None, hooks: Any = None, name: str | None = None,
                 checkpoint_path: str | None = None) -> dict[str, Any]:
        """Evaluates the model being trained as it is now, without a checkpoint, and writes the
        results where ``Estimator.evaluate`` does (TRAIN only; optional method). Training goes on
        afterwards in training mode. ``InMemoryEvaluatorHook`` and ``train_and_evaluate`` use it."""
        ...

    def before_checkpoint(self, callback: Any) -> None:
        """Registers ``callback()`` to run before each checkpoint of this call is taken (optional
        method). A hook that reads values a step late settles them there, so no checkpoint holds
        a state it would have refused."""
        ...


class SessionRunArgs(NamedTuple):
    """What a hook's ``before_run`` asks for: ``fetches`` are names (see the module docstring).

    Example:
        >>> SessionRunArgs({'loss': 'loss', 'step': 'global_step'}).fetches['step']
        'global_step'
    """

    fetches: Any
    feed_dict: Any = None
    options: Any = None


class SessionRunValues(NamedTuple):
    """What ``after_run`` receives: ``results`` mirrors the structure of the requested fetches."""

    results: Any
    options: Any = None
    run_metadata: Any = None


class SessionRunContext:
    """Passed to ``before_run`` and ``after_run``; ``request_stop()`` ends the loop after this step.

    Example:
        >>> ctx = SessionRunContext(original_args=None, session=None)
        >>> ctx.request_stop(); ctx.stop_requested
        True
    """

    __slots__ = ("_stop_requested", "original_args", "session")

    def __init__(self, original_args: Any, session: Session | None) -> None:
        self.original_args = original_args
        self.session = session
        self._stop_requested = False

    @property
    def stop_requested(self) -> bool:
        return self._stop_requested

    def request_stop(self) -> None:
        """Stops the loop once the current step has finished (every hook still sees ``after_run``)."""
        self._stop_requested = True


class SessionRunHook:
    """Base class of hooks; override only the methods you need.

    A hook that also defines ``state_dict()`` and ``load_state_dict(state)`` is saved in and
    restored from checkpoints under its ``checkpoint_key`` (default: its class name).

    Example:
        >>> class CountSteps(SessionRunHook):
        ...     def __init__(self):
        ...         self.steps = 0
        ...     def after_run(self, run_context, run_values):
        ...         self.steps += 1
    """

    def begin(self) -> None:
        """Called once before the loop starts (after the first ``model_fn`` call built the modules)."""

    def after_create_session(self, session: Session, coord: Any = None) -> None:
        """Called once the model state is initialised or restored, before the first step."""

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs | None:
        """Called before each step runs; return ``SessionRunArgs`` to fetch values by name."""
        return None

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        """Called after each step with the values asked for in ``before_run``."""

    def on_exception(self, exception: BaseException) -> None:
        """Observes an exception that ends the loop; the loop re-raises it afterwards."""

    def end(self, session: Session) -> None:
        """Called once at the end of the loop, whether it ended normally or by an exception."""


class ScheduledHook(SessionRunHook):
    """A hook that says on which training steps it acts, so that the loop calls it on those only.

    Calling every hook on every step costs a bound-method call per hook per step, which a small
    model's step (tens of microseconds on a CPU) feels. ``Estimator.train`` asks a scheduled hook
    after ``after_create_session`` and after each step it was called on how many steps it will sit
    out and from what wall-clock time it is due anyway; ``skip_steps`` then tells it how many it sat
    out. Evaluation and prediction call it on every batch, as any hook.

    A subclass that overrides ``before_run`` or ``after_run`` but not ``steps_until_due`` is
    called on every step (its new methods may act on any step).

    Example:
        >>> class EveryTenth(ScheduledHook):
        ...     def after_run(self, run_context, run_values):
        ...         print('step', run_context.session.global_step)
        ...     def steps_until_due(self, session):
        ...         return (-session.global_step - 1) % 10, None  # due when the step makes a multiple of 10
    """

    def steps_until_due(self, session: Session) -> tuple[int, float | None]:
        """``(steps, due_time)``: the training steps this hook sits out from the next one on, and
        the ``time.time()`` from which it is due whatever the step (``None``: no timer). Return
        ``(0, None)`` to be called on the next step."""
        return 0, None

    def skip_steps(self, steps: int) -> None:
        """Told how many steps the loop ran without calling this hook (before its next call, and at
        the end of the loop)."""


class CheckpointSaverListener:
    """Callbacks around every checkpoint save (TF's ``CheckpointSaverListener``).

    ``after_save`` returning ``True`` requests that training stop.

    Example:
        >>> class StopAfterFirstSave(CheckpointSaverListener):
        ...     def after_save(self, session, global_step_value):
        ...         return global_step_value > 0
    """

    def begin(self) -> None:
        """Called once before training starts."""

    def before_save(self, session: Session, global_step_value: int) -> None:
        """Called before each save."""

    def after_save(self, session: Session, global_step_value: int) -> bool | None:
        """Called after each save; return ``True`` to stop training."""
        return None

    def end(self, session: Session, global_step_value: int) -> None:
        """Called once at the end of training."""


def _session_of(run_context: SessionRunContext) -> Session:
    """The running session of ``run_context``; a clear error for a context made without one."""
    session = run_context.session
    if session is None:
        raise RuntimeError("This hook needs run_context.session (the running loop's session), which is "
                           "None. Hooks are called with one by Estimator.train/evaluate/predict; a test "
                           "driving a hook by hand must pass SessionRunContext(original_args, session).")
    return session


@dataclass(frozen=True)
class OnDevice:
    """A fetch whose value stays a tensor on the step's device: no host copy, no wait for the GPU.

    A plain name (``'loss'``) makes the host wait until the step has computed the value; on a GPU
    that wait every step leaves the device idle while the next batch is prepared. A hook that can
    look at the value later (``.item()`` a step on) asks for it this way.

    Example:
        >>> SessionRunArgs({'loss': OnDevice('loss')}).fetches['loss'].name
        'loss'
    """

    name: str


def map_fetches(fetches: Any, resolve: Any) -> Any:
    """Applies ``resolve(name)`` to every name in a (nested) fetch structure, keeping its shape
    (``OnDevice(name)`` is passed to ``resolve`` as it is)."""
    if isinstance(fetches, (str, OnDevice)):
        return resolve(fetches)
    if isinstance(fetches, Mapping):
        return {key: map_fetches(value, resolve) for key, value in fetches.items()}
    if isinstance(fetches, (list, tuple)):
        return type(fetches)(map_fetches(value, resolve) for value in fetches)
    if fetches is None:
        return None
    raise TypeError(
        f"Fetches must be names (str) or lists, tuples or dicts of names, given: {fetches!r}. "
        "Ask for spec values by name, e.g. SessionRunArgs({'loss': 'loss'})."
    )
