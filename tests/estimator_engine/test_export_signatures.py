"""Exported classifier signatures carry ``classes`` (strings) and dtypes as TF 2.15's heads export them."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

import estimator_engine as ee
from estimator_engine.export import build_raw_serving_input_receiver_fn
from estimator_engine.export_output import ClassificationOutput, PredictOutput, StringLookup

_GEN = torch.Generator().manual_seed(0)
X = {"x1": torch.randn(24, generator=_GEN), "x2": torch.randn(24, generator=_GEN)}


def _trained(tmp_path, **kwargs):
    columns = [ee.feature_column.numeric_column("x1"), ee.feature_column.numeric_column("x2")]
    classifier = ee.DNNClassifier(hidden_units=[4], feature_columns=columns, model_dir=str(tmp_path / "model"),
                                  config=ee.RunConfig(tf_random_seed=1), **kwargs)
    n_classes = kwargs.get("n_classes", 2)
    ids = ((X["x1"] > 0).long() + (X["x2"] > 0).long()) % n_classes
    vocabulary = kwargs.get("label_vocabulary")
    labels = np.array(vocabulary)[ids.numpy()] if vocabulary else ids
    input_fn = ee.inputs.numpy_input_fn(X, labels, batch_size=8, num_epochs=None, shuffle=False)
    classifier.train(input_fn, steps=3)
    return classifier, input_fn


def _served_in_fresh_process(tmp_path, path: str) -> dict:
    """Every signature's outputs of the export, served by ``load`` in a new interpreter (pickled)."""
    np.save(tmp_path / "x1.npy", X["x1"].numpy())
    np.save(tmp_path / "x2.npy", X["x2"].numpy())
    script = textwrap.dedent(f'''
        import json, pickle, sys
        import numpy as np
        import torch
        from estimator_engine import export
        features = {{"x1": np.load("x1.npy"), "x2": np.load("x2.npy")}}
        signatures = json.load(open({path!r} + "/signature.json"))["signatures"]
        served = {{}}
        for key in signatures:
            outputs = export.load({path!r}, signature=key)(features)
            served[key] = {{k: v.numpy() if isinstance(v, torch.Tensor) else v for k, v in outputs.items()}}
        pickle.dump(served, open("served.pkl", "wb"))
    ''')
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=180,
                            cwd=str(tmp_path), env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert result.returncode == 0, result.stderr
    with open(tmp_path / "served.pkl", "rb") as f:
        return pickle.load(f)  # written by this test, above


def _assert_same(served: np.ndarray, expected) -> None:
    expected = expected.numpy() if isinstance(expected, torch.Tensor) else np.asarray(expected)
    assert served.dtype == expected.dtype and served.shape == expected.shape, (served.dtype, expected.dtype,
                                                                               served.shape, expected.shape)
    if expected.dtype == object:
        assert served.tolist() == expected.tolist()
    else:
        np.testing.assert_allclose(served, expected, atol=1e-6)


@pytest.mark.parametrize("kwargs, names", [
    ({"n_classes": 3, "label_vocabulary": ["a", "b", "c"]}, [b"a", b"b", b"c"]),
    ({}, [b"0", b"1"]),
])
def test_served_classes_and_dtypes_equal_predict_in_a_fresh_process(tmp_path, kwargs, names):
    classifier, _ = _trained(tmp_path, **kwargs)
    path = classifier.export_saved_model(str(tmp_path / "export"), build_raw_serving_input_receiver_fn(
        {"x1": X["x1"][:1], "x2": X["x2"][:1]}))
    meta = json.loads(open(os.path.join(path, "signature.json")).read())
    assert not meta.get("fallback_reason"), meta.get("fallback_reason")
    expected = next(classifier.predict(ee.inputs.numpy_input_fn(X, batch_size=24, shuffle=False),
                                       yield_single_examples=False))
    served = _served_in_fresh_process(tmp_path, path)
    binary = not kwargs
    assert set(served) == {"serving_default", "classification", "predict"} | ({"regression"} if binary else set())
    for key in ("serving_default", "classification"):
        assert set(served[key]) == {"scores", "classes"}
        _assert_same(served[key]["scores"], expected["probabilities"])
        _assert_same(served[key]["classes"], expected["all_classes"])  # the names tiled per example, as TF
        assert served[key]["classes"][0].tolist() == names
        assert meta["signatures"][key]["method"] == "classify"
        assert meta["signatures"][key]["outputs"]["classes"]["dtype"] == "string"
        assert meta["signatures"][key]["outputs"]["classes"]["shape"] == [-1, len(names)]
        assert meta["signatures"][key]["outputs"]["scores"]["dtype"] == "float32"
    assert set(served["predict"]) == set(expected)
    for name, value in expected.items():
        _assert_same(served["predict"][name], value)
    dtypes = {name: info["dtype"] for name, info in meta["signatures"]["predict"]["outputs"].items()}
    assert dtypes["classes"] == dtypes["all_classes"] == "string"
    assert dtypes["class_ids"] == "int64" and dtypes["all_class_ids"] == "int32"
    assert meta["signatures"]["predict"]["outputs"]["classes"]["lookup"]["vocabulary"] == [n.decode() for n in names]
    if binary:
        _assert_same(served["regression"]["outputs"], expected["logistic"])
        assert meta["signatures"]["regression"]["method"] == "regress"


def test_multi_label_head_classification_classes_are_the_names_tiled():
    head = ee.MultiLabelHead(3, label_vocabulary=["x", "y", "z"]) if hasattr(ee, "MultiLabelHead") else None
    if head is None:
        from estimator_engine.canned.heads import MultiLabelHead
        head = MultiLabelHead(3, label_vocabulary=["x", "y", "z"])
    predictions = head.predictions(torch.zeros(2, 3))
    outputs = head._export_outputs(predictions)
    classes = outputs["classification"].classes
    assert isinstance(classes, StringLookup)
    assert classes.lookup(classes.ids).tolist() == predictions["classes"].tolist() == [[b"x", b"y", b"z"]] * 2
    assert classes.ids.dtype == torch.int32


def test_string_lookup_validates_and_outputs_accept_it():
    lookup = StringLookup(torch.tensor([[1], [0]]), ["no", b"yes"])
    assert lookup.lookup(torch.tensor([[1], [0]])).tolist() == [[b"yes"], [b"no"]]
    assert ClassificationOutput(classes=lookup).as_signature_outputs()["classes"] is lookup
    assert PredictOutput({"classes": lookup}).outputs["classes"] is lookup
    with pytest.raises(ValueError, match=r"StringLookup ids must be an integer tensor, given dtype torch\.float32"):
        StringLookup(torch.zeros(2), ["a"])
    with pytest.raises(ValueError, match="StringLookup vocabulary must be a non-empty list of strings"):
        StringLookup(torch.zeros(2, dtype=torch.int64), "ab")
    with pytest.raises(ValueError, match="StringLookup vocabulary entries must be str or bytes, given: 3"):
        StringLookup(torch.zeros(2, dtype=torch.int64), ["a", 3])


@pytest.mark.parametrize("kwargs", [{"n_classes": 3}, {}])
def test_evaluate_loss_and_average_loss_have_the_same_type_and_dtype(tmp_path, kwargs):
    classifier, input_fn = _trained(tmp_path, **kwargs)
    results = classifier.evaluate(input_fn, steps=2)
    # Both the same type (TF: both float32 scalars); this engine returns both as Python floats.
    assert type(results["loss"]) is type(results["average_loss"]) is float
    assert np.asarray(results["loss"]).dtype == np.asarray(results["average_loss"]).dtype
