"""Polish of the pages (issue 28 item 12): Cancel asks first like Delete, tables show numbers to a
sensible precision and blanks for missing values, counts agree with their nouns, widget labels
carry no backslash escapes of plain words (a screen reader reads a label's raw text), and the
Compare page's parallel coordinates use a log axis labelled with values, as the Sweeps page's."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("streamlit")
from app_pages import open_page
from stub_runs import stub_run_args

from estimator_workbench.data import datasets
from estimator_workbench.store.registry import RunRegistry
from estimator_workbench.ui import session, tables


def iris() -> dict:
    spec = datasets.DatasetSpec({"kind": "bundled", "name": "iris"},
                                datasets.infer_schema(datasets.load_table(datasets.bundled_path("iris"))))
    return spec.to_dict() | {"fingerprint": spec.fingerprint()}


def wait_for(condition, at=None, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        if at is not None:
            at.run()  # the page's polls reap the runner (AppTest has no clock)
        time.sleep(0.1)


def test_cancel_asks_in_a_dialog_before_it_ends_the_run(home):
    reg = RunRegistry(home)
    rec = reg.create_run(name="long one", action="train", dataset=iris(), run_config={},
                         template={"name": "t", "code": "def model_fn(features): ..."},
                         **stub_run_args({"max_steps": 5000, "sleep": 0.01}))
    at = open_page("run", query={"run": rec.run_id})  # its launcher poll starts the queued run
    wait_for(lambda: reg.get(rec.run_id).status == "running")
    at.run()
    at.button(key=f"detail-cancel-{rec.run_id}").click().run()
    assert not at.exception, at.exception
    question = " ".join(m.value for m in at.markdown)
    assert f"Cancel run {rec.run_id} (long one) now?" in question
    assert reg.get(rec.run_id).status == "running"  # asked, not done
    at.button(key="keep-running").click().run()
    assert reg.get(rec.run_id).status == "running" and not [b for b in at.button if b.key == "confirm-cancel"]

    at.button(key=f"detail-cancel-{rec.run_id}").click().run()
    at.button(key="confirm-cancel").click().run()
    assert not at.exception, at.exception
    wait_for(lambda: reg.get(rec.run_id).status == "cancelled", at)
    at.run()
    assert any(f"Cancel sent to {rec.run_id} (long one)" in s.value for s in at.success) or \
        reg.get(rec.run_id).status == "cancelled"


def test_tables_show_sensible_precision_and_blank_missing_values(home):
    reg = RunRegistry(home)
    ids = []
    for name, lr in (("a", 0.0031622776601683794), ("b", "adam")):
        rec = reg.create_run(name=name, action="train", dataset=iris(), params={"opt": lr}, run_config={},
                             template={"name": "t", "code": ""})
        reg.set_status(rec.run_id, "running")
        reg.set_status(rec.run_id, "succeeded")
        ids.append(rec.run_id)
    reg.update_summary(ids[0], {"accuracy": 2 / 3}, step=10, split="eval")
    at = open_page("compare", query={"runs": ",".join(ids)})
    [table] = [d for d in at.dataframe if "final eval accuracy" in d.value.columns]
    assert table.proto.placeholder == ""  # run b has no accuracy: a blank cell, not "None"
    assert list(table.value["param: opt"]) == ["0.003162", "adam"]  # not 0.0031622776601683794
    config = json.loads(table.proto.columns)
    assert config["final eval accuracy"]["type_config"]["format"] == "%.4g"
    at = open_page("run", query={"run": ids[0]})
    [summary] = [d for d in at.dataframe if "final" in d.value.columns]
    assert summary.proto.placeholder == "" and json.loads(summary.proto.columns)["final"]["type_config"]["format"] == "%.4g"
    at = open_page()  # the Data page's column summary: a mean of 5.843, not 5.843333333333334
    [stats] = [d for d in at.dataframe if "mean" in d.value.columns]
    assert stats.proto.placeholder == "" and json.loads(stats.proto.columns)["mean"]["type_config"]["format"] == "%.4g"
    assert at.caption[0].value.startswith("150 rows x 5 columns")
    # the frame helper: floats among text rounded, numbers left numbers
    tidy = tables.tidy_frame(pd.DataFrame({"x": [0.1 + 0.2, "relu"], "y": [0.1 + 0.2, 1.0]}))
    assert list(tidy["x"]) == ["0.3", "relu"] and tidy["y"].dtype == float


def test_counts_agree_with_their_nouns(home):
    assert (session.plural(1, "prediction"), session.plural(2, "prediction")) == ("1 prediction", "2 predictions")
    assert session.plural(1_000, "row") == "1,000 rows"
    reg = RunRegistry(home)
    rec = reg.create_run(name="one row", action="predict", dataset=iris(), params={}, run_config={},
                         template={"name": "t", "code": ""})
    reg.set_status(rec.run_id, "running")
    reg.set_status(rec.run_id, "succeeded")
    pd.DataFrame({"class": ["setosa"]}).to_csv(reg.run_dir(rec.run_id) / "predictions.csv", index=False)
    at = open_page("run", query={"run": rec.run_id})
    assert any(s.value.startswith("1 prediction · 1 column (run ") for s in at.success), [s.value for s in at.success]


def test_widget_labels_keep_plain_words_unescaped(home, tmp_path: Path):
    # the characters that would act as markdown are still escaped; words with _ . - : are not
    assert session.label("mlp_classifier on seattle-weather.csv") == "mlp_classifier on seattle-weather.csv"
    assert session.label("Date column date_time") == "Date column date_time"
    assert session.label("[x](http://e.vil) **b** __init__ :red[a]") == \
        "\\[x\\](http\\://e.vil) \\*\\*b\\*\\* \\_\\_init\\_\\_ \\:red\\[a\\]"
    assert session.label("1. item") == "1\\. item" and session.label("- item") == "\\- item"
    reg = RunRegistry(home)
    rec = reg.create_run(name="under_scored_name", action="train", dataset=iris(), params={}, run_config={},
                         template={"name": "t", "code": ""})
    reg.set_status(rec.run_id, "running")
    reg.set_status(rec.run_id, "succeeded")
    at = open_page("run", query={"run": rec.run_id})
    assert at.button(key=f"detail-delete-{rec.run_id}").label == f"Delete {rec.run_id} (under_scored_name)"
    at = open_page("train")
    labels = [w.label for w in at.number_input]
    assert "learning_rate" in labels and not [lbl for lbl in labels if "\\" in lbl]


def test_compare_parallel_coordinates_use_a_log_axis_with_the_values_as_ticks(home):
    reg = RunRegistry(home)
    ids = []
    for lr, accuracy in ((1e-4, 0.7), (1e-2, 0.9), (0.3, 0.8)):
        rec = reg.create_run(name=f"lr {lr}", action="train", dataset=iris(), params={"learning_rate": lr},
                             run_config={}, template={"name": "t", "code": ""})
        reg.update_summary(rec.run_id, {"accuracy": accuracy}, step=10, split="eval")
        reg.set_status(rec.run_id, "running")
        reg.set_status(rec.run_id, "succeeded")
        ids.append(rec.run_id)
    at = open_page("compare", query={"runs": ",".join(ids)})
    [parallel] = [spec for spec in (json.loads(c.proto.spec) for c in at.get("plotly_chart"))
                  if [t["type"] for t in spec["data"]] == ["parcoords"]]
    axis = parallel["data"][0]["dimensions"][0]
    assert axis["label"] == "learning_rate (log scale)"
    assert axis["ticktext"] == ["0.0001", "0.001", "0.01", "0.1", "0.3"]
    assert axis["range"] == pytest.approx([-4.0, -0.5228787], abs=1e-6)  # log10 of the values
