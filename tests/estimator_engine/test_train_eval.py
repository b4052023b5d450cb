"""train_and_evaluate, TrainSpec and EvalSpec: TF's validation, cadence and return values."""

from __future__ import annotations

import os

import pytest
import torch

import estimator_engine as ee
from estimator_engine.export import build_raw_serving_input_receiver_fn
from estimator_engine.exporter import Exporter, LatestExporter
from estimator_engine.hooks import CheckpointSaverListener, SessionRunHook
from estimator_engine.testing import linear_model_fn, make_linear_data
from estimator_engine.train_eval import EvalSpec, TrainSpec, train_and_evaluate

FEATURES, LABELS = make_linear_data(n=256)


def train_input_fn():
    return ee.inputs.numpy_input_fn(FEATURES, LABELS, batch_size=32, shuffle=True, num_epochs=None)()


def eval_input_fn():
    return ee.inputs.numpy_input_fn(FEATURES, LABELS, batch_size=64, shuffle=False, num_epochs=1)()


class RecordingExporter(Exporter):
    def __init__(self, name="recording"):
        self._name = name
        self.calls = []

    @property
    def name(self):
        return self._name

    def export(self, estimator, export_path, checkpoint_path, eval_result, is_the_final_export):
        self.calls.append({"step": eval_result["global_step"], "final": is_the_final_export,
                           "checkpoint_path": checkpoint_path, "export_path": export_path})
        return f"export-{eval_result['global_step']}"


def make_estimator(tmp_path, config=None, **params):
    return ee.Estimator(linear_model_fn, model_dir=str(tmp_path / "model"), params=params,
                        config=config or ee.RunConfig(save_checkpoints_steps=10))


# -- TrainSpec / EvalSpec validation -----------------------------------------------------------


def test_train_spec_defaults_and_tuples():
    hook, listener = SessionRunHook(), CheckpointSaverListener()
    spec = TrainSpec(train_input_fn, max_steps=5, hooks=[hook], saving_listeners=[listener])
    assert spec.max_steps == 5 and spec.hooks == (hook,) and spec.saving_listeners == (listener,)
    assert TrainSpec(train_input_fn) == (train_input_fn, None, (), ())


@pytest.mark.parametrize("kwargs, error, match", [
    ({"input_fn": 1}, TypeError, "`input_fn` must be callable, given: 1"),
    ({"max_steps": 0}, ValueError, "Must specify max_steps > 0, given: 0"),
    ({"max_steps": -3}, ValueError, "Must specify max_steps > 0"),
    ({"hooks": [object()]}, TypeError, "All hooks must be `SessionRunHook` instances"),
    ({"saving_listeners": [object()]}, TypeError, "All saving_listeners must be `CheckpointSaverListener` instances"),
])
def test_train_spec_errors(kwargs, error, match):
    kwargs = {"input_fn": train_input_fn, **kwargs}
    with pytest.raises(error, match=match):
        TrainSpec(**kwargs)


def test_eval_spec_defaults():
    spec = EvalSpec(eval_input_fn)
    assert (spec.steps, spec.name, spec.hooks, spec.exporters, spec.start_delay_secs, spec.throttle_secs,
            spec.every_n_steps) == (100, None, (), (), 120, 600, None)
    exporter = RecordingExporter()
    assert EvalSpec(eval_input_fn, exporters=exporter).exporters == (exporter,)
    assert EvalSpec(eval_input_fn, start_delay_secs=0, throttle_secs=0, steps=None).throttle_secs == 0


class NamedExporter(RecordingExporter):
    def __init__(self, name):
        super().__init__()
        self._name = name


@pytest.mark.parametrize("kwargs, error, match", [
    ({"input_fn": "x"}, TypeError, "`input_fn` must be callable"),
    ({"steps": 0}, ValueError, "Must specify steps > 0, given: 0"),
    ({"name": 3}, TypeError, "`name` must be string, given: 3"),
    ({"hooks": [1]}, TypeError, "All hooks must be `SessionRunHook` instances"),
    ({"exporters": [1]}, TypeError, "`exporters` must be an Exporter, an iterable of Exporter, or `None`"),
    ({"exporters": 5}, TypeError, "`exporters` must be an Exporter, an iterable of Exporter, or `None`"),
    ({"exporters": [NamedExporter("")]}, ValueError, "An Exporter cannot have a name that is `None` or empty"),
    ({"exporters": [NamedExporter(None)]}, ValueError, "An Exporter cannot have a name that is `None` or empty"),
    ({"exporters": [NamedExporter(7)]}, ValueError, "An Exporter must have a string name"),
    ({"exporters": [NamedExporter("a"), NamedExporter("a")]}, ValueError, "`exporters` must have unique names"),
    ({"start_delay_secs": -1}, ValueError, "Must specify start_delay_secs >= 0, given: -1"),
    ({"throttle_secs": -1}, ValueError, "Must specify throttle_secs >= 0, given: -1"),
    ({"every_n_steps": 0}, ValueError, "Must specify every_n_steps > 0 or None, given: 0"),
])
def test_eval_spec_errors(kwargs, error, match):
    kwargs = {"input_fn": eval_input_fn, **kwargs}
    with pytest.raises(error, match=match):
        EvalSpec(**kwargs)


def test_train_and_evaluate_type_errors(tmp_path):
    est = make_estimator(tmp_path)
    train_spec, eval_spec = TrainSpec(train_input_fn, max_steps=1), EvalSpec(eval_input_fn)
    with pytest.raises(TypeError, match="`eval_spec` must have type `EvalSpec`"):
        train_and_evaluate(est, train_spec, object())
    with pytest.raises(TypeError, match="`estimator` must have type `Estimator`"):
        train_and_evaluate(object(), train_spec, eval_spec)
    with pytest.raises(TypeError, match="`train_spec` must have type `TrainSpec`"):
        train_and_evaluate(est, object(), eval_spec)


# -- TF's checkpoint-driven cadence (the reference's worked examples) ---------------------------


@pytest.mark.parametrize("max_steps, expected_steps", [(22, [10, 20, 22]), (12, [10, 12])])
def test_evaluates_on_checkpoints_after_the_first(tmp_path, max_steps, expected_steps):
    est = make_estimator(tmp_path)
    exporter = RecordingExporter()
    metrics, export_results = train_and_evaluate(
        est, TrainSpec(train_input_fn, max_steps=max_steps),
        EvalSpec(eval_input_fn, steps=None, throttle_secs=0, exporters=exporter))
    assert [c["step"] for c in exporter.calls] == expected_steps
    assert [c["final"] for c in exporter.calls] == [False] * (len(expected_steps) - 1) + [True]
    assert exporter.calls[-1]["checkpoint_path"].endswith(f"model.ckpt-{max_steps}")
    assert exporter.calls[0]["export_path"] == os.path.join(est.model_dir, "export", "recording")
    assert metrics["global_step"] == max_steps and set(metrics) == {"loss", "mae", "global_step"}
    assert export_results == [f"export-{max_steps}"]
    assert list(ee.read_eval_metrics(est.eval_dir())) == expected_steps
    assert metrics == est.evaluate(eval_input_fn, name="again")  # the last evaluation, of the last checkpoint


def test_default_config_evaluates_once_at_the_end(tmp_path):
    est = make_estimator(tmp_path, config=ee.RunConfig())  # saves every 600 s: only at start and end
    exporter = RecordingExporter()
    metrics, _ = train_and_evaluate(est, TrainSpec(train_input_fn, max_steps=12),
                                    EvalSpec(eval_input_fn, steps=2, exporters=exporter))
    assert metrics["global_step"] == 12
    assert [(c["step"], c["final"]) for c in exporter.calls] == [(12, True)]


def test_throttle_skips_checkpoints_but_the_last_step_is_evaluated(tmp_path):
    est = make_estimator(tmp_path, config=ee.RunConfig(save_checkpoints_steps=5))
    exporter = RecordingExporter()
    train_and_evaluate(est, TrainSpec(train_input_fn, max_steps=20),
                       EvalSpec(eval_input_fn, steps=1, throttle_secs=3600, exporters=exporter))
    assert [c["step"] for c in exporter.calls] == [5, 20]  # first candidate, then the end


def test_eval_name_hooks_and_no_max_steps(tmp_path):
    est = make_estimator(tmp_path)
    exporter, hook = RecordingExporter(), ee.testing.RecordingHook()

    def short_train_input_fn():  # 3 epochs of 8 batches: training ends with the input
        return ee.inputs.numpy_input_fn(FEATURES, LABELS, batch_size=32, shuffle=False, num_epochs=3)()

    metrics, _ = train_and_evaluate(est, TrainSpec(short_train_input_fn),
                                    EvalSpec(eval_input_fn, steps=None, name="holdout", hooks=[hook],
                                             throttle_secs=0, exporters=exporter))
    assert metrics["global_step"] == 24
    assert [c["final"] for c in exporter.calls] == [False, False, False]  # no max_steps: never final
    assert list(ee.read_eval_metrics(est.eval_dir("holdout"))) == [10, 20, 24]
    assert hook.calls.count("begin") == 3


def test_checkpointing_disabled_needs_every_n_steps(tmp_path):
    config = ee.RunConfig(save_checkpoints_steps=None, save_checkpoints_secs=None)
    est = make_estimator(tmp_path, config=config)
    with pytest.raises(ValueError, match="There should be a CheckpointSaverHook to use saving_listeners"):
        train_and_evaluate(est, TrainSpec(train_input_fn, max_steps=5), EvalSpec(eval_input_fn))


class StuckEstimator(ee.Estimator):
    """latest_checkpoint never moves past the first one: the second evaluation has nothing new."""

    def latest_checkpoint(self):
        path = super().latest_checkpoint()
        return path if path is None else os.path.join(self.model_dir, "model.ckpt-10")


def test_no_new_checkpoint_raises(tmp_path):
    est = StuckEstimator(linear_model_fn, model_dir=str(tmp_path), params={},
                         config=ee.RunConfig(save_checkpoints_steps=10, keep_checkpoint_max=None))
    with pytest.raises(RuntimeError, match=r"There was no new checkpoint after the training\. Eval status: no new checkpoint"):
        train_and_evaluate(est, TrainSpec(train_input_fn, max_steps=22),
                           EvalSpec(eval_input_fn, steps=1, throttle_secs=0))


def test_nothing_to_train_returns_none(tmp_path):
    est = make_estimator(tmp_path)
    est.train(train_input_fn, max_steps=5)
    assert train_and_evaluate(est, TrainSpec(train_input_fn, max_steps=5), EvalSpec(eval_input_fn)) == (None, None)


def global_rng_train_input_fn():
    while True:  # batches drawn from the global torch RNG, which evaluations must not move
        index = torch.randint(0, len(LABELS), (32,))
        yield {"x": FEATURES["x"][index]}, LABELS[index]


def global_rng_eval_input_fn():
    order = torch.randperm(len(LABELS))
    for start in range(0, len(LABELS), 64):
        index = order[start:start + 64]
        yield {"x": FEATURES["x"][index]}, LABELS[index]


def test_evaluation_does_not_disturb_training_rng(tmp_path):
    config = ee.RunConfig(save_checkpoints_steps=5, tf_random_seed=3)
    plain = ee.Estimator(linear_model_fn, model_dir=str(tmp_path / "plain"), params={}, config=config)
    plain.train(global_rng_train_input_fn, max_steps=20)
    for name, every_n_steps in (("listener", None), ("in_process", 3)):
        est = ee.Estimator(linear_model_fn, model_dir=str(tmp_path / name), params={}, config=config)
        train_and_evaluate(est, TrainSpec(global_rng_train_input_fn, max_steps=20),
                           EvalSpec(global_rng_eval_input_fn, steps=None, throttle_secs=0, every_n_steps=every_n_steps))
        assert len(ee.read_eval_metrics(est.eval_dir())) > 2
        for variable in ("linear/weight", "linear/bias"):
            assert est.get_variable_value(variable) == plain.get_variable_value(variable), name


# -- in-process evaluation (every_n_steps) ------------------------------------------------------


def test_every_n_steps_evaluates_live_model_without_checkpoints(tmp_path):
    config = ee.RunConfig(save_checkpoints_steps=None, save_checkpoints_secs=None)
    est = make_estimator(tmp_path, config=config)
    metrics, export_results = train_and_evaluate(
        est, TrainSpec(train_input_fn, max_steps=12), EvalSpec(eval_input_fn, steps=None, every_n_steps=5))
    assert list(ee.read_eval_metrics(est.eval_dir())) == [5, 10, 12]  # every 5 steps and at the end
    assert metrics["global_step"] == 12 and export_results == []
    assert est.latest_checkpoint() is None  # nothing saved or reloaded


def test_every_n_steps_matches_checkpoint_evaluation(tmp_path):
    # Saving at the same steps lets evaluate() of each checkpoint check the in-process numbers.
    est = make_estimator(tmp_path, config=ee.RunConfig(save_checkpoints_steps=4, keep_checkpoint_max=None))
    train_and_evaluate(est, TrainSpec(train_input_fn, max_steps=8), EvalSpec(eval_input_fn, steps=None, every_n_steps=4))
    live = ee.read_eval_metrics(est.eval_dir())
    for step in (4, 8):
        restored = est.evaluate(eval_input_fn, checkpoint_path=os.path.join(est.model_dir, f"model.ckpt-{step}"),
                                name="restored")
        assert live[step]["loss"] == pytest.approx(restored["loss"], rel=1e-6)
        assert live[step]["mae"] == pytest.approx(restored["mae"], rel=1e-6)


def dropout_model_fn(features, labels, mode, params):
    net = ee.get_module("net", lambda: torch.nn.Sequential(torch.nn.Linear(1, 1), torch.nn.Dropout(0.5)))
    params["modes"].append((str(mode), net.training))
    predictions = net(features["x"])
    loss = torch.nn.functional.mse_loss(predictions, labels)
    if mode == ee.ModeKeys.EVAL:
        return ee.EstimatorSpec(mode, loss=loss)
    optimizer = ee.get_optimizer("sgd", lambda: torch.optim.SGD(net.parameters(), lr=0.01))
    return ee.EstimatorSpec(mode, loss=loss, train_op=ee.minimize(optimizer, loss))


def test_every_n_steps_switches_modules_to_eval_and_back(tmp_path):
    class SharedList(list):
        def __deepcopy__(self, memo):  # the Estimator deep-copies params; keep one shared record
            return self

    modes = SharedList()
    est = ee.Estimator(dropout_model_fn, model_dir=str(tmp_path), params={"modes": modes},
                       config=ee.RunConfig(save_checkpoints_steps=None, save_checkpoints_secs=None))
    train_and_evaluate(est, TrainSpec(train_input_fn, max_steps=4), EvalSpec(eval_input_fn, steps=1, every_n_steps=2))
    assert modes == [("train", True), ("train", True), ("eval", False), ("train", True), ("train", True),
                     ("eval", False)]


def test_every_n_steps_exporters_get_a_checkpoint(tmp_path):
    config = ee.RunConfig(save_checkpoints_steps=None, save_checkpoints_secs=None)
    est = make_estimator(tmp_path, config=config)
    recording = RecordingExporter()
    latest = LatestExporter("latest", build_raw_serving_input_receiver_fn(FEATURES), exports_to_keep=2)
    _metrics, export_results = train_and_evaluate(
        est, TrainSpec(train_input_fn, max_steps=9), EvalSpec(eval_input_fn, steps=None, every_n_steps=3,
                                                             exporters=[recording, latest]))
    assert [(c["step"], c["final"]) for c in recording.calls] == [(3, False), (6, False), (9, True)]
    for call in recording.calls:
        assert call["checkpoint_path"].endswith(f"model.ckpt-{call['step']}")
    assert export_results[0] == "export-9" and os.path.isdir(export_results[1])
    assert len(os.listdir(os.path.join(est.model_dir, "export", "latest"))) == 2
    loaded = ee.export.load(export_results[1])
    predictions = next(est.predict(eval_input_fn, yield_single_examples=False))
    assert torch.allclose(loaded({"x": FEATURES["x"][:64]})["y"], torch.as_tensor(predictions["y"]), atol=1e-6)
