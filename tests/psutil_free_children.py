"""Lists and kills a process's children from /proc, so the hygiene fixture needs no psutil."""

from __future__ import annotations

import contextlib
import os
import signal


def child_pids(pid: int) -> list[int]:
    """Live (non-zombie) direct children of ``pid``."""
    children = []
    with contextlib.suppress(FileNotFoundError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(FileNotFoundError), open(f"/proc/{pid}/task/{task}/children") as f:
                children.extend(int(c) for c in f.read().split())
    alive = []
    for child in children:
        with contextlib.suppress(FileNotFoundError), open(f"/proc/{child}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] != "Z":
                alive.append(child)
    return alive


def kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(os.getpgid(pid), signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
