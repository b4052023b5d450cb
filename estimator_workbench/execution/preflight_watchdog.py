"""The outside watchdog of the runner's in-process pre-flight check (issue 14 item 6).

``preflight.check_in_process`` enforces its timeout with SIGALRM, which user code can defeat
(``signal.signal(SIGALRM, SIG_IGN)``, a long C call). In a launcher's run process it also starts
this watchdog (``python -m estimator_workbench.execution.preflight_watchdog PID CREATE_TIME TIMEOUT REPORT``,
in a session of its own): ``WATCHDOG_GRACE_S`` after the timeout, unless its stdin has closed
(the check ended), it writes the timeout into the report, records the run ``failed`` with the
timeout message and SIGKILLs the runner (the launcher ends its leftovers through the run's
marker). The check stays in the runner rather than in a child process per launch: measured on
this project's 2-core machine under load, 0.5 s in a warm runner against 22-30 s for a child
that imports torch again.

Example:
    >>> watchdog = start_watchdog(60.0, Path("runs/r-1/preflight.json"))  # doctest: +SKIP
    >>> stop_watchdog(watchdog)  # the check is over                       # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["WATCHDOG_GRACE_S", "main", "start_watchdog", "stop_watchdog", "timeout_message", "watch"]

# Seconds after the timeout at which the watchdog kills a runner whose check ignored its timer.
WATCHDOG_GRACE_S = 2.0


def timeout_message(timeout: float, stage: str) -> str:
    """The message of a check that timed out (the in-process timer's and the watchdog's).

    Example:
        >>> timeout_message(3, "train")[:30]
        'timed out after 3 s (in train)'
    """
    return (f"timed out after {timeout:g} s (in {stage}); the code may loop forever "
            "or be too slow for a tiny batch. Check loops in model_fn, or raise the timeout.")


def start_watchdog(timeout: float, report_path: Path | None) -> subprocess.Popen[bytes] | None:
    """The outside watchdog of an in-process check, in a launcher's run process only (never in a
    process that merely calls the check, such as the UI or a test: the watchdog kills the
    process it watches). It ends when its stdin closes (the check is over)."""
    from estimator_workbench.execution.processes import RUN_MARKER_ENV

    if report_path is None or not os.environ.get(RUN_MARKER_ENV):
        return None
    from estimator_workbench.store.guards import process_start_time

    cmd = [sys.executable, "-m", "estimator_workbench.execution.preflight_watchdog", str(os.getpid()),
           repr(process_start_time(os.getpid()) or 0.0), repr(float(timeout)), str(report_path)]
    try:
        return subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                start_new_session=True, close_fds=True)
    except OSError:
        return None


def stop_watchdog(watchdog: subprocess.Popen[bytes] | None) -> None:
    if watchdog is None:
        return
    with contextlib.suppress(OSError, ValueError):
        if watchdog.stdin is not None:
            watchdog.stdin.close()  # the check is over: the watchdog exits
    with contextlib.suppress(subprocess.TimeoutExpired):
        watchdog.wait(timeout=5)


def watch(pid: int, started: float, timeout: float, report_path: Path) -> int:
    """The watchdog's body: waits for its stdin to close; after ``timeout + WATCHDOG_GRACE_S``
    seconds it reports the timeout, records the run failed and SIGKILLs the runner ``pid`` (if it
    is still the process that started it)."""
    import select

    deadline = time.monotonic() + timeout + WATCHDOG_GRACE_S
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        ready, _, _ = select.select([sys.stdin.buffer], [], [], left)
        if ready and not os.read(sys.stdin.fileno(), 4096):
            return 0  # end of input: the check finished (or the runner died)
    import psutil

    from estimator_workbench.store.guards import same_process

    try:
        runner = psutil.Process(pid)
        if same_process(pid, started) is False:  # None: cannot tell; our parent, most likely
            return 0
    except psutil.Error:
        return 0
    try:  # the report the check wrote after its last stage (a dict: PreflightReport's fields)
        report = json.loads(report_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        report = {"stage": "start", "modes": {}}
    stage = str(report.get("stage") or "start")
    message = (timeout_message(timeout, stage) + " The check ignored its timer (SIGALRM) and "
               "was killed from outside.")
    report.update(ok=False, error={"stage": stage, "type": "TimeoutError", "message": message,
                                   "line": None, "code_line": None, "traceback": None})
    with contextlib.suppress(OSError):
        partial = report_path.with_suffix(".watchdog.tmp")
        partial.write_text(json.dumps(report, default=str), encoding="utf-8")
        os.replace(partial, report_path)
    _record_failed(report_path.parent, f"Pre-flight check failed in {stage}: TimeoutError: {message}")
    with contextlib.suppress(psutil.Error):
        runner.kill()
    return 1


def _record_failed(run_dir: Path, summary: str) -> None:
    """Records the run in ``run_dir`` (when it is one) ``failed`` with the check's error (as the
    runner's ``preflight_error`` would word it)."""
    with contextlib.suppress(Exception):
        from estimator_workbench.store import paths
        from estimator_workbench.store.registry import RunRegistry
        from estimator_workbench.store.run_spec import RunSpec

        if not (run_dir / paths.RUN_JSON).exists():
            return
        run_id = str(RunSpec.read(run_dir / paths.RUN_JSON).run_id)
        RunRegistry(run_dir.parent.parent).set_status(run_id, "failed", error=summary,
                                                      traceback=summary, expected="running")


def main(argv: list[str] | None = None) -> int:
    """``python -m estimator_workbench.execution.preflight_watchdog PID CREATE_TIME TIMEOUT REPORT``."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 4:
        print("usage: python -m estimator_workbench.execution.preflight_watchdog PID CREATE_TIME TIMEOUT "
              "REPORT", file=sys.stderr)
        return 2
    return watch(int(args[0]), float(args[1]), float(args[2]), Path(args[3]))


if __name__ == "__main__":
    sys.exit(main())
