"""export_saved_model / load: directory contract, errors, and a round trip in a fresh process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

import estimator_engine as ee
from estimator_engine import export as export_lib
from estimator_engine.export import (
    ClassificationOutput,
    PredictOutput,
    RegressionOutput,
    ServingInputReceiver,
    TensorServingInputReceiver,
    build_raw_serving_input_receiver_fn,
    export_saved_model,
)
from estimator_engine.testing import linear_model_fn, make_linear_data

FEATURES, LABELS = make_linear_data(n=64)
rng = np.random.default_rng(0)
X3 = torch.as_tensor(rng.normal(size=(64, 3)), dtype=torch.float32)
Y3 = torch.as_tensor(rng.integers(0, 2, size=64))


def classifier_model_fn(features, labels, mode):
    """A small MLP with batch norm and three export signatures."""
    net = ee.get_module("mlp", lambda: torch.nn.Sequential(
        torch.nn.Linear(3, 8), torch.nn.BatchNorm1d(8), torch.nn.ReLU(), torch.nn.Linear(8, 2)))
    logits = net(features["x"] * features["scale"])
    probabilities = torch.softmax(logits, dim=-1)
    class_ids = logits.argmax(dim=-1)
    predictions = {"logits": logits, "probabilities": probabilities, "class_ids": class_ids}
    if mode == ee.ModeKeys.PREDICT:
        return ee.EstimatorSpec(mode, predictions=predictions, export_outputs={
            "serving_default": PredictOutput(predictions),
            "classification": ClassificationOutput(scores=probabilities),
            "regression": RegressionOutput(probabilities[:, 1]),
        })
    loss = torch.nn.functional.cross_entropy(logits, labels)
    optimizer = ee.get_optimizer("adam", lambda: torch.optim.Adam(net.parameters(), lr=0.05))
    return ee.EstimatorSpec(mode, loss=loss, train_op=ee.minimize(optimizer, loss))


def classifier_input_fn():
    return ee.inputs.numpy_input_fn({"x": X3, "scale": torch.full((64, 1), 2.0)}, Y3, batch_size=16,
                                    shuffle=False, num_epochs=None)()


def predict_input_fn():
    return ee.inputs.numpy_input_fn({"x": X3, "scale": torch.full((64, 1), 2.0)}, batch_size=64,
                                    shuffle=False, num_epochs=1)()


@pytest.fixture(scope="module")
def trained_classifier(tmp_path_factory):
    est = ee.Estimator(classifier_model_fn, model_dir=str(tmp_path_factory.mktemp("clf")))
    est.train(classifier_input_fn, steps=10)
    return est


def receiver_fn():
    return build_raw_serving_input_receiver_fn({"x": X3, "scale": torch.ones(5, 1)})


def test_receivers_validate_like_tf():
    x = torch.zeros(2, 3)
    assert ServingInputReceiver(x, x).receiver_tensors == {"input": x}
    assert ServingInputReceiver(x, x).features == {"feature": x}
    with pytest.raises(ValueError, match="features must be defined"):
        ServingInputReceiver(None, x)
    with pytest.raises(ValueError, match="receiver_tensors must be defined"):
        ServingInputReceiver(x, None)
    with pytest.raises(ValueError, match="feature x must be a Tensor"):
        ServingInputReceiver({"x": [1, 2]}, x)
    with pytest.raises(ValueError, match="receiver_tensor keys must be strings"):
        ServingInputReceiver(x, {1: x})
    assert TensorServingInputReceiver(x, {"x": x}).features is x
    with pytest.raises(ValueError, match="feature must be a Tensor"):
        TensorServingInputReceiver({"x": x}, x)


def test_raw_receiver_fn_shapes():
    fn = build_raw_serving_input_receiver_fn({"x": torch.arange(3.0).reshape(3, 1), "n": np.array([[1], [2]])})
    receiver = fn()
    assert receiver.receiver_tensors["x"].tolist() == [[0.0], [1.0]]
    assert receiver.receiver_tensors["n"].dtype == torch.int64
    assert receiver.features == receiver.receiver_tensors
    fixed = build_raw_serving_input_receiver_fn({"x": torch.zeros(1, 4)}, default_batch_size=3)
    assert fixed().receiver_tensors["x"].shape == (3, 4)
    with pytest.raises(ValueError, match="must have a batch dimension"):
        build_raw_serving_input_receiver_fn({"x": torch.tensor(1.0)})
    with pytest.raises(ValueError, match="default_batch_size must be a positive int"):
        build_raw_serving_input_receiver_fn({"x": torch.zeros(2)}, default_batch_size=0)


def test_export_errors(tmp_path):
    est = ee.Estimator(linear_model_fn, model_dir=str(tmp_path / "m"), params={})
    fn = build_raw_serving_input_receiver_fn(FEATURES)
    with pytest.raises(ValueError, match=r"An input_receiver_fn must be defined\."):
        export_saved_model(est, str(tmp_path / "e"), None)
    with pytest.raises(ValueError, match="Couldn't find trained model at"):
        export_saved_model(est, str(tmp_path / "e"), fn)
    est.train(ee.inputs.numpy_input_fn(FEATURES, LABELS, batch_size=16, shuffle=False), steps=2)
    with pytest.raises(ValueError, match=r"only ModeKeys\.PREDICT"):
        export_saved_model(est, str(tmp_path / "e"), fn, experimental_mode=ee.ModeKeys.TRAIN)
    with pytest.raises(TypeError, match="must return a ServingInputReceiver"):
        export_saved_model(est, str(tmp_path / "e"), lambda: {"x": FEATURES["x"]})
    with pytest.raises(ValueError, match="is not one of the receiver_tensors"):
        export_saved_model(est, str(tmp_path / "e"),
                           lambda: ServingInputReceiver({"x": torch.zeros(2, 1)}, {"x": torch.zeros(2, 1)}))
    assert not (tmp_path / "e").exists() or os.listdir(tmp_path / "e") == []  # no temporary folder left


def test_export_directory_contract(trained_classifier, tmp_path):
    source = tmp_path / "vocab.txt"
    source.write_text("a\nb\n")
    path = export_saved_model(trained_classifier, str(tmp_path / "export"), receiver_fn(),
                              assets_extra={"vocab/v.txt": str(source)})
    name = os.path.basename(path)
    assert len(name) == 10 and name.isdigit() and os.path.dirname(path) == str(tmp_path / "export")
    assert sorted(os.listdir(path)) == ["assets.extra", "program.pt2", "signature.json", "variables.pt"]
    assert (tmp_path / "export" / name / "assets.extra" / "vocab" / "v.txt").read_text() == "a\nb\n"
    signature = json.loads((tmp_path / "export" / name / "signature.json").read_text())
    assert signature["program_format"] == "torch.export" and signature["fallback_reason"] is None
    assert signature["inputs"] == {"x": {"dtype": "float32", "shape": [-1, 3]},
                                   "scale": {"dtype": "float32", "shape": [-1, 1]}}
    assert signature["default_signature"] == "serving_default" and signature["global_step"] == 10
    sigs = signature["signatures"]
    assert {k: v["method"] for k, v in sigs.items()} == {
        "classification": "classify", "regression": "regress", "serving_default": "predict"}
    assert sigs["serving_default"]["outputs"]["class_ids"]["dtype"] == "int64"
    assert sigs["regression"]["outputs"]["outputs"]["shape"] == [-1]
    # probabilities is shared by three signatures: one program output
    assert sigs["classification"]["outputs"]["scores"]["index"] == sigs["serving_default"]["outputs"]["probabilities"]["index"]
    variables = torch.load(os.path.join(path, "variables.pt"), weights_only=True)
    assert sorted(variables)[:2] == ["mlp/0/bias", "mlp/0/weight"]
    assert torch.equal(variables["mlp/0/weight"],
                       torch.as_tensor(trained_classifier.get_variable_value("mlp/0/weight")))
    # a second export in the same second gets a later folder, not a collision
    second = export_saved_model(trained_classifier, str(tmp_path / "export"), receiver_fn())
    assert int(os.path.basename(second)) > int(name)


def test_load_matches_predict_for_every_signature_and_batch_size(trained_classifier, tmp_path):
    path = trained_classifier.export_saved_model(str(tmp_path), receiver_fn()) if hasattr(
        trained_classifier, "export_saved_model") else export_saved_model(trained_classifier, str(tmp_path), receiver_fn())
    expected = next(trained_classifier.predict(predict_input_fn, yield_single_examples=False))
    model = export_lib.load(path)
    assert sorted(model.output_names) == ["class_ids", "logits", "probabilities"]
    for rows in (1, 7, 64):
        outputs = model({"x": X3[:rows].numpy(), "scale": np.full((rows, 1), 2.0)})
        np.testing.assert_allclose(outputs["logits"].numpy(), expected["logits"][:rows], atol=1e-6)
        np.testing.assert_array_equal(outputs["class_ids"].numpy(), expected["class_ids"][:rows])
    scores = export_lib.load(path, signature="classification")({"x": X3, "scale": torch.full((64, 1), 2.0)})
    np.testing.assert_allclose(scores["scores"].numpy(), expected["probabilities"], atol=1e-6)
    with pytest.raises(ValueError, match="Unknown signature 'nope'"):
        export_lib.load(path, signature="nope")
    with pytest.raises(ValueError, match=r"Missing inputs \['scale'\]"):
        model({"x": X3})


def test_checkpoint_choice_and_features_fn(tmp_path):
    est = ee.Estimator(linear_model_fn, model_dir=str(tmp_path / "m"), params={},
                       config=ee.RunConfig(save_checkpoints_steps=1, keep_checkpoint_max=None))
    est.train(ee.inputs.numpy_input_fn(FEATURES, LABELS, batch_size=16, shuffle=False), steps=3)
    first = os.path.join(est.model_dir, "model.ckpt-1")

    def doubled_receiver():  # features computed from the receiver tensors by torch ops
        raw = torch.zeros(2, 1)
        return ServingInputReceiver(lambda inputs: {"x": inputs["half_x"] * 2}, {"half_x": raw})

    path = export_saved_model(est, str(tmp_path / "e"), doubled_receiver, checkpoint_path=first)
    assert json.loads(open(os.path.join(path, "signature.json")).read())["global_step"] == 1
    out = export_lib.load(path)({"half_x": FEATURES["x"][:4] / 2})["y"]
    expected = next(est.predict(ee.inputs.numpy_input_fn({"x": FEATURES["x"][:4]}, shuffle=False),
                                checkpoint_path=first, yield_single_examples=False))["y"]
    np.testing.assert_allclose(out.numpy(), expected, atol=1e-6)
    # warm start source when model_dir has no checkpoint
    warm = ee.Estimator(linear_model_fn, model_dir=str(tmp_path / "w"), params={}, warm_start_from=est.model_dir)
    path = export_saved_model(warm, str(tmp_path / "e2"), build_raw_serving_input_receiver_fn(FEATURES))
    assert json.loads(open(os.path.join(path, "signature.json")).read())["global_step"] == 3


def test_load_refuses_pickled_archives_and_bad_dirs(trained_classifier, tmp_path):
    with pytest.raises(ValueError, match=r"signature\.json is missing"):
        export_lib.load(str(tmp_path))
    path = export_saved_model(trained_classifier, str(tmp_path / "e"), receiver_fn())
    program = os.path.join(path, "program.pt2")
    import zipfile

    with zipfile.ZipFile(program) as archive:
        entries = {name: archive.read(name) for name in archive.namelist()}
    config_name = next(n for n in entries if n.endswith("model_weights_config.json"))
    config = json.loads(entries[config_name])
    first = next(iter(config["config"]))
    config["config"][first]["use_pickle"] = True
    entries[config_name] = json.dumps(config).encode()
    with zipfile.ZipFile(program, "w") as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
    with pytest.raises(ValueError, match="holds a pickled value"):
        export_lib.load(path)


def test_export_dir_base_may_be_bytes_as_in_tf(trained_classifier, tmp_path):
    path = export_saved_model(trained_classifier, os.fsencode(tmp_path / "e"), receiver_fn())
    assert isinstance(path, str) and os.path.dirname(path) == str(tmp_path / "e")


def test_torchscript_fallback_records_why(tmp_path, monkeypatch):
    est = ee.Estimator(linear_model_fn, model_dir=str(tmp_path / "m"), params={})
    est.train(ee.inputs.numpy_input_fn(FEATURES, LABELS, batch_size=16, shuffle=False), steps=2)

    def failing_export(*args, **kwargs):
        raise RuntimeError("unsupported op for the test")

    monkeypatch.setattr(torch.export, "export", failing_export)
    path = export_saved_model(est, str(tmp_path / "e"), build_raw_serving_input_receiver_fn(FEATURES))
    signature = json.loads(open(os.path.join(path, "signature.json")).read())
    assert signature["program"] == "program.torchscript.pt" and signature["program_format"] == "torchscript"
    assert "RuntimeError: unsupported op for the test" in signature["fallback_reason"]
    monkeypatch.undo()
    expected = next(est.predict(ee.inputs.numpy_input_fn({"x": FEATURES["x"]}, shuffle=False, batch_size=64),
                                yield_single_examples=False))["y"]
    np.testing.assert_allclose(export_lib.load(path)({"x": FEATURES["x"]})["y"].numpy(), expected, atol=1e-6)


def _ids_through_python_model_fn(features, labels, mode):
    """Reads category ids into Python (.tolist()): a trace records them as constants."""
    ids = torch.tensor([int(v) % 3 for v in features["cat"].tolist()])
    table = ee.get_module("table", lambda: torch.nn.Embedding(3, 1))
    y = table(ids).squeeze(-1) + features["x"]
    if mode == ee.ModeKeys.PREDICT:
        return ee.EstimatorSpec(mode, predictions={"y": y})
    loss = torch.nn.functional.mse_loss(y, labels)
    opt = ee.get_optimizer("sgd", lambda: torch.optim.SGD(table.parameters(), lr=0.1))
    return ee.EstimatorSpec(mode, loss=loss, train_op=ee.minimize(opt, loss))


@pytest.mark.parametrize("batch", [1, 4])
def test_a_trace_that_baked_in_the_example_is_refused(tmp_path, batch):
    """Ids read into Python make torch.export fail; the trace then records the example's ids as
    constants and would serve its answer for every input: refused, nothing written. (Feature
    columns no longer do this: their ids are computed before the program, see test_serving_export.)"""
    cat, x = np.arange(60) % 3, np.zeros(60, np.float32)
    est = ee.Estimator(_ids_through_python_model_fn, model_dir=str(tmp_path / "m"))
    est.train(ee.inputs.numpy_input_fn({"x": x, "cat": cat}, cat.astype(np.float32), batch_size=20,
                                       shuffle=False), steps=2)
    receiver = build_raw_serving_input_receiver_fn({"x": torch.zeros(batch), "cat": torch.arange(batch) % 3})
    with pytest.raises(ValueError, match=r"Cannot export this model: torch.export failed: .*, and the TorchScript "
                                         r"fallback does not reproduce the model on inputs other than the example batch"):
        export_saved_model(est, str(tmp_path / "e"), receiver)
    assert os.listdir(tmp_path / "e") == []


def test_fresh_process_without_model_fn_module(tmp_path):
    """The export runs where neither the model_fn's module nor a checkpoint exists."""
    module_dir = tmp_path / "user_code"
    module_dir.mkdir()
    (module_dir / "my_model_for_export.py").write_text(textwrap.dedent('''
        import torch
        import estimator_engine as ee

        def model_fn(features, labels, mode):
            net = ee.get_module("net", lambda: torch.nn.Sequential(
                torch.nn.Linear(2, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1)))
            y = net(features["a"]).squeeze(-1) + features["b"]
            if mode == ee.ModeKeys.PREDICT:
                return ee.EstimatorSpec(mode, predictions={"y": y, "twice": 2 * y})
            loss = torch.nn.functional.mse_loss(y, labels)
            opt = ee.get_optimizer("sgd", lambda: torch.optim.SGD(net.parameters(), lr=0.1))
            return ee.EstimatorSpec(mode, loss=loss, train_op=ee.minimize(opt, loss))
    '''))
    sys.path.insert(0, str(module_dir))
    try:
        import my_model_for_export
    finally:
        sys.path.remove(str(module_dir))
    a = torch.randn(32, 2)
    b = torch.randn(32)
    est = ee.Estimator(my_model_for_export.model_fn, model_dir=str(tmp_path / "model"))
    est.train(ee.inputs.numpy_input_fn({"a": a, "b": b}, a.sum(1), batch_size=8, shuffle=False), steps=5)
    path = export_saved_model(est, str(tmp_path / "export"), build_raw_serving_input_receiver_fn({"a": a, "b": b}))
    expected = next(est.predict(ee.inputs.numpy_input_fn({"a": a, "b": b}, batch_size=32, shuffle=False),
                                yield_single_examples=False))
    np.save(tmp_path / "a.npy", a.numpy())
    np.save(tmp_path / "b.npy", b.numpy())
    del sys.modules["my_model_for_export"]
    script = textwrap.dedent(f'''
        import json, sys
        import numpy as np
        try:
            import my_model_for_export
        except ImportError:
            pass
        else:
            raise SystemExit("model_fn module must not be importable here")
        from estimator_engine import export
        model = export.load({path!r})
        out = model({{"a": np.load({str(tmp_path / "a.npy")!r}), "b": np.load({str(tmp_path / "b.npy")!r})}})
        print(json.dumps({{k: v.tolist() for k, v in out.items()}}))
    ''')
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                            cwd=str(tmp_path), env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert result.returncode == 0, result.stderr
    outputs = json.loads(result.stdout.strip().splitlines()[-1])
    np.testing.assert_allclose(np.array(outputs["y"]), expected["y"], atol=1e-6)
    np.testing.assert_allclose(np.array(outputs["twice"]), expected["twice"], atol=1e-6)


def test_canned_classifier_export_in_a_fresh_process(tmp_path):
    """A canned DNNClassifier exports through torch.export (class names as id lookups) and its
    scores, loaded in a fresh process, equal predict's probabilities."""
    columns = [ee.feature_column.numeric_column("x1"), ee.feature_column.numeric_column("x2")]
    classifier = ee.DNNClassifier(hidden_units=[8], feature_columns=columns, n_classes=3,
                                  model_dir=str(tmp_path / "model"), config=ee.RunConfig(tf_random_seed=1))
    generator = torch.Generator().manual_seed(0)
    x = {"x1": torch.randn(40, generator=generator), "x2": torch.randn(40, generator=generator)}
    labels = (x["x1"] > 0).long() + (x["x2"] > 0).long()
    classifier.train(ee.inputs.numpy_input_fn(x, labels, batch_size=8, num_epochs=None, shuffle=True), steps=20)
    path = classifier.export_saved_model(str(tmp_path / "export"), build_raw_serving_input_receiver_fn(
        {"x1": x["x1"][:1], "x2": x["x2"][:1]}))
    signature = json.loads((tmp_path / "export" / os.path.basename(path) / "signature.json").read_text())
    assert not signature.get("fallback_reason"), signature.get("fallback_reason")
    expected = next(classifier.predict(ee.inputs.numpy_input_fn(x, batch_size=40, shuffle=False),
                                       yield_single_examples=False))["probabilities"]
    np.save(tmp_path / "x1.npy", x["x1"].numpy())
    np.save(tmp_path / "x2.npy", x["x2"].numpy())
    script = textwrap.dedent(f'''
        import json
        import numpy as np
        from estimator_engine import export
        scores = export.load({path!r})({{"x1": np.load("x1.npy"), "x2": np.load("x2.npy")}})["scores"]
        print(json.dumps(scores.tolist()))
    ''')
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                            cwd=str(tmp_path), env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert result.returncode == 0, result.stderr
    np.testing.assert_allclose(np.array(json.loads(result.stdout.strip().splitlines()[-1])), expected, atol=1e-6)
