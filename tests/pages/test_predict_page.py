"""The Predict page's single-row form: it predicts one row from the form's values, and a one-row
result shows the predicted class and the class probabilities (not only the table)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("streamlit")
from app_pages import open_page
from streamlit.testing.v1 import AppTest

from workbench.data import datasets
from workbench.store import paths
from workbench.store.registry import RunRegistry

FEATURES = ["sepal_length_cm", "sepal_width_cm", "petal_length_cm", "petal_width_cm"]


def trained_run(home: Path) -> str:
    """A train run on iris with one (empty) checkpoint file: the page lists it, never loads it."""
    df = datasets.load_table(datasets.bundled_path("iris"))
    spec = datasets.DatasetSpec({"kind": "bundled", "name": "iris"}, datasets.infer_schema(df))
    reg = RunRegistry(home)
    rec = reg.create_run(name="trained", action="train", dataset=spec.to_dict() | {"fingerprint": spec.fingerprint()},
                         template={"name": "t", "code": "def model_fn(features): ..."}, params={},
                         run_config={}, schedule={"max_steps": 2, "sleep": 0.0})
    model_dir = reg.run_dir(rec.run_id) / paths.MODEL_DIR
    model_dir.mkdir(parents=True)
    (model_dir / "model.ckpt-00000010").write_bytes(b"")
    return rec.run_id


def predict_page(**state) -> AppTest:
    return open_page("predict", **state)


def test_single_row_form_predicts_the_rows_values(home):
    parent = trained_run(home)
    at = predict_page()
    # one field per feature, labelled with the (markdown-escaped) column name
    assert [t.label.replace("\\", "") for t in at.text_input if t.key.startswith("row-")] == FEATURES
    assert at.text_input(key=f"row-{parent}-0").value == "5.1"  # the dataset's first row
    at.text_input(key=f"row-{parent}-0").set_value("6.5")
    at.button(key="FormSubmitter:single-row-Predict this row").click().run()
    assert not at.exception, at.exception
    child = RunRegistry(home).get(at.session_state["pred-child"])
    assert (child.action, child.parent_run_id, child.parent_relation) == ("predict", parent, "predict_from")
    assert child.schedule["preflight"] is False
    row = pd.read_csv(child.dataset["ref"]["path"])
    assert list(row.columns) == FEATURES  # the label is not asked for
    assert row.iloc[0].tolist() == [6.5, 3.5, 1.4, 0.2]


def test_a_one_row_result_shows_the_class_and_its_probabilities(home):
    trained_run(home)
    reg = RunRegistry(home)
    child = reg.create_run(name="one row", action="predict", dataset={"ref": {"kind": "bundled", "name": "iris"}},
                           template={"name": "t", "code": ""}, params={}, run_config={})
    reg.set_status(child.run_id, "running")
    reg.set_status(child.run_id, "succeeded")
    pd.DataFrame([{"sepal_length_cm": 6.5, "sepal_width_cm": 3.0, "petal_length_cm": 5.2,
                   "petal_width_cm": 2.0, "class_ids": 2, "class": "virginica", "probability_setosa": 0.01,
                   "probability_versicolor": 0.09, "probability_virginica": 0.9}]).to_csv(
        reg.run_dir(child.run_id) / paths.PREDICTIONS_FILE, index=False)
    at = predict_page(**{"pred-child": child.run_id})
    [metric] = at.metric
    assert (metric.label, metric.value) == ("Predicted class", "virginica")
    table = at.table[0].value
    assert table.to_dict("list") == {"class": ["setosa", "versicolor", "virginica"],
                                     "probability": ["0.0100", "0.0900", "0.9000"]}
