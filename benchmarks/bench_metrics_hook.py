"""Benchmark 5: cost of the workbench's ``MetricsWriterHook`` on training speed.

``Estimator.train`` (default RunConfig) of the tiny MLP (8-16-2, batch 32: the worst case, where
the per-step overhead is all there is) and the mid MLP (20-64-32-3, batch 128), with:

* reference: no extra hook;
* ``every 10``: ``MetricsWriterHook(path, every_n_steps=10, stop_file=..., should_stop=...)``
  wired as ``estimator_workbench.execution.run_context.RunContext.make_hook`` wires it (a stop file that does not exist,
  a threading.Event predicate);
* ``every 1``: the same, writing loss at every step.

Ratio = median over alternated rounds of (steps/s with hook) / (steps/s without, same round).
Target: >= 0.97 at every 10 steps. Also checks that the file got the expected number of lines.

    python benchmarks/bench_metrics_hook.py [--rounds 7] [--json out.json]
"""

from __future__ import annotations

import argparse
import functools
import os
import shutil
import tempfile
import threading
import time
from typing import Any

import _common as c
import torch
from bench_train_overhead import MODELS, make_data, make_model_fn

import estimator_engine as ee

TARGET = 0.97


def train(name: str, x: torch.Tensor, y: torch.Tensor, steps: int, every: int | None,
          lines: list[int] | None = None) -> float:
    from estimator_workbench.store.metrics_hook import MetricsWriterHook

    work = tempfile.mkdtemp(prefix="bench_hook_")
    try:
        hooks = []
        metrics = os.path.join(work, "metrics.jsonl")
        if every is not None:
            stop = threading.Event()
            hooks.append(MetricsWriterHook(metrics, every_n_steps=every, stop_file=os.path.join(work, "stop.request"),
                                           should_stop=stop.is_set))
        torch.manual_seed(0)
        estimator = ee.Estimator(make_model_fn(name), model_dir=os.path.join(work, "model"))
        input_fn = ee.inputs.numpy_input_fn({"x": x}, y, batch_size=MODELS[name][3], num_epochs=None, shuffle=True)
        start = time.perf_counter()
        estimator.train(input_fn, hooks=hooks, steps=steps)
        rate = steps / (time.perf_counter() - start)
        if lines is not None and every is not None:
            with open(metrics, "rb") as f:
                lines.append(sum(1 for _ in f))
        return rate
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run(models: list[str], rounds: int, steps: int) -> dict[str, Any]:
    results: dict[str, Any] = {}
    targets = []
    for name in models:
        x, y = make_data(name)
        train(name, x, y, 100, 1)  # warm-up
        lines: list[int] = []
        measured = c.measure_pairs({
            "no_hook": functools.partial(train, name, x, y, steps, None),
            "every_10": functools.partial(train, name, x, y, steps, 10),
            "every_1": functools.partial(train, name, x, y, steps, 1, lines),
        }, rounds, {"every_10/no_hook": ("every_10", "no_hook"), "every_1/no_hook": ("every_1", "no_hook")})
        values = {k: v["raw"] for k, v in measured["sides"].items()}
        entry = {"steps": steps, "steps_per_sec": {k: c.median(v) for k, v in values.items()},
                 "noise": {k: c.noise(v) for k, v in values.items()}, "raw": values,
                 "every_1_lines_written": lines[:1], "measured": measured}
        for key in ("every_10", "every_1"):
            entry[f"{key}_over_no_hook"] = measured["ratios"][f"{key}/no_hook"]["median"]
        entry["met"] = entry["every_10_over_no_hook"] >= TARGET
        load = (measured["load_1m_before"], measured["load_1m_after"])
        targets.append(c.target_row(f"metrics_hook_{name}", f"MetricsWriterHook every 10 steps / no hook, {name}",
                                    measured["ratios"]["every_10/no_hook"], ">= 0.97", higher_is_better=True,
                                    threshold=TARGET, load=load))
        results[name] = entry
    return {"benchmark": "metrics_hook", "rounds": rounds, "models": results, "target": TARGET, "targets": targets,
            "met": all(e["met"] for e in results.values())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="tiny,mid")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--quick", action="store_true", help="smoke run: 1 round of 200 steps")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.steps = 1, 200
    c.quiet_engine()
    torch.set_num_threads(1)
    try:
        import estimator_workbench.store.metrics_hook  # noqa: F401
    except ImportError as exc:
        print(f"pending: estimator_workbench.store.metrics_hook is not importable ({exc})")
        c.write_json({"benchmark": "metrics_hook", "status": "pending", "reason": str(exc)}, args.json)
        return
    r = run(args.models.split(","), args.rounds, args.steps)
    rows = [[name, e["steps_per_sec"]["no_hook"], e["steps_per_sec"]["every_10"], e["steps_per_sec"]["every_1"],
             f"{e['every_10_over_no_hook']:.3f}", f"{e['every_1_over_no_hook']:.3f}", "yes" if e["met"] else "NO",
             f"{e['noise']['no_hook']:.0%}"]
            for name, e in r["models"].items()]
    c.print_table(["model", "no hook/s", "every 10/s", "every 1/s", "every10/none", "every1/none",
                   f">={TARGET}", "noise (no hook)"], rows,
                  title=f"MetricsWriterHook cost, {args.steps} steps (medians of {args.rounds} alternated rounds)")
    c.write_json(r, args.json)


if __name__ == "__main__":
    main()
