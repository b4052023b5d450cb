"""Values from inside model_fn: trainable_variables, named tensors, summaries, TensorBoard files."""

from __future__ import annotations

import glob
import logging
import os

import numpy as np
import pytest
import torch

import estimator_engine as ee
from estimator_engine.summary import SummaryWriterCache, read_summaries
from estimator_engine.testing import RecordingHook

ROWS, BATCH = 12, 4


def _inputs(num_epochs=None):
    x = torch.arange(ROWS, dtype=torch.float32).reshape(ROWS, 1)
    return ee.inputs.numpy_input_fn({"x": x}, 2 * x, batch_size=BATCH, shuffle=False, num_epochs=num_epochs)


@pytest.fixture(autouse=True)
def _fresh_writers():
    yield
    SummaryWriterCache.clear()


def _two_module_model_fn(optimizer_params):
    def model_fn(features, labels, mode):
        encoder = ee.get_module("encoder", lambda: torch.nn.Linear(1, 1))
        head = ee.get_module("head", lambda: torch.nn.Linear(1, 1))
        frozen = ee.get_module("frozen", lambda: torch.nn.Linear(1, 1).requires_grad_(False))
        loss = torch.nn.functional.mse_loss(head(encoder(features["x"])) + 0 * frozen(features["x"]), labels)
        optimizer = ee.get_optimizer("sgd", lambda: torch.optim.SGD(optimizer_params(), lr=1e-3))
        return ee.EstimatorSpec(mode, loss=loss, train_op=ee.minimize(optimizer, loss))
    return model_fn


class TestTrainableVariables:
    def test_every_module_trains_and_frozen_ones_are_left_out(self, tmp_path):
        seen = []

        def params():
            seen.append(len(ee.trainable_variables()))
            return ee.trainable_variables()

        est = ee.Estimator(_two_module_model_fn(params), model_dir=str(tmp_path))
        est.train(_inputs(), steps=2)
        assert seen == [4]  # encoder and head weight + bias; frozen has requires_grad=False
        initial = ee.checkpoints.load_checkpoint(os.path.join(str(tmp_path), "model.ckpt-0"))["variables"]
        for name in ("encoder/weight", "head/weight", "frozen/weight"):
            changed = not np.allclose(est.get_variable_value(name), initial[name].numpy())
            assert changed == (name != "frozen/weight"), name

    def test_warns_when_an_optimizer_misses_a_module(self, tmp_path, caplog):
        est = ee.Estimator(_two_module_model_fn(
            lambda: ee.model_state._active.unwrapped("head").parameters()), model_dir=str(tmp_path))
        with caplog.at_level(logging.WARNING, logger="estimator_engine"):
            est.train(_inputs(), steps=1)
        assert "Modules ['encoder'] have trainable parameters that no optimizer updates" in caplog.text

    def test_outside_an_estimator(self):
        with pytest.raises(RuntimeError, match=r"ee\.trainable_variables must be called inside a model_fn"):
            ee.trainable_variables()


def _named_model_fn(features, labels, mode):
    net = ee.get_module("net", lambda: torch.nn.Linear(1, 1))
    predictions = net(features["x"])
    # Batch i of the input holds x = 4i..4i+3: its mean is 4i + 1.5, known in every mode.
    ee.identity(features["x"].mean(), name="batch_mean")
    ee.summary.scalar("batch_mean_summary", features["x"].mean())
    if mode == ee.ModeKeys.PREDICT:
        return ee.EstimatorSpec(mode, predictions={"y": predictions})
    loss = torch.nn.functional.mse_loss(predictions, labels)
    optimizer = ee.get_optimizer("sgd", lambda: torch.optim.SGD(ee.trainable_variables(), lr=0.0))
    return ee.EstimatorSpec(mode, loss=loss, train_op=ee.minimize(optimizer, loss))


class TestNamedTensors:
    def test_hooks_fetch_a_named_value_in_every_mode(self, tmp_path, caplog):
        est = ee.Estimator(_named_model_fn, model_dir=str(tmp_path))
        train_hook = RecordingHook(fetches={"m": "batch_mean", "s": "summaries"})
        with caplog.at_level(logging.INFO, logger="estimator_engine"):
            est.train(_inputs(), steps=3, hooks=[train_hook, ee.LoggingTensorHook(["batch_mean"], every_n_iter=1)])
        assert [r["m"] for r in train_hook.results] == [1.5, 5.5, 9.5]
        assert train_hook.results[0]["s"] == {"batch_mean_summary": 1.5}
        assert "batch_mean = 5.5" in caplog.text
        eval_hook = RecordingHook(fetches="batch_mean")
        est.evaluate(_inputs(num_epochs=1), hooks=[eval_hook])
        assert eval_hook.results == [1.5, 5.5, 9.5]
        predict_hook = RecordingHook(fetches="batch_mean")
        list(est.predict(_inputs(num_epochs=1), hooks=[predict_hook]))
        assert predict_hook.results == [1.5, 5.5, 9.5]

    def test_a_name_holds_only_for_the_call_that_made_it(self, tmp_path):
        def model_fn(features, labels, mode):
            if features["x"][0, 0] == 0:  # only the first batch names it
                ee.identity(torch.tensor(7.0), name="first_only")
            return _named_model_fn(features, labels, mode)

        hook = RecordingHook(fetches="first_only")
        with pytest.raises(KeyError, match=r"Unknown fetch name 'first_only'.*ee.identity\(value, name=...\)"):
            ee.Estimator(model_fn, model_dir=str(tmp_path)).train(_inputs(), steps=2, hooks=[hook])
        assert hook.results == [7.0]

    def test_outside_an_estimator_identity_returns_the_value(self):
        value = torch.ones(2)
        assert ee.identity(value, name="v") is value
        with pytest.raises(ValueError, match="name must be a non-empty string, given ''"):
            ee.identity(value, name="")


class TestModelFnSummaries:
    def test_train_summaries_next_to_the_loss(self, tmp_path):
        est = ee.Estimator(_named_model_fn, model_dir=str(tmp_path), config=ee.RunConfig(save_summary_steps=2))
        est.train(_inputs(), steps=4)
        SummaryWriterCache.clear()
        written = {(r["tag"], r["step"]): r["value"] for r in read_summaries(str(tmp_path)) if "value" in r}
        # Steps 1 and 3 are written (the first step always, then every 2): batches 0 and 2.
        assert written[("batch_mean_summary", 1)] == 1.5
        assert written[("batch_mean_summary", 3)] == 9.5
        assert ("batch_mean_summary", 2) not in written and ("loss", 3) in written

    def test_eval_summaries_are_the_mean_over_batches(self, tmp_path):
        est = ee.Estimator(_named_model_fn, model_dir=str(tmp_path))
        est.train(_inputs(), steps=1)
        result = est.evaluate(_inputs(num_epochs=1))
        assert "batch_mean_summary" not in result  # evaluate returns metrics only, as TF
        SummaryWriterCache.clear()
        assert ee.read_eval_metrics(est.eval_dir())[1]["batch_mean_summary"] == pytest.approx(5.5)

    def test_rejects_non_scalars(self):
        with pytest.raises(ValueError, match=r"summary.scalar\('m', data\): data must hold one number, given a value of 3"):
            ee.summary.scalar("m", torch.ones(3))
        assert ee.summary.scalar("m", torch.ones(())) is None  # outside an Estimator: recorded nowhere


class TestTensorBoard:
    def test_event_files_read_back_by_tensorboard(self, tmp_path):
        event_accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
        est = ee.Estimator(_named_model_fn, model_dir=str(tmp_path),
                           config=ee.RunConfig(save_summary_steps=1, log_step_count_steps=1))
        est.train(_inputs(), steps=3)
        est.evaluate(_inputs(num_epochs=1))
        SummaryWriterCache.clear()
        assert glob.glob(os.path.join(str(tmp_path), "events.out.tfevents.*"))

        def scalars(logdir):
            accumulator = event_accumulator.EventAccumulator(logdir)
            accumulator.Reload()
            return {tag: [(e.step, e.value) for e in accumulator.Scalars(tag)]
                    for tag in accumulator.Tags()["scalars"]}

        train = scalars(str(tmp_path))
        assert {"loss", "global_step/sec", "batch_mean_summary"} <= set(train)
        assert [step for step, _ in train["loss"]] == [1, 2, 3]
        assert train["batch_mean_summary"] == [(1, 1.5), (2, 5.5), (3, 9.5)]
        evaluation = scalars(est.eval_dir())
        assert evaluation["batch_mean_summary"] == [(3, pytest.approx(5.5))]
        assert [step for step, _ in evaluation["loss"]] == [3]
