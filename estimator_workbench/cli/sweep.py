"""``estimator-workbench sweep``: a hyperparameter sweep with Optuna, each trial a normal run.

::

    estimator-workbench sweep --dataset iris --template mlp_classifier --steps 200 \\
        --param learning_rate=0.0001:0.1:log --param hidden_units=16,32,64 \\
        --trials 12 --parallel 2 --metric accuracy --direction maximize --sampler tpe
    estimator-workbench sweep --resume NAME        continue a stopped sweep (same study)
    estimator-workbench sweep --stop NAME          ask a running sweep's driver to stop

The driver runs in the foreground (progress lines, the best trial at the end; Ctrl-C stops it
gracefully and it can be continued) or, with ``--detach``, as a process of its own. Bad specs are
refused (exit 2) before any run or study exists.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

from estimator_workbench.cli.usage import PROG, UsageError, json_object

__all__ = ["add_parser", "cmd_sweep"]


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Adds the ``sweep`` subcommand to ``sub`` (the CLI's subparsers)."""
    sweep = sub.add_parser("sweep", help="hyperparameter sweep with Optuna (each trial is a run)",
                           description="Run an Optuna study whose trials are workbench runs.")
    sweep.add_argument("--dataset", help="bundled dataset name (e.g. iris) or a CSV/Parquet file")
    sweep.add_argument("--label", help="the label column (default: inferred)")
    sweep.add_argument("--template", help="template name")
    sweep.add_argument("--steps", type=int, help="max_steps of each trial")
    sweep.add_argument("--param", action="append", default=[], metavar="SPEC",
                       help="NAME=LOW:HIGH[:log|:int] or NAME=a,b,c (repeatable)")
    sweep.add_argument("--params", help="fixed params of every trial, as a JSON object")
    sweep.add_argument("--trials", type=int, help="trials in the study (default 10)")
    sweep.add_argument("--parallel", type=int, help="trials running at once (default 1)")
    sweep.add_argument("--metric", help="final eval metric to optimise (e.g. accuracy, loss)")
    sweep.add_argument("--direction", choices=("maximize", "minimize"),
                       help="default: minimize for loss/error metrics, else maximize")
    sweep.add_argument("--sampler", choices=("tpe", "random", "grid"), default="tpe")
    sweep.add_argument("--pruner", choices=("median", "none"), default="median",
                       help="prune trials whose evaluations fall below the median (default)")
    sweep.add_argument("--prune-after", type=int, default=5,
                       help="finished trials before pruning starts (default 5)")
    sweep.add_argument("--eval-every", type=int, help="steps between evaluations (default steps/5)")
    sweep.add_argument("--seed", type=int, help="tf_random_seed of every trial and the sampler's seed")
    sweep.add_argument("--name", help="the sweep's (study's) name (default: template-dataset-time)")
    sweep.add_argument("--resume", metavar="NAME", help="continue the sweep NAME")
    sweep.add_argument("--stop", metavar="NAME", help="ask the running sweep NAME to stop")
    sweep.add_argument("--detach", action="store_true", help="run the driver in the background")
    sweep.add_argument("--json", action="store_true",
                       help="print the sweep (settings, trial counts, best trial) as JSON when it ends "
                            "(with --detach: once started)")
    return sweep


def _dataset(dataset: str, label: str | None) -> dict[str, Any]:
    """A bundled dataset name or a CSV/Parquet path -> a DatasetSpec dict with its fingerprint,
    read as ``run`` reads it (the one request builder every front end uses)."""
    from estimator_workbench.execution import run_request

    return run_request.dataset_dict(dataset, label)


def _template(name: str, root: Path) -> dict[str, Any]:
    from estimator_workbench import templates

    info = templates.get_template(name, root)
    if info.error:
        raise UsageError(f"Template {name!r} cannot be read: {info.error}")
    return {"name": info.name, "code": info.code}


def _plan(args: argparse.Namespace, root: Path) -> Any:
    from estimator_workbench.sweeps.plan import default_name, plan_sweep

    missing = [flag for flag, value in (("--dataset", args.dataset), ("--template", args.template),
                                        ("--steps", args.steps), ("--metric", args.metric))
               if value in (None, "")]
    if not args.param:
        missing.append("--param")
    if missing:
        raise UsageError(f"sweep needs {', '.join(missing)} (or --resume NAME to continue a sweep). "
                         f"Example: {PROG} sweep --dataset iris --template mlp_classifier --steps 200 "
                         "--param learning_rate=0.0001:0.1:log --trials 10 --parallel 2 "
                         "--metric accuracy --direction maximize")
    dataset = _dataset(args.dataset, args.label)
    template = _template(args.template, root)
    ref = dataset["ref"]
    name = args.name or default_name(template["name"], str(ref.get("name") or Path(str(ref.get("path"))).stem))
    print("Checking the sweep (pre-flight check of the template)...", file=sys.stderr, flush=True)
    return plan_sweep(root, name=name, dataset=dataset, template=template, params=args.param,
                      steps=args.steps, trials=10 if args.trials is None else args.trials,
                      parallel=1 if args.parallel is None else args.parallel, metric=args.metric,
                      direction=args.direction or "", sampler=args.sampler,
                      base_params=json_object(args.params, "--params"), eval_every=args.eval_every or 0,
                      pruner=args.pruner, prune_after=args.prune_after, seed=args.seed)


def _resume(args: argparse.Namespace, root: Path) -> str:
    """Checks that sweep ``--resume`` exists and is idle; applies --trials/--parallel to it."""
    from estimator_workbench.sweeps import store

    name = args.resume
    study = store.load_study(root, name, with_sampler=False)
    if store.driver_alive(root, name):
        raise UsageError(f"Sweep {name!r} is running already (driver pid "
                         f"{store.driver_state(root, name).get('pid')}); stop it with `{PROG} sweep --stop {name}`.")
    spec = store.load_spec(study)
    changes = {k: v for k, v in (("trials", args.trials), ("parallel", args.parallel)) if v is not None}
    if changes:
        spec = dataclasses.replace(spec, **changes)
    from estimator_workbench.sweeps.plan import check_sweep_parallel

    check_sweep_parallel(spec.parallel)  # also a sweep planned on a larger machine
    if changes:
        study.set_user_attr(store.SPEC_ATTR, spec.to_dict())
    return name


def cmd_sweep(args: argparse.Namespace, root: Path) -> int:
    """Runs the ``sweep`` command; returns the exit code."""
    import optuna

    from estimator_workbench.sweeps import store
    from estimator_workbench.sweeps.driver import SweepDriver
    from estimator_workbench.sweeps.spec import SweepSpecError

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        if args.stop:
            store.load_study(root, args.stop, with_sampler=False)  # SweepNotFoundError names the sweeps
            store.request_stop(root, args.stop)
            message = (f"Stop requested for sweep {args.stop}; its running trials checkpoint and it ends "
                       f"'stopped'. Continue it with `{PROG} sweep --resume {args.stop}`.")
            if args.json:
                print(message, file=sys.stderr)
                print(json.dumps({"sweep": args.stop, "stop_requested": True}))
            else:
                print(message)
            return 0
        if args.resume:
            name = _resume(args, root)
        else:
            spec = _plan(args, root)
            store.create_study(root, spec)
            name = spec.name
    except (SweepSpecError, store.SweepNotFoundError) as exc:
        raise UsageError(str(exc)) from None
    if args.detach:
        pid = store.start_driver(root, name)
        print(f"Sweep {name} started in the background (driver pid {pid}, log "
              f"{store.sweep_dir(root, name) / store.DRIVER_LOG}).", file=sys.stderr)
        print(_sweep_json(root, name) if args.json else name)
        return 0
    code = SweepDriver(root, name).run(install_signal_handlers=True)
    if args.json:
        print(_sweep_json(root, name))
    return code


def _sweep_json(root: Path, name: str) -> str:
    """The sweep's row of the Sweeps table plus its best trial, as JSON."""
    from estimator_workbench.sweeps import report, store

    row = next((r for r in report.sweep_rows(root) if r.get("sweep") == name), {"sweep": name})
    study = store.load_study(root, name, with_sampler=False)
    return json.dumps(row | {"best_trial": report.best_trial(study, store.load_spec(study))}, default=str)
