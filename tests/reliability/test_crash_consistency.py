"""SIGKILL at random points of a checkpoint write and of a predictions write: what is on disk
afterwards is always consistent (the newest listed checkpoint loads, no torn checkpoint file is
ever visible under its final name, a predictions file is complete or absent).

SIGKILL of a whole training run and its resume are in tests/estimator_workbench/test_launcher.py and
tests/estimator_workbench/test_runner.py::TestEngineRuns::test_sigkill_mid_training_then_resume_to_completion.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from estimator_engine import checkpoints
from estimator_engine.errors import CheckpointError

REPO = Path(__file__).resolve().parents[2]
WORKER = str(Path(__file__).with_name("crash_workers.py"))


def spawn(*args: str) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
    return subprocess.Popen([sys.executable, WORKER, *args], cwd=REPO, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def kill(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)


def wait_line(proc: subprocess.Popen[str], prefix: str, timeout: float = 60.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if line.startswith(prefix):
            return line
        if not line and proc.poll() is not None:
            raise AssertionError(f"worker exited ({proc.returncode}): {proc.stderr.read()}")
    raise AssertionError(f"no {prefix!r} line within {timeout}s")


def assert_consistent(model_dir: Path) -> int:
    """Every listed checkpoint and every file the UI would list loads; returns the newest step."""
    latest = checkpoints.latest_checkpoint(model_dir)
    assert latest is not None
    step = checkpoints.load_checkpoint(latest)["global_step"]
    assert latest.endswith(f"model.ckpt-{step}")
    for path in checkpoints.all_checkpoints(model_dir):  # listed in the state file
        assert os.path.isfile(path), f"listed but missing: {path}"
        checkpoints.load_checkpoint(path)
    for path in checkpoints.list_checkpoint_files(model_dir):  # what the UI's listing shows
        checkpoints.load_checkpoint(path)
    return step


@pytest.mark.slow
def test_sigkill_at_random_points_of_a_checkpoint_loop(tmp_path):
    """Five kills at random moments of back-to-back 4 MB checkpoint writes (some land inside the
    write: the loop does nothing else); after each, restart continues from the newest step."""
    model_dir = tmp_path / "model"
    rng = random.Random(7)
    steps = []
    for _ in range(5):
        proc = spawn("ckpt-loop", str(model_dir))
        try:
            wait_line(proc, "writing")
            for _ in range(rng.randint(1, 4)):
                wait_line(proc, "writing")
            time.sleep(rng.uniform(0.0, 0.01))
        finally:
            kill(proc)
        steps.append(assert_consistent(model_dir))
        assert len(checkpoints.all_checkpoints(model_dir)) <= 3  # pruning survived the kills
    assert steps == sorted(steps) and steps[-1] > steps[0], steps  # the step only moves forward


@pytest.mark.slow
def test_power_cut_halfway_through_a_checkpoint_file(tmp_path):
    """The worker dies with half of step 2's bytes on disk: only a temp file holds them; the state
    file and every ``model.ckpt-*`` name still point at the complete step 1."""
    model_dir = tmp_path / "model"
    proc = spawn("ckpt-torn", str(model_dir))
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    leftovers = [p.name for p in model_dir.iterdir() if p.name.endswith(".tmp")]
    assert leftovers and all(name.startswith(".model.ckpt-2.") for name in leftovers), leftovers
    assert not (model_dir / "model.ckpt-2").exists()
    assert assert_consistent(model_dir) == 1
    # The torn bytes themselves are refused with a clear error, not loaded as garbage.
    with pytest.raises(CheckpointError, match="is not a valid estimator_engine checkpoint"):
        checkpoints.load_checkpoint(model_dir / leftovers[0])
    # Training goes on: the next save prunes nothing it should not and lists the new step.
    import torch

    checkpoints.save_checkpoint(model_dir, {"variables": {"w": torch.zeros(3)}}, 2)
    assert assert_consistent(model_dir) == 2


def test_sigkill_during_a_predictions_write_leaves_no_file(tmp_path):
    proc = spawn("preds", str(tmp_path), "3000")
    try:
        wait_line(proc, "flushed")  # the temp file has its first chunk
        time.sleep(random.Random(3).uniform(0.0, 0.2))
    finally:
        kill(proc)
    assert not (tmp_path / "predictions.csv").exists()  # absent, never half a file
    assert (tmp_path / "predictions.csv.tmp").exists()  # the partial work under the temp name


def test_predictions_write_completes_after_an_earlier_kill(tmp_path):
    (tmp_path / "predictions.csv.tmp").write_text("id,x,predictions\n0,stale,1\n")  # a dead run's
    proc = spawn("preds", str(tmp_path), "200")
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    frame = pd.read_csv(tmp_path / "predictions.csv")
    assert len(frame) == 200 and frame["predictions"].tolist() == list(range(200))
    assert frame["x"].str.startswith("'=cmd").all()  # formula cells escaped in the download
    assert not (tmp_path / "predictions.csv.tmp").exists()
