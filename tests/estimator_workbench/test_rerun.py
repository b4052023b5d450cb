"""Tests of estimator_workbench.execution.rerun: an exported bundle re-runs through the runner's own path."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import estimator_engine as ee
from estimator_engine import checkpoints
from estimator_workbench.execution import rerun, runner
from estimator_workbench.execution.bundle import export_bundle
from estimator_workbench.store.registry import RunRegistry


def _iris_run(workspace, action, schedule, **kwargs):
    from estimator_workbench import templates
    from estimator_workbench.cli import commands as cli

    info = templates.get_template("mlp_classifier")
    return RunRegistry(workspace).create_run(
        name="iris", action=action, dataset=cli._dataset_dict("iris", None),
        template={"name": info.name, "code": info.code}, params={"hidden_units": "16"},
        run_config={"tf_random_seed": 0}, schedule=schedule, **kwargs)


@pytest.mark.slow
def test_the_bundles_rerun_script_repeats_an_early_stopped_run(workspace, tmp_path):
    schedule = {"max_steps": 5000, "eval_every_steps": 20,
                "early_stopping": {"metric": "loss", "patience": 2, "min_delta": 100.0}}
    rec = _iris_run(workspace, "train_and_evaluate", schedule)
    folder = RunRegistry(workspace).run_dir(rec.run_id)
    assert runner.run(folder, install_signal_handlers=False) == 0
    bundle = tmp_path / "bundle"
    with zipfile.ZipFile(export_bundle(workspace, rec.run_id)) as zf:
        zf.extractall(bundle)

    done = subprocess.run([sys.executable, str(bundle / "rerun.py"), "--out", str(tmp_path / "again")],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    again = tmp_path / "again"
    # The same early stop (the old string program ignored early stopping and trained 5000 steps).
    assert checkpoints.read_global_step(again / "model") == checkpoints.read_global_step(folder / "model") == 60
    original, repeated = (ee.read_eval_metrics(d / "model" / "eval") for d in (folder, again))
    assert list(repeated) == list(original) == [20, 40, 60]
    assert repeated[60]["loss"] == pytest.approx(original[60]["loss"], rel=1e-6)
    rows = [json.loads(line) for line in (again / "metrics.jsonl").read_text().splitlines()]
    assert sorted({r["step"] for r in rows if r["split"] == "eval"}) == [20, 40, 60]


def test_an_evaluate_bundle_without_a_checkpoint_says_how_to_export_it(tmp_path):
    from estimator_workbench.cli import commands as cli

    (tmp_path / "run.json").write_text(json.dumps({
        "action": "evaluate", "dataset": cli._dataset_dict("iris", None), "template": {"name": "t"},
        "params": {}, "run_config": {}, "schedule": {}}))
    (tmp_path / "model_fn.py").write_text("")
    with pytest.raises(ValueError, match=r"needs the trained model, and the bundle in .* has no "
                                         r"checkpoint/ folder: export it again with --with-checkpoint"):
        rerun.rerun_bundle(tmp_path)


def test_the_newest_bundled_checkpoint_is_used(tmp_path):
    folder = tmp_path / rerun.BUNDLE_CHECKPOINT_DIR
    folder.mkdir()
    for name in ("model.ckpt-100.pt", "model.ckpt-100.index", "model.ckpt-20.pt"):
        (folder / name).write_text("")
    assert rerun._bundled_checkpoint(tmp_path) == str(Path(folder / "model.ckpt-100"))
    assert rerun._bundled_checkpoint(tmp_path / "none") is None
