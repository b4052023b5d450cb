"""The evaluate/predict reuse of a built model is indistinguishable from a fresh build (issue 12.1).

Rule: a reused ``ModelState`` is exactly what restoring the newest checkpoint into a fresh build
gives: every module the mode's ``model_fn`` asks for is restored (a missing one raises TF's error),
nothing outside the checkpoint carries over, and ``checkpoint_path`` names the checkpoint evaluated.
Each test compares against a new Estimator on the same ``model_dir`` (TF's behaviour: every call
rebuilds the graph and restores the checkpoint).
"""

from __future__ import annotations

import os

import pytest
import torch

import estimator_engine as ee
from estimator_engine import checkpoints
from estimator_engine.summary import read_summaries

ROWS, BATCH = 12, 4  # three evaluation batches


def _inputs(num_epochs=1):
    x = torch.arange(ROWS, dtype=torch.float32).reshape(ROWS, 1)
    return ee.inputs.numpy_input_fn({"x": x}, x.clone(), batch_size=BATCH, shuffle=False, num_epochs=num_epochs)


class _BufferCounter(torch.nn.Module):
    """Counts forward calls in a non-persistent buffer: state that no checkpoint holds."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(1))
        self.register_buffer("calls", torch.zeros(()), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return x * self.weight * 0 + self.calls


class _AttributeCounter(torch.nn.Module):
    """Counts forward calls in a plain Python attribute (metric scratch kept on the module)."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(1))
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return x * self.weight * 0 + self.calls


def _counting_model_fn(module_type):
    def model_fn(features, labels, mode):
        net = ee.get_module("net", module_type)
        loss = net(features["x"]).mean()
        if mode == ee.ModeKeys.PREDICT:
            return ee.EstimatorSpec(mode, predictions={"y": net(features["x"])})
        optimizer = ee.get_optimizer("sgd", lambda: torch.optim.SGD(net.parameters(), lr=0.0))
        return ee.EstimatorSpec(mode, loss=loss, train_op=ee.minimize(optimizer, loss))
    return model_fn


@pytest.mark.parametrize("module_type", [_BufferCounter, _AttributeCounter])
def test_state_outside_the_checkpoint_does_not_carry_over(tmp_path, module_type):
    model_fn = _counting_model_fn(module_type)
    est = ee.Estimator(model_fn, model_dir=str(tmp_path))
    est.train(_inputs(num_epochs=None), steps=2)
    # A fresh build counts 1, 2, 3 over the three batches: mean 2.0, on every call.
    assert est.evaluate(_inputs())["loss"] == pytest.approx(2.0)
    assert est.evaluate(_inputs())["loss"] == pytest.approx(2.0)
    assert ee.Estimator(model_fn, model_dir=str(tmp_path)).evaluate(_inputs())["loss"] == pytest.approx(2.0)
    # predict counts two forward calls per batch (loss and predictions): 2, 4, 6 on a fresh build.
    first = [p["y"].item() for p in est.predict(_inputs())]
    assert first[::BATCH] == [2.0, 4.0, 6.0]
    assert [p["y"].item() for p in est.predict(_inputs())] == first


def test_unchanged_modules_are_still_reused(tmp_path, monkeypatch):
    """The speed-up stays where equality holds: no reload, no rebuild of provably unchanged modules."""
    built = []

    def model_fn(features, labels, mode):
        net = ee.get_module("net", lambda: built.append(1) or _BufferCounter())
        loss = net(features["x"]).mean()
        if mode == ee.ModeKeys.EVAL:  # an optimizer asked for in EVAL is restored again, as in TF
            return ee.EstimatorSpec(mode, loss=loss)
        optimizer = ee.get_optimizer("sgd", lambda: torch.optim.SGD(net.parameters(), lr=0.0))
        return ee.EstimatorSpec(mode, loss=loss, train_op=ee.minimize(optimizer, loss))

    est = ee.Estimator(model_fn, model_dir=str(tmp_path))
    est.train(_inputs(num_epochs=None), steps=2)
    loads = []
    real_load = checkpoints.load_checkpoint
    monkeypatch.setattr(checkpoints, "load_checkpoint", lambda *a, **k: loads.append(a) or real_load(*a, **k))
    assert [est.evaluate(_inputs())["loss"] for _ in range(3)] == [2.0, 2.0, 2.0]
    assert built == [1] and loads == []


def test_module_only_predict_asks_for_raises_as_a_new_estimator_does(tmp_path):
    def model_fn(features, labels, mode):
        net = ee.get_module("net", lambda: torch.nn.Linear(1, 1))
        if mode == ee.ModeKeys.PREDICT:
            head = ee.get_module("predict_head", lambda: torch.nn.Linear(1, 1))
            return ee.EstimatorSpec(mode, predictions={"y": head(net(features["x"]))})
        loss = torch.nn.functional.mse_loss(net(features["x"]), labels)
        optimizer = ee.get_optimizer("sgd", lambda: torch.optim.SGD(net.parameters(), lr=0.01))
        return ee.EstimatorSpec(mode, loss=loss, train_op=ee.minimize(optimizer, loss))

    est = ee.Estimator(model_fn, model_dir=str(tmp_path))
    est.train(_inputs(num_epochs=None), steps=2)
    message = (r"variables of the model missing from the checkpoint .*model\.ckpt-2: "
               r"\['predict_head/bias', 'predict_head/weight'\]")
    with pytest.raises(ee.CheckpointError, match=message):
        next(ee.Estimator(model_fn, model_dir=str(tmp_path)).predict(_inputs()))
    with pytest.raises(ee.CheckpointError, match=message):
        next(est.predict(_inputs()))


def test_an_optimizer_asked_for_in_eval_comes_back_from_the_checkpoint(tmp_path):
    """An optimizer the EVAL model_fn asks for is the checkpoint's (3 Adam steps, lr 0.1) at the
    start of every call, as on a new Estimator: the change each batch makes to it is not carried
    over to the next call."""
    seen = []  # (lr, Adam's step count) at each EVAL batch

    def model_fn(features, labels, mode):
        net = ee.get_module("net", lambda: torch.nn.Linear(1, 1))
        optimizer = ee.get_optimizer("adam", lambda: torch.optim.Adam(net.parameters(), lr=0.1))
        loss = torch.nn.functional.mse_loss(net(features["x"]), labels)
        if mode == ee.ModeKeys.EVAL:
            state = optimizer.state.get(net.weight, {})
            seen.append((optimizer.param_groups[0]["lr"], float(state.get("step", 0))))
            optimizer.param_groups[0]["lr"] *= 10  # scratch change: in no checkpoint
            return ee.EstimatorSpec(mode, loss=loss)
        return ee.EstimatorSpec(mode, loss=loss, train_op=ee.minimize(optimizer, loss))

    est = ee.Estimator(model_fn, model_dir=str(tmp_path))
    est.train(_inputs(num_epochs=None), steps=3)
    fresh = ee.Estimator(model_fn, model_dir=str(tmp_path)).evaluate(_inputs())
    reused = [est.evaluate(_inputs()) for _ in range(2)]
    batches = ROWS // BATCH
    assert [seen[i] for i in range(0, len(seen), batches)] == [(pytest.approx(0.1), 3.0)] * 3
    assert [r["loss"] for r in reused] == [fresh["loss"]] * 2


def test_in_place_change_of_a_parameter_is_not_kept(tmp_path):
    """A model_fn that edits a weight in EVAL sees the checkpoint's weight again on the next call."""
    def model_fn(features, labels, mode):
        net = ee.get_module("net", lambda: torch.nn.Linear(1, 1, bias=False))
        loss = torch.nn.functional.mse_loss(net(features["x"]), labels)
        if mode == ee.ModeKeys.EVAL:
            with torch.no_grad():
                net.weight.add_(1.0)
        optimizer = ee.get_optimizer("sgd", lambda: torch.optim.SGD(net.parameters(), lr=0.0))
        return ee.EstimatorSpec(mode, loss=loss, train_op=ee.minimize(optimizer, loss))

    checkpoints.create_checkpoint(str(tmp_path), {"net/weight": [[1.0]]}, 1)
    est = ee.Estimator(model_fn, model_dir=str(tmp_path))
    expected = ee.Estimator(model_fn, model_dir=str(tmp_path)).evaluate(_inputs())["loss"]
    assert est.evaluate(_inputs())["loss"] == pytest.approx(expected)
    assert est.evaluate(_inputs())["loss"] == pytest.approx(expected)
    est2 = ee.Estimator(model_fn, model_dir=str(tmp_path / "trained"))
    est2.train(_inputs(num_epochs=None), steps=1)
    after_train = est2.evaluate(_inputs())["loss"]
    assert est2.evaluate(_inputs())["loss"] == pytest.approx(after_train)


def _summary_checkpoint_paths(eval_dir):
    return [r["text"] for r in read_summaries(eval_dir) if r["tag"] == "checkpoint_path"]


def test_eval_summaries_name_the_checkpoint_evaluated(tmp_path):
    est = ee.Estimator(_counting_model_fn(_BufferCounter), model_dir=str(tmp_path))
    est.train(_inputs(num_epochs=None), steps=2)  # fresh
    est.evaluate(_inputs())
    est.train(_inputs(num_epochs=None), steps=3)  # resumed
    est.evaluate(_inputs())
    ee.summary.SummaryWriterCache.clear()
    assert _summary_checkpoint_paths(est.eval_dir()) == [
        os.path.join(os.path.abspath(str(tmp_path)), "model.ckpt-2"),
        os.path.join(os.path.abspath(str(tmp_path)), "model.ckpt-5"),
    ]


def test_evaluate_results_are_readable_at_once_without_an_fsync(tmp_path, monkeypatch):
    """Early stopping, exporters and TensorBoard read what evaluate wrote as soon as it returns;
    the fsync (TF pays one per evaluate) is left to the writer's periodic flush and close."""
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    est = ee.Estimator(_counting_model_fn(_BufferCounter), model_dir=str(tmp_path))
    est.train(_inputs(num_epochs=None), steps=2)
    synced = []
    monkeypatch.setattr(ee.summary.os, "fsync", synced.append)
    est.evaluate(_inputs())
    est.evaluate(_inputs())
    assert len(_summary_checkpoint_paths(est.eval_dir())) == 2 and synced == []
    accumulator = EventAccumulator(est.eval_dir())
    accumulator.Reload()
    assert [e.step for e in accumulator.Scalars("loss")] == [2, 2]
    ee.summary.SummaryWriterCache.clear()
    assert synced  # closing syncs
