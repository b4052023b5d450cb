"""``estimator-workbench serve``: the real server in a subprocess on a loopback port, spoken to by a
client written from TensorFlow Serving's REST API document (tensorflow_serving/g3doc/api_rest.md):

* ``GET /v1/models/${MODEL_NAME}[/versions/${VERSION}]`` -> ``model_version_status``;
* ``GET .../metadata`` -> ``model_spec`` + ``metadata.signature_def.signature_def``;
* ``POST ...:predict`` with ``instances`` (row) -> ``predictions``, ``inputs`` (columnar) -> ``outputs``;
* ``POST ...:classify`` / ``:regress`` with ``examples`` (+ ``context``) -> ``results``;
* errors -> ``{"error": "..."}`` with an HTTP error status.

The answers are compared with ``Estimator.predict()`` on the same rows.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import estimator_engine as ee
from estimator_engine import export as export_lib
from estimator_engine import serving

pytest.importorskip("uvicorn")
pytestmark = pytest.mark.slow  # starts servers / converts models (seconds each)
pytest.importorskip("starlette")

fc = ee.feature_column
REPO = Path(__file__).resolve().parents[2]
COLORS = ["red", "green", "blue"]
LABELS = ["no", "yes"]


# -- a client written from TF Serving's REST API document -------------------------------------------


class TFServingClient:
    """``http://host:port/v1/models/${MODEL_NAME}[/versions/${VERSION}]`` + ``:verb`` or ``/metadata``."""

    def __init__(self, port: int, name: str) -> None:
        self.base = f"http://127.0.0.1:{port}/v1/models/{name}"

    def _url(self, version: int | None, suffix: str) -> str:
        return self.base + (f"/versions/{version}" if version is not None else "") + suffix

    @staticmethod
    def _call(request: urllib.request.Request) -> tuple[int, dict]:
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())

    def get(self, suffix: str = "", version: int | None = None) -> tuple[int, dict]:
        return self._call(urllib.request.Request(self._url(version, suffix)))

    def post(self, verb: str, body: dict | bytes, version: int | None = None) -> tuple[int, dict]:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        return self._call(urllib.request.Request(self._url(version, f":{verb}"), data=data, method="POST",
                                                 headers={"Content-Type": "application/json"}))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    """``estimator-workbench serve`` in a subprocess; stopped (SIGTERM, then SIGKILL) on close."""

    def __init__(self, target: str | Path, *args: str, workspace: Path | None = None, log: Path) -> None:
        self.port = free_port()
        self.log = log
        command = [sys.executable, "-m", "estimator_workbench"]
        if workspace is not None:
            command += ["--workspace", str(workspace)]
        command += ["serve", str(target), "--port", str(self.port), *args]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
        self._log_file = open(log, "wb")  # closed in close()
        # Its own process group: uvicorn's worker processes are in it, and close() can end them all.
        self.proc = subprocess.Popen(command, stdout=self._log_file, stderr=subprocess.STDOUT, env=env,
                                     start_new_session=True)
        self._wait_healthy(timeout=180)

    def _wait_healthy(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"the server exited with {self.proc.returncode}:\n{self.output()[-3000:]}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/healthz", timeout=5) as response:
                    if response.status == 200:
                        return
            except OSError:
                time.sleep(0.2)  # polling for the port to open, not waiting for an assertion
        raise AssertionError(f"the server did not become healthy:\n{self.output()[-3000:]}")

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def group_alive(self) -> bool:
        try:
            os.killpg(self.proc.pid, 0)
            return True
        except ProcessLookupError:
            return False

    def close(self) -> None:
        """SIGTERM (uvicorn stops its workers), then SIGKILL to whatever is left of the group."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        if self.proc.poll() is None:
            self.proc.wait(timeout=30)
        self._log_file.close()


# -- models ----------------------------------------------------------------------------------------


def _frame(rows: int, seed: int) -> tuple[pd.DataFrame, pd.Series]:
    rng = np.random.RandomState(seed)
    frame = pd.DataFrame({"size": rng.uniform(0, 10, rows).astype(np.float32),
                          "color": rng.choice(COLORS, rows)})
    label = np.where((frame["size"] > 5) ^ (frame["color"] == "red"), "yes", "no")
    return frame, pd.Series(label)


def _serving_frame() -> pd.DataFrame:
    frame, _ = _frame(7, seed=5)
    frame.loc[0, "color"] = "purple"  # out of vocabulary
    return frame


@pytest.fixture(scope="module")
def classifier(tmp_path_factory):
    """A DNNClassifier over a number and a categorical string (label vocabulary), exported with the
    parsing receiver: its clients send records of raw features."""
    root = tmp_path_factory.mktemp("classifier")
    columns = [fc.numeric_column("size"),
               fc.indicator_column(fc.categorical_column_with_vocabulary_list("color", COLORS[:2], num_oov_buckets=1))]
    estimator = ee.DNNClassifier([8], columns, model_dir=str(root / "model"), label_vocabulary=LABELS,
                                 config=ee.RunConfig(tf_random_seed=1))
    frame, label = _frame(128, seed=0)
    estimator.train(ee.inputs.pandas_input_fn(frame, label, batch_size=32, num_epochs=None, shuffle=True), steps=20)
    receiver = export_lib.build_parsing_serving_input_receiver_fn(serving.make_parse_example_spec(columns))
    path = Path(estimator.export_saved_model(str(root / "export"), receiver))
    server = Server(path.parent, "--name", "shapes", log=root / "server.log")
    yield estimator, path, server
    server.close()


@pytest.fixture(scope="module")
def regressor(tmp_path_factory):
    """A LinearRegressor over one [batch, 2] float input, exported with the raw receiver, in two
    versions, served with a small request size limit."""
    root = tmp_path_factory.mktemp("regressor")
    rng = np.random.RandomState(0)
    x = rng.randn(64, 2).astype(np.float32)
    estimator = ee.LinearRegressor([fc.numeric_column("x", shape=(2,))], model_dir=str(root / "model"),
                                   config=ee.RunConfig(tf_random_seed=1))
    train = ee.inputs.numpy_input_fn({"x": x}, 2 * x[:, 0] - x[:, 1] + 1, batch_size=16, num_epochs=None, shuffle=True)
    estimator.train(train, steps=10)
    receiver = export_lib.build_raw_serving_input_receiver_fn({"x": x[:2]})
    first = Path(estimator.export_saved_model(str(root / "export"), receiver))
    estimator.train(train, steps=10)
    second = Path(estimator.export_saved_model(str(root / "export"), receiver))
    server = Server(root / "export", "--name", "line", "--max-request-bytes", "4096", "--workers", "2",
                    log=root / "server.log")
    yield estimator, (first, second), server
    server.close()


def _predict(estimator, frame, checkpoint_path=None) -> dict:
    return next(estimator.predict(ee.inputs.pandas_input_fn(frame, batch_size=len(frame), shuffle=False),
                                  yield_single_examples=False, checkpoint_path=checkpoint_path))


def _records(frame: pd.DataFrame) -> list[dict]:
    return [{"size": float(row["size"]), "color": row["color"]} for _, row in frame.iterrows()]


# -- status and metadata ---------------------------------------------------------------------------


def test_model_status_lists_the_versions_as_available(classifier, regressor):
    _, path, server = classifier
    assert TFServingClient(server.port, "shapes").get() == (200, {"model_version_status": [
        {"version": path.name, "state": "AVAILABLE", "status": {"error_code": "OK", "error_message": ""}}]})
    _, (first, second), line = regressor
    status, body = TFServingClient(line.port, "line").get()
    assert status == 200 and [v["version"] for v in body["model_version_status"]] == [second.name, first.name]
    status, body = TFServingClient(line.port, "line").get(version=int(first.name))
    assert status == 200 and [v["version"] for v in body["model_version_status"]] == [first.name]


def test_metadata_gives_the_signature_defs_in_tf_servings_json(classifier):
    _, path, server = classifier
    status, body = TFServingClient(server.port, "shapes").get("/metadata")
    assert status == 200
    assert body["model_spec"] == {"name": "shapes", "signature_name": "", "version": path.name}
    definitions = body["metadata"]["signature_def"]["signature_def"]
    # TF's binary head also exports a regression signature (the logistic)
    assert sorted(definitions) == ["classification", "predict", "regression", "serving_default"]
    default = definitions["serving_default"]
    assert default["method_name"] == "tensorflow/serving/classify"
    assert definitions["predict"]["method_name"] == "tensorflow/serving/predict"
    assert default["inputs"]["size"] == {
        "dtype": "DT_FLOAT", "name": "size",
        "tensor_shape": {"dim": [{"size": "-1", "name": ""}, {"size": "1", "name": ""}], "unknown_rank": False}}
    assert default["inputs"]["color"]["dtype"] == "DT_STRING"
    assert default["outputs"]["classes"]["dtype"] == "DT_STRING"
    assert default["outputs"]["scores"]["tensor_shape"]["dim"] == [{"size": "-1", "name": ""}, {"size": "2", "name": ""}]


# -- predict, classify, regress equal Estimator.predict() -------------------------------------------


def test_predict_row_format_equals_estimator_predict(classifier):
    estimator, _, server = classifier
    frame = _serving_frame()
    expected = _predict(estimator, frame)
    client = TFServingClient(server.port, "shapes")
    status, body = client.post("predict", {"signature_name": "predict", "instances": _records(frame)})
    assert status == 200, body
    rows = body["predictions"]
    assert len(rows) == len(frame) and sorted(rows[0]) == sorted(expected)
    np.testing.assert_allclose(np.array([r["probabilities"] for r in rows], np.float32),
                               expected["probabilities"], rtol=1e-6, atol=1e-7)
    assert np.array([r["class_ids"] for r in rows]).tolist() == expected["class_ids"].tolist()
    # strings as TF Serving returns them: JSON strings (predict() gives bytes)
    assert [r["classes"] for r in rows] == [[c.decode() for c in row] for row in expected["classes"]]
    # The default signature (classification): scores and classes per row.
    status, body = client.post("predict", {"instances": _records(frame)})
    assert status == 200
    assert body["predictions"][0]["classes"] == LABELS
    np.testing.assert_allclose([r["scores"] for r in body["predictions"]], expected["probabilities"], rtol=1e-6)


def test_predict_columnar_format_answers_outputs(classifier):
    estimator, _, server = classifier
    frame = _serving_frame()
    expected = _predict(estimator, frame)
    status, body = TFServingClient(server.port, "shapes").post("predict", {
        "signature_name": "predict",
        "inputs": {"size": frame["size"].astype(float).tolist(), "color": frame["color"].tolist()}})
    assert status == 200, body
    outputs = body["outputs"]
    np.testing.assert_allclose(np.array(outputs["logits"], np.float32), expected["logits"], rtol=1e-6, atol=1e-7)
    assert outputs["class_ids"] == expected["class_ids"].tolist()
    assert outputs["all_classes"] == [LABELS] * len(frame)


def test_classify_answers_label_score_pairs_with_a_shared_context(classifier):
    estimator, _, server = classifier
    frame = _serving_frame()
    expected = _predict(estimator, frame)["probabilities"]
    client = TFServingClient(server.port, "shapes")
    status, body = client.post("classify", {"examples": _records(frame)})
    assert status == 200, body
    assert [[label for label, _ in row] for row in body["results"]] == [LABELS] * len(frame)
    np.testing.assert_allclose([[score for _, score in row] for row in body["results"]], expected, rtol=1e-6)
    # "context": features shared by all examples
    status, body = client.post("classify", {"context": {"color": "green"},
                                            "examples": [{"size": 1.0}, {"size": 9.0}]})
    green = _predict(estimator, pd.DataFrame({"size": np.float32([1.0, 9.0]), "color": ["green", "green"]}))
    assert status == 200
    np.testing.assert_allclose([[s for _, s in row] for row in body["results"]], green["probabilities"], rtol=1e-6)


def test_regress_and_single_input_instances_on_versions(regressor):
    estimator, (first, second), server = regressor
    x = np.array([[0.5, -1.0], [2.0, 3.0], [-1.5, 0.25]], np.float32)
    client = TFServingClient(server.port, "line")
    for version, path in ((None, second), (int(first.name), first), (int(second.name), second)):
        checkpoint = json.loads((path / "signature.json").read_text())["checkpoint_path"]
        expected = next(estimator.predict(ee.inputs.numpy_input_fn({"x": x}, batch_size=3, shuffle=False),
                                          yield_single_examples=False, checkpoint_path=checkpoint))["predictions"]
        # one named input: "instances" is the list of its rows; one output: "predictions" lists its rows
        status, body = client.post("predict", {"instances": x.tolist()}, version=version)
        assert status == 200, body
        np.testing.assert_allclose(np.array(body["predictions"], np.float32), expected, rtol=1e-6)
        status, body = client.post("regress", {"examples": [{"x": row} for row in x.tolist()]}, version=version)
        assert status == 200, body
        np.testing.assert_allclose(np.array(body["results"], np.float32), expected[:, 0], rtol=1e-6)
    status, body = client.post("predict", {"inputs": {"x": x.tolist()}})
    assert status == 200 and np.array(body["outputs"]).shape == (3, 1)
    assert not np.allclose(_versions_answer(client, first, x), _versions_answer(client, second, x))


def _versions_answer(client: TFServingClient, path: Path, x: np.ndarray) -> np.ndarray:
    return np.array(client.post("predict", {"instances": x.tolist()}, version=int(path.name))[1]["predictions"])


def test_concurrent_requests_all_get_their_own_answer(regressor):
    estimator, _, server = regressor
    client = TFServingClient(server.port, "line")
    rows = [np.full((n, 2), n, np.float32) for n in range(1, 17)]
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda x: client.post("predict", {"instances": x.tolist()}), rows))
    for x, (status, body) in zip(rows, answers):
        expected = next(estimator.predict(ee.inputs.numpy_input_fn({"x": x}, batch_size=len(x), shuffle=False),
                                          yield_single_examples=False))["predictions"]
        assert status == 200
        np.testing.assert_allclose(np.array(body["predictions"], np.float32), expected, rtol=1e-6)


# -- errors as TF Serving answers them ---------------------------------------------------------------


@pytest.mark.parametrize(("verb", "body", "status", "message"), [
    ("predict", b"{not json", 400, "JSON Parse error"),
    ("predict", {"signature_name": "predict"}, 400, "Missing 'inputs' or 'instances' key"),
    ("predict", {"instances": [], "inputs": {}}, 400, "Not both of 'instances' and 'inputs' can be specified"),
    ("predict", {"signature_name": "nope", "instances": [{"size": 1.0}]}, 400,
     'Serving signature name: "nope" not found in signature def'),
    ("predict", {"instances": [{"size": "big", "color": "red"}]}, 400,
     "Feature 'size' of record 0 must hold float32 numbers"),
    ("predict", {"instances": [{"color": "red"}]}, 400, "Feature 'size' is required but record 0 has no value"),
    ("classify", {"signature_name": "predict", "examples": [{"size": 1.0, "color": "red"}]}, 400,
     "Expected classification signature method_name to be tensorflow/serving/classify. "
     "Was: tensorflow/serving/predict"),
    ("classify", {"examples": [{"size": 1.0}], "context": {"size": 2.0}}, 400,
     "feature(s) ['size'] appear both in 'context' and in the example"),
])
def test_bad_requests_get_tf_servings_error_json(classifier, verb, body, status, message):
    _, _, server = classifier
    got_status, got = TFServingClient(server.port, "shapes").post(verb, body)
    assert got_status == status and list(got) == ["error"] and message in got["error"], got


def test_unknown_model_version_or_url_is_404(classifier, regressor):
    _, _, server = classifier
    assert TFServingClient(server.port, "half").post("predict", {"instances": [1.0]}) == (
        404, {"error": "Servable not found for request: Latest(half)"})
    assert TFServingClient(server.port, "shapes").get(version=7) == (
        404, {"error": "Servable not found for request: Specific(shapes, 7)"})
    status, body = TFServingClient(server.port, "shapes").post("explain", {"instances": []})
    assert status == 404 and body["error"].startswith("Malformed request: POST /v1/models/shapes:explain")
    _, _, line = regressor
    status, body = TFServingClient(line.port, "line").post("predict", {"instances": [[1.0, 2.0, 3.0]]})
    assert status == 400 and body["error"] == "Input 'x' has shape [1, 3]; the signature expects [-1, 2] (-1: any size)"


def test_a_body_over_the_size_limit_is_refused_with_413(regressor):
    _, _, server = regressor
    status, body = TFServingClient(server.port, "line").post("predict", {"instances": [[1.0, 2.0]] * 1000})
    assert status == 413 and "larger than the limit of 4096 bytes" in body["error"]


def test_serve_the_onnx_model_with_onnxruntime(classifier, tmp_path):
    """--runtime onnxruntime serves the export's model.onnx (format="onnx"): the same answers."""
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnxscript")
    estimator, _, _ = classifier
    columns = [fc.numeric_column("size"),
               fc.indicator_column(fc.categorical_column_with_vocabulary_list("color", COLORS[:2], num_oov_buckets=1))]
    receiver = export_lib.build_parsing_serving_input_receiver_fn(serving.make_parse_example_spec(columns))
    path = estimator.export_saved_model(str(tmp_path / "export"), receiver, format="onnx")
    frame = _serving_frame()
    expected = _predict(estimator, frame)
    server = Server(path, "--name", "shapes", "--runtime", "onnxruntime", log=tmp_path / "server.log")
    try:
        status, body = TFServingClient(server.port, "shapes").post(
            "predict", {"signature_name": "predict", "instances": _records(frame)})
        assert status == 200, body
        np.testing.assert_allclose([r["probabilities"] for r in body["predictions"]], expected["probabilities"],
                                   rtol=1e-5, atol=1e-5)
        assert [r["classes"] for r in body["predictions"]] == [[c.decode() for c in row] for row in expected["classes"]]
    finally:
        server.close()


def test_onnxruntime_needs_an_onnx_export(regressor, tmp_path, capsys):
    from estimator_workbench.cli import commands

    _, (first, _), _ = regressor
    assert commands.main(["--workspace", str(tmp_path / "ws"), "serve", str(first), "--runtime", "onnxruntime"]) == 2
    assert f"--runtime onnxruntime: {first} has no model.onnx" in capsys.readouterr().err


# -- the command line and its process ---------------------------------------------------------------


def test_sigterm_stops_the_server_and_its_workers_gracefully(tmp_path, regressor):
    _, (first, _), _ = regressor
    server = Server(first, "--workers", "2", log=tmp_path / "server.log")
    assert TFServingClient(server.port, "default").get()[0] == 200
    pid = server.proc.pid
    server.proc.send_signal(signal.SIGTERM)
    # uvicorn's supervisor stops its workers (each finishes its requests in flight) and exits 0
    assert server.proc.wait(timeout=60) == 0
    deadline = time.monotonic() + 30
    while server.group_alive() and time.monotonic() < deadline:
        time.sleep(0.1)  # polling for the workers' exit
    assert not server.group_alive(), f"worker processes of {pid} are left running"
    log = server.output()
    server.close()
    assert log.count("Finished server process") == 2 and "Stopping parent process" in log


def test_serve_refuses_a_folder_without_an_export(tmp_path, capsys):
    from estimator_workbench.cli import commands

    assert commands.main(["--workspace", str(tmp_path / "ws"), "serve", str(tmp_path)]) == 2
    assert "holds no exported model" in capsys.readouterr().err
    assert commands.main(["--workspace", str(tmp_path / "ws"), "serve", "r-nope"]) == 2
    assert "is neither an export folder nor a run of the workspace" in capsys.readouterr().err


def test_serve_a_workbench_run_with_categorical_columns(tmp_path):
    """A run of the canned DNNClassifier template on penguins (numbers and strings) is exported in a
    child process and served; its answers equal the run's Estimator.predict() on the same rows."""
    from estimator_workbench import templates
    from estimator_workbench.cli import commands as cli
    from estimator_workbench.data import datasets
    from estimator_workbench.execution import runner
    from estimator_workbench.execution.build import build_estimator
    from estimator_workbench.store.registry import RunRegistry

    workspace = tmp_path / "ws"
    info = templates.get_template("DNNClassifier")
    registry = RunRegistry(workspace)
    record = registry.create_run(name="penguins", action="train", dataset=cli._dataset_dict("penguins", None),
                                 template={"name": info.name, "code": info.code}, params={},
                                 run_config={"tf_random_seed": 0}, schedule={"max_steps": 5})
    run_dir = registry.run_dir(record.run_id)
    assert runner.run(run_dir, install_signal_handlers=False) == 0
    server = Server(record.run_id, workspace=workspace, log=tmp_path / "server.log")
    try:
        task = json.loads((run_dir / "task_info.json").read_text())
        frame = pd.read_csv(datasets.bundled_path("penguins")).dropna().head(5)
        features = frame[task["feature_names"]]
        instances = [{k: (float(v) if k in task["numeric_features"] else str(v)) for k, v in row.items()}
                     for row in features.to_dict(orient="records")]
        status, body = TFServingClient(server.port, record.run_id).post("predict", {"instances": instances})
        assert status == 200, body
        spec = {**json.loads((run_dir / "run.json").read_text()), "action": "predict"}
        estimator, _ = build_estimator(spec, str(run_dir / "model"), task_info=task)
        typed = features.astype({n: np.float32 for n in task["numeric_features"]})
        expected = _predict(estimator, typed)
        np.testing.assert_allclose([r["scores"] for r in body["predictions"]], expected["probabilities"], rtol=1e-5)
        assert sorted(task["categorical_features"]) and (run_dir / "export" / "saved_model").is_dir()
    finally:
        server.close()


def test_the_run_page_example_record_is_answered_as_predict_answers_that_row(classifier):
    """The Serve panel's curl body (``run_export.example_instance`` of a dataset row, with a
    missing number: the training mean) is a request the server answers, as predict() does."""
    from estimator_workbench.serve.run_export import example_instance

    estimator, _, server = classifier
    task = {"feature_names": ["size", "color"], "numeric_features": ["size"], "categorical_features": ["color"],
            "numeric_stats": {"size": {"mean": 4.0, "std": 1.0}}}
    record = example_instance(task, {"size": float("nan"), "color": "red", "label": "yes"})
    assert record == {"size": 4.0, "color": "red"}
    status, body = TFServingClient(server.port, "shapes").post(
        "predict", json.loads(json.dumps({"signature_name": "predict", "instances": [record]})))
    assert status == 200, body
    expected = _predict(estimator, pd.DataFrame({"size": np.float32([4.0]), "color": ["red"]}))
    np.testing.assert_allclose(body["predictions"][0]["probabilities"], expected["probabilities"][0], rtol=1e-6)
