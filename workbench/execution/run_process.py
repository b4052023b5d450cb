"""What a runner process needs around the engine: its heartbeat (registry beat + live summary),
an error told in terms of the user's code, and dying with its torchrun agent (implemented with
the rest of the process handling in ``workbench.execution.processes``)."""

from __future__ import annotations

import os
import threading
import traceback
from pathlib import Path
from typing import Any

from workbench.execution.processes import die_with_torchrun_agent  # the rank's start-up
from workbench.store.registry import RunRegistry

__all__ = ['Heartbeat', 'die_with_torchrun_agent', 'format_user_traceback', 'preflight_error']


_PACKAGE_DIRS = tuple(
    str(Path(__file__).resolve().parents[2] / name) + os.sep
    for name in ("workbench", "estimator_engine"))


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
    and loss)."""

    def __init__(self, registry: RunRegistry, run_id: str, metrics_path: Path | None = None,
                 every_s: float = 2.0) -> None:
        from workbench.store.metrics_store import MetricsTail

        self._registry, self._run_id, self._every_s = registry, run_id, every_s
        self._tail = None if metrics_path is None else MetricsTail(metrics_path)
        self._generation = -1  # the first beat builds the summary afresh
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
                self._registry.heartbeat(self._run_id)
                self._update_summary()
            except Exception:  # a busy or vanished registry must not kill the run
                pass

    def _update_summary(self) -> None:
        if self._tail is None:
            return
        rows = self._tail.read()
        if self._tail.generation != self._generation:
            # First beat, or the file was replaced (a resume dropped a dead attempt's rows).
            self._generation = self._tail.generation
            self._registry.refresh_summary(self._run_id)
        elif rows:
            self._registry.update_summary(self._run_id, rows)


def preflight_error(report: Any) -> tuple[str, str]:
    """``(summary, traceback_text)`` of a failed pre-flight check, as ``format_user_traceback``."""
    text = report.summary()
    err = report.first_error() or {}
    if err.get("traceback"):
        text += "\n\n" + str(err["traceback"])
    return text.splitlines()[0][:2000], text
