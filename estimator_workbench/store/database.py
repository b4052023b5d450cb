"""Where the run registry lives: its URL (``$WORKBENCH_DATABASE_URL``, ``--database-url``, or the
workspace's ``registry.sqlite``) and one SQLAlchemy engine per URL and process.

SQLite: a fresh connection per transaction, ``isolation_level=None`` with ``PRAGMA busy_timeout``
and ``synchronous=NORMAL``; a write's connection begins with what its ``sqlite_begin`` execution
option says (``BEGIN IMMEDIATE``), reads run in autocommit. PostgreSQL (psycopg 3): a small pool
without pre-ping: connections broken by a server restart fail, are dropped and
are replaced by the registry's retry.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import urllib.parse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from estimator_workbench.store import paths

if TYPE_CHECKING:
    import sqlalchemy

__all__ = ["BUSY_TIMEOUT_MS", "DATABASE_URL_ENV", "describe_url", "dispose_engines", "engine_for",
           "is_sqlite_url", "resolve_url"]

DATABASE_URL_ENV = "WORKBENCH_DATABASE_URL"

BUSY_TIMEOUT_MS = 10_000


# -- URLs --------------------------------------------------------------------------------------

def resolve_url(root: str | os.PathLike[str], url: str | None = None) -> str:
    """The SQLAlchemy URL of a workspace's registry: ``url``, else ``$WORKBENCH_DATABASE_URL``,
    else ``sqlite:///<root>/registry.sqlite``. ``postgresql://`` means psycopg 3.

    Example:
        >>> resolve_url("/tmp/ws", "postgresql://u@localhost:5432/runs")
        'postgresql+psycopg://u@localhost:5432/runs'

    Raises:
        ValueError: a URL of another database (with what is accepted).
    """
    given = url if url is not None else os.environ.get(DATABASE_URL_ENV, "").strip() or None
    if given is None:
        return "sqlite:///" + str(paths.registry_path(Path(root)).absolute())
    scheme = given.split("://", 1)[0].lower() if "://" in given else ""
    if scheme in ("postgresql", "postgres", "postgresql+psycopg"):
        return "postgresql+psycopg://" + given.split("://", 1)[1]
    if scheme == "sqlite":
        return given
    source = "--database-url" if url is not None else f"${DATABASE_URL_ENV}"
    raise ValueError(
        f"{source} must be a postgresql://user:password@host:port/database or sqlite:///path URL, "
        f"given: {describe_url(given)!r}; unset it to keep the registry in the workspace's "
        "registry.sqlite.")


def describe_url(url: str) -> str:
    """``url`` with its password hidden, for messages.

    Example:
        >>> describe_url("postgresql+psycopg://bob:secret@db:5432/runs")
        'postgresql://bob:***@db:5432/runs'
        >>> describe_url("sqlite:////ws/registry.sqlite")
        '/ws/registry.sqlite'
    """
    if is_sqlite_url(url):
        return url.split(":///", 1)[1] if ":///" in url else url  # the file
    parts = urllib.parse.urlsplit(url)
    scheme = parts.scheme.split("+", 1)[0]
    netloc = parts.netloc
    if parts.password is not None:
        netloc = netloc.replace(":" + parts.password + "@", ":***@", 1)
    return urllib.parse.urlunsplit((scheme, netloc, parts.path, parts.query, parts.fragment))


def is_sqlite_url(url: str) -> bool:
    return url.startswith("sqlite")


# -- engines (one per URL and process) ---------------------------------------------------------

_ENGINES: dict[tuple[str, int], sqlalchemy.Engine] = {}
_ENGINES_LOCK = threading.Lock()


def _new_engine(url: str) -> sqlalchemy.Engine:
    import sqlalchemy
    from sqlalchemy import event
    from sqlalchemy.pool import NullPool

    if not is_sqlite_url(url):
        # A runner uses up to 3 connections at once (main thread, heartbeat, owner check). No
        # pre-ping: it cost a round trip per write (p50 126 -> 47 ms, 32 writers on 2 cores); a
        # connection broken by a server restart fails its statement, SQLAlchemy then drops the
        # pool's connections and the registry's retry reconnects.
        return sqlalchemy.create_engine(url, pool_size=2, max_overflow=4,
                                        connect_args={"connect_timeout": 10})
    # A fresh connection per transaction, as the registry always had (no pooled connection
    # keeps the -shm index mapped when the disk fills), opened by this module's sqlite3.connect
    # (the fault-injection tests of a full disk replace it).
    file = url.split(":///", 1)[1] if ":///" in url else ":memory:"

    def creator() -> sqlite3.Connection:
        return sqlite3.connect(file, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None,
                               check_same_thread=False)

    engine = sqlalchemy.create_engine("sqlite://", creator=creator, poolclass=NullPool)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: sqlite3.Connection, _record: Any) -> None:
        dbapi_conn.isolation_level = None  # transactions are begun below, never by pysqlite
        dbapi_conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        dbapi_conn.execute("PRAGMA synchronous = NORMAL")

    @event.listens_for(engine, "begin")
    def _on_begin(conn: sqlalchemy.Connection) -> None:
        begin = conn.get_execution_options().get("sqlite_begin")
        if begin:  # writes: BEGIN IMMEDIATE; reads run in autocommit, as before
            conn.exec_driver_sql(begin)

    return engine


def engine_for(url: str) -> sqlalchemy.Engine:
    """The SQLAlchemy engine of ``url`` in this process (made once; SQLite: a connection per use)."""
    key = (url, os.getpid())  # a forked process makes its own (pooled connections are not shared)
    with _ENGINES_LOCK:
        engine = _ENGINES.get(key)
        if engine is None:
            engine = _ENGINES[key] = _new_engine(url)
        return engine


def dispose_engines() -> None:
    """Closes every pooled connection of this process (tests; before dropping a database)."""
    with _ENGINES_LOCK:
        engines = list(_ENGINES.values())
        _ENGINES.clear()
    for engine in engines:
        engine.dispose()
