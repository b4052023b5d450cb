"""``estimator-workbench delete`` and ``trash``: runs go to the workspace's trash, from where they are
restored or deleted for good (``estimator_workbench.store.trash``).

::

    estimator-workbench delete RUN [RUN ...]    move runs to the trash
    estimator-workbench trash list              the runs in the trash
    estimator-workbench trash restore RUN ...   take runs out of the trash
    estimator-workbench trash empty [--yes]     delete the runs in the trash for good (asks first)
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import sys
from pathlib import Path
from typing import Any

from estimator_workbench.cli.usage import PROG as _PROG
from estimator_workbench.cli.usage import UsageError
from estimator_workbench.execution import run_actions
from estimator_workbench.store import paths, trash
from estimator_workbench.store.registry import RunRegistry
from estimator_workbench.store.users import cli_actor

__all__ = ["add_parsers", "cmd_delete", "cmd_trash"]


def add_parsers(sub: Any) -> None:
    """Adds ``delete`` and ``trash`` to the CLI's subcommands."""
    delete = sub.add_parser("delete", help="move runs to the trash (restore them with `trash restore`)")
    delete.add_argument("runs", nargs="+", metavar="RUN")
    cmd = sub.add_parser("trash", help="list the trash, restore runs from it, or empty it")
    cmd.add_argument("trash_command", choices=("list", "restore", "empty"))
    cmd.add_argument("runs", nargs="*", metavar="RUN", help="restore: the runs to restore")
    cmd.add_argument("--yes", action="store_true", help="empty: do not ask for confirmation")
    cmd.add_argument("--json", action="store_true", help="list: the runs in the trash as JSON (as `runs --json`, "
                                                         "with trashed_at)")


def _known(registry: RunRegistry, run_id: str) -> None:
    try:
        paths.run_dir(registry.root, run_id)  # refuses '..', separators and absolute names first
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    registry.get(run_id)  # RunNotFoundError: the CLI prints it and exits with 2


def cmd_delete(args: argparse.Namespace, root: Path) -> int:
    registry = RunRegistry(root)
    for run_id in args.runs:
        _known(registry, run_id)
    outcome = run_actions.trash_runs(registry, args.runs, cli_actor(root))
    for run_id in outcome.done:
        print(f"Run {run_id} moved to the trash (restore: `{_PROG} trash restore {run_id}`).")
    for reason in outcome.refused.values():
        print(f"{_PROG}: error: {reason}", file=sys.stderr)
    return 2 if outcome.refused else 0


def cmd_trash(args: argparse.Namespace, root: Path) -> int:
    registry = RunRegistry(root)
    if args.runs and args.trash_command != "restore":
        raise UsageError(f"trash {args.trash_command} takes no run ids (given: {' '.join(args.runs)}); "
                         f"`{_PROG} trash restore RUN` restores one run.")
    if args.trash_command == "restore":
        return _restore(registry, args.runs)
    items = trash.trashed_runs(registry)
    orphans = trash.orphan_folders(registry)
    if args.trash_command == "empty":
        return _empty(registry, items, orphans, args.yes)
    if getattr(args, "json", False):
        print(json.dumps([t.record.to_dict() | {"trashed_at": t.trashed_at} for t in items], default=str))
        return 0
    if orphans:
        print(f"{len(orphans)} run folder(s) without a registry row (an interrupted delete), removed by "
              f"`{_PROG} trash empty`: {', '.join(str(f) for f in orphans)}")
    if not items:
        print(f"The trash of {root} is empty.")
        return 0
    rows = [("RUN", "NAME", "ACTION", "STATUS", "TRASHED")]
    rows += [(t.record.run_id, t.record.name[:30], t.record.action, t.record.status,
              _dt.datetime.fromtimestamp(t.trashed_at).strftime("%Y-%m-%d %H:%M")) for t in items]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
    return 0


def _restore(registry: RunRegistry, run_ids: list[str]) -> int:
    if not run_ids:
        raise UsageError(f"trash restore needs the run ids to restore; see `{_PROG} trash list`.")
    for run_id in run_ids:
        _known(registry, run_id)
    in_trash = trash.trashed_times(registry)
    missing = [r for r in run_ids if r not in in_trash]
    if missing:
        raise UsageError(f"Not in the trash: {', '.join(missing)}; see `{_PROG} trash list`.")
    outcome = run_actions.restore_runs(registry, run_ids, cli_actor(registry.root))
    for run_id in outcome.done:
        print(f"Run {run_id} restored.")
    for reason in outcome.refused.values():
        print(f"{_PROG}: error: {reason}", file=sys.stderr)
    return 2 if outcome.refused else 0


def _empty(registry: RunRegistry, items: list[trash.TrashedRun], orphans: list[Path], yes: bool) -> int:
    if not items and not orphans:
        print("The trash is empty.")
        return 0
    what = f"{len(items)} runs" + (f" and {len(orphans)} orphan folder(s)" if orphans else "")
    if not yes:
        if not sys.stdin.isatty():
            raise UsageError(f"trash empty deletes {what} for good: confirm with --yes.")
        answer = input(f"Delete the {what} in the trash for good, with their folders? [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            print("Nothing deleted.")
            return 1
    outcome = run_actions.empty_trash(registry, cli_actor(registry.root))
    print(f"Deleted {len(outcome.done)} runs for good.")
    if outcome.orphans:
        print(f"Removed {len(outcome.orphans)} orphan folder(s) (an interrupted delete): {', '.join(outcome.orphans)}.")
    for reason in outcome.refused.values():
        print(f"{_PROG}: error: {reason}", file=sys.stderr)
    return 2 if outcome.refused else 0
