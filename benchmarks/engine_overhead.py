"""Estimator.train vs a plain PyTorch loop on the same model, data and batches.

MLP 20-64-32-3, batch 128, 2000 steps, in-memory tensors, default RunConfig (so the default hooks,
the initial and final checkpoints and the summaries are all included). Pairs run alternately in one
process; the ratio of the medians is reported. Also reports the wall time of the whole
train + evaluate + predict script.

    python benchmarks/engine_overhead.py [--steps 2000] [--pairs 5] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import statistics
import tempfile
import time

import torch
from _common import classifier_model_fn

import estimator_engine as ee

N_ROWS, N_FEATURES, N_CLASSES, BATCH = 10_000, 20, 3, 128


def make_data(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(N_ROWS, N_FEATURES, generator=generator)
    y = (x[:, :3].argmax(dim=1)).long()
    return x, y


def make_mlp() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(N_FEATURES, 64), torch.nn.ReLU(),
                               torch.nn.Linear(64, 32), torch.nn.ReLU(), torch.nn.Linear(32, N_CLASSES))


def plain_loop(x: torch.Tensor, y: torch.Tensor, steps: int) -> float:
    """The reference: a hand-written loop over a per-epoch permutation, as fast as it gets here."""
    torch.manual_seed(0)
    model = make_mlp()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    generator = torch.Generator().manual_seed(0)
    start = time.perf_counter()
    step, order, position = 0, torch.randperm(N_ROWS, generator=generator), 0
    while step < steps:
        if position + BATCH > N_ROWS:
            order, position = torch.randperm(N_ROWS, generator=generator), 0
        index = order[position:position + BATCH]
        position += BATCH
        loss = torch.nn.functional.cross_entropy(model(x[index]), y[index])
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        step += 1
    return steps / (time.perf_counter() - start)


model_fn = classifier_model_fn(make_mlp, "mlp")


def estimator_train(x: torch.Tensor, y: torch.Tensor, steps: int) -> tuple[float, float]:
    """Returns (steps/s of train, wall seconds of train + evaluate + predict)."""
    model_dir = tempfile.mkdtemp(prefix="bench_engine_")
    try:
        torch.manual_seed(0)
        estimator = ee.Estimator(model_fn, model_dir=model_dir)
        input_fn = ee.inputs.numpy_input_fn({"x": x}, y, batch_size=BATCH, num_epochs=None, shuffle=True)
        start = time.perf_counter()
        estimator.train(input_fn, steps=steps)
        train_seconds = time.perf_counter() - start
        estimator.evaluate(ee.inputs.numpy_input_fn({"x": x[:2000]}, y[:2000], batch_size=BATCH, shuffle=False))
        for _ in estimator.predict(ee.inputs.numpy_input_fn({"x": x[:2000]}, batch_size=BATCH, shuffle=False)):
            pass
        return steps / train_seconds, time.perf_counter() - start
    finally:
        shutil.rmtree(model_dir, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--json", default=None, help="write the results as JSON here")
    args = parser.parse_args()
    logging.getLogger("estimator_engine").setLevel(logging.WARNING)
    torch.set_num_threads(1)
    x, y = make_data()
    plain_loop(x, y, 200)  # warm-up of both paths (allocator, kernels)
    estimator_train(x, y, 200)
    plain, engine, wall = [], [], []
    for pair in range(args.pairs):
        order = (plain_loop, estimator_train) if pair % 2 == 0 else (estimator_train, plain_loop)
        for fn in order:
            if fn is plain_loop:
                plain.append(plain_loop(x, y, args.steps))
            else:
                rate, seconds = estimator_train(x, y, args.steps)
                engine.append(rate)
                wall.append(seconds)
    ratio = statistics.median(e / p for e, p in zip(engine, plain))
    result = {
        "benchmark": "engine_overhead", "steps": args.steps, "pairs": args.pairs,
        "plain_steps_per_sec": statistics.median(plain), "estimator_steps_per_sec": statistics.median(engine),
        "ratio_median_of_pairs": ratio, "target_ratio": 0.95,
        "train_evaluate_predict_wall_s": statistics.median(wall),
    }
    print(f"{'system':<28}{'steps/s (median)':>18}")
    print(f"{'plain PyTorch loop':<28}{result['plain_steps_per_sec']:>18.0f}")
    print(f"{'Estimator.train':<28}{result['estimator_steps_per_sec']:>18.0f}")
    print(f"ratio (median of {args.pairs} pairs): {ratio:.3f}  (target >= 0.95)")
    print(f"train+evaluate+predict wall time: {result['train_evaluate_predict_wall_s']:.2f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
