"""Benchmark: the as-ported model_fn (``torch.optim.Adam(params, lr)``) against torch's default kernel.

A TF user ports ``tf.compat.v1.train.AdamOptimizer(lr)`` as ``torch.optim.Adam(params, lr)``.
On CPU torch's default is then a Python loop over the tensors; the engine picks the fused kernel
(same update rule) for optimizers it manages where ``fused``/``foreach`` were left unset. Three
sides of ``Estimator.train`` on the mid MLP (20-64-32-3, batch 128, Adam 1e-3, the same
precomputed batches), in alternated rounds (``_common.measure_pairs``: median, min, max, load):

* ``as_ported``: ``get_optimizer('adam', lambda: torch.optim.Adam(params, lr=1e-3))``;
* ``torch_default``: the same with ``get_optimizer(..., fastest_kernel=False)``;
* ``fused``: ``torch.optim.Adam(params, lr=1e-3, fused=True)`` written by hand (the tuned port).

One thread (``torch.set_num_threads(1)``), as the other CPU benchmarks. ``--cpu-time`` counts
steps per second of this process's CPU time instead of wall time: on a machine shared with other
work it is far less disturbed by the load (which it does not remove: caches are shared).

    python benchmarks/bench_optimizer_kernel.py [--steps 1500] [--rounds 5] [--cpu-time] [--quick] [--json out.json]
"""

from __future__ import annotations

import argparse
import functools
import logging
import shutil
import tempfile
import time
from typing import Any

import _common as c
import torch

import estimator_engine as ee

BATCH = 128


def _mlp() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(20, 64), torch.nn.ReLU(), torch.nn.Linear(64, 32),
                               torch.nn.ReLU(), torch.nn.Linear(32, 3))


def _model_fn(features, labels, mode, params):
    net = ee.get_module("mlp", _mlp)
    loss = torch.nn.functional.cross_entropy(net(features["x"]), labels)
    side = params["side"]
    optimizer = ee.get_optimizer(
        "adam", lambda: torch.optim.Adam(net.parameters(), lr=1e-3, fused=True if side == "fused" else None),
        fastest_kernel=side != "torch_default")
    return ee.EstimatorSpec(mode, loss=loss, train_op=ee.minimize(optimizer, loss))


def train(side: str, batches: list[tuple[dict, torch.Tensor]], clock: Any = time.perf_counter) -> float:
    model_dir = tempfile.mkdtemp(prefix="bench_kernel_")
    try:
        torch.manual_seed(0)
        estimator = ee.Estimator(_model_fn, model_dir=model_dir, params={"side": side})
        start = clock()
        estimator.train(lambda: batches, steps=len(batches))
        return len(batches) / (clock() - start)
    finally:
        shutil.rmtree(model_dir, ignore_errors=True)


def run(steps: int, rounds: int, cpu_time: bool = False) -> dict[str, Any]:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(10_000, 20, generator=generator)
    y = x[:, :3].argmax(dim=1)
    order = torch.randperm(len(x), generator=generator)
    batches = [({"x": x[order[i:i + BATCH]]}, y[order[i:i + BATCH]])
               for i in (j * BATCH % (len(x) - BATCH) for j in range(steps))]
    sides = ("as_ported", "torch_default", "fused")
    for side in sides:  # warm-up: allocator, kernels, first checkpoint write
        train(side, batches[:100])
    clock = time.process_time if cpu_time else time.perf_counter
    return c.measure_pairs({side: functools.partial(train, side, batches, clock) for side in sides}, rounds,
                           {"as_ported/torch_default": ("as_ported", "torch_default"),
                            "as_ported/fused": ("as_ported", "fused")})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cpu-time", action="store_true", help="steps per CPU second of this process")
    parser.add_argument("--quick", action="store_true", help="smoke run: 200 steps, 1 round")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    if args.quick:
        args.steps, args.rounds = 200, 1
    logging.getLogger("estimator_engine").setLevel(logging.WARNING)
    torch.set_num_threads(1)
    result = run(args.steps, args.rounds, args.cpu_time)
    clock = "CPU" if args.cpu_time else "wall"
    result["steps"], result["clock"] = args.steps, "process_time" if args.cpu_time else "perf_counter"
    load = (result["load_1m_before"], result["load_1m_after"])
    result["targets"] = [
        c.target_row("kernel_as_ported_vs_default", f"as-ported Adam(params, lr) / torch's default kernel, "
                     f"mid MLP, steps per {clock} second", result["ratios"]["as_ported/torch_default"],
                     "> 1 (information)", load=load),
        c.target_row("kernel_as_ported_vs_fused", f"as-ported Adam(params, lr) / hand-written fused=True, "
                     f"steps per {clock} second", result["ratios"]["as_ported/fused"],
                     ">= 0.95", higher_is_better=True, threshold=0.95, load=load),
    ]
    for name, figure in result["ratios"].items():
        print(f"{name}: median {figure['median']:.3f} (min {figure['min']:.3f}, max {figure['max']:.3f})")
    for name, figure in result["sides"].items():
        print(f"{name}: {figure['median']:.0f} steps/s (min {figure['min']:.0f}, max {figure['max']:.0f})")
    print(f"load (1 min) before/after: {result['load_1m_before']} / {result['load_1m_after']}")
    c.write_json(result, args.json)


if __name__ == "__main__":
    main()
