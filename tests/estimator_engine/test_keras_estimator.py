"""model_to_estimator (TF's tf.keras.estimator.model_to_estimator) on torch modules: training,
evaluation, prediction and export through the normal Estimator, with numbers computed by hand
(numpy) and TF's matching of feature names to the model's inputs."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest
import torch

import estimator_engine as ee

X = np.array([[1.0, 2.0], [0.5, -1.0], [-1.5, 0.25], [2.0, 1.0]], np.float32)
Y = np.array([[1.0], [-0.5], [0.75], [2.5]], np.float32)
W0 = np.array([[0.3, -0.2]], np.float32)
B0 = np.array([0.1], np.float32)
LR = 0.1


def _linear() -> torch.nn.Linear:
    net = torch.nn.Linear(2, 1)
    with torch.no_grad():
        net.weight.copy_(torch.from_numpy(W0))
        net.bias.copy_(torch.from_numpy(B0))
    return net


def _sgd_by_hand(steps: int) -> tuple[np.ndarray, np.ndarray]:
    """Full-batch SGD on the mean squared error, in float64 numpy."""
    w, b = W0.astype(np.float64), B0.astype(np.float64)
    for _ in range(steps):
        error = X @ w.T + b - Y  # [4, 1]
        w = w - LR * 2 * (error.T @ X) / len(X)
        b = b - LR * 2 * error.mean(axis=0)
    return w, b


def _input_fn(features=None, labels=Y):
    return lambda: ({"x": torch.from_numpy(X)} if features is None else features(), torch.from_numpy(labels))


def test_trains_evaluates_and_predicts_as_sgd_by_hand(tmp_path):
    net = _linear()
    estimator = ee.model_to_estimator(net, loss=torch.nn.MSELoss(), optimizer=lambda p: torch.optim.SGD(p, lr=LR),
                                      metrics=["mae"], model_dir=str(tmp_path))
    estimator.train(_input_fn(), steps=3)
    w, b = _sgd_by_hand(3)
    np.testing.assert_allclose(estimator.get_variable_value("keras_model/weight"), w, rtol=1e-5)
    np.testing.assert_allclose(estimator.get_variable_value("keras_model/bias"), b, rtol=1e-5)
    assert np.array_equal(net.weight.detach().numpy(), W0)  # the model given is not changed (TF clones it)
    error = X @ w.T + b - Y
    result = estimator.evaluate(_input_fn(), steps=1)
    assert result["loss"] == pytest.approx(float((error ** 2).mean()), rel=1e-5)
    assert result["mae"] == pytest.approx(float(np.abs(error).mean()), rel=1e-5)
    assert result["global_step"] == 3
    predictions = list(estimator.predict(ee.inputs.numpy_input_fn({"x": X}, shuffle=False)))
    np.testing.assert_allclose([p["output_1"] for p in predictions], X @ w.T + b, rtol=1e-5)
    # a single-input model also takes a single tensor, as in TF
    estimator.train(lambda: (torch.from_numpy(X), torch.from_numpy(Y)), steps=2)
    np.testing.assert_allclose(estimator.get_variable_value("keras_model/weight"), _sgd_by_hand(5)[0], rtol=1e-5)


def test_exports_and_loads(tmp_path):
    estimator = ee.model_to_estimator(_linear(), loss=torch.nn.MSELoss(), optimizer="SGD", learning_rate=LR,
                                      model_dir=str(tmp_path / "m"))
    estimator.train(_input_fn(), steps=2)
    path = estimator.export_saved_model(
        str(tmp_path / "export"), ee.export.build_raw_serving_input_receiver_fn({"x": torch.zeros(1, 2)}))
    w, b = _sgd_by_hand(2)
    got = ee.export.load(path)({"x": X})["output_1"]
    np.testing.assert_allclose(got.numpy(), X @ w.T + b, rtol=1e-5)


class _TwoInputs(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Linear(1, 1, bias=False)
        self.b = torch.nn.Linear(1, 1, bias=False)
        with torch.no_grad():
            self.a.weight.fill_(2.0)
            self.b.weight.fill_(-3.0)

    def forward(self, first, second):
        return self.a(first) + self.b(second), first * 0 + 7


def test_features_and_labels_are_matched_to_input_and_output_names(tmp_path):
    estimator = ee.model_to_estimator(
        _TwoInputs(), loss={"y": torch.nn.MSELoss(), "const": torch.nn.L1Loss()}, optimizer="SGD",
        input_names=["first", "second"], output_names=["y", "const"], model_dir=str(tmp_path))
    features = {"second": torch.tensor([[1.0], [2.0]]), "first": torch.tensor([[10.0], [20.0]])}
    labels = {"const": torch.tensor([[7.0], [5.0]]), "y": torch.tensor([[17.0], [34.0]])}
    # y = 2 * first - 3 * second = [17, 34]: loss 0 + |7-7| + |7-5| / 2 = 1
    estimator.train(lambda: (features, labels), steps=1, hooks=[])
    result = estimator.evaluate(lambda: (features, labels), steps=1)
    # the step changed nothing: the MSE was 0 and the L1 term has no parameters
    assert result["loss"] == pytest.approx(1.0, abs=1e-6)
    predictions = next(estimator.predict(lambda: features, yield_single_examples=False))
    assert sorted(predictions) == ["const", "y"]
    with pytest.raises(ValueError, match=r"The dictionary passed into features does not have the expected inputs "
                                         r"keys defined in the model.\n\tExpected keys: .*\n\tfeatures keys: .*"
                                         r"\n\tDifference: \{'third'\}"):
        estimator.evaluate(lambda: ({**features, "third": features["first"]}, labels), steps=1)


def test_evaluates_the_models_own_weights_before_training(tmp_path):
    # TF starts the Estimator from the Keras model's weights: evaluate works before any training.
    net = torch.nn.Sequential(torch.nn.Linear(1, 1), torch.nn.Sigmoid())
    with torch.no_grad():
        net[0].weight.fill_(1.0)
        net[0].bias.fill_(0.0)
    estimator = ee.model_to_estimator(net, loss=torch.nn.BCELoss(), metrics=["accuracy"], model_dir=str(tmp_path))
    x = np.array([[2.0], [-1.0], [0.5], [-3.0]], np.float32)
    y = np.array([[1.0], [1.0], [0.0], [0.0]], np.float32)
    result = estimator.evaluate(lambda: ({"x": torch.from_numpy(x)}, torch.from_numpy(y)), steps=1)
    p = 1 / (1 + np.exp(-x))
    assert result["loss"] == pytest.approx(float(-(y * np.log(p) + (1 - y) * np.log(1 - p)).mean()), rel=1e-5)
    assert result["accuracy"] == 0.5  # predicted [1, 0, 1, 0] at the 0.5 threshold
    assert result["global_step"] == 0


def test_bad_arguments_say_what_to_give(tmp_path):
    with pytest.raises(TypeError, match=r"keras_model must be a torch.nn.Module"):
        ee.model_to_estimator(object(), loss=torch.nn.MSELoss())
    with pytest.raises(ValueError, match=r"Unknown metric 'f1'"):
        ee.model_to_estimator(_linear(), loss=torch.nn.MSELoss(), metrics=["f1"])
    estimator = ee.model_to_estimator(_linear(), loss=torch.nn.MSELoss(), model_dir=str(tmp_path))
    with pytest.raises(ValueError, match=r"The features dict has 2 entries \['x', 'z'\]; give model_to_estimator"):
        estimator.train(lambda: ({"x": torch.from_numpy(X), "z": torch.from_numpy(X)}, torch.from_numpy(Y)), steps=1)


def _keras_on_torch():
    """Keras 3 on its torch backend, where it is installed (an optional extra: skipped otherwise)."""
    if "keras" not in sys.modules:
        os.environ.setdefault("KERAS_BACKEND", "torch")
    keras = pytest.importorskip("keras")
    if keras.backend.backend() != "torch":
        pytest.skip(f"keras runs on its {keras.backend.backend()} backend here, not torch")
    return keras


def test_keras_3_model_on_torch_trains_as_sgd_by_hand(tmp_path):
    keras = _keras_on_torch()
    first, second = keras.Input((1,), name="first"), keras.Input((1,), name="second")
    dense = keras.layers.Dense(1, name="y")
    model = keras.Model([first, second], dense(keras.layers.Concatenate()([first, second])))
    dense.set_weights([W0.T.copy(), B0.copy()])
    estimator = ee.model_to_estimator(model, loss=torch.nn.MSELoss(), optimizer=lambda p: torch.optim.SGD(p, lr=LR),
                                      model_dir=str(tmp_path))
    features = {"second": torch.from_numpy(X[:, 1:]), "first": torch.from_numpy(X[:, :1])}  # by Input name
    estimator.train(lambda: (features, torch.from_numpy(Y)), steps=3)
    w, b = _sgd_by_hand(3)
    result = estimator.evaluate(lambda: (features, torch.from_numpy(Y)), steps=1)
    assert result["loss"] == pytest.approx(float(((X @ w.T + b - Y) ** 2).mean()), rel=1e-5)
    predictions = next(estimator.predict(lambda: features, yield_single_examples=False))
    np.testing.assert_allclose(predictions["y"], X @ w.T + b, rtol=1e-5)  # named by model.output_names
