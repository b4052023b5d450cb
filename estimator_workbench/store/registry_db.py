"""The SQLite plumbing of the run registry: connections, the schema and its migrations, lock
retries and a full disk (``RunRegistry`` in ``estimator_workbench.store.registry`` builds on it).

SQLite runs in WAL mode with ``synchronous=NORMAL`` and a busy timeout, so the UI, the launcher
and every runner read and write concurrently; writes are short ``BEGIN IMMEDIATE`` transactions
(a deferred transaction that upgrades to a write can fail with "database is locked" without
waiting for the busy timeout) and are retried on contention. Readers tolerate a workspace whose
database or tables do not exist yet (they see no rows) and never create the file. On a full disk,
reads fall back to a read-only connection and writes raise ``RegistryError("disk full: ...")``.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from estimator_workbench.store import paths
from estimator_workbench.store.guards import disk_full_error, is_disk_full, read_only_retry
from estimator_workbench.store.records import RegistryError, RunNotFoundError, RunRecord

__all__ = ["SCHEMA_VERSION", "RegistryDatabase"]


_BUSY_TIMEOUT_MS = 10_000

_LOCK_RETRIES = 50


# Migrations: entry i brings the schema from version i to i + 1. Append, never edit.
_MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        """CREATE TABLE runs (
            run_id TEXT PRIMARY KEY,
            name TEXT NOT NULL,
            action TEXT NOT NULL,
            status TEXT NOT NULL,
            dataset_json TEXT NOT NULL,
            dataset_fingerprint TEXT,
            template_name TEXT,
            template_code TEXT,
            params_json TEXT NOT NULL,
            run_config_json TEXT NOT NULL,
            schedule_json TEXT NOT NULL DEFAULT '{}',
            parent_run_id TEXT,
            parent_relation TEXT,
            checkpoint_path TEXT,
            num_processes INTEGER NOT NULL DEFAULT 1,
            pid INTEGER,
            heartbeat_at REAL,
            created_at REAL NOT NULL,
            started_at REAL,
            finished_at REAL,
            error TEXT,
            traceback TEXT,
            summary_json TEXT NOT NULL DEFAULT '{}',
            tags_json TEXT NOT NULL DEFAULT '[]',
            note TEXT NOT NULL DEFAULT ''
        )""",
        "CREATE INDEX runs_status ON runs(status)",
        "CREATE INDEX runs_created ON runs(created_at)",
    ),
    (  # issue 14: the owning attempt (fencing token), the pid's start time, training progress
        "ALTER TABLE runs ADD COLUMN attempt INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE runs ADD COLUMN pid_started REAL",
        "ALTER TABLE runs ADD COLUMN last_step INTEGER",
        "ALTER TABLE runs ADD COLUMN last_step_at REAL",
    ),
    ("ALTER TABLE runs ADD COLUMN trashed_at REAL",),  # the trash: estimator_workbench.store.trash
    # issue 24: the heartbeat on the clock since boot too (guards.uptime), which a step of the
    # wall clock does not move
    ("ALTER TABLE runs ADD COLUMN heartbeat_uptime REAL",),
)


SCHEMA_VERSION = len(_MIGRATIONS)


_T = TypeVar("_T")


def _is_locked(exc: sqlite3.OperationalError) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def _rollback(conn: sqlite3.Connection) -> None:
    """Rolls back a failed transaction. SQLite has rolled it back itself after some errors (a
    full disk: SQLITE_FULL), and then ROLLBACK fails with "cannot rollback - no transaction is
    active", which hid the real error (issue 24 item 13)."""
    if conn.in_transaction:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")


def _is_missing(exc: sqlite3.OperationalError) -> bool:
    return "no such table" in str(exc).lower()


def json_text(value: Any, what: str) -> str:
    try:
        return json.dumps(value, sort_keys=True, allow_nan=True)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{what} must be JSON-serialisable, given: {value!r} ({exc}).") from exc



class RegistryDatabase:
    """Connections, schema, transactions and retries over ``<root>/registry.sqlite``: the base of
    ``RunRegistry``, whose ``__init__`` sets ``root``, ``db_path`` and ``_initialised``.

    Example:
        >>> from estimator_workbench.store.registry import RunRegistry                    # doctest: +SKIP
        >>> RunRegistry("/tmp/ws")._read("SELECT COUNT(*) FROM runs")           # doctest: +SKIP
        []
    """

    root: Path
    db_path: Path
    _initialised: bool

    def _connect(self, read_only: str | None = None) -> sqlite3.Connection:
        """A connection; ``read_only='ro'`` or ``'immutable'`` opens the file read-only (the
        latter skips the WAL and its -shm index, so it needs no disk space at all)."""
        if read_only is None:
            target: str | Path = self.db_path
        else:
            target = f"file:{urllib.parse.quote(str(self.db_path))}?mode=ro" + (
                "&immutable=1" if read_only == "immutable" else "")
        conn = sqlite3.connect(target, timeout=_BUSY_TIMEOUT_MS / 1000, isolation_level=None,
                               check_same_thread=False, uri=read_only is not None)
        conn.row_factory = sqlite3.Row
        conn.execute(f"PRAGMA busy_timeout = {_BUSY_TIMEOUT_MS}")
        if read_only is None:
            conn.execute("PRAGMA synchronous = NORMAL")
        return conn

    def _disk_full(self, exc: BaseException) -> RegistryError | None:
        """A clear ``RegistryError`` when ``exc`` means the disk is full, else None."""
        return disk_full_error(exc, self.root) if is_disk_full(exc, self.root) else None

    def _retry(self, fn: Callable[[], _T]) -> _T:
        delay = 0.005
        for attempt in range(_LOCK_RETRIES):
            try:
                return fn()
            except sqlite3.OperationalError as exc:
                if not _is_locked(exc) or attempt == _LOCK_RETRIES - 1:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 0.2)
        raise AssertionError("unreachable")  # pragma: no cover

    def _ensure_schema(self) -> None:
        if self._initialised:
            return
        # Owner-only whatever the umask (issue 24.8); sqlite gives -wal/-shm the database's mode.
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        paths.runs_root(self.root).mkdir(mode=0o700, exist_ok=True)
        if not self.db_path.exists():
            os.close(os.open(self.db_path, os.O_WRONLY | os.O_CREAT, 0o600))

        def init() -> None:
            conn = self._connect()
            try:
                if conn.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                    conn.execute("PRAGMA journal_mode = WAL")
                conn.execute("BEGIN IMMEDIATE")
                try:
                    conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
                    row = conn.execute("SELECT MAX(version) FROM schema_version").fetchone()
                    version = row[0] or 0
                    if version > SCHEMA_VERSION:
                        raise RuntimeError(
                            f"{self.db_path} has schema version {version}, newer than this "
                            f"workbench ({SCHEMA_VERSION}); upgrade the workbench.")
                    for target in range(version, SCHEMA_VERSION):
                        for statement in _MIGRATIONS[target]:
                            conn.execute(statement)
                        conn.execute("INSERT INTO schema_version (version) VALUES (?)", (target + 1,))
                    conn.execute("COMMIT")
                except BaseException:
                    _rollback(conn)
                    raise
            finally:
                conn.close()

        try:
            self._retry(init)
        except (sqlite3.OperationalError, OSError) as exc:
            full = self._disk_full(exc)
            if full is not None:
                raise full from exc
            raise
        self._initialised = True

    def _write(self, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        """Runs ``fn(conn)`` in one ``BEGIN IMMEDIATE`` transaction, retried on lock contention;
        a full disk raises ``RegistryError('disk full: ...')``."""
        try:
            return self._write_once(fn)
        except RegistryError:
            raise
        except (sqlite3.OperationalError, OSError) as exc:
            full = self._disk_full(exc)
            if full is not None:
                raise full from exc
            raise

    def _write_once(self, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        self._ensure_schema()

        def attempt() -> _T:
            conn = self._connect()
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    result = fn(conn)
                    conn.execute("COMMIT")
                    return result
                except BaseException:
                    _rollback(conn)
                    raise
            finally:
                conn.close()

        return self._retry(attempt)

    def _read(self, sql: str, args: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
        """A read that sees no rows when the database or its tables do not exist yet."""
        if not self.db_path.exists():
            return []

        def attempt(read_only: str | None = None) -> list[sqlite3.Row]:
            conn = self._connect(read_only)
            try:
                return conn.execute(sql, args).fetchall()
            except sqlite3.OperationalError as exc:
                if _is_missing(exc):
                    return []
                raise
            finally:
                conn.close()

        try:
            return self._retry(attempt)
        except sqlite3.OperationalError as exc:
            # A full disk: a normal connection writes the -shm index; read the file read-only.
            return read_only_retry(attempt, self.db_path, exc)

    @staticmethod
    def _fetch(conn: sqlite3.Connection, run_id: str) -> RunRecord:
        row = conn.execute("SELECT * FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        if row is None:
            raise RunNotFoundError(f"No run {run_id!r} in this workspace; list runs with `runs`.")
        return RunRecord.from_row(row)
