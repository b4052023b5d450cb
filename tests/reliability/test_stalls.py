"""Stuck runs are noticed (issue 14, item 6, first half): liveness from training progress, not only
from the heartbeat thread, and the launcher's own children are judged too."""

from __future__ import annotations

import functools
import os
import signal
import time
from pathlib import Path

import polling
import pytest
from stub_runs import stub_run_args

from estimator_workbench.cli import commands as cli
from estimator_workbench.execution.launcher import LocalLauncher
from estimator_workbench.execution.processes import pid_alive
from estimator_workbench.store.records import DEFAULT_STALL_TIMEOUT_S
from estimator_workbench.store.registry import RunRegistry

HERE = Path(__file__).resolve().parents[1] / "estimator_workbench"  # stub_runner.py
wait_for = functools.partial(polling.wait_for, timeout=60.0)


def stub_run(workspace, **schedule):
    return RunRegistry(workspace).create_run(
        name="stub", action="train", dataset={"name": "none"}, template={"name": "stub", "code": ""},
        run_config={}, **stub_run_args(schedule)).run_id


@pytest.mark.slow
def test_a_stopped_child_of_the_ui_launcher_is_marked_lost_and_frees_the_queue(workspace):
    """Under the UI's launcher a kill -STOPped runner stayed 'running' for good and blocked the queue."""
    launcher = LocalLauncher(workspace, gpus=[], runner_module="stub_runner", env={"PYTHONPATH": str(HERE)},
                             heartbeat_timeout=8.0)  # (a loaded 2-core machine lags a few s)
    try:
        first = stub_run(workspace, max_steps=5000, sleep=0.02)
        second = stub_run(workspace, max_steps=3, sleep=0.01)
        launcher.submit(first)
        launcher.submit(second)
        pid = launcher.registry.get(first).pid
        wait_for(lambda: (launcher.registry.run_dir(first) / "metrics.jsonl").exists())
        assert launcher.registry.get(second).status == "queued"
        os.kill(pid, signal.SIGSTOP)
        wait_for(lambda: launcher.poll() or launcher.registry.get(first).status == "lost")
        record = launcher.registry.get(first)
        assert record.status == "lost" and record.error.startswith("lost: no heartbeat for ")
        assert not pid_alive(pid)  # killed before it was marked lost (it cannot wake up and write)
        assert launcher.wait(second, timeout=60).status == "succeeded"  # the queue moved on
    finally:
        launcher.shutdown(grace=1.0)


def _template_code(inject: str) -> str:
    from estimator_workbench import templates

    code = templates.get_template("mlp_classifier").code
    anchor = "    train_op = ee.minimize("
    return code.replace(anchor, inject + anchor, 1)


@pytest.mark.slow
def test_an_endless_loop_in_model_fn_is_flagged_stalled_while_the_heartbeat_beats(workspace, capsys):
    loop = "    if ee.get_global_step() >= 20:\n        while True:\n            __import__('time').sleep(0.05)\n"
    registry = RunRegistry(workspace)
    rec = registry.create_run(
        name="loops", action="train", dataset=cli._dataset_dict("iris", None),
        template={"name": "mlp_classifier", "code": _template_code(loop)}, params={"hidden_units": "8"},
        run_config={"tf_random_seed": 0},
        schedule={"max_steps": 100, "metrics_every_n_steps": 1, "stall_timeout_s": 4, "stall_action": "fail"})
    launcher = LocalLauncher(workspace, gpus=[], heartbeat_timeout=60.0)
    try:
        launcher.submit(rec.run_id)
        wait_for(lambda: registry.get(rec.run_id).last_step == 20)  # progress comes with the heartbeat
        stalled = wait_for(lambda: (r := registry.get(rec.run_id)).display_status == "stalled" and r)
        # The heartbeat thread still beats: only the missing steps give the loop away.
        assert stalled.status == "running" and time.time() - stalled.heartbeat_at < 4.0
        assert stalled.last_step == 20
        pid = stalled.pid
        assert launcher.poll() == []
        failed = registry.get(rec.run_id)
        assert failed.status == "failed"
        assert failed.error.startswith("no training step for ")
        assert "s (stall_timeout_s = 4, stall_action 'fail'): the run was stopped." in failed.error
        wait_for(lambda: launcher.process(rec.run_id) is None or launcher.process(rec.run_id).poll() is not None,
                 timeout=10)
        assert not pid_alive(pid)
    finally:
        launcher.shutdown(grace=1.0)


def test_runs_shows_stalled_and_warn_leaves_the_run_running(workspace, capsys):
    registry = RunRegistry(workspace)
    run_id = stub_run(workspace, max_steps=100, stall_timeout_s=30)
    registry.set_status(run_id, "running", pid=os.getpid())
    registry.heartbeat(run_id, last_step=10, last_step_at=time.time() - 100)
    assert cli.main(["runs"]) == 0
    row = capsys.readouterr().out.splitlines()[1].split()
    assert row[0] == run_id and row[3] == "stalled"
    record = registry.get(run_id)
    assert (record.status, record.display_status, record.last_step) == ("running", "stalled", 10)
    assert 99 < record.stalled_for() < 120
    from estimator_workbench.ui.tables import runs_frame  # the UI's runs table shows it too

    assert runs_frame([record])["status"].tolist() == ["stalled"]


def test_stall_judgement():
    from estimator_workbench.store.records import RunRecord

    base = RunRecord(run_id="r", name="n", action="train", status="running", dataset={}, dataset_fingerprint=None,
                     template_name=None, template_code=None, params={}, run_config={}, schedule={},
                     parent_run_id=None, parent_relation=None, checkpoint_path=None, num_processes=1, pid=1,
                     heartbeat_at=0.0, created_at=0.0, started_at=1000.0, finished_at=None, error=None,
                     traceback=None, summary={}, tags=(), note="")
    assert DEFAULT_STALL_TIMEOUT_S == 600.0
    assert base.stalled_for(now=1000.0 + 599) is None  # before the first step: counted from the start
    assert base.stalled_for(now=1000.0 + 601) == 601
    assert base.replace(last_step_at=1500.0).stalled_for(now=1000.0 + 601) is None
    assert base.replace(schedule={"stall_timeout_s": 5}).stalled_for(now=1006.0) == 6
    assert base.replace(status="succeeded").stalled_for(now=5000.0) is None
    assert base.replace(action="predict").stalled_for(now=5000.0) is None  # predict reports no steps
    assert base.replace(schedule={"stall_action": "fail"}).stall_action == "fail"
    assert base.stall_action == "warn"
