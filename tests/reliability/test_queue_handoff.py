"""Whoever ends a run's slot starts the next queued run (issue 24, item 5).

Before: after a cancel or a runner crash, with no UI open, the next queued run stayed ``queued``
for 126-240 s and started only when another ``run`` was submitted.
"""

from __future__ import annotations

import functools
import os
import signal
from pathlib import Path

import polling
import pytest
from stub_runs import stub_run_args

from estimator_workbench.cli import commands as cli
from estimator_workbench.execution.launcher import LocalLauncher
from estimator_workbench.execution.processes import pid_alive
from estimator_workbench.store.registry import RunRegistry

HERE = Path(__file__).resolve().parents[1] / "estimator_workbench"  # stub_runner.py
wait_for = functools.partial(polling.wait_for, timeout=60.0)
STARTS_WITHIN_S = 10.0  # "within seconds" on a loaded 2-core machine


def stub_run(workspace: Path, **schedule) -> str:
    return RunRegistry(workspace).create_run(
        name="stub", action="train", dataset={"name": "none"}, template={"name": "stub", "code": ""},
        run_config={}, **stub_run_args(schedule)).run_id


@pytest.fixture
def launchers(monkeypatch):
    """Every launcher the test or the CLI makes (stub runner); all shut down at the end."""
    made: list[LocalLauncher] = []

    def make(root, warm_spare=False):
        launcher = LocalLauncher(root, gpus=[], runner_module="stub_runner", env={"PYTHONPATH": str(HERE)})
        made.append(launcher)
        return launcher

    monkeypatch.setattr(cli, "_launcher", make)
    yield make
    for launcher in made:
        launcher.shutdown(grace=1.0)
    for run in RunRegistry(made[0].root).list_runs("running") if made else []:
        if run.pid and pid_alive(run.pid):  # started by a detached starter: no launcher owns it
            os.killpg(run.pid, signal.SIGKILL)


def queued_behind_a_running_run(workspace: Path, make) -> tuple[str, str]:
    """A long run started by a launcher that then goes away (a `run --detach`), one queued behind."""
    first, second = stub_run(workspace, max_steps=100_000, sleep=0.02), stub_run(workspace, max_steps=100_000, sleep=0.02)
    submitter = make(workspace)
    submitter.submit(first)
    submitter.submit(second)
    wait_for(lambda: (submitter.registry.run_dir(first) / "metrics.jsonl").exists())
    assert submitter.registry.get(second).status == "queued"
    submitter._procs.clear()  # it exits: nothing of it polls or reaps any more
    return first, second


def test_cancel_with_no_ui_starts_the_queued_run(workspace, launchers):
    first, second = queued_behind_a_running_run(workspace, launchers)
    assert cli.main(["cancel", first, "--grace", "2"]) == 0
    registry = RunRegistry(workspace)
    assert registry.get(first).status == "cancelled"
    # No UI, no other command: the cancel itself handed the slot on.
    wait_for(lambda: registry.get(second).status == "running", timeout=STARTS_WITHIN_S)


def test_the_reaper_that_marks_a_crashed_runner_lost_starts_the_queued_run(workspace, launchers):
    first, second = queued_behind_a_running_run(workspace, launchers)
    registry = RunRegistry(workspace)
    pid = registry.get(first).pid
    os.killpg(pid, signal.SIGKILL)  # the runner crashes: it cannot hand the queue on itself
    wait_for(lambda: not pid_alive(pid))
    assert launchers(workspace).reap_lost() == [first]  # e.g. `estimator-workbench runs`
    assert registry.get(first).status == "lost"
    wait_for(lambda: registry.get(second).status == "running", timeout=STARTS_WITHIN_S)
