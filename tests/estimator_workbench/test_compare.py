"""Known answers of the Compare page's pure helpers (estimator_workbench.ui.compare): the URL selection,
what differs between runs, the metrics offered, the smoothed train loss and the best run."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from estimator_workbench.store.registry import RunRegistry
from estimator_workbench.ui import compare, figures

DATASET = {"ref": {"kind": "bundled", "name": "iris"}, "fingerprint": "sha256:0123456789abcdef"}


def record(reg: RunRegistry, name: str, *, params=None, run_config=None, schedule=None, code="def model_fn(f): ...",
           dataset=DATASET, summary=None):
    rec = reg.create_run(name=name, action="train", dataset=dataset, template={"name": "mlp_classifier", "code": code},
                         params=params or {}, run_config=run_config or {}, schedule=schedule or {"max_steps": 100})
    return dataclasses.replace(rec, summary=summary or {})


def test_the_url_selection_keeps_known_ids_in_order_and_reports_the_rest():
    assert compare.parse_run_ids("r-2,r-1, r-2 ,,r-x", ["r-1", "r-2"]) == (["r-2", "r-1"], ["r-x"])
    assert compare.parse_run_ids(["r-1", "r-2"], ["r-1", "r-2"]) == (["r-1", "r-2"], [])  # ?runs=a&runs=b
    assert compare.parse_run_ids(None, ["r-1"]) == ([], [])


def test_differences_cover_params_run_config_dataset_template_seed_and_steps(workspace):
    reg = RunRegistry(workspace)
    base = record(reg, "a", params={"learning_rate": 0.1, "hidden_units": "64"},
                  run_config={"tf_random_seed": 1, "save_checkpoints_steps": 100})
    same = record(reg, "b", params={"learning_rate": 0.1, "hidden_units": "64"},
                  run_config={"tf_random_seed": 1, "save_checkpoints_steps": 100})
    assert compare.differing_facts([compare.run_facts(base), compare.run_facts(same)]) == []
    other = record(reg, "c", params={"learning_rate": 0.01, "hidden_units": "64"},
                   run_config={"tf_random_seed": 2, "save_checkpoints_steps": 50}, schedule={"max_steps": 300},
                   code="def model_fn(f): return 2", dataset={**DATASET, "fingerprint": "sha256:ffff"})
    facts = [compare.run_facts(base), compare.run_facts(other)]
    assert compare.differing_facts(facts) == ["template", "dataset", "seed", "steps", "param: learning_rate",
                                              "config: save_checkpoints_steps"]
    assert facts[0]["dataset"] == "iris (01234567)" and facts[0]["template"].startswith("mlp_classifier (")
    assert facts[1]["seed"] == 2 and facts[1]["steps"] == 300


def test_the_smoothed_train_loss_is_tensorboards_ema_not_the_last_value():
    values = np.array([1.0, 0.5, 0.9, 0.1])
    assert compare.smoothed_last(values, 0.6) == pytest.approx(figures.ema_smooth(values, 0.6)[-1])
    assert compare.smoothed_last(values, 0.6) != pytest.approx(0.1)
    assert compare.smoothed_last([np.nan, 2.0], 0.5) == pytest.approx(2.0)
    assert compare.smoothed_last([], 0.5) is None


def test_metric_options_put_eval_metrics_first_and_directions_follow_the_name(workspace):
    reg = RunRegistry(workspace)
    entry = {"last": 0.8, "last_step": 100, "best": 0.9, "best_step": 50}
    a = record(reg, "a", summary={"eval/zeta": entry, "eval/accuracy": entry, "train/loss": entry})
    b = record(reg, "b", summary={"eval/average_loss": entry})
    assert compare.metric_options([a, b]) == [
        "final eval accuracy", "final eval average_loss", "final eval zeta",
        "best eval accuracy", "best eval average_loss", "best eval zeta", compare.SMOOTHED_LOSS]
    assert compare.default_direction("final eval accuracy") == "maximize"
    assert compare.default_direction("best eval average_loss") == "minimize"
    # the notebook's compare(metric="eval accuracy") of before the values were named: the final one
    assert compare.resolve_metric("eval accuracy", compare.metric_options([a])) == "final eval accuracy"
    assert compare.default_direction("eval accuracy") == "maximize"
    assert compare.default_direction("eval average_loss") == "minimize"
    assert compare.default_direction(compare.SMOOTHED_LOSS) == "minimize"
    assert compare.default_direction("eval mean_absolute_error") == "minimize"


def test_the_comparison_table_and_the_best_run(workspace):
    reg = RunRegistry(workspace)
    # final (last evaluation) and best (over the evaluations) differ: the table names both
    runs = [record(reg, f"trial {i}", params={"learning_rate": lr},
                   summary={"eval/accuracy": {"last": acc, "last_step": 100, "best": best, "best_step": 60}})
            for i, (lr, acc, best) in enumerate([(0.1, 0.7, 0.99), (0.01, 0.95, 0.96), (0.001, 0.9, 0.9)])]
    losses = {runs[0].run_id: np.array([1.0, 0.2]), runs[1].run_id: np.array([0.5, 0.4])}
    table, differing = compare.comparison_frame(runs, {r.run_id: r.name for r in runs}, losses, 0.5)
    assert differing == ["param: learning_rate"]
    assert list(table.columns) == ["run", "name", "status", "param: learning_rate", "step",
                                   compare.SMOOTHED_LOSS, "final eval accuracy", "best eval accuracy"]
    assert list(table["final eval accuracy"]) == [0.7, 0.95, 0.9] and list(table["best eval accuracy"]) == [0.99, 0.96, 0.9]
    assert table[compare.SMOOTHED_LOSS].iloc[0] == pytest.approx((0.5 * 1.0 * 0.5 + 0.5 * 0.2) / 0.75)
    assert np.isnan(table[compare.SMOOTHED_LOSS].iloc[2])  # no train loss logged
    assert compare.best_run(table, "final eval accuracy", "maximize") == runs[1].run_id
    assert compare.best_run(table, "final eval accuracy", "minimize") == runs[0].run_id
    assert compare.best_run(table, "best eval accuracy", "maximize") == runs[0].run_id  # 0.99 at step 60
    assert compare.best_run(table, compare.SMOOTHED_LOSS, "minimize") == runs[1].run_id  # 0.433 < 0.467
    assert compare.best_run(table.assign(**{"final eval accuracy": np.nan}), "final eval accuracy", "maximize") is None
    with pytest.raises(ValueError, match="direction must be 'maximize' or 'minimize', given: 'max'"):
        compare.best_run(table, "final eval accuracy", "max")
    with pytest.raises(ValueError, match="Metric 'eval auc' is not a column"):
        compare.best_run(table, "eval auc", "maximize")


def test_run_series_is_read_once_per_version_of_the_file(workspace, monkeypatch):
    from estimator_workbench.store import metrics_store, paths

    reg = RunRegistry(workspace)
    rec = record(reg, "a")
    path = paths.run_dir(workspace, rec.run_id) / paths.METRICS_FILE
    path.write_text('{"step": 1, "wall_time": 0.0, "split": "train", "name": "loss", "value": 2.0}\n')
    reads = []
    real = metrics_store.read_all
    monkeypatch.setattr(metrics_store, "read_all", lambda p: reads.append(p) or real(p))
    compare._read_series.cache_clear()
    frame, loss = compare.run_series(workspace, rec.run_id)
    compare.run_series(workspace, rec.run_id)
    assert len(reads) == 1 and list(loss) == [2.0] and len(frame) == 1
    with open(path, "a") as f:  # the run logged more: read again
        f.write('{"step": 2, "wall_time": 1.0, "split": "train", "name": "loss", "value": 1.0}\n')
    frame, loss = compare.run_series(workspace, rec.run_id)
    assert len(reads) == 2 and list(loss) == [2.0, 1.0]
    empty, none = compare.run_series(workspace, "r-19700101-000000")
    assert len(empty) == 0 and none.size == 0 and isinstance(empty, pd.DataFrame)
