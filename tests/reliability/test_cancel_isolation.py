"""Cancel kills exactly its run, and every process a run leaves behind ends with it (issue 14
item 5, issue 17 item 4).

Runner modules are written into ``tmp_path``: the real ``estimator_workbench.execution.runner`` lifecycle
around small actions (no engine), so each test spawns real processes but trains nothing. The
process trees are read with psutil.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import polling
import psutil
import pytest
from stub_runs import stub_run_args

from estimator_workbench.execution.launcher import QUEUE_HANDOFF_ENV, LocalLauncher
from estimator_workbench.execution.processes import (
    PROCESS_FILE,
    RUN_MARKER_ENV,
    RunProcess,
    marked_processes,
    pid_alive,
)
from estimator_workbench.store.registry import RunRegistry

pytestmark = pytest.mark.slow

wait_for = functools.partial(polling.wait_for, timeout=60.0)


# The run's action: writes its pid, optionally starts a helper that ignores SIGTERM in a session of
# its own (``setsid``; ``daemon``: through an intermediate that exits at once, so the helper is an
# orphan), optionally ignores SIGTERM itself or keeps the process alive after the run with a
# non-daemon thread, then steps until stopped (or ``max_steps``).
RUNNER = '''
import os, signal, subprocess, sys, threading, time
from estimator_workbench.execution import runner

HELPER = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(120)"
DAEMONIZE = ("import subprocess, sys; p = subprocess.Popen([sys.executable, '-c', sys.argv[1]], "
             "start_new_session=True); open(sys.argv[2], 'w').write(str(p.pid))")

def execute(ctx):
    (ctx.run_dir / "runner.pid").write_text(str(os.getpid()))
    knobs = ctx.spec.params
    helper = knobs.get("helper")
    if helper == "setsid":
        p = subprocess.Popen([sys.executable, "-c", HELPER], start_new_session=True)
        (ctx.run_dir / "helper.pid").write_text(str(p.pid))
    elif helper == "daemon":
        subprocess.run([sys.executable, "-c", DAEMONIZE, HELPER, str(ctx.run_dir / "helper.pid")],
                       check=True)
    if knobs.get("ignore_sigterm"):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if knobs.get("linger"):  # keeps the process alive after the run has ended
        threading.Thread(target=time.sleep, args=(knobs["linger"],)).start()
    (ctx.run_dir / "ready").write_text("1")
    for _ in range(ctx.schedule.train_until or 100000):
        if ctx.stop_requested():
            break
        time.sleep(0.02)

if __name__ == "__main__":
    sys.exit(runner.run(sys.argv[1], execute=execute))
'''


@pytest.fixture
def make(workspace, tmp_path):
    """``make(**kwargs)``: a CPU launcher of the runner above (shut down after the test)."""
    folder = tmp_path / "runner_modules"
    folder.mkdir()
    (folder / "isolation_runner.py").write_text(RUNNER)
    made = []

    def make_launcher(handoff: bool = False, **kwargs) -> LocalLauncher:
        env = {"PYTHONPATH": str(folder)}
        if handoff:  # as the real runner gets it: hand the queue on when it ends
            env[QUEUE_HANDOFF_ENV] = "1"
        launcher = LocalLauncher(workspace, gpus=[], runner_module="isolation_runner", env=env,
                                 **kwargs)
        made.append(launcher)
        return launcher

    yield make_launcher
    for launcher in made:
        launcher.shutdown(grace=1.0)
    # Runs started by a detached starter are no child of this process: end them too.
    registry = RunRegistry(workspace)
    for record in registry.list_runs(["running"]):
        handle = RunProcess.load(registry.run_dir(record.run_id))
        if handle is not None:
            handle.signal_group(signal.SIGKILL)
            for proc in marked_processes(handle.marker):
                proc.kill()


def new_run(workspace, num_processes=1, **schedule):
    return RunRegistry(workspace).create_run(
        name="iso", action="train", dataset={"name": "none"}, template={"name": "iso", "code": ""},
        run_config={}, **stub_run_args(schedule), num_processes=num_processes).run_id


def run_file(workspace, run_id, name):
    path = Path(workspace) / "runs" / run_id / name
    return wait_for(lambda: path.exists() and path.read_text() and path.read_text())


def test_cancel_never_kills_the_run_queued_behind(workspace, make):
    """The old failure, made certain: the cancelled runner lingers past the grace period (a
    non-daemon thread), so the SIGKILL escalation comes while the run queued behind it is being
    started. Five times over, the queued run survives and runs to success."""
    launcher = make(handoff=True, max_concurrent=1)
    tried = survived = 0
    for _ in range(5):
        first = new_run(workspace, linger=3)
        queued = new_run(workspace, max_steps=10)
        launcher.submit(first)
        assert launcher.submit(queued).status == "queued"
        run_file(workspace, first, "ready")
        launcher.cancel(first, grace=1.0, wait=True)
        tried += 1
        assert launcher.registry.get(first).status == "cancelled"
        # The queue moves on: through this launcher's poll, or the runner's starter.
        wait_for(lambda q=queued: launcher.poll() is not None
                 and launcher.registry.get(q).status != "queued")
        done = launcher.wait(queued, timeout=60)
        assert done.status == "succeeded", (done.status, done.error)
        survived += 1
    assert (tried, survived) == (5, 5)


def test_a_finished_runner_hands_the_queue_to_a_starter_outside_its_tree(workspace, make):
    """No launcher polls (``run --detach``): the runner's detached starter starts the next run,
    which is no descendant of the runner."""
    launcher = make(handoff=True, max_concurrent=1)
    first, queued = new_run(workspace, max_steps=5), new_run(workspace, max_steps=5)
    launcher.submit(first)
    launcher.submit(queued)
    runner_pid = int(run_file(workspace, first, "runner.pid"))
    pid = int(run_file(workspace, queued, "runner.pid"))  # started without any poll of ours
    with contextlib.suppress(psutil.NoSuchProcess):  # (it may have finished already)
        ancestors = {p.pid for p in psutil.Process(pid).parents()}
        assert runner_pid not in ancestors and os.getpid() not in ancestors
    wait_for(lambda: RunRegistry(workspace).get(queued).status == "succeeded")
    wait_for(lambda: not pid_alive(pid))
    assert launcher.wait(first, timeout=30).status == "succeeded"


@pytest.mark.parametrize("helper", ["setsid", "daemon"])
@pytest.mark.parametrize("outcome", ["succeeded", "cancel-sigterm", "cancel-sigkill"])
def test_user_code_children_end_with_the_run(workspace, make, helper, outcome):
    """A helper started by user code in a session of its own (or double-forked away, an orphan),
    ignoring SIGTERM, is gone when the run ends: after success, after a cancel the runner honours,
    and after a cancel that needs SIGKILL."""
    launcher = make()
    steps = 10 if outcome == "succeeded" else 100000
    run_id = new_run(workspace, helper=helper, max_steps=steps,
                     ignore_sigterm=outcome == "cancel-sigkill")
    launcher.submit(run_id)
    helper_pid = int(run_file(workspace, run_id, "helper.pid"))
    runner_pid = int(run_file(workspace, run_id, "runner.pid"))
    try:
        assert pid_alive(helper_pid)
        proc = psutil.Process(helper_pid)
        assert proc.environ()[RUN_MARKER_ENV] == RunProcess.load(
            Path(workspace) / "runs" / run_id).marker
        assert os.getsid(helper_pid) != os.getsid(runner_pid)
        if helper == "daemon" and sys.platform.startswith("linux"):
            # Known answer: the orphan re-parented to the runner (a child subreaper), not to init.
            wait_for(lambda: proc.ppid() == runner_pid, timeout=10)
        if outcome == "succeeded":
            assert launcher.wait(run_id, timeout=60).status == "succeeded"
        else:
            launcher.cancel(run_id, grace=0.5, wait=True)
            assert launcher.registry.get(run_id).status == "cancelled"
        wait_for(lambda: not pid_alive(helper_pid), timeout=10)
    finally:
        if pid_alive(helper_pid):
            os.kill(helper_pid, signal.SIGKILL)


def test_cancel_returns_at_once_and_holds_no_lock(workspace, make):
    """A run that ignores SIGTERM: cancel returns in well under 0.5 s, the launcher answers other
    calls meanwhile, and the SIGKILL comes after the grace period, in the background."""
    launcher = make()
    run_id = new_run(workspace, ignore_sigterm=True)
    launcher.submit(run_id)
    runner_pid = int(run_file(workspace, run_id, "runner.pid"))
    run_file(workspace, run_id, "ready")
    start = time.monotonic()
    record = launcher.cancel(run_id, grace=3.0, wait=False)  # as the UI calls it
    took = time.monotonic() - start
    assert took < 0.5, f"cancel took {took:.3f} s"
    assert record.status == "running" and pid_alive(runner_pid)  # SIGTERM ignored: winding down
    start = time.monotonic()
    launcher.poll()
    launcher.cancel(run_id, wait=False)  # again: nothing more
    assert time.monotonic() - start < 0.5
    done = launcher.wait(run_id, timeout=30)
    assert done.status == "cancelled" and done.error == "cancelled by the user"
    assert time.monotonic() - start >= 2.5  # the SIGKILL waited for the grace period
    assert not pid_alive(runner_pid)


RANK_RUNNER = '''
import os, signal, sys, time
from estimator_workbench.execution import runner

def execute(ctx):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    (ctx.run_dir / f"rank{os.environ.get('RANK', '0')}.pid").write_text(str(os.getpid()))
    while True:
        time.sleep(0.05)

if __name__ == "__main__":
    sys.exit(runner.run(sys.argv[1], execute=execute))
'''


def test_two_rank_run_tree_and_cancel(workspace, tmp_path):
    """torchrun's agent and its 2 ranks (each in a session of its own, SIGTERM ignored) form the
    run's process tree; a cancel leaves none of them, nor anything with the run's marker."""
    folder = tmp_path / "rank_modules"
    folder.mkdir()
    (folder / "rank_runner.py").write_text(RANK_RUNNER)
    launcher = LocalLauncher(workspace, gpus=[], runner_module="rank_runner",
                             env={"PYTHONPATH": str(folder)})
    tree: list[psutil.Process] = []
    try:
        run_id = new_run(workspace, num_processes=2)
        launcher.submit(run_id)
        ranks = {int(run_file(workspace, run_id, f"rank{r}.pid")) for r in (0, 1)}
        handle = RunProcess.load(Path(workspace) / "runs" / run_id)
        assert handle is not None and (Path(workspace) / "runs" / run_id / PROCESS_FILE).exists()
        agent = psutil.Process(handle.pid)
        tree = [agent, *agent.children(recursive=True)]
        assert "torch.distributed.run" in " ".join(agent.cmdline())
        assert ranks <= {p.pid for p in agent.children()}  # agent + its 2 ranks
        assert {p.pid for p in marked_processes(handle.marker)} >= ranks | {agent.pid}
        start = time.monotonic()
        launcher.cancel(run_id, grace=1.0, wait=False)
        assert time.monotonic() - start < 0.5
        assert launcher.wait(run_id, timeout=60).status == "cancelled"
        wait_for(lambda: not any(pid_alive(p.pid) for p in tree), timeout=15)
        assert marked_processes(handle.marker) == []
    finally:
        launcher.shutdown(grace=1.0)
        for proc in tree:
            if pid_alive(proc.pid):
                proc.kill()


AGENT = """
import subprocess, sys, time
rank = subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[3]], start_new_session=True)
open(sys.argv[2], "w").write(str(rank.pid))
time.sleep(60)
"""
RANK = """
import sys, time
from estimator_workbench.execution.processes import die_with_torchrun_agent
armed = die_with_torchrun_agent()
open(sys.argv[1], "w").write(str(armed))
time.sleep(60)
"""


def test_rank_whose_parent_is_not_its_agent_ends_itself(tmp_path):
    """A rank whose agent died during its start-up has been re-parented (init, a subreaper): its
    parent no longer carries the run's marker, so it ends itself instead of arming a death
    signal that would never come. Under its agent (same marker) it arms the signal and dies
    with the agent."""
    env = dict(os.environ, LOCAL_RANK="0", WORLD_SIZE="1",
               PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    env[RUN_MARKER_ENV] = "test-run:0001"  # this test process (the "parent") carries none
    orphan = subprocess.run([sys.executable, "-c", RANK, str(tmp_path / "orphan")], env=env,
                            timeout=60, check=False)
    assert orphan.returncode == -signal.SIGKILL and not (tmp_path / "orphan").exists()

    pid_file, armed = tmp_path / "rank.pid", tmp_path / "armed"
    agent = subprocess.Popen([sys.executable, "-c", AGENT, RANK, str(pid_file), str(armed)],
                             env=env, start_new_session=True)
    rank = None
    try:
        assert wait_for(lambda: armed.exists() and armed.read_text()) == "True"
        rank = int(pid_file.read_text())
        assert pid_alive(rank)
        agent.kill()
        agent.wait(timeout=10)
        wait_for(lambda: not pid_alive(rank), timeout=10)
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.wait(timeout=10)
        if rank is not None and pid_alive(rank):
            os.kill(rank, signal.SIGKILL)
