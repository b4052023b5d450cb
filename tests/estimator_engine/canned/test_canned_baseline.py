"""BaselineClassifier / BaselineRegressor: a bias that learns the prior / label mean."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch

import estimator_engine as ee
from estimator_engine.canned.baseline import BaselineClassifier, BaselineRegressor


def test_regressor_evaluates_loaded_bias(tmp_path):
    ee.checkpoints.create_checkpoint(str(tmp_path), {"baseline/bias": [13.0]}, global_step=100)
    est = BaselineRegressor(model_dir=str(tmp_path))
    result = est.evaluate(ee.inputs.numpy_input_fn({"age": np.array([[1.0]])}, np.array([[10.0]]),
                                                   shuffle=False))
    assert result == pytest.approx({"loss": 9.0, "average_loss": 9.0, "prediction/mean": 13.0,
                                    "label/mean": 10.0, "global_step": 100})


def test_regressor_learns_the_label_mean(tmp_path):
    y = np.array([[1.0], [2.0], [3.0], [6.0]], dtype=np.float32)
    est = BaselineRegressor(model_dir=str(tmp_path), optimizer=functools.partial(torch.optim.SGD, lr=0.2))
    est.train(ee.inputs.numpy_input_fn({"x": np.zeros((4, 1))}, y, batch_size=4, shuffle=False,
                                       num_epochs=None), steps=100)
    assert est.get_variable_value("baseline/bias") == pytest.approx([3.0], abs=1e-3)


def test_classifier_learns_the_prior(tmp_path):
    y = np.array(["cat", "dog", "dog", "bird"] * 5, dtype=object)
    est = BaselineClassifier(model_dir=str(tmp_path), n_classes=3, label_vocabulary=["bird", "cat", "dog"],
                             optimizer=functools.partial(torch.optim.SGD, lr=1.0))
    features = {"x": np.zeros((20, 1))}
    est.train(ee.inputs.numpy_input_fn(features, y, batch_size=20, shuffle=False, num_epochs=None), steps=200)
    (p,) = list(est.predict(ee.inputs.numpy_input_fn({"x": np.zeros((1, 1))}, shuffle=False)))
    np.testing.assert_allclose(p["probabilities"], [0.25, 0.25, 0.5], atol=1e-3)
    assert p["classes"].tolist() == [b"dog"]
    assert est.get_variable_value("baseline/bias").shape == (3,)


def test_binary_classifier_with_default_ftrl(tmp_path):
    est = BaselineClassifier(model_dir=str(tmp_path))
    fn = ee.inputs.numpy_input_fn({"x": np.zeros((8, 1))}, np.array([[1]] * 6 + [[0]] * 2), shuffle=False)
    est.train(fn, steps=3)
    result = est.evaluate(fn)
    assert result["label/mean"] == pytest.approx(0.75)
    assert result["accuracy_baseline"] == pytest.approx(0.75)
    assert result["prediction/mean"] > 0.5


def test_errors(tmp_path):
    with pytest.raises(ValueError, match="n_classes must be > 2"):
        BaselineClassifier(n_classes=1)
    est = BaselineRegressor(model_dir=str(tmp_path))
    with pytest.raises(ValueError, match="Batch size of all features must be the same"):
        est.train(lambda: ({"a": torch.zeros(2, 1), "b": torch.zeros(3, 1)}, torch.zeros(2, 1)), steps=1)
