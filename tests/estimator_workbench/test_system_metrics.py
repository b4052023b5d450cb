"""System metrics per run (issue 28 item 10): the runner samples CPU and memory of its processes
(GPU memory under CUDA) into the run's metrics stream at a low rate; the run page draws them in a
chart of their own (tests/pages/test_system_metrics_page.py)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import polling
import psutil
import pytest
from stub_runs import stub_run_args

from estimator_workbench.execution import system_metrics
from estimator_workbench.execution.launcher import LocalLauncher
from estimator_workbench.store.metrics_store import read_all
from estimator_workbench.store.registry import RunRegistry

HERE = Path(__file__).resolve().parent


def test_a_sample_measures_this_process():
    process = psutil.Process()
    process.cpu_percent(None)
    sum(i * i for i in range(200_000))  # some CPU time to measure
    values = system_metrics.sample(process)
    assert set(values) >= {"cpu_percent", "memory_mb", "system_memory_percent"}
    # this process and its children (a full test run has servers started by session fixtures)
    rss = sum(p.memory_info().rss for p in [process, *process.children(recursive=True)]) / 2**20
    assert values["memory_mb"] == pytest.approx(rss, rel=0.2)
    assert values["cpu_percent"] > 0 and 0 < values["system_memory_percent"] <= 100


def test_the_sampler_appends_rows_at_the_current_step_and_stops(tmp_path):
    path = tmp_path / "metrics.jsonl"
    with system_metrics.SystemSampler(path, step=lambda: 42, every_s=0.05):
        polling.wait_for(lambda: path.exists() and len(read_all(path)) >= 6, timeout=20)
    frame = read_all(path)
    assert set(frame["split"]) == {"system"} and set(frame["step"]) == {42}
    assert {"cpu_percent", "memory_mb", "system_memory_percent"} <= set(frame["name"])
    size = path.stat().st_size
    assert not any(t.name == "workbench-system-metrics" for t in threading.enumerate())
    assert path.stat().st_size == size  # nothing written after the block


def test_every_s_zero_samples_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv(system_metrics.EVERY_ENV, "0")
    with system_metrics.SystemSampler(tmp_path / "m.jsonl", step=lambda: 0) as sampler:
        assert sampler._thread is None
    assert not (tmp_path / "m.jsonl").exists()


@pytest.mark.slow
def test_a_runner_writes_system_metrics_into_the_run_stream(workspace):
    launcher = LocalLauncher(workspace, gpus=[], runner_module="stub_runner",
                             env={"PYTHONPATH": str(HERE), system_metrics.EVERY_ENV: "0.2"})
    try:
        reg = RunRegistry(workspace)
        run_id = reg.create_run(name="stub", action="train", dataset={"name": "none"},
                                template={"name": "stub", "code": ""}, run_config={},
                                **stub_run_args({"max_steps": 60, "sleep": 0.05})).run_id
        launcher.submit(run_id)
        assert launcher.wait(run_id, timeout=60).status == "succeeded"
        frame = read_all(Path(workspace) / "runs" / run_id / "metrics.jsonl")
        system = frame[frame["split"] == "system"]
        assert {"cpu_percent", "memory_mb"} <= set(system["name"])
        assert (system.loc[system["name"] == "memory_mb", "value"] > 10).all()  # an interpreter's RSS
        assert sorted(frame.loc[frame["split"] == "train", "step"]) == list(range(1, 61))
    finally:
        launcher.shutdown(grace=1.0)
    assert os.environ.get(system_metrics.EVERY_ENV) == "0"  # the conftest default is back
