"""Compare's per-class view (issue 28 item 6): side-by-side confusion matrices and a per-class
precision / recall table of the compared runs, from their evaluation-plots predictions."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("streamlit")
from app_pages import open_page
from test_eval_views import plots_child, trained_run

from estimator_workbench.data import datasets
from estimator_workbench.execution.launcher import LocalLauncher
from estimator_workbench.store.registry import RunRegistry
from estimator_workbench.ui.compare_eval import per_class_frame


def test_per_class_frame_known_answer():
    # true a: 3 predicted a, 1 predicted b; true b: 2 predicted b; class c never predicted nor seen
    frame = per_class_frame(np.array([[3, 1, 0], [0, 2, 0], [0, 0, 0]]), ["a", "b", "c"])
    assert frame["precision"].tolist()[:2] == [1.0, pytest.approx(2 / 3)]
    assert frame["recall"].tolist()[:2] == [0.75, 1.0]
    assert np.isnan(frame["precision"].iloc[2]) and np.isnan(frame["recall"].iloc[2])
    assert frame["support"].tolist() == [4, 2, 0]


def expected_per_class(home, parent, child) -> pd.DataFrame:
    """Independently of the page: the eval split's labels against the child's class ids."""
    spec = datasets.DatasetSpec.from_dict(parent.dataset)
    df = spec.load()
    _, eval_df = datasets.split(df, spec)
    vocab = sorted(df[spec.schema.label].astype(str).unique())
    truth = eval_df[spec.schema.label].astype(str).map(vocab.index).to_numpy()
    preds = pd.read_csv(RunRegistry(home).run_dir(child) / "predictions.csv")["class_ids"].to_numpy()
    pred = preds[df.index.get_indexer(eval_df.index)]
    rows = []
    for k, name in enumerate(vocab):
        tp = int(((truth == k) & (pred == k)).sum())
        rows.append({"class": name, "precision": tp / max(1, int((pred == k).sum())),
                     "recall": tp / max(1, int((truth == k).sum()))})
    return pd.DataFrame(rows)


def test_compare_shows_confusion_matrices_side_by_side_and_a_per_class_table(home, monkeypatch):
    monkeypatch.setattr(LocalLauncher, "poll", lambda self: None)  # launched children stay queued
    a, b = trained_run(home, (100,)), trained_run(home, (200,))
    RunRegistry(home).rename(b.run_id, "second mlp")
    child_a, child_b = plots_child(home, a, 100), plots_child(home, b, 200)
    bare = trained_run(home, (50,))  # no evaluation plots yet
    RunRegistry(home).rename(bare.run_id, "bare")
    at = open_page("compare", query={"runs": f"{a.run_id},{b.run_id},{bare.run_id}"})
    specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    matrices = [s for s in specs if s["data"] and s["data"][0].get("type") == "heatmap"]
    assert len(matrices) == 2
    table = next(d.value for d in at.dataframe if "class" in d.value.columns)
    assert list(table.columns) == ["class", "mlp on iris · precision", "mlp on iris · recall",
                                   "second mlp · precision", "second mlp · recall"]
    for child, label in ((child_a, "mlp on iris"), (child_b, "second mlp")):
        want = expected_per_class(home, a, child)
        assert table["class"].tolist() == want["class"].tolist()
        np.testing.assert_allclose(table[f"{label} · precision"].to_numpy(), want["precision"].to_numpy())
        np.testing.assert_allclose(table[f"{label} · recall"].to_numpy(), want["recall"].to_numpy())
    assert any("No evaluation plots yet for: bare." in c.value for c in at.caption)
    at.button(key="cmp-compute-plots").click()
    at.run()
    kids = [r for r in RunRegistry(home).list_runs(action="predict") if r.parent_run_id == bare.run_id]
    assert [k.checkpoint_path.rsplit("/", 1)[1] for k in kids] == ["model.ckpt-50"]
    RunRegistry(home).set_status(kids[0].run_id, "cancelled")
