"""``estimator-workbench``: the command line of the workbench.

::

    estimator-workbench                       start the UI on 127.0.0.1 and print its URL with the access token
    estimator-workbench run --dataset iris --template mlp_classifier --steps 500
    estimator-workbench runs                  list runs (--include-trashed: with those in the trash)
    estimator-workbench delete RUN [RUN ...]  move runs to the trash
    estimator-workbench trash list|restore RUN|empty [--yes]
    estimator-workbench stop|cancel|resume RUN
    estimator-workbench predict RUN --data new.csv --out predictions.csv
    estimator-workbench export RUN            a reproducible zip bundle
    estimator-workbench serve RUN|EXPORT_DIR  serve the model over TF Serving's REST API (--port 8501)
    estimator-workbench notebook RUN -o run.ipynb   the run as a Jupyter notebook (engine only)
    estimator-workbench import-tf MODEL_DIR --template DNNClassifier --dataset iris   a TF model as a run
    estimator-workbench mlflow sync|status [RUN ...]   the runs' mirror to MLflow ($WORKBENCH_MLFLOW_URI)

``--workspace DIR`` (before the command) picks the workspace (else ``$WORKBENCH_HOME``, else
``./workspace``). Bad input prints one clear line on stderr and exits with code 2, never a
traceback; a followed run that fails exits with 1.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

from estimator_workbench.cli import db_commands, trash_commands, users_commands
from estimator_workbench.cli.data_flags import add_data_arguments, apply_data_flags
from estimator_workbench.cli.follow import follow_run
from estimator_workbench.cli.import_tf import add_parser as _add_import_tf_parser
from estimator_workbench.cli.import_tf import cmd_import_tf as _cmd_import_tf
from estimator_workbench.cli.mlflow_commands import add_parser as _add_mlflow_parser
from estimator_workbench.cli.mlflow_commands import cmd_mlflow as _cmd_mlflow
from estimator_workbench.cli.mlflow_commands import wait_for_mirror
from estimator_workbench.cli.serve import cmd_ui
from estimator_workbench.cli.serve_model import add_parser as _add_serve_parser
from estimator_workbench.cli.serve_model import cmd_serve as _cmd_serve
from estimator_workbench.cli.sweep import add_parser as _add_sweep_parser
from estimator_workbench.cli.sweep import cmd_sweep as _cmd_sweep
from estimator_workbench.cli.usage import PROG as _PROG
from estimator_workbench.cli.usage import UsageError, json_object, non_negative_int, positive_int
from estimator_workbench.execution import run_actions, run_request
from estimator_workbench.execution.bundle import export_bundle
from estimator_workbench.store import paths, trash
from estimator_workbench.store.guards import is_disk_full
from estimator_workbench.store.records import (
    IMPORT_ACTION,
    RUN_ACTIONS,
    STATUSES,
    TRAINING_ACTIONS,
    RegistryError,
    RunNotFoundError,
    RunRecord,
)
from estimator_workbench.store.registry import RunRegistry
from estimator_workbench.store.registry_db import DATABASE_URL_ENV, resolve_url
from estimator_workbench.store.users import cli_actor

__all__ = ['UsageError', 'build_parser', 'main']


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {message}\n")


def _registry(root: Path) -> RunRegistry:
    return RunRegistry(root)


def _launcher(root: Path, warm_spare: bool = False) -> Any:
    """``LocalLauncher``, or ``RayJobLauncher`` when ``$WORKBENCH_RAY_ADDRESS`` is set.

    ``warm_spare``: ``run`` pre-starts the runner before it validates the run, so the runner's
    imports (seconds) overlap the CLI's own work on another core; see ``_cmd_run``.
    """
    from estimator_workbench.execution.launcher import make_launcher

    return make_launcher(root, warm_spares=1 if warm_spare else 0)


# The run request's dataset and template are built by the one module every front end uses
# (the Python API too); these names are kept for the CLI's callers and tests.
def _dataset_ref(dataset: Any) -> dict[str, Any]:
    """A bundled dataset name or a CSV/Parquet path -> a DatasetSpec ``ref``."""
    return run_request.dataset_ref(dataset)


def _loaded(ref: Mapping[str, Any]) -> Any:
    """The data at ``ref``, read as any DatasetSpec reads it."""
    return run_request.load_ref(ref)


def _dataset_dict(dataset: Any, label: str | None, label_missing: str | None = None,
                  flags: argparse.Namespace | None = None) -> dict[str, Any]:
    """A dataset reference (bundled name, file path, or a DatasetSpec dict) -> a DatasetSpec dict
    with its ``fingerprint``; ``flags``: the Data page's choices given as ``run`` flags."""
    adjust = None if flags is None else (lambda spec: apply_data_flags(spec, flags))
    return run_request.dataset_dict(dataset, label, label_missing, adjust=adjust)


def _template_dict(template: Any, root: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """``({'name', 'code'}, params schema)`` of a template name or a ``{'name', 'code'}`` dict."""
    return run_request.template_dict(template, root)


def _load_run_file(path: str) -> dict[str, Any]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"--file {path!r} does not exist.") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"--file {path!r} is not a readable JSON file ({exc}).") from None
    except RecursionError:
        raise UsageError(f"--file {path!r} is nested too deeply to read; a run file is a few levels deep "
                         "at most (dataset, template, params, run_config, schedule, action).") from None
    if not isinstance(data, dict):
        raise UsageError(f"--file {path!r} must hold a JSON object with dataset, template, "
                         "params, run_config, schedule and action.")
    return data


def _cmd_run(args: argparse.Namespace, root: Path) -> int:
    from estimator_workbench.execution.launcher import LocalLauncher

    # The runner process starts first (as a warm spare, for one-process runs), so that its
    # imports (seconds) overlap the validation below on another core; it takes the run through
    # a pipe at submit. Bad input ends the spare before it runs anything.
    launcher = _launcher(root, warm_spare=args.num_processes == 1)
    local = isinstance(launcher, LocalLauncher)
    if local:
        launcher.poll()
    try:
        record = _register_run(args, root, launcher)
    finally:
        if local:
            launcher.release_spare()  # one run: no spare for a next one
    print(f"Run {record.run_id} submitted ({record.action}); folder {launcher.registry.run_dir(record.run_id)}",
          file=sys.stderr, flush=True)
    if args.detach:
        print(_record_json(launcher.registry.get(record.run_id)) if args.json else record.run_id)
        return 0
    code = follow_run(launcher, record.run_id)
    wait_for_mirror(launcher, record.run_id)  # MLflow down says so here; the exit code is the run's
    if args.json:
        print(_record_json(launcher.registry.get(record.run_id)))
    return code


def _record_json(record: RunRecord, **extra: Any) -> str:
    """A run as ``runs --json`` prints it (one object), plus ``extra`` keys."""
    return json.dumps(record.to_dict() | extra, default=str)


# Run-contract field -> the flag that sets it, so a refusal names the flag the user typed.
_SCHEDULE_FLAGS = {"max_steps": "--steps", "eval_every_steps": "--eval-every", "batch_size": "--batch-size",
                   "eval_steps": "--eval-steps", "metrics_every_n_steps": "--metrics-every",
                   "shuffle_seed": "--shuffle-seed", "nan_policy": "--nan-policy",
                   "preflight_timeout": "--preflight-timeout"}
CLI_CONTROLS = {**_SCHEDULE_FLAGS, "run_config": "--config", "schedule": "--file schedule", "num_processes": "--num-processes", "action": "--action",
                "tf_random_seed": "--seed", "early_stopping.metric": "--early-stopping-metric",
                "early_stopping.mode": "--early-stopping-mode",
                "early_stopping.patience": "--early-stopping-patience",
                "early_stopping.min_delta": "--early-stopping-min-delta"}


def _register_run(args: argparse.Namespace, root: Path, launcher: Any = None) -> RunRecord:
    """Reads ``run``'s arguments (flags over ``--file``) into a run request and hands it to the
    submit service (``estimator_workbench.execution.submit``), which validates it against the run contract,
    applies the pre-flight policy, registers it and submits it to ``launcher``."""
    spec = _load_run_file(args.file) if args.file else {}
    dataset = args.dataset if args.dataset is not None else spec.get("dataset")
    template = args.template if args.template is not None else spec.get("template")
    action = args.action or spec.get("action") or "train"
    if action not in RUN_ACTIONS:
        raise UsageError(f"--action must be one of {list(RUN_ACTIONS)}, given: {action!r}.")
    source = args.from_run or spec.get("from_run")
    parent = _existing(root, str(source)) if source else None
    checkpoint = args.checkpoint or spec.get("checkpoint")
    params = {**(spec.get("params") or {}), **json_object(args.params, "--params")}
    run_config = {**(spec.get("run_config") or {}), **json_object(args.config, "--config")}
    uses_a_trained_model = action in ("evaluate", "predict")
    # Training from an imported TF model continues it, as TF would on its model_dir: same model,
    # TF's global step and optimizer state (a resume), not a warm start of another model.
    continues_import = parent is not None and parent.action == IMPORT_ACTION and action in TRAINING_ACTIONS
    if uses_a_trained_model and parent is None:
        raise UsageError(f"--action {action} needs --from RUN: the trained run whose model to use (its "
                         f"newest checkpoint, or --checkpoint model.ckpt-N). To predict on a new file, "
                         f"`{_PROG} predict RUN --data FILE --out FILE` writes the predictions CSV.")
    if checkpoint and parent is None:
        raise UsageError("--checkpoint names a checkpoint of the run given with --from RUN.")
    if (uses_a_trained_model or continues_import) and parent is not None:
        template = template if template is not None else dict(parent.template)
        params = {**parent.params, **params}
        run_config = {**parent.run_config, **run_config}
        dataset_dict = _dataset_of(parent, dataset, "train" if continues_import else action)
    elif dataset is None or template is None:
        raise UsageError("run needs --dataset and --template (or --file run.json holding them).")
    else:
        dataset_dict = _dataset_dict(dataset, args.label or spec.get("label"),
                                     args.label_missing or spec.get("label_missing"), flags=args)
    if args.seed is not None:
        run_config["tf_random_seed"] = args.seed
    schedule = dict(spec.get("schedule") or {})
    early = dict(schedule.get("early_stopping") or {})
    for key, value in (("metric", args.early_stopping_metric), ("mode", args.early_stopping_mode),
                       ("patience", args.early_stopping_patience), ("min_delta", args.early_stopping_min_delta)):
        if value is not None:
            early[key] = value
    if early:
        schedule["early_stopping"] = early
    for key, flag in _SCHEDULE_FLAGS.items():
        value = getattr(args, flag.lstrip("-").replace("-", "_"))
        if value is not None:
            schedule[key] = value
    if args.no_preflight:
        schedule["preflight"] = False
    if args.mlflow is not None:
        if args.mlflow:
            _check_mirror_possible()
        schedule["mlflow"] = args.mlflow
    template_dict, _ = _template_dict(template, root)  # (params: checked by submit_run)
    if args.num_processes > 1 and action in TRAINING_ACTIONS and schedule.get("preflight", True):
        print("Pre-flight check...", file=sys.stderr, flush=True)
    # Imported here, after run has started its runner: the run contract's pydantic models take
    # 60 ms to import, which the runner's own imports no longer wait for.
    from estimator_workbench.execution.submit import submit_run
    from estimator_workbench.store.run_spec import RunSpecError

    try:
        return submit_run(
            _registry(root), launcher,
            name=args.name or spec.get("name") or run_request.default_run_name(template_dict["name"], dataset_dict),
            action=action, dataset=dataset_dict, template=template_dict, params=params,
            run_config=run_config, schedule=schedule, num_processes=args.num_processes,
            parent_run_id=parent.run_id if parent else None, checkpoint_path=checkpoint,
            relation="resume" if continues_import else None, control=CLI_CONTROLS)
    except RunSpecError as exc:
        raise UsageError(str(exc)) from None


def _check_mirror_possible() -> None:
    """``run --mlflow``: refused before anything exists when there is no server to mirror to or
    no MLflow client."""
    import importlib.util

    from estimator_workbench.store import mlflow_state

    if mlflow_state.mirror_uri() is None:
        raise UsageError(f"--mlflow mirrors the run to an MLflow tracking server, but ${mlflow_state.URI_ENV_VAR} is "
                         f"not set. Set it to the server's URI (e.g. export {mlflow_state.URI_ENV_VAR}="
                         "http://127.0.0.1:5000) before starting the workbench, or turn the mirror off.")
    if importlib.util.find_spec("mlflow") is None:
        raise UsageError("--mlflow mirrors the run to MLflow, which needs the mlflow extra: "
                         "pip install 'estimator-workbench[mlflow]'.")


def _dataset_of(parent: RunRecord, dataset: Any, action: str) -> dict[str, Any]:
    """The dataset of an evaluate/predict run from ``parent``: the parent's own, or a file read
    with the roles and types the model was trained with."""
    return run_request.dataset_for_parent(parent, dataset, action)


def _cmd_runs(args: argparse.Namespace, root: Path) -> int:
    if args.status and args.status not in STATUSES:
        raise UsageError(f"--status must be one of {list(STATUSES)}, given: {args.status!r}.")
    # No process watches a workspace between commands: mark runs whose runner died first.
    _launcher(root).reap_lost()
    records = _registry(root).list_runs(args.status, limit=args.limit, trashed=None if args.include_trashed else False)
    trashed = trash.trashed_times(_registry(root)) if args.include_trashed else {}
    if args.json:
        print(json.dumps([r.to_dict() | ({"trashed_at": trashed.get(r.run_id)} if args.include_trashed else {})
                          for r in records], indent=1, default=str))
        return 0
    if not records:
        print(f"No runs in {root}.")
        return 0
    rows = [("RUN", "NAME", "ACTION", "STATUS", "STEP", "LOSS", "CREATED")]
    for r in records:
        loss = r.summary.get("train/loss") or r.summary.get("eval/loss") or {}
        rows.append((r.run_id, r.name[:30], r.action,  # 'stalled': no step for a while
                     r.display_status + (" (trashed)" if r.run_id in trashed else ""),
                     "" if loss.get("last_step") is None else str(loss["last_step"]),
                     "" if loss.get("last") is None else f"{loss['last']:.4g}",
                     _dt.datetime.fromtimestamp(r.created_at).strftime("%Y-%m-%d %H:%M")))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
    return 0


def _existing(root: Path, run_id: str) -> RunRecord:
    try:
        paths.run_dir(root, run_id)  # refuses '..', separators and absolute names first
        record = _registry(root).get(run_id)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if run_id in trash.trashed_times(_registry(root)):
        raise UsageError(f"Run {run_id!r} is in the trash; restore it first with "
                         f"`{_PROG} trash restore {run_id}`.")
    return record


def _cmd_stop(args: argparse.Namespace, root: Path) -> int:
    _existing(root, args.run)
    launcher = _launcher(root)
    launcher.reap_lost()  # a runner that died cannot stop: say it is lost instead
    run_actions.stop(launcher, args.run, cli_actor(root))
    print(f"Stop requested for {args.run}; it checkpoints and ends 'stopped'.")
    return 0


def _cmd_cancel(args: argparse.Namespace, root: Path) -> int:
    _existing(root, args.run)
    launcher = _launcher(root)
    launcher.reap_lost()
    record = run_actions.cancel(launcher, args.run, cli_actor(root), grace=args.grace)
    print(f"Run {args.run} {record.status}.")
    return 0


def _cmd_resume(args: argparse.Namespace, root: Path) -> int:
    _existing(root, args.run)
    launcher = _launcher(root)
    launcher.reap_lost()  # a run whose runner died is resumable once it is marked lost
    record = run_actions.resume(launcher, args.run, cli_actor(root))
    print(f"Run {args.run} resumed ({record.status}).", file=sys.stderr)
    if args.detach:
        return 0
    code = follow_run(launcher, args.run)
    wait_for_mirror(launcher, args.run)
    return code


def _cmd_predict(args: argparse.Namespace, root: Path) -> int:

    parent = _existing(root, args.run)
    data = Path(args.data).expanduser()
    if not data.is_file():
        raise UsageError(f"--data file {args.data!r} does not exist.")
    out = Path(args.out).expanduser()
    if out.exists() and out.is_dir():
        raise UsageError(f"--out {args.out!r} is a folder; give a file name like predictions.csv.")
    reg = _registry(root)
    local_model = reg.run_dir(parent.run_id) / paths.MODEL_DIR
    location = paths.model_location(reg.run_dir(parent.run_id))
    if not local_model.is_dir() and location == str(local_model):
        raise UsageError(f"Run {parent.run_id!r} has no model/ folder (no checkpoint to predict from).")
    if not local_model.is_dir():  # on the workspace's storage (a URL)
        from estimator_engine import checkpoints

        if checkpoints.latest_checkpoint(location) is None:
            raise UsageError(f"Run {parent.run_id!r} has no checkpoint in {location} (nothing to "
                             "predict from).")
    try:
        dataset = _dataset_of(parent, str(data.resolve()), "predict")
    except ValueError as exc:
        raise UsageError(f"--data {args.data!r}: {exc}") from None
    from estimator_workbench.execution.submit import submit_run
    from estimator_workbench.store.run_spec import RunSpecError

    launcher = _launcher(root)
    try:  # checked (the data too) before a run exists, as `run` checks it
        record = submit_run(
            reg, launcher, name=f"predict {data.name} with {parent.name}", action="predict", dataset=dataset,
            template=parent.template, params=parent.params, run_config=parent.run_config,
            schedule={k: v for k, v in parent.schedule.items() if k == "batch_size"},
            parent_run_id=parent.run_id, relation="predict_from", checkpoint_path=args.checkpoint,
            control=CLI_CONTROLS)
    except RunSpecError as exc:
        raise UsageError(f"--data {args.data!r}: {exc}") from None
    code = follow_run(launcher, record.run_id)
    produced = reg.run_dir(record.run_id) / paths.PREDICTIONS_FILE
    if code != 0 or not produced.exists():
        print(f"No predictions written (run {record.run_id} {reg.get(record.run_id).status}).",
              file=sys.stderr)
        if args.json:
            print(_record_json(reg.get(record.run_id), predictions_file=None))
        return 1
    out.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(produced, out)
    if args.json:
        print(_record_json(reg.get(record.run_id), predictions_file=str(out.resolve())))
    else:
        print(f"Predictions of run {record.run_id} written to {out}.")
    return 0


def _cmd_export(args: argparse.Namespace, root: Path) -> int:
    _existing(root, args.run)
    target = export_bundle(root, args.run, args.out, with_checkpoint=args.with_checkpoint)
    print(str(target))
    return 0


def _cmd_notebook(args: argparse.Namespace, root: Path) -> int:
    record = _existing(root, args.run)
    try:
        from estimator_workbench.execution.notebook import write_run_notebook
    except ImportError as exc:  # nbformat: the `notebook` extra
        raise UsageError(f"notebook needs the nbformat package ({exc}); install "
                         "'estimator-workbench[notebook]'.") from None
    target = write_run_notebook(root, record.run_id, args.out or f"{record.run_id}.ipynb")
    print(str(target))
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser of ``estimator-workbench``."""
    parser = _Parser(prog=_PROG, description="Estimator Workbench: train, evaluate and predict "
                     "with tf.estimator-style model_fns on PyTorch.")
    parser.add_argument("--workspace", help="workspace folder (default: $WORKBENCH_HOME or ./workspace)")
    parser.add_argument("--database-url", metavar="URL",
                        help="the run registry's database, e.g. postgresql://user:password@host:5432/db "
                             "(default: $WORKBENCH_DATABASE_URL, else the workspace's registry.sqlite)")
    parser.add_argument("--max-concurrent", type=positive_int, metavar="N",
                        help="local runs at once (default: $WORKBENCH_MAX_CONCURRENT, else one per GPU, one on CPU)")
    parser.add_argument("--helper-slots", type=non_negative_int, metavar="N",
                        help="evaluate/predict runs of trained models at once beside them, so that they never "
                             "wait behind training (default: $WORKBENCH_HELPER_SLOTS, else 1; 0: they queue)")
    parser.add_argument("--storage-url", metavar="URL",
                        help="where runs keep their model_dir (checkpoints, event files), e.g. "
                             "s3://bucket/prefix: <URL>/runs/<run_id>/model (default: "
                             "$WORKBENCH_STORAGE_URL, else the run folder); needs the remote extra")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)

    ui = sub.add_parser("ui", help="start the UI (the default without a command)")
    ui.add_argument("--address", default="127.0.0.1",
                    help="interface to listen on (default 127.0.0.1, this machine only); anything "
                         "else lets whoever reaches it run code here, so a warning is printed")
    ui.add_argument("--port", type=int)
    ui.add_argument("--allowed-host", action="append", metavar="NAME",
                    help="a further Host name the UI answers to (repeatable; e.g. the name of a "
                         "reverse proxy); by default only the names of --address are accepted")
    ui.add_argument("--no-token", action="store_true",
                    help="serve without the access token (by default every request needs the "
                         "token printed in the URL at start, as in Jupyter): then every account on "
                         "this machine can open the UI and run code as you")
    ui.add_argument("--insecure-no-auth", action="store_true",
                    help="listen beyond 127.0.0.1 (--address) although nobody signs in (no users file, "
                         "OIDC or password): refused without this flag; the UI then shows a banner")
    ui.add_argument("--oidc-metadata-url", metavar="URL",
                    help="sign in with OpenID Connect: the provider's /.well-known/openid-configuration "
                         "(default $WORKBENCH_OIDC_METADATA_URL); the client secret comes from "
                         "$WORKBENCH_OIDC_CLIENT_SECRET")
    ui.add_argument("--oidc-client-id", metavar="ID", help="the UI's client id at the provider "
                    "(default $WORKBENCH_OIDC_CLIENT_ID)")
    ui.add_argument("--oidc-redirect-uri", metavar="URL",
                    help="where the provider sends people back (default $WORKBENCH_OIDC_REDIRECT_URI, else "
                         "http://localhost:{port}/oauth2callback); register it at the provider")
    ui.add_argument("--dry-run", action="store_true", help="print the command, do not run it")

    run = sub.add_parser("run", help="submit a run and follow its progress")
    run.add_argument("--file", help="a JSON run file (dataset, template, params, run_config, schedule, action)")
    run.add_argument("--dataset", help="bundled dataset name (e.g. iris) or a CSV/Parquet file")
    run.add_argument("--label", help="the label column (default: inferred)")
    run.add_argument("--template", help="template name (see the UI or estimator_workbench/templates/)")
    run.add_argument("--action", choices=RUN_ACTIONS,
                     help="default: train (the UI's Train page starts with train_and_evaluate, which "
                          "needs --steps and evaluation rows); the submitted line says which")
    run.add_argument("--from", dest="from_run", metavar="RUN",
                     help="evaluate/predict: the trained run whose model to use; train: warm start from it")
    run.add_argument("--checkpoint", help="with --from: a checkpoint of that run (default: its newest)")
    run.add_argument("--params", help="model_fn params as a JSON object")
    run.add_argument("--config", help="RunConfig fields as a JSON object")
    run.add_argument("--steps", type=int, help="train until this global step (max_steps)")
    run.add_argument("--seed", type=int, help="tf_random_seed (default: drawn at random and recorded)")
    run.add_argument("--eval-every", type=int, help="steps between evaluations (train_and_evaluate)")
    run.add_argument("--batch-size", type=int)
    run.add_argument("--name")
    run.add_argument("--num-processes", type=int, default=1)
    run.add_argument("--no-preflight", action="store_true", help="skip the pre-flight check")
    run.add_argument("--preflight-timeout", type=float, help="seconds (default 60)")
    run.add_argument("--label-missing", choices=("error", "drop"),
                     help="rows whose label is blank: stop with an error (default) or leave them out")
    add_data_arguments(run)
    run.add_argument("--eval-steps", type=int, help="batches per evaluation (default: the whole eval split)")
    run.add_argument("--metrics-every", type=int, help="steps between logged training metrics")
    run.add_argument("--shuffle-seed", type=int, help="seed of the input shuffling")
    run.add_argument("--nan-policy", choices=("fail", "stop"),
                     help="on a NaN loss: fail the run (default) or stop training, keeping the last checkpoint")
    run.add_argument("--early-stopping-metric", help="eval metric watched for early stopping (e.g. loss)")
    run.add_argument("--early-stopping-mode", choices=("min", "max"))
    run.add_argument("--early-stopping-patience", type=int, help="evaluations without improvement")
    run.add_argument("--early-stopping-min-delta", type=float, help="smallest change that counts as improvement")
    run.add_argument("--mlflow", action=argparse.BooleanOptionalAction, default=None,
                     help="mirror the finished run to the MLflow server at $WORKBENCH_MLFLOW_URI (default: on "
                          "when that is set); --no-mlflow: not this run")
    run.add_argument("--detach", action="store_true", help="print the run id and return")
    run.add_argument("--json", action="store_true",
                     help="print the finished run (with --detach: the submitted run) as JSON, as `runs --json` does")

    runs = sub.add_parser("runs", help="list runs")
    runs.add_argument("--status")
    runs.add_argument("--limit", type=positive_int, help="show at most this many runs (>= 1)")
    runs.add_argument("--json", action="store_true")
    runs.add_argument("--include-trashed", action="store_true", help="list the runs in the trash too")

    for name, text in (("stop", "graceful stop: checkpoint, then 'stopped'"),
                       ("cancel", "SIGTERM, SIGKILL after a grace period"),
                       ("resume", "continue a finished run from its last checkpoint")):
        cmd = sub.add_parser(name, help=text)
        cmd.add_argument("run")
        if name == "cancel":
            cmd.add_argument("--grace", type=float, default=10.0)
        if name == "resume":
            cmd.add_argument("--detach", action="store_true")

    predict = sub.add_parser("predict", help="predict with a run's model on a data file")
    predict.add_argument("run")
    predict.add_argument("--data", required=True)
    predict.add_argument("--out", required=True)
    predict.add_argument("--checkpoint", help="a checkpoint of the run (default: the latest)")
    predict.add_argument("--json", action="store_true",
                         help="print the predict run as JSON (as `runs --json`) with its predictions_file")

    export = sub.add_parser("export", help="write a reproducible zip bundle of a run")
    export.add_argument("run")
    export.add_argument("--out", help="zip path (default: runs/<id>/export/<id>.zip)")
    export.add_argument("--with-checkpoint", action="store_true")
    notebook = sub.add_parser("notebook", help="write a run as a Jupyter notebook that reproduces it with the engine")
    notebook.add_argument("run")
    notebook.add_argument("-o", "--out", help="the .ipynb path (default: RUN.ipynb here)")
    trash_commands.add_parsers(sub)
    _add_sweep_parser(sub)
    _add_serve_parser(sub)
    db_commands.add_parsers(sub)
    users_commands.add_parsers(sub)
    _add_import_tf_parser(sub)
    _add_mlflow_parser(sub)
    return parser


_COMMANDS = {"ui": cmd_ui, "run": _cmd_run, "runs": _cmd_runs, "stop": _cmd_stop,
             "cancel": _cmd_cancel, "resume": _cmd_resume, "predict": _cmd_predict,
             "export": _cmd_export, "delete": trash_commands.cmd_delete, "trash": trash_commands.cmd_trash,
             "sweep": _cmd_sweep, "serve": _cmd_serve, "notebook": _cmd_notebook, "db": db_commands.cmd_db,
             "users": users_commands.cmd_users, "audit": users_commands.cmd_audit,
             "import-tf": _cmd_import_tf, "mlflow": _cmd_mlflow}


def _slot_settings(args: argparse.Namespace) -> None:
    """--max-concurrent / --helper-slots as the environment variables every launcher of this
    process and its children (the UI server, runners' queue starters) reads."""
    from estimator_workbench.execution.launcher import HELPER_SLOTS_ENV, MAX_CONCURRENT_ENV

    if getattr(args, "max_concurrent", None) is not None:
        os.environ[MAX_CONCURRENT_ENV] = str(args.max_concurrent)
    if getattr(args, "helper_slots", None) is not None:
        os.environ[HELPER_SLOTS_ENV] = str(args.helper_slots)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``estimator-workbench``; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        args = parser.parse_args([*(argv if argv is not None else sys.argv[1:]), "ui"])
    root: Path | None = None
    try:
        root = paths.workspace_root(args.workspace)
        if args.database_url is not None:
            resolve_url(root, args.database_url)  # a bad URL: one line, exit 2
            os.environ[DATABASE_URL_ENV] = args.database_url  # runners inherit it
        _slot_settings(args)
        if args.storage_url is not None:
            os.environ[paths.STORAGE_URL_ENV] = args.storage_url  # runners inherit it
        try:
            paths.check_storage_url()  # a bad URL, fsspec / s3fs missing: one line, exit 2
        except (ValueError, ImportError) as exc:
            raise UsageError(str(exc)) from None
        if root.exists() and not root.is_dir():
            raise UsageError(f"--workspace {str(root)!r} is a file, not a folder.")
        note = paths.secure_workspace(root)
        if note:
            print(f"{_PROG}: {note}", file=sys.stderr)
        return _COMMANDS[args.command](args, root)
    except UsageError as exc:
        print(f"{_PROG}: error: {exc}", file=sys.stderr)
        return 2
    except RunNotFoundError as exc:
        print(f"{_PROG}: error: {exc}", file=sys.stderr)
        return 2
    except RecursionError:  # user data nested deeper than any run needs, caught where it was read
        print(f"{_PROG}: error: the input is nested too deeply to handle; a run's settings are a few "
              "levels deep at most.", file=sys.stderr)
        return 2
    except Exception as exc:
        if is_disk_full(exc, root):  # any command: one line, as `run` says it (issue 24 item 13)
            said = str(exc) if str(exc).startswith("disk full") else (
                f"disk full: {exc}. Free space on {root}, then retry")
            print(f"{_PROG}: error: {said}", file=sys.stderr)
            return 2
        if isinstance(exc, (ValueError, TypeError, FileNotFoundError, PermissionError, RegistryError)):
            # PermissionError: also store.audit.NotAllowedError (someone else's run)
            print(f"{_PROG}: error: {exc}", file=sys.stderr)  # RegistryError: "disk full: ..."
            return 2
        raise


if __name__ == "__main__":
    sys.exit(main())
