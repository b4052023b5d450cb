"""Kill the UI process while a run it launched is going, start a new one: the run keeps running
(its own session, not a child that dies with the UI), and the restarted UI shows it live, then
finished.

The "UI process" here launches through the UI's own code path (``estimator_workbench.ui.launch_run`` ->
the shared ``LocalLauncher``) and is then SIGKILLed; a real Streamlit server is started after it
(HTTP health check) and the pages are rendered with AppTest against the same workspace.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from polling import wait_for

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest

from estimator_workbench.execution.processes import pid_alive
from estimator_workbench.store.registry import RunRegistry

REPO = Path(__file__).resolve().parents[2]
STUB_DIR = REPO / "tests" / "estimator_workbench"

UI_PROCESS = r"""
import sys, time
from estimator_workbench.ui import forms
code = 'PARAMS = {"sleep": {"type": "float", "default": 0.02}}\ndef model_fn(features): ...\n'
record = forms.launch_run(name="survivor", action="train", dataset={"ref": {"kind": "bundled", "name": "iris"}},
                       template={"name": "t", "code": code}, params={"sleep": 0.04}, run_config={},
                       schedule={"max_steps": 150})  # sleep: the stub runner's knob (tests/stub_runs.py)
print(record.run_id, flush=True)
time.sleep(600)
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]




@pytest.fixture
def env(workspace, monkeypatch):
    monkeypatch.setenv("WORKBENCH_RUNNER_MODULE", "stub_runner")
    monkeypatch.setenv("WORKBENCH_RUNNER_PYTHONPATH", str(STUB_DIR))
    return dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")


@pytest.mark.slow
def test_runs_survive_a_ui_kill_and_the_restarted_ui_shows_them(workspace, env):
    ui_proc = subprocess.Popen([sys.executable, "-c", UI_PROCESS], cwd=REPO, env=env, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    runner_pid = None
    server = None
    try:
        run_id = ui_proc.stdout.readline().strip()
        reg = RunRegistry(workspace)
        record = wait_for(lambda: (r := reg.get(run_id)).status == "running" and r.pid and r)
        runner_pid = record.pid
        metrics = reg.run_dir(run_id) / "metrics.jsonl"
        wait_for(lambda: metrics.exists() and metrics.stat().st_size > 0)

        ui_proc.send_signal(signal.SIGKILL)  # the UI dies (crash, OOM killer, closed terminal)
        ui_proc.wait(timeout=10)
        size_at_kill = metrics.stat().st_size
        time.sleep(0.5)
        assert pid_alive(runner_pid), "the runner died with the UI"
        assert metrics.stat().st_size > size_at_kill  # still training
        assert reg.get(run_id).status == "running"

        # The restarted UI: a real server comes up on the same workspace...
        port = free_port()
        server = subprocess.Popen([sys.executable, "-m", "estimator_workbench", "--workspace", str(workspace),
                                   "ui", "--port", str(port)], cwd=REPO, env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                  start_new_session=True)

        def healthy():
            with contextlib.suppress(OSError):
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as r:
                    return r.read().strip() == b"ok"
            return False

        wait_for(healthy, timeout=60, interval=0.2)
        # ... and its pages show the run, running, with its live metrics.
        at = AppTest.from_file(str(REPO / "estimator_workbench" / "ui" / "app.py"), default_timeout=60)
        at.query_params["run"] = run_id
        at.run()
        at.switch_page("../../pages/run.py").run()
        assert not at.exception, at.exception
        assert pid_alive(runner_pid)
        assert f"survivor · {run_id}" in at.selectbox(key="run_picker").options
        progress = [p.proto.text for p in at.get("progress")]
        assert progress and progress[0].startswith("step ") and progress[0].endswith("/ 150")
        assert int(progress[0].split()[1]) > 0, progress  # the live metrics reached the page
        assert reg.get(run_id).status == "running"  # the new UI's poll did not mark it lost

        done = wait_for(lambda: (r := reg.get(run_id)).is_finished and r, timeout=60)
        assert done.status == "succeeded", done.error
        assert done.summary["train/loss"]["last_step"] == 150  # nothing lost across the restart
        at.run()
        assert not at.exception, at.exception
        assert [p.proto.text for p in at.get("progress")] == ["step 150 / 150"]
    finally:
        if ui_proc.poll() is None:
            ui_proc.kill()
        ui_proc.communicate(timeout=10)
        if server is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=10)
        if runner_pid and pid_alive(runner_pid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(runner_pid, signal.SIGKILL)
