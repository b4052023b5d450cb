"""Runs every benchmark, one after the other, writing ``benchmarks/results/<name>.json``.

Each benchmark runs in its own process (so memory figures and lazy imports are its own) and
prints its table; at the end a summary of every target (met / missed / pending) is printed and
written to ``benchmarks/results/summary.md``. Benchmarks never fail the build: a benchmark that
crashes is reported as failed and the others still run.

    python benchmarks/run_all.py [--quick] [--only train_overhead,input_pipeline,...]
        [--lightning-python PATH] [--tf-python PATH]

``--quick`` shrinks rounds and sizes (a smoke run, about 3 minutes) and writes to
``benchmarks/results/quick/`` instead, so it never overwrites the figures behind RESULTS.md.
The TF peer runs only when ``--tf-python`` (or the default /tmp/tfpeer_venv) exists.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"

# name -> (script, full args, quick args)
BENCHMARKS: dict[str, tuple[str, list[str], list[str]]] = {
    "engine_overhead": ("engine_overhead.py", [], ["--pairs", "2", "--steps", "500"]),
    "train_overhead": ("bench_train_overhead.py", [], ["--rounds", "1", "--steps-scale", "0.25"]),
    "input_pipeline": ("bench_input_pipeline.py", [], ["--rows", "200000", "--rounds", "1",
                                                       "--dataloader-rows", "50000"]),
    "repeated_eval": ("bench_repeated_eval.py", [], ["--rounds", "1"]),
    "predict_csv": ("bench_predict_csv.py", [], ["--rows", "200000", "--rounds", "1"]),
    "metrics_hook": ("bench_metrics_hook.py", [], ["--rounds", "1", "--steps", "500"]),
    "workbench": ("bench_workbench.py", [], ["--launches", "1", "--tail-lines", "200000", "--runs", "100"]),
    "scale": ("bench_scale.py", [], ["--rounds", "1", "--steps", "300"]),
}


def _load_from(name: str, folder: Path = RESULTS) -> dict[str, Any] | None:
    path = folder / f"{name}.json"
    if not path.exists():
        return None
    return json.loads(path.read_text())


def _flag(ok: Any) -> str:
    return "pending" if ok is None else ("met" if ok else "MISSED")


def summary_lines(folder: Path = RESULTS) -> list[str]:
    """One markdown table row per target, from the JSON files present in ``folder``."""
    def _load(name: str) -> dict[str, Any] | None:  # bound to this folder
        return _load_from(name, folder)

    rows: list[tuple[str, str, str, str]] = []
    r = _load("train_overhead")
    if r:
        for model, e in r["models"].items():
            rows.append((f"1. Estimator.train / plain loop, {model}", f"{e['engine_over_plain']:.3f}", ">= 0.95",
                         _flag(e["met"])))
            if "lightning_over_plain" in e:
                rows.append((f"   Lightning / plain loop, {model} (defaults / lean)",
                             f"{e['lightning_over_plain']:.3f} / {e['lightning_lean_over_plain']:.3f}", "(info)", ""))
    r = _load("engine_overhead")
    if r:
        rows.append(("1. engine_overhead.py (mid MLP) Estimator.train / plain", f"{r['ratio_median_of_pairs']:.3f}",
                     ">= 0.95", _flag(r["ratio_median_of_pairs"] >= 0.95)))
    r = _load("input_pipeline")
    if r:
        for name in ("pandas_input_fn", "numpy_input_fn", "numpy_input_fn_codes"):
            s = r["systems"][name]
            rows.append((f"2. {name} rows/s / DataLoader", f"{s['over_dataloader']:.1f}x", ">= 3x",
                         _flag(s["over_dataloader"] >= 3)))
    r = _load("repeated_eval")
    if r:
        for kind, e in r["results"].items():
            rows.append((f"3. {kind}: later call / first call", f"{e['later_over_first']:.3f}", "< 0.3",
                         _flag(e["met"])))
    r = _load("predict_csv")
    if r:
        rows.append((f"4. predict -> CSV, {r['rows']:,} rows: peak RSS growth",
                     f"{r['engine_peak_rss_growth_mb']:.0f} MB ({r['engine_rows_per_sec']:,.0f} rows/s)",
                     "< 200 MB", _flag(r["met"])))
    r = _load("metrics_hook")
    if r:
        if r.get("status") == "pending":
            rows.append(("5. MetricsWriterHook every 10 / no hook", "-", ">= 0.97", "pending"))
        else:
            for model, e in r["models"].items():
                rows.append((f"5. MetricsWriterHook every 10 / no hook, {model}",
                             f"{e['every_10_over_no_hook']:.3f} (every 1: {e['every_1_over_no_hook']:.3f})",
                             ">= 0.97", _flag(e["met"])))
    r = _load("workbench")
    if r:
        launch, tail = r.get("launch", {}), r.get("tail", {})
        if "met" in launch:
            rows.append(("6. launch (CLI) -> first metric line", f"{launch['cli_first_metric_s']:.2f} s", "< 3 s",
                         _flag(launch["met"])))
            rows.append(("   launch (in-process launcher) -> first metric line",
                         f"{launch['launcher_first_metric_s']:.2f} s", "(info)", ""))
        else:
            rows.append(("6. launch -> first metric line", "-", "< 3 s", "pending"))
        if "met" in tail:
            rows.append(("6. MetricsTail: 1,000 new lines of a 1M-line file", f"{tail['tail_read_ms']:.1f} ms",
                         "< 50 ms", _flag(tail["met"])))
        else:
            rows.append(("6. MetricsTail", "-", "< 50 ms", "pending"))
        listing = r.get("runs_listing", {})
        for n, e in listing.items():
            if isinstance(e, dict) and "total_ms" in e:
                page = e.get("page_rerun_ms")
                rows.append((f"6. runs listing, {n} runs (list + table; page rerun)",
                             f"{e['total_ms']:.0f} ms; {'n/a' if page is None else f'{page:.0f} ms'}",
                             "(no target)", ""))
    r = _load("scale")
    if r:
        rows.append(("7. step time vs rows 10k->1M (log-log slope)", f"{r['data_step_time_slope']:.2f}",
                     "~0 (flat)", ""))
        rows.append(("7. peak RSS growth per MB of data", f"{r['data_extra_mb_per_data_mb']:.2f}", "~1 (linear)", ""))
        rows.append(("7. step time vs params (log-log slope)", f"{r['model_step_time_slope_vs_params']:.2f}",
                     "<= 1", ""))
    for name, label in (("tf_peer", "TF peer"), ("tf_peer_fused_adam", "TF peer, engine with fused Adam")):
        r = _load(name)
        if not r:
            continue
        ratios, met = r["ratios"], r["met"]
        rows.append((f"{label}: engine / tf.estimator train steps/s, first train() of a fresh process",
                     f"{ratios['train_speed_engine_over_tf']:.2f}", ">= 2", _flag(met["train_speed_engine_over_tf"])))
        if "second_train_speed_engine_over_tf" in ratios:
            rows.append((f"{label}: the same, second train() call (steady state)",
                         f"{ratios['second_train_speed_engine_over_tf']:.2f}", ">= 2",
                         _flag(met["second_train_speed_engine_over_tf"])))
        rows.append((f"{label}: whole script wall, engine / TF", f"{ratios['process_wall_engine_over_tf']:.2f}",
                     "< 0.33", _flag(met["process_wall_engine_over_tf"])))
    out = ["| measure | figure | target | result |", "|---|---|---|---|"]
    out += [f"| {a} | {b} | {t} | {m} |" for a, b, t, m in rows]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run")
    parser.add_argument("--only", default=None, help="comma-separated names: " + ",".join(BENCHMARKS))
    parser.add_argument("--lightning-python", default="/tmp/lightning_venv/bin/python",
                        help="an interpreter where pytorch_lightning imports, for train_overhead")
    parser.add_argument("--tf-python", default="/tmp/tfpeer_venv/bin/python",
                        help="the TF 2.15 venv's python, for the TF peer (skipped when missing)")
    parser.add_argument("--summary-only", action="store_true", help="only rebuild the summary from the JSON")
    args = parser.parse_args()
    out_dir = RESULTS / "quick" if args.quick else RESULTS  # a smoke run never overwrites the figures
    out_dir.mkdir(parents=True, exist_ok=True)
    names = [*BENCHMARKS, "tf_peer"] if not args.only else args.only.split(",")
    status: dict[str, str] = {}
    for name in [] if args.summary_only else names:
        if name == "tf_peer":
            if not os.path.exists(args.tf_python):
                status[name] = f"skipped ({args.tf_python} missing)"
                continue
            cmd = [sys.executable, str(HERE / "tf_peer" / "run_peer.py"), "--tf-python", args.tf_python,
                   "--json", str(out_dir / "tf_peer.json")] + (["--rounds", "1"] if args.quick else [])
        else:
            script, full, quick = BENCHMARKS[name]
            python = sys.executable
            if name == "train_overhead" and args.lightning_python and os.path.exists(args.lightning_python):
                python = args.lightning_python
            cmd = [python, str(HERE / script), *(quick if args.quick else full), "--json", str(out_dir / f"{name}.json")]
        print(f"\n=== {name}: {' '.join(cmd)}", flush=True)
        start = time.perf_counter()
        code = subprocess.call(cmd, cwd=str(HERE.parent))
        status[name] = f"{'ok' if code == 0 else f'FAILED ({code})'} in {time.perf_counter() - start:.0f} s"
    lines = summary_lines(out_dir)
    header = [f"# Benchmark summary ({_dt.datetime.now().isoformat(timespec='seconds')}, "
              f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}{', QUICK run' if args.quick else ''})", ""]
    (out_dir / "summary.md").write_text("\n".join(header + lines) + "\n")
    print("\n" + "\n".join(lines))
    for name, text in status.items():
        print(f"{name}: {text}")
    print(f"wrote {out_dir / 'summary.md'}")


if __name__ == "__main__":
    main()
