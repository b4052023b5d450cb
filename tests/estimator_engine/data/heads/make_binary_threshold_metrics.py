"""Writes binary_threshold_metrics.json: TF 2.15's BinaryClassHead(thresholds=...) eval metrics.

Run with TensorFlow 2.15 in its own venv (never the project's):
    /tmp/tfvenv/bin/python tests/estimator_engine/data/heads/make_binary_threshold_metrics.py

Two batches are fed through TF 2's Head.metrics() / update_metrics() (the metrics accumulate over
both, as an evaluation does), with and without a weight column, with and without a head name.
"""
import json
import pathlib

import numpy as np
import tensorflow as tf
import tensorflow_estimator as tfe  # noqa: F401  (registers tf.estimator)

HERE = pathlib.Path(__file__).resolve().parent
rng = np.random.default_rng(7)
BATCHES = [{"logits": rng.normal(size=(6, 1)).round(3).tolist(),
            "labels": rng.integers(0, 2, size=(6, 1)).tolist(),
            "w": rng.uniform(0.5, 2.0, size=(6, 1)).round(3).tolist()} for _ in range(2)]
THRESHOLDS = [0.25, 0.5, 0.7]


def run(weight_column, name):
    head = tf.estimator.BinaryClassHead(weight_column=weight_column, thresholds=THRESHOLDS, name=name)
    metrics = head.metrics()
    for batch in BATCHES:
        features = {"w": tf.constant(batch["w"], tf.float32)}
        metrics = head.update_metrics(metrics, features, tf.constant(batch["logits"], tf.float32),
                                      tf.constant(batch["labels"], tf.int64))
    return {key: float(metric.result().numpy()) for key, metric in metrics.items()}


cases = [{"weight_column": w, "name": n, "metrics": run(w, n)} for w, n in [(None, None), ("w", None), (None, "h")]]
(HERE / "binary_threshold_metrics.json").write_text(json.dumps(
    {"tensorflow": tf.__version__, "thresholds": THRESHOLDS, "batches": BATCHES, "cases": cases}, indent=1) + "\n")
print(json.dumps(cases, indent=1))
