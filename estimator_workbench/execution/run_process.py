"""What a runner process needs around the engine: its heartbeat (registry beat + live summary +
training progress, and the ownership check), an error told in terms of the user's code, a disk
reserve that lets a runner on a full disk still say why it failed, the report of an
``os._exit`` in user code, and dying with its torchrun agent (implemented with the rest of the
process handling in ``estimator_workbench.execution.processes``)."""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from estimator_workbench.execution.processes import die_with_torchrun_agent  # the rank's start-up
from estimator_workbench.store.guards import is_disk_full
from estimator_workbench.store.records import OwnershipLostError
from estimator_workbench.store.registry import RunRegistry

__all__ = ['DISK_RESERVE_FILE', 'DiskReserve', 'Heartbeat', 'die_with_torchrun_agent', 'format_user_traceback',
           'log_tail', 'preflight_error', 'report_os_exit']


DISK_RESERVE_FILE = ".disk_reserve"  # in the run folder; freed when the disk fills up


_DISK_RESERVE_BYTES = 512 * 1024


class DiskReserve:
    """A small file written when a run starts and deleted when the disk fills up, so that the
    runner can still write its log line and record its outcome in the registry.

    Example:
        >>> reserve = DiskReserve(run_dir)          # doctest: +SKIP
        >>> reserve.release()  # on ENOSPC: frees 512 KB for the outcome  # doctest: +SKIP
    """

    def __init__(self, run_dir: Path, size: int = _DISK_RESERVE_BYTES) -> None:
        self.path = Path(run_dir) / DISK_RESERVE_FILE
        try:
            with open(self.path, "wb") as f:
                f.write(b"\0" * size)  # real blocks (a sparse file would free nothing)
        except OSError:  # already full: nothing to reserve
            with contextlib.suppress(OSError):
                self.path.unlink()

    def release(self) -> bool:
        """Deletes the reserve; whether there was one to free."""
        try:
            self.path.unlink()
        except OSError:
            return False
        return True


def log_tail(path: Path, lines: int = 5, max_bytes: int = 8192) -> str:
    """The last ``lines`` non-empty lines of a log file, joined with `` | `` (empty when none)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - max_bytes))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    kept = [line.strip() for line in text.splitlines() if line.strip()]
    return " | ".join(kept[-lines:])[-1500:]


def report_os_exit(on_exit: Callable[[int, str], None]) -> Callable[[], None]:
    """Replaces ``os._exit`` in this process so that a call from user code is reported first.

    ``on_exit(code, where)`` gets the exit code and the user-code location (``file, line N, in
    fn``); it runs only in this process (not in a forked child, such as a DataLoader worker,
    that inherits the replacement). Returns a function that restores the original.
    """
    real_exit = os._exit
    owner = os.getpid()

    def _exit(code: int) -> Any:
        if os.getpid() == owner:
            frames = [f for f in traceback.extract_stack()[:-1] if _is_user_frame(f.filename)]
            where = (f"{os.path.basename(frames[-1].filename)}, line {frames[-1].lineno}, in "
                     f"{frames[-1].name}" if frames else "outside user code")
            with contextlib.suppress(BaseException):
                on_exit(code, where)  # first: it reads the log as user code left it
            with contextlib.suppress(BaseException):
                print(f"estimator_workbench.execution.runner: os._exit({code}) called ({where}); the run ends "
                      "without finishing. Stack:\n" + "".join(traceback.format_stack()[:-1]),
                      file=sys.stderr, flush=True)
        real_exit(code)

    os._exit = _exit

    def restore() -> None:
        os._exit = real_exit

    return restore


_PACKAGE_DIRS = tuple(
    str(Path(__file__).resolve().parents[2] / name) + os.sep
    for name in ("estimator_workbench", "estimator_engine"))


def _is_user_frame(filename: str) -> bool:
    if filename.startswith("<") and not filename.startswith(("<template", "<model_fn", "<string")):
        return False
    absolute = os.path.abspath(filename) if not filename.startswith("<") else filename
    if absolute.startswith(_PACKAGE_DIRS):
        return False
    return not any(part in absolute for part in (
        f"{os.sep}site-packages{os.sep}", f"{os.sep}dist-packages{os.sep}",
        f"{os.sep}lib{os.sep}python3"))


def format_user_traceback(exc: BaseException) -> tuple[str, str]:
    """``(summary, traceback_text)``: the error line, and the traceback cut to user-code frames.

    The summary names the last user-code location when there is one, e.g.
    ``"ValueError: bad shape (template.py, line 12, in model_fn)"``. When no frame is user code
    (the error is in the data or the engine), the whole traceback is kept.
    """
    frames = traceback.extract_tb(exc.__traceback__)
    user = [f for f in frames if _is_user_frame(f.filename)]
    head = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    summary = head.splitlines()[-1] if head else type(exc).__name__
    if user:
        last = user[-1]
        summary += f" ({os.path.basename(last.filename)}, line {last.lineno}, in {last.name})"
        text = ("Traceback (user code only; the full traceback is in worker.log):\n"
                + "".join(traceback.format_list(user)) + head + "\n")
    else:
        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return summary[:2000], text


class Heartbeat:
    """Beats the registry every ~2 s from a daemon thread while the run executes, and merges the
    metric lines logged since into the run's summary (the runs tables show a running run's step
    and loss).

    With ``attempt`` every beat is fenced: when another attempt owns the run the beat calls
    ``on_lost(error)`` and stops. ``progress()`` gives the last completed step and its wall time,
    recorded with each beat (the launcher's stall check). A full disk is said once in the log
    (``on_disk_full``) and the beats go on, so they resume when space comes back.
    """

    def __init__(self, registry: RunRegistry, run_id: str, metrics_path: Path | None = None,
                 every_s: float = 2.0, *, attempt: int | None = None,
                 progress: Callable[[], tuple[int, float] | None] | None = None,
                 on_lost: Callable[[OwnershipLostError], None] | None = None,
                 on_disk_full: Callable[[BaseException], None] | None = None) -> None:
        from estimator_workbench.store.metrics_store import MetricsTail

        self._registry, self._run_id, self._every_s = registry, run_id, every_s
        self._attempt, self._progress = attempt, progress
        self._on_lost, self._on_disk_full = on_lost, on_disk_full
        self._tail = None if metrics_path is None else MetricsTail(metrics_path)
        self._generation = -1  # the first beat builds the summary afresh
        self._disk_full_said = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="workbench-heartbeat", daemon=True)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _loop(self) -> None:
        while not self._stop.wait(self._every_s):
            try:
                self.beat()
            except OwnershipLostError as exc:
                if self._on_lost is not None:
                    self._on_lost(exc)
                return
            except Exception as exc:  # a busy or vanished registry must not kill the run
                if is_disk_full(exc) and not self._disk_full_said and self._on_disk_full is not None:
                    self._disk_full_said = True
                    with contextlib.suppress(Exception):
                        self._on_disk_full(exc)

    def beat(self) -> None:
        """One beat: heartbeat and progress, then the summary (raises what the registry raises)."""
        progress = self._progress() if self._progress is not None else None
        step, at = progress if progress is not None else (None, None)
        self._registry.heartbeat(self._run_id, attempt=self._attempt, last_step=step, last_step_at=at)
        self._update_summary()

    def _update_summary(self) -> None:
        if self._tail is None:
            return
        rows = self._tail.read()
        if self._tail.generation != self._generation:
            # First beat, or the file was replaced (a resume dropped a dead attempt's rows).
            self._generation = self._tail.generation
            self._registry.refresh_summary(self._run_id, attempt=self._attempt)
        elif rows:
            self._registry.update_summary(self._run_id, rows, attempt=self._attempt)


def preflight_error(report: Any) -> tuple[str, str]:
    """``(summary, traceback_text)`` of a failed pre-flight check, as ``format_user_traceback``."""
    text = report.summary()
    err = report.first_error() or {}
    if err.get("traceback"):
        text += "\n\n" + str(err["traceback"])
    return text.splitlines()[0][:2000], text
