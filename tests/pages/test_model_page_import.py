"""The Model page's "Import a TensorFlow model" section (issue 29 section 3): the chosen template
and dataset, a model_dir path, Import; the new run or the refusal naming the variables."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("streamlit")
from app_pages import open_page

from estimator_workbench.store.registry import RunRegistry

MODEL = Path(__file__).resolve().parents[1] / "estimator_workbench" / "fixtures" / "tf_import" / "iris_dnn"


def import_model(params: str):
    at = open_page("model", _plain_editor=True)
    at.selectbox(key="model-name").set_value("DNNClassifier").run()
    at.text_input(key="import-tf-path").set_value(str(MODEL))
    at.text_input(key="import-tf-params").set_value(params)
    next(b for b in at.button if b.label == "Import").click().run()
    assert not at.exception, at.exception
    return at


@pytest.mark.slow
def test_a_model_that_does_not_fit_is_refused_with_its_variables(home):
    at = import_model('{"hidden_units": "8"}')
    shown = " ".join(e.value for e in at.error).replace("\\", "")  # (markdown-escaped)
    assert "does not fit template 'DNNClassifier' on dataset 'iris'" in shown
    assert "dnn/hiddenlayer_0/kernel [4, 6] -> [4, 8]" in shown
    assert RunRegistry(home).list_runs() == []


@pytest.mark.slow
def test_a_fitting_model_becomes_a_run(home):
    at = import_model('{"hidden_units": "6"}')
    (record,) = RunRegistry(home).list_runs()
    assert (record.action, record.template_name, record.params["hidden_units"]) == ("import_tf", "DNNClassifier", "6")
    assert record.checkpoint_path == str(MODEL / "model.ckpt-20")
    assert any(f"Imported as run {record.run_id}" in s.value for s in at.success)


def test_the_run_page_header_says_where_an_import_came_from(home):
    import json

    reg = RunRegistry(home)
    rec = reg.create_run(name="TF iris", action="import_tf", run_config={}, params={},
                         dataset={"ref": {"kind": "bundled", "name": "iris"}}, checkpoint_path="/m/model.ckpt-20",
                         template={"name": "DNNClassifier", "code": "def model_fn(features): ..."})
    reg.set_status(rec.run_id, "running")
    (reg.run_dir(rec.run_id) / "imported.json").write_text(json.dumps({"global_step": 20}))
    reg.set_status(rec.run_id, "succeeded")
    at = open_page("run", query={"run": rec.run_id})
    captions = [c.value.replace("\\", "") for c in at.caption]
    assert "Imported from TensorFlow: /m/model.ckpt-20 (global step 20)" in captions, captions


def test_an_import_is_a_run_to_start_from_predict_with_and_compare(home):
    from estimator_workbench.ui import tables

    reg = RunRegistry(home)
    rec = reg.create_run(name="TF iris", action="import_tf", run_config={}, params={},
                         dataset={"ref": {"kind": "bundled", "name": "iris"}}, checkpoint_path="/m/model.ckpt-20",
                         template={"name": "DNNClassifier", "code": "def model_fn(features): ..."})
    assert tables.finished_runs_for_start(reg.list_runs()) == []  # queued: not yet
    reg.set_status(rec.run_id, "running")
    reg.set_status(rec.run_id, "succeeded")
    assert [r.run_id for r in tables.finished_runs_for_start(reg.list_runs())] == [rec.run_id]
    at = open_page("compare")
    assert not [i for i in at.info if "No training runs yet" in i.value]
