"""Lists and kills a process's children for the hygiene fixture (``conftest._no_leftovers``),
through psutil (Linux and macOS alike)."""

from __future__ import annotations

import contextlib
import os
import signal

import psutil

__all__ = ["child_pids", "kill"]


def child_pids(pid: int) -> list[int]:
    """Live (non-zombie) direct children of ``pid``."""
    try:
        children = psutil.Process(pid).children()
    except psutil.NoSuchProcess:
        return []
    alive = []
    for child in children:
        with contextlib.suppress(psutil.Error):
            if child.status() != psutil.STATUS_ZOMBIE:
                alive.append(child.pid)
    return alive


def kill(pid: int) -> None:
    """SIGKILLs ``pid`` and the process group it leads (a runner started in its own session)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if os.getpgid(pid) == pid:
            os.killpg(pid, signal.SIGKILL)
    with contextlib.suppress(psutil.Error):
        psutil.Process(pid).kill()
