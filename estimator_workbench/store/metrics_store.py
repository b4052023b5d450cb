"""Reading a run's ``metrics.jsonl``: incremental tail by byte offset, full reads, downsampling.

The file is append-only (``estimator_workbench.store.metrics_hook``), so a reader remembers how many bytes it has
consumed and reads only what was appended since; a trailing line without its newline is still
being written and is left for the next read. Long format throughout: one row per
``(step, wall_time, split, name, value)``.
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["COLUMNS", "MetricsTail", "downsample", "read_all", "rows_to_frame"]

COLUMNS = ("step", "wall_time", "split", "name", "value")


def _parse_lines(chunk: bytes) -> list[dict[str, Any]]:
    """One ``json.loads`` per line, skipping blank, corrupt and non-metric lines (the slow path)."""
    rows = []
    for line in chunk.splitlines():
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:  # a corrupt line (e.g. a crash mid-write on an odd file system)
            continue
        if isinstance(row, dict) and "name" in row and "value" in row:
            rows.append(row)
    return rows


def _parse(chunk: bytes) -> list[dict[str, Any]]:
    """The metric rows of complete lines: the whole chunk as one JSON array (one C call instead
    of a call per line), falling back to the line-by-line parser on any odd line."""
    body = chunk.rstrip(b"\r\n")
    if not body:
        return []
    try:
        # JSON strings never hold a raw newline, so each newline separates two lines.
        rows = json.loads(b"[" + body.replace(b"\n", b",") + b"]")
    except ValueError:  # a blank, corrupt or partial line somewhere: sort them out one by one
        return _parse_lines(chunk)
    for row in rows:
        if type(row) is not dict or "name" not in row or "value" not in row:
            return _parse_lines(chunk)
    return rows


_ARROW_SCHEMA: Any = None


def _parse_frame_arrow(chunk: bytes) -> pd.DataFrame | None:
    """The lines as a frame through pyarrow's JSON reader (C++, columnar), or None when pyarrow
    is missing or a line is not plain JSON (the caller then takes the row parser)."""
    global _ARROW_SCHEMA
    try:
        import pyarrow as pa
        import pyarrow.json as pa_json
    except ImportError:
        return None
    if _ARROW_SCHEMA is None:
        _ARROW_SCHEMA = pa.schema([("step", pa.int64()), ("wall_time", pa.float64()),
                                   ("split", pa.string()), ("name", pa.string()),
                                   ("value", pa.float64())])
    # The writer spells a NaN value like json.dumps (not JSON): null reads back as NaN too.
    nan = b'"value": NaN}'
    data = chunk.replace(nan, b'"value": null}') if nan in chunk else chunk  # (a copy: only if needed)
    try:
        table = pa_json.read_json(
            pa.py_buffer(data), read_options=pa_json.ReadOptions(block_size=4 << 20),
            parse_options=pa_json.ParseOptions(explicit_schema=_ARROW_SCHEMA,
                                               unexpected_field_behavior="ignore"))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None
    if table.column("name").null_count or table.column("split").null_count:
        return None  # a line without a name: let the row parser decide what it is
    step = table.column("step").to_numpy(zero_copy_only=False)
    frame = pd.DataFrame({
        "step": pd.array(step, dtype="Int64") if step.dtype.kind == "i"
        else pd.array(step, dtype="float64").astype("Int64"),
        "wall_time": table.column("wall_time").to_numpy(zero_copy_only=False).astype("float64"),
        "split": table.column("split").to_pandas(),
        "name": table.column("name").to_pandas(),
        "value": table.column("value").to_numpy(zero_copy_only=False).astype("float64"),
    })
    frame["split"] = frame["split"].astype("str")
    frame["name"] = frame["name"].astype("str")
    return frame


def _parse_frame(chunk: bytes) -> pd.DataFrame:
    """Complete lines -> long-format frame: pyarrow's columnar reader for big chunks (a 1M-line
    file in a fraction of a second), the row parser for small ones and odd content."""
    if len(chunk) >= _ARROW_MIN_BYTES:
        frame = _parse_frame_arrow(chunk)
        if frame is not None:
            return frame
    return rows_to_frame(_parse(chunk))


# Below this size the row parser wins (pyarrow's reader has a fixed cost of ~0.1-0.3 ms).
_ARROW_MIN_BYTES = 64 * 1024


def rows_to_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """A long-format DataFrame with the columns ``COLUMNS`` (empty rows -> empty frame)."""
    frame = pd.DataFrame.from_records(rows, columns=list(COLUMNS))
    frame["step"] = pd.to_numeric(frame["step"], errors="coerce").astype("Int64")
    frame["wall_time"] = pd.to_numeric(frame["wall_time"], errors="coerce").astype("float64")
    frame["value"] = pd.to_numeric(frame["value"], errors="coerce").astype("float64")
    frame["split"] = frame["split"].astype("str") if len(frame) else frame["split"].astype(object)
    frame["name"] = frame["name"].astype("str") if len(frame) else frame["name"].astype(object)
    return frame


class MetricsTail:
    """Reads the complete lines appended to a ``metrics.jsonl`` since the last call.

    Args:
        path: the ``metrics.jsonl`` file (it may not exist yet).

    Example:
        >>> tail = MetricsTail("workspace/runs/r-20260101-abc123/metrics.jsonl")  # doctest: +SKIP
        >>> new_rows = tail.read()          # list of dicts, only the new complete lines
        >>> frame = tail.read_frame()       # the same, as a long-format DataFrame
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self.offset = 0
        self._inode: tuple[int, int] | None = None
        # +1 each time the file was replaced or truncated under the reader (a resumed run drops
        # the rows its dead attempt logged past the checkpoint): rows read before are stale.
        self.generation = 0

    def reset(self) -> None:
        """Starts over from the beginning of the file."""
        self.offset = 0
        self._inode = None

    def _read_chunk(self) -> bytes:
        """The bytes of the complete lines appended since the previous call (consumed)."""
        try:
            with open(self.path, "rb") as f:
                stat = os.fstat(f.fileno())
                identity = (stat.st_dev, stat.st_ino)
                if self._inode != identity or stat.st_size < self.offset:
                    # A new, replaced or truncated file: start over.
                    if self._inode is not None:
                        self.generation += 1
                    self.offset, self._inode = 0, identity
                if stat.st_size == self.offset:
                    return b""
                f.seek(self.offset)
                chunk = f.read(stat.st_size - self.offset)
        except FileNotFoundError:
            return b""
        end = chunk.rfind(b"\n")
        if end < 0:
            return b""  # a line still being written: left for the next read
        self.offset += end + 1
        return chunk[: end + 1]

    def read(self) -> list[dict[str, Any]]:
        """The rows of the complete lines appended since the previous call (``[]`` if none)."""
        return _parse(self._read_chunk())

    def read_frame(self) -> pd.DataFrame:
        """``read()`` as a long-format DataFrame (parsed column-wise: fast for a long file)."""
        return _parse_frame(self._read_chunk())


def read_all(path: str | os.PathLike[str]) -> pd.DataFrame:
    """Every complete line of a ``metrics.jsonl`` as a long-format DataFrame (empty if missing)."""
    return MetricsTail(path).read_frame()


def downsample(df: pd.DataFrame, max_points: int) -> pd.DataFrame:
    """At most ``max_points`` rows per ``(split, name)`` series, evenly spaced, first and last kept.

    Example:
        >>> frame = rows_to_frame([{"step": s, "wall_time": 0.0, "split": "train",
        ...                         "name": "loss", "value": 1.0 / s} for s in range(1, 1001)])
        >>> len(downsample(frame, 100))
        100
    """
    if not isinstance(max_points, int) or isinstance(max_points, bool) or max_points < 2:
        raise ValueError(f"max_points must be an int >= 2, given: {max_points!r}")
    if len(df) <= max_points:
        return df
    groups = df.groupby(["split", "name"], sort=False, dropna=False).indices
    keep = []
    for positions in groups.values():
        if len(positions) <= max_points:
            keep.append(positions)
        else:
            picks = np.linspace(0, len(positions) - 1, max_points).round().astype(np.int64)
            keep.append(positions[np.unique(picks)])
    order = np.sort(np.concatenate(keep)) if keep else np.array([], dtype=np.int64)
    return df.iloc[order].reset_index(drop=True)
