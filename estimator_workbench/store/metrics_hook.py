"""``MetricsWriterHook``: the engine hook that feeds a run's ``metrics.jsonl`` (the bridge to the UI).

Each line is one JSON object ``{"step", "wall_time", "split", "name", "value"}``. Lines are only
ever appended, and every batch of lines goes out in a single ``os.write`` on an ``O_APPEND``
descriptor, so a reader never sees half a batch except as a trailing partial line, which
``estimator_workbench.store.metrics_store.MetricsTail`` leaves for its next read.
"""

from __future__ import annotations

import functools
import json
import os
import sys
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
# How often (at most) the stop file is looked for between logged steps: a stat costs 1-7 us, a
# monotonic clock read ~50 ns, and a person pressing Stop does not notice a quarter second.
_STOP_CHECK_EVERY_S = 0.25
_INF = float("inf")


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


def _number(value: Any) -> str:
    """JSON text of a number, as ``json.dumps`` writes it (``NaN``/``Infinity`` included)."""
    if type(value) is int:
        return repr(value)
    if isinstance(value, float):
        value = float(value)  # numpy's float64 subclass reprs as 'np.float64(...)'
        if value != value:
            return "NaN"
        if value == _INF:
            return "Infinity"
        if value == -_INF:
            return "-Infinity"
        return repr(value)  # what json.dumps writes for a finite float
    return json.dumps(value)


def _line(step: Any, wall: float, split_and_name: str, value: Any) -> str:
    # One fixed layout (the keys in COLUMNS order): a few f-string pieces instead of a dict and a
    # json.dumps per row. ``split_and_name`` is the prebuilt `"split": ..., "name": ...` text.
    if (type(step) is int and type(wall) is float and type(value) is float
            and -_INF < value < _INF and -_INF < wall < _INF):
        return (f'{{"step": {step}, "wall_time": {wall!r}, {split_and_name}, '
                f'"value": {value!r}}}\n')  # the common case: no conversion needed
    return (f'{{"step": {_number(step)}, "wall_time": {_number(wall)}, {split_and_name}, '
            f'"value": {_number(value)}}}\n')


@functools.lru_cache(maxsize=256)
def _split_and_name(split: str, name: str) -> str:
    return f'"split": {json.dumps(split)}, "name": {json.dumps(name)}'


def format_rows(rows: Iterable[Mapping[str, Any]]) -> bytes:
    """The JSONL bytes of metric rows (one complete line each, keys in ``COLUMNS`` order).

    Byte-for-byte what ``json.dumps`` of each row's ``step, wall_time, split, name, value`` gives.

    Example:
        >>> format_rows([{"step": 1, "wall_time": 2.5, "split": "train", "name": "loss",
        ...               "value": 0.5}])
        b'{"step": 1, "wall_time": 2.5, "split": "train", "name": "loss", "value": 0.5}\\n'
    """
    return "".join(
        _line(row["step"], row["wall_time"], _split_and_name(str(row["split"]), str(row["name"])),
              row["value"])
        for row in rows).encode("utf-8")


def append_rows(path: str | os.PathLike[str], rows: Iterable[Mapping[str, Any]]) -> int:
    """Appends metric rows to ``path`` in one write call; returns the number of bytes written."""
    data = format_rows(rows)
    if not data:
        return 0
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
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
    (the engine then finishes the step and writes its final checkpoint) when ``should_stop()``
    returns true (checked every step) or ``stop_file`` exists (checked at every logged step and
    at least every 0.25 s in between).

    Cheap per step by design (the tiny-model budget is a few microseconds): the file stays open
    between writes (``O_APPEND``, one ``os.write`` per logged step, closed in ``end``), rows are
    formatted with a fixed f-string, and the stop file is not ``stat``-ed on every step.

    Args:
        path: the ``metrics.jsonl`` file to append to.
        every_n_steps: logging period in steps.
        heartbeat: called (no arguments) at most every ~2 s while the loop runs; errors are ignored.
        stop_file: a path whose existence requests a graceful stop.
        should_stop: an extra stop predicate (the runner's SIGTERM flag).
        final_step: the run's last step (``max_steps``), logged even when it is not a multiple of
            ``every_n_steps`` (a 5-step run logged every 10 steps showed only step 1).
        fence: called before every write to ``path``; it raises to forbid the write (the runner's
            ownership check: a runner whose run was resumed by another attempt writes nothing).

    Progress: ``last_progress_step`` and ``last_progress_at`` (``time.monotonic()``) tell the last
    completed step and when (``progress()`` as a wall-clock time); the runner's heartbeat records
    them so that a run with no step for a while is shown stalled.

    Example:
        >>> hook = MetricsWriterHook("runs/r-1/metrics.jsonl", every_n_steps=10,
        ...                          stop_file="runs/r-1/stop.request")
        >>> # estimator.train(input_fn, hooks=[hook], max_steps=1000)
    """

    def __init__(self, path: str | os.PathLike[str], every_n_steps: int = 10,
                 heartbeat: Callable[[], Any] | None = None,
                 stop_file: str | os.PathLike[str] | None = None,
                 should_stop: Callable[[], bool] | None = None, final_step: int | None = None,
                 fence: Callable[[], Any] | None = None) -> None:
        if not isinstance(every_n_steps, int) or isinstance(every_n_steps, bool) or every_n_steps < 1:
            raise ValueError(f"every_n_steps must be an int >= 1, given: {every_n_steps!r}")
        self.path = os.fspath(path)
        self.every_n_steps = every_n_steps
        self.heartbeat = heartbeat
        self.stop_file = None if stop_file is None else os.fspath(stop_file)
        self.should_stop = should_stop
        self.final_step = final_step
        self.fence = fence
        self.last_progress_step: int | None = None
        self.last_progress_at: float | None = None
        self.stop_requested = False
        self.last_step: int | None = None
        self._session: Any = None
        self._train = True
        self._step = 0
        self._logged_once = False
        self._last_log: tuple[int, float] | None = None
        self._last_beat = 0.0
        self._next_stop_check = 0.0
        self._fd: int | None = None
        # The step is read from the session after the step (a fetched 'global_step' is the value
        # before the step's increment, as in TF).
        self._fetches = SessionRunArgs({"loss": "loss"})

    # -- protocol ----------------------------------------------------------------------------

    def begin(self) -> None:
        self._logged_once = False
        self._last_log = None
        self._last_beat = 0.0
        self._next_stop_check = 0.0

    def after_create_session(self, session: Any, coord: Any = None) -> None:
        self._session = session
        mode = getattr(session, "mode", "train")
        self._train = str(getattr(mode, "value", mode)).lower() == "train"
        self._step = self._global_step()
        self._last_log = (self._step, time.perf_counter())
        self._beat()

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs | None:
        next_step = self._global_step(self._step) + 1
        if self._train and (not self._logged_once or next_step % self.every_n_steps == 0
                            or next_step == self.final_step):
            return self._fetches
        return None

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        results = run_values.results
        logged = False
        now = time.monotonic()
        if self._train:
            if isinstance(results, Mapping) and "loss" in results:
                self._step = self._global_step(self._step + 1)
                self._log_train(results.get("loss"))
                logged = True
            else:
                self._step = self._global_step(self._step + 1)
        self.last_progress_step, self.last_progress_at = self._step, now
        if self.should_stop is not None and self.should_stop():
            self._request_stop(run_context)
            return
        if now < self._next_stop_check and not logged:
            return
        self._next_stop_check = now + _STOP_CHECK_EVERY_S
        if now - self._last_beat >= _HEARTBEAT_EVERY_S:
            self._beat()
        if self.stop_file is not None and os.path.exists(self.stop_file):
            self._request_stop(run_context)

    def end(self, session: Any) -> None:
        self.last_step = self._global_step(self._step)
        self.close()

    def progress(self) -> tuple[int, float] | None:
        """``(step, wall-clock time)`` of the last completed step, or None before the first."""
        at = self.last_progress_at
        if at is None or self.last_progress_step is None:
            return None
        return self.last_progress_step, time.time() - (time.monotonic() - at)

    def close(self) -> None:
        """Closes the metrics file (``end`` does it; safe to call twice)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def __del__(self) -> None:  # a loop that never reached ``end``: do not leak the descriptor
        try:
            self.close()
        except Exception:
            pass

    # -- helpers -----------------------------------------------------------------------------

    def _request_stop(self, run_context: SessionRunContext) -> None:
        self.stop_requested = True
        run_context.request_stop()

    def _global_step(self, default: int = 0) -> int:
        session = self._session
        if session is None:
            return default
        try:
            return int(session.global_step)
        except Exception:  # a session without a step counter: count ourselves
            return default

    def _beat(self) -> None:
        self._last_beat = time.monotonic()
        if self.heartbeat is None:
            return
        try:
            self.heartbeat()
        except Exception:  # a busy registry must never break training; the next beat retries
            pass

    def _write(self, text: str) -> None:
        if self.fence is not None:
            self.fence()
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        _write_all(self._fd, text.encode("utf-8"))

    def _log_train(self, loss: Any) -> None:
        wall = time.time()
        step = self._step
        value = loss if type(loss) is float else to_float(loss)
        text = "" if value is None else _line(step, wall, _TRAIN_LOSS, value)
        now = time.perf_counter()
        last = self._last_log
        if last is not None and step > last[0] and now > last[1] and self._logged_once:
            # (the first interval includes start-up: not a speed)
            text += _line(step, wall, _TRAIN_SPEED, (step - last[0]) / (now - last[1]))
        self._last_log = (step, now)
        memory = _gpu_memory_mb()
        if memory is not None:
            text += _line(step, wall, _TRAIN_GPU_MEMORY, memory)
        self._logged_once = True
        if text:
            self._write(text)


_TRAIN_LOSS = _split_and_name("train", "loss")
_TRAIN_SPEED = _split_and_name("train", "steps_per_sec")
_TRAIN_GPU_MEMORY = _split_and_name("train", "gpu_memory_mb")


def _gpu_memory_mb() -> float | None:
    """Peak CUDA memory allocated by this process, in MiB, when CUDA is in use."""
    torch = sys.modules.get("torch")
    # is_initialized first: a flag read (~20 ns), where is_available asks the driver (~0.6 us).
    if torch is None or not torch.cuda.is_initialized() or not torch.cuda.is_available():
        return None
    return float(torch.cuda.max_memory_allocated()) / 2**20
