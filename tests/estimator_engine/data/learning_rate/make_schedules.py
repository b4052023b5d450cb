"""Writes schedules.json: TF 2.15's learning-rate schedules at a range of global steps.

Run with TensorFlow 2.15 in its own venv (never the project's):
    /tmp/tfvenv/bin/python tests/estimator_engine/data/learning_rate/make_schedules.py
"""
import json
import pathlib

import tensorflow as tf

HERE = pathlib.Path(__file__).resolve().parent
STEPS = [0, 1, 5, 99, 100, 101, 250, 999, 1000, 1001, 5000]
CASES = {
    "exponential": {"kind": "exponential", "args": [0.1, 100, 0.96, False]},
    "exponential_staircase": {"kind": "exponential", "args": [0.1, 100, 0.5, True]},
    "piecewise": {"kind": "piecewise", "args": [[100, 1000], [1.0, 0.5, 0.1]]},
}
out = {"tensorflow": tf.__version__, "steps": STEPS, "cases": {}}
for name, case in CASES.items():
    if case["kind"] == "exponential":
        lr, decay_steps, rate, staircase = case["args"]
        v1 = [float(tf.compat.v1.train.exponential_decay(lr, tf.constant(s, tf.int64), decay_steps, rate,
                                                         staircase=staircase)()) for s in STEPS]
        keras = tf.keras.optimizers.schedules.ExponentialDecay(lr, decay_steps, rate, staircase=staircase)
    else:
        boundaries, values = case["args"]
        v1 = [float(tf.compat.v1.train.piecewise_constant(tf.constant(s, tf.int64), boundaries, values)())
              for s in STEPS]
        keras = tf.keras.optimizers.schedules.PiecewiseConstantDecay(boundaries, values)
    v2 = [float(keras(s)) for s in STEPS]
    out["cases"][name] = {**case, "tf1": v1, "keras": v2}
(HERE / "schedules.json").write_text(json.dumps(out, indent=1) + "\n")
print(json.dumps(out["cases"], indent=1))
