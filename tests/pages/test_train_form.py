"""The Train form's schedule: early stopping (only when ticked), the NaN policy, the pre-flight flag.

Runs launched here use the stub runner (``home`` fixture); what is checked is the schedule the
registry recorded, which is what the runner reads (the run contract (``check_schedule``) and the engine's early-stopping hook, ``nan_policy``,
``_preflight``).
"""

from __future__ import annotations

import re

import pytest

pytest.importorskip("streamlit")
from app_pages import open_page
from streamlit.testing.v1 import AppTest

import estimator_engine as ee
from estimator_engine.testing import linear_model_fn
from estimator_workbench.execution.engine_hooks import early_stopping_hook
from estimator_workbench.store.registry import RunRegistry
from estimator_workbench.store.run_spec import RunSpec, check_schedule
from estimator_workbench.ui import tables


def train_page() -> AppTest:
    at = open_page("train")
    at.number_input(key="rc-steps").set_value(3)  # a three-step stub run
    return at


def submit(at: AppTest) -> None:
    at.button[0].click()  # the form's submit button
    at.run()
    assert not at.exception, at.exception


def test_defaults_fail_on_nan_without_early_stopping_and_with_preflight(home):
    at = train_page()
    assert at.checkbox(key="rc-es").value is False
    assert at.text_input(key="rc-es-metric").value == "loss"
    assert at.radio(key="rc-nan").value == "fail"
    submit(at)
    [record] = RunRegistry(home).list_runs()
    assert record.action == "train_and_evaluate"
    assert record.schedule["nan_policy"] == "fail"
    assert record.schedule["preflight"] is True
    assert "early_stopping" not in record.schedule


def test_ticked_early_stopping_and_stop_on_nan_reach_the_schedule(home):
    at = train_page()
    at.checkbox(key="rc-es").check()
    at.text_input(key="rc-es-metric").set_value(" accuracy ")
    at.selectbox(key="rc-es-mode").set_value("max")
    at.number_input(key="rc-es-patience").set_value(2)
    at.number_input(key="rc-es-delta").set_value(0.01)
    at.radio(key="rc-nan").set_value("stop")
    submit(at)
    [record] = RunRegistry(home).list_runs()
    assert record.schedule["early_stopping"] == {"metric": "accuracy", "mode": "max", "patience": 2,
                                                 "min_delta": 0.01}
    assert record.schedule["nan_policy"] == "stop"
    # the runner reads exactly what the form wrote (run.json, as a RunSpec)
    spec = RunSpec.read(RunRegistry(home).run_dir(record.run_id) / "run.json")
    assert spec.schedule.early_stopping is not None
    assert spec.schedule.early_stopping.model_dump() == record.schedule["early_stopping"]
    assert check_schedule(record.schedule)["early_stopping"] == record.schedule["early_stopping"]

    estimator = ee.Estimator(linear_model_fn, model_dir=str(home / "model"))
    hook = early_stopping_hook(estimator, spec.schedule.early_stopping, every=10)
    assert isinstance(hook, ee.SessionRunHook)  # the runner's stopper is the engine's hook


def test_an_empty_metric_name_watches_the_loss(home):
    at = train_page()
    at.checkbox(key="rc-es").check()
    at.text_input(key="rc-es-metric").set_value("  ")
    submit(at)
    [record] = RunRegistry(home).list_runs()
    assert record.schedule["early_stopping"] == {"metric": "loss", "mode": "min", "patience": 3,
                                                 "min_delta": 0.0}


def test_early_stopping_needs_train_and_evaluate(home):
    at = train_page()
    at.checkbox(key="rc-es").check()
    at.selectbox(key="rc-action").set_value("train")
    submit(at)
    shown = [re.sub(r"\\(.)", r"\1", e.value) for e in at.error]  # show_error escapes markdown
    assert any("Early stopping watches the evaluations of train_and_evaluate; the action 'train' has none. "
               "Choose train_and_evaluate ('Action') or turn early stopping off (untick 'Early stopping')."
               in text for text in shown), shown
    assert RunRegistry(home).list_runs() == []  # nothing launched


def test_early_stopping_fields_say_they_apply_to_train_and_evaluate_only(home):
    at = train_page()
    assert "train_and_evaluate only" in at.checkbox(key="rc-es").help
    assert "only applies to train_and_evaluate" in at.text_input(key="rc-es-metric").help


def test_number_inputs_take_their_limits_from_the_run_contract(home):
    """The form cannot offer what the CLI refuses, nor refuse what it accepts (issue 13). The
    limits are not the widgets' (a widget marks a value out of them red with a tooltip and its
    form's button then does nothing: issue 28 item 3): each field's help names them, and a value
    out of them is listed in words next to Train (tests/pages/test_train_problems.py)."""
    from estimator_workbench.store.run_spec import (
        EarlyStoppingSettings,
        RunConfigSettings,
        Schedule,
        field_bounds,
    )
    from estimator_workbench.ui.forms import _range_text

    at = train_page()
    contract = {"rc-steps": (Schedule, "max_steps"), "rc-batch": (Schedule, "batch_size"),
                "rc-seed": (RunConfigSettings, "tf_random_seed"),
                "rc-ckpt": (RunConfigSettings, "save_checkpoints_steps"),
                "rc-keep": (RunConfigSettings, "keep_checkpoint_max"),
                "rc-metrics": (Schedule, "metrics_every_n_steps"), "rc-eval": (Schedule, "eval_every_steps"),
                "rc-log": (RunConfigSettings, "log_step_count_steps"),
                "rc-es-patience": (EarlyStoppingSettings, "patience"),
                "rc-es-delta": (EarlyStoppingSettings, "min_delta")}
    for key, (model, field) in contract.items():
        widget = at.number_input(key=key)
        assert (widget.min, widget.max) == (None, None), key
        assert f"Allowed: {_range_text(*field_bounds(model, field))}." in widget.help, key
    assert field_bounds(Schedule, "batch_size") == (1, 65_536) and field_bounds(RunConfigSettings, "keep_checkpoint_max") == (0, 100_000)
    assert "Allowed: from 1 to 65,536." in at.number_input(key="rc-batch").help
    # eval batches: 0 is the form's "the whole eval split" (unset in the contract), the top is the contract's
    assert f"Allowed: from 0 to {field_bounds(Schedule, 'eval_steps')[1]:,}." in at.number_input(key="rc-evalsteps").help
    # every value the contract accepts at the bounds launches (3 steps: a short stub run)
    at.number_input(key="rc-batch").set_value(65_536)
    at.number_input(key="rc-keep").set_value(0)
    submit(at)
    [record] = RunRegistry(home).list_runs()
    assert record.schedule["batch_size"] == 65_536


def test_start_from_lists_finished_training_runs_by_name_and_status(home):
    registry = RunRegistry(home)
    base = {"dataset": {"ref": {"kind": "bundled", "name": "iris"}}, "template": {"name": "t", "code": ""},
            "params": {}, "run_config": {}}

    def run(name: str, action: str, *statuses: str):
        record = registry.create_run(name=name, action=action, **base)
        for status in statuses:
            registry.set_status(record.run_id, status)
        return registry.get(record.run_id)

    older = run("first try", "train_and_evaluate", "running", "failed")
    done = run("good model", "train", "running", "succeeded")
    run("a prediction", "predict", "running", "succeeded")
    at = open_page("train")
    assert at.selectbox(key="start-from").options == [
        "fresh initialisation", f"good model · succeeded · {done.run_id}", f"first try · failed · {older.run_id}"]
    # queued and running runs are left out (their checkpoints are still moving)
    active = [run("queued", "train"), run("running", "train", "running")]
    assert tables.finished_runs_for_start([*active, done]) == [done]


def test_the_label_distribution_is_drawn_above_the_form(home):
    """iris' label at a glance: 150 examples in 3 classes of 50 (and the chart code is loaded in
    the browser before a launch, so the run page's live chart draws at once)."""
    import json

    at = open_page("train")
    [chart] = [c for c in at.get("plotly_chart") if "species" in c.proto.spec]
    spec = json.loads(chart.proto.spec)
    assert spec["layout"]["title"]["text"] == "species: 150 labelled examples in 3 classes"
    assert sorted(spec["data"][0]["x"]) == ["setosa", "versicolor", "virginica"]


def test_the_mlflow_box_is_off_without_a_server_and_on_by_default_with_one(home, monkeypatch):
    at = train_page()
    box = at.checkbox(key="rc-mlflow")
    assert box.value is False and box.disabled and "WORKBENCH_MLFLOW_URI" in box.help
    submit(at)
    [record] = RunRegistry(home).list_runs()
    assert "mlflow" not in record.schedule

    monkeypatch.setenv("WORKBENCH_MLFLOW_URI", "http://bob:pw@127.0.0.1:5999")
    at = train_page()
    box = at.checkbox(key="rc-mlflow")
    assert box.value is True and not box.disabled
    assert "http://bob@127.0.0.1:5999" in box.help and "pw" not in box.help
    box.uncheck()
    submit(at)
    latest = RunRegistry(home).list_runs()[0]
    assert latest.schedule["mlflow"] is False  # this run is not mirrored
