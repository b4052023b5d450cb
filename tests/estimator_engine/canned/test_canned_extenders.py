"""add_metrics / forward_features: TF's extender semantics on a canned estimator."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import estimator_engine as ee
from estimator_engine import feature_column as fc
from estimator_engine.canned import LinearRegressor, add_metrics, forward_features


def _weights(tmp_path):
    # prediction = 2 x + 1, fixed from a checkpoint.
    ee.checkpoints.create_checkpoint(str(tmp_path), {"linear/linear_model/x/weights": [[2.0]],
                                                     "linear/linear_model/bias_weights": [1.0]},
                                     global_step=1)


def test_add_metrics_reports_the_new_metric_and_overrides_by_name(tmp_path):
    _weights(tmp_path)
    base = LinearRegressor([fc.numeric_column("x")], model_dir=str(tmp_path))
    x = np.array([0.0, 1.0, 2.0], np.float32)
    y = np.array([1.0, 4.0, 5.0], np.float32)  # predictions 1, 3, 5: errors 0, 1, 0

    def metric_fn(labels, predictions, features, config):
        assert config == base.config and "x" in features
        return {"mae": ee.metrics.mean_absolute_error(labels, predictions["predictions"]),
                "label/mean": ee.metrics.mean(torch.zeros(3))}

    result = add_metrics(base, metric_fn).evaluate(ee.inputs.numpy_input_fn({"x": x}, y, shuffle=False))
    assert result["mae"] == pytest.approx(1 / 3)
    assert result["label/mean"] == 0.0  # overridden
    assert result["average_loss"] == pytest.approx(1 / 3)  # the original metrics stay
    with pytest.raises(ValueError, match=r"metric_fn \(.*\) has following not expected args: \['mode'\]"):
        add_metrics(base, lambda labels, mode: {})


def test_forward_features_adds_keys_to_predictions(tmp_path):
    _weights(tmp_path)
    est = forward_features(LinearRegressor([fc.numeric_column("x")], model_dir=str(tmp_path)), "id")
    features = {"x": np.array([0.0, 2.0], np.float32), "id": np.array([7, 9])}
    rows = list(est.predict(ee.inputs.numpy_input_fn(features, shuffle=False)))
    assert [int(r["id"]) for r in rows] == [7, 9]
    assert [float(r["predictions"][0]) for r in rows] == [1.0, 5.0]
    missing = forward_features(LinearRegressor([fc.numeric_column("x")], model_dir=str(tmp_path)), "nope")
    with pytest.raises(ValueError, match="Key 'nope' is not in features dict"):
        list(missing.predict(ee.inputs.numpy_input_fn(features, shuffle=False)))


def test_forward_features_are_in_the_exported_predict_signature(tmp_path):
    """TF's forward_features also adds the keys to the ``predict`` export outputs: a served row
    carries its id next to the prediction."""
    from estimator_engine import export
    from estimator_engine.export import build_raw_serving_input_receiver_fn

    _weights(tmp_path)
    est = forward_features(LinearRegressor([fc.numeric_column("x")], model_dir=str(tmp_path)), "id")
    features = {"x": np.array([0.0, 2.0], np.float32), "id": np.array([7, 9])}
    path = est.export_saved_model(str(tmp_path / "export"), build_raw_serving_input_receiver_fn(
        {"x": features["x"][:1], "id": features["id"][:1]}))
    served = export.load(path, signature="predict")(features)
    assert np.asarray(served["id"]).tolist() == [7, 9]
    assert np.asarray(served["predictions"]).reshape(-1).tolist() == [1.0, 5.0]
