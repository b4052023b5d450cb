"""The Predict page's single-row form: it predicts one row from the form's values, and a one-row
result shows the predicted class and the class probabilities (not only the table)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("streamlit")
from app_pages import open_page
from streamlit.testing.v1 import AppTest

from estimator_workbench.data import datasets
from estimator_workbench.store import paths
from estimator_workbench.store.registry import RunRegistry

FEATURES = ["sepal_length_cm", "sepal_width_cm", "petal_length_cm", "petal_width_cm"]


def trained_run(home: Path) -> str:
    """A train run on iris with one (empty) checkpoint file: the page lists it, never loads it."""
    df = datasets.load_table(datasets.bundled_path("iris"))
    spec = datasets.DatasetSpec({"kind": "bundled", "name": "iris"}, datasets.infer_schema(df))
    reg = RunRegistry(home)
    rec = reg.create_run(name="trained", action="train", dataset=spec.to_dict() | {"fingerprint": spec.fingerprint()},
                         template={"name": "t", "code": "def model_fn(features): ..."}, params={},
                         run_config={}, schedule={"max_steps": 2})
    model_dir = reg.run_dir(rec.run_id) / paths.MODEL_DIR
    model_dir.mkdir(parents=True)
    (model_dir / "model.ckpt-00000010").write_bytes(b"")
    return rec.run_id


def predict_page(**state) -> AppTest:
    return open_page("predict", **state)


def test_single_row_form_predicts_the_rows_values(home):
    parent = trained_run(home)
    at = predict_page()
    # one typed field per feature (numbers here), labelled with the (markdown-escaped) column name
    fields = sorted((t for t in at.number_input if t.key.startswith("row-")), key=lambda t: int(t.key.rsplit("-", 1)[1]))
    assert [t.label.replace("\\", "") for t in fields] == FEATURES  # (in a grid of three columns)
    assert at.number_input(key=f"row-{parent}-0").value == 5.1  # the dataset's first row
    at.number_input(key=f"row-{parent}-0").set_value(6.5)
    at.button(key="FormSubmitter:single-row-Predict this row").click().run()
    assert not at.exception, at.exception
    child = RunRegistry(home).get(at.session_state["pred-child"])
    assert (child.action, child.parent_run_id, child.parent_relation) == ("predict", parent, "predict_from")
    assert child.schedule["preflight"] is False
    row = pd.read_csv(child.dataset["ref"]["path"])
    assert list(row.columns) == FEATURES  # the label is not asked for
    assert row.iloc[0].tolist() == [6.5, 3.5, 1.4, 0.2]
    # a typed row is the run's input, not a dataset upload (issue 28 item 9)
    assert Path(child.dataset["ref"]["path"]).parent == Path(home) / "predict_inputs"
    assert datasets.list_uploads(home) == []
    assert child.name == "predict 1 row with trained"


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


def test_single_row_inputs_are_typed_numbers_categories_and_dates(home):
    """Issue 15 item 4: a number field per numeric column, a select of the seen values per
    categorical one, a date field per date column; the row reaches the predict run as typed."""
    from streamlit.testing.v1 import AppTest as _AppTest

    df = pd.DataFrame({"when": ["2012-01-01", "2012-01-02", "2012-01-03"], "temp": [1.5, 2.0, 3.0],
                       "sky": ["sun", "rain", "sun"], "label": ["a", "b", "a"]})
    sample = home / "sample.csv"
    home.mkdir(parents=True, exist_ok=True)
    df.to_csv(sample, index=False)

    def script() -> None:
        import pandas as pd
        import streamlit as st

        from estimator_workbench.ui import forms

        with st.form("f"):
            row = forms.single_row_inputs(pd.read_csv(st.session_state["path"]), ["when", "temp", "sky"],
                                          {"when": "date", "temp": "numeric", "sky": "categorical"}, key="row")
            st.form_submit_button("go")
        st.session_state["row"] = row

    at = _AppTest.from_function(script)
    at.session_state["path"] = str(sample)
    at.run()
    assert not at.exception, at.exception
    assert at.number_input(key="row-1").value == 1.5
    assert at.selectbox(key="row-2").options == ["rain", "sun"] and at.selectbox(key="row-2").value == "sun"
    assert str(at.date_input(key="row-0").value) == "2012-01-01"
    at.selectbox(key="row-2").set_value("rain")
    at.button[0].click().run()  # (a form sends its values on submit)
    assert at.session_state["row"] == {"when": "2012-01-01", "temp": 1.5, "sky": "rain"}
