"""Processes of runs: liveness, the process tree of a run (torchrun ranks, DataLoader workers)
and killing it, the GPUs of this machine, and the environment without the UI's secrets."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    pass

__all__ = ['SECRET_ENV_VARS', 'descendants', 'detect_gpus', 'is_secret_env_var', 'pid_alive', 'without_secrets']


# Secrets: runner processes execute user code, which must not read them. The UI password (and its
# file), and any variable whose name says secret -- *PASSWORD*, *SECRET*, *TOKEN*, *CREDENTIAL*,
# *_KEY / *_KEY_ID (AWS_SECRET_ACCESS_KEY, OPENAI_API_KEY, AZURE_STORAGE_KEY...) -- whatever its prefix.
SECRET_ENV_VARS = ("WORKBENCH_PASSWORD", "WORKBENCH_PASSWORD_FILE", "GOOGLE_APPLICATION_CREDENTIALS",
                   "AZURE_CLIENT_CERTIFICATE_PATH", "AZURE_STORAGE_CONNECTION_STRING")


_SECRET_WORDS = ("PASSWORD", "PASSWD", "SECRET", "TOKEN", "CREDENTIAL", "PRIVATE_KEY", "API_KEY",
                 "ACCESS_KEY")
_SECRET_ENDINGS = ("_KEY", "_KEY_ID", "_PASS", "_PWD")


def is_secret_env_var(name: str) -> bool:
    """Whether a variable of the UI's environment is kept from runner processes (see
    ``SECRET_ENV_VARS``): ``WORKBENCH_PASSWORD``, ``AWS_SECRET_ACCESS_KEY``, ``HF_TOKEN`` yes;
    ``WORKBENCH_HOME``, ``PATH``, ``KEYBOARD`` no."""
    upper = name.upper()
    if upper in SECRET_ENV_VARS:
        return True
    return any(word in upper for word in _SECRET_WORDS) or upper.endswith(_SECRET_ENDINGS)


def without_secrets(env: Mapping[str, str]) -> dict[str, str]:
    """A copy of ``env`` without the UI's secrets (``is_secret_env_var``), for child processes.

    Example:
        >>> without_secrets({"WORKBENCH_PASSWORD": "s3cret", "WORKBENCH_HOME": "/ws"})
        {'WORKBENCH_HOME': '/ws'}
    """
    return {k: v for k, v in env.items() if not is_secret_env_var(k)}


def detect_gpus() -> list[str]:
    """GPU ids this machine offers, honouring an existing ``CUDA_VISIBLE_DEVICES``.

    Uses ``torch.cuda.device_count()`` only when torch is already imported (importing torch in the
    UI process just to count GPUs costs a second); otherwise asks ``nvidia-smi -L``.
    """
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return [d.strip() for d in visible.split(",") if d.strip() and d.strip() != "-1"]
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            return [str(i) for i in range(torch.cuda.device_count())]
        except Exception:
            return []
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=10,
                             check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [str(i) for i, line in enumerate(out.splitlines()) if line.startswith("GPU ")]


def pid_alive(pid: int | None) -> bool:
    """Whether a process with this pid exists and is not a zombie."""
    if not pid or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, IndexError):
        return sys.platform != "linux"


def _stat(pid: int) -> tuple[str, int, int, int] | None:
    """``(state, ppid, pgid, start time)`` of a process from ``/proc/<pid>/stat`` (None if gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()  # the name in (...) may hold spaces
        return fields[0], int(fields[1]), int(fields[2]), int(fields[19])
    except (OSError, IndexError, ValueError):
        return None


def descendants(pid: int) -> dict[int, int]:
    """Every live descendant of ``pid`` (children, grandchildren, ...) -> its start time.

    Walks the parent pids in ``/proc/*/stat`` (Linux; ``{}`` elsewhere), so it also finds
    descendants in other process groups and sessions, such as torchrun's ranks. The start time
    lets ``_kill_tree`` tell a snapshotted process from a later one that reuses its pid.

    Example:
        >>> child = subprocess.Popen(["sleep", "5"])                         # doctest: +SKIP
        >>> child.pid in descendants(os.getpid())                            # doctest: +SKIP
        True
    """
    try:
        names = os.listdir("/proc")
    except OSError:
        return {}
    children: dict[int, list[tuple[int, int]]] = {}
    for name in names:
        if not name.isdigit():
            continue
        stat = _stat(int(name))
        if stat is not None and stat[0] != "Z":
            children.setdefault(stat[1], []).append((int(name), stat[3]))
    found: dict[int, int] = {}
    todo = [pid]
    while todo:
        for child, started in children.get(todo.pop(), ()):
            if child not in found and child != pid:
                found[child] = started
                todo.append(child)
    return found


def _still_there(pid: int, started: int) -> tuple[str, int, int, int] | None:
    stat = _stat(pid)
    return stat if stat is not None and stat[3] == started and stat[0] != "Z" else None


def _kill_tree(tree: dict[int, int], root: int) -> None:
    """SIGKILLs every process of a ``descendants`` snapshot that is still the same process, and
    the process groups they lead (a rank's own DataLoader workers), never this process's group."""
    own_group = os.getpgrp()
    leaders = set(tree) | {root}
    for pid, started in tree.items():
        stat = _still_there(pid, started)
        if stat is None:
            continue
        pgid = stat[2]
        if pgid in leaders and pgid != own_group:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def _wait_tree_gone(tree: dict[int, int], timeout: float) -> bool:
    """Waits until no process of the snapshot is alive; False when some still are at ``timeout``."""
    deadline = time.monotonic() + timeout
    while any(_still_there(pid, started) for pid, started in tree.items()):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def _kill_group(pid: int, sig: int) -> None:
    """Signals the process group led by ``pid`` (the runner was started in its own session)."""
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)
