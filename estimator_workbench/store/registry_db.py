"""The database plumbing of the run registry: SQLite (the embedded default, one file per
workspace) or PostgreSQL (a team's server), through one data-access layer on SQLAlchemy Core;
``RunRegistry`` in ``estimator_workbench.store.registry`` builds on it.

Which database: ``RunRegistry(root, database_url=...)``, else ``$WORKBENCH_DATABASE_URL``, else
``<root>/registry.sqlite``. A ``postgresql://user:pass@host:port/db`` URL is driven by psycopg 3.
The schema is versioned by alembic (``estimator_workbench/store/migrations``, shipped in the
package); the first write upgrades an older database in place (``upgrade_database``).

SQLite runs in WAL mode with ``synchronous=NORMAL`` and a busy timeout, so the UI, the launcher
and every runner read and write concurrently; writes are short ``BEGIN IMMEDIATE`` transactions
(a deferred transaction that upgrades to a write can fail with "database is locked" without
waiting for the busy timeout) and are retried on contention. Readers tolerate a workspace whose
database or tables do not exist yet (they see no rows) and never create the file. On a full disk,
reads fall back to a read-only connection and writes raise ``RegistryError("disk full: ...")``.

PostgreSQL: a write reads the run's row ``FOR UPDATE`` (one writer per run, as SQLite's
``BEGIN IMMEDIATE`` gives), retries serialisation failures and deadlocks, and retries a server it
cannot reach for ``$WORKBENCH_DATABASE_RETRY_S`` seconds (default 30) before raising
``RegistryError("database unreachable: ...")``.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import time
import urllib.parse
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from estimator_workbench.store import paths
from estimator_workbench.store.database import (
    BUSY_TIMEOUT_MS,
    DATABASE_URL_ENV,
    describe_url,
    dispose_engines,
    engine_for,
    is_sqlite_url,
    resolve_url,
)
from estimator_workbench.store.guards import disk_full_error, is_disk_full, read_only_retry
from estimator_workbench.store.records import RegistryError, RunNotFoundError, RunRecord

if TYPE_CHECKING:
    import sqlalchemy

__all__ = ["DATABASE_URL_ENV", "SCHEMA_VERSION", "Connection", "RegistryDatabase", "Row",
           "describe_url", "dispose_engines", "engine_for", "resolve_url"]

RETRY_ENV = "WORKBENCH_DATABASE_RETRY_S"

_LOCK_RETRIES = 50

# The schema_version rows the alembic revisions keep writing (an older workbench reads them):
# revision i of estimator_workbench/store/migrations/versions brings the schema to version i.
SCHEMA_VERSION = 5


_T = TypeVar("_T")


# -- rows and connections ----------------------------------------------------------------------

class Row:
    """A result row read by column name or position, as ``sqlite3.Row`` was.

    Example:
        >>> row = Row(("run_id", "status"), ("r-1", "queued"))
        >>> (row["status"], row[0], row.keys())
        ('queued', 'r-1', ['run_id', 'status'])
    """

    __slots__ = ("_index", "_values")

    def __init__(self, keys: Sequence[str], values: Sequence[Any]) -> None:
        self._index = {key: i for i, key in enumerate(keys)}
        self._values = tuple(values)

    def __getitem__(self, key: int | str) -> Any:
        return self._values[key if isinstance(key, int) else self._index[key]]

    def keys(self) -> list[str]:
        return list(self._index)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"Row({dict(zip(self._index, self._values))!r})"


class _Result:
    def __init__(self, rows: list[Row]) -> None:
        self._rows = rows

    def fetchone(self) -> Any:  # Row or None, typed as sqlite3's cursor types it
        return self._rows[0] if self._rows else None

    def fetchall(self) -> list[Row]:
        return self._rows


def _unwrap(exc: BaseException) -> BaseException:
    """The driver's own exception (``sqlite3.*``, ``psycopg.*``) under SQLAlchemy's wrapper, so
    that the registry's handling (locks, a full disk, missing tables) reads the driver's words."""
    orig = getattr(exc, "orig", None)
    return orig if isinstance(orig, BaseException) else exc


class Connection:
    """A registry connection: ``execute(sql, args)`` with ``?`` placeholders on either database,
    rows as ``Row``; ``dialect`` is ``'sqlite'`` or ``'postgresql'``.

    Example:
        >>> conn.execute("SELECT status FROM runs WHERE run_id = ?", ("r-1",)).fetchone()  # doctest: +SKIP
        Row({'status': 'queued'})
    """

    def __init__(self, conn: sqlalchemy.Connection) -> None:
        self._conn = conn
        self.dialect: str = conn.dialect.name

    @property
    def for_update(self) -> str:
        """The suffix that locks the rows a write reads (PostgreSQL; SQLite locks the database)."""
        return "" if self.dialect == "sqlite" else " FOR UPDATE"

    def execute(self, sql: str, args: Sequence[Any] = ()) -> _Result:
        import sqlalchemy

        pieces = sql.split("?")
        if len(pieces) - 1 != len(args):
            raise ValueError(f"{len(pieces) - 1} placeholders, {len(args)} values: {sql}")
        bound = pieces[0] + "".join(f":p{i}{piece}" for i, piece in enumerate(pieces[1:]))
        try:
            result = self._conn.execute(sqlalchemy.text(bound), {f"p{i}": v for i, v in enumerate(args)})
            if not result.returns_rows:
                return _Result([])
            keys = list(result.keys())
            return _Result([Row(keys, row) for row in result.fetchall()])
        except sqlalchemy.exc.DBAPIError as exc:
            raise _unwrap(exc) from None

    def end(self) -> None:
        """Ends the transaction a read began (PostgreSQL begins one for every statement)."""
        with contextlib.suppress(Exception):
            self._conn.rollback()

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._conn.close()


def json_text(value: Any, what: str) -> str:
    try:
        return json.dumps(value, sort_keys=True, allow_nan=True)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{what} must be JSON-serialisable, given: {value!r} ({exc}).") from exc


# -- errors ------------------------------------------------------------------------------------

def _is_locked(exc: BaseException) -> bool:
    if isinstance(exc, sqlite3.OperationalError):
        text = str(exc).lower()
        return "locked" in text or "busy" in text
    # PostgreSQL: serialisation failure, deadlock (40xxx), lock not available (55P03)
    state = getattr(exc, "sqlstate", None) or ""
    return state.startswith("40") or state == "55P03"


def _is_unreachable(exc: BaseException) -> bool:
    """A PostgreSQL server that cannot be reached or went away (not a fault of the statement)."""
    try:
        import psycopg
    except ImportError:  # pragma: no cover - only SQLite then
        return False
    if not isinstance(exc, psycopg.OperationalError) or _is_locked(exc):
        return False
    state = getattr(exc, "sqlstate", None) or ""
    # no state: the connection failed or broke; 08: connection exception; 57P0x: shut down
    return not state or state.startswith("08") or state.startswith("57P")


def _is_missing(exc: BaseException) -> bool:
    return ("no such table" in str(exc).lower()
            or getattr(exc, "sqlstate", None) == "42P01")  # PostgreSQL's undefined_table


def _retry_seconds() -> float:
    try:
        return max(0.0, float(os.environ.get(RETRY_ENV, "30")))
    except ValueError:
        return 30.0


class RegistryDatabase:
    """Connections, schema, transactions and retries over the registry's database: the base of
    ``RunRegistry``, whose ``__init__`` sets ``root``, ``db_path``, ``url`` and ``_initialised``.

    Example:
        >>> from estimator_workbench.store.registry import RunRegistry                    # doctest: +SKIP
        >>> RunRegistry("/tmp/ws")._read("SELECT COUNT(*) FROM runs")           # doctest: +SKIP
        []
    """

    root: Path
    db_path: Path
    url: str
    _initialised: bool

    @property
    def is_sqlite(self) -> bool:
        return is_sqlite_url(self.url)

    @property
    def location(self) -> str:
        """Where the registry is, for messages: the SQLite file or the URL without its password."""
        return str(self.db_path) if self.is_sqlite else describe_url(self.url)

    def _sqlite_file(self) -> Path:
        return Path(self.url.split(":///", 1)[1]) if self.url.startswith("sqlite:///") else self.db_path

    def _connect(self, read_only: str | None = None) -> Connection:
        """A connection (the caller closes it); ``read_only='ro'`` or ``'immutable'`` opens the
        SQLite file read-only (the latter skips the WAL and its -shm index, so it needs no disk
        space at all)."""
        import sqlalchemy

        if read_only is None:
            try:
                return Connection(engine_for(self.url).connect())
            except sqlalchemy.exc.DBAPIError as exc:
                raise _unwrap(exc) from None
        target = f"file:{urllib.parse.quote(str(self._sqlite_file()))}?mode=ro" + (
            "&immutable=1" if read_only == "immutable" else "")

        def creator() -> sqlite3.Connection:
            conn = sqlite3.connect(target, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None,
                                   check_same_thread=False, uri=True)
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            return conn

        engine = sqlalchemy.create_engine("sqlite://", creator=creator,
                                          poolclass=sqlalchemy.pool.NullPool)
        try:
            return Connection(engine.connect())
        except sqlalchemy.exc.DBAPIError as exc:
            raise _unwrap(exc) from None

    def _disk_full(self, exc: BaseException) -> RegistryError | None:
        """A clear ``RegistryError`` when ``exc`` means the disk is full, else None."""
        return disk_full_error(exc, self.root) if is_disk_full(exc, self.root) else None

    def _retry(self, fn: Callable[[], _T]) -> _T:
        delay = 0.005
        deadline: float | None = None
        attempt = 0
        while True:
            try:
                return fn()
            except Exception as exc:
                attempt += 1
                if _is_locked(exc):
                    if attempt >= _LOCK_RETRIES:
                        raise
                elif _is_unreachable(exc):
                    now = time.monotonic()
                    deadline = now + _retry_seconds() if deadline is None else deadline
                    if now >= deadline:
                        raise RegistryError(
                            f"database unreachable: the run registry {self.location} did not "
                            f"answer for {_retry_seconds():.0f} s ({' '.join(str(exc).split())}). Check that "
                            f"the PostgreSQL server is running and reachable, or unset "
                            f"${DATABASE_URL_ENV} to use the workspace's SQLite file.") from exc
                    delay = max(delay, 0.1)
                else:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 0.2 if deadline is None else 2.0)

    def _ensure_schema(self) -> None:
        if self._initialised:
            return
        # Owner-only whatever the umask (issue 24.8); sqlite gives -wal/-shm the database's mode.
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        paths.runs_root(self.root).mkdir(mode=0o700, exist_ok=True)
        if self.is_sqlite and not self._sqlite_file().exists():
            self._sqlite_file().parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            os.close(os.open(self._sqlite_file(), os.O_WRONLY | os.O_CREAT, 0o600))
        from estimator_workbench.store import migrations

        try:
            self._retry(lambda: migrations.upgrade(self.url))
        except RegistryError:
            raise
        except (sqlite3.OperationalError, OSError) as exc:
            full = self._disk_full(exc)
            if full is not None:
                raise full from exc
            raise
        self._initialised = True

    def _write(self, fn: Callable[[Connection], _T]) -> _T:
        """Runs ``fn(conn)`` in one write transaction (SQLite: ``BEGIN IMMEDIATE``), retried on
        lock contention; a full disk raises ``RegistryError('disk full: ...')``."""
        try:
            return self._write_once(fn)
        except RegistryError:
            raise
        except (sqlite3.OperationalError, OSError) as exc:
            full = self._disk_full(exc)
            if full is not None:
                raise full from exc
            raise

    def _write_once(self, fn: Callable[[Connection], _T]) -> _T:
        self._ensure_schema()
        import sqlalchemy

        def attempt() -> _T:
            try:
                sa_conn = engine_for(self.url).connect()
            except sqlalchemy.exc.DBAPIError as exc:
                raise _unwrap(exc) from None
            try:
                if self.is_sqlite:
                    sa_conn.execution_options(sqlite_begin="BEGIN IMMEDIATE")
                conn = Connection(sa_conn)
                try:
                    sa_conn.begin()
                    result = fn(conn)
                    sa_conn.commit()
                    return result
                except sqlalchemy.exc.DBAPIError as exc:
                    self._abort(sa_conn)
                    raise _unwrap(exc) from None
                except BaseException:
                    self._abort(sa_conn)
                    raise
            finally:
                with contextlib.suppress(Exception):
                    sa_conn.close()

        return self._retry(attempt)

    @staticmethod
    def _abort(sa_conn: sqlalchemy.Connection) -> None:
        """Rolls back; SQLite may have rolled back itself (a full disk: SQLITE_FULL), and then
        ROLLBACK failed with "no transaction is active", which hid the real error (issue 24)."""
        with contextlib.suppress(Exception):
            sa_conn.rollback()

    def _read(self, sql: str, args: tuple[Any, ...] = ()) -> list[Row]:
        """A read that sees no rows when the database or its tables do not exist yet."""
        if self.is_sqlite and not self._sqlite_file().exists():
            return []

        def attempt(read_only: str | None = None) -> list[Row]:
            conn = self._connect(read_only)
            try:
                return conn.execute(sql, args).fetchall()
            except Exception as exc:
                if _is_missing(exc):
                    return []
                raise
            finally:
                conn.end()
                conn.close()

        try:
            return self._retry(attempt)
        except sqlite3.OperationalError as exc:
            if not self.is_sqlite or isinstance(exc, RegistryError):
                raise
            # A full disk: a normal connection writes the -shm index; read the file read-only.
            return read_only_retry(attempt, self._sqlite_file(), exc)

    @staticmethod
    def _fetch(conn: Connection, run_id: str) -> RunRecord:
        """The run's row inside a write, locked for it (PostgreSQL: ``FOR UPDATE``)."""
        row = conn.execute("SELECT * FROM runs WHERE run_id = ?" + conn.for_update, (run_id,)).fetchone()
        if row is None:
            raise RunNotFoundError(f"No run {run_id!r} in this workspace; list runs with `runs`.")
        return RunRecord.from_row(row)
