"""The TF peer workload on estimator_engine: ``tf_mlp.py`` line for line, on PyTorch.

MLP 20-64-32-3 (ReLU), Adam(1e-3), cross-entropy, batch 128, 2000 train steps on 10,000 synthetic
rows, custom ``model_fn``, default ``RunConfig``, then ``evaluate`` and ``predict`` on 2,000 rows.
Prints one JSON line with the same keys as ``tf_mlp.py``.

    .venv/bin/python benchmarks/tf_peer/engine_mlp.py [--steps 2000] [--threads 1] [--adam fused|as-ported|loop]
        [--model custom|canned] [--size tiny|mid]
"""

from __future__ import annotations

import time

_T0 = time.perf_counter()

import argparse  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import shutil  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import estimator_engine as ee  # noqa: E402

_IMPORT_S = time.perf_counter() - _T0
N_ROWS = 10_000
# size -> (features, hidden units, classes, batch): the same table as tf_mlp.py
SIZES = {"tiny": (8, (16,), 2, 32), "mid": (20, (64, 32), 3, 128)}
N_FEATURES, HIDDEN, N_CLASSES, BATCH = SIZES["mid"]


def make_data(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((N_ROWS, N_FEATURES), dtype=np.float32)
    return x, x[:, :N_CLASSES].argmax(axis=1).astype(np.int64)


def _mlp() -> torch.nn.Module:
    layers: list[torch.nn.Module] = []
    width = N_FEATURES
    for units in HIDDEN:
        layers += [torch.nn.Linear(width, units), torch.nn.ReLU()]
        width = units
    return torch.nn.Sequential(*layers, torch.nn.Linear(width, N_CLASSES))


def model_fn(features, labels, mode, params):
    net = ee.get_module("mlp", _mlp)
    logits = net(features["x"])
    class_ids = logits.argmax(dim=1)
    if mode == ee.ModeKeys.PREDICT:
        return ee.EstimatorSpec(mode, predictions={"class_ids": class_ids})
    loss = torch.nn.functional.cross_entropy(logits, labels)
    if mode == ee.ModeKeys.EVAL:
        return ee.EstimatorSpec(mode, loss=loss, eval_metric_ops={
            "accuracy": ee.metrics.accuracy(labels=labels, predictions=class_ids)})
    # --adam fused: fused=True, as README's example (one kernel per parameter, like TF's ApplyAdam
    # op); as-ported: torch.optim.Adam(params, lr) as a TF user writes it (the engine then picks
    # the fused kernel itself); loop: torch's CPU default, a Python loop over the tensors.
    adam = params["adam"]
    optimizer = ee.get_optimizer(
        "adam", lambda: (torch.optim.Adam(net.parameters(), lr=1e-3, fused=True) if adam == "fused"
                         else torch.optim.Adam(net.parameters(), lr=1e-3)),
        fastest_kernel=adam != "loop")
    return ee.EstimatorSpec(mode, loss=loss, train_op=ee.minimize(optimizer, loss))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (0: torch default)")
    parser.add_argument("--loop-adam", action="store_true",
                        help="torch.optim.Adam's CPU default (a Python loop over tensors): --adam loop")
    parser.add_argument("--adam", choices=("fused", "as-ported", "loop"), default="fused",
                        help="fused=True; as-ported: Adam(params, lr) with the engine's kernel choice; loop")
    parser.add_argument("--model", choices=("custom", "canned"), default="custom",
                        help="custom model_fn, or the canned ee.DNNClassifier (default Adagrad, as TF's)")
    parser.add_argument("--size", choices=tuple(SIZES), default="mid")
    args = parser.parse_args()
    if args.loop_adam:
        args.adam = "loop"
    global N_FEATURES, HIDDEN, N_CLASSES, BATCH
    N_FEATURES, HIDDEN, N_CLASSES, BATCH = SIZES[args.size]
    logging.getLogger("estimator_engine").setLevel(logging.WARNING)
    if args.threads:
        torch.set_num_threads(args.threads)
    x, y = make_data()
    model_dir = tempfile.mkdtemp(prefix="tfpeer_engine_")
    try:
        start = time.perf_counter()
        if args.model == "canned":
            estimator = ee.DNNClassifier(
                hidden_units=list(HIDDEN), n_classes=N_CLASSES, model_dir=model_dir, config=ee.RunConfig(),
                feature_columns=[ee.feature_column.numeric_column("x", shape=(N_FEATURES,))])
        else:
            estimator = ee.Estimator(model_fn, model_dir=model_dir, config=ee.RunConfig(),
                                     params={"adam": args.adam})
        estimator.train(ee.inputs.numpy_input_fn({"x": x}, y, batch_size=BATCH, num_epochs=None, shuffle=True),
                        steps=args.steps)
        train_s = time.perf_counter() - start
        t = time.perf_counter()
        metrics = estimator.evaluate(ee.inputs.numpy_input_fn({"x": x[:2000]}, y[:2000], batch_size=BATCH,
                                                              shuffle=False))
        evaluate_s = time.perf_counter() - t
        t = time.perf_counter()
        n = sum(1 for _ in estimator.predict(ee.inputs.numpy_input_fn({"x": x[:2000]}, batch_size=BATCH,
                                                                      shuffle=False),
                                             predict_keys=["class_ids"]))
        predict_s = time.perf_counter() - t
        script_s = time.perf_counter() - start
        # Steady state: a second train() call of as many steps on the same estimator.
        t = time.perf_counter()
        estimator.train(ee.inputs.numpy_input_fn({"x": x}, y, batch_size=BATCH, num_epochs=None, shuffle=True),
                        steps=args.steps)
        train2_s = time.perf_counter() - t
    finally:
        shutil.rmtree(model_dir, ignore_errors=True)
    print(json.dumps({"system": f"estimator_engine {ee.__version__} (torch {torch.__version__})",
                      "model": args.model, "size": args.size,
                      "input": "numpy_input_fn", "threads": args.threads, "fused_adam": args.adam != "loop", "adam": args.adam, "steps": args.steps,
                      "train_s": train_s, "train_steps_per_sec": args.steps / train_s,
                      "evaluate_s": evaluate_s, "predict_s": predict_s, "predicted": n,
                      "accuracy": float(metrics["accuracy"]), "script_s": script_s,
                      "train2_s": train2_s, "train2_steps_per_sec": args.steps / train2_s, "import_s": _IMPORT_S}))


if __name__ == "__main__":
    main()
