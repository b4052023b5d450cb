"""Exports a workbench run as a servable model: ``runs/<id>/export/saved_model/<timestamp>/``.

The export is ``estimator_engine``'s (``export_saved_model`` with
``build_parsing_serving_input_receiver_fn``): the served model takes records of the dataset's
feature columns (numbers, and strings for categorical columns, mapped to ids by the exported
preprocessing stage exactly as in training), and loads without the template's source.

Making the export calls the template's ``model_fn``, which is user code, so it runs in a child
process (``python -m estimator_workbench.serve.run_export RUN_DIR``, as the runner does), never in
the CLI or UI process. ``export_run_in_child`` starts it and returns the export folder; the folder
is reused while it is newer than the run's latest checkpoint.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from estimator_workbench.store import paths

__all__ = ["SAVED_MODEL_DIR", "example_instance", "export_run", "export_run_in_child", "parse_spec_for_task",
           "read_task_info", "saved_model_base"]

SAVED_MODEL_DIR = "saved_model"
_TASK_INFO_FILE = "task_info.json"  # written by the runner beside run.json (execution.lineage)


def saved_model_base(run_dir: str | os.PathLike[str]) -> Path:
    """``runs/<id>/export/saved_model``: the base folder (TF Serving's model base path) of a run."""
    return Path(run_dir) / paths.EXPORT_DIR / SAVED_MODEL_DIR


def parse_spec_for_task(task: dict[str, Any]) -> dict[str, Any]:
    """The records the served model takes, from the run's task info: one float per numeric
    column (``FixedLenFeature([1], float32)``), strings for categorical and hashed columns
    (``VarLenFeature(string)``, as ``make_parse_example_spec`` gives for their feature columns).

    Example:
        >>> spec = parse_spec_for_task({"numeric_features": ["x"], "categorical_features": ["c"]})
        >>> spec["x"], spec["c"]
        (FixedLenFeature(shape=(1,), dtype='float32', default_value=None), VarLenFeature(dtype='string'))
    """
    from estimator_engine import serving

    spec: dict[str, Any] = {}
    for name in task.get("feature_names") or []:
        spec[name] = None
    for name in task.get("numeric_features", []):
        spec[name] = serving.FixedLenFeature([1], "float32")
    for name in [*task.get("categorical_features", []), *dict(task.get("hashed_features", {}))]:
        spec[name] = serving.VarLenFeature("string")
    return {name: value for name, value in spec.items() if value is not None}


def read_task_info(run_dir: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The task info the runner wrote beside run.json (the columns and statistics the model was
    trained with), or None when the run has none (it never reached training)."""
    try:
        return json.loads((Path(run_dir) / _TASK_INFO_FILE).read_text("utf-8"))
    except (OSError, ValueError):
        return None


def example_instance(task: dict[str, Any], row: Any) -> dict[str, Any]:
    """One record for TF Serving's row format (``{"instances": [record]}``) of a run's served
    model, from ``row`` (a mapping or Series: one row of the run's dataset): a number per numeric
    input (an expanded date's parts computed from the date; a missing number takes the training
    mean, as in training), a string per categorical or hashed one (a missing value '<missing>').

    Example:
        >>> task = {"feature_names": ["x", "c"], "numeric_features": ["x"], "categorical_features": ["c"],
        ...         "numeric_stats": {"x": {"mean": 2.5, "std": 1.0}}}
        >>> example_instance(task, {"x": None, "c": 3.0, "label": "a"})
        {'x': 2.5, 'c': '3'}
    """
    import math

    import pandas as pd

    from estimator_workbench.data.schema import MISSING_TOKEN
    from estimator_workbench.data.spec import with_date_features

    frame = with_date_features(pd.DataFrame([dict(row)]), task.get("date_features") or {})
    values = frame.iloc[0]
    stats = task.get("numeric_stats") or {}
    record: dict[str, Any] = {}
    for name, feature in parse_spec_for_task(task).items():
        value = values.get(name)
        if feature.dtype == "string":
            if value is None or (isinstance(value, float) and math.isnan(value)):
                record[name] = MISSING_TOKEN
            elif isinstance(value, float) and value.is_integer():
                record[name] = str(int(value))  # 3.0 and '3' name one category (spec.as_str)
            else:
                record[name] = str(value)
        else:
            number = pd.to_numeric(pd.Series([value]), errors="coerce").iloc[0]
            record[name] = float(stats.get(name, {}).get("mean", 0.0)) if pd.isna(number) else float(number)
    return record


def _latest_checkpoint(run_dir: Path) -> str | None:
    from estimator_engine import checkpoints

    model_dir = run_dir / paths.MODEL_DIR
    return checkpoints.latest_checkpoint(model_dir) if model_dir.is_dir() else None


def export_run(run_dir: str | os.PathLike[str], format: str = "torch.export") -> Path:
    """Exports the run in ``run_dir`` (runs its template: call it in a child process only);
    ``format="onnx"`` adds model.onnx."""
    from estimator_engine import export as export_lib
    from estimator_workbench.execution.build import build_estimator
    from estimator_workbench.store.run_spec import RunConfigSettings, RunSpec

    run_dir = Path(run_dir)
    checkpoint = _latest_checkpoint(run_dir)
    if checkpoint is None:
        raise ValueError(f"Run {run_dir.name} has no checkpoint in {run_dir / paths.MODEL_DIR}: only a run "
                         "that trained a model can be served. Serve the training run instead.")
    spec = RunSpec.read(run_dir / paths.RUN_JSON)
    task_file = run_dir / _TASK_INFO_FILE
    if not task_file.is_file():
        raise ValueError(f"Run {run_dir.name} has no {_TASK_INFO_FILE} (the dataset's columns and statistics the "
                         "model was trained with), so its serving inputs are unknown; train it again.")
    task_info = json.loads(task_file.read_text("utf-8"))
    # the program is traced on CPU: the engine's default device, not the run's
    run_config = RunConfigSettings.model_validate({k: v for k, v in spec.run_config.to_engine().items()
                                                   if k != "device"})
    # the data is read for its columns only (predict: no label needed)
    spec = spec.model_copy(update={"action": "predict", "run_config": run_config})
    estimator, _ = build_estimator(spec, str(run_dir / paths.MODEL_DIR), task_info=task_info)
    receiver_fn = export_lib.build_parsing_serving_input_receiver_fn(parse_spec_for_task(task_info))
    base = saved_model_base(run_dir)
    try:
        path = estimator.export_saved_model(str(base), receiver_fn, checkpoint_path=checkpoint, format=format)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"Run {run_dir.name} cannot be exported for serving: {exc} Templates whose model_fn "
                         "maps categorical columns itself (InputLayer) serve numeric columns only; the canned "
                         "templates' feature columns serve both.") from exc
    return Path(path)


def _up_to_date(run_dir: Path, with_onnx: bool) -> Path | None:
    """The newest export of the run when it was made from the run's latest checkpoint (and has
    model.onnx when ``with_onnx``)."""
    base = saved_model_base(run_dir)
    if not base.is_dir():
        return None
    versions = sorted((p for p in base.iterdir() if p.name.isdigit() and (p / "signature.json").is_file()),
                      key=lambda p: int(p.name))
    if not versions:
        return None
    checkpoint = _latest_checkpoint(run_dir)
    meta = json.loads((versions[-1] / "signature.json").read_text("utf-8"))
    same = checkpoint is not None and os.path.abspath(meta.get("checkpoint_path", "")) == os.path.abspath(checkpoint)
    return versions[-1] if same and (meta.get("onnx") or not with_onnx) else None


def export_run_in_child(run_dir: str | os.PathLike[str], timeout: float = 600.0, format: str = "torch.export") -> Path:
    """The run's up-to-date export, made in a child process when there is none; ValueError with
    the child's reason when the run cannot be exported."""
    run_dir = Path(run_dir)
    existing = _up_to_date(run_dir, with_onnx=format == "onnx")
    if existing is not None:
        return existing
    from estimator_workbench.execution.processes import without_secrets

    # The template is user code: the child gets no secret of this process (the UI password, the
    # MLflow mirror's token...).
    proc = subprocess.run([sys.executable, "-m", "estimator_workbench.serve.run_export", str(run_dir),
                           "--format", format],
                          capture_output=True, text=True, timeout=timeout, check=False,
                          env=without_secrets(os.environ))
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    if proc.returncode != 0 or not lines:
        errors = [line for line in proc.stderr.splitlines() if line.strip()]
        raise ValueError(errors[-1].removeprefix("error: ") if errors else
                         f"exporting run {run_dir.name} failed (exit {proc.returncode})")
    return Path(lines[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Exports a workbench run for serving; prints the folder.")
    parser.add_argument("run_dir")
    parser.add_argument("--format", choices=("torch.export", "onnx"), default="torch.export")
    args = parser.parse_args(argv)
    try:
        print(export_run(args.run_dir, args.format), flush=True)
    except (ValueError, ImportError) as exc:
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
