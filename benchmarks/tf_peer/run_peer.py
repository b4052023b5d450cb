"""Runs the TF peer comparison: ``tf_mlp.py`` (TF 2.15 venv) and ``engine_mlp.py``, alternated.

Each round starts both scripts as fresh processes, in alternating order, and records their own
timings (train, evaluate, predict, import) and the process's whole wall time. Reports medians and
the ratios that the targets are about:

* train speed: engine train steps/s / tf.estimator train steps/s (target >= 2);
* steady state: the same for a second ``train()`` call of as many steps on the same estimator
  (TF rebuilds its graph and restores the checkpoint on every call; the engine does not);
* whole script: engine process wall / TF process wall (target < 1/3; the second ``train()`` call,
  made after the script's own work, is subtracted), and the same without the interpreter start
  and imports (train + evaluate + predict inside the script).

Not run in CI (it needs the separate TF venv; see ``benchmarks/tf_estimator_peer.md``).

    .venv/bin/python benchmarks/tf_peer/run_peer.py --tf-python /tmp/tfpeer_venv/bin/python \
        [--rounds 5] [--threads 1] [--json benchmarks/results/tf_peer.json]
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


def _one(python: str, script: str, args: list[str]) -> dict[str, Any]:
    start = time.perf_counter()
    out = subprocess.run([python, str(HERE / script), *args], capture_output=True, text=True, timeout=600,
                         cwd=str(REPO), check=False)
    wall = time.perf_counter() - start
    if out.returncode != 0:
        raise RuntimeError(f"{script} failed ({out.returncode}):\n{out.stderr[-3000:]}")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    # The steady-state second train() runs after the measured script; it is not part of its wall.
    result["process_wall_total_s"] = wall
    result["process_wall_s"] = wall - result.get("train2_s", 0.0)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tf-python", default="/tmp/tfpeer_venv/bin/python")
    parser.add_argument("--engine-python", default=sys.executable)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--tf-input", choices=("dataset", "numpy"), default="dataset")
    parser.add_argument("--fused-adam", action="store_true", help="the engine uses torch.optim.Adam(fused=True)")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    if not os.path.exists(args.tf_python):
        sys.exit(f"{args.tf_python} does not exist: create the TF venv first (benchmarks/tf_estimator_peer.md).")
    common = ["--steps", str(args.steps), "--threads", str(args.threads)]
    runs: dict[str, list[dict[str, Any]]] = {"tf": [], "engine": []}
    for round_ in range(args.rounds):
        order = ("tf", "engine") if round_ % 2 == 0 else ("engine", "tf")
        for system in order:
            if system == "tf":
                runs["tf"].append(_one(args.tf_python, "tf_mlp.py", [*common, "--input", args.tf_input]))
            else:
                runs["engine"].append(_one(args.engine_python, "engine_mlp.py",
                                           [*common, *(["--fused-adam"] if args.fused_adam else [])]))

    def med(system: str, key: str) -> float:
        return statistics.median(r[key] for r in runs[system])

    keys = ("train_steps_per_sec", "train2_steps_per_sec", "train_s", "evaluate_s", "predict_s", "script_s", "import_s", "process_wall_s")
    summary = {system: {key: med(system, key) for key in keys} for system in runs}
    pairs = list(zip(runs["engine"], runs["tf"]))
    ratios = {
        "train_speed_engine_over_tf": statistics.median(e["train_steps_per_sec"] / t["train_steps_per_sec"]
                                                        for e, t in pairs),
        "second_train_speed_engine_over_tf": statistics.median(
            e["train2_steps_per_sec"] / t["train2_steps_per_sec"] for e, t in pairs),
        "process_wall_engine_over_tf": statistics.median(e["process_wall_s"] / t["process_wall_s"] for e, t in pairs),
        "in_script_wall_engine_over_tf": statistics.median(e["script_s"] / t["script_s"] for e, t in pairs),
    }
    targets = {"train_speed_engine_over_tf": (">=", 2.0), "second_train_speed_engine_over_tf": (">=", 2.0), "process_wall_engine_over_tf": ("<", 1 / 3),
               "in_script_wall_engine_over_tf": ("<", 1 / 3)}
    met = {k: (ratios[k] >= v if op == ">=" else ratios[k] < v) for k, (op, v) in targets.items()}
    print(f"{'':<22}{'tf.estimator':>14}{'engine':>12}")
    for key in keys:
        print(f"{key:<22}{summary['tf'][key]:>14.3f}{summary['engine'][key]:>12.3f}")
    for key, value in ratios.items():
        op, target = targets[key]
        print(f"{key:<36} {value:.3f}  (target {op} {target:.3g}: {'met' if met[key] else 'MISSED'})")
    if args.json:
        result = {"benchmark": "tf_peer", "date": _dt.datetime.now().isoformat(timespec="seconds"),
                  "rounds": args.rounds, "steps": args.steps, "threads": args.threads, "tf_input": args.tf_input,
                  "engine_fused_adam": args.fused_adam,
                  "systems": {k: runs[k][0]["system"] for k in runs}, "summary": summary, "ratios": ratios,
                  "met": met, "runs": runs, "load_avg_1m": os.getloadavg()[0]}
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(result, indent=2))
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
