"""String features in predictions come out of ``predict`` as TF's string tensors do: bytes arrays."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import estimator_engine as ee
from estimator_engine.canned.extenders import forward_features

DATES = np.array(["2024-01-01", "2024-01-02", "2024-01-03"], dtype=object)


def _input_fn():
    return ee.inputs.numpy_input_fn({"x": np.arange(3, dtype=np.float32).reshape(3, 1), "date": DATES},
                                    np.zeros((3, 1), np.float32), batch_size=2, shuffle=False)


def _model_fn(features, labels, mode):
    net = ee.get_module("net", lambda: torch.nn.Linear(1, 1))
    y = net(features["x"])
    if mode == ee.ModeKeys.PREDICT:
        # A TF program's habit: the record key passed through, and the predictions exported as is.
        predictions = {"y": y, "date": features["date"]}
        return ee.EstimatorSpec(mode, predictions=predictions,
                                export_outputs={"predict": ee.export.PredictOutput(predictions)})
    loss = torch.nn.functional.mse_loss(y, labels)
    optimizer = ee.get_optimizer("sgd", lambda: torch.optim.SGD(net.parameters(), lr=0.1))
    return ee.EstimatorSpec(mode, loss=loss, train_op=ee.minimize(optimizer, loss))


@pytest.fixture
def trained(tmp_path):
    est = ee.Estimator(_model_fn, model_dir=str(tmp_path))
    est.train(_input_fn(), steps=1)
    return est


def test_a_string_feature_in_predictions_and_predict_output_yields_bytes(trained):
    rows = list(trained.predict(_input_fn()))
    assert [r["date"] for r in rows] == [b"2024-01-01", b"2024-01-02", b"2024-01-03"]
    assert all(isinstance(r["y"], np.ndarray) and r["y"].shape == (1,) for r in rows)


def test_batches_of_strings_are_object_arrays_of_bytes(trained):
    batches = list(trained.predict(_input_fn(), yield_single_examples=False))
    assert batches[0]["date"].dtype == object and batches[0]["date"].tolist() == [b"2024-01-01", b"2024-01-02"]


def test_forward_features_passes_a_string_key_through(tmp_path):
    def model_fn(features, labels, mode):
        net = ee.get_module("net", lambda: torch.nn.Linear(1, 1))
        y = net(features["x"])
        if mode == ee.ModeKeys.PREDICT:
            return ee.EstimatorSpec(mode, predictions={"y": y})
        loss = torch.nn.functional.mse_loss(y, labels)
        optimizer = ee.get_optimizer("sgd", lambda: torch.optim.SGD(net.parameters(), lr=0.1))
        return ee.EstimatorSpec(mode, loss=loss, train_op=ee.minimize(optimizer, loss))

    est = ee.Estimator(model_fn, model_dir=str(tmp_path))
    est.train(_input_fn(), steps=1)
    rows = list(forward_features(est, "date").predict(_input_fn()))
    assert [r["date"] for r in rows] == [b"2024-01-01", b"2024-01-02", b"2024-01-03"]


def test_predict_output_takes_lists_of_str_or_bytes():
    output = ee.export.PredictOutput({"key": ["a", b"b"], "y": torch.zeros(2)})
    assert output.outputs["key"].tolist() == [b"a", b"b"]


def test_predict_output_refuses_numbers_that_are_not_tensors():
    with pytest.raises(ValueError, match=r"PredictOutput output 'y' must be a torch.Tensor, a StringLookup or "
                                         r"strings \(a list or numpy array of str/bytes\), given: \[1, 2\]"):
        ee.export.PredictOutput({"y": [1, 2]})


def test_predictions_refuse_a_list_of_numbers():
    with pytest.raises(TypeError, match=r"predictions\['y'\] must be Tensor, given: \[1, 2\]"):
        ee.EstimatorSpec(ee.ModeKeys.PREDICT, predictions={"y": [1, 2]})

