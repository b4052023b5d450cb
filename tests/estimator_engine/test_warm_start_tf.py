"""A custom model_fn (torch layers) warm-started from a TensorFlow 2.15 checkpoint.

``var_name_to_prev_var_name`` maps the engine's names to TF's (``ee.warm_start.tf_variable_names``
builds it for Keras/``tf.layers`` names) and the warm start converts TF's layouts (dense
``[in, out]``, conv HWIO) to torch's. The outputs are TF's own, from
``fixtures/tf_checkpoints/make_fixtures.py`` (``custom_conv``, ``dnn_classifier_3``).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

import estimator_engine as ee
from estimator_engine.warm_start import from_tf_layout, tf_variable_names

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "tf_checkpoints"
CONV = FIXTURES / "format" / "custom_conv"
SCOPES = {"conv": "conv", "norm": "norm", "up": "up", "logits": "logits"}


class ConvNet(torch.nn.Module):
    """The torch port of make_fixtures.make_custom_conv's Keras layers."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(2, 4, 3)
        self.norm = torch.nn.BatchNorm2d(4, eps=1e-3)  # Keras' epsilon
        self.up = torch.nn.ConvTranspose2d(4, 2, 2, stride=2)
        self.logits = torch.nn.Linear(64, 3)

    def forward(self, images: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        hidden = torch.relu(self.norm(self.conv(images)))
        # TF flattened NHWC: the same order here.
        return self.logits(hidden.permute(0, 2, 3, 1).flatten(1)), self.up(hidden)


def _conv_model_fn(features, mode):
    net = ee.get_module("net", ConvNet)
    logits, upsampled = net(features["images"])
    return ee.EstimatorSpec(mode, predictions={"logits": logits, "upsampled": upsampled})


def _conv_predictions(warm_start_from, tmp_path) -> tuple[np.ndarray, np.ndarray, dict]:
    reference = json.loads((FIXTURES / "format" / "custom_conv.json").read_text())
    images = np.array(reference["images_nhwc"], np.float32).transpose(0, 3, 1, 2).copy()
    estimator = ee.Estimator(_conv_model_fn, model_dir=str(tmp_path / "port"),
                             warm_start_from=warm_start_from)
    rows = list(estimator.predict(ee.inputs.numpy_input_fn({"images": images}, shuffle=False)))
    return (np.array([r["logits"] for r in rows]), np.array([r["upsampled"] for r in rows]),
            reference)


def test_custom_conv_model_equals_tf_outputs(tmp_path):
    names = tf_variable_names("net", ConvNet(), SCOPES)
    assert names["net/conv/weight"] == "conv/kernel"
    assert names["net/norm/weight"] == "norm/gamma"
    assert names["net/norm/running_var"] == "norm/moving_variance"
    assert "net/norm/num_batches_tracked" not in names
    settings = ee.WarmStartSettings(str(CONV), vars_to_warm_start=list(names),
                                    var_name_to_prev_var_name=names)
    logits, upsampled, reference = _conv_predictions(settings, tmp_path)
    np.testing.assert_allclose(logits, reference["logits"], rtol=1e-5, atol=1e-5)
    expected_up = np.array(reference["upsampled_nhwc"]).transpose(0, 3, 1, 2)
    np.testing.assert_allclose(upsampled, expected_up, rtol=1e-5, atol=1e-5)


def test_mismatch_names_both_sides(tmp_path):
    names = tf_variable_names("net", ConvNet(), SCOPES)
    names["net/logits/weight"] = "up/kernel"  # wrong layer: [2, 2, 2, 4] cannot be a [3, 64]
    settings = ee.WarmStartSettings(str(CONV), vars_to_warm_start=list(names),
                                    var_name_to_prev_var_name=names)
    with pytest.raises(ValueError, match=r"Shape of variable 'net/logits/weight' \(\[3, 64\]\) "
                                         r"doesn't match with shape of tensor 'up/kernel' "
                                         r"\(\[2, 2, 2, 4\]\) from checkpoint .*model\.ckpt-9"):
        _conv_predictions(settings, tmp_path)
    names["net/logits/weight"] = "logit/kernel"
    settings = settings.replace(var_name_to_prev_var_name=names)
    with pytest.raises(ValueError, match=r"Tensor 'logit/kernel' \(for variable "
                                         r"'net/logits/weight'\) is not found in checkpoint .*"
                                         r"close names in the checkpoint: \['logits/kernel'"):
        _conv_predictions(settings, tmp_path)


def test_dense_kernel_transposed_into_linear_layers(tmp_path):
    # TF's DNNClassifier variables into a plain nn.Sequential: TF's logits come out.
    reference = json.loads((FIXTURES / "models" / "dnn_classifier_3.json").read_text())
    columns = ["petal_length_cm", "petal_width_cm", "sepal_length_cm", "sepal_width_cm"]  # TF's sorted order
    x = np.stack([np.array(reference["features"][c]["values"], np.float32) for c in columns], 1)

    def make() -> torch.nn.Module:
        return torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.ReLU(), torch.nn.Linear(6, 3))

    def model_fn(features, mode):
        return ee.EstimatorSpec(mode, predictions={"logits": ee.get_module("mlp", make)(features["x"])})

    names = tf_variable_names("mlp", make(), {"0": "dnn/hiddenlayer_0", "2": "dnn/logits"})
    settings = ee.WarmStartSettings(str(FIXTURES / "models" / "dnn_classifier_3"),
                                    var_name_to_prev_var_name=names)
    estimator = ee.Estimator(model_fn, model_dir=str(tmp_path / "port"), warm_start_from=settings)
    logits = [r["logits"] for r in estimator.predict(ee.inputs.numpy_input_fn({"x": x}, shuffle=False))]
    np.testing.assert_allclose(logits, reference["predictions"]["logits"], rtol=1e-5, atol=1e-6)


def test_from_tf_layout_rules():
    conv = torch.arange(3 * 3 * 2 * 4.0).reshape(3, 3, 2, 4)  # HWIO
    got = from_tf_layout(conv, torch.nn.Conv2d(2, 4, 3), "weight")
    assert got.shape == (4, 2, 3, 3) and got[1, 0, 2, 1] == conv[2, 1, 0, 1]
    transposed = torch.arange(2 * 2 * 2 * 4.0).reshape(2, 2, 2, 4)  # [h, w, out, in]
    got = from_tf_layout(transposed, torch.nn.ConvTranspose2d(4, 2, 2), "weight")
    assert got.shape == (4, 2, 2, 2) and got[3, 1, 0, 1] == transposed[0, 1, 1, 3]
    bias = torch.ones(4)
    assert from_tf_layout(bias, torch.nn.Conv2d(2, 4, 3), "bias") is not None
    embedding = torch.zeros(5, 2)
    assert from_tf_layout(embedding, torch.nn.Embedding(5, 2), "weight").shape == (5, 2)


def test_tf_variable_names_refuses_unknown_submodule():
    with pytest.raises(ValueError, match=r"'dense' is not a submodule of 'net'; its submodules "
                                         r"are \['conv', 'logits', 'norm', 'up'\]"):
        tf_variable_names("net", ConvNet(), {"dense": "dense"})
