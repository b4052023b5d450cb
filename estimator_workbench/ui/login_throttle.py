"""One limit on password guesses for the whole UI server, shared by every browser session.

A wrong password used to cost its own session a one-second sleep, so 16 sessions in parallel
guessed 16 times faster (18.5 guesses/s measured). The throttle here is one object per server
process (module level, behind a lock): at most one attempt per ``min_interval`` seconds across all
sessions, and after ``free_failures`` wrong passwords in a row the wait doubles with each further
one, up to ``max_wait``; a right password resets it. An attempt made too early is refused without
checking the password (so the refusal says nothing about it), whatever the session.

The price: someone guessing can make the rightful users wait too (at most ``max_wait`` per
attempt). Behind a real deployment, put the UI behind a proxy with its own login.

Example::

    >>> throttle = LoginThrottle(clock=lambda: 100.0)
    >>> throttle.acquire()    # free: the attempt may check the password
    0.0
    >>> throttle.failed()     # it was wrong
    >>> throttle.acquire()    # another session, at once: wait 1 s
    1.0
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

__all__ = ["PASSWORD_THROTTLE", "LoginThrottle"]


class LoginThrottle:
    """Server-wide limit on login attempts with exponential back-off after repeated failures.

    Args:
        min_interval: seconds between two attempts, whichever sessions make them.
        free_failures: wrong passwords in a row before the wait starts doubling.
        max_wait: the longest wait between attempts, in seconds.
        clock: a monotonic clock (tests pass a fake one).

    Example::

        >>> LoginThrottle(min_interval=1.0, free_failures=5, max_wait=300.0)  # doctest: +ELLIPSIS
        <...LoginThrottle object at ...>
    """

    def __init__(self, min_interval: float = 1.0, free_failures: int = 5, max_wait: float = 300.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.min_interval = min_interval
        self.free_failures = free_failures
        self.max_wait = max_wait
        self.clock = clock
        self._lock = threading.Lock()
        self._failures = 0
        self._next_allowed = float("-inf")

    def acquire(self) -> float:
        """0.0 when an attempt may check a password now (the slot is taken: the next attempt
        waits ``min_interval``); otherwise the seconds left before one may."""
        with self._lock:
            now = self.clock()
            if now < self._next_allowed:
                return self._next_allowed - now
            self._next_allowed = now + self.min_interval
            return 0.0

    def failed(self) -> None:
        """Records a wrong password: past ``free_failures`` in a row, the wait doubles."""
        with self._lock:
            self._failures += 1
            extra = self._failures - self.free_failures
            wait = self.min_interval if extra <= 0 else min(self.max_wait, self.min_interval * 2.0 ** extra)
            self._next_allowed = max(self._next_allowed, self.clock() + wait)

    def succeeded(self) -> None:
        """Records a right password: the failures are forgotten."""
        with self._lock:
            self._failures = 0

    def reset(self) -> None:
        """Forgets everything (a fresh server)."""
        with self._lock:
            self._failures = 0
            self._next_allowed = float("-inf")


# The one throttle of this server process: every session's password form goes through it.
PASSWORD_THROTTLE = LoginThrottle()
