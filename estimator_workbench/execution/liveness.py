"""Lost-run detection for ``LocalLauncher``: whether a run's runner process still lives, which
process certainly is that runner, how what is left of it is ended, and the verdict on a running
run whose process is gone, silent or stalled (``lost`` or ``failed``).

Pure functions of a run's record, the ``Popen`` of the runner when this launcher started it, and
the run folder; the launcher applies the verdicts to the registry (``LocalLauncher.reap_lost``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from estimator_workbench.execution.processes import (
    RUN_MARKER_ENV,
    RunProcess,
    descendants,
    kill_group,
    kill_tree,
    pid_alive,
)
from estimator_workbench.store.guards import process_start_time, same_process, uptime
from estimator_workbench.store.records import RunRecord

__all__ = ['STARTUP_GRACE_S', 'Liveness', 'end_run_processes', 'heartbeat_age', 'lost_verdict', 'runner_alive',
           'runner_liveness', 'runner_process', 'wait_gone']


STARTUP_GRACE_S = 30.0  # a child of this launcher that has not beaten yet is starting up


@dataclass(frozen=True)
class Liveness:
    """Whether a run's runner process lives, and which check said so, on what it saw (the text a
    ``lost`` verdict records).

    Example:
        >>> Liveness(False, "pid 4242 no longer exists").alive
        False
    """

    alive: bool
    why: str


def _names_run_folder(pid: int, folder: Path) -> bool:
    """Whether process ``pid`` is certainly a runner of the run in ``folder``: the folder on its
    command line or as its working folder, or the marker of the run's attempt in its environment."""
    import psutil

    try:
        candidate = psutil.Process(pid)
    except psutil.Error:
        return False
    with contextlib.suppress(psutil.Error):
        if any(str(folder) in arg for arg in candidate.cmdline()):
            return True
    with contextlib.suppress(psutil.Error, OSError):
        if os.path.realpath(candidate.cwd()) == os.path.realpath(folder):
            return True
    handle = RunProcess.load(folder)
    if handle is not None and handle.pid == pid and handle.marker:
        with contextlib.suppress(psutil.Error):
            return candidate.environ().get(RUN_MARKER_ENV) == handle.marker
    return False


def runner_liveness(record: RunRecord, proc: subprocess.Popen[bytes] | None, folder: Path) -> Liveness:
    """Whether the run's process lives: our child (``proc``) by ``poll``; another launcher's by
    its pid and the pid's start (``store.guards.same_process``: ticks since boot, which a step of
    the wall clock does not move). "Gone" never rests on a time comparison alone: a start that
    cannot be compared for certain (an epoch start stored before issue 24) is confirmed by the
    run ``folder`` in the process's command line or working folder, or the attempt's marker."""
    if proc is not None:
        code = proc.poll()
        if code is None:
            return Liveness(True, f"this launcher's child pid {proc.pid} runs")
        return Liveness(False, f"this launcher's child pid {proc.pid} exited with code {code}")
    pid = record.pid
    if pid is None:
        return Liveness(False, "no runner pid is recorded")
    if not pid_alive(pid):
        return Liveness(False, f"pid {pid} no longer exists")
    same = same_process(pid, record.pid_started)
    if same:
        return Liveness(True, f"pid {pid} runs with the recorded start")
    if same is False:
        return Liveness(False, f"pid {pid} is another process: it started {process_start_time(pid)} s "
                               f"after boot, the runner at {record.pid_started} s")
    if record.pid_started is None:
        return Liveness(True, f"pid {pid} runs (no start recorded to compare)")
    if _names_run_folder(pid, folder):
        return Liveness(True, f"pid {pid} runs: its start differs from the recorded {record.pid_started} "
                              "(a step of the wall clock moves it) but it is the run's runner")
    return Liveness(False, f"pid {pid} is another process: its start differs from the recorded "
                           f"{record.pid_started} and it does not name the run folder {folder}")


def runner_alive(record: RunRecord, proc: subprocess.Popen[bytes] | None, folder: Path) -> bool:
    """``runner_liveness(...).alive``."""
    return runner_liveness(record, proc, folder).alive


def runner_process(record: RunRecord, proc: subprocess.Popen[bytes] | None, folder: Path) -> int | None:
    """The pid of the run's runner process when it still exists and is certainly that runner
    (our child ``proc``; or same start time, and the run ``folder`` in its command line or as its
    working folder); never this process, its ancestors or its process group. None otherwise."""
    pid = proc.pid if proc is not None else record.pid
    if not pid or pid <= 1 or not runner_alive(record, proc, folder):
        return None
    import psutil

    try:
        me = psutil.Process()
        if pid == me.pid or pid in {p.pid for p in me.parents()} or os.getpgid(pid) == os.getpgrp():
            return None
        if proc is not None or _names_run_folder(pid, folder):
            return pid
    except (OSError, psutil.Error):
        return None
    return None


def wait_gone(pid: int, proc: subprocess.Popen[bytes] | None, timeout: float) -> bool:
    """Waits up to ``timeout`` seconds for ``pid`` to exit (reaping it when it is our child ``proc``)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None:
            if proc.poll() is not None:
                return True
        elif not pid_alive(pid):
            return True
        time.sleep(0.05)
    return False


def end_run_processes(record: RunRecord, proc: subprocess.Popen[bytes] | None, folder: Path,
                      wait: float = 5.0) -> bool:
    """SIGKILLs what is left of the run's process group and descendants (a stopped or hung
    runner), before the run is marked lost or failed; whether a process was there."""
    pid = runner_process(record, proc, folder)
    if pid is None:
        return False
    tree = descendants(pid)
    kill_group(pid, signal.SIGKILL)
    kill_tree(tree, pid)
    wait_gone(pid, proc, wait)
    return True


def heartbeat_age(record: RunRecord, now: float) -> float | None:
    """Seconds since the run's last heartbeat: on the clock since boot when the beat recorded it
    (``store.guards.uptime``; a step of the wall clock does not move it), else by the wall clock
    (runs of older workspaces, platforms without that clock, a machine rebooted since)."""
    current = uptime()
    if record.heartbeat_uptime is not None and current is not None and current >= record.heartbeat_uptime:
        return current - record.heartbeat_uptime
    return None if record.heartbeat_at is None else now - record.heartbeat_at


def lost_verdict(record: RunRecord, now: float, *, own: bool, liveness: Liveness,
                 heartbeat_timeout: float) -> tuple[str, str] | None:
    """``(status, error)`` for a running run whose process is gone (``liveness``), whose
    heartbeat is older than ``heartbeat_timeout`` (``heartbeat_age``) or which stalled with
    ``stall_action 'fail'``; None while it is fine. The error says which check decided and what
    it saw.

    ``own``: the run is this launcher's child (one that has not beaten yet gets ``STARTUP_GRACE_S``).
    """
    # The heartbeat thread beats from the start (imports included), so a silent child is
    # stopped (kill -STOP) or wedged, not busy with a long first step. A child that has not
    # beaten yet (heartbeat_at still the launch time) may be starting on a busy machine.
    timeout = heartbeat_timeout
    if own and record.heartbeat_at is not None and record.heartbeat_at == record.started_at:
        timeout = max(timeout, STARTUP_GRACE_S)
    age = heartbeat_age(record, now)
    stale = age is not None and age > timeout
    stalled = record.stalled_for(now) if record.stall_action == "fail" else None
    if not liveness.alive:
        return "lost", f"lost: runner process is gone ({liveness.why})"
    if stale:
        return "lost", (f"lost: no heartbeat for {age:.0f}s (heartbeat check: timeout {timeout:g} s; "
                        f"{liveness.why})")
    if stalled is None:
        return None
    return "failed", (f"no training step for {stalled:.0f} s (stall_timeout_s = "
                      f"{record.stall_timeout_s:g}, stall_action 'fail'): the run was stopped. "
                      "Look for an endless loop or a blocked read in the model_fn or input_fn "
                      "(worker.log), or raise stall_timeout_s for steps that are this slow.")
