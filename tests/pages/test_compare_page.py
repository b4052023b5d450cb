"""The Compare page tells runs with the same name apart: curves, params table and scatter."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("streamlit")
from app_pages import open_page

from estimator_workbench.execution.launcher import LocalLauncher
from estimator_workbench.store.registry import RunRegistry

REPO = Path(__file__).resolve().parents[2]


def stub_run(home: Path, name: str, **params) -> str:
    reg = RunRegistry(home)
    rec = reg.create_run(name=name, action="train", dataset={"ref": {"kind": "bundled", "name": "iris"}},
                         template={"name": "mlp_classifier", "code": "def model_fn(features): ..."},
                         params=params, run_config={}, schedule={"max_steps": 5})
    launcher = LocalLauncher(home, runner_module="stub_runner", env={"PYTHONPATH": str(REPO / "tests" / "estimator_workbench")})
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


def finished_run(home: Path, name: str, accuracy: float, **params) -> str:
    """A finished training run with an eval accuracy and a short train loss series (no process)."""
    reg = RunRegistry(home)
    rec = reg.create_run(name=name, action="train", dataset={"ref": {"kind": "bundled", "name": "iris"}},
                         template={"name": "mlp_classifier", "code": "def model_fn(features): ..."},
                         params=params, run_config={"tf_random_seed": 7}, schedule={"max_steps": 20})
    lines = [{"step": s, "wall_time": float(s), "split": "train", "name": "loss", "value": 1.0 / s} for s in range(1, 21)]
    (reg.run_dir(rec.run_id) / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    reg.update_summary(rec.run_id, {"accuracy": accuracy}, step=20, split="eval")
    reg.set_status(rec.run_id, "running")
    reg.set_status(rec.run_id, "succeeded")
    return rec.run_id


def test_the_url_selects_the_runs_and_the_best_one_is_highlighted(home):
    ids = [finished_run(home, f"trial {i}", acc, learning_rate=lr)
           for i, (lr, acc) in enumerate([(1e-4, 0.6), (1e-3, 0.93), (1e-1, 0.8), (1e-2, 0.1)])]
    at = open_page("compare", query={"runs": ",".join(ids[:3])})
    assert at.multiselect(key="cmp-runs").value == ids[:3]  # the URL's runs, not the default two
    assert at.selectbox(key="cmp-metric").value == "final eval accuracy"
    assert at.radio(key="cmp-direction-final eval accuracy").value == "maximize"
    best = next(s.value for s in at.success if s.value.startswith("Best run"))
    assert best == f"Best run for final eval accuracy (maximize): **trial 1** ({ids[1]}) · 0.93"
    table = at.dataframe[0].value
    assert list(table.loc[table["best"] == "★", "run"]) == [ids[1]]
    assert "param: learning_rate" in table.columns and "seed" not in table.columns  # same seed: no column
    assert "Same in every run: template, dataset, seed, steps." in [c.value for c in at.caption]
    _curves, parallel, scatter = (json.loads(c.proto.spec) for c in at.get("plotly_chart"))
    assert parallel["data"][0]["type"] == "parcoords"
    assert scatter["layout"]["xaxis"]["type"] == "log"  # 1e-4 .. 1e-1: three decades
    assert scatter["data"][1]["text"] == ["best: trial 1"]
    at.radio(key="cmp-direction-final eval accuracy").set_value("minimize").run()
    assert next(s.value for s in at.success if s.value.startswith("Best run")).startswith(
        "Best run for final eval accuracy (minimize): **trial 0**")
    at.selectbox(key="cmp-metric").set_value("train loss (smoothed)").run()
    assert at.radio(key="cmp-direction-train loss (smoothed)").value == "minimize"


def test_the_picker_writes_the_selection_back_to_the_url_and_reports_unknown_ids(home):
    a = finished_run(home, "a", 0.5, learning_rate=0.1)
    b = finished_run(home, "b", 0.6, learning_rate=0.2)
    at = open_page("compare", query={"runs": f"{a},r-19700101-dead00"})
    assert at.multiselect(key="cmp-runs").value == [a]
    # URL text is escaped markdown (issue 24.11); shown as the plain id
    assert "Not in this workspace (deleted?): r\\-19700101\\-dead00" in [c.value for c in at.caption]
    at.multiselect(key="cmp-runs").select(b).run()
    assert at.query_params["runs"] in ([f"{a},{b}"], f"{a},{b}")
