"""Load: eight concurrent runs on one workspace writing metrics and the registry while a reader
polls like the UI; and the incremental metrics reader reading only the new bytes.

The 1,000,000-line measurement is benchmarks/soak_metrics_tail.py; the longer concurrent soak is
benchmarks/soak_concurrent_runs.py.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from stub_runs import stub_run_args

from estimator_workbench.execution.launcher import LocalLauncher
from estimator_workbench.store import metrics_store
from estimator_workbench.store.registry import RunRegistry

HERE = Path(__file__).resolve().parent
STEPS = 150


@pytest.fixture
def launcher(workspace):
    made = LocalLauncher(workspace, max_concurrent=8, gpus=[], runner_module="load_runner",
                         env={"PYTHONPATH": str(HERE)})
    yield made
    made.shutdown(grace=2.0)


@pytest.mark.slow
def test_eight_concurrent_runs_while_the_ui_polls(workspace, launcher):
    reg = RunRegistry(workspace)
    ids = [reg.create_run(name=f"load {i}", action="train", dataset={"name": "none"},
                          template={"name": "t", "code": ""}, run_config={},
                          **stub_run_args({"max_steps": STEPS, "sleep": 0.005}, params={"i": i})).run_id
           for i in range(8)]
    for run_id in ids:
        launcher.submit(run_id)
    assert launcher.running_count() == 8  # all at once, none queued
    tails = {run_id: metrics_store.MetricsTail(reg.run_dir(run_id) / "metrics.jsonl")
             for run_id in ids}
    seen: dict[str, list[dict]] = {run_id: [] for run_id in ids}
    polls = 0
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # the UI: launcher poll, runs table, live tails
        launcher.poll()
        records = reg.list_runs()
        for run_id in ids:
            seen[run_id].extend(tails[run_id].read())
        polls += 1
        if all(r.is_finished for r in records):
            break
        time.sleep(0.02)
    for run_id in ids:
        seen[run_id].extend(tails[run_id].read())
    assert polls > 10
    for run_id in ids:
        record = reg.get(run_id)
        log = (reg.run_dir(run_id) / "worker.log").read_text()
        assert record.status == "succeeded", (record.error, log)
        assert "database is locked" not in log and "Traceback" not in log, log
        lines = (reg.run_dir(run_id) / "metrics.jsonl").read_text().splitlines()
        rows = [json.loads(line) for line in lines]  # every line complete and parseable
        train = [r for r in rows if r["split"] == "train"]
        assert [r["step"] for r in train if r["name"] == "loss"] == list(range(1, STEPS + 1))
        assert seen[run_id] == rows  # the live reader lost nothing, duplicated nothing
        # The registry's summary equals what the file says.
        for name, lower in (("loss", True), ("accuracy", False)):
            values = [(r["step"], r["value"]) for r in train if r["name"] == name]
            best = (min if lower else max)(values, key=lambda sv: sv[1])
            assert record.summary[f"train/{name}"] == {
                "last": values[-1][1], "last_step": values[-1][0], "best": best[1],
                "best_step": best[0]}
        assert record.summary["eval/accuracy"]["last"] == 1.0


class _CountingFile:
    def __init__(self, handle, counter):
        self._handle, self._counter = handle, counter

    def __enter__(self):
        self._handle.__enter__()
        return self

    def __exit__(self, *exc):
        return self._handle.__exit__(*exc)

    def read(self, size=-1):
        data = self._handle.read(size)
        self._counter.append(len(data))
        return data

    def __getattr__(self, name):
        return getattr(self._handle, name)


def test_incremental_read_costs_only_the_new_bytes(tmp_path, monkeypatch):
    path = tmp_path / "metrics.jsonl"
    line = lambda step: json.dumps({"step": step, "wall_time": 0.0, "split": "train",  # noqa: E731
                                    "name": "loss", "value": 1.0 / step}) + "\n"
    path.write_text("".join(line(s) for s in range(1, 50_001)))
    counter: list[int] = []
    real_open = open
    monkeypatch.setattr(metrics_store, "open",
                        lambda *a, **k: _CountingFile(real_open(*a, **k), counter), raising=False)
    tail = metrics_store.MetricsTail(path)
    assert len(tail.read()) == 50_000
    first = sum(counter)
    assert first == path.stat().st_size
    new = "".join(line(s) for s in range(50_001, 50_011))
    with real_open(path, "a") as f:
        f.write(new)
    counter.clear()
    rows = tail.read()
    assert [r["step"] for r in rows] == list(range(50_001, 50_011))
    assert sum(counter) == len(new.encode())  # O(new lines): 10 lines read, not 50,010
    counter.clear()
    assert tail.read() == [] and sum(counter) == 0  # nothing new: nothing read
    # A half-written trailing line is left for the next read, then read once.
    with real_open(path, "a") as f:
        f.write(line(50_011)[:20])
    assert tail.read() == []
    with real_open(path, "a") as f:
        f.write(line(50_011)[20:])
    assert [r["step"] for r in tail.read()] == [50_011]
