"""A step of the wall clock never strands a live run (issue 24, item 2).

A runner was identified by pid + psutil's ``create_time``, which Linux derives from the boot time,
itself derived from the wall clock: after a 32 s step a training run was marked ``lost: runner
process is gone`` while it kept training, ``cancel`` refused it and ``resume`` was accepted.

A step is simulated the way it reaches this code: psutil's boot time (``/proc/stat`` btime) and
``time.time()`` both move by the step; the start ticks in ``/proc/<pid>/stat`` and the clock since
boot do not.
"""

from __future__ import annotations

import functools
import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import polling
import psutil
import pytest
from stub_runs import stub_run_args

from estimator_workbench.execution.launcher import LocalLauncher
from estimator_workbench.execution.processes import PROCESS_FILE, RunProcess, pid_alive
from estimator_workbench.store.guards import BOOT_RELATIVE_LIMIT, process_start_time, same_process
from estimator_workbench.store.registry import RunRegistry

HERE = Path(__file__).resolve().parents[1] / "estimator_workbench"  # stub_runner.py
wait_for = functools.partial(polling.wait_for, timeout=60.0)
STEPS_S = (-60.0, -1.0, 1.0, 60.0)


def stub_run(workspace: Path, **schedule) -> str:
    return RunRegistry(workspace).create_run(
        name="stub", action="train", dataset={"name": "none"}, template={"name": "stub", "code": ""},
        run_config={}, **stub_run_args(schedule)).run_id


def step_wall_clock(monkeypatch: pytest.MonkeyPatch, step: float) -> None:
    """What a step of ``step`` seconds changes: the wall clock, and the boot time psutil reads
    (Linux recomputes /proc/stat's btime from the wall clock)."""
    real_time, real_boot = time.time, psutil._pslinux.boot_time
    monkeypatch.setattr(time, "time", lambda: real_time() + step)
    monkeypatch.setattr(psutil._pslinux, "boot_time", lambda: real_boot() + step)


@pytest.fixture
def live_run(workspace):
    """A long stub run started by one launcher (the UI's), beating and writing metrics."""
    first = LocalLauncher(workspace, gpus=[], runner_module="stub_runner", env={"PYTHONPATH": str(HERE)})
    run_id = stub_run(workspace, max_steps=100_000, sleep=0.02)
    first.submit(run_id)
    wait_for(lambda: (first.registry.run_dir(run_id) / "metrics.jsonl").exists())
    yield first, run_id
    first.shutdown(grace=1.0)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="psutil's Linux boot time is stepped")
def test_steps_of_the_clock_in_both_directions_mark_no_live_run_lost(live_run, monkeypatch):
    """The issue's incident: another launcher (the CLI's ``runs``, a restarted UI) judges a live
    run after the clock stepped. Before: a 1 s step was "runner process is gone" (0.01 s tolerance
    on create_time), a 60 s step forward also "no heartbeat for 61s"."""
    first, run_id = live_run
    record = first.registry.get(run_id)
    assert record.pid_started is not None and record.pid_started < BOOT_RELATIVE_LIMIT  # since boot
    psutil_start = psutil.Process(record.pid).create_time()
    false_lost = []
    for step in STEPS_S:
        with monkeypatch.context() as patch:
            step_wall_clock(patch, step)
            assert abs(psutil.Process(record.pid).create_time() - psutil_start - step) < 0.05  # it moved
            second = LocalLauncher(first.root, gpus=[])
            false_lost += second.reap_lost()
            assert second.running_count() == 1
    assert false_lost == []
    assert first.registry.get(run_id).status == "running"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="psutil's Linux boot time is stepped")
def test_identities_stored_by_an_older_workbench_survive_a_step(live_run, monkeypatch):
    """Workspaces written before the fix hold psutil's epoch create_time (registry and
    process.json): after a step their start no longer matches, and the run folder in the
    runner's command line / working folder confirms it is the runner."""
    first, run_id = live_run
    record = first.registry.get(run_id)
    folder = first.registry.run_dir(run_id)
    epoch_start = psutil.Process(record.pid).create_time()
    with sqlite3.connect(first.registry.db_path) as conn:
        conn.execute("UPDATE runs SET pid_started = ?, heartbeat_uptime = NULL WHERE run_id = ?",
                     (epoch_start, run_id))
    handle = json.loads((folder / PROCESS_FILE).read_text())
    handle["create_time"] = epoch_start
    del handle["started"]
    (folder / PROCESS_FILE).write_text(json.dumps(handle))
    for step in (-1.0, 1.0):  # the old heartbeat is on the wall clock: only small steps are safe
        with monkeypatch.context() as patch:
            step_wall_clock(patch, step)
            assert same_process(record.pid, epoch_start) is None  # the time alone cannot tell
            second = LocalLauncher(first.root, gpus=[])
            assert second.reap_lost() == []
            assert RunProcess.load(folder).alive()  # cancel may still signal its group
    # An unrelated live process under the run's pid (reused) is still told apart: it does not
    # name the run folder.
    stranger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        with sqlite3.connect(first.registry.db_path) as conn:
            conn.execute("UPDATE runs SET pid = ? WHERE run_id = ?", (stranger.pid, run_id))
        stale = first.registry.get(run_id)
        second = LocalLauncher(first.root, gpus=[])
        from estimator_workbench.execution.liveness import runner_liveness

        verdict = runner_liveness(stale, None, folder)
        assert not verdict.alive and verdict.why == (
            f"pid {stranger.pid} is another process: its start differs from the recorded {epoch_start} "
            f"and it does not name the run folder {folder}")
        assert second.reap_lost() == [run_id]
        assert stranger.poll() is None  # not ours: never killed
        assert first.registry.get(run_id).error == f"lost: runner process is gone ({verdict.why})"
    finally:
        stranger.kill()
        stranger.wait()


def test_a_lost_verdict_says_which_check_and_what_it_saw(workspace):
    registry = RunRegistry(workspace)
    gone_run, reused_run = stub_run(workspace), stub_run(workspace)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    registry.set_status(gone_run, "running", pid=dead.pid)
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        registry.set_status(reused_run, "running", pid=sleeper.pid)
        started = process_start_time(sleeper.pid)
        with sqlite3.connect(registry.db_path) as conn:  # the runner started 1 s before this process
            conn.execute("UPDATE runs SET pid_started = ? WHERE run_id = ?", (started - 1.0, reused_run))
        assert sorted(LocalLauncher(workspace, gpus=[]).reap_lost()) == sorted([gone_run, reused_run])
        assert registry.get(gone_run).error == f"lost: runner process is gone (pid {dead.pid} no longer exists)"
        assert registry.get(reused_run).error == (
            f"lost: runner process is gone (pid {sleeper.pid} is another process: it started {started} s "
            f"after boot, the runner at {started - 1.0} s)")
        assert sleeper.poll() is None
    finally:
        sleeper.kill()
        sleeper.wait()


def test_cancel_ends_a_lost_run_whose_runner_still_lives(live_run):
    """A run marked lost by mistake (an older workbench's verdict after a clock step) kept
    training; cancel refused it ("only a running or queued run can be cancelled")."""
    first, run_id = live_run
    pid = first.registry.get(run_id).pid
    first.registry.set_status(run_id, "lost", error="lost: runner process is gone")
    second = LocalLauncher(first.root, gpus=[])
    with pytest.raises(ValueError, match=r"previous runner \(pid \d+, attempt 1\) is still alive"):
        second.resume(run_id, wait=0.0)
    record = second.cancel(run_id, grace=2.0)
    assert record.status == "cancelled"
    wait_for(lambda: not pid_alive(pid))
