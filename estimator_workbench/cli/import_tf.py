"""``estimator-workbench import-tf``: a TensorFlow Estimator's model_dir registered as a run.

::

    estimator-workbench import-tf /models/iris_dnn --template DNNClassifier --dataset iris \\
        --params '{"hidden_units": "10,10"}' [--role COLUMN=ignore ...]

The run (action ``import_tf``) holds a copy of TF's latest checkpoint in its ``model/`` folder;
evaluate, predict, compare and continue it like any run (``run --action evaluate --from RUN``,
``predict RUN``, ``run --action train --from RUN --steps N`` continues TF's global step). A
model_dir whose variables do not fit the template on the dataset is refused (exit 2) before the
run exists, naming the variables on both sides (``execution.tf_import``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from estimator_workbench.cli.usage import UsageError, json_object

__all__ = ["add_parser", "cmd_import_tf"]

# Run-contract fields -> the flags of this command that set them, for the refusal messages.
_CONTROLS = {"run_config": "--config", "checkpoint_path": "MODEL_DIR"}


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Adds the ``import-tf`` subcommand to ``sub`` (the CLI's subparsers)."""
    cmd = sub.add_parser("import-tf", help="register a TensorFlow Estimator's model_dir as a run",
                         description="Import a TensorFlow Estimator's latest checkpoint (read without "
                                     "TensorFlow) as a run you can evaluate, predict and continue.")
    cmd.add_argument("model_dir", metavar="MODEL_DIR",
                     help="the TF model_dir (its latest checkpoint), a checkpoint prefix or a SavedModel folder")
    cmd.add_argument("--template", required=True, help="the canned template the TF model is (e.g. DNNClassifier)")
    cmd.add_argument("--dataset", required=True, help="bundled dataset name (e.g. iris) or a CSV/Parquet file")
    cmd.add_argument("--label", help="the label column (default: inferred)")
    cmd.add_argument("--params", help="template params as a JSON object, as `run` takes them")
    cmd.add_argument("--config", help="RunConfig fields as a JSON object")
    cmd.add_argument("--name", help="the run's name (default: 'TF <model_dir name> (<template>)')")
    cmd.add_argument("--detach", action="store_true", help="print the run id and return")
    from estimator_workbench.cli.data_flags import add_data_arguments

    add_data_arguments(cmd)  # e.g. --role COL=ignore for a column the TF model did not read
    cmd.add_argument("--json", action="store_true", help="print the run as JSON, as `runs --json` does")
    return cmd


def cmd_import_tf(args: argparse.Namespace, root: Path) -> int:
    """Checks and registers the import through ``submit_run``, then follows the run."""
    from estimator_workbench import templates
    from estimator_workbench.cli.data_flags import apply_data_flags
    from estimator_workbench.cli.follow import follow_run
    from estimator_workbench.execution import run_request
    from estimator_workbench.execution.launcher import make_launcher
    from estimator_workbench.execution.submit import submit_run
    from estimator_workbench.store.records import IMPORT_ACTION
    from estimator_workbench.store.registry import RunRegistry
    from estimator_workbench.store.run_spec import RunSpecError

    params = json_object(args.params, "--params")
    run_config = json_object(args.config, "--config")
    try:
        dataset = run_request.dataset_dict(args.dataset, args.label, adjust=lambda spec: apply_data_flags(spec, args))
        template, schema = run_request.template_dict(args.template, root)
        params = templates.validate_params(schema, params)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    print(f"Checking {args.model_dir} against {template['name']} on {run_request.dataset_name(dataset)}...",
          file=sys.stderr, flush=True)
    launcher = make_launcher(root)
    try:
        record = submit_run(
            RunRegistry(root), launcher, name=args.name or f"TF {Path(args.model_dir).name} ({template['name']})",
            action=IMPORT_ACTION, dataset=dataset, template=template, params=params, run_config=run_config,
            schedule={}, checkpoint_path=str(Path(args.model_dir).expanduser()), control=_CONTROLS)
    except RunSpecError as exc:
        raise UsageError(str(exc)) from None
    print(f"Run {record.run_id} imported from TensorFlow ({record.checkpoint_path}); folder "
          f"{launcher.registry.run_dir(record.run_id)}", file=sys.stderr, flush=True)
    code = 0 if args.detach else follow_run(launcher, record.run_id)
    final = launcher.registry.get(record.run_id)
    print(json.dumps(final.to_dict(), default=str) if args.json else record.run_id)
    return code
