"""Known-answer tests for estimator_engine.metrics (TF v1 / Keras semantics, mergeable states)."""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest
import torch

from estimator_engine import metrics
from estimator_engine.metric_op import MetricOp


def value(op: MetricOp) -> float:
    return float(op.result())


def exact_roc_auc(labels: np.ndarray, scores: np.ndarray) -> float:
    """Mann-Whitney U statistic (scores are continuous, so there are no ties)."""
    ranks = np.empty(len(scores))
    ranks[np.argsort(scores)] = np.arange(1, len(scores) + 1)
    pos = labels.astype(bool)
    n_pos, n_neg = pos.sum(), (~pos).sum()
    return float((ranks[pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def naive_confusion(labels, scores, weights, thresholds):
    """Per-threshold confusion counts with a plain loop (the reference for the vectorised state)."""
    out = {k: [] for k in ("true_positives", "false_positives", "true_negatives", "false_negatives")}
    for t in thresholds:
        pred = scores > t
        out["true_positives"].append(float(np.sum(weights * (labels & pred))))
        out["false_positives"].append(float(np.sum(weights * (~labels & pred))))
        out["true_negatives"].append(float(np.sum(weights * (~labels & ~pred))))
        out["false_negatives"].append(float(np.sum(weights * (labels & ~pred))))
    return out


class TestAccuracy:
    def test_known_answer(self):
        assert value(metrics.accuracy(labels=[1, 0, 1, 1], predictions=[1, 1, 1, 0])) == 0.5

    def test_weighted(self):
        op = metrics.accuracy(labels=[1, 0, 1, 1], predictions=[1, 1, 1, 0], weights=[1, 2, 3, 4])
        assert value(op) == pytest.approx(0.4)

    def test_squeezes_trailing_one(self):
        labels = torch.tensor([[1], [0], [2]])
        assert value(metrics.accuracy(labels=labels, predictions=torch.tensor([1, 0, 0]))) == \
            pytest.approx(2 / 3)
        assert value(metrics.accuracy(labels=[1, 0, 2], predictions=labels)) == 1.0

    def test_weights_per_example_broadcast_over_columns(self):
        labels = torch.tensor([[1, 1], [0, 0]])
        predictions = torch.tensor([[1, 0], [0, 0]])
        op = metrics.accuracy(labels, predictions, weights=torch.tensor([1.0, 3.0]))
        assert value(op) == pytest.approx((1 + 0 + 3 + 3) / 8)
        op = metrics.accuracy(labels, predictions, weights=torch.tensor([[1.0], [3.0]]))
        assert value(op) == pytest.approx((1 + 0 + 3 + 3) / 8)

    def test_predictions_cast_to_label_dtype_like_tf(self):
        # TF casts predictions to the labels' dtype: 0.9 -> 0 for integer labels.
        assert value(metrics.accuracy(labels=torch.tensor([0, 1]),
                                      predictions=torch.tensor([0.9, 1.0]))) == 1.0

    def test_numpy_and_list_inputs(self):
        op = metrics.accuracy(labels=np.array([1, 0]), predictions=[1, 1])
        assert value(op) == 0.5

    def test_empty_batch_is_zero(self):
        assert value(metrics.accuracy(labels=torch.zeros(0), predictions=torch.zeros(0))) == 0.0

    def test_shape_mismatch_message(self):
        with pytest.raises(ValueError, match=r"accuracy: labels shape \(3,\) and predictions shape "
                                             r"\(4,\) are not compatible"):
            metrics.accuracy(labels=[1, 0, 1], predictions=[1, 0, 1, 1])

    def test_bad_weights_message(self):
        with pytest.raises(ValueError, match=r"accuracy: weights shape \(2,\) cannot be broadcast "
                                             r"to values shape \(3,\)"):
            metrics.accuracy(labels=[1, 0, 1], predictions=[1, 0, 1], weights=[1.0, 2.0])

    def test_non_numeric_input_message(self):
        with pytest.raises(TypeError, match="accuracy: labels must be a torch tensor"):
            metrics.accuracy(labels=[{"a": 1}], predictions=[1])


class TestMean:
    def test_known_answers(self):
        assert value(metrics.mean([1.0, 2.0, 3.0, 4.0])) == 2.5
        assert value(metrics.mean([1.0, 2.0, 3.0, 4.0], weights=[1, 1, 0, 2])) == 2.75

    def test_rank_one_weights_broadcast_over_rows(self):
        op = metrics.mean(torch.tensor([[1.0, 2.0], [3.0, 4.0]]), weights=torch.tensor([1.0, 3.0]))
        assert value(op) == pytest.approx((1 + 2 + 9 + 12) / 8)

    def test_scalar_weight(self):
        assert value(metrics.mean([1.0, 3.0], weights=5.0)) == 2.0

    def test_zero_weights_give_zero(self):
        assert value(metrics.mean([1.0, 3.0], weights=[0.0, 0.0])) == 0.0
        assert value(metrics.mean(torch.zeros(0))) == 0.0

    def test_weights_of_different_rank_rejected(self):
        with pytest.raises(ValueError, match=r"mean: weights shape \(2,\) cannot be broadcast to "
                                             r"values shape \(2, 3, 4\)"):
            metrics.mean(torch.ones(2, 3, 4), weights=torch.ones(2))

    def test_state_is_float64_detached_and_on_input_device(self):
        values = torch.tensor([1.0, 2.0], requires_grad=True)
        op = metrics.mean(values * 2)
        for tensor in op.state.values():
            assert tensor.dtype == torch.float64
            assert tensor.device == values.device
            assert not tensor.requires_grad

    def test_float64_state_keeps_precision_over_many_batches(self):
        ops = [metrics.mean(torch.full((1000,), 0.1, dtype=torch.float32)) for _ in range(200)]
        assert value(metrics.merge_metric_ops(ops)) == pytest.approx(0.1, abs=1e-8)


class TestPrecisionRecall:
    labels = [1, 0, 1, 1, 0, 1]
    predictions = [1, 1, 0, 1, 0, 0]  # tp=2, fp=1, fn=2, tn=1

    def test_known_answers(self):
        assert value(metrics.precision(labels=self.labels, predictions=self.predictions)) == \
            pytest.approx(2 / 3)
        assert value(metrics.recall(labels=self.labels, predictions=self.predictions)) == 0.5

    def test_weighted(self):
        weights = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
        # tp weights 1+4, fp weight 2, fn weights 3+6
        assert value(metrics.precision(self.labels, self.predictions, weights=weights)) == \
            pytest.approx(5 / 7)
        assert value(metrics.recall(self.labels, self.predictions, weights=weights)) == \
            pytest.approx(5 / 14)

    def test_cast_to_bool(self):
        op = metrics.precision(labels=[2, 0], predictions=[0.3, 0.0])  # 0.3 -> True, as in TF
        assert value(op) == 1.0

    def test_zero_denominator_gives_zero(self):
        assert value(metrics.precision(labels=[1, 1], predictions=[0, 0])) == 0.0
        assert value(metrics.recall(labels=[0, 0], predictions=[1, 0])) == 0.0

    def test_state_keys(self):
        assert set(metrics.precision([1], [1]).state) == {"true_positives", "false_positives"}
        assert set(metrics.recall([1], [1]).state) == {"true_positives", "false_negatives"}

    def test_shape_mismatch_message(self):
        with pytest.raises(ValueError, match=r"recall: labels shape \(2, 2\) and predictions shape"):
            metrics.recall(labels=torch.ones(2, 2), predictions=torch.ones(2, 3))


class TestRegressionMetrics:
    labels = [1.0, 2.0, 3.0, 4.0]
    predictions = [2.0, 2.0, 1.0, 8.0]  # errors 1, 0, -2, 4

    def test_known_answers(self):
        assert value(metrics.mean_squared_error(self.labels, self.predictions)) == 21 / 4
        assert value(metrics.root_mean_squared_error(self.labels, self.predictions)) == \
            pytest.approx(math.sqrt(21 / 4))
        assert value(metrics.mean_absolute_error(self.labels, self.predictions)) == 7 / 4

    def test_weighted(self):
        w = [1.0, 1.0, 2.0, 0.0]
        assert value(metrics.mean_squared_error(self.labels, self.predictions, weights=w)) == \
            pytest.approx((1 + 0 + 8) / 4)
        assert value(metrics.root_mean_squared_error(self.labels, self.predictions, weights=w)) \
            == pytest.approx(1.5)
        assert value(metrics.mean_absolute_error(self.labels, self.predictions, weights=w)) == \
            pytest.approx((1 + 0 + 4) / 4)

    def test_column_labels_against_flat_predictions(self):
        labels = torch.tensor([[1.0], [2.0]])
        assert value(metrics.mean_absolute_error(labels, torch.tensor([2.0, 4.0]))) == 1.5

    def test_rmse_is_root_of_merged_mse_not_mean_of_roots(self):
        a = metrics.root_mean_squared_error([0.0], [3.0])
        b = metrics.root_mean_squared_error([0.0, 0.0, 0.0], [1.0, 1.0, 1.0])
        assert value(a.merge(b)) == pytest.approx(math.sqrt(12 / 4))

    def test_shape_mismatch_message(self):
        with pytest.raises(ValueError, match=r"mean_squared_error: labels shape \(2,\) and "
                                             r"predictions shape \(3,\)"):
            metrics.mean_squared_error([1.0, 2.0], [1.0, 2.0, 3.0])


class TestAuc:
    def test_keras_documented_example(self):
        # tf.keras.metrics.AUC docstring: num_thresholds=3 -> 0.75.
        op = metrics.auc(labels=[0, 0, 1, 1], predictions=[0.0, 0.5, 0.3, 0.9], num_thresholds=3)
        assert value(op) == pytest.approx(0.75)
        assert op.state["true_positives"].tolist() == [2, 1, 0]
        assert op.state["false_positives"].tolist() == [2, 0, 0]
        assert op.state["true_negatives"].tolist() == [0, 2, 2]
        assert op.state["false_negatives"].tolist() == [0, 1, 2]

    def test_pr_interpolation_known_answer(self):
        op = metrics.auc(labels=[0, 0, 1, 1], predictions=[0.0, 0.5, 0.3, 0.9], num_thresholds=3,
                         curve="PR")
        # Davis & Goadrich: segment 1 slope 1/3, intercept 2/3, ratio 4; segment 2 gives 0.5.
        assert value(op) == pytest.approx((1 + (2 / 3) * math.log(4)) / 6 + 0.5)

    def test_binary_head_reference(self):
        # binary_class_head_test.py::test_eval: logits [[45], [-41]], labels [[1], [1]].
        probabilities = torch.sigmoid(torch.tensor([[45.0], [-41.0]]))
        labels = torch.tensor([[1], [1]])
        assert value(metrics.auc(labels, probabilities)) == 0.0
        assert value(metrics.auc(labels, probabilities, curve="PR")) == pytest.approx(1.0)

    def test_dnn_classifier_reference(self):
        # dnn_testing_utils.py::BaseDNNClassifierEvaluateTest::test_one_dim: both logits -2.08.
        probabilities = torch.sigmoid(torch.tensor([[-2.08], [-2.08]]))
        labels = torch.tensor([[1], [0]])
        assert value(metrics.auc(labels, probabilities)) == pytest.approx(0.5)
        assert value(metrics.auc(labels, probabilities, curve="PR")) == pytest.approx(0.5)

    def test_close_to_exact_roc_auc_on_random_data(self):
        rng = np.random.default_rng(0)
        labels = rng.integers(0, 2, size=2000)
        scores = 1 / (1 + np.exp(-(rng.normal(size=2000) + 1.2 * labels)))
        approx = value(metrics.auc(labels, torch.tensor(scores, dtype=torch.float32)))
        assert approx == pytest.approx(exact_roc_auc(labels, scores), abs=1e-2)
        fine = value(metrics.auc(labels, scores, num_thresholds=20001))
        assert fine == pytest.approx(exact_roc_auc(labels, scores), abs=1e-3)

    def test_state_equals_naive_loop_with_weights(self):
        rng = np.random.default_rng(1)
        labels = rng.integers(0, 2, size=300).astype(bool)
        scores = rng.random(300).astype(np.float32)
        scores[:5] = [0.0, 1.0, 0.5, 100 / 199, 3 / 199]  # exactly on thresholds / endpoints
        weights = rng.random(300)
        op = metrics.auc(labels, scores, weights=weights, num_thresholds=200)
        thresholds = np.array([-1e-7] + [(i + 1) / 199 for i in range(198)] + [1 + 1e-7],
                              dtype=np.float32)
        expected = naive_confusion(labels, scores, weights, thresholds)
        for key, counts in expected.items():
            np.testing.assert_allclose(op.state[key].numpy(), counts, rtol=1e-12, atol=1e-9)
            assert op.state[key].shape == (200,)
            assert op.state[key].dtype == torch.float64

    def test_explicit_thresholds_match_num_thresholds(self):
        labels, scores = [0, 0, 1, 1], [0.1, 0.4, 0.6, 0.9]
        by_list = metrics.auc(labels, scores, thresholds=[0.5])
        by_count = metrics.auc(labels, scores, num_thresholds=3)
        assert value(by_list) == value(by_count) == 1.0
        unsorted = metrics.auc(labels, scores, thresholds=[0.7, 0.2])
        assert unsorted.state["true_positives"].tolist() == [2, 2, 1, 0]

    @pytest.mark.parametrize(("curve", "method", "expected"), [
        ("ROC", "minoring", 0.5),
        ("ROC", "majoring", 1.0),
        ("ROC", "trapezoidal", 0.75),
        ("ROC", "careful_interpolation", 0.75),
        ("PR", "careful_interpolation", (1 + (2 / 3) * math.log(4)) / 6 + 0.5),
    ])
    def test_summation_methods(self, curve, method, expected):
        op = metrics.auc(labels=[0, 0, 1, 1], predictions=[0.0, 0.5, 0.3, 0.9], num_thresholds=3,
                         curve=curve, summation_method=method)
        assert value(op) == pytest.approx(expected, abs=1e-5)

    def test_weighted(self):
        # Doubling the weight of every example changes nothing; zero weight drops an example.
        labels, scores = [0, 0, 1, 1, 1], [0.0, 0.5, 0.3, 0.9, 0.1]
        base = value(metrics.auc(labels[:4], scores[:4], num_thresholds=3))
        assert value(metrics.auc(labels, scores, weights=[2, 2, 2, 2, 0], num_thresholds=3)) == \
            pytest.approx(base)

    def test_predictions_out_of_range_message(self):
        with pytest.raises(ValueError, match=r"auc: predictions must be in \[0, 1\]"):
            metrics.auc(labels=[0, 1], predictions=[0.5, 1.5])
        with pytest.raises(ValueError, match=r"predictions must be in \[0, 1\]"):
            metrics.auc(labels=[0, 1], predictions=[float("nan"), 0.5])

    def test_argument_messages(self):
        with pytest.raises(ValueError, match=r"auc: num_thresholds must be an integer > 1, got "
                                             r"num_thresholds=1"):
            metrics.auc([1], [0.5], num_thresholds=1)
        with pytest.raises(ValueError, match=r"auc: curve must be one of .*got curve='roc'"):
            metrics.auc([1], [0.5], curve="roc")
        with pytest.raises(ValueError, match=r"auc: summation_method must be one of"):
            metrics.auc([1], [0.5], summation_method="simpson")
        with pytest.raises(ValueError, match=r"auc: thresholds must be in \[0, 1\], got \[1.5\]"):
            metrics.auc([1], [0.5], thresholds=[0.2, 1.5])
        with pytest.raises(ValueError, match=r"auc: labels shape \(3,\) and predictions shape"):
            metrics.auc([1, 0, 1], [0.5, 0.5])

    def test_integer_and_half_predictions(self):
        assert value(metrics.auc([0, 1], [0, 1])) == 1.0
        assert value(metrics.auc([0, 1], torch.tensor([0.2, 0.8], dtype=torch.float16))) == 1.0

    def test_vectorised_on_a_large_batch(self):
        scores = torch.rand(1_000_000)
        labels = torch.rand(1_000_000) < scores
        op = metrics.auc(labels, scores)
        assert op.state["true_positives"][0] == labels.sum()
        assert 0.8 < value(op) < 0.9  # exact: 5/6 for this construction


class TestMerging:
    @pytest.mark.parametrize("name", [
        "accuracy", "mean", "precision", "recall", "auc", "auc_pr", "mean_squared_error",
        "root_mean_squared_error", "mean_absolute_error",
    ])
    @pytest.mark.parametrize("weighted", [False, True])
    def test_merged_batches_equal_metric_over_all_data(self, name, weighted):
        gen = torch.Generator().manual_seed(3)
        labels = (torch.rand(100, 1, generator=gen) < 0.4).to(torch.int64)
        scores = torch.rand(100, 1, generator=gen)
        weights = torch.rand(100, generator=gen) if weighted else None
        fns = {
            "accuracy": lambda y, p, w: metrics.accuracy(y, (p > 0.5).long(), weights=w),
            "mean": lambda y, p, w: metrics.mean(p, weights=w),
            "precision": lambda y, p, w: metrics.precision(y, p > 0.5, weights=w),
            "recall": lambda y, p, w: metrics.recall(y, p > 0.5, weights=w),
            "auc": lambda y, p, w: metrics.auc(y, p, weights=w),
            "auc_pr": lambda y, p, w: metrics.auc(y, p, weights=w, curve="PR"),
            "mean_squared_error": lambda y, p, w: metrics.mean_squared_error(y, p, weights=w),
            "root_mean_squared_error":
                lambda y, p, w: metrics.root_mean_squared_error(y, p, weights=w),
            "mean_absolute_error": lambda y, p, w: metrics.mean_absolute_error(y, p, weights=w),
        }
        fn = fns[name]
        whole = fn(labels, scores, weights)
        chunks = zip(labels.tensor_split(7), scores.tensor_split(7),
                     weights.tensor_split(7) if weighted else [None] * 7)
        ops = [fn(y, p, w) for y, p, w in chunks]
        assert len(ops) == 7
        merged = metrics.merge_metric_ops(ops)
        assert float(merged.result()) == pytest.approx(float(whole.result()), rel=1e-12, abs=1e-12)
        # The Estimator's own accumulation path gives the same.
        acc = ops[0]
        for op in ops[1:]:
            acc = acc.merge(op)
        assert float(acc.result()) == pytest.approx(float(whole.result()), rel=1e-12, abs=1e-12)

    def test_merge_does_not_mutate_inputs(self):
        a, b = metrics.mean([1.0]), metrics.mean([3.0])
        metrics.merge_metric_ops([a, b])
        assert value(a) == 1.0

    def test_merge_errors(self):
        with pytest.raises(ValueError, match="merge_metric_ops: got no MetricOps"):
            metrics.merge_metric_ops([])
        with pytest.raises(TypeError, match="merge_metric_ops: expected MetricOp values, got tuple"):
            metrics.merge_metric_ops([metrics.mean([1.0]), (1, 2)])

    def test_ops_pickle(self):
        op = metrics.auc([0, 1], [0.3, 0.7], curve="PR")
        restored = pickle.loads(pickle.dumps(op))
        assert float(restored.result()) == float(op.result())


def test_tf_v1_keywords_are_accepted_and_change_nothing():
    """``metrics.accuracy(labels=l, predictions=p, name='acc_op')`` from TF's tutorial ports unchanged."""
    labels, predictions = [1, 0, 1, 1], [1, 1, 1, 0]
    for metric in (metrics.accuracy, metrics.precision, metrics.recall, metrics.mean_squared_error,
                   metrics.root_mean_squared_error, metrics.mean_absolute_error, metrics.auc):
        plain = metric(labels=labels, predictions=predictions)
        tf_style = metric(labels=labels, predictions=predictions, name="op", metrics_collections=None,
                          updates_collections=None)
        assert float(tf_style.result()) == float(plain.result()), metric.__name__
    assert float(metrics.mean([1.0, 3.0], name="mean_op").result()) == 2.0


@pytest.mark.requires_gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_states_stay_on_cuda():
    labels = torch.tensor([0, 1, 1], device="cuda")
    scores = torch.tensor([0.2, 0.9, 0.4], device="cuda")
    for op in (metrics.auc(labels, scores), metrics.accuracy(labels, scores > 0.5),
               metrics.mean(scores, weights=[1.0, 2.0, 3.0])):
        for tensor in op.state.values():
            assert tensor.device.type == "cuda"
            assert tensor.dtype == torch.float64
    assert float(metrics.auc(labels, scores).result()) == pytest.approx(1.0)
