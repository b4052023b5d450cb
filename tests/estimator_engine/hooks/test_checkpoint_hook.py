"""Tests of CheckpointSaverHook and its listeners, driven by a fake session."""

from __future__ import annotations

import logging
import time

import pytest

from estimator_engine.hooks import (
    CheckpointSaverHook,
    CheckpointSaverListener,
    SessionRunContext,
    SessionRunHook,
    SessionRunValues,
    check_listeners_type,
    map_fetches,
)
from estimator_engine.mode_keys import ModeKeys


class FakeSession:
    """The hooks' Session protocol: a global step the driver advances; saves are recorded."""

    mode = ModeKeys.TRAIN
    config = None

    def __init__(self, global_step=0, model_dir="/tmp/fake_model"):
        self.global_step = global_step
        self.model_dir = model_dir
        self.saves = []
        self.save_calls = []

    def save_checkpoint(self, checkpoint_dir=None, checkpoint_basename="model.ckpt"):
        self.saves.append(self.global_step)
        self.save_calls.append((checkpoint_dir, checkpoint_basename))
        return f"{checkpoint_dir}/{checkpoint_basename}-{self.global_step}"

    def run(self, fetches):
        return map_fetches(fetches, lambda name: self.global_step)


def drive(hooks, session, steps, clock=None, step_secs=0.0):
    """The loop of hooks/base.py for at most ``steps`` steps; returns the steps run."""
    for hook in hooks:
        hook.begin()
    for hook in hooks:
        hook.after_create_session(session, None)
    ran = 0
    try:
        for _ in range(steps):
            context = SessionRunContext(original_args=None, session=session)
            requests = [hook.before_run(context) for hook in hooks]
            session.global_step += 1
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


class RecordingListener(CheckpointSaverListener):
    def __init__(self, events, name="listener", stop_at=None):
        self.events = events
        self.name = name
        self.stop_at = stop_at

    def begin(self):
        self.events.append((self.name, "begin"))

    def before_save(self, session, global_step_value):
        self.events.append((self.name, "before_save", global_step_value, list(session.saves)))

    def after_save(self, session, global_step_value):
        self.events.append((self.name, "after_save", global_step_value, list(session.saves)))
        return self.stop_at is not None and global_step_value >= self.stop_at

    def end(self, session, global_step_value):
        self.events.append((self.name, "end", global_step_value))


@pytest.fixture
def clock(monkeypatch):
    class Clock:
        now = 1000.0

        def __call__(self):
            return self.now

        def advance(self, secs):
            self.now += secs

    fake = Clock()
    monkeypatch.setattr(time, "time", fake)
    return fake


class TestValidation:
    def test_needs_exactly_one_frequency(self):
        with pytest.raises(ValueError, match="Either save_secs or save_steps should be provided"):
            CheckpointSaverHook("/tmp/m")
        with pytest.raises(ValueError, match="Can not provide both save_secs and save_steps"):
            CheckpointSaverHook("/tmp/m", save_secs=10, save_steps=10)

    def test_saver_and_scaffold(self):
        class Saver:
            def save(self, session, save_path, global_step=None):
                pass

        with pytest.raises(ValueError, match="You cannot provide both saver and scaffold"):
            CheckpointSaverHook("/tmp/m", save_steps=1, saver=Saver(), scaffold=object())
        with pytest.raises(TypeError, match="saver must have a save"):
            CheckpointSaverHook("/tmp/m", save_steps=1, saver=object())

    def test_listener_types(self):
        with pytest.raises(TypeError, match=(
                "saving_listeners must be a list of CheckpointSaverListener, given: 'oops'")):
            CheckpointSaverHook("/tmp/m", save_steps=1, listeners=["oops"])
        hook = CheckpointSaverHook("/tmp/m", save_steps=1)
        hook.listeners.append(object())  # extended after construction: checked in begin()
        with pytest.raises(TypeError, match="saving_listeners must be a list"):
            hook.begin()
        assert check_listeners_type(None) == []
        listener = CheckpointSaverListener()
        assert check_listeners_type((listener,)) == [listener]


class TestSaving:
    def test_saves_at_start_on_the_timer_and_at_end(self, caplog):
        caplog.set_level(logging.INFO, logger="estimator_engine")
        session = FakeSession()
        hook = CheckpointSaverHook("/tmp/m", save_steps=2)
        assert hook.before_run(SessionRunContext(None, session)) is None  # fetches nothing
        assert drive([hook], session, steps=5) == 5
        assert session.saves == [0, 2, 4, 5]
        assert set(session.save_calls) == {("/tmp/m", "model.ckpt")}
        assert "Saving checkpoints for 0 into /tmp/m/model.ckpt." in caplog.messages

    def test_no_second_save_of_the_last_step(self):
        session = FakeSession()
        drive([CheckpointSaverHook("/tmp/m", save_steps=2, checkpoint_basename="net")], session, 4)
        assert session.saves == [0, 2, 4]
        assert session.save_calls[0] == ("/tmp/m", "net")

    def test_resumed_session_counts_from_its_start(self):
        session = FakeSession(global_step=5)
        drive([CheckpointSaverHook("/tmp/m", save_steps=3)], session, steps=4)
        assert session.saves == [5, 8, 9]
        # The same hook in a second train call saves its start again (TF: model.ckpt-9 twice).
        hook = CheckpointSaverHook("/tmp/m", save_steps=100)
        drive([hook], session, steps=2)
        drive([hook], session, steps=2)
        assert session.saves == [5, 8, 9, 9, 11, 11, 13]

    def test_save_secs(self, clock):
        session = FakeSession()
        drive([CheckpointSaverHook("/tmp/m", save_secs=1.0)], session, steps=7, clock=clock,
              step_secs=0.4)
        # The start save is at t = 0; steps end at t = 0.4 k: saves at 3 (1.2 s) and 6 (2.4 s).
        assert session.saves == [0, 3, 6, 7]

    def test_custom_saver_and_scaffold_saver(self):
        calls = []

        class Saver:
            def save(self, session, save_path, global_step=None):
                calls.append((save_path, global_step))

        session = FakeSession()
        drive([CheckpointSaverHook("/tmp/m", save_steps=10, saver=Saver())], session, steps=2)

        class Scaffold:
            saver = Saver()

        drive([CheckpointSaverHook("/tmp/s", save_steps=10, scaffold=Scaffold())], session, 1)
        assert calls == [("/tmp/m/model.ckpt", 0), ("/tmp/m/model.ckpt", 2),
                         ("/tmp/s/model.ckpt", 2), ("/tmp/s/model.ckpt", 3)]
        assert session.saves == []


class TestListeners:
    def test_call_order(self):
        events = []
        session = FakeSession()
        hook = CheckpointSaverHook("/tmp/m", save_steps=2,
                                   listeners=[RecordingListener(events, "a")])
        hook.listeners.append(RecordingListener(events, "b"))  # what Estimator.train does
        drive([hook], session, steps=3)
        assert events == [
            ("a", "begin"), ("b", "begin"),
            ("a", "before_save", 0, []), ("b", "before_save", 0, []),
            ("a", "after_save", 0, [0]), ("b", "after_save", 0, [0]),
            ("a", "before_save", 2, [0]), ("b", "before_save", 2, [0]),
            ("a", "after_save", 2, [0, 2]), ("b", "after_save", 2, [0, 2]),
            ("a", "before_save", 3, [0, 2]), ("b", "before_save", 3, [0, 2]),
            ("a", "after_save", 3, [0, 2, 3]), ("b", "after_save", 3, [0, 2, 3]),
            ("a", "end", 3), ("b", "end", 3),
        ]

    def test_after_save_true_requests_stop(self):
        events = []
        session = FakeSession()
        # stop_at=0 is also true for the first save, which TF ignores (no run to stop yet).
        hook = CheckpointSaverHook("/tmp/m", save_steps=2,
                                   listeners=[RecordingListener(events, stop_at=0)])
        assert drive([hook], session, steps=10) == 2
        assert session.saves == [0, 2]  # the stop happened right after a save: nothing at end

    def test_nothing_saved_at_end_after_an_exception(self):
        events = []
        session = FakeSession()
        hook = CheckpointSaverHook("/tmp/m", save_steps=100, listeners=[RecordingListener(events)])

        class Boom(SessionRunHook):
            def after_run(self, run_context, run_values):
                if run_context.session.global_step == 2:
                    raise FloatingPointError("diverged")

        with pytest.raises(FloatingPointError):
            drive([hook, Boom()], session, steps=10)
        assert session.saves == [0]
        assert ("listener", "end", 2) not in events
        # begin() forgets the failure: the next run saves at its end again.
        drive([hook], session, steps=1)
        assert session.saves == [0, 2, 3]


def test_repr_and_properties():
    hook = CheckpointSaverHook("/tmp/m", save_secs=60)
    assert repr(hook).startswith("CheckpointSaverHook(checkpoint_dir='/tmp/m', save_secs=60")
    assert hook.checkpoint_dir == "/tmp/m" and hook.timer.every_secs == 60
