"""Steady-state training speed of a canned ``DNNClassifier`` (the mid MLP), old code vs new code.

Model: 20 numeric feature columns, hidden_units [64, 32], 3 classes, batch 128, optimizer 'Adam'.
Steps/s is measured inside one ``train()`` call between step ``--warmup`` and the last step (so
graph building, restore and the final checkpoint are left out), one thread.

Rounds alternate between two source trees (``--base``, e.g. an exported older commit, and this
checkout), each round in a fresh process, to compare them under the same machine load:

    git archive <old commit> | tar -x -C /tmp/base
    python benchmarks/bench_canned_step.py --base /tmp/base --rounds 6

Without ``--base`` it only measures this checkout.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

_HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _measure(steps: int, warmup: int) -> float:
    import numpy as np
    import torch

    import estimator_engine as ee

    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(10_000, 20)).astype(np.float32)
    y = (x[:, :3].argmax(axis=1)).astype(np.int64)
    features = {f"x{i:02d}": x[:, i] for i in range(20)}
    columns = [ee.feature_column.numeric_column(name) for name in features]
    marks: dict[str, float] = {}

    class Timer(ee.SessionRunHook):
        def after_run(self, run_context, run_values):
            step = ee.get_global_step()
            if step == warmup:
                marks["start"] = time.perf_counter()
            elif step == steps:
                marks["end"] = time.perf_counter()

    with tempfile.TemporaryDirectory() as model_dir:
        est = ee.DNNClassifier(hidden_units=[64, 32], feature_columns=columns, n_classes=3,
                               optimizer="Adam", model_dir=model_dir,
                               config=ee.RunConfig(tf_random_seed=0, log_step_count_steps=None))
        est.train(ee.inputs.numpy_input_fn(features, y, batch_size=128, num_epochs=None, shuffle=True),
                  steps=steps, hooks=[Timer()])
    return (steps - warmup) / (marks["end"] - marks["start"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base", help="another source tree to compare with (alternated rounds)")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--warmup", type=int, default=300)
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(_measure(args.steps, args.warmup)))
        return
    trees = {"new": _HERE} if not args.base else {"base": os.path.abspath(args.base), "new": _HERE}
    results: dict[str, list[float]] = {name: [] for name in trees}
    for _ in range(args.rounds):
        for name, tree in trees.items():
            env = dict(os.environ, PYTHONPATH=tree)
            out = subprocess.run([sys.executable, os.path.abspath(__file__), "--one", "--steps",
                                  str(args.steps), "--warmup", str(args.warmup)], env=env, cwd=tree,
                                 check=True, capture_output=True, text=True).stdout
            results[name].append(float(out.strip().splitlines()[-1]))
            print(f"{name}: {results[name][-1]:.0f} steps/s", flush=True)
    for name, values in results.items():
        print(f"{name}: median {statistics.median(values):.0f} steps/s (min {min(values):.0f}, max {max(values):.0f})")
    if args.base:
        ratios = [n / b for n, b in zip(results["new"], results["base"])]
        print(f"new/base per round: median {statistics.median(ratios):.3f} (min {min(ratios):.3f}, "
              f"max {max(ratios):.3f})")


if __name__ == "__main__":
    main()
