"""The Compare page tells runs with the same name apart: curves, params table and scatter."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("streamlit")
from app_pages import open_page

from workbench.execution.launcher import LocalLauncher
from workbench.store.registry import RunRegistry

REPO = Path(__file__).resolve().parents[2]


def stub_run(home: Path, name: str, **params) -> str:
    reg = RunRegistry(home)
    rec = reg.create_run(name=name, action="train", dataset={"ref": {"kind": "bundled", "name": "iris"}},
                         template={"name": "mlp_classifier", "code": "def model_fn(features): ..."},
                         params=params, run_config={}, schedule={"max_steps": 5, "sleep": 0.0})
    launcher = LocalLauncher(home, runner_module="stub_runner", env={"PYTHONPATH": str(REPO / "tests" / "workbench")})
    launcher.submit(rec.run_id)
    assert launcher.wait(rec.run_id, timeout=60).status == "succeeded"
    return rec.run_id


def test_runs_with_the_same_name_get_their_id_suffix(home):
    a = stub_run(home, "mlp on iris", learning_rate=0.1)
    b = stub_run(home, "mlp on iris", learning_rate=0.01)
    at = open_page("compare")
    wanted = {f"mlp on iris · r-{a.rsplit('-', 1)[1]}", f"mlp on iris · r-{b.rsplit('-', 1)[1]}"}
    assert set(at.dataframe[0].value["name"]) == wanted
    curves, _parallel, scatter = at.get("plotly_chart")
    legend = {trace["name"] for trace in json.loads(curves.proto.spec)["data"]}
    assert {name.rsplit(" · ", 1)[0] for name in legend} == wanted
    # the best run is its own trace (a star), its label prefixed "best: "
    points = {t.removeprefix("best: ") for trace in json.loads(scatter.proto.spec)["data"] for t in trace["text"]}
    assert points == wanted
