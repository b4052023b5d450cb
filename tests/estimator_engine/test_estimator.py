"""Behaviour of Estimator.train / evaluate / predict, with TF's rules and messages."""

from __future__ import annotations

import functools
import logging
import os
import random
import shutil

import numpy as np
import pytest
import torch

import estimator_engine as ee
from estimator_engine import checkpoints
from estimator_engine.testing import RecordingHook, linear_model_fn, make_linear_data


def _linear_input_fn(n=64, batch_size=16, num_epochs=None, shuffle=True, seed=0):
    x, y = make_linear_data(n=n, seed=seed)
    return ee.inputs.numpy_input_fn(x, y, batch_size=batch_size, num_epochs=num_epochs, shuffle=shuffle)


def _estimator(tmp_path, **config):
    config.setdefault("tf_random_seed", 1)
    return ee.Estimator(linear_model_fn, model_dir=str(tmp_path / "model"), params={},
                        config=ee.RunConfig(**config))


class TestConstructor:
    def test_model_fn_required(self):
        with pytest.raises(ValueError, match="model_fn must be provided to Estimator"):
            ee.Estimator(None)

    def test_model_fn_needs_features(self):
        with pytest.raises(ValueError, match="must include features argument"):
            ee.Estimator(lambda labels, mode: None)

    def test_params_without_params_argument(self):
        with pytest.raises(ValueError, match="does not include params argument, but params"):
            ee.Estimator(lambda features, labels, mode: None, params={"a": 1})

    def test_unexpected_arguments(self):
        with pytest.raises(ValueError, match=r"has following not expected args: \['other'\]"):
            ee.Estimator(lambda features, other: None)

    def test_config_type(self):
        with pytest.raises(ValueError, match="config must be an instance of `RunConfig`"):
            ee.Estimator(lambda features: None, config={"model_dir": "x"})

    def test_config_checked_before_model_fn(self, tmp_path):
        with pytest.raises(ValueError, match="config must be an instance of `RunConfig`"):
            ee.Estimator(None, config={"model_dir": "x"})
        with pytest.raises(ValueError, match="are set both in constructor and `RunConfig`"):
            ee.Estimator(None, model_dir=str(tmp_path / "a"), config=ee.RunConfig(model_dir=str(tmp_path / "b")))

    def test_export_savedmodel_is_gone_as_in_tf2(self, tmp_path):
        est = _estimator(tmp_path)
        with pytest.raises(AttributeError, match=r"^`Estimator.export_savedmodel` has been deprecated. "
                                                 r"Please use `export_saved_model` instead.$"):
            est.export_savedmodel(str(tmp_path / "export"), lambda: None)
        assert not hasattr(est, "export_savedmodel")

    def test_model_dir_conflict(self, tmp_path):
        with pytest.raises(ValueError, match="are set both in constructor and `RunConfig`, but with different values"):
            ee.Estimator(lambda features: None, model_dir=str(tmp_path / "a"),
                         config=ee.RunConfig(model_dir=str(tmp_path / "b")))

    def test_model_dir_resolution(self, tmp_path):
        from_config = ee.Estimator(lambda features: None, config=ee.RunConfig(model_dir=str(tmp_path / "c")))
        assert from_config.model_dir == str(tmp_path / "c")
        assert from_config.config.model_dir == str(tmp_path / "c")
        temporary = ee.Estimator(lambda features: None, model_dir="")
        assert os.path.isdir(temporary.model_dir)
        shutil.rmtree(temporary.model_dir)

    def test_params_are_deep_copied(self, tmp_path):
        params = {"nested": {"a": 1}}
        est = ee.Estimator(lambda features, params: None, model_dir=str(tmp_path), params=params)
        params["nested"]["a"] = 2
        assert est.params == {"nested": {"a": 1}}
        est.params["nested"]["a"] = 3
        assert est.params == {"nested": {"a": 1}}

    def test_partial_and_callable_model_fns(self, tmp_path):
        def model_fn(features, labels, mode, params, scale):
            return linear_model_fn(features, labels, mode, params)

        ee.Estimator(functools.partial(model_fn, scale=2), model_dir=str(tmp_path), params={})

        class Callable:
            def __call__(self, features, labels, mode):
                return linear_model_fn(features, labels, mode, {})

        est = ee.Estimator(Callable(), model_dir=str(tmp_path / "c"))
        est.train(_linear_input_fn(), steps=2)
        assert est.get_variable_value("global_step") == 2

    def test_subclass_cannot_override_members(self):
        class Bad(ee.Estimator):
            def train(self, *args, **kwargs):
                return self

        with pytest.raises(ValueError, match=r"Subclasses of Estimator cannot override members of Estimator.*\['train'\]"):
            Bad(linear_model_fn, params={})

    def test_model_fn_property_has_fixed_signature(self, tmp_path):
        est = _estimator(tmp_path)
        assert ee.estimator.fn_args(est.model_fn) == ("features", "labels", "mode", "config")


class TestTrain:
    def test_steps_and_max_steps_exclusive(self, tmp_path):
        with pytest.raises(ValueError, match="Can not provide both steps and max_steps"):
            _estimator(tmp_path).train(_linear_input_fn(), steps=1, max_steps=2)

    @pytest.mark.parametrize("kwargs, message", [
        ({"steps": 0}, r"Must specify steps > 0, given: 0"),
        ({"max_steps": -1}, r"Must specify max_steps > 0, given: -1"),
        ({"steps": 2.5}, r"Must specify steps as a whole number > 0, given: 2.5"),
        ({"max_steps": "3"}, r"Must specify max_steps as a whole number > 0, given: '3'"),
    ])
    def test_positive_steps(self, tmp_path, kwargs, message):
        with pytest.raises(ValueError, match=message):
            _estimator(tmp_path).train(_linear_input_fn(), **kwargs)

    def test_numpy_and_whole_float_step_counts_work_as_in_tf(self, tmp_path):
        est = _estimator(tmp_path)
        est.train(_linear_input_fn(), steps=np.int64(3)).train(_linear_input_fn(), steps=2.0)
        est.train(_linear_input_fn(), max_steps=np.int32(7))
        assert est.get_variable_value("global_step") == 7
        assert est.evaluate(_linear_input_fn(), steps=np.int64(2))["global_step"] == 7
        assert ee.TrainSpec(_linear_input_fn(), max_steps=np.int64(5)).max_steps == 5
        assert type(ee.EvalSpec(_linear_input_fn(), steps=np.int64(5)).steps) is int

    def test_steps_are_incremental(self, tmp_path):
        est = _estimator(tmp_path)
        est.train(_linear_input_fn(), steps=5).train(_linear_input_fn(), steps=5)
        assert est.get_variable_value("global_step") == 10

    def test_max_steps_is_absolute_and_then_a_no_op(self, tmp_path):
        est = _estimator(tmp_path)
        est.train(_linear_input_fn(), max_steps=7)
        assert est.get_variable_value("global_step") == 7
        calls = []

        def input_fn():
            calls.append(1)
            return _linear_input_fn()()

        assert est.train(input_fn, max_steps=7) is est
        assert calls == []
        est.train(_linear_input_fn(), max_steps=9)
        assert est.get_variable_value("global_step") == 9

    def test_input_exhaustion_ends_training(self, tmp_path):
        est = _estimator(tmp_path)
        est.train(_linear_input_fn(n=64, batch_size=16, num_epochs=2), steps=100)
        assert est.get_variable_value("global_step") == 8

    def test_no_steps_made_warns(self, tmp_path, caplog):
        est = _estimator(tmp_path)
        with caplog.at_level(logging.WARNING, logger="estimator_engine"):
            est.train(lambda: iter([]), steps=3)
        assert "made no steps" in caplog.text

    def test_hook_type_checks(self, tmp_path):
        est = _estimator(tmp_path)
        with pytest.raises(TypeError, match="Hooks must be a SessionRunHook, given"):
            est.train(_linear_input_fn(), steps=1, hooks=[object()])
        with pytest.raises(TypeError, match="saving_listeners must be a list of CheckpointSaverListener"):
            est.train(_linear_input_fn(), steps=1, saving_listeners=[object()])

    def test_listeners_need_a_checkpoint_saver(self, tmp_path):
        est = _estimator(tmp_path, save_checkpoints_secs=None, save_checkpoints_steps=None)
        with pytest.raises(ValueError, match="There should be a CheckpointSaverHook to use saving_listeners"):
            est.train(_linear_input_fn(), steps=1, saving_listeners=[ee.CheckpointSaverListener()])

    def test_learns_known_linear_function(self, tmp_path):
        est = _estimator(tmp_path)
        est.train(_linear_input_fn(n=256, batch_size=32), steps=400)
        weight = est.get_variable_value("linear/weight")
        bias = est.get_variable_value("linear/bias")
        np.testing.assert_allclose(weight, [[2.0]], atol=1e-3)
        np.testing.assert_allclose(bias, [3.0], atol=1e-3)

    def test_model_fn_without_labels(self, tmp_path):
        def model_fn(features, mode):
            return linear_model_fn(features, None, mode, {})

        est = ee.Estimator(model_fn, model_dir=str(tmp_path))
        with pytest.raises(ValueError, match="model_fn does not take labels, but input_fn returns labels"):
            est.train(_linear_input_fn(), steps=1)

    def test_model_fn_must_return_spec(self, tmp_path):
        est = ee.Estimator(lambda features, labels: {"loss": 1}, model_dir=str(tmp_path))
        with pytest.raises(ValueError, match="model_fn should return an EstimatorSpec"):
            est.train(_linear_input_fn(), steps=1)

    def test_get_module_outside_estimator(self):
        with pytest.raises(RuntimeError, match="must be called inside a model_fn"):
            ee.get_module("x", lambda: torch.nn.Linear(1, 1))

    def test_global_step_visible_in_model_fn(self, tmp_path):
        seen = []

        def model_fn(features, labels, mode, params):
            seen.append(ee.get_global_step())
            return linear_model_fn(features, labels, mode, params)

        ee.Estimator(model_fn, model_dir=str(tmp_path), params={}).train(_linear_input_fn(), steps=3)
        assert seen == [0, 1, 2]
        assert ee.get_global_step() is None


class TestCheckpoints:
    def test_initial_and_final_checkpoint_with_relative_paths(self, tmp_path):
        est = _estimator(tmp_path)
        est.train(_linear_input_fn(), steps=5)
        state = (tmp_path / "model" / "checkpoint").read_text()
        assert 'model_checkpoint_path: "model.ckpt-5"' in state
        assert 'all_model_checkpoint_paths: "model.ckpt-0"' in state
        assert est.latest_checkpoint() == str(tmp_path / "model" / "model.ckpt-5")

    def test_schedule_and_pruning(self, tmp_path):
        est = _estimator(tmp_path, save_checkpoints_steps=2, keep_checkpoint_max=3)
        est.train(_linear_input_fn(), steps=9)
        names = [os.path.basename(p) for p in checkpoints.all_checkpoints(est.model_dir)]
        assert names == ["model.ckpt-6", "model.ckpt-8", "model.ckpt-9"]
        on_disk = sorted(p for p in os.listdir(est.model_dir) if p.startswith("model.ckpt-"))
        assert on_disk == ["model.ckpt-6", "model.ckpt-8", "model.ckpt-9"]

    def test_listener_order_and_stop(self, tmp_path):
        events = []

        class Listener(ee.CheckpointSaverListener):
            def begin(self):
                events.append("begin")

            def before_save(self, session, step):
                events.append(f"before_save {step}")

            def after_save(self, session, step):
                events.append(f"after_save {step}")
                return step >= 4

            def end(self, session, step):
                events.append(f"end {step}")

        est = _estimator(tmp_path, save_checkpoints_steps=2)
        est.train(_linear_input_fn(), steps=100, saving_listeners=[Listener()])
        assert est.get_variable_value("global_step") == 4
        assert events == ["begin", "before_save 0", "after_save 0", "before_save 2", "after_save 2",
                          "before_save 4", "after_save 4", "end 4"]

    def test_moved_model_dir_resumes(self, tmp_path):
        est = _estimator(tmp_path)
        est.train(_linear_input_fn(), steps=3)
        moved = tmp_path / "moved"
        shutil.move(est.model_dir, moved)
        again = ee.Estimator(linear_model_fn, model_dir=str(moved), params={})
        again.train(_linear_input_fn(), steps=2)
        assert again.get_variable_value("global_step") == 5

    def test_shape_mismatch_names_the_variable(self, tmp_path):
        est = _estimator(tmp_path)
        est.train(_linear_input_fn(), steps=1)

        def wider(features, labels, mode):
            net = ee.get_module("linear", lambda: torch.nn.Linear(1, 2))
            loss = net(features["x"]).sum()
            opt = ee.get_optimizer("sgd", lambda: torch.optim.SGD(net.parameters(), lr=0.1))
            return ee.EstimatorSpec(mode, loss=loss, train_op=ee.minimize(opt, loss))

        with pytest.raises(ee.CheckpointError, match="linear/weight"):
            ee.Estimator(wider, model_dir=est.model_dir).train(_linear_input_fn(), steps=1)

    def test_variables_require_a_checkpoint(self, tmp_path):
        est = _estimator(tmp_path)
        with pytest.raises(ValueError, match="Could not find trained model in model_dir"):
            est.get_variable_names()
        est.train(_linear_input_fn(), steps=1)
        assert est.get_variable_names() == ["global_step", "linear/bias", "linear/weight"]

    def test_create_checkpoint_pins_known_weights(self, tmp_path):
        checkpoints.create_checkpoint(str(tmp_path), {"linear/weight": [[2.0]], "linear/bias": [3.0]}, 100)
        est = ee.Estimator(linear_model_fn, model_dir=str(tmp_path), params={})
        result = est.evaluate(_linear_input_fn(num_epochs=1))
        assert result["global_step"] == 100
        assert result["loss"] == pytest.approx(0.0, abs=1e-10)


    def test_unused_checkpoint_variables_are_reported_once_per_checkpoint(self, tmp_path, caplog):
        checkpoints.create_checkpoint(str(tmp_path), {"linear/weight": [[2.0]], "linear/bias": [3.0],
                                                      "old_head/weight": [[1.0]]}, 100)
        est = ee.Estimator(linear_model_fn, model_dir=str(tmp_path), params={})
        x, _ = make_linear_data(n=8)
        with caplog.at_level(logging.INFO, logger="estimator_engine"):
            for _ in range(3):  # later calls reuse the cached model: nothing new to report
                est.evaluate(_linear_input_fn(num_epochs=1))
                list(est.predict(ee.inputs.numpy_input_fn(x, batch_size=4, shuffle=False)))
        reports = [r.getMessage() for r in caplog.records if "not used by the model" in r.getMessage()]
        assert len(reports) == 1 and "['old_head/weight']" in reports[0]


def _dropout_model_fn(features, labels, mode, params):
    net = ee.get_module("net", lambda: torch.nn.Sequential(
        torch.nn.Linear(1, 16), torch.nn.ReLU(), torch.nn.Dropout(0.3), torch.nn.Linear(16, 1)))
    predictions = net(features["x"])
    loss = torch.nn.functional.mse_loss(predictions, labels)
    opt = ee.get_optimizer("adam", lambda: torch.optim.Adam(net.parameters(), lr=0.01))
    return ee.EstimatorSpec(mode, loss=loss, train_op=ee.minimize(opt, loss))


class TestResume:
    def test_resume_is_bit_identical_to_one_call(self, tmp_path):
        """N steps, a new Estimator (as after a restart), N more == 2N steps in one call."""
        input_fn = _linear_input_fn(n=100, batch_size=16, shuffle=True)  # 100/16: epochs cross batches
        config = ee.RunConfig(tf_random_seed=7)
        whole = ee.Estimator(_dropout_model_fn, model_dir=str(tmp_path / "whole"), params={}, config=config)
        whole.train(input_fn, steps=20)
        first = ee.Estimator(_dropout_model_fn, model_dir=str(tmp_path / "split"), params={}, config=config)
        first.train(input_fn, steps=10)
        torch.manual_seed(1234)  # disturb the global RNG between the calls, as another program would
        second = ee.Estimator(_dropout_model_fn, model_dir=str(tmp_path / "split"), params={}, config=config)
        second.train(input_fn, steps=10)
        names = whole.get_variable_names()
        assert names == second.get_variable_names()
        for name in names:
            np.testing.assert_array_equal(whole.get_variable_value(name), second.get_variable_value(name))


    def test_python_random_stream_continues_from_a_tensor_state(self, tmp_path):
        draws = []

        def model_fn(features, labels, mode, params):
            draws.append(random.random())
            return linear_model_fn(features, labels, mode, params)

        def estimator(name):
            return ee.Estimator(model_fn, model_dir=str(tmp_path / name), params={},
                                config=ee.RunConfig(tf_random_seed=3))

        estimator("whole").train(_linear_input_fn(), steps=6)
        whole, draws[:] = list(draws), []
        estimator("split").train(_linear_input_fn(), steps=3)
        random.seed(99)  # another program's draws between the calls
        estimator("split").train(_linear_input_fn(), steps=3)
        assert draws == whole and len(set(whole)) == 6
        # Stored as one int64 tensor (quick to load with weights_only), not 625 Python ints.
        saved = checkpoints.load_checkpoint(estimator("split").latest_checkpoint())["rng"]["python"]
        assert isinstance(saved[1], torch.Tensor) and saved[1].dtype == torch.int64 and saved[1].numel() == 625

    def test_checkpoints_with_the_python_rng_state_as_a_list_still_restore(self):
        from estimator_engine import estimator as estimator_module

        state = estimator_module._rng_state()
        expected = [random.random() for _ in range(3)]
        version, internal, gauss = state["python"]
        legacy = {**state, "python": [version, internal.tolist(), gauss]}
        estimator_module._set_rng_state(legacy)
        assert [random.random() for _ in range(3)] == expected

    def test_resumed_call_does_not_rewrite_the_checkpoint_it_restored(self, tmp_path, monkeypatch):
        """A resumed call's first save (the starting step) is the restored file itself: no write,
        but its listeners still see the save, and the run resumes exactly (test above)."""
        est = _estimator(tmp_path, save_checkpoints_steps=100)
        est.train(_linear_input_fn(), steps=3)
        saved = []
        real_save = checkpoints.save_checkpoint
        monkeypatch.setattr(checkpoints, "save_checkpoint",
                            lambda directory, state, step, **kw: saved.append(step) or real_save(directory, state, step, **kw))

        class Listener(ee.CheckpointSaverListener):
            steps: list = []

            def after_save(self, session, global_step_value):
                self.steps.append(global_step_value)

        ee.Estimator(linear_model_fn, model_dir=est.model_dir, params={},
                     config=est.config).train(_linear_input_fn(), steps=2, saving_listeners=[Listener()])
        assert saved == [5] and Listener.steps == [3, 5]
        assert est.latest_checkpoint().endswith("model.ckpt-5")

    def test_a_finite_input_starts_over_on_every_train_call(self, tmp_path):
        """TF runs input_fn afresh on each call: an epoch loop trains one epoch per call (4, 8, 12),
        and train(steps=3) on a 4-batch epoch gives 3, 6, 9, not 3, 4, 4."""
        est = _estimator(tmp_path / "epochs")
        one_epoch = _linear_input_fn(n=64, batch_size=16, num_epochs=1)
        steps = [est.train(one_epoch).get_variable_value("global_step") for _ in range(3)]
        assert steps == [4, 8, 12]
        est = _estimator(tmp_path / "steps")
        steps = [est.train(one_epoch, steps=3).get_variable_value("global_step") for _ in range(3)]
        assert steps == [3, 6, 9]


class TestEvaluate:
    def test_metrics_over_all_examples_and_mean_batch_loss(self, tmp_path):
        checkpoints.create_checkpoint(str(tmp_path), {"linear/weight": [[1.0]], "linear/bias": [0.0]}, 3)
        est = ee.Estimator(linear_model_fn, model_dir=str(tmp_path), params={})
        x, y = make_linear_data(n=10)
        result = est.evaluate(ee.inputs.numpy_input_fn(x, y, batch_size=4, shuffle=False))
        errors = (x["x"] - y).squeeze(1)
        batch_losses = [float((errors[i:i + 4] ** 2).mean()) for i in (0, 4, 8)]
        assert result["loss"] == pytest.approx(np.mean(batch_losses), rel=1e-6)
        assert result["mae"] == pytest.approx(float(errors.abs().mean()), rel=1e-6)
        assert result["global_step"] == 3

    def test_steps_limits_batches(self, tmp_path):
        checkpoints.create_checkpoint(str(tmp_path), {"linear/weight": [[1.0]], "linear/bias": [0.0]}, 1)
        hook = RecordingHook()
        est = ee.Estimator(linear_model_fn, model_dir=str(tmp_path), params={})
        est.evaluate(_linear_input_fn(num_epochs=None), steps=3, hooks=[hook])
        assert hook.calls.count("before_run") == 3

    def test_writes_results_for_early_stopping(self, tmp_path):
        est = _estimator(tmp_path)
        est.train(_linear_input_fn(), steps=4)
        est.evaluate(_linear_input_fn(num_epochs=1))
        est.evaluate(_linear_input_fn(num_epochs=1), name="holdout")
        assert os.path.isdir(est.eval_dir("holdout"))
        results = ee.read_eval_metrics(est.eval_dir())
        assert list(results) == [4]
        assert set(results[4]) >= {"loss", "mae"}

    def test_reserved_metric_names(self, tmp_path):
        def model_fn(features, labels, mode):
            spec = linear_model_fn(features, labels, mode, {})
            return spec._replace(eval_metric_ops={"loss": ee.metrics.mean(spec.loss)})

        est = ee.Estimator(model_fn, model_dir=str(tmp_path))
        with pytest.raises(ValueError, match='Metric with name "loss" is not allowed'):
            est.evaluate(_linear_input_fn(num_epochs=1))

    def test_nested_metric_values_are_numpy_at_every_level(self, tmp_path):
        """TF's evaluate returns numpy values however a metric's value is nested (tuple, dict, list)."""
        checkpoints.create_checkpoint(str(tmp_path), {"linear/weight": [[1.0]], "linear/bias": [0.0]}, 3)

        def model_fn(features, labels, mode):
            spec = linear_model_fn(features, labels, mode, {})
            errors = (features["x"] - labels).abs().reshape(-1)  # weight 1, bias 0: predictions = x
            nested = ee.MetricOp({"total": errors.sum(), "count": torch.tensor(float(errors.numel())),
                                  "top": torch.stack([errors.sum(), errors.sum() * 2])},
                                 lambda s: (s["total"] / s["count"], {"top": s["top"], "as_list": [s["count"]]}))
            return spec._replace(eval_metric_ops={**spec.eval_metric_ops, "nested": nested})

        est = ee.Estimator(model_fn, model_dir=str(tmp_path))
        x, y = make_linear_data(n=10)
        result = est.evaluate(ee.inputs.numpy_input_fn(x, y, batch_size=4, shuffle=False))
        mean, inner = result["nested"]
        errors = np.abs(np.asarray(x["x"]) - np.asarray(y)).reshape(-1)
        assert isinstance(mean, float) and mean == pytest.approx(float(errors.mean()), rel=1e-6)
        assert isinstance(inner["top"], np.ndarray)
        np.testing.assert_allclose(inner["top"], [errors.sum(), 2 * errors.sum()], rtol=1e-6)
        assert inner["as_list"] == [10.0]

    def test_without_checkpoint_uses_initialisation(self, tmp_path, caplog):
        est = _estimator(tmp_path)
        with caplog.at_level(logging.INFO, logger="estimator_engine"):
            result = est.evaluate(_linear_input_fn(num_epochs=1))
        assert result["global_step"] == 0
        assert "running initialization to evaluate" in caplog.text

    def test_checkpoint_path_and_cache(self, tmp_path, monkeypatch):
        est = _estimator(tmp_path, save_checkpoints_steps=2)
        est.train(_linear_input_fn(), steps=4)
        loads = []
        real_load = checkpoints.load_checkpoint
        monkeypatch.setattr(checkpoints, "load_checkpoint", lambda *a, **k: loads.append(a) or real_load(*a, **k))
        first = est.evaluate(_linear_input_fn(num_epochs=1))
        second = est.evaluate(_linear_input_fn(num_epochs=1))
        assert first == second and loads == []  # the trained model is reused while the checkpoint is unchanged
        older = est.evaluate(_linear_input_fn(num_epochs=1), checkpoint_path=os.path.join(est.model_dir, "model.ckpt-2"))
        assert older["global_step"] == 2 and len(loads) == 1
        est.train(_linear_input_fn(), steps=1)
        assert est.evaluate(_linear_input_fn(num_epochs=1))["global_step"] == 5


class TestPredict:
    def test_lazy_and_single_examples(self, tmp_path):
        est = _estimator(tmp_path)
        est.train(_linear_input_fn(), steps=2)
        calls = []
        x, _ = make_linear_data(n=5)

        def input_fn():
            calls.append(1)
            return ee.inputs.numpy_input_fn(x, batch_size=2, shuffle=False)()

        predictions = est.predict(input_fn)
        assert calls == []
        rows = list(predictions)
        assert calls == [1] and len(rows) == 5
        assert set(rows[0]) == {"y"} and rows[0]["y"].shape == (1,)

    def test_batches_and_keys(self, tmp_path):
        est = _estimator(tmp_path)
        x, _ = make_linear_data(n=5)
        batches = list(est.predict(ee.inputs.numpy_input_fn(x, batch_size=2, shuffle=False),
                                   yield_single_examples=False, predict_keys=["y"]))
        assert [b["y"].shape for b in batches] == [(2, 1), (2, 1), (1, 1)]
        with pytest.raises(ValueError, match="Expected to run at least one output from"):
            next(est.predict(ee.inputs.numpy_input_fn(x, shuffle=False), predict_keys=["nope"]))
        # As TF: no keys means every prediction; one key may be given as a string.
        assert set(next(est.predict(ee.inputs.numpy_input_fn(x, shuffle=False), predict_keys=[]))) == {"y"}
        assert set(next(est.predict(ee.inputs.numpy_input_fn(x, shuffle=False), predict_keys="y"))) == {"y"}

    def test_a_scalar_prediction_is_named(self, tmp_path):
        def model_fn(features, mode):
            return ee.EstimatorSpec(mode, predictions={"y": features["x"] * 2, "s": torch.tensor(5.0)})

        est = ee.Estimator(model_fn, model_dir=str(tmp_path))
        x = {"x": torch.arange(3.0).reshape(3, 1)}
        with pytest.raises(ValueError, match=r"Predictions \['s'\] have no batch dimension \(a scalar each\)"):
            next(est.predict(ee.inputs.numpy_input_fn(x, shuffle=False)))
        batch = next(est.predict(ee.inputs.numpy_input_fn(x, shuffle=False), yield_single_examples=False))
        assert float(batch["s"]) == 5.0

    def test_non_dict_predictions(self, tmp_path):
        def model_fn(features, mode):
            return ee.EstimatorSpec(mode, predictions=features["x"] * 2)

        est = ee.Estimator(model_fn, model_dir=str(tmp_path))
        x = {"x": torch.arange(3.0).reshape(3, 1)}
        assert [v.item() for v in est.predict(ee.inputs.numpy_input_fn(x, shuffle=False))] == [0.0, 2.0, 4.0]
        with pytest.raises(ValueError, match="predict_keys argument is not valid in case of non-dict predictions"):
            next(est.predict(ee.inputs.numpy_input_fn(x, shuffle=False), predict_keys=["a"]))

    def test_batch_length_mismatch(self, tmp_path):
        def model_fn(features, mode):
            return ee.EstimatorSpec(mode, predictions={"a": features["x"], "b": features["x"][:1]})

        est = ee.Estimator(model_fn, model_dir=str(tmp_path))
        x = {"x": torch.arange(3.0).reshape(3, 1)}
        with pytest.raises(ValueError, match=r"Batch length of predictions should be same\. b has different batch length"):
            next(est.predict(ee.inputs.numpy_input_fn(x, shuffle=False)))

    def test_hooks_run_once_per_batch(self, tmp_path):
        est = _estimator(tmp_path)
        hook = RecordingHook()
        x, _ = make_linear_data(n=3)
        predictions = est.predict(ee.inputs.numpy_input_fn(x, batch_size=2, shuffle=False), hooks=[hook])
        counts = []
        for _ in range(3):
            next(predictions)
            counts.append(hook.calls.count("before_run"))
        assert counts == [1, 1, 2]
        assert torch.is_grad_enabled()  # no_grad is not held across the generator's yields
        list(predictions)
        assert hook.calls[-1] == "end"


class TestHooks:
    def test_order_fetches_and_end(self, tmp_path):
        first = RecordingHook(fetches={"loss": "loss", "step": "global_step", "x": "features/x"}, tag="a:")
        second = RecordingHook(tag="b:")
        est = _estimator(tmp_path)
        est.train(_linear_input_fn(), steps=2, hooks=[first, second])
        assert first.calls == ["a:begin", "a:after_create_session", "a:before_run", "a:after_run",
                               "a:before_run", "a:after_run", "a:end"]
        assert [r["step"] for r in first.results] == [0, 1]  # before each step's increment, as in TF
        assert isinstance(first.results[0]["loss"], float)
        assert first.results[0]["x"].shape == (16, 1)

    def test_user_hooks_run_before_the_nan_hook(self, tmp_path):
        order = []

        class Spy(ee.NanTensorHook):
            def before_run(self, run_context):
                order.append("nan")
                return super().before_run(run_context)

        class User(ee.SessionRunHook):
            def before_run(self, run_context):
                order.append("user")

        hooks, _ = ee.default_training_hooks(ee.RunConfig(), "unused", steps=1)
        assert [type(h).__name__ for h in hooks] == ["StopAtStepHook", "NanTensorHook", "LoggingTensorHook"]
        _estimator(tmp_path).train(_linear_input_fn(), steps=1, hooks=[User(), Spy("loss")])
        assert order == ["user", "nan"]

    def test_request_stop(self, tmp_path):
        class StopAtThree(ee.SessionRunHook):
            def after_run(self, run_context, run_values):
                if run_context.session.global_step == 3:
                    run_context.request_stop()

        est = _estimator(tmp_path)
        est.train(_linear_input_fn(), hooks=[StopAtThree()])
        assert est.get_variable_value("global_step") == 3

    def test_exception_observed_end_called_and_reraised(self, tmp_path):
        hook = RecordingHook(tag="")

        class Boom(ee.SessionRunHook):
            def after_run(self, run_context, run_values):
                raise RuntimeError("boom")

        est = _estimator(tmp_path)
        with pytest.raises(RuntimeError, match="boom"):
            est.train(_linear_input_fn(), steps=5, hooks=[hook, Boom()])
        assert hook.calls[-2:] == ["on_exception", "end"]
        # No checkpoint is written from a failed step; the initial one survives.
        assert est.get_variable_value("global_step") == 0

    def test_one_lifecycle_for_evaluate_and_predict(self, tmp_path):
        """evaluate and predict observe a failure through on_exception, as train does (issue 12.9)."""
        est = _estimator(tmp_path)
        est.train(_linear_input_fn(), steps=1)

        class Boom(ee.SessionRunHook):
            def after_run(self, run_context, run_values):
                raise RuntimeError("boom")

        for verb in ("evaluate", "predict"):
            hook = RecordingHook(tag="")
            with pytest.raises(RuntimeError, match="boom"):
                if verb == "evaluate":
                    est.evaluate(_linear_input_fn(num_epochs=1), hooks=[hook, Boom()])
                else:
                    next(est.predict(_linear_input_fn(num_epochs=1), hooks=[hook, Boom()]))
            assert hook.calls == ["begin", "after_create_session", "before_run", "after_run",
                                  "on_exception", "end"], verb

    def test_predict_stopped_by_its_caller_ends_normally(self, tmp_path):
        hook = RecordingHook(tag="")
        predictions = _estimator(tmp_path).predict(_linear_input_fn(num_epochs=1), hooks=[hook])
        next(predictions)
        predictions.close()
        assert hook.calls == ["begin", "after_create_session", "before_run", "after_run", "end"]

    def test_nan_loss_fails_with_step(self, tmp_path):
        def model_fn(features, labels, mode):
            spec = linear_model_fn(features, labels, mode, {"learning_rate": 1e30})
            return spec

        est = ee.Estimator(model_fn, model_dir=str(tmp_path))
        with pytest.raises(ee.NanLossDuringTrainingError, match="NaN loss during training"):
            est.train(_linear_input_fn(), steps=50)

    def test_unknown_fetch_name(self, tmp_path):
        with pytest.raises(KeyError, match="Unknown fetch name 'nope'"):
            _estimator(tmp_path).train(_linear_input_fn(), steps=1, hooks=[RecordingHook(fetches="nope")])


class TestWarmStart:
    def test_warm_start_copies_weights_not_global_step(self, tmp_path):
        source = _estimator(tmp_path / "src")
        source.train(_linear_input_fn(), steps=10)
        target = ee.Estimator(linear_model_fn, model_dir=str(tmp_path / "dst"), params={"learning_rate": 0.0},
                              warm_start_from=source.model_dir)
        target.train(_linear_input_fn(), steps=5)
        assert target.get_variable_value("global_step") == 5
        np.testing.assert_array_equal(target.get_variable_value("linear/weight"),
                                      source.get_variable_value("linear/weight"))

    def test_model_dir_checkpoint_wins(self, tmp_path):
        source = _estimator(tmp_path / "src")
        source.train(_linear_input_fn(), steps=10)
        own = _estimator(tmp_path / "own")
        own.train(_linear_input_fn(), steps=1)
        before = own.get_variable_value("linear/weight")
        again = ee.Estimator(linear_model_fn, model_dir=own.model_dir, params={"learning_rate": 0.0},
                             warm_start_from=source.model_dir)
        again.train(_linear_input_fn(), steps=1)
        np.testing.assert_array_equal(again.get_variable_value("linear/weight"), before)

    def test_bad_warm_start_type(self):
        with pytest.raises(ValueError, match="warm_start_from must be a string or a WarmStartSettings"):
            ee.Estimator(linear_model_fn, params={}, warm_start_from=3)


def test_seed_example_runs(monkeypatch, capsys, tmp_path):
    import runpy
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the example's temporary model_dir
    root = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
    monkeypatch.chdir(root)
    runpy.run_path(os.path.join(root, "examples", "seed_example.py"), run_name="__main__")
    out = capsys.readouterr().out
    accuracy = float(out.split("'accuracy': ")[1].split(",")[0])
    assert accuracy > 0.9


class TestBackgroundCheckpointWrites:
    def test_snapshot_is_taken_at_save_time(self, tmp_path):
        initial = {}

        class Capture(ee.SessionRunHook):
            def after_create_session(self, session, coord=None):
                initial.update({k: v.clone() for k, v in session.state.variables().items()})

        est = _estimator(tmp_path)
        est.train(_linear_input_fn(), steps=50, hooks=[Capture()])
        saved = checkpoints.load_checkpoint(os.path.join(est.model_dir, "model.ckpt-0"))["variables"]
        assert set(saved) == set(initial)
        for name, value in initial.items():
            torch.testing.assert_close(saved[name], value, rtol=0, atol=0)
        assert not np.array_equal(est.get_variable_value("linear/weight"), initial["linear/weight"].numpy())

    def test_failed_write_is_raised_and_older_checkpoint_survives(self, tmp_path, monkeypatch):
        import errno

        real_save = checkpoints.save_checkpoint

        def disk_full_after_first(model_dir, state, global_step, **kwargs):
            if global_step > 0:
                raise OSError(errno.ENOSPC, "No space left on device")
            return real_save(model_dir, state, global_step, **kwargs)

        monkeypatch.setattr(checkpoints, "save_checkpoint", disk_full_after_first)
        est = _estimator(tmp_path, save_checkpoints_steps=3)
        with pytest.raises(OSError, match="No space left on device"):
            est.train(_linear_input_fn(), steps=10)
        monkeypatch.setattr(checkpoints, "save_checkpoint", real_save)
        assert est.latest_checkpoint().endswith("model.ckpt-0")
        assert est.get_variable_value("global_step") == 0


class TestInputFnAndSummaries:
    def test_input_fn_receives_declared_arguments(self, tmp_path):
        seen = []

        def input_fn(mode, params, config):
            seen.append((mode, params, config.model_dir))
            return _linear_input_fn()()

        est = ee.Estimator(linear_model_fn, model_dir=str(tmp_path), params={"learning_rate": 0.1})
        est.train(input_fn, steps=1)
        est.evaluate(input_fn, steps=1)
        list(zip(range(2), est.predict(input_fn)))
        assert [mode for mode, _, _ in seen] == [ee.ModeKeys.TRAIN, ee.ModeKeys.EVAL, ee.ModeKeys.PREDICT]
        assert all(params == {"learning_rate": 0.1} and model_dir == str(tmp_path) for _, params, model_dir in seen)

    def test_input_fn_tuple_of_wrong_length(self, tmp_path):
        est = _estimator(tmp_path)
        x, y = make_linear_data(n=4)
        with pytest.raises(ValueError, match="input_fn should return \\(features, labels\\) as a len 2 tuple"):
            est.train(lambda: (x, y, y), steps=1)

    def test_training_writes_loss_and_steps_per_second(self, tmp_path):
        from estimator_engine.summary import SummaryWriterCache, read_summaries

        est = _estimator(tmp_path, save_summary_steps=5, log_step_count_steps=5)
        est.train(_linear_input_fn(), steps=10)
        SummaryWriterCache.clear()
        lines = read_summaries(est.model_dir)
        loss_steps = [line["step"] for line in lines if line["tag"] == "loss"]
        assert loss_steps == [1, 6]  # TF's SummarySaverHook: the first step, then every N steps
        assert [line["step"] for line in lines if line["tag"] == "global_step/sec"] == [6]

    def test_eval_hooks_fetch_metric_values_so_far(self, tmp_path):
        checkpoints.create_checkpoint(str(tmp_path), {"linear/weight": [[1.0]], "linear/bias": [0.0]}, 1)
        hook = RecordingHook(fetches={"mae": "mae", "loss": "loss"})
        est = ee.Estimator(linear_model_fn, model_dir=str(tmp_path), params={})
        result = est.evaluate(_linear_input_fn(n=32, batch_size=8, num_epochs=1, shuffle=False), hooks=[hook])
        assert len(hook.results) == 4
        assert hook.results[-1]["mae"] == pytest.approx(result["mae"])


class TestChiefOnly:
    def test_non_chief_runs_no_chief_hooks_and_writes_no_checkpoints(self, tmp_path, monkeypatch):
        chief_hook = RecordingHook()

        def model_fn(features, labels, mode):
            spec = linear_model_fn(features, labels, mode, {})
            return spec._replace(training_chief_hooks=[chief_hook])

        monkeypatch.setenv("WORLD_SIZE", "2")
        monkeypatch.setenv("RANK", "1")
        # Only the chief logic is under test here; tests/estimator_engine/test_distribute.py runs real DDP.
        monkeypatch.setattr(ee.distribute, "strategy_for", lambda distribute: None)
        est = ee.Estimator(model_fn, model_dir=str(tmp_path))
        assert not est.config.is_chief and est.config.task_type == "worker"
        est.train(_linear_input_fn(), steps=3)
        assert chief_hook.calls == []
        assert est.latest_checkpoint() is None
        monkeypatch.setenv("RANK", "0")
        est.train(_linear_input_fn(), steps=3)
        assert chief_hook.calls[:2] == ["begin", "after_create_session"]
        assert est.get_variable_value("global_step") == 3


class TestNanPolicy:
    def test_user_nan_hook_can_stop_instead_of_fail(self, tmp_path):
        def model_fn(features, labels, mode):
            return linear_model_fn(features, labels, mode, {"learning_rate": 1e30})

        est = ee.Estimator(model_fn, model_dir=str(tmp_path))
        nan_hook = ee.NanTensorHook("loss", fail_on_nan_loss=False)
        est.train(_linear_input_fn(), steps=50, hooks=[nan_hook])  # no NanLossDuringTrainingError
        assert nan_hook.last_finite_loss is not None and 0 < nan_hook.diverged_at < 50
        # The diverged step's NaN weights are not checkpointed: the newest checkpoint is the one
        # before it (here the initial one), every value finite, and evaluate starts from it.
        saved = est.get_variable_value("global_step")
        assert saved < nan_hook.diverged_at
        assert all(np.isfinite(est.get_variable_value(n)).all() for n in est.get_variable_names())
        assert np.isfinite(est.evaluate(_linear_input_fn(), steps=1)["loss"])


def test_checkpoint_write_failure_stops_training_soon(tmp_path, monkeypatch):
    """The initial checkpoint fails in the background; training stops within a few steps, not at
    the next save (here: the end of training, 600 s of save interval)."""
    import errno

    def disk_full(model_dir, state, global_step, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    steps = []

    class Watch(ee.SessionRunHook):
        def after_run(self, run_context, run_values):
            steps.append(run_context.session.global_step)

    monkeypatch.setattr(checkpoints, "save_checkpoint", disk_full)
    est = _estimator(tmp_path)  # default RunConfig: save at start, every 600 s and at the end
    with pytest.raises(OSError, match="No space left on device"):
        est.train(_linear_input_fn(), steps=20000, hooks=[Watch()])
    assert len(steps) < 10000
