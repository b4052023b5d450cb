"""Stop, cancel, resume, delete (to the trash), restore and delete for good, on behalf of a person:
the one place where the UI and the CLI act on a run. Each checks that the actor owns the run or is
an admin (``store.audit``: ``NotAllowedError`` otherwise), acts, and writes the audit log (done,
refused or failed).

Example::

    >>> actor = Actor("alice")
    >>> stop(launcher, "r-20260101-abc123", actor)                    # doctest: +SKIP
    >>> trash_runs(registry, ["r-20260101-abc123"], actor).done       # doctest: +SKIP
    ['r-20260101-abc123']
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from estimator_workbench.store import audit, trash
from estimator_workbench.store.records import RunNotFoundError, RunRecord
from estimator_workbench.store.registry import RunRegistry
from estimator_workbench.store.users import Actor

__all__ = ["cancel", "empty_trash", "restore_runs", "resume", "stop", "trash_runs"]

_T = TypeVar("_T")


def _act(registry: RunRegistry, run_id: str, actor: Actor, action: str, fn: Callable[[], _T]) -> _T:
    record = registry.get(run_id)
    audit.authorize(registry, record, actor, action)
    try:
        result = fn()
    except Exception as exc:
        audit.record_action(registry, actor, action, run_id, "failed", str(exc))
        raise
    audit.record_action(registry, actor, action, run_id)
    return result


def stop(launcher: Any, run_id: str, actor: Actor) -> None:
    """``launcher.stop`` (checkpoint, then 'stopped') when ``actor`` may."""
    _act(launcher.registry, run_id, actor, "stop", lambda: launcher.stop(run_id))


def cancel(launcher: Any, run_id: str, actor: Actor, **kwargs: Any) -> RunRecord:
    """``launcher.cancel`` (SIGTERM, SIGKILL after the grace) when ``actor`` may."""
    return _act(launcher.registry, run_id, actor, "cancel", lambda: launcher.cancel(run_id, **kwargs))


def resume(launcher: Any, run_id: str, actor: Actor) -> RunRecord:
    """``launcher.resume`` (queued again, same model_dir) when ``actor`` may."""
    return _act(launcher.registry, run_id, actor, "resume", lambda: launcher.resume(run_id))


def _each(registry: RunRegistry, run_ids: Iterable[str], actor: Actor, action: str,
          fn: Callable[[list[str]], trash.TrashOutcome], *, always: bool = False) -> trash.TrashOutcome:
    allowed, refused = [], {}
    for run_id in dict.fromkeys(run_ids):
        try:
            audit.authorize(registry, registry.get(run_id), actor, action)
            allowed.append(run_id)
        except (audit.NotAllowedError, RunNotFoundError) as exc:
            refused[run_id] = str(exc)
    outcome = fn(allowed) if allowed or always else trash.TrashOutcome([], {})
    for run_id in outcome.done:
        audit.record_action(registry, actor, action, run_id)
    for run_id, reason in outcome.refused.items():
        audit.record_action(registry, actor, action, run_id, "failed", reason)
    return trash.TrashOutcome(outcome.done, {**refused, **outcome.refused}, outcome.orphans)


def trash_runs(registry: RunRegistry, run_ids: Iterable[str], actor: Actor) -> trash.TrashOutcome:
    """``trash.move_to_trash`` of the runs ``actor`` may delete; the others are refused."""
    return _each(registry, run_ids, actor, "trash", lambda ids: trash.move_to_trash(registry, ids))


def restore_runs(registry: RunRegistry, run_ids: Iterable[str], actor: Actor) -> trash.TrashOutcome:
    """``trash.restore`` of the runs ``actor`` may restore; the others are refused."""
    return _each(registry, run_ids, actor, "restore", lambda ids: trash.restore(registry, ids))


def empty_trash(registry: RunRegistry, actor: Actor, run_ids: Iterable[str] | None = None) -> trash.TrashOutcome:
    """Deletes for good the runs in the trash that ``actor`` may delete (all of the trash, or
    ``run_ids``); orphan folders are removed only when an admin empties the whole trash."""
    wanted = list(trash.trashed_times(registry)) if run_ids is None else list(run_ids)
    if run_ids is None and actor.admin:
        return _each(registry, wanted, actor, "delete", lambda ids: trash.empty_trash(
            registry, None if len(ids) == len(wanted) else ids), always=True)
    return _each(registry, wanted, actor, "delete", lambda ids: trash.empty_trash(registry, ids))
