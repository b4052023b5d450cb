"""DNNLinearCombinedClassifier / Regressor: logits = dnn + linear, both variable sets, errors."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch

import estimator_engine as ee
from estimator_engine import feature_column as fc
from estimator_engine.canned.dnn_linear_combined import (
    DNNLinearCombinedClassifier,
    DNNLinearCombinedRegressor,
)

DNN_WEIGHTS = {
    "dnn/hiddenlayer_0/kernel": [[0.6, 0.5]], "dnn/hiddenlayer_0/bias": [0.1, -0.1],
    "dnn/hiddenlayer_1/kernel": [[1.0, 0.8], [-0.8, -1.0]], "dnn/hiddenlayer_1/bias": [0.2, -0.2],
    "dnn/logits/kernel": [[-1.0], [1.0]], "dnn/logits/bias": [0.3],
}
LINEAR_WEIGHTS = {"linear/linear_model/age/weights": [[11.0]], "linear/linear_model/bias_weights": [2.0]}


def _input(age, labels=None):
    return ee.inputs.numpy_input_fn({"age": np.array(age)}, None if labels is None else np.array(labels),
                                    shuffle=False)


def test_logits_are_the_sum_of_both_parts(tmp_path):
    ee.checkpoints.create_checkpoint(str(tmp_path), {**DNN_WEIGHTS, **LINEAR_WEIGHTS}, global_step=100)
    age = [fc.numeric_column("age")]
    est = DNNLinearCombinedRegressor(model_dir=str(tmp_path), linear_feature_columns=age,
                                     dnn_feature_columns=age, dnn_hidden_units=[2, 2])
    # dnn: -2.08 at age 10 (dnn_testing_utils); linear: 11 * 10 + 2 = 112
    (p,) = est.predict(_input([[10.0]]))
    np.testing.assert_allclose(p["predictions"], [109.92], rtol=1e-6)
    result = est.evaluate(_input([[10.0]], [[100.0]]))
    assert result["average_loss"] == pytest.approx(9.92 ** 2, rel=1e-5)
    assert result["global_step"] == 100


def test_linear_only_and_dnn_only(tmp_path):
    ee.checkpoints.create_checkpoint(str(tmp_path / "lin"), LINEAR_WEIGHTS, global_step=100)
    linear_only = DNNLinearCombinedRegressor(model_dir=str(tmp_path / "lin"),
                                             linear_feature_columns=[fc.numeric_column("age")])
    assert linear_only.evaluate(_input([[1.0]], [[10.0]]))["average_loss"] == pytest.approx(9.0)
    ee.checkpoints.create_checkpoint(str(tmp_path / "dnn"), DNN_WEIGHTS, global_step=100)
    dnn_only = DNNLinearCombinedClassifier(model_dir=str(tmp_path / "dnn"), dnn_hidden_units=[2, 2],
                                           dnn_feature_columns=[fc.numeric_column("age")])
    result = dnn_only.evaluate(_input([[10.0], [10.0]], [[1], [0]]))
    assert result["average_loss"] == pytest.approx(1.157721, abs=1e-5)
    assert result["auc"] == pytest.approx(0.5)


def test_training_updates_both_parts_with_their_optimizers(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(128, 2)).astype(np.float32)
    color = rng.choice(["a", "b"], size=128).astype(object)
    y = ((x[:, 0] > 0) ^ (color == "a")).astype(np.int64)[:, None]
    est = DNNLinearCombinedClassifier(
        model_dir=str(tmp_path),
        linear_feature_columns=[fc.categorical_column_with_vocabulary_list("color", ["a", "b"])],
        dnn_feature_columns=[fc.numeric_column("x", shape=(2,))], dnn_hidden_units=[8],
        dnn_optimizer=functools.partial(torch.optim.Adam, lr=0.01),
        config=ee.RunConfig(tf_random_seed=1))
    features = {"x": x, "color": color}
    est.train(ee.inputs.numpy_input_fn(features, y, batch_size=32, shuffle=True, num_epochs=None), steps=10)
    names = est.get_variable_names()
    assert "dnn/hiddenlayer_0/kernel" in names and "linear/linear_model/color/weights" in names
    assert np.any(est.get_variable_value("linear/linear_model/color/weights") != 0)
    checkpoint = ee.checkpoints.load_checkpoint(est.latest_checkpoint())
    assert sorted(checkpoint["optimizers"]) == ["dnn", "linear"]
    assert "accuracy_baseline" in est.evaluate(ee.inputs.numpy_input_fn(features, y, shuffle=False))


def test_errors():
    with pytest.raises(ValueError, match=r"Either linear_feature_columns or dnn_feature_columns must be defined\."):
        DNNLinearCombinedClassifier()
    with pytest.raises(ValueError, match="dnn_hidden_units must be defined when dnn_feature_columns is specified"):
        DNNLinearCombinedClassifier(dnn_feature_columns=[fc.numeric_column("x")])
    with pytest.raises(ValueError, match="n_classes must be > 2"):
        DNNLinearCombinedClassifier(linear_feature_columns=[fc.numeric_column("x")], n_classes=1)
    with pytest.raises(ValueError, match="Unsupported optimizer name: 'Bad' for linear_optimizer"):
        DNNLinearCombinedRegressor(linear_feature_columns=[fc.numeric_column("x")], linear_optimizer="Bad")
    with pytest.raises(ValueError, match="dnn_dropout must be None or a probability"):
        DNNLinearCombinedRegressor(dnn_feature_columns=[fc.numeric_column("x")], dnn_hidden_units=[2],
                                   dnn_dropout=2.0)
