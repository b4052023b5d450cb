"""Reading a run's ``metrics.jsonl``: incremental tail by byte offset, full reads, downsampling.

The file is append-only (``workbench.metrics_hook``), so a reader remembers how many bytes it has
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


def _parse(chunk: bytes) -> list[dict[str, Any]]:
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

    def reset(self) -> None:
        """Starts over from the beginning of the file."""
        self.offset = 0
        self._inode = None

    def read(self) -> list[dict[str, Any]]:
        """The rows of the complete lines appended since the previous call (``[]`` if none)."""
        try:
            with open(self.path, "rb") as f:
                stat = os.fstat(f.fileno())
                identity = (stat.st_dev, stat.st_ino)
                if self._inode != identity or stat.st_size < self.offset:
                    # A new or truncated file (the run was deleted and re-created): start over.
                    self.offset, self._inode = 0, identity
                if stat.st_size == self.offset:
                    return []
                f.seek(self.offset)
                chunk = f.read(stat.st_size - self.offset)
        except FileNotFoundError:
            return []
        end = chunk.rfind(b"\n")
        if end < 0:
            return []
        self.offset += end + 1
        return _parse(chunk[: end + 1])

    def read_frame(self) -> pd.DataFrame:
        """``read()`` as a long-format DataFrame."""
        return rows_to_frame(self.read())


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
