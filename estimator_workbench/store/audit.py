"""Who may act on a run, and the audit log of what was done (issue 26.4).

Everyone signed in sees the team's runs; only a run's owner (``RunRecord.owner``) or an admin
stops, cancels, resumes, deletes (to the trash), restores or empties it from the trash. A run
registered before owners existed (``owner`` None) is anyone's. Every such action -- done or
refused -- is a row of the registry's ``audit_log`` table (migration 0005): when, who, what,
which run, the outcome and a detail (the refusal's reason, an error).

Example::

    >>> reason = refusal(record, Actor("bob"), "cancel")   # doctest: +SKIP
    >>> reason                                              # doctest: +SKIP
    "Run 'r-20260101-abc123' belongs to alice: only alice or an admin can cancel it."
    >>> record_action(registry, Actor("bob"), "cancel", record.run_id, "refused", reason)  # doctest: +SKIP
    >>> audit_entries(registry)[0].outcome                  # doctest: +SKIP
    'refused'
"""

from __future__ import annotations

import dataclasses
import time

from estimator_workbench.store.records import RunRecord
from estimator_workbench.store.registry import RunRegistry
from estimator_workbench.store.registry_db import Connection
from estimator_workbench.store.users import Actor

__all__ = ["AUDITED_ACTIONS", "OUTCOMES", "AuditEntry", "NotAllowedError", "audit_entries", "authorize",
           "record_action", "refusal"]

AUDITED_ACTIONS = ("stop", "cancel", "resume", "trash", "restore", "delete")
OUTCOMES = ("done", "refused", "failed")
_VERBS = {"trash": "delete", "delete": "delete for good"}


class NotAllowedError(PermissionError):
    """The actor may not do this to the run (it is someone else's and they are not an admin)."""


@dataclasses.dataclass(frozen=True)
class AuditEntry:
    """One row of the audit log.

    Example:
        >>> AuditEntry(0.0, "alice", "stop", "r-19700101-000000", "done", "").outcome
        'done'
    """

    at: float
    actor: str
    action: str
    run_id: str
    outcome: str
    detail: str


def refusal(record: RunRecord, actor: Actor, action: str) -> str | None:
    """Why ``actor`` may not ``action`` the run (a sentence for a disabled button's help or an
    error), or None when they may: they own it, they are an admin, or it has no owner."""
    if record.owner is None or actor.admin or actor.name == record.owner:
        return None
    verb = _VERBS.get(action, action)
    return (f"Run {record.run_id!r} belongs to {record.owner}: only {record.owner} or an admin can "
            f"{verb} it.")


def authorize(registry: RunRegistry, record: RunRecord, actor: Actor, action: str) -> None:
    """Raises ``NotAllowedError`` (after logging the refusal) when ``refusal`` gives a reason."""
    reason = refusal(record, actor, action)
    if reason is not None:
        record_action(registry, actor, action, record.run_id, "refused", reason)
        raise NotAllowedError(reason)


def record_action(registry: RunRegistry, actor: Actor, action: str, run_id: str, outcome: str = "done",
                  detail: str = "") -> None:
    """Appends one row to the audit log."""
    if action not in AUDITED_ACTIONS:
        raise ValueError(f"action must be one of {list(AUDITED_ACTIONS)}, given: {action!r}")
    if outcome not in OUTCOMES:
        raise ValueError(f"outcome must be one of {list(OUTCOMES)}, given: {outcome!r}")

    def append(conn: Connection) -> None:
        conn.execute("INSERT INTO audit_log (at, actor, action, run_id, outcome, detail) "
                     "VALUES (?, ?, ?, ?, ?, ?)", (time.time(), actor.name, action, run_id, outcome, detail))

    registry._write(append)  # the registry's one write transaction (retried on contention)


def audit_entries(registry: RunRegistry, run_id: str | None = None, limit: int = 200) -> list[AuditEntry]:
    """The audit log, newest first (of one run when ``run_id`` is given)."""
    sql = "SELECT at, actor, action, run_id, outcome, detail FROM audit_log"
    args: tuple[object, ...] = ()
    if run_id is not None:
        sql += " WHERE run_id = ?"
        args = (run_id,)
    sql += " ORDER BY id DESC LIMIT ?"
    rows = registry._read(sql, (*args, int(limit)))
    return [AuditEntry(float(r["at"]), r["actor"], r["action"], r["run_id"], r["outcome"], r["detail"])
            for r in rows]
