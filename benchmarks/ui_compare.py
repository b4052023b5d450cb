"""The Compare page with many runs: first render and warm reruns under Streamlit's ``AppTest``.

A workspace of ``--runs`` synthetic finished training runs (registry rows with differing params,
seeds and eval summaries, and a ``metrics.jsonl`` of ``--rows`` lines each: train loss every step
plus an eval point every 50 steps) is opened on ``pages/compare.py`` with every run selected
through the URL (``?runs=id1,id2,...``, as the Runs table sends it). The figure is the median
(min, max) of ``--reruns`` warm reruns (what a widget change or a live tick costs), beside the
first render (cold caches) and the 1-minute load average before and after: on a shared machine
the numbers are only as good as that load.

    .venv/bin/python benchmarks/ui_compare.py                    # 50 runs x 1000 rows, 7 reruns
    .venv/bin/python benchmarks/ui_compare.py --runs 20 --json out.json

Not a test module (no ``test_`` prefix); target: a warm rerun < 1 s with 50 runs.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

TARGET_S = 1.0


def fill_workspace(root: Path, runs: int, rows: int) -> list[str]:
    """``runs`` succeeded training runs with a ``rows``-line metrics file each; returns their ids."""
    from estimator_workbench.store import paths
    from estimator_workbench.store.registry import RunRegistry

    registry = RunRegistry(root)
    ids = []
    for i in range(runs):
        lr = 10 ** (-4 + 3 * i / max(runs - 1, 1))  # 1e-4 .. 1e-1: three decades
        record = registry.create_run(
            name=f"lr sweep trial {i}", action="train",
            dataset={"ref": {"kind": "bundled", "name": "iris"}, "fingerprint": "sha256:abc"},
            template={"name": "mlp_classifier", "code": "def model_fn(features, labels, mode, params): ...\n"},
            params={"hidden_units": "64,32", "learning_rate": lr, "dropout": 0.1 * (i % 3)},
            run_config={"tf_random_seed": i, "save_checkpoints_steps": 100},
            schedule={"max_steps": rows})
        lines = []
        evals = []
        now = time.time()
        step = 0
        while len(lines) < rows:
            step += 1
            loss = 1.0 / (1 + lr * step) + 0.05 * math.sin(step * (i + 1))
            lines.append({"step": step, "wall_time": now + step * 0.01, "split": "train", "name": "loss",
                          "value": loss})
            if step % 50 == 0:
                accuracy = 1 - 0.5 / (1 + lr * step * 10)
                lines.append({"step": step, "wall_time": now + step * 0.01, "split": "eval",
                              "name": "accuracy", "value": accuracy})
                evals.append({"step": step, "split": "eval", "name": "accuracy", "value": accuracy})
        folder = paths.run_dir(root, record.run_id)
        (folder / paths.METRICS_FILE).write_text("".join(json.dumps(line) + "\n" for line in lines[:rows]))
        registry.update_summary(record.run_id, [{**row, "split": row["split"]} for row in lines[-2:]] + evals)
        ids.append(record.run_id)
    with sqlite3.connect(root / "registry.sqlite") as conn:
        conn.execute("UPDATE runs SET status = 'succeeded', started_at = created_at, finished_at = created_at + 60")
    return ids


def measure(runs: int, rows: int, reruns: int) -> dict:
    from streamlit.testing.v1 import AppTest

    work = Path(tempfile.mkdtemp(prefix="ui-compare-"))
    old_home = os.environ.get("WORKBENCH_HOME")
    try:
        ids = fill_workspace(work, runs, rows)
        os.environ["WORKBENCH_HOME"] = str(work)
        os.environ.setdefault("WORKBENCH_WARM_SPARES", "0")
        load_before = os.getloadavg()[0]
        at = AppTest.from_file(str(REPO / "estimator_workbench" / "ui" / "app.py"), default_timeout=120)
        at.query_params["runs"] = ",".join(ids)
        at.run()
        start = time.perf_counter()
        at.switch_page("../../pages/compare.py").run()
        first = time.perf_counter() - start
        if at.exception:
            raise RuntimeError(f"the Compare page failed: {at.exception}")
        times = []
        for _ in range(reruns):
            start = time.perf_counter()
            at.run()
            times.append(time.perf_counter() - start)
        shown = len(at.multiselect[0].value) if len(at.multiselect) else 0
        return {"runs": runs, "rows_per_run": rows, "selected": shown, "first_render_s": round(first, 3),
                "rerun_median_s": round(statistics.median(times), 3), "rerun_min_s": round(min(times), 3),
                "rerun_max_s": round(max(times), 3), "reruns": reruns, "target_s": TARGET_S,
                "met": statistics.median(times) < TARGET_S, "load_1m_before": round(load_before, 2),
                "load_1m_after": round(os.getloadavg()[0], 2), "cpus": os.cpu_count()}
    finally:
        if old_home is None:
            os.environ.pop("WORKBENCH_HOME", None)
        else:
            os.environ["WORKBENCH_HOME"] = old_home
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--rows", type=int, default=1000, help="lines per metrics.jsonl")
    parser.add_argument("--reruns", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="5 runs x 200 rows, 2 reruns (smoke)")
    parser.add_argument("--json", type=Path, help="also write the result here")
    args = parser.parse_args(argv)
    if args.quick:
        args.runs, args.rows, args.reruns = 5, 200, 2
    result = measure(args.runs, args.rows, args.reruns)
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
