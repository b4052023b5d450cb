"""One workspace, two views (issue 25 §2): a run submitted from the Python API is in the UI's runs
table, and a run the UI launches is in ``Workspace.runs()``."""

from __future__ import annotations

import pytest

pytest.importorskip("streamlit")
from app_pages import open_page
from polling import wait_for

import estimator_workbench as wb
from estimator_workbench.execution import run_request
from estimator_workbench.ui import forms


@pytest.mark.slow
def test_a_run_from_python_is_in_the_ui_and_a_run_from_the_ui_is_in_python(home):
    ws = wb.Workspace(home)
    run = ws.submit(dataset="iris", template="mlp_classifier", steps=20, name="from python",
                    config={"tf_random_seed": 0}, wait=True)
    assert run.status == "succeeded", run.record.error
    table = open_page("runs").dataframe[0].value
    assert "from python" in set(table["name"])

    info = run_request.template_dict("mlp_classifier", home)[0]
    launched = forms.launch_run(name="from the ui", action="train", dataset=run_request.dataset_dict("iris"),
                                template=info, params={}, run_config={}, schedule={"max_steps": 2})
    rows = wait_for(lambda: (t := ws.runs()).loc[t["run_id"] == launched.run_id].to_dict("records"), timeout=30)
    assert rows[0]["name"] == "from the ui"
    wait_for(lambda: ws.run(launched.run_id).record.is_finished, timeout=60)
