"""The Run page of a predict run shows its predictions (preview and download)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("streamlit")
from app_pages import open_page
from streamlit.testing.v1 import AppTest

from estimator_workbench.store import paths
from estimator_workbench.store.registry import RunRegistry


def run_page(run_id: str) -> AppTest:
    return open_page("run", query={"run": run_id})


def finished_run(home: Path, action: str) -> str:
    reg = RunRegistry(home)
    rec = reg.create_run(name=f"a {action} run", action=action, run_config={}, params={},
                         dataset={"ref": {"kind": "bundled", "name": "iris"}},
                         template={"name": "t", "code": "def model_fn(features): ..."})
    reg.set_status(rec.run_id, "running")
    reg.set_status(rec.run_id, "succeeded")
    return rec.run_id


def test_a_predict_run_shows_its_predictions_and_a_download(home):
    run_id = finished_run(home, "predict")
    pd.DataFrame({"class": ["setosa", "virginica"], "probability_setosa": [0.9, 0.1]}).to_csv(
        RunRegistry(home).run_dir(run_id) / paths.PREDICTIONS_FILE, index=False)
    at = run_page(run_id)
    assert any(s.value.startswith("2 predictions · 2 columns") for s in at.success), [s.value for s in at.success]
    assert list(at.dataframe[0].value["class"]) == ["setosa", "virginica"]
    assert at.get("download_button")[0].proto.label == "Download predictions CSV"


def test_a_training_run_has_no_predictions_panel(home):
    at = run_page(finished_run(home, "train"))
    assert "Predictions" not in [h.value for h in at.subheader]
    assert not [s for s in at.success if "predictions" in s.value]


def test_a_page_opened_at_launch_waits_for_the_first_metric_line(tmp_path):
    """Right after a launch the page's first render waits (up to 2 s after the start) for the
    first metric line, so the chart is drawn with it; a run started earlier, or one still queued,
    never waits."""
    import json
    import threading
    import time
    from types import SimpleNamespace

    from estimator_workbench.ui import live

    path = tmp_path / "metrics.jsonl"
    line = json.dumps({"step": 1, "wall_time": time.time(), "split": "train", "name": "loss", "value": 0.5})

    def write_later():
        time.sleep(0.3)
        path.write_text(line + "\n")

    state = live._LiveState(path)
    writer = threading.Thread(target=write_later)
    started = time.monotonic()
    writer.start()
    live._wait_for_first_line(SimpleNamespace(status="running", started_at=time.time()), state,
                              still_running=lambda: True, on_end=pytest.fail)
    waited = time.monotonic() - started
    writer.join()
    assert len(state.frame) == 1 and 0.25 < waited < 1.5

    # a run that ends without a line (a failed pre-flight) ends the wait, and its runner is reaped
    reaped = []
    started = time.monotonic()
    live._wait_for_first_line(SimpleNamespace(status="running", started_at=time.time()),
                              live._LiveState(tmp_path / "never.jsonl"), still_running=lambda: False,
                              on_end=lambda: reaped.append(1))
    assert reaped == [1] and time.monotonic() - started < 0.6

    for record in (SimpleNamespace(status="running", started_at=time.time() - 10),
                   SimpleNamespace(status="queued", started_at=None)):
        idle = live._LiveState(tmp_path / "none.jsonl")
        started = time.monotonic()
        live._wait_for_first_line(record, idle, still_running=lambda: True, on_end=pytest.fail)
        assert time.monotonic() - started < 0.05 and not len(idle.frame)


def test_a_training_run_offers_open_as_notebook_and_a_predict_run_does_not(home):
    labels = [b.proto.label for b in run_page(finished_run(home, "train")).get("download_button")]
    assert "Open as notebook (.ipynb)" in labels
    labels = [b.proto.label for b in run_page(finished_run(home, "predict")).get("download_button")]
    assert "Open as notebook (.ipynb)" not in labels


def test_a_finished_training_run_shows_how_to_serve_it_with_one_dataset_row(home):
    """The Serve panel: the `serve` command and a curl :predict request in TF Serving's row format
    with the first row of the run's dataset (iris), as the runner's task info names the inputs."""
    import json
    import shlex

    from estimator_workbench.data import datasets

    reg = RunRegistry(home)
    iris = datasets.load_table(datasets.bundled_path("iris"))
    spec = datasets.DatasetSpec({"kind": "bundled", "name": "iris"}, datasets.infer_schema(iris))
    rec = reg.create_run(name="served", action="train", run_config={}, params={}, dataset=spec.to_dict(),
                         template={"name": "t", "code": "def model_fn(features): ..."})
    folder = reg.run_dir(rec.run_id)
    (folder / "task_info.json").write_text(json.dumps(datasets.task_info(iris, spec)))
    (folder / paths.MODEL_DIR).mkdir(parents=True, exist_ok=True)
    (folder / paths.MODEL_DIR / "model.ckpt-20").write_bytes(b"")
    reg.set_status(rec.run_id, "running")
    at = run_page(rec.run_id)
    [panel] = [e for e in at.expander if e.label == "Serve"]
    assert "finished training" in panel.caption[0].value  # still running: nothing to serve yet

    reg.set_status(rec.run_id, "succeeded")
    at = run_page(rec.run_id)
    [panel] = [e for e in at.expander if e.label == "Serve"]
    command, predict, metadata = (c.value for c in panel.code)
    assert command == f"estimator-workbench --workspace {shlex.quote(str(home))} serve {rec.run_id} --port 8501"
    url = f"http://127.0.0.1:8501/v1/models/{rec.run_id}"
    assert predict.startswith(f"curl -s {url}:predict \\\n  -H 'Content-Type: application/json' -d '")
    body = json.loads(shlex.split(predict.replace("\\\n", " "))[-1])
    header, first = (line.split(",") for line in Path(datasets.bundled_path("iris")).read_text().splitlines()[:2])
    assert header[-1] == "species"  # the label: not an input
    assert body == {"instances": [{name: float(value) for name, value in zip(header[:4], first[:4])}]}
    assert metadata == f"curl -s {url}/metadata"


def test_a_predict_run_has_no_serve_panel(home):
    at = run_page(finished_run(home, "predict"))
    assert not [e for e in at.expander if e.label == "Serve"]


def test_the_run_page_says_where_the_mlflow_mirror_stands(home):
    """MLflow down: "not reachable at ..., will retry"; synced: a link to the MLflow run; a run that
    is not mirrored says nothing about MLflow."""
    from estimator_workbench.store import mlflow_state

    run_id = finished_run(home, "train")
    assert not [c for c in run_page(run_id).caption if "MLflow" in c.value]
    folder = RunRegistry(home).run_dir(run_id)
    state = mlflow_state.mark_pending(home, run_id, tracking_uri="http://127.0.0.1:5999", reason="x")
    mlflow_state.write_state(folder, state.replace(
        reason="not reachable at http://127.0.0.1:5999: ConnectionRefusedError", attempts=1, next_attempt_at=None))
    [line] = [c.value for c in run_page(run_id).caption if "MLflow" in c.value]
    assert line.endswith("MLflow: not reachable at http://127.0.0.1:5999: ConnectionRefusedError; will retry "
                         "(attempt 2)")
    url = "http://127.0.0.1:5999/#/experiments/1/runs/abc"
    mlflow_state.write_state(folder, state.replace(state="synced", run_url=url, model_uri="models:/m-1"))
    [line] = [c.value for c in run_page(run_id).caption if "MLflow" in c.value]
    assert line.endswith(f"MLflow: synced to [{url}]({url}); model models:/m-1")
