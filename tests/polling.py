"""``wait_for``: polls a condition until it holds, for tests that wait on other processes."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

_T = TypeVar("_T")


def wait_for(predicate: Callable[[], _T], timeout: float = 60.0, interval: float = 0.05) -> _T:
    """The first truthy value of ``predicate()``; AssertionError after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout}s")
