"""TF 2's PoissonRegressionHead, LogisticRegressionHead and MultiLabelHead against hand-computed
values; DNNEstimator / LinearEstimator / DNNLinearCombinedEstimator with a given head; dtypes."""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest
import torch

import estimator_engine as ee
from estimator_engine import feature_column as fc
from estimator_engine.canned import (
    BinaryClassHead,
    DNNEstimator,
    DNNLinearCombinedEstimator,
    LinearEstimator,
    LogisticRegressionHead,
    MultiClassHead,
    MultiLabelHead,
    PoissonRegressionHead,
    RegressionHead,
)


def _bce(label, logit):
    return max(logit, 0.0) - logit * label + math.log1p(math.exp(-abs(logit)))


def test_poisson_loss_and_predictions_by_hand():
    head = PoissonRegressionHead()
    labels = torch.tensor([[1.0], [3.0]])
    logits = torch.tensor([[0.0], [1.0]])
    # exp(c) - z c, plus Stirling's log(z!) for z > 1: z log z - z + 0.5 log(2 pi z).
    row1 = 1.0
    row2 = math.exp(1.0) - 3.0 + 3 * math.log(3) - 3 + 0.5 * math.log(2 * math.pi * 3)
    assert float(head.loss(labels, logits)) == pytest.approx((row1 + row2) / 2, rel=1e-6)
    assert float(PoissonRegressionHead(compute_full_loss=False).loss(labels, logits)) == pytest.approx(
        (1.0 + math.exp(1.0) - 3.0) / 2, rel=1e-6)
    predictions = head.predictions(logits)
    assert sorted(predictions) == ["logits", "predictions"]
    torch.testing.assert_close(predictions["predictions"], torch.exp(logits))
    ops = head.metrics(labels, logits)
    assert sorted(ops) == ["average_loss", "label/mean", "prediction/mean"]
    assert float(ops["prediction/mean"].result()) == pytest.approx((1 + math.e) / 2, rel=1e-6)


def test_logistic_regression_head_by_hand_and_label_range():
    head = LogisticRegressionHead()
    labels = torch.tensor([[0.25], [1.0]])
    logits = torch.tensor([[0.5], [-1.0]])
    expected = (_bce(0.25, 0.5) + _bce(1.0, -1.0)) / 2
    assert float(head.loss(labels, logits)) == pytest.approx(expected, rel=1e-6)
    torch.testing.assert_close(head.predictions(logits)["predictions"], torch.sigmoid(logits))
    with pytest.raises(ValueError, match=r"Labels must be in range \[0, 1\]"):
        head.loss(torch.tensor([[1.5], [0.0]]), logits)


def test_multi_label_head_by_hand():
    head = MultiLabelHead(3, thresholds=[0.5], label_vocabulary=["a", "b", "c"])
    labels = torch.tensor([[1, 0, 1], [0, 1, 0]])
    logits = torch.tensor([[2.0, -1.0, 0.0], [0.0, 0.0, 3.0]])
    rows = [np.mean([_bce(label, z) for label, z in zip(lr, zr)]) for lr, zr in zip(labels.tolist(), logits.tolist())]
    assert float(head.loss(labels, logits)) == pytest.approx(np.mean(rows), rel=1e-6)
    assert float(MultiLabelHead(3, loss_reduction="sum").loss(labels, logits)) == pytest.approx(sum(rows), rel=1e-6)
    predictions = head.predictions(logits)
    assert sorted(predictions) == ["classes", "logits", "probabilities"]
    assert predictions["classes"].tolist() == [[b"a", b"b", b"c"]] * 2
    ops = {k: float(v.result()) for k, v in head.metrics(labels, logits).items()}
    # probabilities > 0.5: [1, 0, 0], [0, 0, 1] against [1, 0, 1], [0, 1, 0].
    assert ops["accuracy/positive_threshold_0.5"] == pytest.approx(3 / 6)
    assert ops["precision/positive_threshold_0.5"] == pytest.approx(1 / 2)
    assert ops["recall/positive_threshold_0.5"] == pytest.approx(1 / 3)
    assert ops["average_loss"] == pytest.approx(np.mean(rows), rel=1e-6)
    assert {"auc", "auc_precision_recall"} <= set(ops)
    with pytest.raises(ValueError, match=r"labels must be an integer indicator Tensor with values in \[0, 1\]"):
        head.loss(torch.tensor([[2, 0, 1], [0, 1, 0]]), logits)
    with pytest.raises(ValueError, match="n_classes must be > 1 for multi-label classification"):
        MultiLabelHead(1)
    with pytest.raises(ValueError, match=r"thresholds must be in \(0, 1\) range"):
        MultiLabelHead(2, thresholds=[1.0])


def test_all_class_ids_are_int32_class_ids_int64():
    for head in (BinaryClassHead(), MultiClassHead(3)):
        predictions = head.predictions(torch.zeros(2, head.logits_dimension))
        assert predictions["all_class_ids"].dtype == torch.int32
        assert predictions["class_ids"].dtype == torch.int64


def test_linear_estimator_with_poisson_head_recovers_log_rate(tmp_path):
    x = np.linspace(-1, 1, 64, dtype=np.float32)
    rate = np.exp(0.5 + 1.0 * x).astype(np.float32)  # the loss is minimal at logits = log(rate)
    est = LinearEstimator(PoissonRegressionHead(), [fc.numeric_column("x")], model_dir=str(tmp_path),
                          optimizer=functools.partial(torch.optim.SGD, lr=0.3))
    est.train(ee.inputs.numpy_input_fn({"x": x}, rate, batch_size=64, num_epochs=None, shuffle=False),
              steps=400)
    assert est.get_variable_value("linear/linear_model/x/weights")[0, 0] == pytest.approx(1.0, abs=0.02)
    assert est.get_variable_value("linear/linear_model/bias_weights")[0] == pytest.approx(0.5, abs=0.02)
    first = next(est.predict(ee.inputs.numpy_input_fn({"x": x[:1]}, shuffle=False)))
    assert first["predictions"][0] == pytest.approx(rate[0], rel=0.05)


def test_dnn_and_combined_estimators_with_a_multi_label_head(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(128, 2)).astype(np.float32)
    labels = np.stack([x[:, 0] > 0, x[:, 1] > 0, x.sum(axis=1) > 0], axis=1).astype(np.int64)
    train_fn = ee.inputs.numpy_input_fn({"x": x}, labels, batch_size=32, num_epochs=None, shuffle=True)
    eval_fn = ee.inputs.numpy_input_fn({"x": x}, labels, shuffle=False)
    columns = [fc.numeric_column("x", shape=2)]
    dnn = DNNEstimator(MultiLabelHead(3), [16], columns, model_dir=str(tmp_path / "dnn"),
                       optimizer=functools.partial(torch.optim.Adam, lr=0.05))
    dnn.train(train_fn, steps=150)
    result = dnn.evaluate(eval_fn)
    assert sorted(result) == ["auc", "auc_precision_recall", "average_loss", "global_step", "loss"]
    assert result["auc"] > 0.95
    combined = DNNLinearCombinedEstimator(MultiLabelHead(3), model_dir=str(tmp_path / "wide_deep"),
                                          linear_feature_columns=columns, dnn_feature_columns=columns,
                                          dnn_hidden_units=[4])
    combined.train(train_fn, steps=2)
    names = combined.get_variable_names()
    assert "linear/linear_model/x/weights" in names and "dnn/logits/kernel" in names
    assert combined.get_variable_value("dnn/logits/kernel").shape == (4, 3)


def test_estimators_require_a_head():
    with pytest.raises(TypeError, match="head must be a Head instance"):
        DNNEstimator("regression", [2], [fc.numeric_column("x")])
    with pytest.raises(TypeError, match="head must be a Head instance"):
        LinearEstimator(None, [fc.numeric_column("x")])
    with pytest.raises(TypeError, match="head must be a Head instance"):
        DNNLinearCombinedEstimator(RegressionHead, linear_feature_columns=[fc.numeric_column("x")])


def test_multi_head_by_hand():
    from estimator_engine.canned import MultiHead

    head = MultiHead([RegressionHead(name="a"), BinaryClassHead(name="b")], head_weights=[1.0, 2.0])
    assert head.logits_dimension == 2 and head.name == "a_b"
    logits = torch.tensor([[1.0, 0.5], [2.0, -1.0]])
    labels = {"a": torch.tensor([[0.0], [2.0]]), "b": torch.tensor([[1], [0]])}
    loss_a = ((1.0 - 0.0) ** 2 + 0.0) / 2
    loss_b = (_bce(1, 0.5) + _bce(0, -1.0)) / 2
    assert float(head.loss(labels, logits)) == pytest.approx(loss_a + 2 * loss_b, rel=1e-6)
    # A dict of logits gives the same loss.
    split = {"a": logits[:, :1], "b": logits[:, 1:]}
    assert float(head.loss(labels, split)) == pytest.approx(loss_a + 2 * loss_b, rel=1e-6)
    ops = {k: float(v.result()) for k, v in head.metrics(labels, logits).items()}
    assert ops["loss/a"] == pytest.approx(loss_a) and ops["loss/b"] == pytest.approx(loss_b, rel=1e-6)
    assert ops["average_loss/a"] == pytest.approx(loss_a) and ops["accuracy/b"] == 1.0
    predictions = head.predictions(logits)
    assert predictions["a/predictions"].tolist() == [[1.0], [2.0]]
    assert predictions["b/class_ids"].tolist() == [[1], [0]]
    spec = head.create_estimator_spec({}, ee.ModeKeys.PREDICT, logits)
    assert {"serving_default", "a", "b", "predict", "a/regression", "b/classification"} <= set(spec.export_outputs)
    assert "b/probabilities" in spec.export_outputs["predict"].outputs
    with pytest.raises(ValueError, match=r"labels has missing values for head\(s\): \['b'\]"):
        head.loss({"a": labels["a"]}, logits)
    with pytest.raises(ValueError, match="All given heads must have name specified"):
        MultiHead([RegressionHead()])
    with pytest.raises(ValueError, match="heads and head_weights must have the same size"):
        MultiHead([RegressionHead(name="a")], head_weights=[1.0, 2.0])


def test_dnn_estimator_with_a_multi_head(tmp_path):
    from estimator_engine.canned import MultiHead

    rng = np.random.default_rng(1)
    x = rng.normal(size=(64, 2)).astype(np.float32)
    labels = {"size": (x.sum(axis=1, keepdims=True)).astype(np.float32),
              "sign": (x[:, :1] > 0).astype(np.int64)}
    head = MultiHead([RegressionHead(name="size"), BinaryClassHead(name="sign")])
    est = DNNEstimator(head, [8], [fc.numeric_column("x", shape=2)], model_dir=str(tmp_path),
                       optimizer=functools.partial(torch.optim.Adam, lr=0.05))
    est.train(ee.inputs.numpy_input_fn({"x": x}, labels, batch_size=32, num_epochs=None, shuffle=True), steps=100)
    result = est.evaluate(ee.inputs.numpy_input_fn({"x": x}, labels, shuffle=False))
    assert {"loss/size", "loss/sign", "average_loss/size", "accuracy/sign", "auc/sign"} <= set(result)
    assert result["accuracy/sign"] > 0.9
    first = next(est.predict(ee.inputs.numpy_input_fn({"x": x[:1]}, shuffle=False)))
    assert {"size/predictions", "sign/class_ids", "sign/probabilities"} <= set(first)
