"""Precomputed hook triggers: the engine's standard hooks are called only on the steps they act on.

A run that calls only the due hooks must write, log, checkpoint and stop exactly as a run that calls
every hook on every step (``estimator._SCHEDULE_HOOKS = False``), and a user's hook still sees every
``before_run`` / ``after_run``, as in TF.
"""

from __future__ import annotations

import logging
import re
import time

import pytest

import estimator_engine as ee
from estimator_engine import checkpoints, summary
from estimator_engine import estimator as estimator_module
from estimator_engine.hooks import NEVER, CheckpointSaverHook, LoggingTensorHook, SecondOrStepTimer
from estimator_engine.testing import RecordingHook, linear_model_fn, make_linear_data


def _input_fn(n=64, batch_size=16):
    x, y = make_linear_data(n=n, seed=0)
    return ee.inputs.numpy_input_fn(x, y, batch_size=batch_size, num_epochs=None, shuffle=True)


class _RecordingListener(ee.CheckpointSaverListener):
    def __init__(self):
        self.calls = []

    def before_save(self, session, global_step_value):
        self.calls.append(("before_save", global_step_value))

    def after_save(self, session, global_step_value):
        self.calls.append(("after_save", global_step_value))

    def end(self, session, global_step_value):
        self.calls.append(("end", global_step_value))


class _Clock:
    """``time.time`` replaced: one second passes per model_fn call (at the start of each step)."""

    def __init__(self):
        self.now = 1_000_000.0

    def __call__(self):
        return self.now


def _observed(tmp_path, caplog, model_dir, listener, user_hook):
    # The folders differ between the runs compared; torch's thread count is logged once per process.
    messages = [r.getMessage().replace(str(tmp_path), "<tmp>") for r in caplog.records
                if r.name == "estimator_engine" and not r.getMessage().startswith("torch intra-op threads")]
    return {
        "log": messages,
        "summaries": [(s["tag"], s["step"], round(s.get("value", 0.0), 6))
                      for s in summary.read_summaries(model_dir)],
        "extra_summaries": [(s["tag"], s["step"]) for s in summary.read_summaries(str(tmp_path / "extra"))],
        "checkpoints": [int(path.rsplit("-", 1)[1]) for path in checkpoints.all_checkpoints(model_dir)],
        "listener": listener.calls,
        "user_hook": user_hook.calls,
    }


def _steps_run(tmp_path, caplog, monkeypatch, scheduled):
    """Three train() calls (fresh, resumed, max_steps) with step-based standard hooks."""
    monkeypatch.setattr(estimator_module, "_SCHEDULE_HOOKS", scheduled)
    caplog.clear()
    model_dir = str(tmp_path / "model")
    config = ee.RunConfig(tf_random_seed=1, save_checkpoints_steps=7, save_summary_steps=3,
                          log_step_count_steps=5, keep_checkpoint_max=0)
    listener = _RecordingListener()
    user_hook = RecordingHook(fetches={"loss": "loss"}, tag="user:")
    est = ee.Estimator(linear_model_fn, model_dir=model_dir, params={}, config=config)
    hooks = [user_hook, LoggingTensorHook({"loss": "loss", "step": "global_step"}, every_n_iter=4, at_end=True),
             ee.GlobalStepWaiterHook(wait_until_step=0)]
    with caplog.at_level(logging.INFO, logger="estimator_engine"):
        est.train(_input_fn(), steps=23, hooks=hooks, saving_listeners=[listener])
        est.train(_input_fn(), steps=11, hooks=hooks, saving_listeners=[listener])
        est.train(_input_fn(), max_steps=40, hooks=hooks)
    observed = _observed(tmp_path, caplog, model_dir, listener, user_hook)
    # Real time differs between the runs: drop the measured rates and durations.
    observed["log"] = [re.sub(r" \(\d+\.\d+ sec\)$", "", m) for m in observed["log"]
                       if not m.startswith("global_step/sec")]
    observed["summaries"] = [s if s[0] != "global_step/sec" else s[:2] for s in observed["summaries"]]
    return observed


def test_step_schedules_act_exactly_as_when_every_hook_runs_every_step(tmp_path, caplog, monkeypatch):
    every_step = _steps_run(tmp_path / "a", caplog, monkeypatch, scheduled=False)
    scheduled = _steps_run(tmp_path / "b", caplog, monkeypatch, scheduled=True)
    assert scheduled == every_step
    # Known answers: checkpoints at the start, every 7 steps counted from the start of each call
    # (TF's timer), and at the end of each call.
    assert every_step["checkpoints"] == [0, 7, 14, 21, 23, 30, 34, 40]
    assert ("end", 34) in every_step["listener"]
    assert [m for m in every_step["log"] if m.startswith("loss =")][:2] != []
    assert every_step["user_hook"].count("user:before_run") == 40


def _secs_run(tmp_path, caplog, monkeypatch, scheduled):
    """Seconds-based schedules, on a clock that moves one second per step (at its start)."""
    monkeypatch.setattr(estimator_module, "_SCHEDULE_HOOKS", scheduled)
    clock = _Clock()
    monkeypatch.setattr(time, "time", clock)
    caplog.clear()
    model_dir = str(tmp_path / "model")
    config = ee.RunConfig(tf_random_seed=1, save_checkpoints_secs=5, save_summary_steps=4,
                          log_step_count_steps=6, keep_checkpoint_max=0)

    def ticking_model_fn(features, labels, mode, params):
        clock.now += 1.0
        return linear_model_fn(features, labels, mode, params)

    listener = _RecordingListener()
    user_hook = RecordingHook(tag="user:")
    est = ee.Estimator(ticking_model_fn, model_dir=model_dir, params={}, config=config)
    hooks = [user_hook,
             LoggingTensorHook({"loss": "loss"}, every_n_secs=3),
             ee.StepCounterHook(every_n_steps=None, every_n_secs=4),
             ee.SummarySaverHook(save_secs=2, output_dir=str(tmp_path / "extra"), summary_op={"l": "loss"})]
    with caplog.at_level(logging.INFO, logger="estimator_engine"):
        est.train(_input_fn(), steps=17, hooks=hooks, saving_listeners=[listener])
        est.train(_input_fn(), steps=9, hooks=hooks, saving_listeners=[listener])
    summary.SummaryWriterCache.clear()
    return _observed(tmp_path, caplog, model_dir, listener, user_hook)


def test_seconds_schedules_act_exactly_as_when_every_hook_runs_every_step(tmp_path, caplog, monkeypatch):
    every_step = _secs_run(tmp_path / "a", caplog, monkeypatch, scheduled=False)
    scheduled = _secs_run(tmp_path / "b", caplog, monkeypatch, scheduled=True)
    assert scheduled == every_step
    # Known answers: a checkpoint at the start (1 s in: the first model_fn call), then on the first
    # step ending 5 s or more after the last one, and at the end of each call.
    assert every_step["checkpoints"] == [0, 6, 11, 16, 17, 23, 26]
    assert any(m.startswith("global_step/sec: 1") for m in every_step["log"])  # one step per second
    assert every_step["user_hook"].count("user:after_run") == 26


def test_a_user_hook_sees_every_step_and_a_subclass_of_a_standard_hook_too(tmp_path):
    class CountingLogger(LoggingTensorHook):  # a user's subclass: called on every step, as in TF
        def __init__(self):
            super().__init__({"loss": "loss"}, every_n_iter=1000)
            self.before = self.after = 0

        def before_run(self, run_context):
            self.before += 1
            return super().before_run(run_context)

        def after_run(self, run_context, run_values):
            self.after += 1
            super().after_run(run_context, run_values)

    recording, counting = RecordingHook(fetches="loss", tag=""), CountingLogger()
    est = ee.Estimator(linear_model_fn, model_dir=str(tmp_path), params={},
                       config=ee.RunConfig(tf_random_seed=1, save_checkpoints_steps=50))
    est.train(_input_fn(), steps=30, hooks=[recording, counting])
    assert recording.calls.count("before_run") == recording.calls.count("after_run") == 30
    assert len(recording.results) == 30 and all(isinstance(r, float) for r in recording.results)
    assert counting.before == counting.after == 30


def test_standard_hooks_are_called_only_on_the_steps_they_act_on(tmp_path, monkeypatch):
    calls = {"log": 0, "save": 0}
    log_before_run, save_after_run = LoggingTensorHook.before_run, CheckpointSaverHook.after_run

    def counting_log(self, run_context):
        calls["log"] += 1
        return log_before_run(self, run_context)

    def counting_save(self, run_context, run_values):
        calls["save"] += 1
        return save_after_run(self, run_context, run_values)

    monkeypatch.setattr(LoggingTensorHook, "before_run", counting_log)
    monkeypatch.setattr(CheckpointSaverHook, "after_run", counting_save)
    est = ee.Estimator(linear_model_fn, model_dir=str(tmp_path), params={},
                       config=ee.RunConfig(tf_random_seed=1, save_checkpoints_steps=40, log_step_count_steps=25))
    est.train(_input_fn(), steps=100)
    assert calls == {"log": 4, "save": 2}  # logs at iterations 0, 25, 50, 75; saves at 40, 80 (0 and 100 outside the loop)
    assert est.get_variable_value("global_step") == 100


def test_evaluate_calls_every_hook_on_every_batch(tmp_path, monkeypatch):
    calls = []
    log_before_run = LoggingTensorHook.before_run
    monkeypatch.setattr(LoggingTensorHook, "before_run",
                        lambda self, ctx: calls.append(1) or log_before_run(self, ctx))
    est = ee.Estimator(linear_model_fn, model_dir=str(tmp_path), params={}, config=ee.RunConfig(tf_random_seed=1))
    x, y = make_linear_data(n=64)
    est.evaluate(ee.inputs.numpy_input_fn(x, y, batch_size=16, shuffle=False),
                 hooks=[LoggingTensorHook({"loss": "loss"}, every_n_iter=100)])
    assert len(calls) == 4


class TestStepsUntilTrigger:
    def test_steps(self):
        timer = SecondOrStepTimer(every_steps=10)
        assert timer.steps_until_trigger(5) == (0, None)  # never triggered: the first step does
        timer.update_last_triggered_step(5)
        assert timer.steps_until_trigger(6) == (9, None)
        assert timer.steps_until_trigger(15) == (0, None)
        assert timer.steps_until_trigger(20) == (0, None)
        assert [timer.should_trigger_for_step(s) for s in range(6, 16)] == [False] * 9 + [True]

    def test_zero_steps_triggers_on_every_new_step(self):
        timer = SecondOrStepTimer(every_steps=0)
        timer.update_last_triggered_step(3)
        assert timer.steps_until_trigger(4) == (0, None)
        assert timer.steps_until_trigger(3) == (1, None)

    def test_secs(self, monkeypatch):
        monkeypatch.setattr(time, "time", lambda: 100.0)
        timer = SecondOrStepTimer(every_secs=2.5)
        assert timer.steps_until_trigger(0) == (0, None)
        timer.update_last_triggered_step(0)
        assert timer.steps_until_trigger(1) == (NEVER, 102.5)

    def test_never(self):
        assert ee.hooks.NeverTriggerTimer().steps_until_trigger(0) == (NEVER, None)


@pytest.mark.parametrize("every_n_iter", [1, 3])
def test_logging_counts_local_iterations_it_sat_out(tmp_path, caplog, every_n_iter):
    est = ee.Estimator(linear_model_fn, model_dir=str(tmp_path), params={}, config=ee.RunConfig(tf_random_seed=1))
    hook = LoggingTensorHook({"step": "global_step"}, every_n_iter=every_n_iter, at_end=True)
    with caplog.at_level(logging.INFO, logger="estimator_engine"):
        est.train(_input_fn(), steps=7, hooks=[hook])
        est.train(_input_fn(), steps=7, hooks=[hook])
    steps = [int(m.split("=")[1].split()[0]) for m in (r.getMessage() for r in caplog.records)
             if m.startswith("step =")]
    logged = [s for s in range(0, 7) if s % every_n_iter == 0]
    # Per call: iterations 0, n, 2n, ... (fetched global steps 0, n, ...: the value before each
    # step's increment, as in TF), then once at the end (a session.run after training: 7).
    assert steps == [*logged, 7, *(s + 7 for s in logged), 14]


def test_a_users_scheduled_hook_is_called_only_on_the_steps_it_names(tmp_path):
    class EveryTenth(ee.ScheduledHook):
        def __init__(self):
            self.steps_seen, self.skipped = [], 0

        def after_run(self, run_context, run_values):
            self.steps_seen.append(run_context.session.global_step)

        def steps_until_due(self, session):
            return (-session.global_step - 1) % 10, None  # the step that makes a multiple of 10

        def skip_steps(self, steps):
            self.skipped += steps

    hook = EveryTenth()
    est = ee.Estimator(linear_model_fn, model_dir=str(tmp_path), params={},
                       config=ee.RunConfig(tf_random_seed=1, save_checkpoints_steps=50))
    est.train(_input_fn(), steps=35, hooks=[hook])
    assert hook.steps_seen == [10, 20, 30]
    assert hook.skipped == 32  # 35 steps, 3 of them called


def test_a_subclass_that_brings_its_own_schedule_keeps_it(tmp_path):
    class QuietLogger(LoggingTensorHook):  # overrides after_run AND says when it is due
        def __init__(self):
            super().__init__({"loss": "loss"}, every_n_iter=1000)
            self.after = 0

        def after_run(self, run_context, run_values):
            self.after += 1
            super().after_run(run_context, run_values)

        def steps_until_due(self, session):
            return 4, None  # every fifth step

    hook = QuietLogger()
    est = ee.Estimator(linear_model_fn, model_dir=str(tmp_path), params={},
                       config=ee.RunConfig(tf_random_seed=1, save_checkpoints_steps=50))
    est.train(_input_fn(), steps=20, hooks=[hook])
    assert hook.after == 4  # steps 5, 10, 15, 20
