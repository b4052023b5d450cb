"""Hand-written serving_input_fns with string placeholders and CSV lines (TF's
``tf.compat.v1.placeholder(tf.string, [None])`` and ``tf.io.decode_csv``): exported, loaded, and
served equal to the estimator's own predict() on the same rows."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

import estimator_engine as ee
from estimator_engine import export as export_lib

fc = ee.feature_column
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "decode_csv"

DAYS = ["Mon", "Tue", "Wed"]
COLUMNS = ["fare", "dayofweek", "hour", "city", "distance"]  # fare: the label
DEFAULTS = [[0.0], ["Sun"], [0], ["nowhere"], [1.0]]


def _rows(rows: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.RandomState(seed)
    return {"dayofweek": rng.choice([*DAYS, "Sat"], rows).astype(object),
            "hour": rng.randint(0, 24, rows).astype(np.int64),
            "city": rng.choice(["a", "b", "c", "d"], rows).astype(object),
            "distance": rng.uniform(0, 10, rows).astype(np.float32)}


def _regressor(model_dir: str) -> ee.DNNLinearCombinedRegressor:
    day = fc.categorical_column_with_vocabulary_list("dayofweek", DAYS, num_oov_buckets=1)
    hour = fc.categorical_column_with_identity("hour", 24)
    city = fc.categorical_column_with_hash_bucket("city", 5)
    distance = fc.numeric_column("distance")
    return ee.DNNLinearCombinedRegressor(
        model_dir, linear_feature_columns=[day, hour, fc.crossed_column([day, "city"], 7)],
        dnn_feature_columns=[distance, fc.indicator_column(day), fc.embedding_column(city, 2)],
        dnn_hidden_units=[4], config=ee.RunConfig(tf_random_seed=1))


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    estimator = _regressor(str(tmp_path_factory.mktemp("model")))
    features = _rows(64, 0)
    labels = (features["distance"] * 2.5 + (features["dayofweek"] == "Mon")).astype(np.float32)
    estimator.train(ee.inputs.numpy_input_fn(features, labels, batch_size=16, num_epochs=None, shuffle=False),
                    steps=20)
    serving = _rows(9, 1)
    serving["dayofweek"][0] = "never-seen"  # OOV
    expected = np.array([p["predictions"] for p in estimator.predict(
        ee.inputs.numpy_input_fn(serving, batch_size=9, shuffle=False))])
    return estimator, serving, expected


def _placeholder_receiver_fn():
    # The TF program:
    #   placeholders = {'dayofweek': tf.compat.v1.placeholder(tf.string, [None]),
    #                   'hour': tf.compat.v1.placeholder(tf.int64, [None]), ...}
    #   features = {key: tf.expand_dims(tensor, -1) for key, tensor in placeholders.items()}
    #   return tf.estimator.export.ServingInputReceiver(features, placeholders)
    placeholders = {"dayofweek": export_lib.placeholder("string", [None]),
                    "hour": export_lib.placeholder("tf.int64", [None]),
                    "city": export_lib.placeholder(str, [None]),
                    "distance": export_lib.placeholder(torch.float32, [None])}
    features = {key: (np.expand_dims(value, -1) if isinstance(value, np.ndarray) else value.unsqueeze(-1))
                for key, value in placeholders.items()}
    return export_lib.ServingInputReceiver(features, placeholders)


def test_placeholder_gives_example_inputs_of_the_dtype_and_shape():
    assert export_lib.placeholder(torch.float32, [None, 3]).shape == (2, 3)
    assert export_lib.placeholder("tf.int64", [None]).dtype == torch.int64
    strings = export_lib.placeholder("string", [None, 2])
    assert strings.dtype == object and strings.shape == (2, 2) and strings.tolist() == [["", ""], ["", ""]]
    with pytest.raises(ValueError, match=r"placeholder needs a shape with the batch dimension first"):
        export_lib.placeholder("string")
    with pytest.raises(ValueError, match=r"dimension 1 must be a positive int \(only dimension 0, the batch"):
        export_lib.placeholder("float32", [None, None])
    with pytest.raises(ValueError, match=r"unsupported dtype 'complex'"):
        export_lib.placeholder("complex", [None])


def test_string_placeholders_export_and_serve_like_predict(trained, tmp_path):
    estimator, serving, expected = trained
    path = estimator.export_saved_model(str(tmp_path / "export"), _placeholder_receiver_fn)
    signature = json.loads((Path(path) / "signature.json").read_text())
    assert signature["inputs"]["dayofweek"] == {"dtype": "string", "shape": [-1]}
    assert signature["inputs"]["distance"] == {"dtype": "float32", "shape": [-1]}
    model = export_lib.load(path, signature="predict")
    got = model({"dayofweek": list(serving["dayofweek"]), "hour": serving["hour"],
                 "city": [c.encode() for c in serving["city"]],  # bytes, as TF Serving passes strings
                 "distance": serving["distance"]})["predictions"]
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-5, atol=1e-6)


def test_string_placeholders_fed_to_the_features_unchanged(trained, tmp_path):
    estimator, serving, expected = trained

    def receiver_fn():
        placeholders = {"dayofweek": export_lib.placeholder("string", [None, 1]),
                        "hour": export_lib.placeholder("int64", [None, 1]),
                        "city": export_lib.placeholder("string", [None, 1]),
                        "distance": export_lib.placeholder("float32", [None, 1])}
        return export_lib.ServingInputReceiver(placeholders, placeholders)

    model = export_lib.load(estimator.export_saved_model(str(tmp_path / "export"), receiver_fn), signature="predict")
    got = model({key: np.asarray(value).reshape(-1, 1) for key, value in serving.items()})["predictions"]
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-5, atol=1e-6)


def test_numeric_placeholders_reshaped_in_the_program(tmp_path):
    # No categorical column: the program itself takes the placeholders and reshapes them
    # ([batch] -> [batch, 1], TF's tf.expand_dims) before the model.
    estimator = ee.DNNRegressor([3], [fc.numeric_column("a"), fc.numeric_column("b", shape=(2,))],
                                str(tmp_path / "m"), config=ee.RunConfig(tf_random_seed=2))
    rng = np.random.RandomState(3)
    features = {"a": rng.normal(size=(16, 1)).astype(np.float32), "b": rng.normal(size=(16, 2)).astype(np.float32)}
    estimator.train(ee.inputs.numpy_input_fn(features, features["a"] * 2, batch_size=8, num_epochs=None,
                                             shuffle=False), steps=5)
    expected = np.array([p["predictions"] for p in estimator.predict(
        ee.inputs.numpy_input_fn(features, batch_size=16, shuffle=False))])

    def receiver_fn():
        placeholders = {"a": export_lib.placeholder(torch.float32, [None]),
                        "b": export_lib.placeholder(torch.float32, [None, 2])}
        return export_lib.ServingInputReceiver({"a": placeholders["a"].unsqueeze(-1), "b": placeholders["b"]},
                                               placeholders)

    path = estimator.export_saved_model(str(tmp_path / "export"), receiver_fn)
    assert not (Path(path) / "preprocessing.json").exists()
    got = export_lib.load(path, signature="predict")({"a": features["a"][:, 0], "b": features["b"]})
    np.testing.assert_allclose(got["predictions"].numpy(), expected, rtol=1e-5, atol=1e-6)


def test_csv_line_receiver_exports_and_serves_like_predict(trained, tmp_path):
    estimator, serving, expected = trained
    lines = [f"{9.5 * i},{day},{hour},\"{city}\",{distance!r}" for i, (day, hour, city, distance) in enumerate(
        zip(serving["dayofweek"], serving["hour"], serving["city"], serving["distance"].tolist()))]
    receiver_fn = export_lib.build_csv_serving_input_receiver_fn(COLUMNS, DEFAULTS, exclude=["fare"])
    path = estimator.export_saved_model(str(tmp_path / "export"), receiver_fn)
    signature = json.loads((Path(path) / "signature.json").read_text())
    assert signature["inputs"] == {"csv_row": {"dtype": "string", "shape": [-1]}}
    model = export_lib.load(path, signature="predict")
    for given in ({"csv_row": lines}, lines, np.array([line.encode() for line in lines], dtype=object)):
        got = model(given)["predictions"]
        np.testing.assert_allclose(got.numpy(), expected, rtol=1e-5, atol=1e-6)
    # An empty field takes its default: as predict() on the default values.
    defaults = {"dayofweek": np.array(["Sun"], dtype=object), "hour": np.array([0]),
                "city": np.array(["nowhere"], dtype=object), "distance": np.array([1.0], np.float32)}
    want = next(estimator.predict(ee.inputs.numpy_input_fn(defaults, batch_size=1, shuffle=False)))
    np.testing.assert_allclose(model([",,,,"])["predictions"].numpy()[0], want["predictions"], rtol=1e-5)
    with pytest.raises(ValueError, match=r"decode_csv: expect 5 fields but have 2 in record 0: '1,Mon'"):
        model(["1,Mon"])
    with pytest.raises(ValueError, match=r"Missing input 'csv_row': this export takes CSV lines of "
                                         r"\['fare', 'dayofweek', 'hour', 'city', 'distance'\]"):
        model({"line": lines})


def test_decode_csv_equals_tensorflow():
    # tensorflow 2.15's tf.io.decode_csv on the same lines (make_decode_csv.py beside the data).
    reference = json.loads((FIXTURES / "decode_csv.json").read_text())
    for case in reference["cases"]:
        got = ee.export.decode_csv(case["records"], case["record_defaults"], field_delim=case["field_delim"],
                                   na_value=case["na_value"], select_cols=case["select_cols"])
        assert len(got) == len(case["columns"])
        for column, want in zip(got, case["columns"]):
            values = column.tolist()
            if want["dtype"] == "string":
                assert values == want["values"]
            else:
                np.testing.assert_allclose(values, want["values"], rtol=1e-6)
                assert str(column.dtype).removeprefix("torch.") == {"float32": "float32",
                                                                     "int32": "int64"}[want["dtype"]]
    for case in reference["errors"]:
        with pytest.raises(ValueError, match=case["engine_message"]):
            ee.export.decode_csv(case["records"], case["record_defaults"])


def test_bad_receivers_are_refused_with_what_to_do():
    with pytest.raises(ValueError, match=r"Serving inputs must be torch tensors or string placeholders"):
        export_lib.ServingInputReceiver({"x": [1.0]}, {"x": [1.0]})
    with pytest.raises(ValueError, match=r"exclude must list column names \(e.g. the label\), given \['y'\]"):
        export_lib.build_csv_serving_input_receiver_fn(["x"], [0.0], exclude=["y"])
    with pytest.raises(ValueError, match=r"record_defaults has 1 entries for 2 column_names"):
        export_lib.build_csv_serving_input_receiver_fn(["x", "y"], [0.0])
    with pytest.raises(ValueError, match=r"record_defaults\[0\] is empty, which gives no dtype"):
        export_lib.build_csv_serving_input_receiver_fn(["x"], [[]])
    text = export_lib.placeholder("string", [None])
    with pytest.raises(ValueError, match=r"A string placeholder must go through a ServingInputReceiver's features"):
        export_lib.TensorServingInputReceiver(text, {"t": text})


def test_a_transposed_view_is_not_taken_for_the_input(trained, tmp_path):
    estimator = trained[0]

    def receiver_fn():
        grid = export_lib.placeholder(torch.float32, [None, 2, 3])
        return export_lib.ServingInputReceiver({"g": grid.transpose(1, 2)}, {"g": grid})

    with pytest.raises(ValueError, match=r"ServingInputReceiver feature 'g' is not one of the receiver_tensors "
                                         r"\['g'\]. Each feature must be a receiver tensor itself \(the same object, "
                                         r"or a reshaped view of it such as x.unsqueeze\(-1\)\)"):
        estimator.export_saved_model(str(tmp_path / "export"), receiver_fn)
    assert not (tmp_path / "export").exists() or not any((tmp_path / "export").iterdir())


def test_a_string_feature_read_directly_by_the_model_fn_is_refused(tmp_path):
    def model_fn(features, labels, mode):
        net = ee.get_module("net", lambda: torch.nn.Linear(1, 1))
        x = features["x"]
        out = net(x if isinstance(x, torch.Tensor) else torch.zeros(len(x), 1))
        if mode == ee.ModeKeys.PREDICT:
            return ee.EstimatorSpec(mode, predictions={"y": out})
        loss = ((out - labels) ** 2).mean()
        optimizer = ee.get_optimizer("sgd", lambda: torch.optim.SGD(ee.trainable_variables(), lr=0.1))
        return ee.EstimatorSpec(mode, loss=loss, train_op=ee.minimize(optimizer, loss))

    estimator = ee.Estimator(model_fn, str(tmp_path / "m"))
    estimator.train(lambda: ({"x": torch.ones(2, 1)}, torch.ones(2, 1)), steps=1)

    def receiver_fn():
        x = export_lib.placeholder("string", [None, 1])
        return export_lib.ServingInputReceiver({"x": x}, {"x": x})

    with pytest.raises(ValueError, match=r"The model_fn reads the string feature 'x' directly"):
        estimator.export_saved_model(str(tmp_path / "export"), receiver_fn)
