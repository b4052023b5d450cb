"""BinaryClassHead(thresholds=...) and TF 2's Head.metrics()/update_metrics() against TF 2.15's numbers.

``data/heads/binary_threshold_metrics.json`` holds TF 2.15.1's metric values for two batches fed
through ``head.metrics()`` / ``head.update_metrics()`` (``make_binary_threshold_metrics.py``).
"""

from __future__ import annotations

import json
import pathlib

import pytest
import torch

import estimator_engine as ee
from estimator_engine.canned.heads import BinaryClassHead

DATA = json.loads((pathlib.Path(__file__).parents[1] / "data" / "heads" / "binary_threshold_metrics.json").read_text())


@pytest.mark.parametrize("case", DATA["cases"], ids=["plain", "weighted", "named"])
def test_update_metrics_over_two_batches_equals_tf(case):
    head = BinaryClassHead(weight_column=case["weight_column"], thresholds=DATA["thresholds"], name=case["name"])
    eval_metrics = head.metrics()
    for batch in DATA["batches"]:
        eval_metrics = head.update_metrics(eval_metrics, {"w": torch.tensor(batch["w"])},
                                           torch.tensor(batch["logits"]), torch.tensor(batch["labels"]))
    got = {key: float(op.result()) for key, op in eval_metrics.items()}
    assert set(got) == set(case["metrics"])
    # AUCs: TF's 200-threshold interpolation, as the engine's metrics.auc (their own tests).
    for key, expected in case["metrics"].items():
        assert got[key] == pytest.approx(expected, rel=1e-5, abs=1e-6), key


def test_thresholds_out_of_range_are_refused_as_tf_does():
    with pytest.raises(ValueError, match=r"thresholds not in \(0, 1\): \(\(0.5, 1.0\),\)\."):
        BinaryClassHead(thresholds=[0.5, 1.0])


def test_threshold_metrics_come_out_of_evaluate(tmp_path):
    x = torch.linspace(-2, 2, 32).reshape(-1, 1)
    y = (x > 0.3).to(torch.int64)
    head = BinaryClassHead(thresholds=[0.3])

    def model_fn(features, labels, mode):
        net = ee.get_module("net", lambda: torch.nn.Linear(1, 1))
        logits = net(features["x"])
        if mode == ee.ModeKeys.EVAL:  # a TF 2 model_fn's own metrics, the Head's way
            loss = head.loss(labels, logits)
            eval_metrics = head.update_metrics(head.metrics(), features, logits, labels)
            return ee.EstimatorSpec(mode, loss=loss, eval_metric_ops=eval_metrics)
        optimizer = ee.get_optimizer("sgd", lambda: torch.optim.SGD(net.parameters(), lr=0.1))
        return head.create_estimator_spec(features, mode, logits, labels, optimizer=optimizer)

    est = ee.Estimator(model_fn, model_dir=str(tmp_path))
    input_fn = ee.inputs.numpy_input_fn({"x": x.numpy()}, y.numpy(), batch_size=8, shuffle=False)
    est.train(input_fn, steps=4)
    results = est.evaluate(input_fn)
    with torch.no_grad():
        net_logits = x * est.get_variable_value("net/weight").item() + est.get_variable_value("net/bias").item()
    above = (torch.sigmoid(net_logits) > 0.3).to(torch.int64)
    assert results["accuracy/positive_threshold_0.3"] == pytest.approx(float((above == y).float().mean()))
    assert {"precision/positive_threshold_0.3", "recall/positive_threshold_0.3"} <= set(results)
