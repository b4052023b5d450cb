"""Serving: ``estimator-workbench serve`` over HTTP beside ``Estimator.predict()`` in-process.

Workload: a DNNClassifier (hidden 64-32) over 10 numeric columns and one categorical string column
(vocabulary of 5, one OOV bucket, embedded), trained 20 steps and exported with the parsing
receiver, as a workbench run is. Requests of 1 row and of 256 rows (JSON ``instances`` of records).

Sides, each timed per request (p50 / p99 latency; throughput = rows / wall time):

* ``predict()``: ``Estimator.predict(pandas_input_fn(frame), yield_single_examples=False)`` in
  this process (what a notebook user calls; it restores the checkpoint on every call, as TF does);
* ``loaded``: ``estimator_engine.export.load(path)(records)`` in this process (the export alone);
* ``http``: ``POST /v1/models/bench:predict`` to the server (one worker) on loopback over one
  keep-alive connection, JSON encode + decode included;
* ``http x4``: 4 client threads with a connection each, against 2 workers.

Nothing is asserted: the figures are for the report (``--json`` writes them).

    python benchmarks/bench_serve.py [--requests 200] [--quick] [--json out.json]
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import _common as c
import numpy as np
import pandas as pd

import estimator_engine as ee
from estimator_engine import export as export_lib
from estimator_engine import serving

fc = ee.feature_column
COLORS = ["red", "green", "blue", "cyan", "magenta"]
NUMERIC = [f"x{i}" for i in range(10)]


def _frame(rows: int, seed: int) -> pd.DataFrame:
    rng = np.random.RandomState(seed)
    frame = pd.DataFrame({name: rng.randn(rows).astype(np.float32) for name in NUMERIC})
    frame["color"] = rng.choice([*COLORS, "white"], rows)
    return frame


def _records(frame: pd.DataFrame) -> list[dict]:
    return [{**{n: float(row[n]) for n in NUMERIC}, "color": row["color"]} for _, row in frame.iterrows()]


def _model(root: Path) -> tuple[ee.Estimator, str]:
    columns = [fc.numeric_column(n) for n in NUMERIC]
    columns.append(fc.embedding_column(fc.categorical_column_with_vocabulary_list("color", COLORS, num_oov_buckets=1), 4))
    estimator = ee.DNNClassifier([64, 32], columns, model_dir=str(root / "model"), n_classes=3,
                                 config=ee.RunConfig(tf_random_seed=0))
    frame = _frame(512, 0)
    label = (frame["x0"] > 0).astype(np.int64) + (frame["color"] == "red").astype(np.int64)
    estimator.train(ee.inputs.pandas_input_fn(frame, label, batch_size=64, num_epochs=None, shuffle=True), steps=20)
    receiver = export_lib.build_parsing_serving_input_receiver_fn(serving.make_parse_example_spec(columns))
    return estimator, estimator.export_saved_model(str(root / "export"), receiver)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _start(path: str, workers: int, log: Path) -> tuple[subprocess.Popen, int]:
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(c.REPO_ROOT)}
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "estimator_workbench", "serve", path, "--name", "bench",
                                 "--port", str(port), "--workers", str(workers)], stdout=out, stderr=subprocess.STDOUT,
                                env=env, start_new_session=True)  # its group holds uvicorn's workers
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited: {log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5):
                return proc, port
        except OSError:
            time.sleep(0.2)
    _stop(proc)
    raise RuntimeError("server did not start")


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM (uvicorn stops its workers), then SIGKILL to whatever is left of its group."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        pass
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _percentiles(latencies: list[float]) -> tuple[float, float]:
    values = np.array(latencies) * 1000
    return float(np.percentile(values, 50)), float(np.percentile(values, 99))


def _time(call, requests: int, warmup: int = 5) -> list[float]:
    for _ in range(warmup):
        call()
    latencies = []
    for _ in range(requests):
        start = time.perf_counter()
        call()
        latencies.append(time.perf_counter() - start)
    return latencies


def _http_call(port: int, body: bytes):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

    def call() -> None:
        connection.request("POST", "/v1/models/bench:predict", body, {"Content-Type": "application/json"})
        response = connection.getresponse()
        payload = response.read()
        if response.status != 200:
            raise RuntimeError(payload[:300])
        json.loads(payload)

    return call, connection


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--quick", action="store_true", help="20 requests per cell")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    requests = 20 if args.quick else args.requests
    c.quiet_engine()
    rows_out = []
    with tempfile.TemporaryDirectory(prefix="bench-serve-") as tmp:
        root = Path(tmp)
        estimator, path = _model(root)
        loaded = export_lib.load(path)
        servers = {1: _start(path, 1, root / "server1.log"), 2: _start(path, 2, root / "server2.log")}
        try:
            for rows in (1, 256):
                frame = _frame(rows, 1)
                records = _records(frame)
                body = json.dumps({"instances": records}).encode()
                sides = {
                    "predict()": lambda frame=frame: next(estimator.predict(
                        ee.inputs.pandas_input_fn(frame, batch_size=len(frame), shuffle=False),
                        yield_single_examples=False)),
                    "loaded": lambda records=records: loaded(records),
                }
                for name, call in sides.items():
                    latencies = _time(call, requests)
                    p50, p99 = _percentiles(latencies)
                    rows_out.append({"rows": rows, "side": name, "p50_ms": p50, "p99_ms": p99,
                                     "rows_per_s": rows * len(latencies) / sum(latencies)})
                call, connection = _http_call(servers[1][1], body)
                latencies = _time(call, requests)
                connection.close()
                p50, p99 = _percentiles(latencies)
                rows_out.append({"rows": rows, "side": "http", "p50_ms": p50, "p99_ms": p99,
                                 "rows_per_s": rows * len(latencies) / sum(latencies)})
                rows_out.append(_concurrent(servers[2][1], body, rows, requests))
        finally:
            for proc, _ in servers.values():
                _stop(proc)
    print(f"{'rows':>5} {'side':<18} {'p50 ms':>9} {'p99 ms':>9} {'rows/s':>10}")
    for row in rows_out:
        print(f"{row['rows']:>5} {row['side']:<18} {row['p50_ms']:>9.2f} {row['p99_ms']:>9.2f} {row['rows_per_s']:>10.0f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"benchmark": "serve", "machine": c.machine_info(),
                                               "requests": requests, "results": rows_out}, indent=2))


def _concurrent(port: int, body: bytes, rows: int, requests: int, threads: int = 4) -> dict:
    latencies: list[float] = []
    lock = threading.Lock()

    def worker() -> None:
        call, connection = _http_call(port, body)
        mine = _time(call, max(1, requests // threads), warmup=2)
        connection.close()
        with lock:
            latencies.extend(mine)

    start = time.perf_counter()
    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    wall = time.perf_counter() - start
    p50, p99 = _percentiles(latencies)
    return {"rows": rows, "side": f"http x{threads} (2 workers)", "p50_ms": p50, "p99_ms": p99,
            "rows_per_s": rows * len(latencies) / wall}


if __name__ == "__main__":
    main()
