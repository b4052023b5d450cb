"""The TF peer workload on TensorFlow 2.15 ``tf.estimator`` (run in its own venv, never in CI).

MLP 20-64-32-3 (ReLU), Adam(1e-3), softmax cross-entropy, batch 128, 2000 train steps on 10,000
synthetic rows (x ~ N(0, 1), label = argmax of the first 3 features), custom ``model_fn``,
default ``RunConfig`` (checkpoints every 600 s + final, summaries every 100 steps, loss logged
every 100 steps), then ``evaluate`` and ``predict`` on 2,000 rows. ``benchmarks/tf_peer/engine_mlp.py``
is the same script on estimator_engine. Prints one JSON line:
``{"system", "train_s", "train_steps_per_sec", "evaluate_s", "predict_s", "script_s", "import_s",
"train2_s", "train2_steps_per_sec"}`` (``train2``: a second ``train()`` of as many steps, after the
script's own work: the steady state).

    /tmp/tfpeer_venv/bin/python benchmarks/tf_peer/tf_mlp.py [--steps 2000] [--threads 1] [--input dataset|numpy]
        [--model custom|canned] [--size tiny|mid]
"""

from __future__ import annotations

import time

_T0 = time.perf_counter()

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import warnings  # noqa: E402

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

_IMPORT_S = time.perf_counter() - _T0
N_ROWS = 10_000
# size -> (features, hidden units, classes, batch): the same table as engine_mlp.py
SIZES = {"tiny": (8, (16,), 2, 32), "mid": (20, (64, 32), 3, 128)}
N_FEATURES, HIDDEN, N_CLASSES, BATCH = SIZES["mid"]


def make_data(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((N_ROWS, N_FEATURES), dtype=np.float32)
    return x, x[:, :N_CLASSES].argmax(axis=1).astype(np.int64)


def model_fn(features, labels, mode):
    net = features["x"]
    for units in HIDDEN:
        net = tf.compat.v1.layers.dense(net, units, activation=tf.nn.relu)
    logits = tf.compat.v1.layers.dense(net, N_CLASSES)
    class_ids = tf.argmax(logits, axis=1)
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions={"class_ids": class_ids})
    loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
    if mode == tf.estimator.ModeKeys.EVAL:
        return tf.estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops={
            "accuracy": tf.compat.v1.metrics.accuracy(labels=labels, predictions=class_ids)})
    optimizer = tf.compat.v1.train.AdamOptimizer(1e-3)
    train_op = optimizer.minimize(loss, global_step=tf.compat.v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def input_fn(x, y, shuffle: bool, repeat: bool, kind: str):
    if kind == "numpy":
        return tf.compat.v1.estimator.inputs.numpy_input_fn(
            {"x": x}, y, batch_size=BATCH, num_epochs=None if repeat else 1, shuffle=shuffle)

    def fn():
        data = tf.data.Dataset.from_tensor_slices(({"x": x}, y) if y is not None else {"x": x})
        if shuffle:
            data = data.shuffle(len(x), seed=0, reshuffle_each_iteration=True)
        if repeat:
            data = data.repeat()
        return data.batch(BATCH).prefetch(2)

    return fn


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--threads", type=int, default=1, help="intra- and inter-op threads (0: TF default)")
    parser.add_argument("--input", choices=("dataset", "numpy"), default="dataset")
    parser.add_argument("--model", choices=("custom", "canned"), default="custom",
                        help="custom model_fn, or the canned tf.estimator.DNNClassifier (default Adagrad)")
    parser.add_argument("--size", choices=tuple(SIZES), default="mid")
    args = parser.parse_args()
    global N_FEATURES, HIDDEN, N_CLASSES, BATCH
    N_FEATURES, HIDDEN, N_CLASSES, BATCH = SIZES[args.size]
    tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.ERROR)
    warnings.filterwarnings("ignore")
    session_config = None
    if args.threads:
        session_config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=args.threads,
                                                  inter_op_parallelism_threads=args.threads)
    x, y = make_data()
    model_dir = tempfile.mkdtemp(prefix="tfpeer_tf_")
    try:
        start = time.perf_counter()
        config = tf.estimator.RunConfig(session_config=session_config)
        if args.model == "canned":
            estimator = tf.estimator.DNNClassifier(
                hidden_units=list(HIDDEN), n_classes=N_CLASSES, model_dir=model_dir, config=config,
                feature_columns=[tf.feature_column.numeric_column("x", shape=(N_FEATURES,))])
        else:
            estimator = tf.estimator.Estimator(model_fn, model_dir=model_dir, config=config)
        estimator.train(input_fn(x, y, True, True, args.input), steps=args.steps)
        train_s = time.perf_counter() - start
        t = time.perf_counter()
        metrics = estimator.evaluate(input_fn(x[:2000], y[:2000], False, False, args.input))
        evaluate_s = time.perf_counter() - t
        t = time.perf_counter()
        n = sum(1 for _ in estimator.predict(input_fn(x[:2000], None, False, False, args.input),
                                             predict_keys=["class_ids"]))
        predict_s = time.perf_counter() - t
        script_s = time.perf_counter() - start
        # Steady state: a second train() call of as many steps on the same estimator (TF rebuilds
        # its graph and restores the checkpoint; the engine keeps its process warm).
        t = time.perf_counter()
        estimator.train(input_fn(x, y, True, True, args.input), steps=args.steps)
        train2_s = time.perf_counter() - t
    finally:
        shutil.rmtree(model_dir, ignore_errors=True)
    print(json.dumps({"system": f"tf.estimator {tf.__version__}", "model": args.model, "size": args.size,
                      "input": args.input, "threads": args.threads,
                      "steps": args.steps, "train_s": train_s, "train_steps_per_sec": args.steps / train_s,
                      "evaluate_s": evaluate_s, "predict_s": predict_s, "predicted": n,
                      "accuracy": float(metrics["accuracy"]), "script_s": script_s,
                      "train2_s": train2_s, "train2_steps_per_sec": args.steps / train2_s, "import_s": _IMPORT_S}))


if __name__ == "__main__":
    main()
