"""Runs the benchmarks and regenerates ``benchmarks/RESULTS.md`` from their JSON, in one command.

    .venv/bin/python benchmarks/run_all.py                  # every benchmark, then RESULTS.md
    .venv/bin/python benchmarks/run_all.py --quick          # smoke run: writes benchmarks/results/quick/
    .venv/bin/python benchmarks/run_all.py --only train_overhead,tf_peer [--rounds 3]
    .venv/bin/python benchmarks/run_all.py --results-only   # rebuild RESULTS.md from the JSON present

Each benchmark runs in its own process (so memory figures and lazy imports are its own) and
writes ``benchmarks/results/<name>.json``; every JSON carries a ``targets`` list of rows
(``_common.target_row``: median, min and max of alternated pairs, the load average before and
after). RESULTS.md is generated from those rows: never edit it by hand. The "what limits it"
note of a missed target lives in ``benchmarks/limits.md`` under a ``## <row key>`` heading, so a
regeneration keeps it; a missed row without a note says so.

``--quick`` writes to ``benchmarks/results/quick/`` (RESULTS.md included), so a smoke run never
overwrites the figures behind ``benchmarks/RESULTS.md``. The TF peer runs when ``--tf-python``
(default ``/tmp/tfpeer_venv/bin/python``) exists; see ``tf_estimator_peer.md``. A benchmark that
crashes is reported and the others still run; the exit status is non-zero only for ``--quick``
(a smoke test must notice a broken script).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
RESULTS_MD = HERE / "RESULTS.md"
LIMITS_MD = HERE / "limits.md"

__all__ = ["BENCHMARKS", "load_limits", "main", "render_results"]

# name -> (script, full-run args); every script also takes --quick and --json
BENCHMARKS: dict[str, tuple[str, list[str]]] = {
    "train_overhead": ("bench_train_overhead.py", []),
    "input_pipeline": ("bench_input_pipeline.py", []),
    "repeated_eval": ("bench_repeated_eval.py", []),
    "predict_csv": ("bench_predict_csv.py", []),
    "metrics_hook": ("bench_metrics_hook.py", []),
    "workbench": ("bench_workbench.py", []),
    "scale": ("bench_scale.py", []),
    "tf_peer": ("tf_peer/run_peer.py", []),
    "optimizer_kernel": ("bench_optimizer_kernel.py", ["--cpu-time"]),
}
# The order of RESULTS.md's sections (issue 16's targets first).
ORDER = ("train_overhead", "tf_peer", "optimizer_kernel", "repeated_eval", "predict_csv", "input_pipeline",
         "workbench", "metrics_hook", "scale")


def load_limits(path: Path = LIMITS_MD) -> dict[str, str]:
    """``## key`` sections of the hand-edited limits file -> their text (one paragraph each)."""
    if not path.exists():
        return {}
    notes: dict[str, str] = {}
    key, lines = None, []
    for line in path.read_text().splitlines():
        match = re.match(r"^##\s+(\S+)\s*$", line)
        if match:
            if key:
                notes[key] = " ".join(x.strip() for x in lines if x.strip())
            key, lines = match.group(1), []
        elif key:
            lines.append(line)
    if key:
        notes[key] = " ".join(x.strip() for x in lines if x.strip())
    return notes


def _num(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "MB":
        return f"{value:.0f}"
    if unit == "s":
        return f"{value:.2f}"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.3f}" if unit != "x" else f"{value:.2f}"


def _figure(row: dict[str, Any]) -> str:
    unit = row.get("unit", "")
    suffix = {"x": "x", "s": " s", "MB": " MB"}.get(unit, "")
    text = f"{_num(row['median'], unit)}{suffix}"
    if row.get("n", 0) and row["n"] > 1:
        text += f" ({_num(row['min'], unit)}-{_num(row['max'], unit)})"
    return text + (f", n={row['n']}" if row.get("n") else "")


def _scale_rows(r: dict[str, Any]) -> list[dict[str, Any]]:
    """bench_scale has no paired target; its slopes are shown for information."""
    out = []
    for key, label, value, target in (
            ("scale_data_slope", "step time vs rows 10k -> 1M (log-log slope)", r.get("data_step_time_slope"), "~0"),
            ("scale_rss_per_data", "peak RSS growth per MB of data", r.get("data_extra_mb_per_data_mb"), "~1"),
            ("scale_params_slope", "step time vs parameters (log-log slope)",
             r.get("model_step_time_slope_vs_params"), "<= 1")):
        out.append({"key": key, "measure": label, "median": value, "min": value, "max": value, "n": 1,
                    "unit": "", "target": f"{target} (info)", "met": None,
                    "load_1m": [r.get("machine", {}).get("load_avg_1m")] * 2, "note": ""})
    return out


def render_results(folder: Path = RESULTS, limits: dict[str, str] | None = None, quick: bool = False) -> str:
    """RESULTS.md's text from the JSON results in ``folder`` and the notes of ``limits.md``."""
    limits = load_limits() if limits is None else limits
    results = {}
    for name in ORDER:
        path = folder / f"{name}.json"
        if path.exists():
            results[name] = json.loads(path.read_text())
    machines = [r["machine"] for r in results.values() if "machine" in r]
    dates = sorted(m["date"] for m in machines if m.get("date"))
    first = machines[0] if machines else {}
    lines = [
        "# Benchmark results",
        "",
        "<!-- Generated by benchmarks/run_all.py from benchmarks/results/*.json and benchmarks/limits.md."
        " Do not edit: change limits.md (notes) or re-run the benchmarks. -->",
        "",
        f"* **Measured**: {dates[0] if dates else '-'} to {dates[-1] if dates else '-'}"
        f"{' (QUICK smoke run: sizes and rounds shrunk, figures meaningless)' if quick else ''}.",
        f"* **Machine**: {first.get('platform', platform.platform())}, {first.get('cpus', os.cpu_count())} CPUs, "
        f"Python {first.get('python', platform.python_version())}, torch {first.get('torch', '?')}, "
        f"torch threads {first.get('torch_threads', '?')}.",
        "* **Command**: `.venv/bin/python benchmarks/run_all.py` (add `--only NAME,...` for some; "
        "`--results-only` to regenerate this file from the JSON). The TF peer needs `/tmp/tfpeer_venv` "
        "([tf_estimator_peer.md](tf_estimator_peer.md)).",
        "* **Method**: every figure is the median of alternated pairs (engine and reference back to back, the "
        "order rotated each round) with the min and max over the rounds; ratios are taken within a round. "
        "`load` is the 1-minute load average before / after (2 cores: above ~1 the machine was shared, and "
        "figures from a loaded machine are not verdicts).",
        "",
        "## Targets",
        "",
        "| measure | median (min-max), rounds | target | result | load | what limits it |",
        "|---|---|---|---|---|---|",
    ]
    missing = []
    for name in ORDER:
        r = results.get(name)
        if r is None:
            missing.append(name)
            continue
        rows = r.get("targets")
        if rows is None and name == "scale":
            rows = _scale_rows(r)
        if rows is None:
            lines.append(f"| {name}: result in an old format | - | - | pending: re-run `run_all.py --only {name}` | - | |")
            continue
        for row in rows:
            met = row.get("met")
            verdict = "" if met is None else ("met" if met else "**MISSED**")
            load = row.get("load_1m") or [None, None]
            load_text = "/".join("-" if v is None else f"{v:.1f}" for v in load)
            note = ""
            if met is False:
                note = limits.get(row["key"], f"(no note yet: add `## {row['key']}` to benchmarks/limits.md)")
            elif row["key"] in limits and met is None:
                note = limits[row["key"]]
            lines.append(f"| {row['measure']} | {_figure(row)} | {row['target']} | {verdict} | {load_text} | {note} |")
    loads = [v for r in results.values() for row in (r.get("targets") or []) for v in (row.get("load_1m") or [])
             if v is not None]
    if loads and max(loads) > 1.5:
        lines += ["", f"**Load warning**: some rows were measured under a 1-minute load of up to {max(loads):.1f} "
                  f"on {first.get('cpus', os.cpu_count())} cores (other processes competing): their figures and "
                  "spreads describe a shared machine, not the engine. Re-run on a quiet machine for verdicts."]
    if missing:
        lines += ["", f"Not measured yet (no JSON in `{folder.relative_to(HERE.parent) if folder.is_relative_to(HERE.parent) else folder}`): "
                  + ", ".join(missing) + "."]
    lines += ["", "## Runs", "", "| benchmark | date | load at the end | command |", "|---|---|---|---|"]
    for name in ORDER:
        r = results.get(name)
        if r is None:
            continue
        m = r.get("machine", {})
        lines.append(f"| {name} | {m.get('date', '-')} | {m.get('load_avg_1m', 0):.1f} | "
                     f"`{r.get('command', '-')}` |")
    lines += ["", "Raw values (every round), per-side figures and the machine of each run: "
              "`benchmarks/results/<benchmark>.json`.", ""]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, 1 round: a smoke run")
    parser.add_argument("--only", default=None, help="comma-separated names: " + ",".join(BENCHMARKS))
    parser.add_argument("--lightning-python", default="/tmp/lightning_venv/bin/python",
                        help="an interpreter where pytorch_lightning imports, for train_overhead (optional)")
    parser.add_argument("--tf-python", default="/tmp/tfpeer_venv/bin/python",
                        help="the TF 2.15 venv's python, for the TF peer (skipped when missing)")
    parser.add_argument("--rounds", type=int, default=None,
                        help="alternated rounds for every benchmark (launches for workbench); default: each script's own")
    parser.add_argument("--results-only", "--summary-only", action="store_true", dest="results_only",
                        help="only regenerate RESULTS.md from the JSON present")
    args = parser.parse_args()
    out_dir = RESULTS / "quick" if args.quick else RESULTS
    out_dir.mkdir(parents=True, exist_ok=True)
    names = list(BENCHMARKS) if not args.only else args.only.split(",")
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        parser.error(f"unknown benchmark(s) {unknown}; known: {', '.join(BENCHMARKS)}")
    status: dict[str, str] = {}
    for name in [] if args.results_only else names:
        script, full = BENCHMARKS[name]
        python = sys.executable
        extra: list[str] = []
        if name == "tf_peer":
            if not os.path.exists(args.tf_python):
                status[name] = f"skipped ({args.tf_python} missing; see benchmarks/tf_estimator_peer.md)"
                continue
            extra = ["--tf-python", args.tf_python]
        if name == "train_overhead" and args.lightning_python and os.path.exists(args.lightning_python):
            python = args.lightning_python
        if args.rounds and not args.quick:
            extra += ["--launches" if name == "workbench" else "--rounds", str(args.rounds)]
        cmd = [python, str(HERE / script), *(["--quick"] if args.quick else full), *extra,
               "--json", str(out_dir / f"{name}.json")]
        print(f"\n=== {name}: {' '.join(cmd)}", flush=True)
        start = time.perf_counter()
        code = subprocess.call(cmd, cwd=str(HERE.parent))
        status[name] = f"{'ok' if code == 0 else f'FAILED ({code})'} in {time.perf_counter() - start:.0f} s"
    text = render_results(out_dir, quick=args.quick)
    target = out_dir / "RESULTS.md" if args.quick else RESULTS_MD
    target.write_text(text)
    print()
    for name, text_ in status.items():
        print(f"{name}: {text_}")
    print(f"wrote {target} ({_dt.datetime.now().isoformat(timespec='seconds')})")
    failed = [n for n, s in status.items() if s.startswith("FAILED")]
    return 1 if failed and args.quick else 0


if __name__ == "__main__":
    sys.exit(main())
