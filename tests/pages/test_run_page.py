"""The Run page of a predict run shows its predictions (preview and download)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("streamlit")
from app_pages import open_page
from streamlit.testing.v1 import AppTest

from workbench.store import paths
from workbench.store.registry import RunRegistry


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
