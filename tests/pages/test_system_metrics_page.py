"""The run page draws a run's system metrics (issue 28 item 10) in a chart of their own, not among
the loss curves."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("streamlit")
from app_pages import open_page

from estimator_workbench.store.registry import RunRegistry


def test_the_run_page_draws_system_metrics_apart_from_the_curves(home):
    reg = RunRegistry(home)
    rec = reg.create_run(name="sampled", action="train", dataset={"name": "none"},
                         template={"name": "stub", "code": ""}, params={}, run_config={}, schedule={})
    reg.set_status(rec.run_id, "running")
    reg.set_status(rec.run_id, "succeeded")
    rows = [{"step": s, "wall_time": float(s), "split": "train", "name": "loss", "value": 1.0 / s} for s in (1, 2, 3)]
    rows += [{"step": s, "wall_time": float(s), "split": "system", "name": n, "value": v}
             for s in (1, 3) for n, v in (("cpu_percent", 95.0), ("memory_mb", 300.0))]
    (reg.run_dir(rec.run_id) / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    at = open_page("run", query={"run": rec.run_id})
    charts = {c.proto.id: json.loads(c.proto.spec) for c in at.get("plotly_chart")}
    titles = [sorted(a["text"] for a in spec["layout"].get("annotations", [])) for spec in charts.values()]
    assert ["loss"] in titles
    assert ["cpu_percent", "memory_mb"] in titles
    assert any(c.value.startswith("System: the run's processes") for c in at.caption)


def test_compare_leaves_system_metrics_out_of_the_curves(home):
    reg = RunRegistry(home)
    ids = []
    for name in ("a", "b"):
        rec = reg.create_run(name=name, action="train", dataset={"name": "none"},
                             template={"name": "stub", "code": ""}, params={}, run_config={}, schedule={})
        reg.set_status(rec.run_id, "running")
        reg.set_status(rec.run_id, "succeeded")
        rows = [{"step": 1, "wall_time": 1.0, "split": "train", "name": "loss", "value": 0.5},
                {"step": 1, "wall_time": 1.0, "split": "system", "name": "memory_mb", "value": 300.0}]
        (reg.run_dir(rec.run_id) / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        ids.append(rec.run_id)
    at = open_page("compare", query={"runs": ",".join(ids)})
    curves = json.loads(next(c for c in at.get("plotly_chart") if "cmp-curves" in c.proto.id).proto.spec)
    assert [a["text"] for a in curves["layout"]["annotations"]] == ["loss"]
