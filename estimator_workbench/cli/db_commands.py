"""``estimator-workbench db``: the run registry's database.

::

    estimator-workbench db upgrade               bring the registry's schema to this workbench's
    estimator-workbench db copy --to URL         copy the workspace's SQLite runs (and trash)
                                                 into another database, e.g. a team's PostgreSQL

Which registry ``upgrade`` works on: ``--database-url``, else ``$WORKBENCH_DATABASE_URL``, else the
workspace's ``registry.sqlite``. ``copy`` reads the workspace's ``registry.sqlite`` (``--from``
another URL) and checks its work: the rows' count and a SHA-256 over every column of every copied
row, on both sides.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

from estimator_workbench.cli.usage import PROG as _PROG
from estimator_workbench.cli.usage import UsageError
from estimator_workbench.store import migrations
from estimator_workbench.store.database import describe_url, engine_for, resolve_url

__all__ = ["add_parsers", "cmd_db", "copy_registry"]


def add_parsers(sub: Any) -> None:
    """Adds ``db`` to the CLI's subcommands."""
    db = sub.add_parser("db", help="the run registry's database: upgrade its schema, copy it to PostgreSQL")
    db.add_argument("db_command", choices=("upgrade", "copy"))
    db.add_argument("--to", metavar="URL", help="copy: the database to copy into "
                    "(postgresql://user:password@host:port/database)")
    db.add_argument("--from", dest="source", metavar="URL",
                    help="copy: the database to copy from (default: the workspace's registry.sqlite)")


def _rows(url: str, columns: list[str]) -> list[tuple[Any, ...]]:
    import sqlalchemy

    engine = engine_for(url)
    table = sqlalchemy.Table("runs", sqlalchemy.MetaData(), autoload_with=engine)
    with engine.connect() as conn:
        rows = conn.execute(sqlalchemy.select(*(table.c[name] for name in columns))
                            .order_by(table.c.run_id)).fetchall()
        conn.rollback()
    return [tuple(row) for row in rows]


def _checksum(rows: list[tuple[Any, ...]]) -> str:
    digest = hashlib.sha256()
    for row in rows:
        digest.update(json.dumps(list(row), allow_nan=True).encode() + b"\n")
    return "sha256:" + digest.hexdigest()


def copy_registry(source: str, target: str) -> dict[str, Any]:
    """Copies every run row of ``source`` into ``target`` (both upgraded to the newest schema
    first) in one transaction, then compares count and checksum of the copied rows on both sides.

    Rows already in ``target`` and identical are left; a run id in both with different contents,
    or a queued/running run in ``source`` (its runner still writes there), stops the copy.

    Returns:
        ``{'runs', 'trashed', 'already_there', 'checksum', 'audit'}`` (audit: the audit log
        entries appended to the target's).

    Raises:
        ValueError: a conflict, an active run, or checksums that differ after the copy.
    """
    import sqlalchemy

    migrations.upgrade(source)
    migrations.upgrade(target)
    src_table = sqlalchemy.Table("runs", sqlalchemy.MetaData(), autoload_with=engine_for(source))
    columns = [c.name for c in src_table.columns if c.name != "rowid"]
    rows = _rows(source, columns)
    status, trashed = columns.index("status"), columns.index("trashed_at")
    active = [row[0] for row in rows if row[status] in ("queued", "running")]
    if active:
        raise ValueError(f"{len(active)} run(s) are queued or running in {describe_url(source)} "
                         f"({', '.join(active[:5])}); their runners write there: let them finish "
                         "or cancel them, then copy.")
    existing = {row[0]: row for row in _rows(target, columns)}
    differ = [row[0] for row in rows if row[0] in existing and existing[row[0]] != row]
    if differ:
        raise ValueError(f"{len(differ)} run(s) are already in {describe_url(target)} with other "
                         f"contents ({', '.join(differ[:5])}); nothing was copied.")
    new = [row for row in rows if row[0] not in existing]
    dst_table = sqlalchemy.Table("runs", sqlalchemy.MetaData(), autoload_with=engine_for(target))
    with engine_for(source).connect() as conn:  # in SQLite's insertion order (rowid): list ties
        order = [r[0] for r in conn.exec_driver_sql("SELECT run_id FROM runs ORDER BY rowid")] \
            if conn.dialect.name == "sqlite" else [row[0] for row in new]
        conn.rollback()
    position = {run_id: i for i, run_id in enumerate(order)}
    new.sort(key=lambda row: position.get(row[0], len(position)))
    if new:
        with engine_for(target).begin() as conn:
            conn.execute(dst_table.insert(), [dict(zip(columns, row)) for row in new])
    wanted = {row[0] for row in rows}
    copied = [row for row in _rows(target, columns) if row[0] in wanted]
    checksum, check = _checksum(rows), _checksum(copied)
    if len(copied) != len(rows) or checksum != check:
        raise ValueError(f"the copy differs from the source: {len(copied)} of {len(rows)} runs, "
                         f"{check} != {checksum}")
    return {"runs": len(rows), "trashed": sum(row[trashed] is not None for row in rows),
            "already_there": len(rows) - len(new), "checksum": checksum, "audit": _copy_audit_log(source, target)}


_AUDIT_COLUMNS = ("at", "actor", "action", "run_id", "outcome", "detail")


def _copy_audit_log(source: str, target: str) -> int:
    """Appends the source's audit log entries (issue 26.4) that the target lacks, oldest first;
    returns how many."""
    def read(url: str) -> list[tuple[Any, ...]]:
        with engine_for(url).connect() as conn:
            rows = [tuple(r) for r in conn.exec_driver_sql(
                "SELECT at, actor, action, run_id, outcome, detail FROM audit_log ORDER BY id")]
            conn.rollback()
        return rows

    there = set(read(target))
    new = [row for row in read(source) if row not in there]
    if new:
        import sqlalchemy

        with engine_for(target).begin() as conn:
            conn.execute(sqlalchemy.text("INSERT INTO audit_log (at, actor, action, run_id, outcome, detail) VALUES "
                                         "(:at, :actor, :action, :run_id, :outcome, :detail)"),
                         [dict(zip(_AUDIT_COLUMNS, row)) for row in new])
    return len(new)


def cmd_db(args: argparse.Namespace, root: Path) -> int:
    if args.db_command == "upgrade":
        if args.to or args.source:
            raise UsageError("db upgrade takes no --to/--from; it upgrades the registry named by "
                             "--database-url, $WORKBENCH_DATABASE_URL or the workspace.")
        url = resolve_url(root)
        where = describe_url(url)
        if url.startswith("sqlite") and not Path(url.split(":///", 1)[-1]).exists():
            print(f"No registry at {where} yet: nothing to upgrade (the first run creates it).")
            return 0
        before = migrations.upgrade(url)
        if before == migrations.HEAD:
            print(f"The registry {where} is at schema revision {migrations.HEAD} already.")
        else:
            print(f"The registry {where} upgraded from {before or 'nothing'} to schema revision "
                  f"{migrations.HEAD}.")
        return 0
    if not args.to:
        raise UsageError(f"db copy needs --to URL, e.g. `{_PROG} db copy --to "
                         "postgresql://user:password@host:5432/workbench`.")
    target = resolve_url(root, args.to)
    source = resolve_url(root, args.source) if args.source else resolve_url(root, "sqlite:///" + str(
        (root / "registry.sqlite").absolute()))
    if source == target:
        raise UsageError(f"--to names the registry being copied ({describe_url(source)}).")
    if source.startswith("sqlite") and not Path(source.split(":///", 1)[-1]).exists():
        raise UsageError(f"No registry at {describe_url(source)} to copy.")
    done = copy_registry(source, target)
    print(f"Copied {done['runs'] - done['already_there']} run(s) from {describe_url(source)} to "
          f"{describe_url(target)} ({done['already_there']} already there; {done['trashed']} in the "
          f"trash).")
    print(f"Verified: {done['runs']} runs on both sides, checksum {done['checksum']} on both.")
    print(f"Audit log: {done['audit']} entr{'y' if done['audit'] == 1 else 'ies'} copied.")
    print(f"Use it: export WORKBENCH_DATABASE_URL='{describe_url(target)}' (with its password), or "
          f"`{_PROG} --database-url URL ...`; the run folders stay in {root}.", file=sys.stderr)
    return 0
