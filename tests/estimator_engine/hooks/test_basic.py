"""Tests of the timer and the standard hooks, driven through the hook protocol by a fake session."""

from __future__ import annotations

import inspect
import logging
import math
import time

import numpy as np
import pytest
import torch

import estimator_engine as ee
import estimator_engine.hooks as hooks_module
from estimator_engine.errors import NanLossDuringTrainingError
from estimator_engine.hooks import (
    CheckpointSaverHook,
    FinalOpsHook,
    GlobalStepWaiterHook,
    LoggingTensorHook,
    NanTensorHook,
    NeverTriggerTimer,
    OnDevice,
    ScheduledHook,
    SecondOrStepTimer,
    SessionRunArgs,
    SessionRunContext,
    SessionRunHook,
    SessionRunValues,
    StepCounterHook,
    StopAtStepHook,
    SummarySaverHook,
    map_fetches,
)
from estimator_engine.mode_keys import ModeKeys
from estimator_engine.summary import SummaryWriterCache, read_summaries


class FakeSession:
    """Implements the hooks' Session protocol: a global step the driver advances, named values."""

    mode = ModeKeys.TRAIN
    config = None

    def __init__(self, values=None, global_step=0, model_dir="/tmp/fake_model"):
        self.global_step = global_step
        self.values = dict(values or {})
        self.model_dir = model_dir
        self.saves = []
        self.runs = []

    def save_checkpoint(self, checkpoint_dir=None, checkpoint_basename="model.ckpt"):
        self.saves.append(self.global_step)
        return f"{checkpoint_dir}/{checkpoint_basename}-{self.global_step}"

    def run(self, fetches):
        self.runs.append(fetches)
        def resolve(name):
            name = name.name if isinstance(name, OnDevice) else name
            return self.global_step if name == "global_step" else self.values[name]

        return map_fetches(fetches, resolve)


def drive(hooks, session, steps, values=None, clock=None, step_secs=0.0):
    """Runs the loop of hooks/base.py for at most ``steps`` steps; returns the steps run."""
    for hook in hooks:
        hook.begin()
    for hook in hooks:
        hook.after_create_session(session, None)
    ran = 0
    try:
        for _ in range(steps):
            context = SessionRunContext(original_args=None, session=session)
            requests = [hook.before_run(context) for hook in hooks]
            session.global_step += 1  # train_op
            if values is not None:
                session.values.update(values(session.global_step))
            if clock is not None:
                clock.advance(step_secs)
            for hook, request in zip(hooks, requests):
                results = None if request is None else session.run(request.fetches)
                hook.after_run(context, SessionRunValues(results))
            ran += 1
            if context.stop_requested:
                break
    except BaseException as exc:
        for hook in hooks:
            hook.on_exception(exc)
        raise
    finally:
        for hook in hooks:
            hook.end(session)
    return ran


class FakeClock:
    def __init__(self, now=1000.0):
        self.now = now

    def __call__(self):
        return self.now

    def advance(self, secs):
        self.now += secs


@pytest.fixture
def clock(monkeypatch):
    fake = FakeClock()
    monkeypatch.setattr(time, "time", fake)
    return fake


@pytest.fixture
def engine_log(caplog):
    caplog.set_level(logging.INFO, logger="estimator_engine")
    return caplog


@pytest.fixture
def writer_cache():
    yield SummaryWriterCache
    SummaryWriterCache.clear()


def messages(caplog, level=logging.INFO):
    return [r.getMessage() for r in caplog.records if r.name == "estimator_engine" and r.levelno == level]


class RecordingWriter:
    def __init__(self):
        self.scalars = []
        self.flushes = 0

    def add_scalar(self, tag, value, step):
        self.scalars.append((tag, value, step))

    def add_scalars(self, scalars, step):
        self.scalars.extend((tag, value, step) for tag, value in scalars.items())

    def flush(self):
        self.flushes += 1


# --------------------------------------------------------------------------------------- timer


class TestSecondOrStepTimer:
    def test_needs_exactly_one(self):
        with pytest.raises(ValueError, match="Either every_secs or every_steps should be provided"):
            SecondOrStepTimer()
        with pytest.raises(ValueError, match="Can not provide both every_secs and every_steps"):
            SecondOrStepTimer(every_secs=1, every_steps=1)
        with pytest.raises(ValueError, match="every_steps must be an integer >= 0, given -1"):
            SecondOrStepTimer(every_steps=-1)

    def test_steps(self, clock):
        timer = SecondOrStepTimer(every_steps=10)
        assert timer.last_triggered_step() is None
        assert timer.should_trigger_for_step(3)
        assert timer.update_last_triggered_step(3) == (None, None)
        assert timer.last_triggered_step() == 3
        assert not timer.should_trigger_for_step(3)
        assert not timer.should_trigger_for_step(12)
        clock.advance(2.5)
        assert timer.should_trigger_for_step(13)
        assert timer.update_last_triggered_step(13) == (2.5, 10)
        timer.reset()
        assert timer.last_triggered_step() is None
        assert timer.should_trigger_for_step(13)

    def test_secs(self, clock):
        timer = SecondOrStepTimer(every_secs=5)
        timer.update_last_triggered_step(0)
        assert not timer.should_trigger_for_step(100)
        clock.advance(4.9)
        assert not timer.should_trigger_for_step(100)
        clock.advance(0.1)
        assert timer.should_trigger_for_step(100)
        assert not timer.should_trigger_for_step(0)  # the last triggered step never triggers
        assert timer.update_last_triggered_step(7) == (5.0, 7)

    def test_never_trigger_timer(self):
        timer = NeverTriggerTimer()
        assert not timer.should_trigger_for_step(0)
        assert timer.update_last_triggered_step(5) == (None, None)
        assert timer.last_triggered_step() is None


# ------------------------------------------------------------------------------ StopAtStepHook


class TestStopAtStepHook:
    def test_needs_exactly_one(self):
        with pytest.raises(ValueError, match="One of num_steps or last_step must be specified"):
            StopAtStepHook()
        with pytest.raises(ValueError, match="Only one of num_steps or last_step can be specified"):
            StopAtStepHook(num_steps=1, last_step=2)
        with pytest.raises(ValueError, match="num_steps must be an integer >= 0, given -1"):
            StopAtStepHook(num_steps=-1)
        with pytest.raises(ValueError, match=r"last_step must be an integer >= 0, given 1\.5"):
            StopAtStepHook(last_step=1.5)

    def test_num_steps_counts_from_the_starting_step(self):
        session = FakeSession(global_step=5)
        hook = StopAtStepHook(num_steps=3)
        assert drive([hook], session, steps=100) == 3
        assert hook.last_step == 8 and session.global_step == 8
        # A second session (another train call) counts again from its own start.
        assert drive([hook], session, steps=100) == 3
        assert session.global_step == 11

    def test_last_step(self):
        session = FakeSession(global_step=2)
        hook = StopAtStepHook(last_step=6)
        assert drive([hook], session, steps=100) == 4
        assert session.global_step == 6

    def test_fetches_nothing(self):
        hook = StopAtStepHook(last_step=1)
        assert hook.before_run(SessionRunContext(None, FakeSession())) is None


# --------------------------------------------------------------------------- LoggingTensorHook


class TestLoggingTensorHook:
    def test_validation(self):
        with pytest.raises(ValueError, match="exactly one of every_n_iter and every_n_secs"):
            LoggingTensorHook(["loss"])
        with pytest.raises(ValueError, match="exactly one of every_n_iter and every_n_secs"):
            LoggingTensorHook(["loss"], every_n_iter=1, every_n_secs=1)
        with pytest.raises(ValueError, match="invalid every_n_iter=0"):
            LoggingTensorHook(["loss"], every_n_iter=0)
        with pytest.raises(TypeError, match="tensors: Fetches must be names"):
            LoggingTensorHook({"loss": 3}, every_n_iter=1)
        with pytest.raises(TypeError, match="tensors must be a dict of tag -> fetch name"):
            LoggingTensorHook(3, every_n_iter=1)

    def test_every_n_iter_logs_sorted_tags_and_fetches_only_when_logging(self, clock, engine_log):
        session = FakeSession(global_step=100)
        hook = LoggingTensorHook({"step": "global_step", "loss": "loss"}, every_n_iter=2)
        requests = []

        class Spy(SessionRunHook):
            def before_run(self, run_context):
                requests.append(hook_request[0])

        hook_request = [None]
        original = hook.before_run

        def before_run(run_context):
            hook_request[0] = original(run_context)
            return hook_request[0]

        hook.before_run = before_run
        drive([hook, Spy()], session, steps=5, values=lambda step: {"loss": step / 4},
              clock=clock, step_secs=0.5)
        assert messages(engine_log) == [
            "loss = 25.25, step = 101",
            "loss = 25.75, step = 103 (1.000 sec)",
            "loss = 26.25, step = 105 (1.000 sec)",
        ]
        assert [r is not None for r in requests] == [True, False, True, False, True]
        assert requests[0] == SessionRunArgs({"step": "global_step", "loss": "loss"})

    def test_counts_local_iterations_not_global_steps(self, engine_log):
        hook = LoggingTensorHook(["global_step"], every_n_iter=3)
        drive([hook], FakeSession(global_step=1000), steps=4)
        assert messages(engine_log)[0] == "global_step = 1001"
        assert messages(engine_log)[1].startswith("global_step = 1004 (")

    def test_list_keeps_order_and_str_is_one_name(self, engine_log):
        session = FakeSession(values={"b": 2, "a": 1})
        drive([LoggingTensorHook(["b", "a"], every_n_iter=10)], session, steps=1)
        drive([LoggingTensorHook("a", every_n_iter=10)], session, steps=1)
        assert messages(engine_log) == ["b = 2, a = 1", "a = 1"]

    def test_every_n_secs(self, clock, engine_log):
        hook = LoggingTensorHook(["global_step"], every_n_secs=1.0)
        drive([hook], FakeSession(), steps=6, clock=clock, step_secs=0.4)
        # Iteration k's before_run sees t = 0.4 k; the log after iteration 0 happens at t = 0.4, so
        # the next trigger is iteration 4 (t = 1.6 >= 1.4), logged at t = 2.0; none after.
        assert messages(engine_log) == ["global_step = 1", "global_step = 5 (1.600 sec)"]

    def test_at_end_only_fetches_in_end(self, engine_log):
        session = FakeSession(values={"acc": np.float32(0.5)})
        hook = LoggingTensorHook({"accuracy": "acc"}, at_end=True)
        drive([hook], session, steps=3)
        assert session.runs == [{"accuracy": "acc"}]
        assert messages(engine_log) == ["accuracy = 0.5"]

    def test_at_end_skipped_after_an_exception(self, engine_log):
        session = FakeSession(values={"acc": 1.0})
        hook = LoggingTensorHook({"accuracy": "acc"}, at_end=True)

        class Boom(SessionRunHook):
            def after_run(self, run_context, run_values):
                raise RuntimeError("boom")

        with pytest.raises(RuntimeError, match="boom"):
            drive([hook, Boom()], session, steps=3)
        assert session.runs == [] and messages(engine_log) == []
        drive([hook], session, steps=1)  # begin() forgets the failure
        assert messages(engine_log) == ["accuracy = 1.0"]

    def test_formatter_and_arrays(self, engine_log):
        session = FakeSession(values={"w": np.array([1e-10, 0.5])})
        drive([LoggingTensorHook(["w"], every_n_iter=1)], session, steps=1)
        drive([LoggingTensorHook(["w"], every_n_iter=1,
                                 formatter=lambda values: f"weights: {values['w'].sum():.2f}")],
              session, steps=1)
        assert messages(engine_log) == ["w = [0.  0.5]", "weights: 0.50"]


# ----------------------------------------------------------------------------- StepCounterHook


class TestStepCounterHook:
    def test_validation(self):
        with pytest.raises(ValueError, match="exactly one of every_n_steps and every_n_secs"):
            StepCounterHook(every_n_steps=None)
        with pytest.raises(ValueError, match="exactly one of every_n_steps and every_n_secs"):
            StepCounterHook(every_n_secs=1)

    def test_steps_per_sec(self, clock, engine_log):
        writer = RecordingWriter()
        hook = StepCounterHook(every_n_steps=2, summary_writer=writer)
        assert hook.last_steps_per_sec is None
        session = FakeSession()
        assert hook.before_run(SessionRunContext(None, session)) is None  # reads global_step
        drive([hook], session, steps=5, clock=clock, step_secs=0.25)
        # Triggers at steps 1 (start of the measurement), 3 and 5: 2 steps per 0.5 s.
        assert writer.scalars == [("global_step/sec", 4.0, 3), ("global_step/sec", 4.0, 5)]
        assert hook.last_steps_per_sec == 4.0
        assert messages(engine_log) == ["global_step/sec: 4", "global_step/sec: 4"]
        assert writer.flushes == 1

    def test_flushes_at_end_only_what_it_wrote(self, clock):
        # A flush of the event file costs an fsync; a short run writes no rate (the first trigger
        # only starts the measurement), so there is nothing of this hook's to flush.
        writer = RecordingWriter()
        hook = StepCounterHook(every_n_steps=100, summary_writer=writer)
        drive([hook], FakeSession(), steps=50, clock=clock, step_secs=0.25)
        assert writer.scalars == [] and writer.flushes == 0
        drive([hook], FakeSession(), steps=150, clock=clock, step_secs=0.25)
        assert writer.scalars == [("global_step/sec", 4.0, 101)] and writer.flushes == 1

    def test_every_n_secs_to_output_dir(self, clock, tmp_path, writer_cache):
        # With the event files too: the engine's writer has no thread that the fake clock could reach.
        hook = StepCounterHook(every_n_steps=None, every_n_secs=1.0, output_dir=str(tmp_path))
        drive([hook], FakeSession(global_step=10), steps=9, clock=clock, step_secs=0.5)
        records = read_summaries(tmp_path)
        assert [(r["tag"], r["step"], r["value"]) for r in records] == [
            ("global_step/sec", 13, 2.0), ("global_step/sec", 15, 2.0), ("global_step/sec", 17, 2.0),
            ("global_step/sec", 19, 2.0)]
        assert writer_cache.get(tmp_path) is writer_cache.get(str(tmp_path))

    def test_no_writer_only_logs(self, clock, engine_log):
        hook = StepCounterHook(every_n_steps=1)
        drive([hook], FakeSession(), steps=3, clock=clock, step_secs=0.1)
        assert len(messages(engine_log)) == 2
        assert math.isclose(hook.last_steps_per_sec, 10.0)

    def test_warns_when_the_global_step_does_not_increase(self, engine_log):
        hook = StepCounterHook(every_n_steps=1)
        session = FakeSession()
        hook.begin()
        for _ in range(8):
            hook.after_run(SessionRunContext(None, session), SessionRunValues(None))
        warnings = messages(engine_log, logging.WARNING)
        assert len(warnings) == 5
        assert warnings[0].startswith("It seems that global step has not been increased")


# ------------------------------------------------------------------------------- NanTensorHook


class TestNanTensorHook:
    def test_raises_with_step_and_last_finite_loss(self, engine_log):
        hook = NanTensorHook("loss")
        assert hook.before_run(SessionRunContext(None, FakeSession())) == SessionRunArgs(OnDevice("loss"))
        session = FakeSession()
        losses = {1: 0.5, 2: 0.25, 3: float("nan"), 4: 0.1}
        with pytest.raises(NanLossDuringTrainingError, match=r"^NaN loss during training\.") as info:
            drive([hook], session, steps=4, values=lambda step: {"loss": losses[step]})
        assert info.value.step == 3 and info.value.last_finite_loss == 0.25
        assert "last finite loss 0.25" in str(info.value)
        assert hook.last_finite_loss == 0.25
        assert messages(engine_log, logging.ERROR)[0].startswith("Model diverged with loss = NaN.")

    def test_requests_stop_when_not_failing(self, engine_log):
        hook = NanTensorHook("my_loss", fail_on_nan_loss=False)
        session = FakeSession()
        ran = drive([hook], session, steps=10,
                    values=lambda step: {"my_loss": np.array(np.nan if step == 2 else 1.0)})
        assert ran == 2
        assert hook.last_finite_loss == 1.0 and hook.diverged_at == 2
        assert "global step 2" in messages(engine_log, logging.ERROR)[0]

    def test_array_and_int_losses(self):
        hook = NanTensorHook()
        for value in (np.float32(2.0), 3, np.array([1.0, 3.0])):
            hook.after_run(SessionRunContext(None, FakeSession()), SessionRunValues(value))
        assert hook.last_finite_loss == 2.0
        with pytest.raises(NanLossDuringTrainingError):
            hook.after_run(SessionRunContext(None, FakeSession()),
                           SessionRunValues(np.array([1.0, np.nan])))

    def test_bad_name(self):
        with pytest.raises(TypeError, match="loss_tensor: Fetches must be names"):
            NanTensorHook(loss_tensor=1.0)


def _nan_at_step_3_model_fn(features, labels, mode):
    net = ee.get_module("linear", lambda: torch.nn.Linear(1, 1))
    loss = torch.nn.functional.mse_loss(net(features["x"]), labels)
    optimizer = ee.get_optimizer("sgd", lambda: torch.optim.SGD(net.parameters(), lr=0.01))
    return ee.EstimatorSpec(mode, loss=loss, train_op=ee.minimize(optimizer, loss))


def _rows_with_nan_in_row_3():
    x = torch.ones(6, 1)
    x[2, 0] = float("nan")  # the third batch of one row: its loss, and every update after, is NaN
    return ee.inputs.numpy_input_fn({"x": x}, torch.ones(6, 1), batch_size=1, shuffle=False)


class TestNanTensorHookReadingLate:
    """On a GPU the hook reads the loss a step late (no host wait per step); forced here on CPU."""

    @pytest.fixture(autouse=True)
    def _late(self, monkeypatch):
        monkeypatch.setattr("estimator_engine.hooks.basic._reads_late", lambda tensor: True)

    def test_the_verdict_names_the_nan_step_and_no_checkpoint_holds_it(self, tmp_path):
        est = ee.Estimator(_nan_at_step_3_model_fn, model_dir=str(tmp_path),
                           config=ee.RunConfig(save_checkpoints_steps=3, log_step_count_steps=None))
        with pytest.raises(NanLossDuringTrainingError) as info:
            est.train(_rows_with_nan_in_row_3(), steps=6)
        assert info.value.step == 3 and math.isfinite(info.value.last_finite_loss)
        # The saver is due at step 3, before the late read of step 3's loss: the check is settled
        # first, so the diverged state is never written.
        assert not (tmp_path / "model.ckpt-3.pt").exists() and not list(tmp_path.glob("model.ckpt-3*"))

    def test_a_stop_on_nan_names_the_step_and_saves_nothing_diverged(self, tmp_path):
        hook = NanTensorHook(fail_on_nan_loss=False)
        est = ee.Estimator(_nan_at_step_3_model_fn, model_dir=str(tmp_path),
                           config=ee.RunConfig(save_checkpoints_steps=100, log_step_count_steps=None))
        est.train(_rows_with_nan_in_row_3(), steps=6, hooks=[hook])
        assert hook.diverged_at == 3
        assert est.get_variable_value("global_step") == 0  # no checkpoint after the start one
        assert math.isfinite(est.get_variable_value("linear/weight").item())

    def test_the_last_step_is_checked_before_the_loop_ends(self, tmp_path):
        est = ee.Estimator(_nan_at_step_3_model_fn, model_dir=str(tmp_path),
                           config=ee.RunConfig(save_checkpoints_steps=100, log_step_count_steps=None))
        with pytest.raises(NanLossDuringTrainingError) as info:
            est.train(_rows_with_nan_in_row_3(), steps=3)  # step 3 is the last one
        assert info.value.step == 3
        assert not list(tmp_path.glob("model.ckpt-3*"))


# ---------------------------------------------------------------------------- SummarySaverHook


class TestSummarySaverHook:
    def test_validation(self):
        with pytest.raises(ValueError, match="Exactly one of scaffold or summary_op must be provided"):
            SummarySaverHook(save_steps=1)
        with pytest.raises(ValueError, match="Exactly one of scaffold or summary_op must be provided"):
            SummarySaverHook(save_steps=1, scaffold=object(), summary_op="loss")
        with pytest.raises(ValueError, match="Exactly one of save_steps or save_secs"):
            SummarySaverHook(summary_op="loss")
        with pytest.raises(TypeError, match="summary_op must be a fetch name"):
            SummarySaverHook(save_steps=1, summary_op=3)

    def test_writes_on_its_timer(self, tmp_path, writer_cache):
        session = FakeSession()
        hook = SummarySaverHook(save_steps=2, output_dir=str(tmp_path),
                                summary_op={"train/loss": "loss", "lr": "lr"})
        drive([hook], session, steps=6, values=lambda step: {"loss": step * 1.5, "lr": np.float32(0.1)})
        got = [(r["step"], r["tag"], r["value"]) for r in read_summaries(tmp_path)]
        assert [(step, tag) for step, tag, _ in got] == [
            (1, "train/loss"), (1, "lr"), (3, "train/loss"), (3, "lr"), (5, "train/loss"), (5, "lr")]
        assert got[2][2] == 4.5 and math.isclose(got[3][2], 0.1, rel_tol=1e-6)
        # Steps where nothing is written fetch nothing.
        assert len(session.runs) == 3

    def test_save_secs_list_and_scaffold(self, clock):
        writer = RecordingWriter()

        class Scaffold:
            summary_op = ["loss"]

        hook = SummarySaverHook(save_secs=1.0, summary_writer=writer, scaffold=Scaffold())
        drive([hook], FakeSession(values={"loss": 2.0}), steps=8, clock=clock, step_secs=0.5)
        # Step k is decided at t = 0.5 (k - 1), the previous write recorded at the end of its step.
        assert writer.scalars == [("loss", 2.0, 1), ("loss", 2.0, 4), ("loss", 2.0, 7)]
        assert writer.flushes == 1

    def test_non_scalar_value_fails(self):
        hook = SummarySaverHook(save_steps=1, summary_writer=RecordingWriter(), summary_op="p")
        with pytest.raises(ValueError, match=r"summary 'p' fetched a value of shape \(2,\)"):
            drive([hook], FakeSession(values={"p": np.ones(2)}), steps=1)

    def test_without_writer_does_nothing(self):
        session = FakeSession(values={"loss": 1.0})
        drive([SummarySaverHook(save_steps=1, summary_op="loss")], session, steps=3)
        assert session.runs == []


# -------------------------------------------------------------------------------- FinalOpsHook


class TestFinalOpsHook:
    def test_values_at_end(self):
        session = FakeSession()
        hook = FinalOpsHook({"acc": "accuracy", "both": ["global_step", "accuracy"]})
        assert hook.final_ops_values is None
        drive([hook], session, steps=3, values=lambda step: {"accuracy": step / 10})
        assert hook.final_ops_values == {"acc": 0.3, "both": [3, 0.3]}
        assert len(session.runs) == 1

    def test_feed_dict_rejected_and_names_checked(self):
        with pytest.raises(ValueError, match="final_ops_feed_dict is not supported"):
            FinalOpsHook("loss", final_ops_feed_dict={"x": 1})
        with pytest.raises(TypeError, match="final_ops: Fetches must be names"):
            FinalOpsHook([object()])

    def test_skipped_after_an_exception(self):
        hook = FinalOpsHook("loss")
        session = FakeSession(values={"loss": 1.0})
        hook.begin()
        hook.on_exception(RuntimeError())
        hook.end(session)
        assert hook.final_ops_values is None and session.runs == []


# ------------------------------------------------------------------------ GlobalStepWaiterHook


class TestGlobalStepWaiterHook:
    def test_waits_until_the_step(self, monkeypatch, engine_log):
        sleeps = []

        class AdvancingSession(FakeSession):
            """Another worker advances the global step while this one polls."""

            def __init__(self):
                super().__init__()
                self._reads = 0

            @property
            def global_step(self):
                self._reads += 1
                return 2 * self._reads

            @global_step.setter
            def global_step(self, value):
                pass

        monkeypatch.setattr(time, "sleep", sleeps.append)
        hook = GlobalStepWaiterHook(wait_until_step=7)
        hook.begin()
        context = SessionRunContext(None, AdvancingSession())
        assert hook.before_run(context) is None
        assert sleeps == [0.5, 0.5, 0.5]
        assert hook.before_run(context) is None and len(sleeps) == 3  # waits only once
        assert messages(engine_log) == ["Waiting for global step 7 before starting training."]

    def test_no_wait(self, monkeypatch):
        monkeypatch.setattr(time, "sleep", lambda secs: pytest.fail("slept"))
        assert drive([GlobalStepWaiterHook(0)], FakeSession(), steps=2) == 2
        with pytest.raises(TypeError, match="wait_until_step must be an integer"):
            GlobalStepWaiterHook("10")


# ---------------------------------------------------------------------------- contract test

FACTORIES = {
    "CheckpointSaverHook": lambda: CheckpointSaverHook("/tmp/model", save_steps=10),
    "FinalOpsHook": lambda: FinalOpsHook({"a": "accuracy"}),
    "GlobalStepWaiterHook": lambda: GlobalStepWaiterHook(10),
    "LoggingTensorHook": lambda: LoggingTensorHook(["loss"], every_n_iter=10),
    "NanTensorHook": lambda: NanTensorHook("loss"),
    "ProgressBarHook": lambda: hooks_module.ProgressBarHook(total=10),
    "StepCounterHook": lambda: StepCounterHook(),
    "StopAtStepHook": lambda: StopAtStepHook(num_steps=10),
    "SummarySaverHook": lambda: SummarySaverHook(save_steps=10, summary_op="loss"),
}
HOOK_CLASSES = sorted(
    (obj for name in hooks_module.__all__
     if isinstance(obj := getattr(hooks_module, name), type)
     and issubclass(obj, SessionRunHook) and obj not in (SessionRunHook, ScheduledHook)),
    key=lambda cls: cls.__name__,
)
PROTOCOL = ("begin", "after_create_session", "before_run", "after_run", "on_exception", "end")


def test_every_hook_class_has_a_factory():
    assert {cls.__name__ for cls in HOOK_CLASSES} <= set(FACTORIES), (
        "add a factory for each new hook class to FACTORIES")


@pytest.mark.parametrize("cls", HOOK_CLASSES, ids=lambda cls: cls.__name__)
def test_hook_contract(cls):
    hook = FACTORIES[cls.__name__]()
    assert isinstance(hook, SessionRunHook)
    for method in PROTOCOL:
        expected = list(inspect.signature(getattr(SessionRunHook, method)).parameters)
        got = list(inspect.signature(getattr(cls, method)).parameters)
        assert got == expected, f"{cls.__name__}.{method}{got} differs from the base {expected}"
    text = repr(hook)
    assert text.startswith(f"{cls.__name__}(")
    assert cls.__doc__ and "Example:" in cls.__doc__
