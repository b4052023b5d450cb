"""Guards of the run registry (issue 14): one writer per run and a full disk.

- Fencing: ``check_record_owner`` and ``OwnerCheck`` tell whether an attempt still owns a run
  (its number is ``RunRecord.attempt``, raised by every start; see ``estimator_workbench.store.registry``).
- A full disk: ``is_disk_full`` / ``disk_full_error`` turn SQLite's and the OS's words for it into
  ``RegistryError("disk full: ... Free space on <path>")``; ``read_only_retry`` reads a registry
  whose normal connections fail for want of space (they write the WAL's -shm index).
- ``process_start_time`` / ``same_process``: with the pid, they tell a runner from a later process
  reusing its pid, whatever the wall clock does (issue 24 item 2); ``uptime`` is the clock of
  heartbeats that a wall-clock step does not move either.
"""

from __future__ import annotations

import errno
import os
import shutil
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from estimator_workbench.store import paths
from estimator_workbench.store.records import (
    OWNED_STATUSES,
    OwnershipLostError,
    RegistryError,
    RunRecord,
)

if TYPE_CHECKING:
    from estimator_workbench.store.registry import RunRegistry

__all__ = ["BOOT_RELATIVE_LIMIT", "OwnerCheck", "check_record_owner", "disk_full_error", "is_disk_full",
           "process_start_time", "read_only_retry", "same_process", "uptime"]

_T = TypeVar("_T")


# What SQLite says when it cannot allocate space: "database or disk is full" for the database
# and its WAL, "disk I/O error" when the -shm index cannot be grown (every connection needs it).
_DISK_FULL_ERRNOS = (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC))
_LOW_SPACE_BYTES = 16 * 2**20


def _free_bytes(path: Path) -> int | None:
    for candidate in (path, *path.parents):
        try:
            return shutil.disk_usage(candidate).free
        except OSError:
            continue
    return None


def is_disk_full(exc: BaseException | None, where: Path | None = None) -> bool:
    """Whether ``exc``, or an exception it was raised from or during, means the disk is full: the
    OS's ENOSPC/EDQUOT, SQLite's "database or disk is full", a ``RegistryError`` saying
    "disk full", or SQLite's "disk I/O error" while the disk holding ``where`` has less than
    16 MB free (the same words also mean other I/O faults). The one rule of the workbench: the
    CLI, the registry and the runner all ask it (issue 24 item 13).

    Example:
        >>> is_disk_full(OSError(errno.ENOSPC, "No space left on device"))
        True
    """
    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, OSError) and exc.errno in _DISK_FULL_ERRNOS:
            return True
        text = str(exc).lower()
        if isinstance(exc, RegistryError) and text.startswith("disk full"):
            return True
        if "disk is full" in text or "no space left on device" in text:
            return True
        if "disk i/o error" in text and where is not None:  # also other I/O faults: a nearly full disk only
            free = _free_bytes(Path(where))
            if free is not None and free < _LOW_SPACE_BYTES:
                return True
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return False


def disk_full_error(exc: BaseException, root: Path) -> RegistryError:
    free = _free_bytes(root)
    left = "" if free is None else f" ({free / 2**20:.1f} MB free)"
    return RegistryError(
        f"disk full: the run registry {paths.registry_path(root)} could not be written ({exc}). "
        f"Free space on {root}{left}, then retry; the runs, checkpoints and metrics already "
        "written are kept.")


def _is_unwritable(exc: sqlite3.OperationalError) -> bool:
    """A connection that failed for want of a writable -shm/-wal (full disk, read-only folder)."""
    text = str(exc).lower()
    return any(s in text for s in ("disk i/o error", "disk is full", "readonly", "read-only",
                                   "unable to open"))


# A process start below this is seconds since boot (clock-independent, ``process_start_time``);
# above it, seconds since the epoch: psutil's ``create_time``, as workspaces before issue 24 stored
# it and as platforms without /proc give it. 1e9 s is 31 years of uptime, and 2001 as a date.
BOOT_RELATIVE_LIMIT = 1e9


def _clock_ticks() -> int:
    try:
        return int(os.sysconf("SC_CLK_TCK"))
    except (ValueError, OSError, AttributeError):
        return 100


def _start_ticks(pid: int) -> int | None:
    """Field 22 of ``/proc/<pid>/stat``: the process's start in clock ticks since boot (the
    command name, field 2, may hold spaces and parentheses: fields are counted after its last ')')."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            text = stat.read()
    except OSError:
        return None
    try:
        return int(text[text.rindex(b")") + 2:].split()[19])
    except (ValueError, IndexError):
        return None


def process_start_time(pid: int | None) -> float | None:
    """The start of process ``pid``, to tell it from a later process that reuses the pid (None
    when there is no such process).

    On Linux: seconds since boot (its start ticks, field 22 of ``/proc/<pid>/stat``), which no
    step of the wall clock moves. psutil's ``create_time`` adds the boot time, which Linux derives
    from the wall clock: a 32 s step of the clock moved it by 32 s and a live runner was taken
    for gone (issue 24 item 2). Without /proc (macOS): psutil's ``create_time``, seconds since the
    epoch (``BOOT_RELATIVE_LIMIT`` tells the two apart).

    Example:
        >>> process_start_time(os.getpid()) == process_start_time(os.getpid())
        True
    """
    if not pid or pid <= 0:
        return None
    ticks = _start_ticks(pid)
    if ticks is not None:
        return ticks / _clock_ticks()
    if os.path.isdir("/proc/self"):
        return None  # /proc is there and has no such process
    try:
        import psutil

        return float(psutil.Process(pid).create_time())
    except Exception:  # gone, or psutil cannot tell
        return None


def same_process(pid: int | None, recorded: float | None) -> bool | None:
    """Whether ``pid`` is still the process whose ``process_start_time`` was ``recorded``.

    True or False when the starts tell for certain (both since boot: equal to the tick, or not;
    no such process: False). None when they cannot: nothing recorded, or an epoch start
    (``BOOT_RELATIVE_LIMIT``) that differs from the process's now, which a step of the wall
    clock also causes; the caller then asks other evidence (the run folder in the command line).

    Example:
        >>> same_process(os.getpid(), process_start_time(os.getpid()))
        True
    """
    if not pid or pid <= 0:
        return False
    if recorded is None:
        return None
    if recorded < BOOT_RELATIVE_LIMIT:
        now = process_start_time(pid)
        if now is None:
            return False
        if now >= BOOT_RELATIVE_LIMIT:
            return None  # recorded where /proc was, read where it is not: cannot compare
        return round(now * _clock_ticks()) == round(recorded * _clock_ticks())
    try:
        import psutil

        created = float(psutil.Process(pid).create_time())
    except Exception:
        return False if process_start_time(pid) is None else None
    return True if abs(created - recorded) < 0.05 else None


def uptime() -> float | None:
    """Seconds since boot (``CLOCK_BOOTTIME``: no step of the wall clock moves it; it counts
    suspended time too), or None where the platform has no such clock."""
    clock = getattr(time, "CLOCK_BOOTTIME", None)
    if clock is None:
        return None
    try:
        return time.clock_gettime(clock)
    except OSError:
        return None


def check_record_owner(record: RunRecord, attempt: int) -> None:
    """Raises ``OwnershipLostError`` unless ``attempt`` owns ``record`` (see the module docstring)."""
    if record.attempt == attempt and record.status in OWNED_STATUSES:
        return
    if record.status == "queued":
        why = f"it was put back in the queue (resumed) after attempt {record.attempt}"
    elif record.attempt != attempt:
        why = (f"it was started again as attempt {record.attempt} (now {record.status!r}, pid "
               f"{record.pid})")
    else:
        why = f"it is {record.status!r} now, recorded by another process"
    raise OwnershipLostError(
        f"Run {record.run_id!r}: attempt {attempt} no longer owns the run: {why}. This runner stops "
        "without writing checkpoints, metrics or status.")


def read_only_retry(read: Callable[[str | None], _T], db_path: Path, exc: sqlite3.OperationalError) -> _T:
    """``read(mode)`` again over a read-only connection when ``exc`` says the file could not be
    opened for writing (a full disk, a read-only folder); re-raises ``exc`` otherwise.
    ``'immutable'`` needs no -shm at all and is exact when the WAL holds no frames yet."""
    if not _is_unwritable(exc):
        raise exc
    wal = Path(f"{db_path}-wal")
    modes = ("ro", "immutable") if wal.exists() and wal.stat().st_size else ("immutable", "ro")
    for mode in modes:
        try:
            return read(mode)
        except sqlite3.OperationalError:
            continue
    raise exc


class OwnerCheck:
    """``check(run_id, attempt)``: the ownership read of a runner, over a connection kept open
    (a fresh connection costs ~5 ms on a loaded machine, this read ~70 us).

    Example:
        >>> OwnerCheck(registry).check("r-20260101-abcdef", attempt=1)  # doctest: +SKIP
    """

    def __init__(self, registry: RunRegistry) -> None:
        self._registry = registry
        self._conn: Any = None  # registry_db.Connection
        self._lock = threading.Lock()

    def check(self, run_id: str, attempt: int) -> None:
        def read() -> Any:
            try:
                if self._conn is None:
                    self._conn = self._registry._connect()
                row = self._conn.execute(
                    "SELECT attempt, status FROM runs WHERE run_id = ?", (run_id,)).fetchone()
                self._conn.end()  # PostgreSQL: no transaction left open between checks
                return row
            except Exception:
                self._close()
                raise

        with self._lock:
            try:
                row = read()
            except Exception:  # a broken connection (a restarted server): afresh, with the
                row = self._registry._retry(read)  # registry's retries (locks, an unreachable server)
        if row is not None and row[0] == attempt and row[1] in OWNED_STATUSES:
            return
        if row is None:
            raise OwnershipLostError(f"Run {run_id!r} no longer exists in this workspace (deleted); "
                                     "this runner stops without writing.")
        check_record_owner(self._registry.get(run_id), attempt)  # the full record, for the message

    def close(self) -> None:
        with self._lock:
            self._close()

    def _close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
