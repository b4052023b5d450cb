"""DNNClassifier / DNNRegressor: TF's exact-number cases, variable names, training, warm start, errors."""

from __future__ import annotations

import functools
import os

import numpy as np
import pandas as pd
import pytest
import torch

import estimator_engine as ee
from estimator_engine import feature_column as fc
from estimator_engine.canned.dnn import DNNClassifier, DNNRegressor

PENGUINS = os.path.join(os.path.dirname(__file__), "..", "..", "..", "sample_data", "penguins.csv")
SPECIES = ["Adelie", "Chinstrap", "Gentoo"]

# dnn_testing_utils.py: hidden_units=(2, 2), one numeric input 'age'.
ONE_DIM_WEIGHTS = {
    "dnn/hiddenlayer_0/kernel": [[0.6, 0.5]], "dnn/hiddenlayer_0/bias": [0.1, -0.1],
    "dnn/hiddenlayer_1/kernel": [[1.0, 0.8], [-0.8, -1.0]], "dnn/hiddenlayer_1/bias": [0.2, -0.2],
    "dnn/logits/kernel": [[-1.0], [1.0]], "dnn/logits/bias": [0.3],
}


def _age_input(age, labels=None):
    return ee.inputs.numpy_input_fn({"age": np.array(age)}, None if labels is None else np.array(labels),
                                    shuffle=False)


def test_classifier_evaluate_one_dim_matches_tf(tmp_path):
    ee.checkpoints.create_checkpoint(str(tmp_path), ONE_DIM_WEIGHTS, global_step=100)
    est = DNNClassifier(hidden_units=(2, 2), feature_columns=[fc.numeric_column("age")],
                        model_dir=str(tmp_path))
    result = est.evaluate(_age_input([[10.0], [10.0]], [[1], [0]]), steps=1)
    expected = {"loss": 1.157721, "average_loss": 1.157721, "accuracy": 0.5, "precision": 0.0,
                "recall": 0.0, "prediction/mean": 0.11105597, "label/mean": 0.5,
                "accuracy_baseline": 0.5, "auc": 0.5, "auc_precision_recall": 0.5}
    assert sorted(result) == sorted([*expected, "global_step"])
    for key, value in expected.items():
        assert result[key] == pytest.approx(value, abs=1e-5), key
    assert result["global_step"] == 100


def test_classifier_evaluate_multi_dim_matches_tf(tmp_path):
    ee.checkpoints.create_checkpoint(str(tmp_path), {
        "dnn/hiddenlayer_0/kernel": [[0.6, 0.5], [-0.6, -0.5]], "dnn/hiddenlayer_0/bias": [0.1, -0.1],
        "dnn/hiddenlayer_1/kernel": [[1.0, 0.8], [-0.8, -1.0]], "dnn/hiddenlayer_1/bias": [0.2, -0.2],
        "dnn/logits/kernel": [[-1.0, 1.0, 0.5], [-1.0, 1.0, 0.5]], "dnn/logits/bias": [0.3, -0.3, 0.0],
    }, global_step=100)
    est = DNNClassifier(hidden_units=(2, 2), feature_columns=[fc.numeric_column("age", shape=(2,))],
                        n_classes=3, model_dir=str(tmp_path))
    result = est.evaluate(_age_input([[10.0, 8.0], [10.0, 8.0]], [[1], [0]]), steps=1)
    assert sorted(result) == ["accuracy", "average_loss", "global_step", "loss"]
    assert result["loss"] == pytest.approx(2.62305466 / 2, abs=1e-5)
    assert result["average_loss"] == pytest.approx(2.62305466 / 2, abs=1e-5)
    assert result["accuracy"] == pytest.approx(0.5)
    predictions = list(est.predict(_age_input([[10.0, 8.0]])))
    np.testing.assert_allclose(predictions[0]["logits"], [-0.48, 0.48, 0.39], atol=1e-5)
    np.testing.assert_allclose(predictions[0]["probabilities"], [0.16670536, 0.43538380, 0.39791084],
                               atol=1e-6)
    assert predictions[0]["classes"].tolist() == [b"1"]


def test_regressor_evaluate_one_dim_matches_tf(tmp_path):
    ee.checkpoints.create_checkpoint(str(tmp_path), ONE_DIM_WEIGHTS, global_step=100)
    est = DNNRegressor(hidden_units=(2, 2), feature_columns=[fc.numeric_column("age")],
                       model_dir=str(tmp_path))
    result = est.evaluate(_age_input([[10.0]], [[1.0]]), steps=1)
    expected = {"loss": 9.4864, "average_loss": 9.4864, "prediction/mean": -2.08, "label/mean": 1.0}
    assert sorted(result) == sorted([*expected, "global_step"])
    for key, value in expected.items():
        assert result[key] == pytest.approx(value, abs=1e-5), key
    assert result["global_step"] == 100
    (prediction,) = list(est.predict(_age_input([[10.0]])))
    np.testing.assert_allclose(prediction["predictions"], [-2.08], atol=1e-5)


def test_classifier_predict_one_dim(tmp_path):
    ee.checkpoints.create_checkpoint(str(tmp_path), ONE_DIM_WEIGHTS, global_step=100)
    est = DNNClassifier(hidden_units=(2, 2), feature_columns=[fc.numeric_column("age")],
                        model_dir=str(tmp_path), label_vocabulary=["neg", "pos"])
    (p,) = list(est.predict(_age_input([[10.0]])))
    np.testing.assert_allclose(p["logits"], [-2.08], atol=1e-5)
    np.testing.assert_allclose(p["logistic"], [0.11105597], atol=1e-6)
    assert p["class_ids"].tolist() == [0]
    assert p["classes"].tolist() == [b"neg"]
    assert p["all_classes"].tolist() == [b"neg", b"pos"]


def test_variable_names_and_layouts_after_training(tmp_path):
    x = np.random.default_rng(0).normal(size=(64, 3)).astype(np.float32)
    y = (x.sum(1, keepdims=True) > 0).astype(np.int64)
    est = DNNClassifier(hidden_units=[5, 4], feature_columns=[fc.numeric_column("x", shape=(3,))],
                        model_dir=str(tmp_path), batch_norm=True, dropout=0.1)
    est.train(ee.inputs.numpy_input_fn({"x": x}, y, batch_size=16, shuffle=True, num_epochs=None), steps=3)
    shapes = dict(ee.checkpoints.list_variables(est.latest_checkpoint()))
    assert shapes["dnn/hiddenlayer_0/kernel"] == [3, 5]
    assert shapes["dnn/hiddenlayer_0/bias"] == [5]
    assert shapes["dnn/hiddenlayer_1/kernel"] == [5, 4]
    assert shapes["dnn/logits/kernel"] == [4, 1]
    assert shapes["dnn/logits/bias"] == [1]
    for var in ("gamma", "beta", "moving_mean", "moving_variance"):
        assert shapes[f"dnn/hiddenlayer_0/batchnorm_0/{var}"] == [5]
        assert shapes[f"dnn/hiddenlayer_1/batchnorm_1/{var}"] == [4]
    assert est.get_variable_value("global_step") == 3
    # evaluation restores the batch-norm model without complaint
    assert "accuracy" in est.evaluate(ee.inputs.numpy_input_fn({"x": x}, y, shuffle=False))


def test_regressor_learns_a_linear_function(tmp_path):
    rng = np.random.default_rng(1)
    x = rng.uniform(-1, 1, size=(256, 1)).astype(np.float32)
    y = 3 * x + 1
    # 'Adam' is TF 2's Adam at Keras' rate 0.001, too slow for 300 steps: the rate is given.
    est = DNNRegressor(hidden_units=[16], feature_columns=[fc.numeric_column("x")], model_dir=str(tmp_path),
                       optimizer=functools.partial(torch.optim.Adam, lr=0.05, eps=1e-7),
                       config=ee.RunConfig(tf_random_seed=3))
    eval_fn = ee.inputs.numpy_input_fn({"x": x}, y, shuffle=False)
    est.train(ee.inputs.numpy_input_fn({"x": x}, y, batch_size=32, shuffle=True, num_epochs=None), steps=300)
    assert est.evaluate(eval_fn)["average_loss"] < 0.05


def test_optimizer_arguments(tmp_path):
    x = np.ones((4, 1), dtype=np.float32)
    y = np.ones((4, 1), dtype=np.float32)
    train_fn = ee.inputs.numpy_input_fn({"x": x}, y, shuffle=False)
    for i, optimizer in enumerate(["SGD", "Adam", "RMSProp", "Ftrl", torch.optim.SGD,
                                   functools.partial(torch.optim.SGD, lr=0.01)]):
        est = DNNRegressor(hidden_units=[2], feature_columns=[fc.numeric_column("x")],
                           model_dir=str(tmp_path / str(i)), optimizer=optimizer)
        est.train(train_fn, steps=1)
    with pytest.raises(ValueError, match="Unsupported optimizer name: 'Nope'"):
        DNNRegressor(hidden_units=[2], feature_columns=[fc.numeric_column("x")], optimizer="Nope")
    param = torch.nn.Parameter(torch.zeros(1))
    with pytest.raises(TypeError, match="not an optimizer instance"):
        DNNRegressor(hidden_units=[2], feature_columns=[fc.numeric_column("x")],
                     optimizer=torch.optim.SGD([param], lr=0.1))


def test_constructor_and_input_errors(tmp_path):
    cols = [fc.numeric_column("x")]
    with pytest.raises(ValueError, match="n_classes must be > 2: 1"):
        DNNClassifier(hidden_units=[2], feature_columns=cols, n_classes=1)
    with pytest.raises(ValueError, match="label_vocabulary should be a list or a tuple"):
        DNNClassifier(hidden_units=[2], feature_columns=cols, label_vocabulary="ab")
    with pytest.raises(ValueError, match='"label_vocabulary" does not have "n_classes" items'):
        DNNClassifier(hidden_units=[2], feature_columns=cols, n_classes=3, label_vocabulary=["a", "b"])
    with pytest.raises(ValueError, match="feature_columns must not be empty"):
        DNNClassifier(hidden_units=[2], feature_columns=[])
    with pytest.raises(ValueError, match="hidden_units must hold positive integers"):
        DNNClassifier(hidden_units=[0], feature_columns=cols)
    with pytest.raises(ValueError, match="dropout must be None or a probability"):
        DNNClassifier(hidden_units=[2], feature_columns=cols, dropout=1.5)
    est = DNNClassifier(hidden_units=[2], feature_columns=cols, model_dir=str(tmp_path))
    with pytest.raises(ValueError, match="features should be a dictionary of `Tensor`s"):
        est.train(ee.inputs.numpy_input_fn(np.ones((2, 1)), np.ones((2, 1)), shuffle=False), steps=1)
    with pytest.raises(ValueError, match="Labels must be <= n_classes - 1"):
        est.train(ee.inputs.numpy_input_fn({"x": np.ones((2, 1))}, np.array([[0], [2]]), shuffle=False), steps=1)


# -- the seed's canned example: penguins, embedding columns, warm start ----------------------


def _penguins():
    frame = pd.read_csv(PENGUINS).dropna(subset=["species"]).reset_index(drop=True)
    return frame[["island", "sex"]], frame["species"]


def _penguin_columns():
    island = fc.categorical_column_with_vocabulary_list("island", ["Biscoe", "Dream", "Torgersen"])
    sex = fc.categorical_column_with_vocabulary_list("sex", ["female", "male"])
    return [fc.embedding_column(island, dimension=3), fc.embedding_column(sex, dimension=2)]


def test_penguins_train_evaluate_predict_and_warm_start(tmp_path):
    x, y = _penguins()
    train_fn = ee.inputs.pandas_input_fn(x, y, batch_size=32, shuffle=True, num_epochs=None)
    eval_fn = ee.inputs.pandas_input_fn(x, y, shuffle=False)
    predict_fn = ee.inputs.pandas_input_fn(x.head(5), shuffle=False)
    kwargs = dict(feature_columns=_penguin_columns(), hidden_units=[1024, 512, 256], n_classes=3,
                  label_vocabulary=SPECIES)

    # 20 steps: the default Adagrad at TF 2's rate 0.001 would barely move, so the rate is given.
    source = DNNClassifier(model_dir=str(tmp_path / "source"), **kwargs,
                           optimizer=functools.partial(torch.optim.Adagrad, lr=0.05,
                                                       initial_accumulator_value=0.1))
    source.train(train_fn, steps=20)
    metrics = source.evaluate(eval_fn)
    assert sorted(metrics) == ["accuracy", "average_loss", "global_step", "loss"]
    assert metrics["global_step"] == 20
    assert metrics["accuracy"] > 0.6  # island + sex separate the species well above the 44% prior
    predictions = list(source.predict(predict_fn))
    assert len(predictions) == 5
    assert all(p["classes"][0] in {b"Adelie", b"Chinstrap", b"Gentoo"} for p in predictions)
    assert predictions[0]["probabilities"].shape == (3,)
    names = source.get_variable_names()
    assert "dnn/input_from_feature_columns/input_layer/island_embedding/embedding_weights" in names
    assert "dnn/hiddenlayer_2/kernel" in names

    # Warm start with a learning rate of 0: after one step every variable equals the source's.
    frozen = functools.partial(torch.optim.SGD, lr=0.0)
    target = DNNClassifier(model_dir=str(tmp_path / "target"), warm_start_from=source.model_dir,
                           optimizer=frozen, **kwargs)
    target.train(train_fn, steps=1)
    assert target.get_variable_value("global_step") == 1  # global_step is not warm-started
    variables = [n for n in names if n != "global_step"]
    for name in variables:
        np.testing.assert_array_equal(target.get_variable_value(name), source.get_variable_value(name),
                                      err_msg=name)
    assert target.evaluate(eval_fn)["accuracy"] == pytest.approx(metrics["accuracy"])

    # Control: the same model without warm start does not start from the source's weights.
    fresh = DNNClassifier(model_dir=str(tmp_path / "fresh"), optimizer=frozen, **kwargs)
    fresh.train(train_fn, steps=1)
    assert not np.array_equal(fresh.get_variable_value("dnn/hiddenlayer_0/kernel"),
                              source.get_variable_value("dnn/hiddenlayer_0/kernel"))


def test_batch_norm_of_a_dense_layer_built_without_it_says_so():
    from estimator_engine.canned.dnn import Dense

    with pytest.raises(RuntimeError, match="This Dense layer has no batch norm: build it with batch_norm_index"):
        Dense(3, 2).batch_norm(torch.ones(4, 2))
    assert Dense(3, 2, batch_norm_index=0).batch_norm(torch.ones(4, 2)).shape == (4, 2)
