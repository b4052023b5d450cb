"""The trash of a workspace: deleting a run moves it here, from where it can be restored until the
trash is emptied.

A trashed run keeps its registry row and its folder ``runs/<run_id>`` where they are; only the
registry's ``trashed_at`` column marks it, and ``RunRegistry.list_runs`` leaves it out of every list
unless asked (``trashed=True``). Moving the folder (to ``<workspace>/trash/<run_id>``) was the other
choice; it was rejected because other runs and processes hold paths into a run's folder: an
evaluate/predict run's ``checkpoint_path`` and a warm start point at ``runs/<id>/model/...``, a
resume continues in ``runs/<id>/model``, and the UI tails ``runs/<id>/metrics.jsonl`` by path.
Kept in place, trashing and restoring are one atomic registry update and never break those paths;
only emptying the trash removes folders, and it skips a run whose folder a queued or running run
still reads. Emptying the whole trash also removes orphans: run folders without a registry row,
left by a delete killed between the two steps of an older workbench (``orphan_folders``).

Example:
    >>> from estimator_workbench.store.registry import RunRegistry          # doctest: +SKIP
    >>> reg = RunRegistry("/tmp/ws")                               # doctest: +SKIP
    >>> move_to_trash(reg, ["r-20260101-abc123"]).done             # doctest: +SKIP
    ['r-20260101-abc123']
    >>> [t.record.run_id for t in trashed_runs(reg)]               # doctest: +SKIP
    ['r-20260101-abc123']
    >>> restore(reg, ["r-20260101-abc123"]).done                   # doctest: +SKIP
    ['r-20260101-abc123']
"""

from __future__ import annotations

import dataclasses
import re
import shutil
import sqlite3
import time
from collections.abc import Iterable
from pathlib import Path

from estimator_workbench.store import paths
from estimator_workbench.store.records import RunNotFoundError, RunRecord
from estimator_workbench.store.registry import RunRegistry
from estimator_workbench.store.registry_db import Connection

__all__ = ["ORPHAN_MIN_AGE_S", "TrashOutcome", "TrashedRun", "empty_trash", "move_to_trash", "orphan_folders",
           "restore", "restore_run", "trash_run", "trashed_runs", "trashed_times"]

# A run's folder is made inside the transaction that inserts its row: a folder younger than this
# may belong to a run being created, never an orphan.
ORPHAN_MIN_AGE_S = 60.0
_RUN_FOLDER = re.compile(r"r-\d{8}-[0-9a-f]{6}")


@dataclasses.dataclass(frozen=True)
class TrashedRun:
    """A run in the trash and when it was put there (Unix seconds).

    Example:
        >>> trashed_runs(RunRegistry("/tmp/ws"))[0].trashed_at   # doctest: +SKIP
        1764768000.0
    """

    record: RunRecord
    trashed_at: float


@dataclasses.dataclass(frozen=True)
class TrashOutcome:
    """What a bulk trash operation did: the run ids it handled, and why it left the others.

    Example:
        >>> out = TrashOutcome(done=["r-1"], refused={"r-2": "Run 'r-2' is running; cancel it first."})
        >>> out.message()
        "1 run done; 1 left as it was: Run 'r-2' is running; cancel it first."
    """

    done: list[str]
    refused: dict[str, str]
    orphans: list[str] = dataclasses.field(default_factory=list)  # folders without a row, removed

    def message(self) -> str:
        """One line for a toast or the CLI."""
        text = f"{len(self.done)} run{'' if len(self.done) == 1 else 's'} done"
        if self.orphans:
            text += f"; {len(self.orphans)} orphan folder{'' if len(self.orphans) == 1 else 's'} removed"
        if self.refused:
            text += f"; {len(self.refused)} left as it was: " + " ".join(self.refused.values())
        return text


# The registry's transaction helpers (_write: one write transaction, retried on lock
# contention; _read: tolerant of a missing database; _fetch) are shared within estimator_workbench.store.

def trash_run(registry: RunRegistry, run_id: str) -> float:
    """Moves one run to the trash (its row and folder stay, hidden from ``list_runs``); returns
    when it was trashed (the earlier time when it already was).

    Raises:
        ValueError: the run is queued or running (cancel it first).
        RunNotFoundError: no such run.
    """
    def move(conn: Connection) -> float:
        record = registry._fetch(conn, run_id)
        if record.is_active:
            raise ValueError(f"Run {run_id!r} ({record.name!r}) is {record.status}; cancel it before "
                             "moving it to the trash.")
        row = conn.execute("SELECT trashed_at FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        if row["trashed_at"] is not None:
            return float(row["trashed_at"])
        now = time.time()
        conn.execute("UPDATE runs SET trashed_at = ? WHERE run_id = ?", (now, run_id))
        return now

    return registry._write(move)


def restore_run(registry: RunRegistry, run_id: str) -> RunRecord:
    """Takes one run out of the trash (a run not in it is left as it is).

    Raises:
        RunNotFoundError: no such run.
    """
    def back(conn: Connection) -> RunRecord:
        registry._fetch(conn, run_id)
        conn.execute("UPDATE runs SET trashed_at = NULL WHERE run_id = ?", (run_id,))
        return registry._fetch(conn, run_id)

    return registry._write(back)


def trashed_times(registry: RunRegistry) -> dict[str, float]:
    """``run id -> when it was moved to the trash`` of every run in the trash (one query)."""
    try:
        rows = registry._read("SELECT run_id, trashed_at FROM runs WHERE trashed_at IS NOT NULL")
    except sqlite3.OperationalError as exc:
        if "no such column: trashed_at" not in str(exc):
            raise
        return {}  # a workspace of an older workbench that no write migrated yet
    return {row["run_id"]: float(row["trashed_at"]) for row in rows}


def move_to_trash(registry: RunRegistry, run_ids: Iterable[str]) -> TrashOutcome:
    """Moves each run to the trash; a queued or running run is refused (cancel it first)."""
    done, refused = [], {}
    for run_id in dict.fromkeys(run_ids):
        try:
            trash_run(registry, run_id)
            done.append(run_id)
        except (ValueError, RunNotFoundError) as exc:
            refused[run_id] = str(exc)
    return TrashOutcome(done, refused)


def restore(registry: RunRegistry, run_ids: Iterable[str]) -> TrashOutcome:
    """Takes each run out of the trash."""
    done, refused = [], {}
    for run_id in dict.fromkeys(run_ids):
        try:
            restore_run(registry, run_id)
            done.append(run_id)
        except RunNotFoundError as exc:
            refused[run_id] = str(exc)
    return TrashOutcome(done, refused)


def trashed_runs(registry: RunRegistry) -> list[TrashedRun]:
    """The runs in the trash, the most recently trashed first."""
    times = trashed_times(registry)
    if not times:
        return []
    records = registry.list_runs(trashed=True)
    out = [TrashedRun(r, times[r.run_id]) for r in records if r.run_id in times]
    return sorted(out, key=lambda t: t.trashed_at, reverse=True)


def _readers(registry: RunRegistry, run_id: str) -> list[str]:
    """Queued or running runs that start from ``run_id``'s folder (checkpoint, warm start, resume)."""
    return [r.run_id for r in registry.list_runs(("queued", "running"), trashed=None)
            if r.parent_run_id == run_id]


def orphan_folders(registry: RunRegistry, min_age_s: float = ORPHAN_MIN_AGE_S) -> list[Path]:
    """Run folders (``runs/r-<date>-<hex>``) without a registry row, older than ``min_age_s``:
    what a delete killed after removing the row (before issue 24) left behind."""
    root = paths.runs_root(registry.root)
    if not root.is_dir():
        return []
    known = {r.run_id for r in registry.list_runs(trashed=None)}
    now = time.time()
    found = []
    for folder in sorted(root.iterdir()):
        if not _RUN_FOLDER.fullmatch(folder.name) or folder.name in known or not folder.is_dir():
            continue
        try:
            if now - folder.stat().st_mtime < min_age_s:
                continue
        except OSError:
            continue
        found.append(folder)
    return found


def empty_trash(registry: RunRegistry, run_ids: Iterable[str] | None = None) -> TrashOutcome:
    """Deletes runs in the trash for good (rows and folders): all of them, or only ``run_ids``;
    emptying all of it also removes ``orphan_folders``.

    A run that is not in the trash is refused (delete it to the trash first), and so is one whose
    folder a queued or running run still reads (wait for that run or cancel it).
    """
    times = trashed_times(registry)
    wanted = list(times) if run_ids is None else list(dict.fromkeys(run_ids))
    done, refused = [], {}
    for run_id in wanted:
        if run_id not in times:
            refused[run_id] = (f"Run {run_id!r} is not in the trash; delete it (to the trash) "
                               "before emptying the trash.")
            continue
        try:
            if registry.get(run_id).is_active:
                refused[run_id] = f"Run {run_id!r} is queued or running; cancel it first."
                continue
        except RunNotFoundError as exc:
            refused[run_id] = str(exc)
            continue
        readers = _readers(registry, run_id)
        if readers:
            refused[run_id] = (f"Run {run_id!r} is still read by active run(s) {readers}; let them "
                               "finish or cancel them, then empty the trash again.")
            continue
        try:
            registry.delete(run_id)
            done.append(run_id)
        except (ValueError, RunNotFoundError) as exc:
            refused[run_id] = str(exc)
    orphans = []
    if run_ids is None:
        for folder in orphan_folders(registry):
            shutil.rmtree(folder, ignore_errors=True)
            orphans.append(folder.name)
    return TrashOutcome(done, refused, orphans)
