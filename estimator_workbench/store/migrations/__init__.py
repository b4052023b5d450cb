"""Versioned schema migrations of the run registry (alembic, run programmatically; the revisions in
``versions/`` ship inside the package).

Revision ``000N`` brings the schema to version N (the ``schema_version`` table, which an older
workbench reads, keeps its rows too). A SQLite workspace made before alembic has
``schema_version`` rows but no ``registry_alembic_version``: it is stamped at its version, then upgraded
in place (columns are added, no row is rewritten). An upgrade takes the database's write lock
first (SQLite: ``BEGIN IMMEDIATE``; PostgreSQL: an advisory lock), so concurrent first writes of
many runners migrate once.

Example:
    >>> upgrade("sqlite:////tmp/ws/registry.sqlite")   # doctest: +SKIP
    '0004'
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import sqlalchemy

__all__ = ["HEAD", "REVISIONS", "VERSION_TABLE", "current_revision", "upgrade"]

REVISIONS = ("0001", "0002", "0003", "0004", "0005")
HEAD = REVISIONS[-1]
# Where alembic keeps the registry's revision (not "alembic_version": Optuna's RDB storage uses
# that one when sweeps share the database).
VERSION_TABLE = "registry_alembic_version"

_HERE = Path(__file__).resolve().parent
# pg_advisory_xact_lock key of a schema upgrade: any constant, the same in every workbench
_UPGRADE_LOCK = 0x65776273  # 'ewbs'


def _table_exists(conn: sqlalchemy.Connection, table: str) -> bool:
    import sqlalchemy

    return sqlalchemy.inspect(conn).has_table(table)


def _read_revision(conn: sqlalchemy.Connection) -> str | None:
    """alembic's revision, else ``'legacy:<n>'`` for a pre-alembic SQLite registry of schema
    version n, else None (an empty database)."""
    if _table_exists(conn, VERSION_TABLE):
        row = conn.exec_driver_sql("SELECT version_num FROM registry_alembic_version").fetchone()
        if row is not None:
            return str(row[0])
    if _table_exists(conn, "schema_version"):
        version = conn.exec_driver_sql("SELECT MAX(version) FROM schema_version").scalar()
        if version:
            return f"legacy:{int(version)}"
    return None


def current_revision(url: str) -> str | None:
    """The database's revision (``'0004'``), ``'legacy:<n>'`` or None (nothing there yet)."""
    from estimator_workbench.store.database import engine_for

    with engine_for(url).connect() as conn:
        try:
            return _read_revision(conn)
        finally:
            conn.rollback()


def _newer(url: str, revision: str) -> RuntimeError:
    from estimator_workbench.store.database import describe_url

    return RuntimeError(
        f"The run registry {describe_url(url)} has schema revision {revision}, newer than this "
        f"workbench's ({HEAD}); upgrade the workbench.")


def upgrade(url: str) -> str | None:
    """Brings the database at ``url`` to ``HEAD`` (creating the tables in an empty one) and
    returns the revision it was at before (None: empty). Safe to call from many processes."""
    from estimator_workbench.store.database import engine_for

    engine = engine_for(url)
    before = current_revision(url)  # the fast path of every process's first write
    if before == HEAD:
        return before
    if before is not None and not before.startswith("legacy:") and before not in REVISIONS:
        raise _newer(url, before)
    import sqlalchemy
    from alembic import command
    from alembic.config import Config

    with engine.connect() as conn:
        if conn.dialect.name == "sqlite":
            if str(conn.exec_driver_sql("PRAGMA journal_mode").scalar()).lower() != "wal":
                conn.exec_driver_sql("PRAGMA journal_mode = WAL")
            conn.commit()
            conn.execution_options(sqlite_begin="BEGIN IMMEDIATE")
        with conn.begin():
            if conn.dialect.name == "postgresql":
                conn.execute(sqlalchemy.text("SELECT pg_advisory_xact_lock(:key)"), {"key": _UPGRADE_LOCK})
            before = _read_revision(conn)  # again, under the lock
            if before == HEAD:
                return before
            config = Config()
            config.set_main_option("script_location", str(_HERE))
            config.attributes["connection"] = conn
            config.attributes["version_table"] = VERSION_TABLE
            if before is not None and before.startswith("legacy:"):
                version = int(before.split(":", 1)[1])
                if version > len(REVISIONS):
                    raise _newer(url, f"(schema_version {version})")
                command.stamp(config, REVISIONS[version - 1])
            elif before is not None and before not in REVISIONS:
                raise _newer(url, before)
            command.upgrade(config, "head")
    return before
