"""Issue 28 item 10: 'Re-run with these settings' fills the Train form from any run; Compare
links to each run; notes are shown in Runs and Compare and are searchable; runs filtered by a
metric condition."""

from __future__ import annotations

import pytest

pytest.importorskip("streamlit")
from app_pages import open_page
from test_eval_views import iris

from estimator_workbench import templates
from estimator_workbench.store.registry import RunRegistry


def mlp_run(home, **overrides):
    info = templates.get_template("mlp_classifier", home)
    reg = RunRegistry(home)
    kwargs = dict(name="tuned mlp", action="train_and_evaluate", dataset=iris(),
                  template={"name": info.name, "code": info.code + "\n# tuned by hand\n"},
                  params={"learning_rate": 0.0123, "hidden_units": "32,16"},
                  run_config={"tf_random_seed": 7, "save_checkpoints_steps": 50, "keep_checkpoint_max": None,
                              "log_step_count_steps": 25, "device": "cpu"},
                  schedule={"max_steps": 1300, "batch_size": 16, "eval_every_steps": 200,
                            "metrics_every_n_steps": 5, "nan_policy": "stop",
                            "early_stopping": {"metric": "accuracy", "mode": "max", "patience": 4, "min_delta": 0.01}})
    kwargs.update(overrides)
    rec = reg.create_run(**kwargs)
    reg.set_status(rec.run_id, "running")
    return reg.set_status(rec.run_id, "succeeded")


def test_rerun_with_these_settings_fills_the_train_form(home):
    rec = mlp_run(home)
    at = open_page("run", query={"run": rec.run_id})
    at.button(key=f"rerun-{rec.run_id}").click().run()
    assert not at.exception, at.exception
    assert at.title[0].value == "Train"  # the button opened the Train page
    assert any(f"Filled from run tuned mlp ({rec.run_id})" in i.value for i in at.info)
    assert at.session_state["template"]["code"].endswith("# tuned by hand\n")  # the run's own code
    assert at.number_input(key="rc-steps").value == 1300
    assert at.number_input(key="rc-batch").value == 16
    assert at.number_input(key="rc-seed").value == 7
    assert at.number_input(key="rc-ckpt").value == 50
    assert at.number_input(key="rc-keep").value == 0  # keep all
    assert at.number_input(key="rc-eval").value == 200
    assert at.selectbox(key="rc-action").value == "train_and_evaluate"
    assert at.selectbox(key="rc-device").value == "cpu"
    assert at.checkbox(key="rc-es").value is True
    assert at.text_input(key="rc-es-metric").value == "accuracy"
    assert at.number_input(key="rc-es-patience").value == 4
    assert at.radio(key="rc-nan").value == "stop"
    assert at.number_input(key="p-mlp_classifier-learning_rate").value == pytest.approx(0.0123)
    assert at.text_input(key="p-mlp_classifier-hidden_units").value == "32,16"
