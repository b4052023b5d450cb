"""Issue 24 item 8: with umask 022 other accounts read uploads, registry.sqlite, run.json,
predictions and worker.log. The workbench's processes create the workspace owner-only (folders
0700, files 0600) whatever the shell's umask, and an existing workspace open to others is made
0700 at start, with a message."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from estimator_workbench.cli import commands as cli
from estimator_workbench.store import paths
from estimator_workbench.store.registry import RunRegistry


def make_run(registry: RunRegistry):
    return registry.create_run(
        name="demo", action="train", dataset={"name": "iris", "fingerprint": "sha256:abc", "label": "species"},
        template={"name": "mlp_classifier", "code": "def model_fn(features): ...\n"},
        params={}, run_config={}, schedule={"max_steps": 10})


def open_to_others(root: Path) -> list[str]:
    found = [root, *root.rglob("*")]
    return sorted(f"{stat.S_IMODE(p.lstat().st_mode):04o} {p.relative_to(root.parent)}"
                  for p in found if p.lstat().st_mode & 0o077)


@pytest.mark.slow
def test_a_cli_run_under_umask_022_leaves_nothing_open_to_others(tmp_path):
    home = tmp_path / "workspace"
    env = dict(os.environ, WORKBENCH_WARM_SPARES="0", OMP_NUM_THREADS="1")
    env.pop("WORKBENCH_HOME", None)
    proc = subprocess.run(["sh", "-c", 'umask 022; exec "$@"', "sh", sys.executable, "-m",
                           "estimator_workbench", "--workspace", str(home), "run", "--dataset", "iris",
                           "--template", "mlp_classifier", "--steps", "5"],
                          capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (record,) = RunRegistry(home).list_runs()
    run = RunRegistry(home).run_dir(record.run_id)
    made = {p.name for p in run.rglob("*")}
    assert {"run.json", "worker.log", "metrics.jsonl", "checkpoint", "model.ckpt-5"} <= made
    assert (home / paths.REGISTRY_FILE).exists()
    assert open_to_others(home) == []


def test_the_registry_makes_its_workspace_owner_only_whatever_the_umask(tmp_path):
    previous = os.umask(0o022)
    try:
        record = make_run(RunRegistry(tmp_path / "ws"))
    finally:
        os.umask(previous)
    assert stat.S_IMODE((tmp_path / "ws").stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "ws" / "runs" / record.run_id).stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "ws" / "runs").stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "ws" / paths.REGISTRY_FILE).stat().st_mode) == 0o600


def test_runner_writes_are_owner_only_even_under_umask_022(tmp_path):
    from estimator_workbench.store import metrics_hook

    previous = os.umask(0o022)
    try:
        metrics_hook.append_rows(tmp_path / "metrics.jsonl", [
            {"step": 1, "split": "train", "name": "loss", "value": 1.0, "wall_time": 0.0}])
    finally:
        os.umask(previous)
    assert stat.S_IMODE((tmp_path / "metrics.jsonl").stat().st_mode) == 0o600


def test_an_existing_open_workspace_is_made_owner_only_with_a_message(tmp_path, capsys):
    home = tmp_path / "workspace"
    make_run(RunRegistry(home))
    os.chmod(home, 0o755)
    assert cli.main(["--workspace", str(home), "runs"]) == 0
    err = capsys.readouterr().err
    assert f"the workspace {home} was open to other accounts (mode 0755): it is now owner-only (0700)" in err
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    assert cli.main(["--workspace", str(home), "runs"]) == 0
    assert "open to other accounts" not in capsys.readouterr().err  # said once, when it changed


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give the folder another owner")
def test_a_workspace_of_another_owner_is_left_alone_with_a_warning(tmp_path):
    home = tmp_path / "theirs"
    home.mkdir(mode=0o755)
    os.chmod(home, 0o755)
    os.chown(home, 65534, 65534)
    note = paths.secure_workspace(home)
    assert note is not None and "not yours to change" in note and "chmod 700" in note
    assert stat.S_IMODE(home.stat().st_mode) == 0o755


def test_the_console_script_sets_umask_077(tmp_path):
    code = ("import os, sys; os.umask(0o022); from estimator_workbench import _entry;"
            "_entry.main(['--workspace', sys.argv[1], 'runs']); print(oct(os.umask(0)))")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "ws")], capture_output=True,
                         text=True, timeout=120)
    assert out.stdout.strip().splitlines()[-1] == "0o77", out.stdout + out.stderr
