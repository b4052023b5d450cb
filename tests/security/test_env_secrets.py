"""The UI's password (and any other WORKBENCH_* secret) never reaches runner processes: they run
user code. Checked on the environment the launchers build and in a real spawned runner."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from estimator_workbench.execution.launcher import LocalLauncher
from estimator_workbench.execution.processes import is_secret_env_var, without_secrets
from estimator_workbench.execution.ray_launcher import RayJobLauncher
from estimator_workbench.store.registry import RunRegistry

ENV_STUB = """
import json, os, sys
from estimator_workbench.execution import runner

def execute(ctx):
    (ctx.run_dir / "env_keys.json").write_text(json.dumps(sorted(os.environ)))

if __name__ == "__main__":
    sys.exit(runner.run(sys.argv[1], execute=execute))
"""


@pytest.fixture
def secrets(monkeypatch):
    monkeypatch.setenv("WORKBENCH_PASSWORD", "hunter2")
    monkeypatch.setenv("WORKBENCH_API_TOKEN", "tok")


@pytest.mark.parametrize("name, secret", [
    ("WORKBENCH_PASSWORD", True), ("workbench_password", True), ("WORKBENCH_DB_SECRET", True),
    ("WORKBENCH_API_TOKEN", True), ("WORKBENCH_S3_KEY", True), ("WORKBENCH_CREDENTIALS", True),
    ("WORKBENCH_HOME", False), ("WORKBENCH_RAY_ADDRESS", False),
    ("WORKBENCH_RUNNER_MODULE", False), ("WORKBENCH_RUNNER_PYTHONPATH", False),
    ("PATH", False), ("HF_TOKEN", True),  # issue 14.3: every secret-looking variable, any prefix
])
def test_which_variables_are_secrets(name, secret):
    assert is_secret_env_var(name) is secret


def test_without_secrets_keeps_the_rest():
    env = {"WORKBENCH_PASSWORD": "x", "WORKBENCH_HOME": "/ws", "PATH": "/bin"}
    assert without_secrets(env) == {"WORKBENCH_HOME": "/ws", "PATH": "/bin"}


def test_local_child_env_drops_the_password(workspace, secrets):
    launcher = LocalLauncher(workspace, gpus=[],
                             env={"WORKBENCH_PASSWORD": "passed-too", "EXTRA": "1"})
    env = launcher._child_env([], marker="attempt-marker")
    assert "WORKBENCH_PASSWORD" not in env and "WORKBENCH_API_TOKEN" not in env
    assert env["WORKBENCH_RUN_MARKER"] == "attempt-marker"  # every process of the attempt carries it
    assert env["EXTRA"] == "1" and env["WORKBENCH_HOME"] == str(workspace)


def test_spawned_runner_does_not_see_the_password(workspace, secrets, source_runner_launcher):
    launcher = source_runner_launcher("env_stub", ENV_STUB)
    run_id = RunRegistry(workspace).create_run(
        name="env", action="train", dataset={}, template={}, params={}, run_config={}).run_id
    launcher.submit(run_id)
    assert launcher.wait(run_id, timeout=60).status == "succeeded"
    keys = json.loads((Path(workspace) / "runs" / run_id / "env_keys.json").read_text())
    assert "WORKBENCH_HOME" in keys
    assert "WORKBENCH_PASSWORD" not in keys and "WORKBENCH_API_TOKEN" not in keys


def test_ray_job_env_vars_drop_the_password(workspace, secrets):
    launcher = RayJobLauncher(workspace, client=object(),
                              env={"WORKBENCH_PASSWORD": "passed", "EXTRA": "1"},
                              runtime_env={"env_vars": {"WORKBENCH_SECRET": "s", "KEEP": "2"}})
    env_vars = launcher._runtime_env()["env_vars"]
    assert not [k for k in env_vars if k.startswith("WORKBENCH_") and k != "WORKBENCH_HOME"]
    assert env_vars["EXTRA"] == "1" and env_vars["KEEP"] == "2"


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc (Linux)")
def test_warm_spare_does_not_see_the_password(workspace, secrets):
    """The pre-started runner's real environment, read from /proc while it waits for a run."""
    launcher = LocalLauncher(workspace, gpus=[], warm_spares=1)
    try:
        launcher.poll()
        spare = launcher._spares.process
        assert spare is not None
        names = {entry.split(b"=", 1)[0].decode()
                 for entry in Path(f"/proc/{spare.pid}/environ").read_bytes().split(b"\0") if entry}
    finally:
        launcher.shutdown(grace=1.0)
    assert "WORKBENCH_HOME" in names
    assert "WORKBENCH_PASSWORD" not in names and "WORKBENCH_API_TOKEN" not in names


LEAK_CHECK = ('import os\n'
              'if "WORKBENCH_PASSWORD" in os.environ or "WORKBENCH_API_TOKEN" in os.environ:\n'
              '    raise RuntimeError("a UI secret reached the user code")\n')


@pytest.mark.slow
def test_the_preflight_and_compatibility_children_get_no_secrets(secrets, tmp_path):
    """Both children run the template's code, as runners do."""
    from estimator_workbench import templates
    from estimator_workbench.cli import commands as cli
    from estimator_workbench.execution.compat import check_compatibility
    from estimator_workbench.execution.preflight import run_preflight

    code = LEAK_CHECK + templates.get_template("mlp_classifier").code
    dataset = cli._dataset_dict("iris", None)
    report = run_preflight(code, dataset, {}, timeout=120, template_name="leak")
    assert report.ok, report.summary()
    spec = {"template": {"name": "leak", "code": code}, "params": {}, "dataset": dataset, "run_config": {},
            "action": "train"}
    compat = check_compatibility(spec, tmp_path / "no_model")
    assert "secret reached" not in str(compat.error), compat.error
    assert compat.error and "checkpoint" in compat.error.lower(), compat.error  # got as far as the model
