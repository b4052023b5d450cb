"""Failures the runner reports itself (issue 14, item 8, last sentences): a KeyboardInterrupt raised
by user code, ``os._exit`` in user code, and a run that comes back from ``lost``."""

from __future__ import annotations

import re

import pytest

from estimator_workbench.execution import runner
from estimator_workbench.store.registry import RunRegistry


def new_run(workspace, **schedule):
    return RunRegistry(workspace).create_run(
        name="t", action="train", dataset={"name": "none"}, template={"name": "t", "code": ""},
        params={}, run_config={}, schedule=schedule)


def run_in_process(workspace, execute):
    rec = new_run(workspace)
    code = runner.run(RunRegistry(workspace).run_dir(rec.run_id), execute=execute,
                      install_signal_handlers=False)
    return code, RunRegistry(workspace).get(rec.run_id)


def test_keyboard_interrupt_raised_by_user_code_fails_the_run(workspace):
    namespace: dict = {}
    exec(compile("def model_fn(features):\n    raise KeyboardInterrupt\n", "<template demo>", "exec"), namespace)

    def execute(ctx):
        namespace["model_fn"](None)

    code, record = run_in_process(workspace, execute)
    assert code == 1 and record.status == "failed"
    assert record.error == ("KeyboardInterrupt in user code (<template demo>, line 2, in model_fn): a "
                            "KeyboardInterrupt raised by the run's code fails the run (Stop or Cancel "
                            "end a run on purpose).")
    assert "user code only" in record.traceback


def test_sigterm_is_still_a_cancel(workspace):
    def execute(ctx):
        ctx.terminate.set()  # what the SIGTERM handler does
        raise RuntimeError("interrupted while stopping")

    code, record = run_in_process(workspace, execute)
    assert code == 0 and record.status == "cancelled"


EXIT_RUNNER = '''\
import os
import sys

from estimator_workbench.execution import runner


def execute(ctx):
    print("about to leave: reason=quota exceeded", flush=True)
    os._exit(7)


if __name__ == "__main__":
    sys.exit(runner.run(sys.argv[1], execute=execute))
'''


@pytest.mark.slow
def test_os_exit_in_user_code_leaves_its_reason_in_the_log_and_the_error(workspace, source_runner_launcher):
    launcher = source_runner_launcher("exit_runner", EXIT_RUNNER)
    run_id = new_run(workspace).run_id
    launcher.submit(run_id)
    done = launcher.wait(run_id, timeout=60)
    assert done.status == "failed", (done.status, done.error)
    assert re.fullmatch(r"runner exited with code 7 without reporting: os\._exit\(7\) was called "
                        r"\(exit_runner\.py, line 9, in execute\); last log lines: .*"
                        r"about to leave: reason=quota exceeded", done.error), done.error
    log = (launcher.registry.run_dir(run_id) / "worker.log").read_text()
    assert "estimator_workbench.execution.runner: os._exit(7) called (exit_runner.py, line 9, in execute)" in log
    assert 'exit_runner.py", line 9, in execute' in log  # the stack


def test_a_run_that_recovers_from_lost_keeps_no_stale_error(workspace):
    def execute(ctx):
        # The reaper judged the runner lost (a long pause), but it was alive and finishes.
        RunRegistry(workspace).set_status(ctx.run_id, "lost", error="lost: no heartbeat for 61s",
                                          expected="running")

    code, record = run_in_process(workspace, execute)
    assert code == 0
    assert (record.status, record.error, record.traceback) == ("succeeded", None, None)


def test_a_run_that_recovers_from_lost_and_fails_shows_its_own_error(workspace):
    def execute(ctx):
        RunRegistry(workspace).set_status(ctx.run_id, "lost", error="lost: no heartbeat for 61s")
        raise ValueError("bad batch")

    code, record = run_in_process(workspace, execute)
    assert code == 1 and record.status == "failed"
    assert record.error.startswith("ValueError: bad batch") and "lost" not in record.error
