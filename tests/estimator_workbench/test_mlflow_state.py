"""Where a run's MLflow mirror stands (``store.mlflow_state``), the run switch on the submit path, the
launcher's trigger and the secrets: no MLflow server needed (``test_mlflow_mirror.py`` has it)."""

from __future__ import annotations

import pytest

from estimator_workbench.cli import commands
from estimator_workbench.execution.mirror_trigger import MirrorTrigger
from estimator_workbench.execution.processes import is_secret_env_var, without_secrets
from estimator_workbench.store import mlflow_state
from estimator_workbench.store.mlflow_state import MirrorState
from estimator_workbench.store.registry import RunRegistry


@pytest.mark.parametrize(("uri", "shown"), [
    ("https://bob:s3cret@mlflow.example.com/base", "https://bob@mlflow.example.com/base"),
    ("http://:tok@127.0.0.1:5000", "http://127.0.0.1:5000"),
    ("http://bob:pw@[::1]:5000/", "http://bob@[::1]:5000/"),
    ("http://127.0.0.1:5000", "http://127.0.0.1:5000"),
    ("databricks", "databricks"),
])
def test_a_uri_is_kept_and_shown_without_its_password(uri, shown):
    assert mlflow_state.redact_uri(uri) == shown


def test_pending_mirrors_are_queued_and_their_state_survives_a_round_trip(tmp_path):
    (tmp_path / "runs" / "r-a").mkdir(parents=True)
    (tmp_path / "runs" / "r-b").mkdir(parents=True)
    assert mlflow_state.mark_pending(tmp_path, "r-a", reason="x") is None  # not mirrored: nothing to keep
    state = mlflow_state.mark_pending(tmp_path, "r-a", tracking_uri="http://u:pw@h:1", reason="queued")
    assert mlflow_state.read_state(tmp_path / "runs" / "r-a") == state
    assert state.tracking_uri == "http://u@h:1" and "pw" not in (tmp_path / "runs" / "r-a" / "mlflow.json").read_text()
    again = mlflow_state.mark_pending(tmp_path, "r-a", reason="the run is running")  # keeps the URI
    assert (again.tracking_uri, again.reason) == ("http://u@h:1", "the run is running")
    mlflow_state.mark_pending(tmp_path, "r-b", tracking_uri="http://h:1", reason="queued")
    assert sorted(mlflow_state.pending_run_ids(tmp_path)) == ["r-a", "r-b"]
    mlflow_state.clear_pending(tmp_path, "r-a")
    assert mlflow_state.pending_run_ids(tmp_path) == ["r-b"]
    with pytest.raises(ValueError, match=r"state must be one of \['pending', 'synced', 'failed'\], given: 'done'"):
        mlflow_state.write_state(tmp_path / "runs" / "r-b", state.replace(state="done"))


def test_the_run_page_line_says_where_the_mirror_stands():
    base = MirrorState("pending", "http://127.0.0.1:5000", reason="waiting for the run to finish")
    assert mlflow_state.describe(base) == ("MLflow: pending (waiting for the run to finish); mirrors to "
                                           "http://127.0.0.1:5000")
    down = base.replace(reason="not reachable at http://127.0.0.1:5000: ConnectionRefusedError", attempts=2,
                        next_attempt_at=160.0)
    assert mlflow_state.describe(down, now=100.0) == ("MLflow: not reachable at http://127.0.0.1:5000: "
                                                      "ConnectionRefusedError; will retry in 60 s (attempt 3)")
    failed = base.replace(state="failed", reason="RestException: PERMISSION_DENIED: no")
    assert mlflow_state.describe(failed) == ("MLflow: failed at http://127.0.0.1:5000: RestException: "
                                             "PERMISSION_DENIED: no. Retry with `estimator-workbench mlflow sync`.")
    synced = base.replace(state="synced", run_url="http://127.0.0.1:5000/#/experiments/1/runs/abc",
                          model_note="the run failed")
    assert mlflow_state.describe(synced) == ("MLflow: synced to http://127.0.0.1:5000/#/experiments/1/runs/abc; "
                                             "no model logged: the run failed")
    assert mlflow_state.describe(None) == "MLflow: not mirrored"


def test_mlflow_credentials_never_reach_runner_processes():
    for name in ("MLFLOW_TRACKING_TOKEN", "MLFLOW_TRACKING_PASSWORD", "WORKBENCH_MLFLOW_URI"):
        assert is_secret_env_var(name), name
    assert without_secrets({"WORKBENCH_MLFLOW_URI": "http://u:pw@h", "MLFLOW_TRACKING_TOKEN": "t",
                            "MLFLOW_TRACKING_USERNAME": "u"}) == {"MLFLOW_TRACKING_USERNAME": "u"}


def _submit(workspace, **schedule):
    from estimator_workbench import templates
    from estimator_workbench.execution.run_request import dataset_dict
    from estimator_workbench.execution.submit import submit_run

    info = templates.get_template("mlp_classifier")
    return submit_run(RunRegistry(workspace), None, name="n", action="train", dataset=dataset_dict("iris"),
                      template={"name": info.name, "code": info.code}, params={}, run_config={},
                      schedule={"max_steps": 5, "preflight": False, **schedule})


def test_the_switch_is_on_with_the_uri_and_can_be_turned_off_per_run(workspace, monkeypatch):
    pytest.importorskip("pydantic")
    record = _submit(workspace)
    assert "mlflow" not in record.schedule and mlflow_state.read_state(workspace / "runs" / record.run_id) is None
    monkeypatch.setenv(mlflow_state.URI_ENV_VAR, "http://127.0.0.1:9")
    record = _submit(workspace)
    state = mlflow_state.read_state(workspace / "runs" / record.run_id)
    assert record.schedule["mlflow"] is True and state.state == "pending"
    assert state.tracking_uri == "http://127.0.0.1:9" and mlflow_state.pending_run_ids(workspace) == [record.run_id]
    off = _submit(workspace, mlflow=False)
    assert off.schedule["mlflow"] is False and mlflow_state.read_state(workspace / "runs" / off.run_id) is None


def test_asking_for_the_mirror_without_a_uri_is_refused_before_the_run_exists(workspace, capsys):
    code = commands.main(["run", "--dataset", "iris", "--template", "mlp_classifier", "--steps", "5", "--mlflow",
                          "--detach"])
    assert code == 2
    assert capsys.readouterr().err.strip().endswith(
        "error: --mlflow mirrors the run to an MLflow tracking server, but $WORKBENCH_MLFLOW_URI is not set. Set it "
        "to the server's URI (e.g. export WORKBENCH_MLFLOW_URI=http://127.0.0.1:5000) before starting the "
        "workbench, or turn the mirror off.")
    assert RunRegistry(workspace).list_runs() == []


def test_the_trigger_waits_for_the_run_to_finish_and_needs_the_uri(workspace, monkeypatch):
    registry = RunRegistry(workspace)
    monkeypatch.setenv(mlflow_state.URI_ENV_VAR, "http://127.0.0.1:9")
    record = _submit(workspace)
    trigger = MirrorTrigger(registry)
    assert trigger.enabled and trigger.due_run_ids() == []  # queued: not yet
    registry.set_status(record.run_id, "running", pid=None)
    registry.set_status(record.run_id, "succeeded")
    assert trigger.due_run_ids() == [record.run_id]
    later = mlflow_state.read_state(registry.run_dir(record.run_id)).replace(attempts=1, next_attempt_at=2e9)
    mlflow_state.write_state(registry.run_dir(record.run_id), later)
    assert trigger.due_run_ids() == [] and trigger.due_run_ids(now=2e9 + 1) == [record.run_id]
    monkeypatch.delenv(mlflow_state.URI_ENV_VAR)
    assert not trigger.enabled and trigger.poll(now=True) is False and trigger.process() is None


def test_metric_lines_become_mlflow_metrics_at_their_step_and_time(tmp_path):
    """A line without a step (logged at 0) and a NaN value (MLflow keeps NaN) are mirrored too."""
    pytest.importorskip("mlflow")
    from estimator_workbench.tracking.mlflow_mirror import _metrics

    (tmp_path / "metrics.jsonl").write_text(
        '{"step": null, "wall_time": 1.5, "split": "eval", "name": "acc", "value": 0.5}\n'
        '{"step": 3, "wall_time": 2.0, "split": "train", "name": "loss", "value": NaN}\n'
        '{"step": 4, "wall_time": 2.5, "split": "train", "name": "odd name!", "value": 1.0}\n')
    got = [(m.key, m.value, m.timestamp, m.step) for m in _metrics(tmp_path)]
    assert got[0] == ("eval/acc", 0.5, 1500, 0) and got[2] == ("train/odd name_", 1.0, 2500, 4)
    assert got[1][0] == "train/loss" and got[1][1] != got[1][1] and got[1][2:] == (2000, 3)


def test_a_copied_switch_without_a_server_is_off_rather_than_refused(workspace):
    """A rerun copies the schedule of a mirrored run; on a workbench started without MLflow the
    new run is simply not mirrored."""
    record = _submit(workspace, mlflow=True)
    assert record.schedule["mlflow"] is False and mlflow_state.read_state(workspace / "runs" / record.run_id) is None


def test_a_sweeps_trials_are_queued_for_the_mirror_without_the_credentials(workspace, monkeypatch):
    """The sweep driver runs without secrets: it gets the server without its password, queues its
    trials' mirrors, and never syncs; the UI or CLI holding the URI syncs them."""
    from estimator_workbench.sweeps.store import driver_environment

    env = driver_environment("carol", {mlflow_state.URI_ENV_VAR: "http://bob:s3cret@127.0.0.1:9/x", "HOME": "/h"})
    assert mlflow_state.URI_ENV_VAR not in env and "s3cret" not in " ".join(env.values())
    assert env[mlflow_state.TARGET_ENV_VAR] == "http://bob@127.0.0.1:9/x"
    assert mlflow_state.TARGET_ENV_VAR not in driver_environment(None, {"HOME": "/h"})  # no mirror configured

    monkeypatch.delenv(mlflow_state.URI_ENV_VAR, raising=False)
    monkeypatch.setenv(mlflow_state.TARGET_ENV_VAR, env[mlflow_state.TARGET_ENV_VAR])  # as in the driver
    record = _submit(workspace)
    state = mlflow_state.read_state(workspace / "runs" / record.run_id)
    assert record.schedule["mlflow"] is True and state.state == "pending"
    assert state.tracking_uri == "http://bob@127.0.0.1:9/x" and mlflow_state.pending_run_ids(workspace) == [record.run_id]
    assert not MirrorTrigger(RunRegistry(workspace)).enabled  # the driver never syncs
    monkeypatch.setenv(mlflow_state.URI_ENV_VAR, "http://bob:s3cret@127.0.0.1:9/x")  # the UI / CLI
    from estimator_workbench.tracking.mlflow_mirror import tracking_uri_for

    assert tracking_uri_for(state) == "http://bob:s3cret@127.0.0.1:9/x"  # it syncs with the password
