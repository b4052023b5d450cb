"""The chosen thing stays chosen (issue 28 items 2 and 7): every page keeps its object in the URL,
also after a sidebar link (which opens a page without a query) and a reload (a new session with
only the URL); the action buttons name the run they act on; Compare keeps its run set and the
Data page its roles per dataset when the user leaves and comes back; the sweeps table refreshes
while a sweep works."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

pytest.importorskip("streamlit")
import streamlit as st
from app_pages import open_page
from streamlit.testing.v1 import AppTest

from estimator_workbench.data import datasets
from estimator_workbench.store.registry import RunRegistry


def iris() -> dict:
    spec = datasets.DatasetSpec({"kind": "bundled", "name": "iris"},
                                datasets.infer_schema(datasets.load_table(datasets.bundled_path("iris"))))
    return spec.to_dict() | {"fingerprint": spec.fingerprint()}


def finished_run(home: Path, name: str, status: str = "succeeded") -> str:
    reg = RunRegistry(home)
    rec = reg.create_run(name=name, action="train", run_config={}, params={}, dataset=iris(),
                         template={"name": "t", "code": "def model_fn(features): ..."})
    reg.set_status(rec.run_id, "running")
    if status != "running":
        reg.set_status(rec.run_id, status)
    return rec.run_id


def sidebar_to(at: AppTest, page: str) -> AppTest:
    """What a click on a sidebar link does: the page opens without the previous page's query."""
    at.query_params.clear()
    at.switch_page(f"../../pages/{page}.py").run()
    assert not at.exception, at.exception
    return at


def reload(at: AppTest, page: str) -> AppTest:
    """A browser reload: a new session that has only the URL."""
    return open_page(page, query=dict(at.query_params))


def test_run_detail_keeps_the_chosen_run_through_other_pages_and_a_reload(home):
    older = finished_run(home, "the older run")
    newer = finished_run(home, "the newer run")  # the newest: what a page without ?run= used to show
    at = open_page("run", query={"run": older})
    assert at.selectbox(key="run_picker").value == older
    sidebar_to(at, "data")
    sidebar_to(at, "run")
    assert at.selectbox(key="run_picker").value == older
    assert at.query_params["run"] == older  # written back, though the sidebar link carried no ?run=
    again = reload(at, "run")
    assert again.selectbox(key="run_picker").value == older != newer
    gone = open_page("run", query={"run": "r-20200101-abcdef"})  # a link to a run deleted for good
    assert "Run r-20200101-abcdef is not in this workspace" in gone.warning[0].value.replace("\\", "")
    # the buttons say which run they act on
    labels = {b.key: b.label for b in again.button if b.key and b.key.startswith("detail-")}
    assert labels[f"detail-stop-{older}"] == f"Stop {older} (the older run)"
    assert labels[f"detail-cancel-{older}"] == f"Cancel {older} (the older run)"
    assert labels[f"detail-delete-{older}"] == f"Delete {older} (the older run)"


def test_predict_sweeps_data_model_and_train_keep_their_choice_in_the_url(home):
    older = finished_run(home, "model a")
    finished_run(home, "model b")
    (RunRegistry(home).run_dir(older) / "model").mkdir(parents=True)
    (RunRegistry(home).run_dir(older) / "model" / "model.ckpt-5").write_bytes(b"")
    at = open_page("predict", query={"run": older})
    sidebar_to(at, "runs")
    sidebar_to(at, "predict")
    assert at.query_params["run"] == older and at.selectbox(key="pred-run").value == older
    for page in ("data", "model", "train"):
        sidebar_to(at, page)
        assert (at.query_params["dataset"], at.query_params["template"]) == ("iris", "mlp_classifier"), page


def test_compare_keeps_its_run_set_when_left_and_reloaded(home):
    a, b, c = (finished_run(home, f"run {n}") for n in "abc")
    at = open_page("compare", query={"runs": f"{a},{c}"})
    assert at.multiselect(key="cmp-runs").value == [a, c]
    sidebar_to(at, "runs")
    sidebar_to(at, "compare")
    assert at.multiselect(key="cmp-runs").value == [a, c]  # not the default (the two newest)
    assert at.query_params["runs"] == f"{a},{c}"
    assert reload(at, "compare").multiselect(key="cmp-runs").value == [a, c]
    assert b not in at.query_params["runs"]


def test_the_data_page_keeps_each_datasets_roles_when_switching_back(home):
    at = open_page()  # the Data page, on iris
    [key] = [k for k in at.session_state["_data-roles"] if k.endswith("iris.csv")]
    # the roles this session set for iris (the editor's edits are kept here after each page run)
    edited = at.session_state["_data-roles"][key]["edited"]
    for row in edited:
        if row["column"] == "sepal_width_cm":
            row["role"] = datasets.IGNORE
    at.selectbox(key="data-name").set_value("penguins").run()
    assert datasets.DatasetSpec.from_dict(at.session_state["dataset"]).schema.label == "species"
    at.selectbox(key="data-name").set_value("iris").run()
    assert not at.exception, at.exception
    schema = datasets.DatasetSpec.from_dict(at.session_state["dataset"]).schema
    assert schema.column("sepal_width_cm").role == datasets.IGNORE  # not reset to the inferred 'feature'
    assert schema.column("sepal_length_cm").role == datasets.FEATURE


def test_the_sweeps_table_refreshes_while_a_sweep_works(home, monkeypatch):
    """The table was drawn once per page run, outside the details' live fragment: it kept
    "starting · 0/6" after the sweep finished. It is a fragment that polls while a driver works."""
    from test_sweeps_page import make_sweep

    from estimator_workbench.sweeps import store

    make_sweep(home)
    registered = []
    real = st.fragment

    def recording(func=None, *, run_every=None):
        if func is None:  # used as @st.fragment(run_every=...)
            return lambda f: recording(f, run_every=run_every)
        registered.append((func.__name__, run_every))
        return real(func, run_every=run_every)

    monkeypatch.setattr(st, "fragment", recording)
    state = store.sweep_dir(home, "lr") / store.DRIVER_STATE
    state.write_text(json.dumps({"state": "running", "pid": os.getpid()}))  # a live driver
    at = open_page("sweeps")
    assert ("table", 3.0) in registered and at.dataframe[0].value["state"].tolist() == ["running"]
    assert at.query_params["sweep"] == "lr"  # the chosen sweep is in the URL, also after the sidebar
    sidebar_to(at, "runs")
    sidebar_to(at, "sweeps")
    assert at.query_params["sweep"] == "lr" and at.selectbox(key="sweeps-pick").value == "lr"
    registered.clear()
    state.write_text(json.dumps({"state": "finished", "pid": os.getpid()}))
    at.run()
    assert ("table", None) in registered and at.dataframe[0].value["state"].tolist() == ["finished"]
