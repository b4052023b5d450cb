"""Lists and kills a process's children for the hygiene fixture (``conftest._no_leftovers``),
through psutil (Linux and macOS alike)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess

import psutil

__all__ = ["child_pids", "kill", "stop_group"]


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


def stop_group(proc: subprocess.Popen, grace: float = 10.0) -> None:
    """Stops a server started in a session of its own: SIGTERM to its process group, then, after
    ``grace`` seconds or once the leader has exited, SIGKILL to whatever is left of the group."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # workers that outlived their leader
    proc.wait()
