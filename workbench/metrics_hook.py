"""``MetricsWriterHook``: the engine hook that feeds a run's ``metrics.jsonl`` (the bridge to the UI).

Each line is one JSON object ``{"step", "wall_time", "split", "name", "value"}``. Lines are only
ever appended, and every batch of lines goes out in a single ``os.write`` on an ``O_APPEND``
descriptor, so a reader never sees half a batch except as a trailing partial line, which
``workbench.metrics_store.MetricsTail`` leaves for its next read.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from estimator_engine.hooks.base import (
    SessionRunArgs,
    SessionRunContext,
    SessionRunHook,
    SessionRunValues,
)

__all__ = ["MetricsWriterHook", "append_rows", "format_rows", "to_float", "write_eval"]

_HEARTBEAT_EVERY_S = 2.0


def to_float(value: Any) -> float | None:
    """A Python float for a scalar (Python number, numpy scalar, 0-d or 1-element tensor), else None."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    try:
        if hasattr(value, "numel") and value.numel() == 1:
            return float(value.detach().cpu().reshape(()).item())
        if hasattr(value, "size") and getattr(value, "size", None) == 1 and hasattr(value, "item"):
            return float(value.item())
    except (TypeError, ValueError, RuntimeError):
        return None
    return None


def format_rows(rows: Iterable[Mapping[str, Any]]) -> bytes:
    """The JSONL bytes of metric rows (one complete line each)."""
    return "".join(
        json.dumps({"step": row["step"], "wall_time": row["wall_time"], "split": row["split"],
                    "name": row["name"], "value": row["value"]}) + "\n"
        for row in rows).encode("utf-8")


def append_rows(path: str | os.PathLike[str], rows: Iterable[Mapping[str, Any]]) -> int:
    """Appends metric rows to ``path`` in one write call; returns the number of bytes written."""
    data = format_rows(rows)
    if not data:
        return 0
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        return _write_all(fd, data)
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes) -> int:
    written = os.write(fd, data)
    while written < len(data):  # only on exotic file systems; regular files take it whole
        written += os.write(fd, data[written:])
    return written


def write_eval(path: str | os.PathLike[str], step: int, metrics: Mapping[str, Any],
               split: str = "eval") -> list[dict[str, Any]]:
    """Appends the scalar results of ``Estimator.evaluate`` (``global_step`` excluded) at ``step``.

    Returns the rows written (non-scalar values are skipped).

    Example:
        >>> write_eval("/tmp/m.jsonl", 100, {"accuracy": 0.9, "loss": 0.3,
        ...                                  "global_step": 100})  # doctest: +SKIP
    """
    now = time.time()
    rows = []
    for name, value in metrics.items():
        if name == "global_step":
            continue
        number = to_float(value)
        if number is None:
            continue
        rows.append({"step": int(step), "wall_time": now, "split": split, "name": str(name),
                     "value": number})
    append_rows(path, rows)
    return rows


class MetricsWriterHook(SessionRunHook):
    """Appends the train loss and steps/s every ``every_n_steps`` steps, beats, honours stop requests.

    In TRAIN it logs ``train/loss`` at the first step and every ``every_n_steps`` steps after,
    ``train/steps_per_sec`` between logged steps, and ``train/gpu_memory_mb`` (peak allocated) when
    CUDA is in use. In every mode it calls ``heartbeat()`` at most every ~2 s and requests a stop
    (the engine then finishes the step and writes its final checkpoint) when ``stop_file`` exists
    or ``should_stop()`` returns true.

    Args:
        path: the ``metrics.jsonl`` file to append to.
        every_n_steps: logging period in steps.
        heartbeat: called (no arguments) at most every ~2 s while the loop runs; errors are ignored.
        stop_file: a path whose existence requests a graceful stop.
        should_stop: an extra stop predicate (the runner's SIGTERM flag).

    Example:
        >>> hook = MetricsWriterHook("runs/r-1/metrics.jsonl", every_n_steps=10,
        ...                          stop_file="runs/r-1/stop.request")
        >>> # estimator.train(input_fn, hooks=[hook], max_steps=1000)
    """

    def __init__(self, path: str | os.PathLike[str], every_n_steps: int = 10,
                 heartbeat: Callable[[], Any] | None = None,
                 stop_file: str | os.PathLike[str] | None = None,
                 should_stop: Callable[[], bool] | None = None) -> None:
        if not isinstance(every_n_steps, int) or isinstance(every_n_steps, bool) or every_n_steps < 1:
            raise ValueError(f"every_n_steps must be an int >= 1, given: {every_n_steps!r}")
        self.path = os.fspath(path)
        self.every_n_steps = every_n_steps
        self.heartbeat = heartbeat
        self.stop_file = None if stop_file is None else os.fspath(stop_file)
        self.should_stop = should_stop
        self.stop_requested = False
        self.last_step: int | None = None
        self._session: Any = None
        self._train = True
        self._step = 0
        self._logged_once = False
        self._last_log: tuple[int, float] | None = None
        self._last_beat = 0.0

    # -- protocol ----------------------------------------------------------------------------

    def begin(self) -> None:
        self._logged_once = False
        self._last_log = None
        self._last_beat = 0.0

    def after_create_session(self, session: Any, coord: Any = None) -> None:
        self._session = session
        mode = getattr(session, "mode", "train")
        self._train = str(getattr(mode, "value", mode)).lower() == "train"
        self._step = self._global_step()
        self._last_log = (self._step, time.perf_counter())
        self._beat()

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs | None:
        if not self._train:
            return None
        next_step = self._global_step() + 1
        if not self._logged_once or next_step % self.every_n_steps == 0:
            return SessionRunArgs({"loss": "loss", "global_step": "global_step"})
        return None

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        results = run_values.results
        if self._train:
            if isinstance(results, Mapping) and "global_step" in results:
                self._step = int(results["global_step"])
                self._log_train(results.get("loss"))
            else:
                self._step = self._global_step(self._step + 1)
        now = time.monotonic()
        if now - self._last_beat >= _HEARTBEAT_EVERY_S:
            self._beat()
        # A stat per step costs about a microsecond: cheap enough to honour a stop at once.
        if self._stop_wanted():
            self.stop_requested = True
            run_context.request_stop()

    def end(self, session: Any) -> None:
        self.last_step = self._global_step(self._step)

    # -- helpers -----------------------------------------------------------------------------

    def _global_step(self, default: int = 0) -> int:
        session = self._session
        if session is None:
            return default
        try:
            return int(session.global_step)
        except Exception:  # a session without a step counter: count ourselves
            return default

    def _stop_wanted(self) -> bool:
        if self.should_stop is not None and self.should_stop():
            return True
        return self.stop_file is not None and os.path.exists(self.stop_file)

    def _beat(self) -> None:
        self._last_beat = time.monotonic()
        if self.heartbeat is None:
            return
        try:
            self.heartbeat()
        except Exception:  # a busy registry must never break training; the next beat retries
            pass

    def _log_train(self, loss: Any) -> None:
        wall = time.time()
        step = self._step
        rows = []
        value = to_float(loss)
        if value is not None:
            rows.append({"step": step, "wall_time": wall, "split": "train", "name": "loss",
                         "value": value})
        now = time.perf_counter()
        if self._last_log is not None and step > self._last_log[0] and now > self._last_log[1]:
            rate = (step - self._last_log[0]) / (now - self._last_log[1])
            if self._logged_once:  # the first interval includes start-up: not a speed
                rows.append({"step": step, "wall_time": wall, "split": "train",
                             "name": "steps_per_sec", "value": rate})
        self._last_log = (step, now)
        memory = _gpu_memory_mb()
        if memory is not None:
            rows.append({"step": step, "wall_time": wall, "split": "train",
                         "name": "gpu_memory_mb", "value": memory})
        self._logged_once = True
        append_rows(self.path, rows)


def _gpu_memory_mb() -> float | None:
    """Peak CUDA memory allocated by this process, in MiB, when CUDA is in use."""
    import sys

    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return None
    return float(torch.cuda.max_memory_allocated()) / 2**20
