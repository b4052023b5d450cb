"""The pre-flight check cannot outlive its timeout (issue 14 item 6, second half).

A template that ignores SIGALRM defeats the in-process timer of the runner's pre-flight check; the
watchdog process kills the runner from outside and the run fails with the timeout message.
"""

from __future__ import annotations

import json
from pathlib import Path

import polling
import psutil
import pytest

from estimator_workbench.execution import preflight_watchdog
from estimator_workbench.execution.launcher import LocalLauncher
from estimator_workbench.execution.processes import RUN_MARKER_ENV, pid_alive
from estimator_workbench.store.registry import RunRegistry

# Ignores the timer at import, then loops in C (time.sleep): neither SIGALRM nor an exception
# raised between bytecodes could end it.
IGNORES_SIGALRM = """
import signal, time
signal.signal(signal.SIGALRM, signal.SIG_IGN)
while True:
    time.sleep(0.05)
"""


@pytest.mark.slow
def test_template_ignoring_sigalrm_is_killed_at_the_preflight_timeout(workspace):
    from estimator_workbench.cli import commands as cli

    registry = RunRegistry(workspace)
    run_id = registry.create_run(
        name="ignores the timer", action="train", dataset=cli._dataset_dict("iris", None),
        template={"name": "stubborn", "code": IGNORES_SIGALRM}, params={}, run_config={},
        schedule={"max_steps": 5, "preflight": True, "preflight_timeout": 2}).run_id
    launcher = LocalLauncher(workspace, gpus=[])
    try:
        record = launcher.submit(run_id)
        runner_pid = record.pid
        done = launcher.wait(run_id, timeout=240)
        log = (registry.run_dir(run_id) / "worker.log").read_text()
        assert done.status == "failed", (done.status, done.error, log[-2000:])
        assert done.error.startswith("Pre-flight check failed in import: TimeoutError: timed out "
                                     "after 2 s (in import);")
        assert done.error.endswith("The check ignored its timer (SIGALRM) and was killed from outside.")
        report = json.loads((registry.run_dir(run_id) / "preflight.json").read_text())
        assert report["ok"] is False and report["error"]["type"] == "TimeoutError"
        polling.wait_for(lambda: not pid_alive(runner_pid), timeout=30)
    finally:
        launcher.shutdown(grace=1.0)


def test_no_watchdog_outside_a_run_process(tmp_path, monkeypatch):
    """The watchdog kills the process it watches: never in the UI or a test calling the check."""
    monkeypatch.delenv(RUN_MARKER_ENV, raising=False)
    assert preflight_watchdog.start_watchdog(1.0, tmp_path / "preflight.json") is None
    monkeypatch.setenv(RUN_MARKER_ENV, "r-1:00")
    assert preflight_watchdog.start_watchdog(1.0, None) is None


def test_watchdog_ends_when_the_check_ends(tmp_path, monkeypatch):
    """Known answer: a watchdog whose stdin closes before the deadline exits 0 and kills nothing."""
    monkeypatch.setenv(RUN_MARKER_ENV, "r-1:00")
    watchdog = preflight_watchdog.start_watchdog(30.0, tmp_path / "preflight.json")
    assert watchdog is not None and psutil.Process(watchdog.pid).is_running()
    preflight_watchdog.stop_watchdog(watchdog)
    assert watchdog.returncode == 0
    assert not Path(tmp_path / "preflight.json").exists()
