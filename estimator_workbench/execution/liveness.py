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
from pathlib import Path

from estimator_workbench.execution.processes import _kill_group, _kill_tree, descendants, pid_alive
from estimator_workbench.store.records import RunRecord
from estimator_workbench.store.registry import process_start_time

__all__ = ['STARTUP_GRACE_S', 'end_run_processes', 'lost_verdict', 'runner_alive', 'runner_process',
           'wait_gone']


STARTUP_GRACE_S = 30.0  # a child of this launcher that has not beaten yet is starting up


def runner_alive(record: RunRecord, proc: subprocess.Popen[bytes] | None) -> bool:
    """Whether the run's process lives: our child (``proc``) by ``poll``, another launcher's by pid
    and the pid's start time (a pid reused by an unrelated process is not the runner)."""
    if proc is not None:
        return proc.poll() is None
    if not pid_alive(record.pid):
        return False
    if record.pid_started is None or record.pid is None:
        return True
    started = process_start_time(record.pid)
    return started is None or abs(started - record.pid_started) < 0.01


def runner_process(record: RunRecord, proc: subprocess.Popen[bytes] | None, folder: Path) -> int | None:
    """The pid of the run's runner process when it still exists and is certainly that runner
    (our child ``proc``; or same start time, and the run ``folder`` in its command line or as its
    working folder); never this process, its ancestors or its process group. None otherwise."""
    pid = proc.pid if proc is not None else record.pid
    if not pid or pid <= 1 or not runner_alive(record, proc):
        return None
    import psutil

    try:
        me = psutil.Process()
        if pid == me.pid or pid in {p.pid for p in me.parents()} or os.getpgid(pid) == os.getpgrp():
            return None
        if proc is not None:
            return pid
        candidate = psutil.Process(pid)
        with contextlib.suppress(psutil.Error):
            if any(str(folder) in arg for arg in candidate.cmdline()):
                return pid
        with contextlib.suppress(psutil.Error):
            if os.path.realpath(candidate.cwd()) == os.path.realpath(folder):
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
    _kill_group(pid, signal.SIGKILL)
    _kill_tree(tree, pid)
    wait_gone(pid, proc, wait)
    return True


def lost_verdict(record: RunRecord, now: float, *, own: bool, gone: bool,
                 heartbeat_timeout: float) -> tuple[str, str] | None:
    """``(status, error)`` for a running run whose process is ``gone``, whose heartbeat is older
    than ``heartbeat_timeout`` or which stalled with ``stall_action 'fail'``; None while it is fine.

    ``own``: the run is this launcher's child (one that has not beaten yet gets ``STARTUP_GRACE_S``).
    """
    # The heartbeat thread beats from the start (imports included), so a silent child is
    # stopped (kill -STOP) or wedged, not busy with a long first step. A child that has not
    # beaten yet (heartbeat_at still the launch time) may be starting on a busy machine.
    timeout = heartbeat_timeout
    if own and record.heartbeat_at is not None and record.heartbeat_at == record.started_at:
        timeout = max(timeout, STARTUP_GRACE_S)
    stale = record.heartbeat_at is not None and now - record.heartbeat_at > timeout
    stalled = record.stalled_for(now) if record.stall_action == "fail" else None
    if gone or stale:
        reason = ("runner process is gone" if gone else
                  f"no heartbeat for {now - record.heartbeat_at:.0f}s")
        return "lost", f"lost: {reason}"
    if stalled is None:
        return None
    return "failed", (f"no training step for {stalled:.0f} s (stall_timeout_s = "
                      f"{record.stall_timeout_s:g}, stall_action 'fail'): the run was stopped. "
                      "Look for an endless loop or a blocked read in the model_fn or input_fn "
                      "(worker.log), or raise stall_timeout_s for steps that are this slow.")
