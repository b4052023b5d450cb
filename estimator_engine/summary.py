"""Summaries on disk: TensorBoard event files and JSON lines, and ``scalar`` for use in a model_fn.

``tensorboard --logdir MODEL_DIR`` shows every run: training writes ``loss`` and
``global_step/sec`` (and each ``summary.scalar`` of the model_fn) to event files in ``model_dir``,
evaluation writes its metrics to ``model_dir/eval`` (``eval_<name>``), TF's layout. The event
files are written with ``tensorboardX``'s protos (a light dependency: numpy and protobuf).

Every summary is also one line of ``<logdir>/summaries.jsonl``, which ``read_eval_metrics``
(early stopping, ``BestExporter``) reads without TensorBoard::

    {"step": 100, "wall_time": 1764660000.5, "tag": "loss", "value": 0.25}
    {"step": 100, "wall_time": 1764660000.5, "tag": "notes", "text": "..."}

The file is append-only and written in whole lines, so a reader (``read_eval_metrics``, the
workbench) may read it while training runs; a line cut short by a crash is skipped on reading.
Writes to both files are buffered in memory and reach them on ``flush()``/``close()``, on the
first write that comes ``flush_secs`` or more after the oldest pending line (no background
thread: writing stays cheap), and at interpreter exit. Hooks flush their writer in ``end()``.

A logdir on an object store (``s3://...``, see ``estimator_engine.gfile``): both files are written
in a local staging directory and each is uploaded whole ("append by rewrite") on ``flush()`` /
``close()`` and at most every ``REMOTE_UPLOAD_SECS`` on the periodic flushes. This is what TF's
own GCS and S3 file systems did for event files (they buffered the file locally and uploaded it
whole on ``Flush``), because an object store has no append. TensorBoard reads the result: the
new object starts with the bytes of the old one, so its event-file reader, which remembers how
far it read, picks up where it stopped. ``summaries.jsonl`` already on the store is downloaded
first, so an evaluation in a new process appends to it; each process writes its own event file.
Two processes writing the same logdir's ``summaries.jsonl`` at once would overwrite each other's
lines (the chief alone writes, as in TF).
"""

from __future__ import annotations

import atexit
import importlib.util
import itertools
import json
import logging
import os
import shutil
import socket
import struct
import threading
import time
import weakref
from collections.abc import Mapping
from typing import Any

import numpy as np

from estimator_engine import gfile, model_state

__all__ = [
    "SUMMARIES_FILENAME",
    "SummaryWriter",
    "SummaryWriterCache",
    "read_eval_metrics",
    "read_summaries",
    "scalar",
]

SUMMARIES_FILENAME = "summaries.jsonl"
# Between two uploads of a remote logdir's files on the periodic flushes (explicit ones upload).
REMOTE_UPLOAD_SECS = 30.0

_LOG = logging.getLogger("estimator_engine")
_MAX_PENDING_LINES = 1000  # bounds memory between flushes
_TENSORBOARD_AVAILABLE: bool | None = None


def _tensorboard_available() -> bool:
    global _TENSORBOARD_AVAILABLE
    if _TENSORBOARD_AVAILABLE is None:
        _TENSORBOARD_AVAILABLE = importlib.util.find_spec("tensorboardX") is not None
        if not _TENSORBOARD_AVAILABLE:
            _LOG.warning("tensorboardX is not installed: summaries are written as JSON lines only, "
                         "TensorBoard will not show them. Install it with `pip install tensorboardX`.")
    return _TENSORBOARD_AVAILABLE


class _EventFile:
    """A TensorBoard event file written in the caller's thread: TFRecord framing of tensorboardX's
    ``Event`` protos, checksummed with its ``masked_crc32c``.

    Not tensorboardX's own writers: its ``FileWriter`` hands each event to a flusher thread
    through a ``multiprocessing.Queue`` (~30 us an event, and the thread wakes on ``time.time``),
    and its ``EventsWriter`` can only flush with an ``fsync``. Here a flush makes the events
    visible to TensorBoard at once; ``sync`` adds the ``fsync``.
    """

    _opened = itertools.count()

    def __init__(self, logdir: str) -> None:
        from tensorboardX.proto.event_pb2 import Event
        from tensorboardX.proto.summary_pb2 import Summary
        from tensorboardX.record_writer import masked_crc32c
        from tensorboardX.summary import text

        self._event, self._summary, self._text, self._crc = Event, Summary, text, masked_crc32c
        # TF 2's naming: the pid and a counter keep a writer reopened within the same second (or
        # another process) from appending to this file.
        name = (f"events.out.tfevents.{int(time.time())}.{socket.gethostname()}."
                f"{os.getpid()}.{next(self._opened)}")
        self.path = os.path.join(logdir, name)
        self._file = open(self.path, "ab")
        self._write(Event(wall_time=time.time(), file_version="brain.Event:2"))

    def _write(self, event: Any) -> None:
        data = event.SerializeToString()
        header = struct.pack("<Q", len(data))
        self._file.write(b"".join((header, struct.pack("<I", self._crc(header)),
                                   data, struct.pack("<I", self._crc(data)))))

    def add_scalars(self, values: Mapping[str, float], step: int, wall_time: float) -> None:
        """One event holding every scalar, tags as given: what TF's estimator writes for its
        evaluation results (``summary_proto.value.add(tag=key, simple_value=value)``)."""
        summary = self._summary(value=[self._summary.Value(tag=tag, simple_value=number)
                                       for tag, number in values.items()])
        self._write(self._event(summary=summary, step=step, wall_time=wall_time))

    def add_text(self, tag: str, text: str, step: int, wall_time: float) -> None:
        """tensorboardX's text summary (TensorBoard's text plugin), as one event."""
        self._write(self._event(summary=self._text(tag, text), step=step, wall_time=wall_time))

    def flush(self, sync: bool = True) -> None:
        self._file.flush()
        if sync:
            os.fsync(self._file.fileno())

    def close(self) -> None:
        try:
            self.flush()
        finally:
            self._file.close()


class _WriterState:
    """The parts of a writer that must be flushed even if the writer itself is garbage-collected."""

    def __init__(self, path: str, remote_dir: str | None = None) -> None:
        self.path = path
        self.pending: list[str] = []
        self.fd: int | None = None
        self.tensorboard: Any = None
        # A logdir on an object store: ``path`` lies in a local staging directory, mirrored here.
        self.remote_dir = remote_dir
        self.uploaded: dict[str, int] = {}  # local file -> size at its last upload
        self.last_upload = time.monotonic()
        self.fetched = False
        self.closed_event_files: list[str] = []  # closed before their last upload

    def flush(self, sync: bool = True, periodic: bool = False) -> None:
        if self.pending:
            data = "".join(self.pending).encode("utf-8")
            self.pending.clear()
            if self.fd is None:
                os.makedirs(os.path.dirname(self.path), exist_ok=True)
                self._fetch_remote()
                self.fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            view = memoryview(data)
            while view:  # one write() of whole lines, so readers rarely see a partial line
                written = os.write(self.fd, view)
                view = view[written:]
        if self.tensorboard is not None:
            self.tensorboard.flush(sync)
        if self.remote_dir is not None and (
                not periodic or time.monotonic() - self.last_upload >= REMOTE_UPLOAD_SECS):
            self.upload()

    def _fetch_remote(self) -> None:
        """Starts the local copy from the store's summaries.jsonl, so that lines are appended to it."""
        if self.remote_dir is None or self.fetched:
            return
        self.fetched = True
        try:
            data = gfile.read_bytes(gfile.join(self.remote_dir, SUMMARIES_FILENAME))
        except FileNotFoundError:
            return
        with open(self.path, "wb") as handle:
            handle.write(data)
        self.uploaded[self.path] = len(data)

    def upload(self) -> None:
        """Uploads each staged file that grew since its last upload, whole (append by rewrite)."""
        if self.remote_dir is None:
            return
        self.last_upload = time.monotonic()
        staged = [self.path, *self.closed_event_files]
        if self.tensorboard is not None:
            staged.append(self.tensorboard.path)
        for local in staged:
            try:
                size = os.path.getsize(local)
            except FileNotFoundError:
                continue
            if self.uploaded.get(local) != size:
                gfile.put_file(local, gfile.join(self.remote_dir, os.path.basename(local)))
                self.uploaded[local] = size

    def close(self) -> None:
        try:
            self.flush(sync=False)  # the event file syncs as it closes
        finally:
            if self.fd is not None:
                os.close(self.fd)
                self.fd = None
            if self.tensorboard is not None:
                tensorboard, self.tensorboard = self.tensorboard, None
                tensorboard.close()
                if self.remote_dir is not None:
                    self.closed_event_files.append(tensorboard.path)
        if self.remote_dir is not None:
            self.upload()  # flush() uploaded what was pending; this catches the closed event file

    def close_and_discard(self) -> None:
        """close(), then removes a remote logdir's local staging directory."""
        try:
            self.close()
        finally:
            if self.remote_dir is not None:
                shutil.rmtree(os.path.dirname(self.path), ignore_errors=True)


class SummaryWriter:
    """Writes scalar and text summaries of one directory (TF's ``FileWriter`` for scalars).

    Nothing is created on disk until the first summary is written. A closed writer reopens on the
    next write. Use ``SummaryWriterCache.get(logdir)`` to share one writer per directory.

    Args:
        logdir: directory of ``summaries.jsonl`` (and of the TensorBoard event files).
        flush_secs: the longest time a written summary waits in memory before reaching the file.
        tensorboard: also write TensorBoard event files (with ``tensorboardX``); ``None``
            (default) does so when ``tensorboardX`` is installed, as the engine's dependencies say.

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as logdir:
        ...     with SummaryWriter(logdir, tensorboard=False) as writer:
        ...         writer.add_scalar('loss', 0.5, step=10)
        ...     read_summaries(logdir)[0]['value']
        0.5
    """

    def __init__(self, logdir: str | os.PathLike[str], flush_secs: float = 2.0,
                 tensorboard: bool | None = None) -> None:
        if not isinstance(logdir, (str, os.PathLike)) or not os.fspath(logdir):
            raise TypeError(f"logdir must be a non-empty path, given {logdir!r}.")
        if not isinstance(flush_secs, (int, float)) or flush_secs < 0:
            raise ValueError(f"flush_secs must be a number >= 0, given {flush_secs!r}.")
        self._logdir = gfile.normalize(logdir)
        self._flush_secs = float(flush_secs)
        self._use_tensorboard = tensorboard
        if gfile.is_remote(self._logdir):
            gfile.filesystem(self._logdir)  # fsspec (and the store's package) must be installed
            staging = gfile.local_staging_dir("estimator-summaries-")
            self._state = _WriterState(os.path.join(staging, SUMMARIES_FILENAME), remote_dir=self._logdir)
        else:
            self._state = _WriterState(os.path.join(self._logdir, SUMMARIES_FILENAME))
        self._oldest_pending: float | None = None  # monotonic time of the first unflushed line
        self._lock = threading.Lock()
        # Flushes and closes the file when the writer is collected or at interpreter exit.
        self._finalizer = weakref.finalize(self, self._state.close_and_discard)

    def __repr__(self) -> str:
        return f"SummaryWriter(logdir={self._logdir!r})"

    @property
    def logdir(self) -> str:
        return self._logdir

    @property
    def path(self) -> str:
        """The JSON lines file this writer appends to (the local staging copy for a remote logdir)."""
        return self._state.path

    def __enter__(self) -> SummaryWriter:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def _tensorboard_writer(self) -> Any:
        if self._state.tensorboard is None and (
            self._use_tensorboard or (self._use_tensorboard is None and _tensorboard_available())
        ):
            if importlib.util.find_spec("tensorboardX") is None:
                raise ImportError("SummaryWriter(tensorboard=True) needs tensorboardX: "
                                  "`pip install tensorboardX`.")
            local_dir = os.path.dirname(self._state.path)  # the logdir, or its staging copy
            os.makedirs(local_dir, exist_ok=True)
            self._state.tensorboard = _EventFile(local_dir)
        return self._state.tensorboard

    def _append(self, lines: list[str]) -> None:
        state = self._state
        state.pending.extend(lines)
        now = time.monotonic()
        if self._oldest_pending is None:
            self._oldest_pending = now
        if (now - self._oldest_pending >= self._flush_secs
                or len(state.pending) >= _MAX_PENDING_LINES):
            # Readable now; no fsync in the training thread (seconds on a slow shared disk), as
            # tensorboardX's thread did it. flush() and close() sync.
            state.flush(sync=False, periodic=True)
            self._oldest_pending = None

    def add_scalar(self, tag: str, value: Any, step: int) -> None:
        """Writes one scalar ``value`` (a number, 0-d/1-element array or tensor) at ``step``."""
        self.add_scalars({tag: value}, step)

    def add_scalars(self, scalars: Mapping[str, Any], step: int) -> None:
        """Writes every ``tag: value`` of ``scalars`` at ``step`` (one line each, one wall time)."""
        if not isinstance(scalars, Mapping):
            raise TypeError(f"scalars must be a dict of tag -> number, given {scalars!r}.")
        step = int(step)
        wall_time = time.time()
        lines = []
        values = {}
        for tag, value in scalars.items():
            if not isinstance(tag, str):
                raise TypeError(f"A summary tag must be a str, given {tag!r}.")
            try:
                number = float(value)
            except (TypeError, ValueError) as exc:
                raise TypeError(
                    f"Summary {tag!r} must be a scalar number, given {value!r}. "
                    "Reduce arrays to one number (e.g. .mean()) before writing them."
                ) from exc
            values[tag] = number
            lines.append(json.dumps({"step": step, "wall_time": wall_time, "tag": tag,
                                     "value": number}) + "\n")
        with self._lock:
            self._append(lines)
            tensorboard = self._tensorboard_writer()
            if tensorboard is not None and values:
                tensorboard.add_scalars(values, step, wall_time)

    def add_text(self, tag: str, text: str, step: int) -> None:
        """Writes a text summary (a JSON line with ``"text"`` instead of ``"value"``)."""
        if not isinstance(tag, str):
            raise TypeError(f"A summary tag must be a str, given {tag!r}.")
        step = int(step)
        wall_time = time.time()
        line = json.dumps({"step": step, "wall_time": wall_time, "tag": tag,
                           "text": str(text)}) + "\n"
        with self._lock:
            self._append([line])
            tensorboard = self._tensorboard_writer()
            if tensorboard is not None:
                tensorboard.add_text(tag, str(text), step, wall_time)

    def flush(self, sync: bool = True) -> None:
        """Writes every pending summary to disk: readers (TensorBoard, ``read_summaries``) see it.

        Args:
            sync: also ``fsync`` the event file, as TF's ``EventsWriter::Flush`` does (~0.5 ms,
                and as long as the disk is busy). ``False`` leaves durability against a crash of
                the machine to the next synced flush or ``close``.
        """
        with self._lock:
            self._state.flush(sync)
            self._oldest_pending = None

    def close(self) -> None:
        """Flushes and closes the files; a later write reopens them."""
        with self._lock:
            self._state.close()
            self._oldest_pending = None


def scalar(name: str, data: Any, step: int | None = None, description: str | None = None) -> None:
    """Records a scalar summary from inside a ``model_fn`` (TF's ``tf.summary.scalar``).

    TRAIN: written with the loss every ``RunConfig.save_summary_steps`` global steps, to the
    event files and ``summaries.jsonl`` of ``model_dir``. EVAL: the mean over the evaluated batches
    is written to the evaluation's directory next to the metrics (not returned by ``evaluate``;
    use ``eval_metric_ops`` for that). Hooks may fetch the step's values as ``'summaries'``
    (a dict of name -> value). Outside a running Estimator nothing is recorded, as
    ``tf.summary`` writes nothing without a default writer. ``step`` and ``description`` are
    accepted for TF compatibility: the step is always the global step.

    Example:
        >>> import torch
        >>> from estimator_engine import summary
        >>> summary.scalar('learning_rate', torch.tensor(0.1))   # outside an Estimator: no-op
    """
    del step, description
    if not isinstance(name, str) or not name:
        raise ValueError(f"summary.scalar(name, data): name must be a non-empty string, given {name!r}.")
    numel = data.numel() if hasattr(data, "numel") else (np.size(data) if not isinstance(data, (int, float)) else 1)
    if numel != 1:
        raise ValueError(f"summary.scalar({name!r}, data): data must hold one number, given a value of "
                         f"{numel} elements. Reduce it first, e.g. data.mean().")
    state = model_state._active
    if state is not None:
        state.summaries[name] = data


class SummaryWriterCache:
    """One shared ``SummaryWriter`` per directory in this process (TF's ``SummaryWriterCache``).

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as logdir:
        ...     same = SummaryWriterCache.get(logdir) is SummaryWriterCache.get(logdir)
        ...     SummaryWriterCache.clear()
        >>> same
        True
    """

    _writers: dict[str, SummaryWriter] = {}
    _lock = threading.Lock()

    @classmethod
    def get(cls, logdir: str | os.PathLike[str]) -> SummaryWriter:
        """Returns the writer of ``logdir``, creating it the first time."""
        key = gfile.abspath(gfile.normalize(logdir))
        with cls._lock:
            writer = cls._writers.get(key)
            if writer is None:
                writer = cls._writers[key] = SummaryWriter(logdir)
            return writer

    @classmethod
    def clear(cls) -> None:
        """Closes and forgets every cached writer."""
        with cls._lock:
            writers = list(cls._writers.values())
            cls._writers.clear()
        for writer in writers:
            writer.close()


atexit.register(SummaryWriterCache.clear)


def _iter_lines(path: str) -> list[dict[str, Any]]:
    try:
        if gfile.is_remote(path):
            raw_lines = gfile.read_bytes(path).split(b"\n")
        else:
            with open(path, "rb") as f:
                raw_lines = f.read().split(b"\n")
    except (FileNotFoundError, NotADirectoryError):
        return []
    records = []
    last = len(raw_lines) - 1
    for index, raw in enumerate(raw_lines):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            # A line cut short by a crash (or still being written) is skipped, as TF skips a
            # truncated event file; anything else is worth a warning.
            if index < last:
                _LOG.warning("Skipping a corrupt line %d of %s: %r", index + 1, path, raw[:80])
            continue
        if isinstance(record, dict) and "step" in record and "tag" in record:
            records.append(record)
    return records


def read_summaries(logdir: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """All summaries in ``<logdir>/summaries.jsonl`` in file order (``[]`` if there is none).

    Example:
        >>> read_summaries('/nonexistent')
        []
    """
    return _iter_lines(gfile.join(gfile.normalize(logdir), SUMMARIES_FILENAME))


def read_eval_metrics(eval_dir: str | os.PathLike[str]) -> dict[int, dict[str, float]]:
    """Scalar summaries of ``eval_dir`` as ``{global_step: {tag: value}}``, sorted by step.

    A later line for the same step and tag wins. A missing directory or file gives ``{}``;
    a truncated or corrupt line is skipped (TF's ``read_eval_metrics`` swallows ``DataLossError``).

    Example:
        >>> read_eval_metrics('/nonexistent')
        {}
    """
    by_step: dict[int, dict[str, float]] = {}
    for record in read_summaries(eval_dir):
        if "value" not in record:
            continue
        try:
            step, value = int(record["step"]), float(record["value"])
        except (TypeError, ValueError):
            continue
        by_step.setdefault(step, {})[str(record["tag"])] = value
    return {step: by_step[step] for step in sorted(by_step)}
