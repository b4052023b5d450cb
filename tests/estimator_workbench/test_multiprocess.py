"""Multi-process (torchrun) runs from the workbench: the CLI and the UI's launch path, and that
Stop / Cancel reach every rank.

The CLI and UI tests train the bundled ``mlp_classifier`` on iris with the real engine under
``torch.distributed.run`` (2 CPU processes, gloo); the stop/cancel tests use a small rank-aware
stub runner written into ``tmp_path`` (each rank records its pid), so they train nothing.
"""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import polling
import pytest
from stub_runs import stub_run_args

from estimator_workbench.cli import commands as cli
from estimator_workbench.execution import runner
from estimator_workbench.execution.launcher import LocalLauncher
from estimator_workbench.execution.processes import RUN_MARKER_ENV, pid_alive
from estimator_workbench.store.registry import RunRegistry

pytestmark = pytest.mark.slow

RANK_STUB = '''
import os, signal, sys, time
from estimator_workbench.execution import runner

def execute(ctx):
    (ctx.run_dir / f"rank{os.environ.get('RANK', '0')}.pid").write_text(str(os.getpid()))
    if ctx.spec.params.get("ignore_sigterm"):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    for _ in range(ctx.schedule.train_until or 100):
        if ctx.stop_requested():
            (ctx.run_dir / f"rank{os.environ.get('RANK', '0')}.stopped").write_text("1")
            break
        time.sleep(0.05)

if __name__ == "__main__":
    sys.exit(runner.run(sys.argv[1], execute=execute))
'''


wait_for = functools.partial(polling.wait_for, timeout=120.0)


@pytest.fixture
def rank_launcher(workspace, tmp_path):
    stub_dir = tmp_path / "stub"
    stub_dir.mkdir()
    (stub_dir / "rank_stub.py").write_text(RANK_STUB)
    launcher = LocalLauncher(workspace, gpus=[], runner_module="rank_stub",
                             env={"PYTHONPATH": str(stub_dir)})
    pids: list[int] = []
    yield launcher, pids
    launcher.shutdown(grace=1.0)
    for pid in pids:  # never leave an orphaned rank behind, whatever the test found
        if pid_alive(pid):
            os.kill(pid, signal.SIGKILL)


def _start_two_ranks(workspace, launcher, pids, **schedule):
    run_id = RunRegistry(workspace).create_run(
        name="ranks", action="train", dataset={}, template={}, run_config={},
        **stub_run_args({"max_steps": 100000, **schedule}), num_processes=2).run_id
    launcher.submit(run_id)
    folder = Path(workspace) / "runs" / run_id
    wait_for(lambda: all((folder / f"rank{r}.pid").exists() for r in (0, 1)))
    time.sleep(0.2)  # the pid files are written before the rank's loop starts
    pids.extend(int((folder / f"rank{r}.pid").read_text()) for r in (0, 1))
    return run_id, folder


def test_stop_file_is_honoured_by_every_rank(workspace, rank_launcher):
    launcher, pids = rank_launcher
    run_id, folder = _start_two_ranks(workspace, launcher, pids)
    launcher.stop(run_id)
    done = launcher.wait(run_id, timeout=60)
    assert done.status == "stopped"
    assert (folder / "rank0.stopped").exists() and (folder / "rank1.stopped").exists()
    assert not any(pid_alive(p) for p in pids)


def test_cancel_terminates_every_rank(workspace, rank_launcher):
    launcher, pids = rank_launcher
    run_id, _ = _start_two_ranks(workspace, launcher, pids)
    assert launcher.cancel(run_id, grace=10, wait=True).status == "cancelled"
    wait_for(lambda: not any(pid_alive(p) for p in pids), timeout=10)


def test_cancel_sigkill_escalation_reaches_every_rank(workspace, rank_launcher):
    """torchrun starts each rank in a session of its own: the escalation must reach them too."""
    launcher, pids = rank_launcher
    run_id, _ = _start_two_ranks(workspace, launcher, pids, ignore_sigterm=True)
    assert launcher.cancel(run_id, grace=1.0, wait=True).status == "cancelled"
    wait_for(lambda: not any(pid_alive(p) for p in pids), timeout=10)


# A fake torchrun agent: starts one "rank" in a session of its own with torchrun's variables set;
# the rank ignores SIGTERM and arms the death signal as the runner does.
FAKE_RANK = """
import signal, sys, time
from estimator_workbench.execution.runner import die_with_torchrun_agent
signal.signal(signal.SIGTERM, signal.SIG_IGN)
armed = die_with_torchrun_agent()
open(sys.argv[1], "w").write(str(armed))
time.sleep(60)
"""
FAKE_AGENT = """
import os, subprocess, sys, time
env = dict(os.environ, LOCAL_RANK="0", WORLD_SIZE="1")
child = subprocess.Popen([sys.executable, "-c", sys.argv[3], sys.argv[1]], env=env,
                         start_new_session=True)
open(sys.argv[2], "w").write(str(child.pid))
time.sleep(60)
"""


def test_rank_dies_with_its_torchrun_agent(tmp_path):
    """A rank (own session, SIGTERM ignored) whose agent is SIGKILLed is killed by the kernel
    (PR_SET_PDEATHSIG), whoever killed the agent."""
    armed_file, pid_file = tmp_path / "armed", tmp_path / "rank.pid"
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    env[RUN_MARKER_ENV] = "fake-run:0001"  # as a launcher gives it: how the rank knows its agent
    agent = subprocess.Popen(
        [sys.executable, "-c", FAKE_AGENT, str(armed_file), str(pid_file), FAKE_RANK],
        env=env, start_new_session=True)
    rank = None
    try:
        wait_for(lambda: armed_file.exists() and armed_file.read_text(), timeout=60)
        rank = int(pid_file.read_text())
        assert armed_file.read_text() == "True" and pid_alive(rank)
        agent.kill()
        agent.wait(timeout=10)
        wait_for(lambda: not pid_alive(rank), timeout=10)
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.wait(timeout=10)
        if rank is not None and pid_alive(rank):
            os.kill(rank, signal.SIGKILL)


def test_death_signal_only_under_torchrun(monkeypatch):
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert runner.die_with_torchrun_agent() is False


def test_two_process_run_from_the_cli(workspace, monkeypatch, capsys):
    made = []

    def make(root, warm_spare=False):
        launcher = LocalLauncher(root, gpus=[], warm_spares=int(warm_spare))
        made.append(launcher)
        return launcher

    monkeypatch.setattr(cli, "_launcher", make)
    try:
        code = cli.main(["run", "--dataset", "iris", "--template", "mlp_classifier", "--steps", "20",
                         "--num-processes", "2", "--no-preflight", "--action", "train"])
    finally:
        for launcher in made:
            launcher.shutdown(grace=1.0)
    err = capsys.readouterr().err
    (record,) = RunRegistry(workspace).list_runs()
    log = (Path(workspace) / "runs" / record.run_id / "worker.log").read_text()
    assert code == 0 and record.status == "succeeded", (err[-2000:], log[-3000:])
    assert record.num_processes == 2
    assert "torch.distributed.run" in log and log.count("started, pid") == 2
    assert record.summary["train/loss"]["last_step"] == 20


def test_two_process_run_from_the_ui_launch_path(workspace, monkeypatch):
    pytest.importorskip("streamlit")
    from estimator_workbench import templates
    from estimator_workbench.ui import forms, session

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # the shared launcher: CPU only
    session._launcher.clear()
    code = templates.get_template("mlp_classifier").code
    dataset = cli._dataset_dict("iris", None)
    try:
        record = forms.launch_run(name="ddp from ui", action="train", dataset=dataset,
                               template={"name": "mlp_classifier", "code": code}, params={},
                               run_config={"tf_random_seed": 0}, schedule={"max_steps": 20},
                               num_processes=2)
        launcher = session.get_launcher()
        done = launcher.wait(record.run_id, timeout=300)
    finally:
        session.get_launcher().shutdown(grace=1.0)
        session._launcher.clear()
    log = (Path(workspace) / "runs" / record.run_id / "worker.log").read_text()
    assert done.status == "succeeded", log[-3000:]
    assert "--nproc-per-node 2" in log and log.count("started, pid") == 2
