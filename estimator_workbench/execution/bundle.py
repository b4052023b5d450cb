"""The reproducible bundle of a run: a zip with the template snapshot, ``run.json``, params,
RunConfig, dataset reference, package versions, summary, a re-run script and, optionally, the
latest checkpoint. Written by ``estimator-workbench export`` and the run page's download."""

from __future__ import annotations

import contextlib
import json
import os
import platform
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from estimator_workbench.execution.rerun import BUNDLE_CHECKPOINT_DIR
from estimator_workbench.store import paths
from estimator_workbench.store.records import RunRecord
from estimator_workbench.store.registry import RunRegistry

__all__ = ['export_bundle']


_RERUN = '''"""Re-runs this exported workbench run: python rerun.py [--data FILE] [--out DIR].

Needs the estimator-workbench package installed; the run goes through the workbench's own execution
path (estimator_workbench.execution.rerun). The dataset is the bundled one named in run.json, or --data FILE
(its content is checked against the recorded fingerprint).
"""

import pathlib
import sys

from estimator_workbench.execution.rerun import main

if __name__ == "__main__":
    sys.exit(main(bundle_dir=pathlib.Path(__file__).resolve().parent))
'''


def _package_versions() -> dict[str, str]:
    from importlib import metadata

    versions = {"python": platform.python_version(), "platform": platform.platform()}
    for name in ("estimator-workbench", "torch", "numpy", "pandas", "streamlit", "plotly"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            versions[name] = metadata.version(name)
    return versions


def export_bundle(root: str | os.PathLike[str], run_id: str, out: str | os.PathLike[str] | None = None,
                  *, with_checkpoint: bool = False) -> Path:
    """Writes a reproducible zip of a run and returns its path.

    The zip holds ``model_fn.py`` (the template snapshot), ``run.json`` (params, RunConfig,
    schedule, dataset reference with fingerprint, column roles and split), ``params.json``,
    ``run_config.json``, ``dataset.json``, ``versions.json`` (Python and package versions),
    ``summary.json``, ``rerun.py`` and, with ``with_checkpoint``, the latest checkpoint files.
    Default location: ``runs/<id>/export/<id>.zip``.
    """
    reg = RunRegistry(root)
    record = reg.get(run_id)
    folder = reg.run_dir(run_id)
    target = Path(out) if out is not None else folder / paths.EXPORT_DIR / f"{run_id}.zip"
    target.parent.mkdir(parents=True, exist_ok=True)
    run_json_path = folder / paths.RUN_JSON
    spec = json.loads(run_json_path.read_text("utf-8")) if run_json_path.exists() else {}
    spec["template"] = {"name": record.template_name, "code": "see model_fn.py"}
    checkpoint_files: list[Path] = []
    if with_checkpoint:
        from estimator_engine import checkpoints

        model_dir = folder / paths.MODEL_DIR
        latest = checkpoints.latest_checkpoint(model_dir) if model_dir.is_dir() else None
        if latest is None:
            raise ValueError(f"Run {run_id!r} has no checkpoint to include.")
        # A bundle is shared: never ship a file the safe loader refuses (a crafted checkpoint).
        # load_checkpoint raises CheckpointError saying why, and nothing is written.
        checkpoints.load_checkpoint(latest)
        checkpoint_files = sorted(Path(latest).parent.glob(Path(latest).name + "*"))
    tmp = target.with_suffix(".zip.tmp")
    try:
        _write_bundle(tmp, record, spec, folder, checkpoint_files)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, target)
    return target


def _write_bundle(tmp: Path, record: RunRecord, spec: Mapping[str, Any], folder: Path,
                  checkpoint_files: list[Path]) -> None:
    dump = lambda value: json.dumps(value, indent=2, sort_keys=True, default=str)  # noqa: E731
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("model_fn.py", record.template_code or "")
        zf.writestr("run.json", dump(spec))
        zf.writestr("params.json", dump(record.params))
        zf.writestr("run_config.json", dump({**record.run_config, "schedule": record.schedule}))
        zf.writestr("dataset.json", dump(record.dataset))
        zf.writestr("versions.json", dump(_package_versions()))
        zf.writestr("summary.json", dump({"status": record.status, "summary": record.summary}))
        zf.writestr("rerun.py", _RERUN)
        task_info = folder / "task_info.json"
        if task_info.exists():
            zf.write(task_info, "task_info.json")
        for path in checkpoint_files:
            zf.write(path, f"{BUNDLE_CHECKPOINT_DIR}/{path.name}")
