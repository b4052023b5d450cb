"""Benchmark 6: workbench latencies -- launch to first metric, tailing metrics, the runs listing.

1. Launch to first metric line (target < 3 s), ``mlp_classifier`` on the bundled ``iris``, 300
   steps, metrics every 10 steps, in a temporary workspace:
   * ``cli``: ``python -m estimator_workbench --workspace W run ... --no-preflight --detach`` started as a
     subprocess; clock from just before the CLI process starts until ``metrics.jsonl`` holds a
     complete line (a fresh CLI interpreter + the runner's interpreter both included; since
     2026-12-02 the CLI starts the runner before validating the run, so the two overlap);
   * ``cli_checked``: the same without ``--no-preflight`` (the default: the pre-flight check of
     the template on a tiny batch runs first -- in the runner's process since 2026-12-02, before
     that in a separate process the CLI waited for);
   * ``launcher``: ``RunRegistry.create_run`` + ``LocalLauncher.submit`` in this process (a
     launcher without a spare), until the first line;
   * ``launcher_warm``: the same with ``LocalLauncher(warm_spares=1)`` whose spare runner has
     finished its imports (what the UI's Train button does once the UI has been open a few
     seconds);
   * reference: a plain PyTorch script (``PLAIN_SCRIPT``: pandas reads the CSV, an MLP and its fused
     AdamW take one step) until it prints its loss -- the best a hand-written process does;
   * reference: a bare ``python -c "import torch, estimator_engine"`` -- the interpreter start
     and imports any worker process pays.
2. ``MetricsTail.read()`` of 1,000 lines appended to a 1,000,000-line ``metrics.jsonl`` (after an
   initial read to the end; target < 50 ms), vs the reference ``read_all`` of the whole file.
3. The runs listing with 500 finished runs in the registry: ``RunRegistry.list_runs()`` +
   ``estimator_workbench.ui.tables.runs_frame`` (the table DataFrame), and, when Streamlit's ``AppTest`` works,
   a whole warm rerun of ``pages/runs.py``. Reference: the same with 10 runs.
4. A run's page with a 100,000-point series (target < 1 s): one finished run whose
   ``metrics.jsonl`` holds 100,000 train-loss rows (plus steps/s every 10th step), rendered by
   ``pages/run.py`` under ``AppTest``: the first render (reads the whole file, downsamples, builds
   the figures) and a warm rerun. Reference: the same run with 1,000 points.

Parts whose workbench pieces do not import are reported as ``pending``.

    python benchmarks/bench_workbench.py [--launches 5] [--parts launch,tail,runs_listing,run_page] [--json out.json]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import _common as c

LAUNCH_TARGET_S = 2.0  # issue 16: CLI launch -> first metric line < 2 s
TAIL_TARGET_MS = 50.0
RUN_PAGE_TARGET_S = 1.0


def _wait_first_line(path: Path, timeout: float) -> float | None:
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        try:
            with open(path, "rb") as f:
                if b"\n" in f.read(4096):
                    return time.perf_counter()
        except FileNotFoundError:
            pass
        time.sleep(0.005)
    return None


def _finish(root: Path, run_id: str) -> str:
    """Waits for the run to end (killing its process group after 60 s); returns its status."""
    from estimator_workbench.store.registry import RunRegistry

    registry = RunRegistry(root)
    deadline = time.time() + 60
    record = registry.get(run_id)
    while not record.is_finished and time.time() < deadline:
        time.sleep(0.1)
        record = registry.get(run_id)
    if not record.is_finished and record.pid:
        try:
            os.killpg(record.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    # The runner may still be flushing after its status is final: wait for its group to go.
    if record.pid:
        for _ in range(200):
            try:
                os.killpg(record.pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)
    return record.status


def _run_id_from_root(root: Path) -> str:
    from estimator_workbench.store.registry import RunRegistry

    return RunRegistry(root).list_runs(limit=1)[0].run_id


def launch_cli(root: Path, steps: int, preflight: bool = False) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "estimator_workbench", "--workspace", str(root), "run", "--dataset", "iris",
           "--template", "mlp_classifier", "--steps", str(steps), "--detach"]
    if not preflight:
        cmd.append("--no-preflight")
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=str(c.REPO_ROOT), capture_output=True, text=True, timeout=120, check=False)
    cli_done = time.perf_counter()
    if proc.returncode != 0:
        raise RuntimeError(f"CLI failed ({proc.returncode}): {proc.stderr[-2000:]}")
    run_id = proc.stdout.strip().splitlines()[-1]
    first = _wait_first_line(root / "runs" / run_id / "metrics.jsonl", 60)
    status = _finish(root, run_id)
    return {"first_metric_s": None if first is None else first - start, "cli_returns_s": cli_done - start,
            "status": status}


def launch_in_process(root: Path, steps: int, warm: bool = False) -> dict[str, Any]:
    """``create_run`` + ``LocalLauncher.submit`` in this process, until the first metric line.

    ``warm``: ``LocalLauncher(warm_spares=1)``, whose spare is started and has finished its
    imports (it logs 'ready') before the clock starts, as in a UI left open."""
    from estimator_workbench import templates
    from estimator_workbench.cli import commands as cli
    from estimator_workbench.execution.launcher import LocalLauncher
    from estimator_workbench.execution.spares import SPARE_LOG
    from estimator_workbench.store.registry import RunRegistry

    dataset = cli._dataset_dict("iris", None)
    template, schema = cli._template_dict("mlp_classifier", root)
    params = templates.validate_params(schema, {})
    registry = RunRegistry(root)
    launcher = LocalLauncher(root, warm_spares=1, gpus=[]) if warm else LocalLauncher(root)
    try:
        if warm:
            launcher.poll()  # starts the spare
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                log = root / SPARE_LOG
                if log.exists() and b" ready" in log.read_bytes():
                    break
                time.sleep(0.05)
        start = time.perf_counter()
        record = registry.create_run(name="bench", action="train", dataset=dataset, template=template,
                                     params=params, run_config={}, schedule={"max_steps": steps})
        launcher.submit(record.run_id)
        first = _wait_first_line(registry.run_dir(record.run_id) / "metrics.jsonl", 60)
        status = _finish(root, record.run_id)
        launcher.poll()  # reap our child
    finally:
        launcher.shutdown()
    return {"first_metric_s": None if first is None else first - start, "status": status}


def bare_import() -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import torch, estimator_engine"], cwd=str(c.REPO_ROOT), check=True)
    return time.perf_counter() - start


# What a hand-written PyTorch script does to train the same model on the same CSV: read it with
# pandas, build the MLP and its fused AdamW, take one step and print the loss. Torch's optimizer
# imports torch._dynamo on its first add_param_group (~1 s here), as the engine's runner does.
PLAIN_SCRIPT = """
import sys, pandas as pd, torch
frame = pd.read_csv(sys.argv[1])
x = torch.tensor(frame.select_dtypes("number").to_numpy(), dtype=torch.float32)
y = torch.tensor(pd.factorize(frame.iloc[:, -1])[0])
model = torch.nn.Sequential(torch.nn.Linear(x.shape[1], 64), torch.nn.ReLU(), torch.nn.Linear(64, 3))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
loss = torch.nn.functional.cross_entropy(model(x[:32]), y[:32])
loss.backward()
optimizer.step()
print(loss.item(), flush=True)
"""


def plain_script() -> float:
    """Seconds from starting ``PLAIN_SCRIPT`` until it prints its first loss."""
    from estimator_workbench.data.sources import bundled_path

    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", PLAIN_SCRIPT, str(bundled_path("iris"))],
                            cwd=str(c.REPO_ROOT), stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    first = time.perf_counter() - start
    if proc.wait(timeout=60) != 0 or not line.strip():
        raise RuntimeError(f"the plain script failed ({proc.returncode}): {line!r}")
    return first


def bench_launch(launches: int, steps: int) -> dict[str, Any]:
    raw: dict[str, list[Any]] = {"cli": [], "cli_checked": [], "launcher": [], "launcher_warm": [],
                                 "bare": [], "plain": []}
    cli_ret, statuses = [], []
    load_before = c.load_1m()
    kinds = ("cli", "cli_checked", "launcher", "launcher_warm", "bare", "plain")
    for i in range(launches):
        work = Path(tempfile.mkdtemp(prefix="bench_wb_"))
        try:
            for kind in (kinds if i % 2 == 0 else kinds[::-1]):  # alternate the order
                if kind in ("cli", "cli_checked"):
                    r = launch_cli(work / f"ws_{kind}", steps, preflight=kind == "cli_checked")
                    raw[kind].append(r["first_metric_s"])
                    if kind == "cli":
                        cli_ret.append(r["cli_returns_s"])
                    statuses.append(r["status"])
                elif kind in ("launcher", "launcher_warm"):
                    r = launch_in_process(work / f"ws_{kind}", steps, warm=kind == "launcher_warm")
                    raw[kind].append(r["first_metric_s"])
                    statuses.append(r["status"])
                elif kind == "bare":
                    raw[kind].append(bare_import())
                else:
                    raw[kind].append(plain_script())
        finally:
            shutil.rmtree(work, ignore_errors=True)

    def med(kind: str) -> float | None:
        ok = [v for v in raw[kind] if v is not None]
        return c.median(ok) if ok else None

    out = {
        "cli_first_metric_s": med("cli"),
        "cli_checked_first_metric_s": med("cli_checked"),
        "cli_returns_s": c.median(cli_ret),
        "launcher_first_metric_s": med("launcher"),
        "launcher_warm_first_metric_s": med("launcher_warm"),
        "bare_import_torch_engine_s": med("bare"),
        "plain_script_first_loss_s": med("plain"),
        "raw": raw, "run_statuses": statuses,
        "target_s": LAUNCH_TARGET_S,
        "load_1m": [load_before, c.load_1m()],
    }
    out["met"] = (out["cli_checked_first_metric_s"] is not None
                  and out["cli_checked_first_metric_s"] < LAUNCH_TARGET_S)
    return out


def bench_tail(lines: int, new_lines: int, repeats: int) -> dict[str, Any]:
    from estimator_workbench.store.metrics_hook import append_rows
    from estimator_workbench.store.metrics_store import MetricsTail, read_all

    work = Path(tempfile.mkdtemp(prefix="bench_tail_"))
    try:
        path = work / "metrics.jsonl"
        now = time.time()
        block = 100_000
        for offset in range(0, lines, block):
            append_rows(path, ({"step": s, "wall_time": now, "split": "train", "name": "loss", "value": 1.0 / (s + 1)}
                               for s in range(offset, min(offset + block, lines))))
        size_mb = path.stat().st_size / 2**20
        tail = MetricsTail(path)
        start = time.perf_counter()
        initial = len(tail.read())
        initial_s = time.perf_counter() - start
        reads, next_step = [], lines
        for _ in range(repeats):
            append_rows(path, ({"step": s, "wall_time": now, "split": "train", "name": "loss", "value": 0.5}
                               for s in range(next_step, next_step + new_lines)))
            next_step += new_lines
            start = time.perf_counter()
            got = len(tail.read())
            reads.append(time.perf_counter() - start)
            if got != new_lines:
                raise RuntimeError(f"MetricsTail read {got} lines, expected {new_lines}")
        start = time.perf_counter()
        initial_frame = len(MetricsTail(path).read_frame())
        initial_frame_s = time.perf_counter() - start
        full = []
        for _ in range(2):
            start = time.perf_counter()
            read_all(path)
            full.append(time.perf_counter() - start)
        frame_reads = []
        for _ in range(repeats):
            append_rows(path, ({"step": s, "wall_time": now, "split": "train", "name": "loss", "value": 0.5}
                               for s in range(next_step, next_step + new_lines)))
            next_step += new_lines
            start = time.perf_counter()
            tail.read_frame()
            frame_reads.append(time.perf_counter() - start)
        out = {"file_lines": lines, "file_mb": size_mb, "new_lines": new_lines, "initial_read_s": initial_s,
               "initial_rows": initial, "initial_read_frame_s": initial_frame_s,
               "initial_frame_rows": initial_frame, "tail_read_ms": c.median(reads) * 1e3, "tail_read_ms_max": max(reads) * 1e3,
               "tail_read_frame_ms": c.median(frame_reads) * 1e3,
               "reference_read_all_s": c.median(full), "target_ms": TAIL_TARGET_MS}
        out["met"] = out["tail_read_ms"] < TAIL_TARGET_MS
        return out
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _fill_registry(root: Path, n: int) -> None:
    from estimator_workbench.store.registry import RunRegistry

    registry = RunRegistry(root)
    for i in range(n):
        record = registry.create_run(
            name=f"run {i}", action="train",
            dataset={"ref": {"kind": "bundled", "name": "iris"}, "fingerprint": "sha256:abc"},
            template={"name": "mlp_classifier", "code": "def model_fn(features, labels, mode, params): ...\n" * 40},
            params={"hidden_units": "64,32", "learning_rate": 10 ** -(1 + i % 4), "dropout": 0.1 * (i % 3)},
            run_config={"tf_random_seed": i}, schedule={"max_steps": 1000})
        registry.update_summary(record.run_id, {"loss": 1.0 / (i + 1)}, step=1000)
    _mark_finished(root)


def _mark_finished(root: Path) -> None:
    """Every run of the workspace ``succeeded`` (one bulk update: a page's launcher must not start them)."""
    with sqlite3.connect(root / "registry.sqlite") as conn:
        conn.execute("UPDATE runs SET status = 'succeeded', started_at = created_at, finished_at = created_at + 60")


@contextlib.contextmanager
def _workspace(root: Path) -> Iterator[None]:
    """``$WORKBENCH_HOME`` set to ``root`` for the pages run under AppTest, restored afterwards."""
    old = os.environ.get("WORKBENCH_HOME")
    os.environ["WORKBENCH_HOME"] = str(root)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("WORKBENCH_HOME", None)
        else:
            os.environ["WORKBENCH_HOME"] = old


def _warm_rerun_s(at: Any, reruns: int = 3) -> float:
    """Median seconds of ``reruns`` further runs of an AppTest page."""
    times = []
    for _ in range(reruns):
        start = time.perf_counter()
        at.run()
        times.append(time.perf_counter() - start)
    return c.median(times)


def bench_runs_listing(n_runs: int, reference_runs: int, repeats: int) -> dict[str, Any]:
    from estimator_workbench.store import paths
    from estimator_workbench.store.registry import RunRegistry
    from estimator_workbench.ui.tables import runs_frame

    out: dict[str, Any] = {}
    work = Path(tempfile.mkdtemp(prefix="bench_runs_"))
    try:
        for n in (reference_runs, n_runs):
            root = work / f"ws{n}"
            root.mkdir()
            start = time.perf_counter()
            _fill_registry(root, n)
            fill_s = time.perf_counter() - start
            if paths.registry_path(root) != root / "registry.sqlite":
                raise RuntimeError(f"unexpected registry path {paths.registry_path(root)}")
            listing, table = [], []
            for _ in range(repeats):
                start = time.perf_counter()
                records = RunRegistry(root).list_runs()
                middle = time.perf_counter()
                frame = runs_frame(records)
                table.append(time.perf_counter() - middle)
                listing.append(middle - start)
            out[str(n)] = {"runs": len(records), "frame_shape": list(frame.shape), "fill_s": fill_s,
                           "list_runs_ms": c.median(listing) * 1e3, "runs_frame_ms": c.median(table) * 1e3,
                           "total_ms": (c.median(listing) + c.median(table)) * 1e3,
                           "page_rerun_ms": _page_rerun_ms(root)}
        return out
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _page_rerun_ms(root: Path) -> float | None:
    """A warm rerun of pages/runs.py under Streamlit's AppTest (None when it cannot run)."""
    try:
        from streamlit.testing.v1 import AppTest
    except ImportError:
        return None
    import logging

    for name in list(logging.root.manager.loggerDict):
        if name.startswith("streamlit"):
            logging.getLogger(name).setLevel(logging.ERROR)
    try:
        with _workspace(root):
            at = AppTest.from_file(str(c.REPO_ROOT / "pages" / "runs.py"), default_timeout=60)
            at.run()
            return None if at.exception else _warm_rerun_s(at) * 1e3
    except Exception:
        return None


def bench_run_page(points: int, reference_points: int) -> dict[str, Any]:
    from estimator_workbench.store import paths
    from estimator_workbench.store.registry import RunRegistry

    out: dict[str, Any] = {}
    work = Path(tempfile.mkdtemp(prefix="bench_run_page_"))
    try:
        for n in (reference_points, points):
            root = work / f"ws{n}"
            root.mkdir()
            registry = RunRegistry(root)
            record = registry.create_run(
                name="long run", action="train", dataset={"ref": {"kind": "bundled", "name": "iris"}},
                template={"name": "mlp_classifier", "code": "def model_fn(features, labels, mode, params): ...\n"},
                params={}, run_config={"tf_random_seed": 0}, schedule={"max_steps": n})
            with open(registry.run_dir(record.run_id) / paths.METRICS_FILE, "w") as f:
                for step in range(1, n + 1):
                    f.write(f'{{"step": {step}, "wall_time": {1e9 + step * 0.01}, "split": "train", '
                            f'"name": "loss", "value": {1.0 / step}}}\n')
                    if step % 10 == 0:
                        f.write(f'{{"step": {step}, "wall_time": {1e9 + step * 0.01}, "split": "train", '
                                f'"name": "steps_per_sec", "value": 1000.0}}\n')
            _mark_finished(root)
            registry.refresh_summary(record.run_id)
            out[str(n)] = _run_page_s(root, record.run_id)
        first = out[str(points)].get("first_render_s")
        out["met"] = first is not None and first < RUN_PAGE_TARGET_S
        return out
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _run_page_s(root: Path, run_id: str) -> dict[str, Any]:
    """First render and warm rerun of pages/run.py on ``run_id`` under AppTest."""
    from streamlit.testing.v1 import AppTest

    with _workspace(root):
        at = AppTest.from_file(str(c.REPO_ROOT / "pages" / "run.py"), default_timeout=60)
        at.query_params["run"] = run_id
        start = time.perf_counter()
        at.run()
        first = time.perf_counter() - start
        if at.exception:
            raise RuntimeError(f"pages/run.py failed: {at.exception[0].value}")
        return {"first_render_s": first, "warm_rerun_s": _warm_rerun_s(at),
                "charts": len(at.get("plotly_chart"))}


def _pending(part: str, exc: BaseException) -> dict[str, Any]:
    return {"status": "pending", "reason": f"{type(exc).__name__}: {exc}", "part": part}


def _target_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """RESULTS.md rows: median (min-max) of the launches, with the load they ran under."""
    rows = []
    launch = result.get("launch", {})
    if "raw" in launch:
        load = tuple(launch.get("load_1m", [None, None]))
        for kind, label, target in (
                ("cli_checked", "CLI `run --detach` (pre-flight check, the default) launch -> first metric line",
                 True),
                ("cli", "the same with `--no-preflight`", False),
                ("launcher_warm", "UI Train button (launcher with a warm spare) -> first metric line", False),
                ("bare", "reference: `python -c 'import torch, estimator_engine'`", False),
                ("plain", "reference: a plain PyTorch script (pandas CSV, MLP, fused AdamW) -> its first "
                          "printed loss", False)):
            if not launch["raw"].get(kind):
                continue  # (results written before the row existed)
            figure = c.stats([v for v in launch["raw"][kind] if v is not None])
            rows.append(c.target_row(f"launch_{kind}", label, figure, "< 2 s" if target else "(info)", unit="s",
                                     higher_is_better=False if target else None,
                                     threshold=LAUNCH_TARGET_S if target else None, load=load))
        # The machine's speed drifts between runs by more than the CLI's own cost: the ratio to the
        # plain script of the same round is the figure that compares across runs.
        pairs = [(cli, plain) for cli, plain in zip(launch["raw"].get("cli_checked", []),
                                                      launch["raw"].get("plain", []))
                 if cli is not None and plain is not None]
        if pairs:
            rows.append(c.target_row("launch_cli_over_plain", "CLI launch (pre-flight) / the plain PyTorch script, "
                                     "same round", c.stats([cli / plain for cli, plain in pairs]), "(info)",
                                     load=load))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launches", type=int, default=5)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--tail-lines", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=500)
    parser.add_argument("--points", type=int, default=100_000)
    parser.add_argument("--parts", default="launch,tail,runs_listing,run_page")
    parser.add_argument("--quick", action="store_true", help="smoke run: 1 launch, small files")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    if args.quick:
        args.launches, args.tail_lines, args.runs, args.points = 1, 200_000, 100, 10_000
    c.quiet_engine()
    result: dict[str, Any] = {"benchmark": "workbench"}
    parts = {"launch": lambda: bench_launch(args.launches, args.steps),
             "tail": lambda: bench_tail(args.tail_lines, 1000, 20),
             "runs_listing": lambda: bench_runs_listing(args.runs, 10, 5),
             "run_page": lambda: bench_run_page(args.points, 1_000)}
    for part in args.parts.split(","):
        try:
            result[part] = parts[part]()
        except Exception as exc:  # a workbench piece still being written: report, go on
            result[part] = _pending(part, exc)
    result["targets"] = _target_rows(result)
    skipped = {"status": "skipped", "reason": "not in --parts"}
    launch, tail, listing = (result.get(k, skipped) for k in ("launch", "tail", "runs_listing"))
    run_page = result.get("run_page", skipped)
    rows = []
    if "met" in launch:
        rows.append(["launch -> first metric line (CLI --no-preflight)", f"{launch['cli_first_metric_s']:.2f} s",
                     "(info)", ""])
        if launch.get("cli_checked_first_metric_s") is not None:
            rows.append(["launch -> first metric line (CLI default, with the pre-flight check)",
                         f"{launch['cli_checked_first_metric_s']:.2f} s", f"< {LAUNCH_TARGET_S} s",
                         "yes" if launch["met"] else "NO"])
        rows.append(["launch -> first metric line (in-process launcher)",
                     f"{launch['launcher_first_metric_s']:.2f} s", "", ""])
        if launch.get("launcher_warm_first_metric_s") is not None:
            rows.append(["launch -> first metric line (launcher with a warm spare runner)",
                         f"{launch['launcher_warm_first_metric_s']:.2f} s", "", ""])
        rows.append(["  reference: python -c 'import torch, estimator_engine'",
                     f"{launch['bare_import_torch_engine_s']:.2f} s", "", ""])
        rows.append(["  reference: a plain PyTorch script -> its first printed loss",
                     f"{launch['plain_script_first_loss_s']:.2f} s", "", ""])
    else:
        rows.append(["launch -> first metric line", launch.get("status", "pending"), launch.get("reason", "")[:60], ""])
    if "met" in tail:
        rows.append([f"MetricsTail.read of 1,000 new lines ({tail['file_lines']:,}-line file)",
                     f"{tail['tail_read_ms']:.2f} ms", f"< {TAIL_TARGET_MS:.0f} ms", "yes" if tail["met"] else "NO"])
        rows.append(["  initial read of the whole file (rows)", f"{tail['initial_read_s']:.2f} s", "", ""])
        rows.append(["  initial read_frame of the whole file", f"{tail['initial_read_frame_s']:.2f} s", "", ""])
        rows.append(["  reference: read_all (whole file -> DataFrame)", f"{tail['reference_read_all_s']:.2f} s", "", ""])
    else:
        rows.append(["MetricsTail", tail.get("status", "pending"), tail.get("reason", "")[:60], ""])
    if "status" not in listing:
        for n, entry in listing.items():
            page = entry["page_rerun_ms"]
            rows.append([f"runs listing, {n} runs: list_runs + runs_frame", f"{entry['total_ms']:.1f} ms",
                         "(no target)", ""])
            rows.append([f"  runs page rerun (AppTest), {n} runs", "n/a" if page is None else f"{page:.0f} ms", "", ""])
    else:
        rows.append(["runs listing", listing.get("status", "pending"), listing.get("reason", "")[:60], ""])
    if "met" in run_page:
        big = run_page[str(args.points)]
        rows.append([f"run page, {args.points:,}-point series: first render (AppTest)",
                     f"{big['first_render_s']:.2f} s", f"< {RUN_PAGE_TARGET_S:.0f} s", "yes" if run_page["met"] else "NO"])
        rows.append(["  warm rerun", f"{big['warm_rerun_s']:.2f} s", "", ""])
        small = run_page["1000"]
        rows.append(["  reference: 1,000-point series, first render / warm rerun",
                     f"{small['first_render_s']:.2f} / {small['warm_rerun_s']:.2f} s", "", ""])
    else:
        rows.append(["run page", run_page.get("status", "pending"), run_page.get("reason", "")[:60], ""])
    c.print_table(["measure", "median", "target", "met"], rows, title="Workbench latencies")
    c.write_json(result, args.json)
    if args.json is None:
        print(json.dumps({k: v for k, v in result.items() if k != "benchmark"}, default=str)[:2000])


if __name__ == "__main__":
    main()
