"""Canned estimators pointed at a TensorFlow 2.15 model_dir predict and evaluate as TF did.

The model_dirs, rows, TF's predictions and TF's metrics are test data written by
``tests/estimator_engine/fixtures/tf_checkpoints/make_fixtures.py`` (TF 2.15.1, 5 training steps).
Each case builds the engine's estimator with the same columns and hidden units as the TF one.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

import estimator_engine as ee
from estimator_engine import feature_column as fc
from estimator_engine.canned.optimizers import TFAdam

MODELS = Path(__file__).resolve().parents[1] / "fixtures" / "tf_checkpoints" / "models"
IRIS = ["sepal_length_cm", "sepal_width_cm", "petal_length_cm", "petal_width_cm"]
TF_FILE = re.compile(r"model\.ckpt-\d+\.(index|data-\d{5}-of-\d{5})")
SPECIES = ["setosa", "versicolor", "virginica"]


def _mixed_columns() -> dict:
    x1 = fc.numeric_column("x1")
    color = fc.categorical_column_with_vocabulary_list("color", ["red", "green", "blue"],
                                                       num_oov_buckets=1)
    city = fc.categorical_column_with_hash_bucket("city", 7)
    idx = fc.categorical_column_with_identity("idx", 5)
    bucket = fc.bucketized_column(x1, [-0.5, 0.0, 0.5])
    return {"x1": x1, "x2": fc.numeric_column("x2"), "color": color, "city": city, "idx": idx,
            "bucket": bucket, "weighted": fc.weighted_categorical_column(color, "wt"),
            "cross": fc.crossed_column([bucket, "color"], 11)}


def _build(case: str, model_dir, **kwargs) -> ee.Estimator:
    """The engine's estimator of each TF case (the same arguments as make_fixtures.py)."""
    numeric = [fc.numeric_column(n) for n in IRIS]
    c = _mixed_columns()
    if case == "dnn_classifier_2":
        return ee.DNNClassifier([8, 4], numeric, model_dir, n_classes=2, **kwargs)
    if case == "dnn_classifier_3":
        return ee.DNNClassifier([6], numeric, model_dir, n_classes=3, label_vocabulary=SPECIES,
                                **kwargs)
    if case == "linear_classifier_3":
        return ee.LinearClassifier(numeric, model_dir, n_classes=3, **kwargs)
    if case == "baseline_classifier_3":
        return ee.BaselineClassifier(model_dir, n_classes=3, **kwargs)
    if case == "dnn_regressor_mixed":
        dense = [c["x1"], c["x2"], c["bucket"], fc.indicator_column(c["color"]),
                 fc.embedding_column(c["city"], 3), fc.embedding_column(c["idx"], 2),
                 fc.embedding_column(c["weighted"], 2), fc.indicator_column(c["cross"])]
        return ee.DNNRegressor([5, 3], dense, model_dir, **kwargs)
    if case == "linear_classifier_mixed":
        sparse = [c["x1"], c["x2"], c["bucket"], c["color"], c["city"], c["idx"], c["cross"]]
        return ee.LinearClassifier(sparse, model_dir, **kwargs)
    if case == "linear_regressor_weighted":
        return ee.LinearRegressor([c["x1"], c["weighted"]], model_dir, **kwargs)
    if case == "dnn_linear_combined_classifier":
        return ee.DNNLinearCombinedClassifier(
            model_dir, linear_feature_columns=[c["color"], c["cross"], c["idx"]],
            dnn_feature_columns=[c["x1"], c["x2"], fc.embedding_column(c["city"], 2)],
            dnn_hidden_units=[4], n_classes=2, **kwargs)
    if case == "dnn_linear_combined_regressor":
        return ee.DNNLinearCombinedRegressor(
            model_dir, linear_feature_columns=[c["x1"], c["bucket"]],
            dnn_feature_columns=[c["x2"], fc.indicator_column(c["color"])],
            dnn_hidden_units=[3], **kwargs)
    if case == "baseline_regressor":
        return ee.BaselineRegressor(model_dir, **kwargs)
    if case == "dnn_classifier_v1_partitioned":  # tf.compat.v1.estimator: the loss is summed
        return ee.DNNClassifier([4], [c["x1"], fc.embedding_column(c["city"], 3)], model_dir,
                                n_classes=2, loss_reduction="sum", **kwargs)
    # TF 1 canned estimators with TF 1 optimizers (make_v1_optimizer_fixtures.py): the summed loss,
    # TF 1's defaults (DNN: Adagrad at 0.05; linear: Ftrl at min(0.2, 1/sqrt(#columns))).
    v1_dense = [c["x1"], c["x2"], fc.indicator_column(c["color"])]
    if case == "dnn_classifier_v1_adagrad":
        return ee.DNNClassifier([4], v1_dense, model_dir, n_classes=2, loss_reduction="sum",
                                optimizer=functools.partial(torch.optim.Adagrad, lr=0.05,
                                                            initial_accumulator_value=0.1), **kwargs)
    if case == "dnn_regressor_v1_adam":  # tf.compat.v1.train.AdamOptimizer(0.01): epsilon 1e-8
        return ee.DNNRegressor([4, 3], v1_dense, model_dir, loss_reduction="sum",
                               optimizer=functools.partial(TFAdam, lr=0.01, eps=1e-8), **kwargs)
    if case == "linear_classifier_v1_ftrl":
        return ee.LinearClassifier([c["x1"], c["x2"], c["color"], c["bucket"]], model_dir, n_classes=2,
                                   loss_reduction="sum", **kwargs)
    if case == "dnn_linear_combined_regressor_v1":
        return ee.DNNLinearCombinedRegressor(
            model_dir, linear_feature_columns=[c["color"], c["bucket"]], dnn_feature_columns=[c["x2"]],
            dnn_hidden_units=[3], loss_reduction="sum", **kwargs)
    if case == "dnn_regressor_adam":
        return ee.DNNRegressor([4], [c["x1"], c["x2"]], model_dir, optimizer="Adam", **kwargs)
    color_file = fc.categorical_column_with_vocabulary_file(
        "color", str(MODELS.parent / "colors.txt"), num_oov_buckets=2)
    if case == "dnn_classifier_shared_vocab":
        shared = fc.shared_embeddings([fc.categorical_column_with_identity("idx", 5),
                                       fc.categorical_column_with_identity("last_idx", 5)], 3)
        dense = [c["x1"], c["x2"], fc.embedding_column(color_file, 2), *shared]
        return ee.DNNClassifier([4], dense, model_dir, n_classes=3,
                                label_vocabulary=["low", "mid", "high"], batch_norm=True, **kwargs)
    if case == "linear_classifier_vocab_file":
        return ee.LinearClassifier([c["x1"], color_file], model_dir, n_classes=2,
                                   label_vocabulary=["no", "yes"], **kwargs)
    raise AssertionError(case)


CASES = ["dnn_classifier_2", "dnn_classifier_3", "dnn_regressor_mixed", "linear_classifier_3",
         "linear_classifier_mixed", "linear_regressor_weighted", "dnn_linear_combined_classifier",
         "dnn_linear_combined_regressor", "baseline_classifier_3", "baseline_regressor",
         "dnn_classifier_shared_vocab", "linear_classifier_vocab_file", "dnn_regressor_adam",
         "dnn_classifier_v1_partitioned", "dnn_classifier_v1_adagrad", "dnn_regressor_v1_adam",
         "linear_classifier_v1_ftrl", "dnn_linear_combined_regressor_v1"]


def _reference(case: str) -> dict:
    return json.loads((MODELS / f"{case}.json").read_text())


def _rows(reference: dict) -> tuple[dict, np.ndarray]:
    features = {}
    for key, column in reference["features"].items():
        kind = column["dtype"]
        values = column["values"]
        features[key] = (np.array(values, np.float32) if kind == "f" else
                         np.array(values, np.int64) if kind == "i" else np.array(values, dtype=object))
    labels = reference["labels"]
    label_array = (np.array(labels, dtype=object) if isinstance(labels[0], str)
                   else np.array(labels, np.float32 if isinstance(labels[0], float) else np.int64))
    return features, label_array


def _input_fn(reference: dict, with_labels: bool = True):
    features, labels = _rows(reference)
    return ee.inputs.numpy_input_fn(features, labels if with_labels else None,
                                    batch_size=len(labels), num_epochs=1, shuffle=False)


def _copy(case: str, tmp_path: Path) -> str:
    target = tmp_path / case
    shutil.copytree(MODELS / case, target)
    return str(target)


def _digest(directory: str) -> dict[str, str]:
    """SHA-256 of TF's checkpoint files in a model_dir (.index and .data-* shards)."""
    digests = {name: hashlib.sha256(Path(directory, name).read_bytes()).hexdigest()
               for name in sorted(os.listdir(directory)) if TF_FILE.match(name)}
    assert digests
    return digests


def _assert_predictions(predictions: list[dict], reference: dict) -> float:
    """Every numeric prediction key equals TF's to 1e-5 relative; returns the max |engine - TF|."""
    worst = 0.0
    for key, expected in reference["predictions"].items():
        got = [p[key] for p in predictions]
        if key in ("classes", "all_classes"):
            got = [[v.decode() if isinstance(v, bytes) else str(v)
                    for v in np.asarray(g).reshape(-1)] for g in got]
            assert got == [list(np.asarray(e).reshape(-1)) for e in expected], key
            continue
        got_array = np.asarray(got, np.float64)
        expected_array = np.asarray(expected, np.float64).reshape(got_array.shape)
        np.testing.assert_allclose(got_array, expected_array, rtol=1e-5, atol=1e-6, err_msg=key)
        worst = max(worst, float(np.abs(got_array - expected_array).max()))
    return worst


@pytest.mark.parametrize("case", CASES)
def test_predicts_and_evaluates_from_tf_model_dir(case, tmp_path):
    reference = _reference(case)
    model_dir = _copy(case, tmp_path)
    before = _digest(model_dir)
    estimator = _build(case, model_dir)
    assert estimator.latest_checkpoint().endswith(f"model.ckpt-{reference['global_step']}")
    predictions = list(estimator.predict(_input_fn(reference, with_labels=False)))
    _assert_predictions(predictions, reference)
    metrics = estimator.evaluate(_input_fn(reference))
    expected = reference["metrics"]
    assert metrics["global_step"] == reference["global_step"]
    for key, value in expected.items():
        if case == "dnn_classifier_v1_partitioned" and key == "auc_precision_recall":
            # TF 1's heads compute AUC-PR with careful_interpolation, the engine as TF 2 does
            # (0.2038 here against TF 1's 0.1940): a head matter, not a checkpoint one.
            continue
        assert metrics[key] == pytest.approx(value, rel=1e-5, abs=1e-6), key
    assert _digest(model_dir) == before  # TF's files untouched


def test_training_continues_from_tf_step_and_keeps_tf_files(tmp_path):
    case = "dnn_classifier_3"
    reference = _reference(case)
    model_dir = _copy(case, tmp_path)
    before = _digest(model_dir)
    config = ee.RunConfig(save_checkpoints_steps=1, keep_checkpoint_max=1)
    estimator = _build(case, model_dir, config=config)
    features, labels = _rows(reference)
    estimator.train(ee.inputs.numpy_input_fn(features, labels, batch_size=10, num_epochs=None,
                                             shuffle=False), steps=3)
    assert estimator.get_variable_value("global_step") == reference["global_step"] + 3
    latest = estimator.latest_checkpoint()
    assert latest.endswith(f"model.ckpt-{reference['global_step'] + 3}") and os.path.isfile(latest)
    assert _digest(model_dir) == before  # keep_checkpoint_max=1 deleted none of TF's files
    # The engine's own checkpoints were pruned to one.
    engine_files = [n for n in os.listdir(model_dir) if re.fullmatch(r"model\.ckpt-\d+", n)]
    assert engine_files == [os.path.basename(latest)]
    trained = np.array([p["logits"] for p in estimator.predict(_input_fn(reference, False))])
    assert not np.allclose(trained, np.array(reference["predictions"]["logits"]))


@pytest.mark.parametrize("case, how", [
    ("dnn_classifier_3", "path"), ("dnn_classifier_3", "settings"),
    ("linear_classifier_mixed", "path"), ("linear_classifier_mixed", "settings"),
    ("dnn_linear_combined_regressor", "path"), ("dnn_linear_combined_regressor", "settings"),
    # Batch norm's moving statistics are not trainable: as in TF, only a list of patterns (over
    # all variables) warm-starts them.
    ("dnn_classifier_shared_vocab", "all variables")])
def test_warm_start_from_tf_model_dir(case, how, tmp_path):
    reference = _reference(case)
    source = _copy(case, tmp_path)
    warm = {"path": source, "settings": ee.WarmStartSettings(source),
            "all variables": ee.WarmStartSettings(source, vars_to_warm_start=[".*"])}[how]
    estimator = _build(case, str(tmp_path / "new"), warm_start_from=warm)
    predictions = list(estimator.predict(_input_fn(reference, with_labels=False)))
    _assert_predictions(predictions, reference)


def test_saved_model_variables_import(tmp_path):
    reference = _reference("dnn_classifier_3")
    saved_model = MODELS.parent / "saved_model" / "dnn_classifier_3"
    for source in (saved_model, saved_model / "variables"):
        estimator = _build("dnn_classifier_3", str(tmp_path / source.name), warm_start_from=str(source))
        _assert_predictions(list(estimator.predict(_input_fn(reference, False))), reference)


def test_mismatched_columns_name_both_sides(tmp_path):
    model_dir = _copy("dnn_classifier_3", tmp_path)
    numeric = [fc.numeric_column(n) for n in IRIS[:3]]
    estimator = ee.DNNClassifier([6], numeric, model_dir, n_classes=3, label_vocabulary=SPECIES)
    features, _ = _rows(_reference("dnn_classifier_3"))
    with pytest.raises(ee.CheckpointError, match=r"dnn/hiddenlayer_0/kernel' has shape \[4, 6\] "
                                                 r"in the checkpoint .*model\.ckpt-5 but \[3, 6\]"):
        next(estimator.predict(ee.inputs.numpy_input_fn(features, shuffle=False)))


def test_optimizer_slots_fill_torch_state():
    checkpoint = ee.checkpoints.load_checkpoint(MODELS / "dnn_linear_combined_classifier")
    kernel = torch.nn.Parameter(torch.zeros(4, 1))
    adagrad = torch.optim.Adagrad([kernel], lr=0.05)
    names = {id(kernel): "dnn/logits/kernel"}
    assert ee.checkpoints.restore_tf_optimizer_state(adagrad, names, checkpoint) == ["dnn/logits/kernel"]
    expected = ee.checkpoints.load_variable(MODELS / "dnn_linear_combined_classifier",
                                            "training/Adagrad/dnn/logits/kernel/accumulator")
    assert np.array_equal(adagrad.state[kernel]["sum"].numpy(), expected)
    assert adagrad.state[kernel]["step"].item() == 5
    from estimator_engine.canned.optimizers import Ftrl
    weights = torch.nn.Parameter(torch.zeros(4, 1))
    ftrl = Ftrl([weights], lr=0.2)
    names = {id(weights): "linear/linear_model/color/weights"}
    assert ee.checkpoints.restore_tf_optimizer_state(ftrl, names, checkpoint) == [names[id(weights)]]
    expected = ee.checkpoints.load_variable(
        MODELS / "dnn_linear_combined_classifier", "training/Ftrl/linear/linear_model/color/weights/linear")
    assert np.array_equal(ftrl.state[weights]["linear"].numpy(), expected)


def test_tf1_optimizer_slots_fill_torch_state():
    # TF 1 keeps slots beside the variable (<var>/t_0/Adam, Adam_1) and Adam's step count in
    # dnn/head/beta1_power = beta1 ** (steps + 1).
    path = MODELS / "dnn_regressor_v1_adam"
    checkpoint = ee.checkpoints.load_checkpoint(path)
    kernel = torch.nn.Parameter(torch.zeros(4, 3))
    adam = TFAdam([kernel], lr=0.01, eps=1e-8)
    names = {id(kernel): "dnn/hiddenlayer_1/kernel"}
    assert ee.checkpoints.restore_tf_optimizer_state(adam, names, checkpoint) == ["dnn/hiddenlayer_1/kernel"]
    for key, slot in (("exp_avg", "Adam"), ("exp_avg_sq", "Adam_1")):
        expected = ee.checkpoints.load_variable(path, f"dnn/hiddenlayer_1/kernel/t_0/{slot}")
        assert np.array_equal(adam.state[kernel][key].numpy(), expected)
    assert ee.checkpoints.load_variable(path, "dnn/head/beta1_power") == pytest.approx(0.9 ** 6)
    assert adam.state[kernel]["step"].item() == 5
    from estimator_engine.canned.optimizers import Ftrl
    path = MODELS / "linear_classifier_v1_ftrl"
    weights = torch.nn.Parameter(torch.zeros(4, 1))
    ftrl = Ftrl([weights], lr=0.2)
    names = {id(weights): "linear/linear_model/color/weights"}
    assert ee.checkpoints.restore_tf_optimizer_state(ftrl, names, ee.checkpoints.load_checkpoint(path)) == [
        names[id(weights)]]
    for key, slot in (("accumulator", "Ftrl"), ("linear", "Ftrl_1")):
        expected = ee.checkpoints.load_variable(path, f"linear/linear_model/color/weights/part_0/{slot}")
        assert np.array_equal(ftrl.state[weights][key].numpy(), expected)


def test_missing_optimizer_slots_start_fresh_and_say_so(tmp_path, caplog):
    # The TF model trained with Adagrad; an engine DNNClassifier told to use Adam finds no Adam slots.
    model_dir = _copy("dnn_classifier_2", tmp_path)
    numeric = [fc.numeric_column(n) for n in IRIS]
    estimator = ee.DNNClassifier([8, 4], numeric, model_dir, n_classes=2, optimizer="Adam")
    features, labels = _rows(_reference("dnn_classifier_2"))
    with caplog.at_level("INFO", logger="estimator_engine"):
        estimator.train(ee.inputs.numpy_input_fn(features, labels, batch_size=30, shuffle=False),
                        steps=1)
    assert re.search(r"TF checkpoint .*model\.ckpt-5 holds the TFAdam state of 0 of the 6 "
                     r"parameters of optimizer 'dnn'; the others start fresh", caplog.text)
    assert estimator.get_variable_value("global_step") == 6


# TF 2.15's DNN estimators never train a shared_embeddings table (it is not among the variables
# their optimizer updates: its value at step 5 equals step 0's, and it has no Adagrad slot); the
# engine trains it, so that case continues differently and is left out here. TF 1's canned
# estimators name their slots <variable>/t_0/Adagrad (Adam, Adam_1; part_0/Ftrl, Ftrl_1), carried
# over (the *_v1_* cases); the slots of a variable split in several partitions are not (yet).
CONTINUED = [case for case in CASES
             if case not in ("dnn_classifier_shared_vocab", "dnn_classifier_v1_partitioned")]


@pytest.mark.parametrize("case", CONTINUED)
def test_n_tf_steps_plus_m_engine_steps_equal_n_plus_m_tf_steps(case, tmp_path):
    # TF trained 5 steps and saved; the engine trains 3 more from that model_dir, carrying TF's
    # optimizer slots (Adagrad accumulators; Ftrl accumulators and linear terms) over. TF's own
    # 5 + 3 steps (make_fixtures._continue_case) are the reference.
    reference = _reference(case)
    continued = json.loads((MODELS / f"{case}.continued.json").read_text())
    model_dir = _copy(case, tmp_path)
    estimator = _build(case, model_dir)
    features, labels = _rows(reference)
    estimator.train(ee.inputs.numpy_input_fn(features, labels, batch_size=continued["batch"],
                                             num_epochs=None, shuffle=False),
                    steps=continued["steps"])
    assert estimator.get_variable_value("global_step") == continued["global_step"]
    predictions = list(estimator.predict(_input_fn(reference, with_labels=False)))
    _assert_predictions(predictions, continued)


def test_export_saved_model_from_tf_model_dir(tmp_path):
    model_dir = _copy("dnn_classifier_3", tmp_path)
    estimator = _build("dnn_classifier_3", model_dir)
    assert "training/Adagrad/dnn/logits/kernel/accumulator" in estimator.get_variable_names()
    spec = ee.make_parse_example_spec([fc.numeric_column(n) for n in IRIS])
    export = estimator.export_saved_model(str(tmp_path / "export"),
                                          ee.export.build_parsing_serving_input_receiver_fn(spec))
    assert os.path.isdir(export)
    assert _digest(model_dir) == _digest(str(MODELS / "dnn_classifier_3"))
