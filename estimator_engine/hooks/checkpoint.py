"""``CheckpointSaverHook``: saves the training state at the start, on a timer and at the end.

The hook decides *when*; ``session.save_checkpoint`` (the Estimator) decides *how*: it writes the
whole state atomically, updates the ``checkpoint`` state file and prunes old checkpoints.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from typing import Any

from estimator_engine.hooks.base import (
    CheckpointSaverListener,
    ScheduledHook,
    Session,
    SessionRunContext,
    SessionRunValues,
    _session_of,
)
from estimator_engine.hooks.timer import SecondOrStepTimer

__all__ = ["CheckpointSaverHook", "check_listeners_type"]

_LOG = logging.getLogger("estimator_engine")


def check_listeners_type(saving_listeners: Iterable[Any] | None) -> list[CheckpointSaverListener]:
    """Returns ``saving_listeners`` as a list; ``TypeError`` for anything not a listener (TF's check).

    Example:
        >>> check_listeners_type(None)
        []
    """
    listeners = list(saving_listeners or ())
    for listener in listeners:
        if not isinstance(listener, CheckpointSaverListener):
            raise TypeError(
                f"saving_listeners must be a list of CheckpointSaverListener, given: {listener!r}. "
                "Subclass estimator_engine.hooks.CheckpointSaverListener."
            )
    return listeners


class CheckpointSaverHook(ScheduledHook):
    """Saves checkpoints every N steps or N seconds, once at the start and once at the end.

    The first save, in ``after_create_session``, records the starting step (``model.ckpt-0`` for a
    fresh model); the last, in ``end``, is skipped when the last step was just saved or when the
    loop failed (TF does not call ``end`` after an error, so it saves nothing then either). Each
    save is wrapped in the listeners' ``before_save``/``after_save``; an ``after_save`` returning
    ``True`` requests a stop.

    Args:
        checkpoint_dir: directory of the checkpoints (the Estimator's ``model_dir``).
        save_secs: save every N seconds.
        save_steps: save every N global steps (exactly one of ``save_secs`` and ``save_steps``).
        saver: an object with ``save(session, save_path, global_step=step)`` used instead of
            ``session.save_checkpoint`` (TF's ``Saver``); not together with ``scaffold``.
        checkpoint_basename: checkpoint file prefix (``model.ckpt`` -> ``model.ckpt-<step>``).
        scaffold: an object whose ``saver`` attribute, when set, is used as ``saver``.
        listeners: ``CheckpointSaverListener`` s; ``listeners`` may be extended before ``begin``.
        save_graph_def: accepted for compatibility; there is no graph to write.

    Example:
        >>> hook = CheckpointSaverHook('/tmp/model', save_steps=100)
        >>> hook.listeners
        []
    """

    def __init__(self, checkpoint_dir: str | os.PathLike[str], save_secs: float | None = None,
                 save_steps: int | None = None, saver: Any = None,
                 checkpoint_basename: str = "model.ckpt", scaffold: Any = None,
                 listeners: Iterable[CheckpointSaverListener] | None = None,
                 save_graph_def: bool = True) -> None:
        if saver is not None and scaffold is not None:
            raise ValueError(
                f"You cannot provide both saver and scaffold, given saver={saver!r} and "
                f"scaffold={scaffold!r}."
            )
        if save_secs is None and save_steps is None:
            raise ValueError(
                "Either save_secs or save_steps should be provided, given save_secs=None and "
                "save_steps=None. Pass one of them, e.g. save_steps=100."
            )
        if save_secs is not None and save_steps is not None:
            raise ValueError(
                f"Can not provide both save_secs and save_steps, given save_secs={save_secs!r} "
                f"and save_steps={save_steps!r}. Pass only one of them."
            )
        if saver is not None and not callable(getattr(saver, "save", None)):
            raise TypeError(f"saver must have a save(session, save_path, global_step) method, "
                            f"given {saver!r}.")
        if not isinstance(checkpoint_basename, str) or not checkpoint_basename:
            raise ValueError(f"checkpoint_basename must be a non-empty str, given "
                             f"{checkpoint_basename!r}.")
        self._checkpoint_dir = os.fspath(checkpoint_dir)
        self._checkpoint_basename = checkpoint_basename
        self._save_path = os.path.join(self._checkpoint_dir, checkpoint_basename)
        self._save_secs = save_secs
        self._save_steps = save_steps
        self._saver = saver
        self._scaffold = scaffold
        self._save_graph_def = save_graph_def
        self._timer = SecondOrStepTimer(every_secs=save_secs, every_steps=save_steps)
        self.listeners: list[CheckpointSaverListener] = check_listeners_type(listeners)
        self._failed = False

    def __repr__(self) -> str:
        return (f"CheckpointSaverHook(checkpoint_dir={self._checkpoint_dir!r}, "
                f"save_secs={self._save_secs!r}, save_steps={self._save_steps!r}, "
                f"checkpoint_basename={self._checkpoint_basename!r}, "
                f"listeners={self.listeners!r})")

    @property
    def checkpoint_dir(self) -> str:
        return self._checkpoint_dir

    @property
    def timer(self) -> SecondOrStepTimer:
        return self._timer

    def begin(self) -> None:
        self.listeners = check_listeners_type(self.listeners)  # may have been extended since
        self._timer.reset()
        self._failed = False
        for listener in self.listeners:
            listener.begin()

    def after_create_session(self, session: Session, coord: Any = None) -> None:
        global_step = session.global_step
        # The state at the starting step; a stop asked for by a listener here is ignored, as in TF.
        self._save(session, global_step)
        self._timer.update_last_triggered_step(global_step)

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        session = _session_of(run_context)
        global_step = session.global_step
        if self._timer.should_trigger_for_step(global_step):
            self._timer.update_last_triggered_step(global_step)
            if self._save(session, global_step):
                run_context.request_stop()

    def steps_until_due(self, session: Session) -> tuple[int, float | None]:
        # Checked on the global step after a step: the next step produces global_step + 1.
        return self._timer.steps_until_trigger(session.global_step + 1)

    def on_exception(self, exception: BaseException) -> None:
        self._failed = True

    def end(self, session: Session) -> None:
        if self._failed:  # never save the state of a failed step (e.g. NaN weights)
            return
        last_step = session.global_step
        if last_step != self._timer.last_triggered_step():
            self._save(session, last_step)
        for listener in self.listeners:
            listener.end(session, last_step)

    def _save(self, session: Session, step: int) -> bool:
        """Saves at ``step``; returns whether a listener asked to stop training."""
        for listener in self.listeners:
            listener.before_save(session, step)
        _LOG.info("Saving checkpoints for %d into %s.", step, self._save_path)
        saver = self._saver if self._saver is not None else getattr(self._scaffold, "saver", None)
        if saver is not None:
            saver.save(session, self._save_path, global_step=step)
        elif not self.listeners and hasattr(session, "save_checkpoint_async"):
            # Nobody reads this checkpoint before the loop ends: let training go on while it is
            # written (the session waits for pending writes before it returns).
            session.save_checkpoint_async(self._checkpoint_dir, self._checkpoint_basename)
        else:
            session.save_checkpoint(self._checkpoint_dir, self._checkpoint_basename)
        should_stop = False
        for listener in self.listeners:
            if listener.after_save(session, step):
                _LOG.info("A CheckpointSaverListener requested that training be stopped. "
                          "listener: %r", listener)
                should_stop = True
        return should_stop
