"""``export_saved_model(..., format="onnx")``: model.onnx beside the torch.export program, run by
onnxruntime (on the ids the export's preprocessing stage computes), equal to ``predict()`` within
1e-5, for canned and custom models; what cannot be exported is refused with the reason."""

from __future__ import annotations

import json
import os

import numpy as np
import pandas as pd
import pytest
import torch

import estimator_engine as ee
from estimator_engine import export as export_lib
from estimator_engine import serving

ort = pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")
pytestmark = pytest.mark.slow  # trains and converts models (seconds each)

fc = ee.feature_column
COLORS = ["red", "green", "blue"]


def _onnx_outputs(path: str, program_inputs: dict) -> dict[str, np.ndarray]:
    """Runs model.onnx as a user without this package would: onnxruntime on named numpy inputs."""
    meta = json.loads(open(os.path.join(path, "signature.json")).read())["onnx"]
    session = ort.InferenceSession(os.path.join(path, meta["file"]), providers=["CPUExecutionProvider"])
    assert [i.name for i in session.get_inputs()] == meta["inputs"]
    feeds = {name: np.asarray(program_inputs[name]) for name in meta["inputs"]}
    return dict(zip(meta["outputs"], session.run(meta["outputs"], feeds)))


def _frame(rows: int, seed: int) -> tuple[pd.DataFrame, pd.Series]:
    rng = np.random.RandomState(seed)
    frame = pd.DataFrame({"size": rng.uniform(0, 10, rows).astype(np.float32), "color": rng.choice(COLORS, rows)})
    return frame, pd.Series(((frame["size"] > 5) ^ (frame["color"] == "red")).astype(np.int64))


def test_canned_classifier_with_a_categorical_column(tmp_path):
    columns = [fc.numeric_column("size"),
               fc.embedding_column(fc.categorical_column_with_vocabulary_list("color", COLORS[:2], num_oov_buckets=1), 3)]
    estimator = ee.DNNClassifier([8, 4], columns, model_dir=str(tmp_path / "model"), n_classes=3,
                                 config=ee.RunConfig(tf_random_seed=2))
    frame, label = _frame(96, 0)
    estimator.train(ee.inputs.pandas_input_fn(frame, label, batch_size=32, num_epochs=None, shuffle=True), steps=15)
    receiver = export_lib.build_parsing_serving_input_receiver_fn(serving.make_parse_example_spec(columns))
    path = estimator.export_saved_model(str(tmp_path / "export"), receiver, format="onnx")
    meta = json.loads(open(os.path.join(path, "signature.json")).read())
    assert meta["onnx"]["inputs"] == ["size", "ids/color"] and meta["program_format"] == "torch.export"

    serve, _ = _frame(11, 9)
    serve.loc[0, "color"] = "purple"  # out of vocabulary
    expected = next(estimator.predict(ee.inputs.pandas_input_fn(serve, batch_size=11, shuffle=False),
                                      yield_single_examples=False))
    # the categorical lookups stay in preprocessing.json, as for torch.export
    stage = export_lib.load(path).preprocessing
    records = [{"size": float(s), "color": c} for s, c in zip(serve["size"], serve["color"])]
    program_inputs = stage(serving.parse_records(records, stage.parse_spec))
    program_inputs["size"] = np.asarray(program_inputs["size"], np.float32)
    program_inputs["ids/color"] = program_inputs["ids/color"].numpy()
    got = _onnx_outputs(path, program_inputs)
    for name in ("probabilities", "logits"):
        np.testing.assert_allclose(got[name], expected[name], rtol=1e-5, atol=1e-5)
    assert got["class_ids"].tolist() == expected["class_ids"].tolist()
    # export.load(runtime="onnxruntime"): records in, predict()'s outputs out (strings looked up)
    served = export_lib.load(path, signature="predict", runtime="onnxruntime")(records)
    np.testing.assert_allclose(served["probabilities"], expected["probabilities"], rtol=1e-5, atol=1e-5)
    assert served["classes"].tolist() == expected["classes"].tolist()


def _custom_model_fn(features, labels, mode, params):
    net = ee.get_module("net", lambda: torch.nn.Sequential(torch.nn.Linear(3, 16), torch.nn.Tanh(),
                                                           torch.nn.Linear(16, 2)))
    out = net(features["x"])
    predictions = {"mean": out[:, 0], "scale": torch.nn.functional.softplus(out[:, 1])}
    if mode == ee.ModeKeys.PREDICT:
        return ee.EstimatorSpec(mode, predictions=predictions)
    loss = torch.mean((out[:, 0] - labels) ** 2)
    optimizer = ee.get_optimizer("sgd", lambda: torch.optim.SGD(net.parameters(), lr=0.05))
    return ee.EstimatorSpec(mode, loss=loss, train_op=ee.minimize(optimizer, loss))


def test_custom_model_fn_with_dict_predictions(tmp_path):
    rng = np.random.RandomState(0)
    x = rng.randn(64, 3).astype(np.float32)
    estimator = ee.Estimator(_custom_model_fn, model_dir=str(tmp_path / "model"), config=ee.RunConfig(tf_random_seed=0))
    estimator.train(ee.inputs.numpy_input_fn({"x": x}, x.sum(1), batch_size=16, num_epochs=None, shuffle=True), steps=10)
    path = estimator.export_saved_model(str(tmp_path / "export"),
                                        export_lib.build_raw_serving_input_receiver_fn({"x": x[:2]}), format="onnx")
    new = rng.randn(7, 3).astype(np.float32)
    expected = next(estimator.predict(ee.inputs.numpy_input_fn({"x": new}, batch_size=7, shuffle=False),
                                      yield_single_examples=False))
    got = _onnx_outputs(path, {"x": new})
    assert sorted(got) == ["mean", "scale"]
    for name in ("mean", "scale"):
        assert got[name].dtype == expected[name].dtype == np.float32
        np.testing.assert_allclose(got[name], expected[name], rtol=1e-5, atol=1e-5)


def _data_dependent_model_fn(features, labels, mode):
    net = ee.get_module("net", lambda: torch.nn.Linear(2, 1))
    # a Python branch on a tensor's value: torch.export cannot trace it
    out = net(features["x"]) if float(features["x"].sum()) > 0 else -net(features["x"])
    if mode == ee.ModeKeys.PREDICT:
        return ee.EstimatorSpec(mode, predictions={"y": out})
    loss = torch.mean((out[:, 0] - labels) ** 2)
    optimizer = ee.get_optimizer("sgd", lambda: torch.optim.SGD(net.parameters(), lr=0.05))
    return ee.EstimatorSpec(mode, loss=loss, train_op=ee.minimize(optimizer, loss))


def test_a_model_torch_export_cannot_trace_is_refused_with_the_reason(tmp_path):
    x = np.ones((4, 2), np.float32)
    estimator = ee.Estimator(_data_dependent_model_fn, model_dir=str(tmp_path / "model"))
    estimator.train(ee.inputs.numpy_input_fn({"x": x}, x.sum(1), batch_size=4, num_epochs=None, shuffle=False), steps=1)
    with pytest.raises(ValueError, match=r"Cannot export this model to ONNX: the ONNX model is converted from "
                                         r"the torch\.export program, and torch\.export failed: "):
        estimator.export_saved_model(str(tmp_path / "export"),
                                     export_lib.build_raw_serving_input_receiver_fn({"x": x[:2]}), format="onnx")
    assert [p for p in os.listdir(tmp_path / "export")] == []  # nothing half-written


def test_a_static_batch_export(tmp_path):
    x = np.random.RandomState(1).randn(8, 3).astype(np.float32)
    estimator = ee.Estimator(_custom_model_fn, model_dir=str(tmp_path / "model"))
    estimator.train(ee.inputs.numpy_input_fn({"x": x}, x.sum(1), batch_size=4, num_epochs=None, shuffle=False), steps=2)
    receiver = export_lib.build_raw_serving_input_receiver_fn({"x": x[:4]}, default_batch_size=4)
    path = estimator.export_saved_model(str(tmp_path / "export"), receiver, format="onnx")
    expected = next(estimator.predict(ee.inputs.numpy_input_fn({"x": x[4:]}, batch_size=4, shuffle=False),
                                      yield_single_examples=False))
    np.testing.assert_allclose(_onnx_outputs(path, {"x": x[4:]})["mean"], expected["mean"], rtol=1e-5, atol=1e-5)


def test_onnxruntime_loading_needs_an_onnx_export(tmp_path):
    x = np.random.RandomState(0).randn(8, 3).astype(np.float32)
    estimator = ee.Estimator(_custom_model_fn, model_dir=str(tmp_path / "model"))
    estimator.train(ee.inputs.numpy_input_fn({"x": x}, x.sum(1), batch_size=4, num_epochs=None, shuffle=False), steps=1)
    path = estimator.export_saved_model(str(tmp_path / "export"),
                                        export_lib.build_raw_serving_input_receiver_fn({"x": x[:2]}))
    with pytest.raises(ValueError, match=r"has no ONNX model; export it with export_saved_model\(\.\.\., format='onnx'\)"):
        export_lib.load(path, runtime="onnxruntime")
    with pytest.raises(ValueError, match=r"runtime must be 'torch' or 'onnxruntime', given: 'tvm'"):
        export_lib.load(path, runtime="tvm")


def test_unknown_format_is_refused(tmp_path):
    estimator = ee.Estimator(_custom_model_fn, model_dir=str(tmp_path / "model"))
    with pytest.raises(ValueError, match=r"format must be one of \['torch.export', 'onnx'\], given: 'tflite'"):
        estimator.export_saved_model(str(tmp_path / "export"),
                                     export_lib.build_raw_serving_input_receiver_fn({"x": np.ones((2, 3), np.float32)}),
                                     format="tflite")
