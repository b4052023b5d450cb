"""Step-or-seconds triggers shared by the hooks (TF's ``SecondOrStepTimer``).

A frequency is written once here, as a timer object, instead of being re-implemented in each hook:
a hook asks ``should_trigger_for_step(step)`` and, when it acts, records the step with
``update_last_triggered_step(step)``, which returns the seconds and steps since the previous trigger.
"""

from __future__ import annotations

import math
import sys
import time
from numbers import Real

__all__ = ["NEVER", "NeverTriggerTimer", "SecondOrStepTimer"]

#: ``steps_until_trigger``'s step count for a timer that no number of steps makes trigger.
NEVER = sys.maxsize


class SecondOrStepTimer:
    """Triggers at most once every ``every_secs`` seconds or once every ``every_steps`` steps.

    Exactly one of the two must be given. The first call of ``should_trigger_for_step`` always
    triggers; a step equal to the last triggered step never does.

    Args:
        every_secs: minimum seconds between triggers.
        every_steps: minimum steps between triggers.

    Example:
        >>> timer = SecondOrStepTimer(every_steps=10)
        >>> timer.should_trigger_for_step(0)
        True
        >>> timer.update_last_triggered_step(0)
        (None, None)
        >>> timer.should_trigger_for_step(5), timer.should_trigger_for_step(10)
        (False, True)
    """

    def __init__(self, every_secs: float | None = None, every_steps: int | None = None) -> None:
        if every_secs is None and every_steps is None:
            raise ValueError(
                "Either every_secs or every_steps should be provided, given every_secs=None and "
                "every_steps=None. Pass one of them, e.g. SecondOrStepTimer(every_steps=100)."
            )
        if every_secs is not None and every_steps is not None:
            raise ValueError(
                f"Can not provide both every_secs and every_steps, given every_secs={every_secs!r} "
                f"and every_steps={every_steps!r}. Pass only one of them."
            )
        if every_secs is not None and (not isinstance(every_secs, Real) or every_secs < 0):
            raise ValueError(f"every_secs must be a number >= 0, given {every_secs!r}.")
        if every_steps is not None and (
            isinstance(every_steps, bool) or not isinstance(every_steps, Real) or every_steps < 0
        ):
            raise ValueError(f"every_steps must be an integer >= 0, given {every_steps!r}.")
        self._every_secs = every_secs
        self._every_steps = every_steps
        self.reset()

    def __repr__(self) -> str:
        return (f"SecondOrStepTimer(every_secs={self._every_secs!r}, "
                f"every_steps={self._every_steps!r})")

    @property
    def every_secs(self) -> float | None:
        return self._every_secs

    @property
    def every_steps(self) -> int | None:
        return self._every_steps

    def reset(self) -> None:
        """Forgets the last trigger, so the next ``should_trigger_for_step`` is ``True``."""
        self._last_triggered_step: int | None = None
        self._last_triggered_time: float | None = None

    def should_trigger_for_step(self, step: int) -> bool:
        """Whether the timer should trigger at ``step`` (never twice for the same step)."""
        if self._last_triggered_step is None:
            return True
        if self._last_triggered_step == step:
            return False
        if self._every_secs is not None and time.time() >= self._last_triggered_time + self._every_secs:
            return True
        return self._every_steps is not None and step >= self._last_triggered_step + self._every_steps

    def steps_until_trigger(self, step: int) -> tuple[int, float | None]:
        """When ``should_trigger_for_step`` can next be ``True``, asked with ``step, step + 1, ...``.

        Returns ``(steps, due_time)``: the calls with ``step`` .. ``step + steps - 1`` return
        ``False`` unless ``time.time()`` has reached ``due_time`` (``None``: time never triggers;
        ``steps`` is ``NEVER`` when only time can). The training loop uses it to call a hook only
        on the steps it acts on.

        Example:
            >>> timer = SecondOrStepTimer(every_steps=10)
            >>> timer.update_last_triggered_step(0)
            (None, None)
            >>> timer.steps_until_trigger(1)
            (9, None)
        """
        last_step, last_time = self._last_triggered_step, self._last_triggered_time
        if last_step is None or last_time is None:
            return 0, None
        if self._every_secs is not None:
            return NEVER, last_time + self._every_secs
        # The first step that is >= last + every_steps and is not the last one itself.
        first = max(math.ceil(last_step + (self._every_steps or 0)), last_step + 1)
        return max(0, first - step), None

    def update_last_triggered_step(self, step: int) -> tuple[float | None, int | None]:
        """Records a trigger at ``step``; returns ``(elapsed_secs, elapsed_steps)``, ``None`` first."""
        now = time.time()
        last_time, last_step = self._last_triggered_time, self._last_triggered_step
        if last_time is None or last_step is None:
            elapsed: tuple[float | None, int | None] = (None, None)
        else:
            elapsed = (now - last_time, step - last_step)
        self._last_triggered_time = now
        self._last_triggered_step = step
        return elapsed

    def last_triggered_step(self) -> int | None:
        """The step of the last trigger, or ``None`` before the first one."""
        return self._last_triggered_step


class NeverTriggerTimer:
    """A timer that never triggers (``LoggingTensorHook(at_end=True)`` without a frequency).

    Example:
        >>> NeverTriggerTimer().should_trigger_for_step(0)
        False
    """

    def __repr__(self) -> str:
        return "NeverTriggerTimer()"

    def reset(self) -> None:
        """Nothing to forget."""

    def should_trigger_for_step(self, step: int) -> bool:
        """Always ``False``."""
        return False

    def steps_until_trigger(self, step: int) -> tuple[int, None]:
        """``(NEVER, None)``: no step and no time makes it trigger."""
        return NEVER, None

    def update_last_triggered_step(self, step: int) -> tuple[None, None]:
        """Records nothing; returns ``(None, None)``."""
        return (None, None)

    def last_triggered_step(self) -> None:
        """Always ``None``."""
        return None
