"""A progress bar for ``train``, ``evaluate`` and ``predict`` (tqdm's ``auto`` flavour).

``tqdm.auto`` renders as a widget in Jupyter (with ``ipywidgets``) and as text in a terminal, the
way Keras' ``fit`` and Lightning show progress. The bar shows step / total, steps per second, the
latest loss and the time left.

When a bar is shown (``progress_bar_enabled``): ``True`` or ``False`` as asked; ``None`` (auto)
shows one in an interactive session, a Jupyter kernel or a terminal (stderr is a TTY), and none
in CI (``$CI`` set), in scripts whose stderr is a file or a pipe, and so in the workbench's runner
processes (their output goes to ``worker.log``).

The bar is refreshed at most every ``interval`` seconds: in training the loop calls the hook only
then (a scheduled hook, see ``hooks/base.py``), so a bar costs one clock read per step.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from estimator_engine.hooks.base import (
    ScheduledHook,
    Session,
    SessionRunArgs,
    SessionRunContext,
    SessionRunValues,
)
from estimator_engine.hooks.timer import NEVER
from estimator_engine.mode_keys import ModeKeys

__all__ = ["ProgressBarHook", "in_jupyter_kernel", "progress_bar_enabled"]

_DESCRIPTIONS = {ModeKeys.TRAIN: "train", ModeKeys.EVAL: "evaluate", ModeKeys.PREDICT: "predict"}


def in_jupyter_kernel() -> bool:
    """Whether this process is a Jupyter (IPython) kernel: JupyterLab, VS Code notebooks, Colab."""
    if "ipykernel" not in sys.modules:  # never imports IPython itself
        return False
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def progress_bar_enabled(setting: bool | None) -> bool:
    """Whether to show a progress bar for ``setting`` (``RunConfig.progress_bar``, ``train(progress_bar=)``).

    ``True`` / ``False`` are obeyed; ``None`` means auto: on in a Jupyter kernel or when stderr
    is a terminal, off in CI (``$CI`` set to anything but ``''``, ``'0'`` or ``'false'``).

    Example:
        >>> progress_bar_enabled(False), progress_bar_enabled(True)
        (False, True)
    """
    if setting is not None:
        return bool(setting)
    if os.environ.get("CI", "").strip().lower() not in ("", "0", "false"):
        return False
    if in_jupyter_kernel():
        return True
    stream = sys.stderr
    try:
        return stream is not None and stream.isatty()
    except (AttributeError, ValueError):  # a replaced or closed stderr
        return False


class ProgressBarHook(ScheduledHook):
    """Shows a tqdm progress bar with steps/s, the latest loss and an ETA.

    In ``train`` the bar counts global steps (it starts at the restored step); in ``evaluate`` and
    ``predict`` it counts batches.

    Args:
        total: where the bar ends: the last global step (TRAIN) or the number of batches (EVAL,
            PREDICT); ``None``: unknown (no ETA) unless ``num_steps`` is given.
        num_steps: TRAIN: the bar ends ``num_steps`` after the restored global step
            (``train(steps=N)``).
        interval: seconds between refreshes of the bar (and loss fetches).
        leave: keep the finished bar on screen.
        desc: the bar's label (default: ``'train'``, ``'evaluate'`` or ``'predict'``).
        file: where a text bar is written (default ``sys.stderr``).

    Example:
        >>> hook = ProgressBarHook(total=1000)
        >>> # estimator.train(input_fn, max_steps=1000, hooks=[hook]), or simply
        >>> # estimator.train(input_fn, max_steps=1000, progress_bar=True)
    """

    def __init__(self, total: int | None = None, *, num_steps: int | None = None, interval: float = 0.1,
                 leave: bool = True, desc: str | None = None, file: Any = None) -> None:
        for name, value in (("total", total), ("num_steps", num_steps)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise ValueError(f"{name} must be an integer >= 0 or None, given: {value!r}.")
        if isinstance(interval, bool) or not isinstance(interval, (int, float)) or interval < 0:
            raise ValueError(f"interval must be a number of seconds >= 0, given: {interval!r}.")
        self._total = total
        self._num_steps = num_steps
        self._interval = float(interval)
        self._leave = leave
        self._desc = desc
        self._file = file
        self._bar: Any = None
        self._mode: ModeKeys | None = None
        self._batches = 0
        self._next_refresh = 0.0
        self._fetch_now = False
        self._failed = False

    def __repr__(self) -> str:
        return (f"ProgressBarHook(total={self._total!r}, num_steps={self._num_steps!r}, "
                f"interval={self._interval!r}, leave={self._leave!r})")

    def after_create_session(self, session: Session, coord: Any = None) -> None:
        # Imported only when a bar is shown: `import estimator_engine` stays light.
        from tqdm.auto import tqdm

        self._mode = ModeKeys(session.mode)
        self._batches = 0
        self._failed = False
        self._next_refresh = 0.0  # the first step refreshes: the bar shows a loss at once
        training = self._mode == ModeKeys.TRAIN
        start = session.global_step if training else 0
        total = self._total
        if training and total is None and self._num_steps is not None:
            total = start + self._num_steps
        if not training and total is None:
            batches = getattr(session, "batches", None)
            total = _length(batches)
        self._bar = tqdm(total=total, initial=start, desc=self._desc or _DESCRIPTIONS[self._mode],
                         unit="step" if training else "batch", leave=self._leave, file=self._file,
                         dynamic_ncols=True, mininterval=self._interval)

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs | None:
        # In TRAIN the loop calls this only when steps_until_due says so; elsewhere on every batch.
        self._fetch_now = time.time() >= self._next_refresh
        if self._fetch_now and self._mode != ModeKeys.PREDICT:
            return SessionRunArgs({"loss": "loss"})
        return None

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        self._batches += 1
        if not self._fetch_now or self._bar is None:
            return
        results = run_values.results
        if isinstance(results, dict) and results.get("loss") is not None:
            self._bar.set_postfix(loss=f"{float(results['loss']):.4g}", refresh=False)
        self._advance(run_context.session)
        self._next_refresh = time.time() + self._interval

    def steps_until_due(self, session: Session) -> tuple[int, float | None]:
        # TRAIN only (the loop schedules its standard hooks there): due again after `interval`.
        if self._next_refresh == 0.0:
            return 0, None
        return NEVER, self._next_refresh

    def skip_steps(self, steps: int) -> None:
        self._batches += steps

    def _advance(self, session: Any) -> None:
        position = session.global_step if self._mode == ModeKeys.TRAIN and session is not None else self._batches
        if position > self._bar.n:
            self._bar.update(position - self._bar.n)

    def on_exception(self, exception: BaseException) -> None:
        self._failed = True

    def end(self, session: Session) -> None:
        if self._bar is None:
            return
        try:
            if self._mode == ModeKeys.TRAIN and not self._failed and self._batches:
                # The bar ends on the final step's loss, the one train() logs (between refreshes
                # the shown loss may be up to `interval` seconds old).
                self._bar.set_postfix(loss=f"{float(session.run('loss')):.4g}", refresh=False)
            self._advance(session)  # close() draws the bar a last time
        finally:
            self._bar.close()
            self._bar = None


def _length(batches: Any) -> int | None:
    """The number of batches of an input that knows it (a sized iterable), else ``None``."""
    try:
        return len(batches)
    except TypeError:
        return None
