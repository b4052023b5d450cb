"""The progress bar of train / evaluate / predict (issue 25 §1) and the engine's TF-style logging."""

from __future__ import annotations

import io
import logging
import os
import re
import subprocess
import sys
import textwrap

import pytest

import estimator_engine as ee
from estimator_engine.hooks import progress
from estimator_engine.hooks.progress import ProgressBarHook, progress_bar_enabled
from estimator_engine.testing import linear_model_fn, make_linear_data


class _Terminal(io.StringIO):
    """A stderr that says it is a terminal (and keeps what is written to it)."""

    def isatty(self) -> bool:
        return True


@pytest.fixture
def data():
    features, labels = make_linear_data(n=64)
    return features["x"].numpy(), labels.numpy()


def _estimator(tmp_path, **config):
    return ee.Estimator(linear_model_fn, model_dir=str(tmp_path / "model"), params={},
                        config=ee.RunConfig(tf_random_seed=0, **config))


def _train_fn(data):
    x, y = data
    return ee.inputs.numpy_input_fn({"x": x}, y, batch_size=8, num_epochs=None, shuffle=True)


def _eval_fn(data, labels=True):
    x, y = data
    return ee.inputs.numpy_input_fn({"x": x}, y if labels else None, batch_size=8, shuffle=False)


def _frames(text: str) -> list[str]:
    """The states a text bar drew (tqdm redraws a line after a carriage return)."""
    return [frame.strip() for frame in re.split(r"[\r\n]+", text) if frame.strip()]


class TestWhenShown:
    def test_explicit_settings_are_obeyed(self, monkeypatch):
        monkeypatch.setenv("CI", "true")
        assert progress_bar_enabled(True) is True
        monkeypatch.setattr(sys, "stderr", _Terminal())
        assert progress_bar_enabled(False) is False

    def test_auto_is_on_in_a_terminal_and_off_in_ci(self, monkeypatch):
        monkeypatch.setattr(sys, "stderr", _Terminal())
        monkeypatch.delenv("CI", raising=False)
        assert progress_bar_enabled(None) is True
        monkeypatch.setenv("CI", "true")
        assert progress_bar_enabled(None) is False
        monkeypatch.setenv("CI", "0")  # CI=0 / false: not CI
        assert progress_bar_enabled(None) is True

    def test_auto_is_off_when_stderr_is_a_file_or_pipe(self, monkeypatch):
        monkeypatch.delenv("CI", raising=False)
        monkeypatch.setattr(sys, "stderr", io.StringIO())
        assert progress_bar_enabled(None) is False

    def test_auto_is_on_in_a_jupyter_kernel_whose_stderr_is_no_terminal(self, monkeypatch):
        monkeypatch.delenv("CI", raising=False)
        monkeypatch.setattr(sys, "stderr", io.StringIO())
        monkeypatch.setattr(progress, "in_jupyter_kernel", lambda: True)
        assert progress_bar_enabled(None) is True

    def test_a_plain_python_process_is_no_kernel(self):
        assert progress.in_jupyter_kernel() is False

    def test_run_config_refuses_a_non_bool(self):
        with pytest.raises(ValueError, match=r"progress_bar must be True, False or None .*given: 'yes'"):
            ee.RunConfig(progress_bar="yes")
        assert ee.RunConfig().replace(progress_bar=True).progress_bar is True

    @pytest.mark.parametrize("kwargs, message", [
        ({"total": -1}, "total must be an integer >= 0 or None, given: -1"),
        ({"num_steps": 2.5}, "num_steps must be an integer >= 0 or None, given: 2.5"),
        ({"interval": -1}, "interval must be a number of seconds >= 0, given: -1"),
    ])
    def test_hook_arguments_are_checked(self, kwargs, message):
        with pytest.raises(ValueError, match=re.escape(message)):
            ProgressBarHook(**kwargs)


class TestTrain:
    def test_bar_shows_steps_total_rate_and_the_final_loss(self, tmp_path, data, monkeypatch, caplog):
        terminal = _Terminal()
        monkeypatch.setattr(sys, "stderr", terminal)
        est = _estimator(tmp_path)
        with caplog.at_level(logging.INFO, logger="estimator_engine"):
            est.train(_train_fn(data), max_steps=40, progress_bar=True)
        final_loss = float(re.search(r"Loss for final step: (\S+)\.", caplog.text).group(1))
        last = _frames(terminal.getvalue())[-1]
        assert last.startswith("train: 100%")
        assert "40/40" in last and "step/s" in last
        assert f"loss={final_loss:.4g}" in last

    def test_resumed_training_counts_global_steps_from_the_checkpoint(self, tmp_path, data, monkeypatch):
        est = _estimator(tmp_path)
        est.train(_train_fn(data), steps=10, progress_bar=False)
        terminal = _Terminal()
        monkeypatch.setattr(sys, "stderr", terminal)
        est.train(_train_fn(data), steps=5, progress_bar=True)
        frames = _frames(terminal.getvalue())
        assert frames[0].startswith("train:") and "10/15" in frames[0]
        assert "15/15" in frames[-1]

    def test_config_setting_and_per_call_override(self, tmp_path, data, monkeypatch):
        terminal = _Terminal()
        monkeypatch.setattr(sys, "stderr", terminal)
        est = _estimator(tmp_path, progress_bar=True)
        est.train(_train_fn(data), steps=3, progress_bar=False)
        assert "train:" not in terminal.getvalue()
        est.train(_train_fn(data), steps=3)
        assert "6/6" in _frames(terminal.getvalue())[-1]

    def test_off_by_default_when_stderr_is_not_a_terminal(self, tmp_path, data, capfd, monkeypatch):
        monkeypatch.delenv("CI", raising=False)
        est = _estimator(tmp_path)
        est.train(_train_fn(data), steps=3)
        assert "step/s" not in capfd.readouterr().err
        assert not any(type(h).__name__ == "ProgressBarHook"
                       for h in ee.default_training_hooks(est.config, est.model_dir, steps=3)[1])

    def test_bar_is_a_chief_only_default_hook(self):
        hooks, chief = ee.default_training_hooks(ee.RunConfig(), "/tmp/m", max_steps=100, progress_bar=True)
        assert [type(h).__name__ for h in chief][-1] == "ProgressBarHook"
        assert "ProgressBarHook" not in [type(h).__name__ for h in hooks]

    def test_the_loop_calls_the_bar_only_when_it_refreshes(self, tmp_path, data, monkeypatch):
        monkeypatch.setattr(sys, "stderr", _Terminal())
        calls = []
        original = ProgressBarHook.after_run

        def counting(self, run_context, run_values):
            calls.append(run_context.session.global_step)
            original(self, run_context, run_values)

        monkeypatch.setattr(ProgressBarHook, "after_run", counting)
        est = _estimator(tmp_path)
        est.train(_train_fn(data), steps=50, hooks=[ProgressBarHook(num_steps=50, interval=3600)],
                  progress_bar=False)  # only the hook given here
        assert calls == [1]  # the first step; the next refresh is an hour away


class TestEvaluateAndPredict:
    def test_evaluate_counts_batches(self, tmp_path, data, monkeypatch):
        est = _estimator(tmp_path)
        est.train(_train_fn(data), steps=5, progress_bar=False)
        terminal = _Terminal()
        monkeypatch.setattr(sys, "stderr", terminal)
        results = est.evaluate(_eval_fn(data), progress_bar=True)
        text = terminal.getvalue()
        assert "evaluate:" in text and "8batch" in text  # 64 rows in batches of 8
        assert results["global_step"] == 5

    def test_evaluate_with_steps_has_a_total(self, tmp_path, data, monkeypatch):
        est = _estimator(tmp_path)
        est.train(_train_fn(data), steps=5, progress_bar=False)
        terminal = _Terminal()
        monkeypatch.setattr(sys, "stderr", terminal)
        est.evaluate(_eval_fn(data), steps=3, progress_bar=True)
        assert "3/3" in terminal.getvalue()

    def test_predict_counts_batches_and_yields_every_row(self, tmp_path, data, monkeypatch):
        est = _estimator(tmp_path)
        est.train(_train_fn(data), steps=5, progress_bar=False)
        terminal = _Terminal()
        monkeypatch.setattr(sys, "stderr", terminal)
        rows = list(est.predict(_eval_fn(data, labels=False), progress_bar=True))
        assert len(rows) == 64
        assert "predict:" in terminal.getvalue() and "8batch" in terminal.getvalue()

    def test_no_bar_when_off(self, tmp_path, data, monkeypatch):
        est = _estimator(tmp_path)
        est.train(_train_fn(data), steps=5, progress_bar=False)
        terminal = _Terminal()
        monkeypatch.setattr(sys, "stderr", terminal)
        est.evaluate(_eval_fn(data), progress_bar=False)
        list(est.predict(_eval_fn(data, labels=False), progress_bar=False))
        assert terminal.getvalue() == ""


class TestLogging:
    def test_tf_info_messages_at_log_step_count_steps(self, tmp_path, data, caplog):
        est = _estimator(tmp_path, log_step_count_steps=10, save_checkpoints_steps=20)
        with caplog.at_level(logging.INFO, logger="estimator_engine"):
            est.train(_train_fn(data), max_steps=20, progress_bar=False)
        messages = [r.getMessage() for r in caplog.records if r.name.startswith("estimator_engine")]
        steps = [int(m.group(1)) for m in map(re.compile(r"loss = \S+, step = (\d+)").match, messages) if m]
        # The first step, then every 10, with the global step before each step's increment: TF's
        # LoggingTensorHook prints 'loss = ..., step = 0' first.
        assert steps == [0, 10]
        assert sum(m.startswith("global_step/sec: ") for m in messages) == 1  # measured between 2 triggers
        model_dir = str(tmp_path / "model")
        assert f"Saving checkpoints for 0 into {model_dir}/model.ckpt." in messages
        assert f"Saving checkpoints for 20 into {model_dir}/model.ckpt." in messages
        assert re.fullmatch(r"Loss for final step: \S+\.", messages[-1])

    def test_silent_at_the_default_warning_level_as_in_tf2(self, tmp_path):
        code = textwrap.dedent(f"""
            import logging
            import estimator_engine as ee
            from estimator_engine.testing import linear_model_fn, make_linear_data
            f, y = make_linear_data(n=32)
            est = ee.Estimator(linear_model_fn, model_dir={str(tmp_path / 'm')!r}, params={{}},
                               config=ee.RunConfig(log_step_count_steps=1))
            est.train(ee.inputs.numpy_input_fn({{"x": f["x"].numpy()}}, y.numpy(), batch_size=8, shuffle=True), steps=3)
            print(logging.getLogger("estimator_engine").getEffectiveLevel(), "tqdm.auto" in __import__("sys").modules)
        """)
        env = {**os.environ, "PYTHONPATH": os.getcwd(), "OMP_NUM_THREADS": "1"}
        env.pop("CI", None)
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180,
                              env=env, cwd=tmp_path)
        assert done.returncode == 0, done.stderr[-2000:]
        assert done.stdout.split() == [str(logging.WARNING), "False"]  # and no bar: stderr is a pipe
        assert done.stderr == ""
