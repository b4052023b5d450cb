"""One definition of a run's metric value (issue 28 item 4): final (the last evaluation) and best
(over the evaluations, with its step), named the same in the Runs table, Compare, the run page and
the notebook API's ``ws.runs()``."""

from __future__ import annotations

import math

import pytest

import estimator_workbench as wb
from estimator_workbench.store import metric_values
from estimator_workbench.store.metric_values import BEST, FINAL, metric_label, metric_value
from estimator_workbench.store.registry import RunRegistry
from estimator_workbench.ui import compare, tables

DATASET = {"ref": {"kind": "bundled", "name": "iris"}}


def evaluated_run(registry: RunRegistry, name: str, accuracies: list[tuple[int, float]], losses: list[tuple[int, float]]):
    """A finished run whose evaluations logged these (step, value) pairs, in order."""
    record = registry.create_run(name=name, action="train_and_evaluate", dataset=DATASET,
                                 template={"name": "t", "code": ""}, params={}, run_config={})
    for (step, accuracy), (_, loss) in zip(accuracies, losses):
        registry.update_summary(record.run_id, {"accuracy": accuracy, "loss": loss}, step=step, split="eval")
    registry.set_status(record.run_id, "running")
    registry.set_status(record.run_id, "succeeded")
    return registry.get(record.run_id)


def test_final_is_the_last_evaluation_and_best_the_best_one_with_its_step(workspace):
    # accuracy peaks at step 200 and ends lower; the loss is lowest at step 300 (lower is better)
    record = evaluated_run(RunRegistry(workspace), "peaked", [(100, 0.80), (200, 0.93), (300, 0.90)],
                           [(100, 0.60), (200, 0.35), (300, 0.30)])
    assert metric_value(record.summary, "eval/accuracy") == metric_values.MetricValue("eval/accuracy", FINAL, 0.90, 300)
    assert metric_value(record.summary, "accuracy", BEST) == metric_values.MetricValue("eval/accuracy", BEST, 0.93, 200)
    assert metric_value(record.summary, "loss", BEST).step == 300  # a loss: the minimum
    assert metric_value(record.summary, "eval/auc") == metric_values.MetricValue("eval/auc", FINAL, None, None)
    assert metric_value(record.summary, "accuracy", BEST).text() == "0.93 (best, at step 200)"
    assert metric_value(record.summary, "accuracy").text() == "0.9 (final, step 300)"
    assert metric_value({"eval/x": {"last": math.nan, "last_step": 5}}, "x").value is None
    with pytest.raises(ValueError, match=r"kind must be one of \['final', 'best'\], given: 'max'"):
        metric_value(record.summary, "accuracy", "max")


def test_every_view_shows_the_same_values_under_the_same_names(workspace):
    registry = RunRegistry(workspace)
    record = evaluated_run(registry, "peaked", [(100, 0.80), (200, 0.93), (300, 0.90)],
                           [(100, 0.60), (200, 0.35), (300, 0.30)])
    final, best = metric_label("accuracy", FINAL), metric_label("accuracy", BEST)
    assert (final, best) == ("final eval accuracy", "best eval accuracy")

    hub = tables.hub_frame([record], workspace, "accuracy").iloc[0]  # the Runs table
    assert (hub[final], hub[best], hub["best at step"]) == (0.90, 0.93, 200)

    table, _ = compare.comparison_frame([record], {record.run_id: record.name}, {})  # Compare
    assert (table[final].iloc[0], table[best].iloc[0]) == (0.90, 0.93)

    summary = tables.summary_frame(record.summary).set_index("metric")  # the run page
    assert (summary.loc["accuracy", "final"], summary.loc["accuracy", "final at step"]) == (0.90, 300)
    assert (summary.loc["accuracy", "best"], summary.loc["accuracy", "best at step"]) == (0.93, 200)

    ws = wb.Workspace(workspace)  # the notebook API: metrics.* is the final value, as MLflow's
    row = ws.runs().set_index("run_id").loc[record.run_id]
    assert row["metrics.eval/accuracy"] == 0.90 and "best.eval/accuracy" not in row
    row = ws.runs(best=True).set_index("run_id").loc[record.run_id]
    assert (row["metrics.eval/accuracy"], row["best.eval/accuracy"], row["best_step.eval/accuracy"]) == (0.90, 0.93, 200)
    assert (row["metrics.eval/loss"], row["best.eval/loss"]) == (0.30, 0.30)
