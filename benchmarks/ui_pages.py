"""Every page of the workbench with 500 runs in the workspace (issue 15 "Done when": < 1 s each).

Builds a workspace of N runs (registry rows with summaries, a small ``metrics.jsonl`` each, no real
training; a mix of finished statuses, actions, templates, datasets, tags and params, a few in the
trash), then times each page under Streamlit's ``AppTest``: the first run of the page (cold: its
caches empty) and ``--repeats`` reruns (warm), reported as median, min and max with the 1-minute
load average (the machine is shared: compare figures measured in one run).

    .venv/bin/python benchmarks/ui_pages.py                 # 500 runs, 5 reruns per page
    .venv/bin/python benchmarks/ui_pages.py --runs 50 --pages runs,run --json out.json

Not a test module: pytest never collects it (no ``test_`` prefix).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import shutil
import sqlite3
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import _common as c

PAGES = ("data", "model", "train", "runs", "run", "compare", "predict")
TARGET_S = 1.0
APP = c.REPO_ROOT / "estimator_workbench" / "ui" / "app.py"


def fill_workspace(root: Path, n_runs: int, metric_rows: int = 200) -> list[str]:
    """``n_runs`` finished runs with summaries, ``metric_rows`` train-loss rows each (plus an eval
    accuracy every 5 rows) and two (empty) checkpoint files; 2% of them in the trash. Returns the
    run ids, newest last."""
    from estimator_workbench.store import paths, trash
    from estimator_workbench.store.metrics_hook import format_rows
    from estimator_workbench.store.registry import RunRegistry

    registry = RunRegistry(root)
    ids = []
    now = time.time()
    templates = ("mlp_classifier", "linear_classifier", "dnn_classifier")
    from estimator_workbench.data import datasets as data

    specs = []  # real dataset specs (the Predict and Run pages read them)
    for name in ("iris", "wine", "penguins"):
        spec = data.DatasetSpec({"kind": "bundled", "name": name},
                                data.infer_schema(data.load_table(data.bundled_path(name))))
        specs.append(spec.to_dict() | {"fingerprint": spec.fingerprint()})
    for i in range(n_runs):
        record = registry.create_run(
            name=f"sweep trial {i}", action="train_and_evaluate" if i % 3 else "train",
            dataset=specs[i % 3],
            template={"name": templates[i % 3], "code": "def model_fn(features, labels, mode, params): ...\n" * 40},
            params={"hidden_units": [64, 32], "learning_rate": 10 ** -(1 + i % 4), "dropout": 0.1 * (i % 3)},
            run_config={"tf_random_seed": i}, schedule={"max_steps": metric_rows * 10})
        rows = []
        for k in range(1, metric_rows + 1):
            step = k * 10
            rows.append({"step": step, "wall_time": now - 3600 + k, "split": "train", "name": "loss",
                         "value": 1.0 / k + 0.01 * (i % 7)})
            if k % 5 == 0:
                rows.append({"step": step, "wall_time": now - 3600 + k, "split": "eval", "name": "accuracy",
                             "value": 0.5 + 0.4 * k / metric_rows})
        folder = registry.run_dir(record.run_id)
        (folder / paths.METRICS_FILE).write_bytes(format_rows(rows))
        (folder / paths.MODEL_DIR).mkdir()
        for step in (metric_rows * 5, metric_rows * 10):  # two checkpoint files (the UI lists, never loads them)
            (folder / paths.MODEL_DIR / f"model.ckpt-{step}").write_bytes(b"\0" * 64)
        registry.update_summary(record.run_id, rows)
        if i % 10 == 0:
            registry.set_tags(record.run_id, ["baseline"])
        ids.append(record.run_id)
    statuses = ("succeeded", "failed", "stopped", "succeeded", "cancelled")
    with contextlib.closing(sqlite3.connect(paths.registry_path(root))) as conn, conn:
        # one bulk update: a page's launcher must find nothing to start
        for i, run_id in enumerate(ids):
            conn.execute("UPDATE runs SET status = ?, started_at = created_at, finished_at = created_at + 60 "
                         "WHERE run_id = ?", (statuses[i % len(statuses)], run_id))
    trash.move_to_trash(registry, ids[::50])
    return ids


@contextlib.contextmanager
def _environment(root: Path) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in ("WORKBENCH_HOME", "WORKBENCH_WARM_SPARES")}
    os.environ["WORKBENCH_HOME"] = str(root)
    os.environ["WORKBENCH_WARM_SPARES"] = "0"  # no runner process started by the pages' launcher
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def time_page(page: str, repeats: int, run_id: str | None) -> dict[str, Any]:
    """The first run of ``page`` (after the app's own first run) and ``repeats`` reruns, in seconds."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(APP), default_timeout=120)
    if run_id:
        at.query_params["run"] = run_id
    at.run()
    start = time.perf_counter()
    at.switch_page(f"../../pages/{page}.py").run()
    first = time.perf_counter() - start
    if at.exception:
        raise RuntimeError(f"page {page} raised: {at.exception}")
    warm = []
    for _ in range(repeats):
        start = time.perf_counter()
        at.run()
        warm.append(time.perf_counter() - start)
    return {"first_s": first, "rerun": c.stats(warm), "load_1m": c.load_1m()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--pages", default=",".join(PAGES), help=f"comma-separated, of {', '.join(PAGES)}")
    parser.add_argument("--json", help="write the figures to this JSON file")
    args = parser.parse_args(argv)
    pages = [p for p in args.pages.split(",") if p]
    unknown = sorted(set(pages) - set(PAGES))
    if unknown:
        parser.error(f"--pages: unknown {unknown}; choose from {list(PAGES)}")
    for name in list(logging.root.manager.loggerDict):
        if name.startswith("streamlit"):
            logging.getLogger(name).setLevel(logging.ERROR)
    work = Path(tempfile.mkdtemp(prefix="bench_ui_pages_"))
    try:
        root = work / "workspace"
        start = time.perf_counter()
        ids = fill_workspace(root, args.runs)
        fill_s = time.perf_counter() - start
        results: dict[str, Any] = {}
        with _environment(root):
            for page in pages:
                results[page] = time_page(page, args.repeats, ids[-1] if page == "run" else None)
        rows = []
        for page, r in results.items():
            warm = r["rerun"]
            rows.append([page, r["first_s"], warm["median"], warm["min"], warm["max"], r["load_1m"],
                         "yes" if warm["median"] < TARGET_S else "NO"])
        c.print_table(["page", "first run s", "rerun median s", "min s", "max s", "load 1m", f"< {TARGET_S:g} s"],
                      rows, title=f"Pages with {args.runs} runs (workspace filled in {fill_s:.1f} s; "
                                  f"{args.repeats} reruns each)")
        c.write_json({"runs": args.runs, "repeats": args.repeats, "target_s": TARGET_S, "pages": results,
                      "fill_s": fill_s}, args.json)
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
