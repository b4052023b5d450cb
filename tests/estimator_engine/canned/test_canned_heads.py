"""Heads: TF's prediction keys and values, losses, eval metrics (exact-number cases) and errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import estimator_engine as ee
from estimator_engine.canned.heads import (
    BinaryClassHead,
    LossReduction,
    MultiClassHead,
    RegressionHead,
    classification_head,
)
from estimator_engine.export_output import (
    ClassificationOutput,
    PredictOutput,
    RegressionOutput,
    StringLookup,
)


def _results(ops):
    return {k: float(v.result()) for k, v in ops.items()}


# -- BinaryClassHead ------------------------------------------------------------------------


def test_binary_predict_matches_tf_values():
    # binary_class_head_test.py::test_predict
    p = BinaryClassHead().predictions(torch.tensor([[0.3], [-0.4]]))
    assert sorted(p) == ["all_class_ids", "all_classes", "class_ids", "classes", "logistic",
                         "logits", "probabilities"]
    np.testing.assert_allclose(p["logistic"].numpy(), [[0.574443], [0.401312]], atol=1e-6)
    np.testing.assert_allclose(p["probabilities"].numpy(),
                               [[0.425557, 0.574443], [0.598688, 0.401312]], atol=1e-6)
    assert p["class_ids"].tolist() == [[1], [0]]
    assert p["class_ids"].dtype == torch.int64
    assert p["classes"].tolist() == [[b"1"], [b"0"]]
    assert p["all_class_ids"].tolist() == [[0, 1], [0, 1]]
    assert p["all_classes"].tolist() == [[b"0", b"1"], [b"0", b"1"]]


def test_binary_eval_matches_tf_exact_numbers():
    # binary_class_head_test.py::test_eval
    ops = BinaryClassHead().metrics(labels=np.array([[1], [1]]), logits=torch.tensor([[45.0], [-41.0]]))
    expected = {"average_loss": 20.5, "accuracy": 0.5, "precision": 1.0, "recall": 0.5,
                "prediction/mean": 0.5, "label/mean": 1.0, "accuracy_baseline": 1.0, "auc": 0.0,
                "auc_precision_recall": 1.0}
    got = _results(ops)
    assert sorted(got) == sorted(expected)
    for key, value in expected.items():
        assert got[key] == pytest.approx(value, abs=1e-5), key


def test_binary_eval_through_an_estimator(tmp_path):
    head = BinaryClassHead()

    def model_fn(features, labels, mode):
        return head.create_estimator_spec(features, mode, features["logits"], labels)

    est = ee.Estimator(model_fn, model_dir=str(tmp_path))
    ee.checkpoints.create_checkpoint(str(tmp_path), {}, global_step=100)
    input_fn = ee.inputs.numpy_input_fn({"logits": np.array([[45.0], [-41.0]], dtype=np.float32)},
                                        np.array([[1], [1]]), shuffle=False)
    result = est.evaluate(input_fn)
    assert result["loss"] == pytest.approx(20.5)
    assert result["average_loss"] == pytest.approx(20.5)
    assert result["accuracy_baseline"] == pytest.approx(1.0)
    assert result["auc"] == pytest.approx(0.0)
    assert result["global_step"] == 100


def test_binary_accuracy_baseline_merges_over_batches():
    head = BinaryClassHead()
    first = head.metrics(np.array([[1], [1], [1]]), torch.zeros(3, 1))["accuracy_baseline"]
    second = head.metrics(np.array([[0]]), torch.zeros(1, 1))["accuracy_baseline"]
    assert float(first.result()) == 1.0
    assert float(first.merge(second).result()) == pytest.approx(0.75)


def test_binary_loss_reductions_and_weights():
    logits = torch.tensor([[1.0], [-2.0]])
    labels = np.array([[1], [0]])
    per_example = torch.nn.functional.softplus(torch.tensor([-1.0, -2.0]))
    features = {"w": np.array([[2.0], [3.0]])}
    head = BinaryClassHead(weight_column="w")
    weighted_sum = float(2 * per_example[0] + 3 * per_example[1])
    assert float(head.loss(labels, logits, features)) == pytest.approx(weighted_sum / 2, rel=1e-6)
    head_sum = BinaryClassHead(weight_column="w", loss_reduction=LossReduction.SUM)
    assert float(head_sum.loss(labels, logits, features)) == pytest.approx(weighted_sum, rel=1e-6)
    ops = head.metrics(labels, logits, features)
    assert float(ops["average_loss"].result()) == pytest.approx(weighted_sum / 5, rel=1e-6)
    assert float(ops["label/mean"].result()) == pytest.approx(2 / 5)


def test_binary_label_vocabulary_maps_strings_and_names_classes():
    head = BinaryClassHead(label_vocabulary=["no", "yes"])
    labels = np.array([["yes"], ["no"]], dtype=object)
    ops = head.metrics(labels, torch.tensor([[2.0], [-2.0]]))
    assert float(ops["accuracy"].result()) == 1.0
    assert head.predictions(torch.tensor([[2.0]]))["classes"].tolist() == [[b"yes"]]
    # bytes labels work too
    assert float(head.metrics(np.array([b"yes", b"no"]), torch.tensor([[2.0], [-2.0]]))["accuracy"].result()) == 1.0


def test_binary_label_errors():
    head = BinaryClassHead()
    with pytest.raises(ValueError, match="Labels must be <= n_classes - 1"):
        head.loss(np.array([[2]]), torch.zeros(1, 1))
    with pytest.raises(ValueError, match="Labels must be >= 0"):
        head.loss(np.array([[-1]]), torch.zeros(1, 1))
    with pytest.raises(ValueError, match="Labels dtype should be integer"):
        head.loss(np.array([["a"]]), torch.zeros(1, 1))
    with pytest.raises(ValueError, match="You must provide a labels Tensor"):
        head.create_estimator_spec({}, ee.ModeKeys.EVAL, torch.zeros(1, 1), None)
    with pytest.raises(ValueError, match="Mismatched label shape"):
        head.loss(np.array([[1, 0]]), torch.zeros(1, 1))
    vocab_head = BinaryClassHead(label_vocabulary=["a", "b"])
    with pytest.raises(ValueError, match=r"Labels must be in label_vocabulary.*'c'"):
        vocab_head.loss(np.array([["a"], ["c"]]), torch.zeros(2, 1))
    with pytest.raises(ValueError, match="Labels dtype should be string if there is a vocabulary"):
        vocab_head.loss(np.array([[1]]), torch.zeros(1, 1))
    with pytest.raises(ValueError, match="weight_column 'w' is not in features"):
        BinaryClassHead(weight_column="w").loss(np.array([[1]]), torch.zeros(1, 1), {"x": 1})


def test_vocabulary_and_reduction_argument_errors():
    with pytest.raises(ValueError, match="label_vocabulary should be a list or a tuple"):
        BinaryClassHead(label_vocabulary="ab")
    with pytest.raises(ValueError, match='"label_vocabulary" does not have "n_classes" items'):
        MultiClassHead(3, label_vocabulary=["a", "b"])
    with pytest.raises(ValueError, match="duplicate"):
        BinaryClassHead(label_vocabulary=["a", "a"])
    with pytest.raises(ValueError, match="Invalid loss_reduction: 'none'"):
        BinaryClassHead(loss_reduction="none")
    with pytest.raises(ValueError, match="n_classes must be > 2"):
        MultiClassHead(2)
    with pytest.raises(ValueError, match="n_classes must be > 2: 1"):
        classification_head(1)
    with pytest.raises(ValueError, match="Invalid label_dimension 0"):
        RegressionHead(0)
    with pytest.raises(ValueError, match=r"logits shape must be \[D0, 1\]"):
        BinaryClassHead().predictions(torch.zeros(2, 3))


def test_binary_export_outputs_in_predict():
    spec = BinaryClassHead().create_estimator_spec({}, ee.ModeKeys.PREDICT, torch.tensor([[0.3]]))
    assert sorted(spec.export_outputs) == ["classification", "predict", "regression", "serving_default"]
    assert isinstance(spec.export_outputs["serving_default"], ClassificationOutput)
    assert isinstance(spec.export_outputs["regression"], RegressionOutput)
    predict = spec.export_outputs["predict"]
    assert isinstance(predict, PredictOutput)
    # TF's predict signature holds every prediction: string classes as lookups of the id tensors.
    assert isinstance(predict.outputs["classes"], StringLookup) and "logistic" in predict.outputs
    assert predict.outputs["classes"].ids is predict.outputs["class_ids"]
    assert predict.outputs["classes"].lookup(predict.outputs["classes"].ids).tolist() == [[b"1"]]
    classification = spec.export_outputs["classification"]
    assert classification.classes.lookup(classification.classes.ids).tolist() == [[b"0", b"1"]]


def test_train_mode_needs_exactly_one_of_optimizer_and_train_op_fn():
    head = BinaryClassHead()
    with pytest.raises(ValueError, match="exactly one of optimizer and train_op_fn"):
        head.create_estimator_spec({}, ee.ModeKeys.TRAIN, torch.zeros(1, 1), np.array([[1]]))
    called = []
    spec = head.create_estimator_spec({}, ee.ModeKeys.TRAIN, torch.zeros(1, 1, requires_grad=True),
                                      np.array([[1]]), train_op_fn=lambda loss: (lambda: called.append(loss)))
    spec.train_op()
    assert float(called[0].detach()) == pytest.approx(math.log(2))


# -- MultiClassHead -------------------------------------------------------------------------


def test_multi_class_matches_tf_multi_dim_numbers():
    # dnn_testing_utils BaseDNNClassifierEvaluateTest::test_multi_dim, at the head
    logits = torch.tensor([[-0.48, 0.48, 0.39], [-0.48, 0.48, 0.39]])
    labels = np.array([[1], [0]])
    head = MultiClassHead(3)
    assert float(head.loss(labels, logits)) == pytest.approx(2.62305466 / 2, abs=1e-6)
    got = _results(head.metrics(labels, logits))
    assert sorted(got) == ["accuracy", "average_loss"]
    assert got["average_loss"] == pytest.approx(2.62305466 / 2, abs=1e-6)
    assert got["accuracy"] == pytest.approx(0.5)


def test_multi_class_predictions_and_vocabulary():
    head = MultiClassHead(3, label_vocabulary=["a", "b", "c"])
    p = head.predictions(torch.tensor([[0.0, 2.0, 1.0], [3.0, 0.0, 0.0]]))
    assert sorted(p) == ["all_class_ids", "all_classes", "class_ids", "classes", "logits", "probabilities"]
    assert p["class_ids"].tolist() == [[1], [0]]
    assert p["classes"].tolist() == [[b"b"], [b"a"]]
    assert p["all_classes"].tolist() == [[b"a", b"b", b"c"]] * 2
    assert p["all_class_ids"].tolist() == [[0, 1, 2]] * 2
    np.testing.assert_allclose(p["probabilities"].sum(-1).numpy(), [1.0, 1.0], rtol=1e-6)
    ops = head.metrics(np.array(["b", "a"], dtype=object), torch.tensor([[0.0, 2.0, 1.0], [3.0, 0.0, 0.0]]))
    assert float(ops["accuracy"].result()) == 1.0
    spec = head.create_estimator_spec({}, ee.ModeKeys.PREDICT, torch.zeros(1, 3))
    assert sorted(spec.export_outputs) == ["classification", "predict", "serving_default"]


def test_multi_class_label_errors():
    head = MultiClassHead(3)
    with pytest.raises(ValueError, match="Labels must be <= n_classes - 1 = 2"):
        head.loss(np.array([[3]]), torch.zeros(1, 3))
    with pytest.raises(ValueError, match="Labels dtype should be integer"):
        head.loss(np.array([[0.5]]), torch.zeros(1, 3))
    # integral floats (e.g. from pandas) are accepted
    assert float(head.loss(np.array([[2.0]]), torch.zeros(1, 3))) == pytest.approx(math.log(3))


# -- RegressionHead -------------------------------------------------------------------------


def test_regression_loss_metrics_and_outputs():
    head = RegressionHead()
    logits = torch.tensor([[13.0]])
    labels = np.array([[10.0]])
    assert float(head.loss(labels, logits)) == pytest.approx(9.0)
    got = _results(head.metrics(labels, logits))
    assert got == {"average_loss": 9.0, "label/mean": 10.0, "prediction/mean": 13.0}
    spec = head.create_estimator_spec({}, ee.ModeKeys.PREDICT, logits)
    assert sorted(spec.predictions) == ["predictions"]
    assert sorted(spec.export_outputs) == ["predict", "regression", "serving_default"]
    assert isinstance(spec.export_outputs["serving_default"], RegressionOutput)


def test_regression_multi_dim_sum_over_batch_size_divides_by_elements():
    head = RegressionHead(label_dimension=2, weight_column="w")
    logits = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    labels = np.array([[0.0, 0.0], [0.0, 0.0]])
    features = {"w": np.array([1.0, 2.0])}
    # weighted sum = 1*(1+4) + 2*(9+16) = 55 over 4 elements
    assert float(head.loss(labels, logits, features)) == pytest.approx(55 / 4)
    assert float(head.metrics(labels, logits, features)["average_loss"].result()) == pytest.approx(55 / 6)
    with pytest.raises(ValueError, match=r"Mismatched label shape\. Expected labels dimension=2"):
        head.loss(np.array([[1.0]]), logits)
    with pytest.raises(ValueError, match="Regression labels must be numbers"):
        RegressionHead().loss(np.array([["x"]]), torch.zeros(1, 1))


# -- TRAIN fast path: lazy predictions, label checks on the first batch -----------------------------


def _multiclass_data():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 2)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int64) + (x[:, 1] > 0).astype(np.int64)  # 0, 1, 2
    return x, y


def test_train_predictions_are_computed_only_when_a_hook_asks(tmp_path, monkeypatch):
    from estimator_engine import feature_column as fc
    from estimator_engine.canned import DNNClassifier

    calls = []
    original = MultiClassHead.predictions
    monkeypatch.setattr(MultiClassHead, "predictions",
                        lambda self, logits: calls.append(1) or original(self, logits))
    x, y = _multiclass_data()
    train_fn = ee.inputs.numpy_input_fn({"x": x}, y, batch_size=16, num_epochs=None, shuffle=False)
    est = DNNClassifier(hidden_units=[4], feature_columns=[fc.numeric_column("x", shape=2)], n_classes=3,
                        model_dir=str(tmp_path))
    est.train(train_fn, steps=6)
    assert len(calls) <= 1  # at most the first step's full spec validation looks at them

    fetched = []

    class Fetch(ee.SessionRunHook):
        def before_run(self, run_context):
            return ee.SessionRunArgs(["probabilities", "class_ids", "predictions/logits"])

        def after_run(self, run_context, run_values):
            fetched.append(run_values.results)

    calls.clear()
    est.train(train_fn, steps=3, hooks=[Fetch()])
    assert len(fetched) == 3 and len(calls) >= 3
    probabilities, class_ids, logits = fetched[-1]
    assert probabilities.shape == (16, 3) and class_ids.shape == (16, 1) and logits.shape == (16, 3)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, rtol=1e-6)
    np.testing.assert_array_equal(class_ids[:, 0], logits.argmax(axis=1))


def test_label_range_is_checked_on_the_first_train_batch_and_every_eval_batch(tmp_path):
    from estimator_engine import feature_column as fc
    from estimator_engine.canned import DNNClassifier

    x, y = _multiclass_data()
    bad = y.copy()
    bad[40] = 3  # in the third batch of 16
    est = DNNClassifier(hidden_units=[4], feature_columns=[fc.numeric_column("x", shape=2)], n_classes=3,
                        model_dir=str(tmp_path))
    with pytest.raises(ValueError, match=r"Labels must be <= n_classes - 1 = 2; got 3"):
        est.train(ee.inputs.numpy_input_fn({"x": x[32:]}, bad[32:], batch_size=16, shuffle=False), steps=1)
    est.train(ee.inputs.numpy_input_fn({"x": x}, y, batch_size=16, shuffle=False), steps=2)
    with pytest.raises(ValueError, match=r"Labels must be <= n_classes - 1 = 2; got 3"):
        est.evaluate(ee.inputs.numpy_input_fn({"x": x}, bad, batch_size=16, shuffle=False))
