"""The TF-Serving-compatible server on exports whose serving_input_fn takes strings: string
placeholders fed to feature columns, and CSV lines (TF's ``tf.io.decode_csv`` receiver). Answers
equal the estimator's predict() on the same rows."""

from __future__ import annotations

import base64
import sys
from pathlib import Path

import numpy as np
import pytest

from estimator_engine import export as export_lib
from estimator_workbench.serve import protocol
from estimator_workbench.serve.repository import ModelRepository

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "estimator_engine"))

import test_serving_placeholders as cases

trained = cases.trained  # the module-scoped fixture: a trained wide & deep regressor, rows, predictions


def _lines(serving: dict) -> list[str]:
    return [f"0,{day},{hour},{city},{distance!r}" for day, hour, city, distance in zip(
        serving["dayofweek"], serving["hour"], serving["city"], serving["distance"].tolist())]


def test_predict_on_string_placeholder_inputs(trained, tmp_path):
    estimator, serving, expected = trained
    path = estimator.export_saved_model(str(tmp_path / "export"), cases._placeholder_receiver_fn)
    repository = ModelRepository.load({"taxi": path})
    instances = [{"dayofweek": day, "hour": int(hour), "city": {"b64": base64.b64encode(city.encode()).decode()},
                  "distance": float(distance)}
                 for day, hour, city, distance in zip(serving["dayofweek"], serving["hour"], serving["city"],
                                                      serving["distance"])]
    answer = protocol.predict(repository, "taxi", None, {"signature_name": "predict", "instances": instances})
    got = np.array(answer["predictions"], np.float64)  # one output: a value per instance
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    metadata = protocol.model_metadata(repository, "taxi", None)
    inputs = metadata["metadata"]["signature_def"]["signature_def"]["predict"]["inputs"]
    assert inputs["dayofweek"]["dtype"] == "DT_STRING" and inputs["distance"]["dtype"] == "DT_FLOAT"


def test_predict_and_regress_on_csv_lines(trained, tmp_path):
    estimator, serving, expected = trained
    receiver_fn = export_lib.build_csv_serving_input_receiver_fn(cases.COLUMNS, cases.DEFAULTS, exclude=["fare"])
    repository = ModelRepository.load({"taxi": estimator.export_saved_model(str(tmp_path / "export"), receiver_fn)})
    lines = _lines(serving)
    answer = protocol.predict(repository, "taxi", None, {"signature_name": "predict", "instances": lines})
    got = np.array(answer["predictions"], np.float64)  # one output: a value per instance
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    columnar = protocol.predict(repository, "taxi", None, {"signature_name": "predict",
                                                            "inputs": {"csv_row": lines}})
    np.testing.assert_allclose(np.array(columnar["outputs"], np.float64), expected, rtol=1e-5,
                               atol=1e-6)
    with pytest.raises(protocol.RequestError, match=r"decode_csv: expect 5 fields but have 1 in record 0"):
        protocol.predict(repository, "taxi", None, {"instances": ["oops"]})
