"""Re-runs an exported run bundle through the runner's own execution path.

The bundle's ``rerun.py`` (written by ``estimator_workbench.execution.bundle``) calls ``main`` here, so a
re-run trains, evaluates, early-stops and predicts exactly as the workbench did
(``estimator_workbench.execution.engine_run.execute_with_engine``: ``ee.train_and_evaluate``, the engine's
early-stopping hooks, ``evaluate``, ``predict``), not with a copy of that logic.

Command line (from the unzipped bundle): ``python rerun.py [--data FILE] [--out DIR]``; the results
land in ``DIR`` (default ``<bundle>/rerun``): ``model/`` (checkpoints, eval results),
``metrics.jsonl`` and, for a predict run, ``predictions.csv``.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
from pathlib import Path

from estimator_workbench.execution.lineage import TASK_INFO_FILE

__all__ = ["BUNDLE_CHECKPOINT_DIR", "main", "rerun_bundle"]

BUNDLE_CHECKPOINT_DIR = "checkpoint"


def _bundled_checkpoint(bundle_dir: Path) -> str | None:
    """``<bundle>/checkpoint/model.ckpt-N`` (the prefix of the files the bundle holds), or None."""
    prefixes = {match.group(1): int(match.group(2))
                for path in (bundle_dir / BUNDLE_CHECKPOINT_DIR).glob("*.ckpt-*")
                if (match := re.match(r"(.*\.ckpt-(\d+))", path.name))}
    if not prefixes:
        return None
    return str(bundle_dir / BUNDLE_CHECKPOINT_DIR / max(prefixes, key=prefixes.__getitem__))


def rerun_bundle(bundle_dir: str | os.PathLike[str], *, data: str | os.PathLike[str] | None = None,
                 out_dir: str | os.PathLike[str] | None = None) -> Path:
    """Re-runs the unzipped bundle in ``bundle_dir``; returns the output folder.

    Args:
        bundle_dir: the folder holding ``run.json`` and ``model_fn.py``.
        data: the dataset file, when the run did not use a bundled dataset (its fingerprint is
            compared with the recorded one; a mismatch is reported, not refused).
        out_dir: where the results go (default ``<bundle_dir>/rerun``).

    Example:
        >>> # out = rerun_bundle("unzipped_bundle", out_dir="again")
    """
    from estimator_workbench.data import datasets
    from estimator_workbench.execution.engine_run import execute_with_engine
    from estimator_workbench.execution.run_context import RunContext
    from estimator_workbench.store.run_spec import RunSpec

    bundle_dir = Path(bundle_dir).resolve()
    spec = RunSpec.read(bundle_dir / "run.json")  # a bundle of an older workbench is migrated
    template = spec.template.model_copy(update={"code": (bundle_dir / "model_fn.py").read_text("utf-8")})
    dataset = dict(spec.dataset)
    if data is not None:
        dataset["ref"] = {"kind": "file", "path": str(Path(data).resolve())}
    recorded = dataset.get("fingerprint")
    if recorded and datasets.DatasetSpec.from_dict(dataset).fingerprint() != recorded:
        print("warning: the dataset differs from the one the run used (fingerprint mismatch)", file=sys.stderr)
    out = Path(out_dir).resolve() if out_dir is not None else bundle_dir / "rerun"
    out.mkdir(parents=True, exist_ok=True)
    if (bundle_dir / TASK_INFO_FILE).exists() and not (out / TASK_INFO_FILE).exists():
        shutil.copyfile(bundle_dir / TASK_INFO_FILE, out / TASK_INFO_FILE)
    checkpoint = spec.checkpoint_path
    if spec.action in ("evaluate", "predict"):
        checkpoint = _bundled_checkpoint(bundle_dir)
        if checkpoint is None:
            raise ValueError(f"This {spec.action} run needs the trained model, and the bundle in "
                             f"{bundle_dir} has no checkpoint/ folder: export it again with "
                             "--with-checkpoint.")
    # A bundle has no parent run: what the run took from it travels in the bundle instead.
    spec = spec.model_copy(update={"template": template, "dataset": dataset, "parent_run_id": None,
                                   "parent_relation": None, "run_id": spec.run_id or "rerun",
                                   "checkpoint_path": checkpoint})
    execute_with_engine(RunContext(run_dir=out, spec=spec))
    return out


def main(argv: list[str] | None = None, *, bundle_dir: str | os.PathLike[str] | None = None) -> int:
    """``python rerun.py [--data FILE] [--out DIR]``; ``bundle_dir`` defaults to the current folder."""
    parser = argparse.ArgumentParser(description="Re-runs an exported workbench run with the engine.")
    parser.add_argument("--data", help="the dataset file, when it is not a bundled one")
    parser.add_argument("--out", help="the output folder (default: <bundle>/rerun)")
    args = parser.parse_args(argv)
    out = rerun_bundle(bundle_dir or Path.cwd(), data=args.data, out_dir=args.out)
    print(f"re-run finished: results in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
