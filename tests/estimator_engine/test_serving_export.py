"""The canonical deployment: wide & deep on census-like data with string and categorical columns,
exported, loaded in a fresh process, serving raw records (dicts / JSON lines) exactly like predict()."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pandas as pd
import pytest
import torch

import estimator_engine as ee
from estimator_engine import export as export_lib
from estimator_engine import serving

fc = ee.feature_column

EDUCATION = ["Bachelors", "HS-grad", "Masters", "Doctorate", "Some-college"]
OCCUPATIONS = ["Sales", "Tech-support", "Exec-managerial", "Craft-repair", "Adm-clerical", "Farming-fishing"]
RELATIONSHIPS = ["Husband", "Wife", "Own-child", "Unmarried"]


def _census_frame(rows: int, seed: int) -> tuple[pd.DataFrame, pd.Series]:
    rng = np.random.RandomState(seed)
    frame = pd.DataFrame({
        "age": rng.randint(17, 80, rows).astype(np.float32),
        "hours_per_week": rng.uniform(5, 70, rows).astype(np.float32),
        "education": rng.choice(EDUCATION, rows),
        "occupation": rng.choice(OCCUPATIONS, rows),
        "relationship": rng.choice(RELATIONSHIPS, rows),
        "workclass_id": rng.randint(0, 5, rows).astype(np.int64),
    })
    label = ((frame["age"] > 35) & frame["education"].isin(["Bachelors", "Masters", "Doctorate"])
             | (frame["hours_per_week"] > 50)).astype(np.int64)
    return frame, label


def _wide_and_deep_columns(vocab_file: str) -> tuple[list, list]:
    education = fc.categorical_column_with_vocabulary_list("education", EDUCATION[:4], num_oov_buckets=2)
    occupation = fc.categorical_column_with_hash_bucket("occupation", hash_bucket_size=50)
    relationship = fc.categorical_column_with_vocabulary_file("relationship", vocab_file, num_oov_buckets=1)
    workclass = fc.categorical_column_with_identity("workclass_id", num_buckets=6, default_value=5)
    age = fc.numeric_column("age")
    age_buckets = fc.bucketized_column(age, [25, 35, 45, 55, 65])
    wide = [education, occupation, relationship, workclass, age_buckets,
            fc.crossed_column([age_buckets, "education", "occupation"], hash_bucket_size=200)]
    deep = [age, fc.numeric_column("hours_per_week"), fc.indicator_column(education),
            fc.indicator_column(relationship), fc.embedding_column(occupation, dimension=4),
            fc.embedding_column(workclass, dimension=2)]
    return wide, deep


def _serving_rows() -> pd.DataFrame:
    """Rows to serve, with values never seen in training (OOV) in every string column and an
    out-of-range identity id."""
    frame, _ = _census_frame(24, seed=7)
    frame.loc[0, "education"] = "Preschool"
    frame.loc[1, "occupation"] = "Astronaut"
    frame.loc[2, "relationship"] = "Other-relative"
    frame.loc[3, "workclass_id"] = 42
    frame.loc[4, ["education", "occupation", "relationship"]] = ["12th", "Priv-house-serv", "Cousin"]
    return frame


def _records(frame: pd.DataFrame) -> list[dict]:
    return [{key: (value.item() if hasattr(value, "item") else value) for key, value in row.items()}
            for row in frame.to_dict(orient="records")]


@pytest.fixture(scope="module")
def wide_and_deep(tmp_path_factory):
    root = tmp_path_factory.mktemp("wide_and_deep")
    vocab_file = root / "relationship.txt"
    vocab_file.write_text("\n".join(RELATIONSHIPS[:3]) + "\n")
    wide, deep = _wide_and_deep_columns(str(vocab_file))
    estimator = ee.DNNLinearCombinedClassifier(
        model_dir=str(root / "model"), linear_feature_columns=wide, dnn_feature_columns=deep,
        dnn_hidden_units=[16, 8], config=ee.RunConfig(tf_random_seed=3))
    frame, label = _census_frame(256, seed=0)
    estimator.train(ee.inputs.pandas_input_fn(frame, label, batch_size=32, num_epochs=None, shuffle=True), steps=30)
    spec = serving.make_parse_example_spec(wide + deep)
    path = estimator.export_saved_model(str(root / "export"), export_lib.build_parsing_serving_input_receiver_fn(spec))
    return estimator, path, wide + deep, root


def _predict(estimator, frame, checkpoint_path=None):
    return next(estimator.predict(ee.inputs.pandas_input_fn(frame, batch_size=len(frame), shuffle=False),
                                  yield_single_examples=False, checkpoint_path=checkpoint_path))


def test_export_holds_a_json_preprocessing_stage_and_a_torch_export_program(wide_and_deep):
    _, path, _, _ = wide_and_deep
    signature = json.loads(open(os.path.join(path, "signature.json")).read())
    assert signature["program_format"] == "torch.export" and signature["fallback_reason"] is None
    assert signature["format_version"] == 2 and signature["preprocessing"] == "preprocessing.json"
    assert signature["inputs"]["education"] == {"dtype": "string", "shape": [-1, -1], "parse": "VarLenFeature"}
    assert signature["inputs"]["age"] == {"dtype": "float32", "shape": [-1, 1], "parse": "FixedLenFeature"}
    assert sorted(signature["program_inputs"]) == [
        "age", "hours_per_week", "ids/age_bucketized_X_education_X_occupation", "ids/education",
        "ids/occupation", "ids/relationship", "ids/workclass_id"]
    assert signature["program_inputs"]["ids/education"] == {"dtype": "int64", "shape": [-1, -1]}
    stage = json.loads(open(os.path.join(path, "preprocessing.json")).read())
    kinds = {name: column["kind"] for name, column in stage["categorical_ids"].items()}
    assert kinds == {"ids/age_bucketized_X_education_X_occupation": "crossed", "ids/education": "vocabulary_list",
                     "ids/occupation": "hash_bucket", "ids/relationship": "vocabulary_file",
                     "ids/workclass_id": "identity"}
    vocab_copy = stage["categorical_ids"]["ids/relationship"]["vocabulary_file"]
    assert not os.path.isabs(vocab_copy)
    assert open(os.path.join(path, vocab_copy)).read().split() == RELATIONSHIPS[:3]
    assert stage["parse_spec"]["workclass_id"] == {"kind": "VarLenFeature", "dtype": "int64"}


def test_served_records_equal_predict_in_a_fresh_process(wide_and_deep, tmp_path):
    """JSON lines in a fresh process (no estimator, no training code run, no pickle) give predict()'s
    outputs to 1e-6 with its dtypes, for every signature, including OOV strings and ids."""
    estimator, path, _, _ = wide_and_deep
    frame = _serving_rows()
    expected = _predict(estimator, frame)
    (tmp_path / "rows.jsonl").write_text("\n".join(json.dumps(r) for r in _records(frame)) + "\n")
    script = textwrap.dedent(f'''
        import json
        from estimator_engine import export
        lines = open("rows.jsonl").read()
        out = {{}}
        for key in ("serving_default", "predict"):
            for name, value in export.load({path!r}, signature=key)(lines).items():
                values = value.astype(str).tolist() if value.dtype == object else value.tolist()  # bytes
                out[key + "/" + name] = [str(value.dtype).removeprefix("torch."), values]
        print(json.dumps(out))
    ''')
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                            cwd=str(tmp_path), env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert result.returncode == 0, result.stderr[-3000:]
    served = json.loads(result.stdout.strip().splitlines()[-1])
    assert sorted(served) == ["predict/all_class_ids", "predict/all_classes", "predict/class_ids",
                              "predict/classes", "predict/logistic", "predict/logits", "predict/probabilities",
                              "serving_default/classes", "serving_default/scores"]
    for key, (dtype, values) in served.items():
        name = {"serving_default/scores": "probabilities",
                "serving_default/classes": "all_classes"}.get(key, key.split("/")[1])
        assert dtype == str(expected[name].dtype), key
        if expected[name].dtype == object:  # class names: bytes, as predict() returns them
            assert values == expected[name].astype(str).tolist(), key
            continue
        np.testing.assert_allclose(np.array(values, dtype=expected[name].dtype), expected[name], rtol=0, atol=1e-6,
                                   err_msg=key)
    # the OOV rows really reached OOV buckets and the default id, rather than failing or being dropped
    stage = export_lib.load(path).preprocessing
    ids = stage(export_lib.load(path).parse(_records(frame.iloc[:5])))
    assert ids["ids/education"][0, 0].item() >= 4 and ids["ids/relationship"][2, 0].item() == 3
    assert ids["ids/workclass_id"][3, 0].item() == 5


def test_dicts_of_raw_values_and_single_rows_serve_like_predict(wide_and_deep):
    estimator, path, _, _ = wide_and_deep
    model = export_lib.load(path, signature="predict")
    frame = _serving_rows()
    expected = _predict(estimator, frame)
    by_columns = model({key: frame[key].to_numpy() for key in frame})
    np.testing.assert_allclose(by_columns["logits"].numpy(), expected["logits"], atol=1e-6)
    for row in (0, 4, 9):
        single = model(_records(frame.iloc[row:row + 1]))
        np.testing.assert_allclose(single["probabilities"].numpy(), expected["probabilities"][row:row + 1], atol=1e-6)
    one_dict = model(_records(frame.iloc[:1])[0])
    np.testing.assert_allclose(one_dict["logits"].numpy(), expected["logits"][:1], atol=1e-6)
    with pytest.raises(ValueError, match=r"Missing inputs \['occupation'\]; this export expects"):
        model({key: frame[key].to_numpy() for key in frame if key != "occupation"})


def test_multivalent_records_serve_like_the_columns(wide_and_deep):
    """A VarLenFeature may hold several values per record: the id inputs have a dynamic width."""
    estimator, path, _columns, _ = wide_and_deep
    model = export_lib.load(path, signature="predict")
    records = _records(_serving_rows().iloc[:3])
    records[0]["education"] = ["Masters", "Doctorate", "Preschool"]
    records[1]["occupation"] = []
    parsed = model.parse(records)
    assert parsed["education"].shape == (3, 3)
    expected = next(estimator.predict(lambda: {k: (v if v.dtype == object else torch.from_numpy(v))
                                               for k, v in parsed.items()}, yield_single_examples=False))
    served = model(records)
    np.testing.assert_allclose(served["logits"].numpy(), expected["logits"], atol=1e-6)


def test_latest_exporter_in_train_and_evaluate_exports_the_wide_and_deep_model(tmp_path):
    vocab_file = tmp_path / "relationship.txt"
    vocab_file.write_text("\n".join(RELATIONSHIPS[:3]) + "\n")
    wide, deep = _wide_and_deep_columns(str(vocab_file))
    estimator = ee.DNNLinearCombinedClassifier(
        model_dir=str(tmp_path / "model"), linear_feature_columns=wide, dnn_feature_columns=deep,
        dnn_hidden_units=[8], config=ee.RunConfig(tf_random_seed=1, save_checkpoints_steps=5,
                                                  save_checkpoints_secs=None))
    frame, label = _census_frame(128, seed=1)
    exporter = ee.exporter.LatestExporter(
        "latest", export_lib.build_parsing_serving_input_receiver_fn(serving.make_parse_example_spec(wide + deep)),
        exports_to_keep=1)
    metrics, exports = ee.train_and_evaluate(
        estimator, ee.TrainSpec(ee.inputs.pandas_input_fn(frame, label, batch_size=32, num_epochs=None,
                                                          shuffle=True), max_steps=10),
        ee.EvalSpec(ee.inputs.pandas_input_fn(frame, label, batch_size=64, shuffle=False), steps=None,
                    throttle_secs=0, exporters=exporter))
    assert metrics["global_step"] == 10 and len(exports) == 1
    assert os.listdir(tmp_path / "model" / "export" / "latest") == [os.path.basename(exports[0])]
    rows = _serving_rows()
    served = export_lib.load(exports[0])(_records(rows))["scores"]
    np.testing.assert_allclose(served.numpy(), _predict(estimator, rows)["probabilities"], atol=1e-6)


def test_raw_receiver_with_an_identity_column_exports_its_ids_outside_the_program(tmp_path):
    """Int ids fed through build_raw_serving_input_receiver_fn: once refused (the ids were read in
    numpy and a trace baked them in), now mapped by the preprocessing stage."""
    rng = np.random.RandomState(0)
    cat, x = rng.randint(0, 3, 200), rng.randn(200).astype("float32")
    est = ee.DNNClassifier([4], [fc.numeric_column("x"), fc.indicator_column(fc.categorical_column_with_identity("cat", 3))],
                           model_dir=str(tmp_path / "m"), config=ee.RunConfig(tf_random_seed=0))
    est.train(ee.inputs.numpy_input_fn({"x": x, "cat": cat}, (cat == 1).astype(int), batch_size=32,
                                       num_epochs=None, shuffle=True), steps=5)
    receiver = export_lib.build_raw_serving_input_receiver_fn({"x": torch.zeros(1), "cat": torch.zeros(1, dtype=torch.long)})
    path = export_lib.export_saved_model(est, str(tmp_path / "e"), receiver)
    signature = json.loads(open(os.path.join(path, "signature.json")).read())
    assert signature["program_format"] == "torch.export"
    assert signature["inputs"] == {"x": {"dtype": "float32", "shape": [-1]}, "cat": {"dtype": "int64", "shape": [-1]}}
    expected = next(est.predict(ee.inputs.numpy_input_fn({"x": x, "cat": cat}, batch_size=200, shuffle=False),
                                yield_single_examples=False))["probabilities"]
    served = export_lib.load(path)({"x": x, "cat": cat})["scores"]
    np.testing.assert_allclose(served.numpy(), expected, atol=1e-6)
    with pytest.raises(ValueError, match=r"was not made with build_parsing_serving_input_receiver_fn"):
        export_lib.load(path)([{"x": 1.0, "cat": 2}])


def _string_reading_model_fn(features, labels, mode):
    column = fc.categorical_column_with_hash_bucket("city", 10)
    layer = ee.get_module("input", lambda: fc.DenseFeatures([fc.indicator_column(column)]))
    net = ee.get_module("net", lambda: torch.nn.Linear(10, 1))
    y = net(layer(features)).squeeze(-1)
    y = y + torch.tensor([float(len(s)) for s in np.asarray(features["city"]).ravel()])
    if mode == ee.ModeKeys.PREDICT:
        return ee.EstimatorSpec(mode, predictions={"y": y})
    loss = torch.nn.functional.mse_loss(y, labels)
    opt = ee.get_optimizer("sgd", lambda: torch.optim.SGD(net.parameters(), lr=0.01))
    return ee.EstimatorSpec(mode, loss=loss, train_op=ee.minimize(opt, loss))


def test_a_model_fn_reading_strings_itself_is_refused_with_the_reason(tmp_path):
    est = ee.Estimator(_string_reading_model_fn, model_dir=str(tmp_path / "m"))
    cities = np.array(["Paris", "Lima", "Oslo", "Rome"], dtype=object)
    est.train(ee.inputs.numpy_input_fn({"city": cities}, np.ones(4, np.float32), batch_size=4, shuffle=False), steps=1)
    receiver_fn = export_lib.build_parsing_serving_input_receiver_fn({"city": export_lib.VarLenFeature(str)})
    with pytest.raises(ValueError, match=r"The model_fn reads the string feature 'city' directly, which an exported "
                                         r"program cannot take as input"):
        export_lib.export_saved_model(est, str(tmp_path / "e"), receiver_fn)
    assert os.listdir(tmp_path / "e") == []


def test_weighted_categorical_columns_are_refused_by_name(tmp_path):
    weighted = fc.weighted_categorical_column(fc.categorical_column_with_identity("tag", 4), "tag_weight")
    est = ee.LinearRegressor([weighted], model_dir=str(tmp_path / "m"))
    features = {"tag": np.array([[0], [1], [2], [3]]), "tag_weight": np.ones((4, 1), np.float32)}
    est.train(ee.inputs.numpy_input_fn(features, np.arange(4, dtype=np.float32), batch_size=4, shuffle=False), steps=1)
    receiver_fn = export_lib.build_parsing_serving_input_receiver_fn(serving.make_parse_example_spec([weighted]))
    with pytest.raises(ValueError, match=r"weighted_categorical_column 'tag_weighted_by_tag_weight' cannot be "
                                         r"exported for serving yet"):
        export_lib.export_saved_model(est, str(tmp_path / "e"), receiver_fn)


def test_an_estimator_configured_for_another_device_exports_on_cpu(tmp_path):
    """The program is traced on CPU: features are not moved to the training device (which would
    also turn the export's features mapping into a plain dict and lose the precomputed ids)."""
    column = fc.categorical_column_with_vocabulary_list("job", ["a", "b", "c"], num_oov_buckets=1)
    est = ee.LinearClassifier([column, fc.numeric_column("x")], model_dir=str(tmp_path / "m"))
    jobs = np.array(["a", "b", "c", "d"] * 8, dtype=object)
    x = np.linspace(-1, 1, 32).astype(np.float32)
    est.train(ee.inputs.numpy_input_fn({"job": jobs, "x": x}, (x > 0).astype(int), batch_size=8, shuffle=False), steps=4)
    est._device = torch.device("meta")  # stands for a GPU: any tensor moved there could not be computed on
    receiver_fn = export_lib.build_parsing_serving_input_receiver_fn(serving.make_parse_example_spec([column]) | {
        "x": export_lib.FixedLenFeature([1], torch.float32)})
    path = export_lib.export_saved_model(est, str(tmp_path / "e"), receiver_fn)
    est._device = torch.device("cpu")
    expected = next(est.predict(ee.inputs.numpy_input_fn({"job": jobs, "x": x}, batch_size=32, shuffle=False),
                                yield_single_examples=False))["probabilities"]
    served = export_lib.load(path)([{"job": j, "x": float(v)} for j, v in zip(jobs, x)])["scores"]
    np.testing.assert_allclose(served.numpy(), expected, atol=1e-6)


def _popping_model_fn(features, labels, mode):
    features = dict(features) if mode != ee.ModeKeys.PREDICT else features
    x = features.pop("x")  # a dict method: the export's features mapping has none
    net = ee.get_module("net", lambda: torch.nn.Linear(1, 1))
    y = net(x.reshape(-1, 1)).squeeze(-1)
    if mode == ee.ModeKeys.PREDICT:
        return ee.EstimatorSpec(mode, predictions={"y": y})
    loss = torch.nn.functional.mse_loss(y, labels)
    opt = ee.get_optimizer("sgd", lambda: torch.optim.SGD(net.parameters(), lr=0.1))
    return ee.EstimatorSpec(mode, loss=loss, train_op=ee.minimize(opt, loss))


def test_a_model_fn_using_dict_methods_still_exports_from_raw_tensors(tmp_path):
    est = ee.Estimator(_popping_model_fn, model_dir=str(tmp_path / "m"))
    x = np.linspace(0, 1, 16).astype(np.float32)
    est.train(ee.inputs.numpy_input_fn({"x": x}, 2 * x, batch_size=8, shuffle=False), steps=2)
    path = export_lib.export_saved_model(est, str(tmp_path / "e"),
                                         export_lib.build_raw_serving_input_receiver_fn({"x": torch.zeros(2)}))
    assert not os.path.exists(os.path.join(path, "preprocessing.json"))
    expected = next(est.predict(ee.inputs.numpy_input_fn({"x": x}, batch_size=16, shuffle=False),
                                yield_single_examples=False))["y"]
    np.testing.assert_allclose(export_lib.load(path)({"x": x})["y"].numpy(), expected, atol=1e-6)


def test_raw_receiver_points_string_features_to_the_parsing_receiver():
    with pytest.raises(ValueError, match=r"feature 'job' holds strings, which cannot be a raw serving tensor\. "
                                         r"Serve string features with build_parsing_serving_input_receiver_fn"):
        export_lib.build_raw_serving_input_receiver_fn({"job": np.array(["a", "b"], dtype=object)})
