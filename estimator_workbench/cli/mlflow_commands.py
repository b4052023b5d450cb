"""``estimator-workbench mlflow sync|status``: the runs' mirror to MLflow (``estimator_workbench.tracking``).

::

    estimator-workbench mlflow sync               mirror every run whose mirror is pending or failed, now
    estimator-workbench mlflow sync RUN [RUN ...]  these runs (again, if they finished again since)
    estimator-workbench mlflow status [RUN ...]   where each mirrored run's mirror stands (--json)

A run is mirrored when ``$WORKBENCH_MLFLOW_URI`` is set (or ``run --mlflow``); launchers start the
sync in the background once a run has finished, so ``sync`` is needed only to retry at once.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from estimator_workbench.cli.usage import UsageError
from estimator_workbench.store import mlflow_state, paths
from estimator_workbench.store.mlflow_state import MirrorState
from estimator_workbench.store.registry import RunRegistry

__all__ = ["add_parser", "cmd_mlflow", "wait_for_mirror"]


def add_parser(sub: Any) -> None:
    """Adds ``mlflow`` to the CLI's subcommands."""
    cmd = sub.add_parser("mlflow", help="mirror runs to MLflow now (sync), or show where their mirror stands")
    cmd.add_argument("mlflow_command", choices=("sync", "status"))
    cmd.add_argument("runs", nargs="*", metavar="RUN", help="these runs only (default: every mirrored run "
                                                           "that waits for a sync)")
    cmd.add_argument("--json", action="store_true", help="one JSON object per run: its id and mirror state")


def _run_ids(root: Path, given: list[str]) -> list[str]:
    registry = RunRegistry(root)
    for run_id in given:
        try:
            paths.run_dir(root, run_id)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        registry.get(run_id)  # RunNotFoundError: one line, exit 2
        if mlflow_state.read_state(paths.run_dir(root, run_id)) is None:
            raise UsageError(f"Run {run_id!r} is not mirrored to MLflow (it was started without "
                             f"${mlflow_state.URI_ENV_VAR} or with --no-mlflow).")
    return given


def _print(run_id: str, state: MirrorState | None, as_json: bool) -> None:
    if as_json:
        print(json.dumps({"run_id": run_id, **(state.to_dict() if state else {"state": None})}), flush=True)
    else:
        print(f"{run_id}: {mlflow_state.describe(state)}", flush=True)


def cmd_mlflow(args: argparse.Namespace, root: Path) -> int:
    run_ids = _run_ids(root, list(args.runs))
    if args.mlflow_command == "status":
        ids = run_ids or mlflow_state.pending_run_ids(root)
        for run_id in ids:
            _print(run_id, mlflow_state.read_state(paths.run_dir(root, run_id)), args.json)
        if not ids and not args.json:
            print("No run waits for its MLflow mirror.")
        return 0
    try:
        from estimator_workbench.tracking.mlflow_mirror import sync
    except ImportError as exc:  # pandas and the rest of the ui extra
        raise UsageError(f"mlflow sync needs the ui and mlflow extras ({exc.name} is missing): "
                         "pip install 'estimator-workbench[ui,mlflow]'") from None
    results = sync(root, run_ids or None, force=True, report=lambda run_id, state: _print(run_id, state, args.json))
    if not results and not args.json:
        print("No run waits for its MLflow mirror.")
    return 1 if any(state.state != "synced" for _, state in results) else 0


def wait_for_mirror(launcher: Any, run_id: str, timeout: float = 600.0) -> MirrorState | None:
    """After ``run`` followed a mirrored run to its end: starts its sync now (in the background, as
    a launcher's poll would) and waits for it, then says where the mirror stands on stderr.
    Ctrl-C stops the waiting, not the sync."""
    folder = launcher.registry.run_dir(run_id)
    if mlflow_state.read_state(folder) is None:
        return None
    trigger = launcher.mirrors
    try:
        if not trigger.running():
            trigger.poll(now=True)
        trigger.wait(timeout)
    except KeyboardInterrupt:
        pass
    state = mlflow_state.read_state(folder)
    print(mlflow_state.describe(state), file=sys.stderr, flush=True)
    return state
