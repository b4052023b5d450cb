"""``SessionRunArgs('global_step')`` gives the step's value before its increment, as TF's hooks see it."""

from __future__ import annotations

import logging

import estimator_engine as ee
from estimator_engine.testing import RecordingHook, linear_model_fn, make_linear_data


def _input_fn():
    x, y = make_linear_data(n=64)
    return ee.inputs.numpy_input_fn(x, y, batch_size=16, num_epochs=None, shuffle=False)


def _estimator(tmp_path, **config):
    return ee.Estimator(linear_model_fn, model_dir=str(tmp_path),
                        config=ee.RunConfig(save_summary_steps=0, **config))


class PortedStopAtStepHook(ee.SessionRunHook):
    """TF 2.15's StopAtStepHook.after_run, ported line by line (it adds 1 to the fetched step)."""

    def __init__(self, last_step):
        self.last_step = last_step

    def before_run(self, run_context):
        return ee.SessionRunArgs("global_step")

    def after_run(self, run_context, run_values):
        global_step = run_values.results + 1
        if global_step >= self.last_step:
            step = run_context.session.global_step  # TF: session.run(global_step_tensor)
            if step >= self.last_step:
                run_context.request_stop()


class PortedEveryNStepsHook(ee.SessionRunHook):
    """The shape of TF's ExamplesPerSecondHook: acts when the fetched step is a multiple of N."""

    def __init__(self, every_n_steps):
        self.every_n_steps = every_n_steps
        self.triggered_at = []

    def before_run(self, run_context):
        return ee.SessionRunArgs("global_step")

    def after_run(self, run_context, run_values):
        if run_values.results % self.every_n_steps == 0:
            self.triggered_at.append(run_values.results)


def test_train_fetch_is_the_value_before_the_increment(tmp_path):
    hook = RecordingHook(fetches={"step": "global_step"})
    est = _estimator(tmp_path)
    est.train(_input_fn(), steps=3, hooks=[hook])
    assert [r["step"] for r in hook.results] == [0, 1, 2]
    hook.results.clear()
    est.train(_input_fn(), steps=2, hooks=[hook])  # resumed at step 3
    assert [r["step"] for r in hook.results] == [3, 4]


def test_a_ported_tf_stop_at_step_hook_stops_on_its_step(tmp_path):
    est = _estimator(tmp_path)
    est.train(_input_fn(), hooks=[PortedStopAtStepHook(last_step=5)])
    assert est.get_variable_value("global_step") == 5


def test_a_ported_every_n_steps_hook_triggers_on_tf_steps(tmp_path):
    hook = PortedEveryNStepsHook(every_n_steps=3)
    _estimator(tmp_path).train(_input_fn(), steps=7, hooks=[hook])
    assert hook.triggered_at == [0, 3, 6]  # TF's fetched values 0..6: multiples of 3


def test_session_global_step_in_after_run_is_the_value_after(tmp_path):
    seen = []

    class Both(ee.SessionRunHook):
        def before_run(self, run_context):
            return ee.SessionRunArgs("global_step")

        def after_run(self, run_context, run_values):
            seen.append((run_values.results, run_context.session.global_step))

    _estimator(tmp_path).train(_input_fn(), steps=2, hooks=[Both()])
    assert seen == [(0, 1), (1, 2)]


def test_evaluate_fetches_the_current_step(tmp_path):
    est = _estimator(tmp_path)
    est.train(_input_fn(), steps=4)
    hook = RecordingHook(fetches="global_step")
    x, y = make_linear_data(n=32)
    est.evaluate(ee.inputs.numpy_input_fn(x, y, batch_size=16, shuffle=False), hooks=[hook])
    assert hook.results == [4, 4]


def test_default_logging_hook_logs_step_zero_first_as_tf(tmp_path, caplog):
    est = _estimator(tmp_path, log_step_count_steps=2)
    with caplog.at_level(logging.INFO, logger="estimator_engine"):
        est.train(_input_fn(), steps=4)
    steps = [r.getMessage().split("step = ")[1].split()[0] for r in caplog.records if "step = " in r.getMessage()]
    assert steps == ["0", "2"]  # TF: "loss = ..., step = 0", then "... step = 2 (x sec)"
