"""Benchmark 7: how steps/s and peak memory scale with the dataset and with the model.

Each configuration runs in a fresh subprocess (so its peak RSS is its own), which alternates the
plain PyTorch loop and ``Estimator.train`` (default RunConfig, ``numpy_input_fn``, shuffle) on
the same data for ``--rounds`` rounds:

* dataset: the mid MLP 20-64-32-3, batch 128, 1,000 steps, on 10k, 100k and 1M rows;
* model: 20-W-W/2-3 MLPs with W = 64, 256, 1024, batch 128, 10k rows.

Reported per configuration: steps/s of both, engine/plain, the process's peak RSS (whole run:
interpreter + torch + data + model + training), the data's own size, and parameters.
"Linear" for data: per-step time should stay flat and peak memory should grow by about the data's
size; for the model: per-step time should grow with the parameter count (FLOPs) once compute
dominates, and the engine's fixed per-step overhead should become a smaller fraction.

    python benchmarks/bench_scale.py [--rounds 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any

import _common as c

DATA_SIZES = (10_000, 100_000, 1_000_000)
WIDTHS = (64, 256, 1024)


def child(rows: int, width: int, steps: int, rounds: int) -> dict[str, Any]:
    import torch

    import estimator_engine as ee

    c.quiet_engine()
    torch.set_num_threads(1)
    before_data = c.rss_mb()
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(rows, 20, generator=generator)
    y = x[:, :3].argmax(dim=1)
    data_mb = (x.numel() * 4 + y.numel() * 8) / 2**20

    def make() -> torch.nn.Module:
        return torch.nn.Sequential(torch.nn.Linear(20, width), torch.nn.ReLU(), torch.nn.Linear(width, width // 2),
                                   torch.nn.ReLU(), torch.nn.Linear(width // 2, 3))

    def plain() -> float:
        torch.manual_seed(0)
        model = make()
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
        g = torch.Generator().manual_seed(0)
        order, position = torch.randperm(rows, generator=g), 0
        start = time.perf_counter()
        for _ in range(steps):
            if position + 128 > rows:
                order, position = torch.randperm(rows, generator=g), 0
            index = order[position:position + 128]
            position += 128
            loss = torch.nn.functional.cross_entropy(model(x[index]), y[index])
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        return steps / (time.perf_counter() - start)

    def model_fn(features, labels, mode):
        model = ee.get_module("net", make)
        logits = model(features["x"])
        loss = torch.nn.functional.cross_entropy(logits, labels)
        optimizer = ee.get_optimizer("adam", lambda: torch.optim.Adam(model.parameters(), lr=1e-3))
        return ee.EstimatorSpec(mode, loss=loss, train_op=ee.minimize(optimizer, loss))

    def engine(n_steps: int = steps) -> float:
        model_dir = tempfile.mkdtemp(prefix="bench_scale_")
        try:
            torch.manual_seed(0)
            estimator = ee.Estimator(model_fn, model_dir=model_dir)
            input_fn = ee.inputs.numpy_input_fn({"x": x}, y, batch_size=128, num_epochs=None, shuffle=True)
            start = time.perf_counter()
            estimator.train(input_fn, steps=n_steps)
            return n_steps / (time.perf_counter() - start)
        finally:
            shutil.rmtree(model_dir, ignore_errors=True)

    plain()
    engine(50)  # warm-up: the first train() call imports its lazy modules
    values = c.paired({"plain": plain, "engine": engine}, rounds)
    params = sum(p.numel() for p in make().parameters())
    return {"rows": rows, "width": width, "steps": steps, "params": params, "data_mb": data_mb,
            "rss_before_data_mb": before_data,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "plain_steps_per_sec": c.median(values["plain"]), "engine_steps_per_sec": c.median(values["engine"]),
            "engine_over_plain": c.median([e / p for e, p in zip(values["engine"], values["plain"])]),
            "noise": {k: c.noise(v) for k, v in values.items()}, "raw": values}


def _spawn(rows: int, width: int, steps: int, rounds: int) -> dict[str, Any]:
    out = subprocess.run([sys.executable, __file__, "--child", json.dumps([rows, width, steps, rounds])],
                         capture_output=True, text=True, check=True, timeout=600)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _slope(xs: list[float], ys: list[float]) -> float:
    """Log-log slope from the first to the last point (1.0 = linear, 0.0 = flat)."""
    import math

    return math.log(ys[-1] / ys[0]) / math.log(xs[-1] / xs[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--json", default=None)
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--quick", action="store_true", help="smoke run: 1 round of 200 steps")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(*json.loads(args.child))))
        return
    if args.quick:
        args.rounds, args.steps = 1, 200
    data = [_spawn(rows, 64, args.steps, args.rounds) for rows in DATA_SIZES]
    model = [_spawn(10_000, width, args.steps, args.rounds) for width in WIDTHS]
    data_ms = [1e3 / r["engine_steps_per_sec"] for r in data]
    model_ms = [1e3 / r["engine_steps_per_sec"] for r in model]
    data_growth = [r["peak_rss_mb"] - data[0]["peak_rss_mb"] for r in data]
    result = {
        "benchmark": "scale", "rounds": args.rounds, "steps": args.steps, "data": data, "model": model,
        "data_step_time_slope": _slope([r["rows"] for r in data], data_ms),
        "data_peak_rss_growth_over_10k_mb": data_growth,
        "data_extra_mb_per_data_mb": (data_growth[-1]) / (data[-1]["data_mb"] - data[0]["data_mb"]),
        "model_step_time_slope_vs_params": _slope([r["params"] for r in model], model_ms),
    }
    rows = [[f"{r['rows']:,} rows", f"{r['params']:,}", r["plain_steps_per_sec"], r["engine_steps_per_sec"],
             f"{r['engine_over_plain']:.3f}", f"{1e3 / r['engine_steps_per_sec']:.2f}",
             f"{r['data_mb']:.0f}", f"{r['peak_rss_mb']:.0f}"] for r in data]
    rows += [[f"W={r['width']}", f"{r['params']:,}", r["plain_steps_per_sec"], r["engine_steps_per_sec"],
              f"{r['engine_over_plain']:.3f}", f"{1e3 / r['engine_steps_per_sec']:.2f}",
              f"{r['data_mb']:.0f}", f"{r['peak_rss_mb']:.0f}"] for r in model]
    c.print_table(["config", "params", "plain/s", "engine/s", "engine/plain", "ms/step", "data MB",
                   "peak RSS MB"], rows, title=f"Scale ({args.steps} steps, medians of {args.rounds} rounds, "
                                               "one subprocess per row)")
    print(f"step time vs rows: log-log slope {result['data_step_time_slope']:.3f} (0 = flat); "
          f"peak RSS grows {result['data_extra_mb_per_data_mb']:.2f} MB per MB of data")
    print(f"step time vs params: log-log slope {result['model_step_time_slope_vs_params']:.3f} (1 = linear)")
    c.write_json(result, args.json)


if __name__ == "__main__":
    main()
