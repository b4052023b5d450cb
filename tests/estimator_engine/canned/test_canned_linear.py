"""LinearClassifier / LinearRegressor: TF's exact-number case, variable names, training, errors."""

from __future__ import annotations

import numpy as np
import pytest

import estimator_engine as ee
from estimator_engine import feature_column as fc
from estimator_engine.canned.linear import LinearClassifier, LinearRegressor
from estimator_engine.canned.optimizers import Ftrl, default_linear_learning_rate


def test_regressor_evaluation_for_simple_data_matches_tf(tmp_path):
    # linear_testing_utils.py::BaseLinearRegressorEvaluationTest::test_evaluation_for_simple_data
    ee.checkpoints.create_checkpoint(str(tmp_path), {"linear/linear_model/age/weights": [[11.0]],
                                                     "linear/linear_model/bias_weights": [2.0]},
                                     global_step=100)
    est = LinearRegressor(feature_columns=[fc.numeric_column("age")], model_dir=str(tmp_path))
    result = est.evaluate(ee.inputs.numpy_input_fn({"age": np.array([[1.0]])}, np.array([[10.0]]),
                                                   shuffle=False), steps=1)
    assert result == pytest.approx({"loss": 9.0, "average_loss": 9.0, "prediction/mean": 13.0,
                                    "label/mean": 10.0, "global_step": 100})
    (p,) = est.predict(ee.inputs.numpy_input_fn({"age": np.array([[1.0]])}, shuffle=False))
    np.testing.assert_allclose(p["predictions"], [13.0])


def test_default_ftrl_learning_rate():
    assert default_linear_learning_rate(1, 0.2) == 0.2
    assert default_linear_learning_rate(100, 0.2) == pytest.approx(0.1)
    assert default_linear_learning_rate(4, 0.005) == 0.005


def test_classifier_trains_with_categorical_and_numeric_columns(tmp_path):
    rng = np.random.default_rng(0)
    color = rng.choice(["red", "green", "blue"], size=200)
    size = rng.normal(size=(200, 1)).astype(np.float32)
    y = ((color == "red") | (size[:, 0] > 1)).astype(np.int64)[:, None]
    cols = [fc.categorical_column_with_vocabulary_list("color", ["red", "green", "blue"]),
            fc.numeric_column("size")]
    est = LinearClassifier(feature_columns=cols, model_dir=str(tmp_path))
    features = {"color": color.astype(object), "size": size}
    est.train(ee.inputs.numpy_input_fn(features, y, batch_size=50, shuffle=True, num_epochs=None), steps=60)
    shapes = dict(ee.checkpoints.list_variables(est.latest_checkpoint()))
    assert shapes["linear/linear_model/color/weights"] == [3, 1]
    assert shapes["linear/linear_model/size/weights"] == [1, 1]
    assert shapes["linear/linear_model/bias_weights"] == [1]
    result = est.evaluate(ee.inputs.numpy_input_fn(features, y, shuffle=False))
    assert result["accuracy"] > 0.8
    assert result["auc"] > 0.8
    red = est.get_variable_value("linear/linear_model/color/weights")[0, 0]
    green = est.get_variable_value("linear/linear_model/color/weights")[1, 0]
    assert red > green


def test_multi_class_with_vocabulary_and_weights(tmp_path):
    x = np.array([[0.0], [1.0], [2.0]] * 10, dtype=np.float32)
    y = np.array(["a", "b", "c"] * 10, dtype=object)
    w = np.ones((30, 1), dtype=np.float32)
    est = LinearClassifier(feature_columns=[fc.numeric_column("x")], n_classes=3, label_vocabulary=["a", "b", "c"],
                           weight_column="w", model_dir=str(tmp_path), optimizer="Adam")
    est.train(ee.inputs.numpy_input_fn({"x": x, "w": w}, y, batch_size=30, shuffle=False, num_epochs=None), steps=5)
    assert est.get_variable_value("linear/linear_model/x/weights").shape == (1, 3)
    with pytest.raises(ValueError, match=r"Labels must be in label_vocabulary.*'z'"):
        est.evaluate(ee.inputs.numpy_input_fn({"x": x[:1], "w": w[:1]}, np.array(["z"], dtype=object),
                                               shuffle=False))


def test_errors():
    with pytest.raises(ValueError, match="sparse_combiner must be one of"):
        LinearRegressor(feature_columns=[fc.numeric_column("x")], sparse_combiner="max")
    with pytest.raises(ValueError, match="feature_columns must be a non-empty list"):
        LinearRegressor(feature_columns=None)
    with pytest.raises(ValueError, match="n_classes must be > 2"):
        LinearClassifier(feature_columns=[fc.numeric_column("x")], n_classes=1)


def test_ftrl_optimizer_is_the_default(tmp_path):
    est = LinearRegressor(feature_columns=[fc.numeric_column("x")], model_dir=str(tmp_path))
    est.train(ee.inputs.numpy_input_fn({"x": np.ones((4, 1))}, np.ones((4, 1)), shuffle=False), steps=1)
    # One FTRL step from zero weights: w = -z / (sqrt(n) / lr), z = g, n = 0.1 + g^2, lr = 0.2.
    g = -2.0  # d/dw mean((w*x + b - y)^2) at w = b = 0, x = y = 1
    n = 0.1 + g * g
    expected = -g / (np.sqrt(n) / 0.2)  # z = g - (sqrt(n) - sqrt(0.1)) / lr * w, and w = 0
    assert est.get_variable_value("linear/linear_model/x/weights")[0, 0] == pytest.approx(expected, rel=1e-6)
    assert type(est) is LinearRegressor and Ftrl.__name__ == "Ftrl"
