"""Runs the TF peer comparison: tf.estimator 2.15 (its own venv) vs the engine vs plain PyTorch.

Three workloads, each a set of scripts started as fresh processes, in an order rotated round by
round (``_common.paired``), recording their own timings (train, second train, evaluate, predict,
import) and the process's wall time:

* ``custom_mid``: the 20-64-32-3 MLP with a custom ``model_fn`` (``tf_mlp.py`` / ``engine_mlp.py``)
  and the same job as a plain PyTorch script (``plain_mlp.py``);
* ``canned_tiny`` / ``canned_mid``: ``tf.estimator.DNNClassifier`` vs ``ee.DNNClassifier``
  (8-16-2 batch 32 / 20-64-32-3 batch 128, default Adagrad on both sides).

Figures (median, min, max of the per-round ratios; load average before and after):

* steady state: engine / TF steps/s of the **second** ``train()`` call of as many steps on the
  same estimator (target >= 2), for custom and both canned sizes;
* the ceiling of the steady state (information): a plain PyTorch loop's second loop / TF's, and
  the engine's second ``train()`` / the plain loop's;
* first ``train()`` of a fresh process: the same for the first call (information);
* whole script: the engine's process wall time / TF's (target <= 0.5) and / the plain PyTorch
  script's (target <= 1.05); the second ``train()``, made after the script's own work, is
  subtracted from every process's wall time.

Not run in CI (it needs the separate TF venv; see ``benchmarks/tf_estimator_peer.md``).

    .venv/bin/python benchmarks/tf_peer/run_peer.py [--tf-python /tmp/tfpeer_venv/bin/python] \
        [--rounds 5] [--workloads custom_mid,canned_tiny,canned_mid] [--quick] \
        [--json benchmarks/results/tf_peer.json]
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
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE.parent))
import _common as c  # noqa: E402

# workload -> system -> (script, extra args); the plain script is the whole-script reference
WORKLOADS: dict[str, dict[str, tuple[str, list[str]]]] = {
    "custom_mid": {"tf": ("tf_mlp.py", ["--model", "custom", "--size", "mid"]),
                   "engine": ("engine_mlp.py", ["--model", "custom", "--size", "mid"]),
                   "plain": ("plain_mlp.py", ["--size", "mid"])},
    # The custom model_fn as a TF user ports it: torch.optim.Adam(params, lr), no fused=True.
    "custom_mid_as_ported": {"tf": ("tf_mlp.py", ["--model", "custom", "--size", "mid"]),
                             "engine": ("engine_mlp.py", ["--model", "custom", "--size", "mid",
                                                          "--adam", "as-ported"])},
    "canned_tiny": {"tf": ("tf_mlp.py", ["--model", "canned", "--size", "tiny"]),
                    "engine": ("engine_mlp.py", ["--model", "canned", "--size", "tiny"])},
    "canned_mid": {"tf": ("tf_mlp.py", ["--model", "canned", "--size", "mid"]),
                   "engine": ("engine_mlp.py", ["--model", "canned", "--size", "mid"])},
}
KEYS = ("train_steps_per_sec", "train2_steps_per_sec", "train_s", "evaluate_s", "predict_s", "script_s",
        "import_s", "process_wall_s")


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
    parser.add_argument("--loop-adam", action="store_true",
                        help="the engine's and the plain script's Adam use torch's CPU default loop, not fused=True")
    parser.add_argument("--workloads", default=",".join(WORKLOADS), help="comma-separated: " + ",".join(WORKLOADS))
    parser.add_argument("--quick", action="store_true", help="smoke run: 1 round of 200 steps")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    if not os.path.exists(args.tf_python):
        sys.exit(f"{args.tf_python} does not exist: create the TF venv first (benchmarks/tf_estimator_peer.md).")
    if args.quick:
        args.rounds, args.steps = 1, 200
    common = ["--steps", str(args.steps), "--threads", str(args.threads)]
    workloads: dict[str, Any] = {}
    targets: list[dict[str, Any]] = []
    for workload in args.workloads.split(","):
        systems = WORKLOADS[workload]
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in systems}

        def runner(name: str, script: str, extra: list[str], runs=runs) -> Any:
            def fn() -> float:
                python = args.tf_python if name == "tf" else args.engine_python
                more = ["--input", args.tf_input] if name == "tf" else []
                if name in ("engine", "plain") and args.loop_adam:
                    more = ["--loop-adam"]
                runs[name].append(_one(python, script, [*common, *extra, *more]))
                return runs[name][-1]["process_wall_s"]
            return fn

        load_before = c.load_1m()
        c.paired({name: runner(name, script, extra) for name, (script, extra) in systems.items()}, args.rounds)
        load = (load_before, c.load_1m())

        def ratio(num: str, den: str, key: str, runs=runs) -> c.Stats:
            return c.stats([a[key] / b[key] for a, b in zip(runs[num], runs[den])])

        ratios = {"train2_steps_per_sec engine/tf": ratio("engine", "tf", "train2_steps_per_sec"),
                  "train_steps_per_sec engine/tf": ratio("engine", "tf", "train_steps_per_sec"),
                  "process_wall_s engine/tf": ratio("engine", "tf", "process_wall_s"),
                  "script_s engine/tf": ratio("engine", "tf", "script_s")}
        if "plain" in runs:
            ratios["train2_steps_per_sec plain/tf"] = ratio("plain", "tf", "train2_steps_per_sec")
            ratios["train2_steps_per_sec engine/plain"] = ratio("engine", "plain", "train2_steps_per_sec")
            ratios["process_wall_s engine/plain"] = ratio("engine", "plain", "process_wall_s")
            ratios["script_s engine/plain"] = ratio("engine", "plain", "script_s")
        summary = {name: {key: c.stats([r[key] for r in rs if key in r]) for key in KEYS} for name, rs in runs.items()}
        workloads[workload] = {"systems": {name: rs[0]["system"] for name, rs in runs.items()},
                               "summary": summary, "ratios": ratios, "load_1m": list(load), "runs": runs}
        kind = "custom model_fn" if workload.startswith("custom") else f"canned DNNClassifier {workload.split('_')[1]}"
        if workload.endswith("as_ported"):
            kind += " as ported (Adam(params, lr))"
        targets.append(c.target_row(f"peer_{workload}_steady", f"{kind} / tf.estimator, steady state "
                                    "(second train() steps/s)", ratios["train2_steps_per_sec engine/tf"], ">= 2",
                                    unit="x", higher_is_better=True, threshold=2.0, load=load))
        targets.append(c.target_row(f"peer_{workload}_first", f"{kind} / tf.estimator, first train() of a "
                                    "fresh process (steps/s)", ratios["train_steps_per_sec engine/tf"], "(info)",
                                    unit="x", load=load))
        if "plain" in runs:
            # The ceiling of the steady-state rows: hand-written PyTorch against TF on the same job.
            targets.append(c.target_row(f"peer_{workload}_plain_steady", "reference: a plain PyTorch loop / "
                                        "tf.estimator, steady state (second loop's steps/s)",
                                        ratios["train2_steps_per_sec plain/tf"], "(info)", unit="x", load=load))
            targets.append(c.target_row(f"peer_{workload}_engine_over_plain_steady", "the engine / a plain PyTorch "
                                        "loop, steady state", ratios["train2_steps_per_sec engine/plain"], "(info)",
                                        load=load))
            for den, label, limit in (("tf", "TF's", 0.5), ("plain", "a plain PyTorch script's", 1.05)):
                row = c.target_row(f"peer_script_vs_{den}", f"whole train+evaluate+predict script wall time / "
                                   f"{label}", ratios[f"process_wall_s engine/{den}"], f"<= {limit}", load=load)
                row["met"] = row["median"] <= limit
                targets.append(row)
    print(f"{'workload':<12} {'system':<7} " + " ".join(f"{k:>20}" for k in KEYS))
    for workload, w in workloads.items():
        for name, summary in w["summary"].items():
            print(f"{workload:<12} {name:<7} " + " ".join(
                f"{summary[k]['median']:>20.3f}" if summary[k]["median"] is not None else f"{'-':>20}" for k in KEYS))
    for row in targets:
        print(f"{row['measure']:<80} {row['median']:.3f} ({row['min']:.2f}-{row['max']:.2f})  target {row['target']}: "
              f"{'' if row['met'] is None else ('met' if row['met'] else 'MISSED')}")
    result = {"benchmark": "tf_peer", "date": _dt.datetime.now().isoformat(timespec="seconds"),
              "rounds": args.rounds, "steps": args.steps, "threads": args.threads, "tf_input": args.tf_input,
              "fused_adam": not args.loop_adam, "workloads": workloads, "targets": targets}
    c.write_json(result, args.json)


if __name__ == "__main__":
    main()
