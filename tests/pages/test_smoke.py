"""AppTest smoke tests: every page renders against a temporary workspace, forms validate, uploads
and downloads work, the runs table lists runs. Runs use the stub runner (no torch, fast)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest

from estimator_workbench.execution.launcher import LocalLauncher
from estimator_workbench.execution.processes import pid_alive
from estimator_workbench.store.registry import RunRegistry

REPO = Path(__file__).resolve().parents[2]
APP = str(REPO / "estimator_workbench" / "ui" / "app.py")
PAGES = ("data", "model", "train", "runs", "run", "compare", "predict")


def app(page: str | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    if page:
        at.switch_page(f"../../pages/{page}.py").run()
    return at


def make_run(home: Path, steps: int = 20, **params) -> str:
    """A finished stub run with metrics (through the real launcher and runner lifecycle)."""
    reg = RunRegistry(home)
    rec = reg.create_run(name=f"stub {params}", action="train", dataset={"ref": {"kind": "bundled", "name": "iris"}},
                         template={"name": "mlp_classifier", "code": "def model_fn(features): ..."},
                         params=params, run_config={}, schedule={"max_steps": steps})
    launcher = LocalLauncher(home, runner_module="stub_runner", env={"PYTHONPATH": str(REPO / "tests" / "estimator_workbench")})
    launcher.submit(rec.run_id)
    assert launcher.wait(rec.run_id, timeout=60).status == "succeeded"
    return rec.run_id


@pytest.mark.parametrize("page", PAGES)
def test_every_page_renders_on_an_empty_workspace(home, page):
    at = app(page)
    assert not at.exception, at.exception
    assert at.title[0].value


def test_data_page_defaults_to_iris_and_edits_roles(home):
    at = app("data")
    assert at.session_state["dataset"]["ref"] == {"kind": "bundled", "name": "iris"}
    assert any("Using" in s.value for s in at.success)


def test_data_page_upload_good_and_bad_files(home):
    at = app("data")
    at.radio(key="data-source").set_value("Upload a file").run()
    at.file_uploader(key="data-upload").set_value(("flowers.csv", (REPO / "sample_data" / "iris.csv").read_bytes(), "text/csv")).run()
    assert not at.exception
    assert at.session_state["dataset"]["ref"]["kind"] == "file"
    assert (home / "datasets" / "flowers.csv").exists()
    at.file_uploader(key="data-upload").set_value(("bad.csv", b"a\n1\n2\n", "text/csv")).run()
    assert any("only one column" in e.value for e in at.error)


def test_model_page_shows_code_and_refuses_bad_code(home):
    at = AppTest.from_file(APP, default_timeout=60)
    at.session_state["_plain_editor"] = True  # AppTest cannot type into the Ace component's iframe
    at.run()
    at.switch_page("../../pages/model.py").run()
    editor = at.text_area(key="editor-mlp_classifier")
    assert "def model_fn" in editor.value
    editor.set_value("def oops(:\n").run()
    assert any("syntax error" in e.value for e in at.error)


def test_train_form_validates_params(home):
    at = app("train")
    at.text_input(key="p-mlp_classifier-hidden_units").set_value("8")
    at.selectbox(key="rc-action").set_value("evaluate")
    at.button[0].click()  # the form's submit button
    at.run()
    assert any("needs a trained run" in e.value for e in at.error)
    assert RunRegistry(home).list_runs() == []


def test_warm_start_runs_the_compatibility_check_before_launching(home):
    parent = make_run(home, 5)  # a stub run: it has no checkpoint, so the check must refuse
    at = app("train")
    at.selectbox(key="rc-action").set_value("train")
    at.selectbox[-1].set_value(parent)  # "Start from"
    at.button[0].click()
    at.run(timeout=120)
    assert not at.exception
    assert any("Compatibility check failed" in e.value and "CheckpointNotFoundError" in e.value for e in at.error)
    assert [r.run_id for r in RunRegistry(home).list_runs()] == [parent]  # nothing launched


def test_runs_table_and_run_page_and_downloads(home):
    a = make_run(home, 30, learning_rate=0.1)
    b = make_run(home, 20, learning_rate=0.01)
    at = app("runs")
    assert not at.exception
    table = at.dataframe[0].value
    assert set(table["run"]) == {a, b}
    assert "param: learning_rate" in table.columns
    at.query_params["run"] = a
    at.switch_page("../../pages/run.py").run()
    assert not at.exception
    charts = at.get("plotly_chart")
    assert charts, "the run page draws the metric chart"
    assert [b.proto.label for b in at.get("download_button")] == [
        "Download reproducible bundle (.zip)", "Open as notebook (.ipynb)"]
    commands = [c.value for c in at.code]
    assert any(f"--rdzv-id {a}" in c and "--nnodes" in c for c in commands), "multi-node command shown"
    assert any("torchrun --standalone" in c for c in commands)
    at.switch_page("../../pages/compare.py").run()
    assert not at.exception
    assert len(at.get("download_button")) == 1


def test_stop_from_the_run_page(home):
    reg = RunRegistry(home)
    rec = reg.create_run(name="long", action="train", dataset={"ref": {"kind": "bundled", "name": "iris"}},
                         template={"name": "t", "code": "def model_fn(features): ..."}, params={"sleep": 0.01},
                         run_config={}, schedule={"max_steps": 2000})  # the stub's knob: tests/stub_runs.py
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["run"] = rec.run_id
    at.run()
    at.switch_page("../../pages/run.py").run()
    deadline = time.monotonic() + 30
    while reg.get(rec.run_id).status != "running" and time.monotonic() < deadline:
        time.sleep(0.1)
    at.run()
    at.button(key=f"detail-stop-{rec.run_id}").click().run()
    deadline = time.monotonic() + 30
    while reg.get(rec.run_id).status == "running" and time.monotonic() < deadline:
        at.run()  # the fragment's polling (AppTest has no clock) reaps the runner
        time.sleep(0.2)
    assert reg.get(rec.run_id).status == "stopped"
    pid = reg.get(rec.run_id).pid
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    at.run()  # the shared launcher reaps its exited child
