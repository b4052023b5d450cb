"""Soak: N concurrent runs on one workspace, each appending metrics and writing the registry
heartbeat every step, while a reader polls like the UI (launcher poll, runs table, live tails).

Reports: registry writes made, 'database is locked' errors (must be 0), metric lines lost or
duplicated (must be 0), summaries that differ from the files (must be 0), and the UI-side
latency of a poll (median and max). The CI version (8 runs x 150 steps) is
tests/reliability/test_load.py::test_eight_concurrent_runs_while_the_ui_polls.

    python benchmarks/soak_concurrent_runs.py [--runs 8] [--steps 2000] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import _common as c

from estimator_workbench.execution.launcher import LocalLauncher
from estimator_workbench.store import metrics_store
from estimator_workbench.store.registry import RunRegistry

LOAD_RUNNER_DIR = c.REPO_ROOT / "tests" / "reliability"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--sleep", type=float, default=0.002)
    parser.add_argument("--json", default=str(c.RESULTS_DIR / "soak_concurrent_runs.json"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "ws"
        reg = RunRegistry(root)
        launcher = LocalLauncher(root, max_concurrent=args.runs, gpus=[], runner_module="load_runner",
                                 env={"PYTHONPATH": str(LOAD_RUNNER_DIR)})
        ids = [reg.create_run(name=f"soak {i}", action="train", dataset={}, template={},
                              params={"sleep": args.sleep},  # load_runner's knob (tests/stub_runs.py)
                              run_config={}, schedule={"max_steps": args.steps}).run_id
               for i in range(args.runs)]
        started = time.monotonic()
        for run_id in ids:
            launcher.submit(run_id)
        tails = {r: metrics_store.MetricsTail(reg.run_dir(r) / "metrics.jsonl") for r in ids}
        seen: dict[str, list] = {r: [] for r in ids}
        latencies = []
        try:
            while True:
                t = time.perf_counter()
                launcher.poll()
                records = reg.list_runs()
                for run_id in ids:
                    seen[run_id].extend(tails[run_id].read())
                latencies.append(time.perf_counter() - t)
                if all(r.is_finished for r in records):
                    break
                time.sleep(0.05)
        finally:
            launcher.shutdown(grace=2.0)
        wall = time.monotonic() - started
        for run_id in ids:
            seen[run_id].extend(tails[run_id].read())
        locked = lost = mismatched = failed = 0
        for run_id in ids:
            record = reg.get(run_id)
            failed += record.status != "succeeded"
            log = (reg.run_dir(run_id) / "worker.log").read_text()
            locked += log.count("database is locked")
            rows = [json.loads(x) for x in (reg.run_dir(run_id) / "metrics.jsonl").read_text().splitlines()]
            lost += abs(len(rows) - len(seen[run_id])) + (rows != seen[run_id])
            losses = [r for r in rows if r["split"] == "train" and r["name"] == "loss"]
            mismatched += record.summary.get("train/loss", {}).get("last") != losses[-1]["value"]
        writes = args.runs * (args.steps + 3)  # heartbeat per step + running/summary/finish
        result = {"runs": args.runs, "steps": args.steps, "wall_s": round(wall, 1),
                  "registry_writes": writes, "registry_writes_per_s": round(writes / wall, 1),
                  "database_locked_errors": locked, "failed_runs": failed,
                  "lost_or_duplicated_metric_batches": lost, "summaries_differing_from_files": mismatched,
                  "ui_poll_ms_median": round(statistics.median(latencies) * 1e3, 2),
                  "ui_poll_ms_max": round(max(latencies) * 1e3, 2), "ui_polls": len(latencies)}
    for key, value in result.items():
        print(f"{key:>36}: {value}")
    c.write_json(result, args.json)
    sys.exit(1 if locked or lost or mismatched or failed else 0)


if __name__ == "__main__":
    main()
