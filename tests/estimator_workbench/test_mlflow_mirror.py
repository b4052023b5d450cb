"""The MLflow mirror (issue 27 §3) against a real ``mlflow server`` (SQLite backend, local artifact
root, loopback), spoken to as a user would: ``MlflowClient`` for params, metrics and tags,
``mlflow.pyfunc.load_model(uri).predict(DataFrame)`` for the model, compared with the run's own
``Estimator.predict()``. MLflow down never fails a run: the mirror waits, and a later sync does it.

Skips without mlflow (the ``mlflow`` extra) or a server to start (``tests/mlflow_server.py``);
fails instead under ``REQUIRE_MLFLOW_TESTS=1`` (.ci/run).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from mlflow_server import MlflowServer, find_server, free_port

from estimator_workbench.cli import commands
from estimator_workbench.store import mlflow_state

REQUIRED = os.environ.get("REQUIRE_MLFLOW_TESTS") == "1"
TOKEN = "tok-do-not-leak-0123456789"


def _need(reason: str) -> None:
    if REQUIRED:
        pytest.fail(f"REQUIRE_MLFLOW_TESTS=1: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory):
    """One real MLflow tracking server for the session (about 10-40 s to start), stopped after."""
    try:
        import mlflow  # noqa: F401
    except ImportError:
        _need("mlflow is not installed: pip install -e '.[mlflow]'")
    executable, why = find_server()
    if executable is None:
        _need(why)
    server = MlflowServer(executable, tmp_path_factory.mktemp("mlflow-server")).start()
    yield server
    server.stop()


def _penguins_rows(task: dict, rows: int = 12) -> pd.DataFrame:
    from estimator_workbench.data import datasets

    frame = pd.read_csv(datasets.bundled_path("penguins")).dropna().head(rows)
    return frame[task["feature_names"]].reset_index(drop=True)


@pytest.fixture(scope="module")
def mirrored_run(mlflow_server, tmp_path_factory):
    """A DNNClassifier run on penguins (numbers and strings) submitted with $WORKBENCH_MLFLOW_URI set
    and a note, run to its end, then synced: ``(workspace, record, state before the sync, state)``."""
    from estimator_workbench import templates
    from estimator_workbench.execution import runner
    from estimator_workbench.execution.run_request import dataset_dict
    from estimator_workbench.execution.submit import submit_run
    from estimator_workbench.store.registry import RunRegistry
    from estimator_workbench.tracking.mlflow_mirror import sync

    workspace = tmp_path_factory.mktemp("mirrored") / "ws"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(mlflow_state.URI_ENV_VAR, mlflow_server.uri)
        patch.setenv("MLFLOW_TRACKING_TOKEN", TOKEN)
        patch.setenv("WORKBENCH_MLFLOW_EXPERIMENT", "workbench-tests")
        registry = RunRegistry(workspace)
        info = templates.get_template("DNNClassifier")
        record = submit_run(registry, None, name="penguins mirrored", action="train",
                            dataset=dataset_dict("penguins"), template={"name": info.name, "code": info.code},
                            params={"hidden_units": "16,8"}, run_config={"tf_random_seed": 7},
                            schedule={"max_steps": 25, "metrics_every_n_steps": 5, "preflight": False})
        registry.set_note(record.run_id, "first try: two hidden layers")
        run_dir = registry.run_dir(record.run_id)
        waiting = mlflow_state.read_state(run_dir)
        assert runner.run(run_dir, install_signal_handlers=False) == 0
        finished = mlflow_state.read_state(run_dir)
        results = sync(workspace)
    return workspace, registry.get(record.run_id), (waiting, finished), dict(results)[record.run_id]


pytestmark = pytest.mark.slow  # a real server, training runs, exports (seconds each)


def test_a_finished_run_waits_for_its_sync_then_is_synced(mirrored_run):
    workspace, record, (waiting, finished), state = mirrored_run
    assert record.status == "succeeded" and record.schedule["mlflow"] is True  # on by default with the URI
    assert (waiting.state, waiting.reason) == ("pending", "waiting for the run to finish")
    assert (finished.state, finished.reason) == ("pending", "the run has finished; the next sync mirrors it")
    assert state.state == "synced" and state.mlflow_run_id and state.model_uri
    assert state.synced_finished_at == record.finished_at
    assert mlflow_state.pending_run_ids(workspace) == []  # off the queue
    assert mlflow_state.describe(state).startswith(f"MLflow: synced to {state.run_url}")
    saved = (workspace / "runs" / record.run_id / "mlflow.json").read_text()
    assert TOKEN not in saved and TOKEN not in (workspace / "runs" / record.run_id / "run.json").read_text()


def test_params_run_config_tags_and_notes_are_on_the_mlflow_run(mirrored_run, mlflow_server):
    from mlflow.tracking import MlflowClient

    _, record, _, state = mirrored_run
    run = MlflowClient(mlflow_server.uri).get_run(state.mlflow_run_id)
    assert run.info.status == "FINISHED" and run.info.run_name == "penguins mirrored"
    params = run.data.params
    assert params["hidden_units"] == "16,8" and params["run_config.tf_random_seed"] == "7"
    assert params["schedule.max_steps"] == "25" and params["schedule.metrics_every_n_steps"] == "5"
    tags = run.data.tags
    assert {k: tags[k] for k in ("workbench_run_id", "dataset", "template", "seed", "action", "workbench_status")} == {
        "workbench_run_id": record.run_id, "dataset": "penguins", "template": "DNNClassifier", "seed": "7",
        "action": "train", "workbench_status": "succeeded"}
    assert tags["mlflow.note.content"] == "first try: two hidden layers"
    assert tags["dataset_fingerprint"] == record.dataset_fingerprint
    experiment = MlflowClient(mlflow_server.uri).get_experiment(run.info.experiment_id)
    assert experiment.name == "workbench-tests"


def test_every_metric_of_the_stream_is_on_the_mlflow_run_at_its_step(mirrored_run, mlflow_server):
    from mlflow.tracking import MlflowClient

    from estimator_workbench.store.metrics_store import read_all

    workspace, record, _, state = mirrored_run
    client = MlflowClient(mlflow_server.uri)
    stream = read_all(workspace / "runs" / record.run_id / "metrics.jsonl")
    keys = {f"{split}/{name}" for split, name in zip(stream["split"], stream["name"])}
    assert "train/loss" in keys
    for key in keys:
        rows = stream[(stream["split"] + "/" + stream["name"]) == key]
        history = sorted((m.step, m.value) for m in client.get_metric_history(state.mlflow_run_id, key))
        expected = sorted(zip(rows["step"].astype(int), rows["value"]))
        assert [s for s, _ in history] == [s for s, _ in expected], key
        np.testing.assert_allclose([v for _, v in history], [v for _, v in expected], rtol=1e-12)
    loss_steps = [m.step for m in client.get_metric_history(state.mlflow_run_id, "train/loss")]
    assert max(loss_steps) == 25 and len(loss_steps) >= 5  # every 5 steps


def test_the_pyfunc_model_predicts_what_estimator_predict_gives(mirrored_run):
    import mlflow

    from estimator_workbench.execution.build import build_estimator

    workspace, record, _, state = mirrored_run
    run_dir = workspace / "runs" / record.run_id
    task = json.loads((run_dir / "task_info.json").read_text())
    frame = _penguins_rows(task)
    model = mlflow.pyfunc.load_model(state.model_uri)
    assert [c.name for c in model.metadata.get_input_schema().inputs] == task["feature_names"]
    got = model.predict(frame)  # a plain DataFrame: ints, floats and strings as read from the CSV
    spec = {**json.loads((run_dir / "run.json").read_text()), "action": "predict"}
    estimator, _ = build_estimator(spec, str(run_dir / "model"), task_info=task)
    import estimator_engine as ee

    typed = frame.astype({n: np.float32 for n in task["numeric_features"]})
    expected = next(estimator.predict(ee.inputs.pandas_input_fn(typed, batch_size=len(typed), shuffle=False),
                                      yield_single_examples=False))
    for key in ("probabilities", "logits"):
        np.testing.assert_allclose(got[key], expected[key], rtol=0, atol=1e-6)
    np.testing.assert_array_equal(got["class_ids"], expected["class_ids"])
    assert [c.decode() for c in np.asarray(expected["classes"]).ravel()] == list(got["classes"].ravel())
    # The signature of the export's default (classification) signature, asked for by name.
    served = model.predict(frame, params={"signature_name": "serving_default"})
    np.testing.assert_allclose(served["scores"], expected["probabilities"], rtol=0, atol=1e-6)


def test_with_mlflow_down_the_run_succeeds_pending_and_a_later_sync_mirrors_it(mlflow_server, workspace, tmp_path,
                                                                                 monkeypatch, capsys):
    """Through the CLI as a user: the server's port answers nothing while the run trains; the
    run succeeds, its page says the mirror waits (with the reason); once a server listens there,
    ``mlflow sync`` mirrors it."""
    from mlflow.tracking import MlflowClient

    port = free_port()
    uri = f"http://127.0.0.1:{port}"
    monkeypatch.setenv(mlflow_state.URI_ENV_VAR, uri)
    code = commands.main(["run", "--dataset", "iris", "--template", "mlp_classifier", "--steps", "10",
                          "--seed", "3", "--no-preflight", "--mlflow", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    record = json.loads(out.strip().splitlines()[-1])  # stdout is JSON only: MLflow's prints go elsewhere
    assert record["status"] == "succeeded"
    state = mlflow_state.read_state(workspace / "runs" / record["run_id"])
    assert state.state == "pending" and state.attempts == 1 and state.next_attempt_at is not None
    assert state.reason.startswith(f"not reachable at {uri}: ")
    assert f"MLflow: not reachable at {uri}" in err and "will retry" in err
    assert mlflow_state.pending_run_ids(workspace) == [record["run_id"]]
    assert commands.main(["mlflow", "status", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["state"] == "pending"

    server = MlflowServer(mlflow_server.executable, tmp_path / "late-server", port=port).start()
    try:
        # before the back-off: `sync` asks now (a process of its own, as a user types it)
        done = subprocess.run([sys.executable, "-m", "estimator_workbench", "mlflow", "sync"],
                              capture_output=True, text=True, timeout=600, check=False)
        assert done.returncode == 0, done.stderr[-3000:]
        out = done.stdout
        state = mlflow_state.read_state(workspace / "runs" / record["run_id"])
        assert state.state == "synced" and f"{record['run_id']}: MLflow: synced to {uri}" in out
        run = MlflowClient(uri).get_run(state.mlflow_run_id)
        assert run.data.tags["workbench_run_id"] == record["run_id"] and run.data.params["run_config.tf_random_seed"] == "3"
        assert [m.step for m in MlflowClient(uri).get_metric_history(run.info.run_id, "train/loss")][-1] == 10
        assert mlflow_state.pending_run_ids(workspace) == []
    finally:
        server.stop()
