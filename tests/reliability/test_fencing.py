"""One writer per run (issue 14, item 4): fencing tokens, killing what is left of a lost run, and
resume refused while the old runner lives.

The issue's reproduction: start a run, ``kill -STOP`` its runner, wait until the run shows
``lost``, resume it, ``kill -CONT`` the old runner. Before the fix both processes trained the run,
both recorded "succeeded", and the charts and checkpoints mixed two histories.
"""

from __future__ import annotations

import builtins
import functools
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import polling
import pytest

from estimator_engine import checkpoints
from estimator_workbench.cli import commands as cli
from estimator_workbench.execution import runner
from estimator_workbench.execution.launcher import LocalLauncher
from estimator_workbench.execution.processes import pid_alive
from estimator_workbench.store.metrics_store import read_all
from estimator_workbench.store.records import OwnershipLostError
from estimator_workbench.store.registry import RunRegistry

pytestmark = pytest.mark.slow

wait_for = functools.partial(polling.wait_for, timeout=90.0)

INJECT_BEFORE = "    train_op = ee.minimize("


def template_code(inject: str) -> str:
    from estimator_workbench import templates

    code = templates.get_template("mlp_classifier").code
    assert INJECT_BEFORE in code
    return code.replace(INJECT_BEFORE, inject + INJECT_BEFORE, 1)


def make_run(workspace: Path, code: str, max_steps: int, save_every: int, metrics_every: int = 10):
    return RunRegistry(workspace).create_run(
        name="fencing", action="train", dataset=cli._dataset_dict("iris", None),
        template={"name": "mlp_classifier", "code": code}, params={"hidden_units": "8"},
        run_config={"tf_random_seed": 0, "save_checkpoints_steps": save_every, "keep_checkpoint_max": 100},
        schedule={"max_steps": max_steps, "metrics_every_n_steps": metrics_every})


def train_losses(workspace: Path, run_id: str) -> list[int]:
    frame = read_all(RunRegistry(workspace).run_dir(run_id) / "metrics.jsonl")
    return [int(s) for s in frame[(frame["split"] == "train") & (frame["name"] == "loss")]["step"]]


def checkpoint_files(model_dir: Path) -> set[str]:
    return {p.name for p in model_dir.iterdir() if re.fullmatch(r"model\.ckpt-\d+", p.name)}


def listed_checkpoints(model_dir: Path) -> set[str]:
    return {Path(p).name for p in checkpoints.all_checkpoints(model_dir)}


@pytest.mark.usefixtures("db_backend")
def test_stop_lost_resume_cont_ends_with_one_writer_and_one_history(workspace):
    """The issue's sequence, with the CLI's launcher (a second one) reaping and resuming."""
    slow = "    __import__('time').sleep(0.01)\n"  # ~100 steps/s at most: time to stop it mid-run
    rec = make_run(workspace, template_code(slow), max_steps=300, save_every=20)
    first = LocalLauncher(workspace, gpus=[])  # the UI's launcher: starts the run, then stays idle
    second = LocalLauncher(workspace, gpus=[], heartbeat_timeout=10.0)  # the CLI's
    old = None
    try:
        first.submit(rec.run_id)
        old = first.registry.get(rec.run_id).pid
        wait_for(lambda: any(step >= 40 for step in train_losses(workspace, rec.run_id)))
        os.kill(old, signal.SIGSTOP)
        lost = wait_for(lambda: second.reap_lost())
        assert lost == [rec.run_id]
        assert second.registry.get(rec.run_id).status == "lost"
        second.resume(rec.run_id)
        os.kill(old, signal.SIGCONT) if pid_alive(old) else None  # gone with the fix
        done = second.wait(rec.run_id, timeout=120)
        assert done.status == "succeeded", done.error
        wait_for(lambda: not pid_alive(old))  # the frozen runner is ended, not left to write later
    finally:
        if old is not None and pid_alive(old):
            os.kill(old, signal.SIGCONT)
        second.shutdown(grace=1.0)
        first.shutdown(grace=1.0)
    record = RunRegistry(workspace).get(rec.run_id)
    assert record.status == "succeeded" and record.attempt == 2 and record.error is None
    log = (RunRegistry(workspace).run_dir(rec.run_id) / "worker.log").read_text()
    assert len(re.findall(r"run \S+ succeeded in", log)) == 1, log
    steps = train_losses(workspace, rec.run_id)
    assert steps == sorted(set(steps)) and steps[-1] == 300, steps  # one history, no duplicate step
    model_dir = RunRegistry(workspace).run_dir(rec.run_id) / "model"
    assert checkpoint_files(model_dir) == listed_checkpoints(model_dir)  # nothing unlisted
    assert checkpoints.read_global_step(model_dir) == 300


def _resume_elsewhere(registry: RunRegistry, run_id: str, pid: int) -> None:
    """What a second launcher does after marking the run lost: a new attempt, another process."""
    registry.set_status(run_id, "lost", error="lost: no heartbeat for 61s", expected="running")
    registry.set_status(run_id, "queued")
    registry.set_status(run_id, "running", pid=pid)


@pytest.mark.usefixtures("db_backend")
def test_a_runner_whose_token_is_stale_writes_nothing_more(workspace, monkeypatch, capsys):
    """The run changes hands at step 30 (as if resumed by another launcher while this runner was
    stopped): this runner writes no metric row, checkpoint or status after that, and exits 3."""
    registry = RunRegistry(workspace)
    stand_in = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        def flip() -> None:
            _resume_elsewhere(registry, rec.run_id, stand_in.pid)

        monkeypatch.setattr(builtins, "_test_flip_owner", flip, raising=False)
        inject = "    if ee.get_global_step() == 30:\n        _test_flip_owner()\n"
        rec = make_run(workspace, template_code(inject), max_steps=60, save_every=10, metrics_every=1)
        code = runner.run(registry.run_dir(rec.run_id), install_signal_handlers=False)
    finally:
        stand_in.kill()
        stand_in.wait()
    assert code == runner.EXIT_OWNERSHIP_LOST == 3
    record = registry.get(rec.run_id)
    # The new attempt's record is untouched: still its run, no outcome, no error from the old one.
    assert (record.status, record.attempt, record.error, record.pid) == ("running", 2, None, stand_in.pid)
    assert max(train_losses(workspace, rec.run_id)) == 30  # the step that ran after the flip is not logged
    model_dir = registry.run_dir(rec.run_id) / "model"
    assert checkpoints.read_global_step(model_dir) == 30
    assert checkpoint_files(model_dir) == {"model.ckpt-0", "model.ckpt-10", "model.ckpt-20", "model.ckpt-30"}
    err = capsys.readouterr().err
    assert re.search(r"attempt 1 no longer owns the run: it was started again as attempt 2 "
                     r"\(now 'running', pid \d+\)\. This runner stops without writing", err), err


def test_a_runner_started_for_another_attempt_does_not_start(workspace, capsys):
    registry = RunRegistry(workspace)
    rec = make_run(workspace, template_code(""), max_steps=5, save_every=5)
    other = subprocess.Popen([sys.executable, "-c", "pass"])
    other.wait()
    registry.set_status(rec.run_id, "running", pid=other.pid)  # started for another process
    code = runner.run(registry.run_dir(rec.run_id), install_signal_handlers=False)
    assert code == runner.EXIT_OWNERSHIP_LOST
    assert f"is running as attempt 1 of pid {other.pid}, not of this process" in capsys.readouterr().err
    assert not (registry.run_dir(rec.run_id) / "metrics.jsonl").exists()
    assert registry.get(rec.run_id).status == "running"


@pytest.mark.usefixtures("db_backend")
class TestRegistryFence:
    def test_every_start_is_a_new_attempt_and_old_attempts_cannot_write(self, workspace):
        registry = RunRegistry(workspace)
        rec = make_run(workspace, "x = 1\n", max_steps=5, save_every=5)
        assert rec.attempt == 0
        assert registry.set_status(rec.run_id, "running", pid=os.getpid()).attempt == 1
        registry.check_owner(rec.run_id, 1)
        registry.set_status(rec.run_id, "lost", expected="running")
        registry.check_owner(rec.run_id, 1)  # a lost runner still owns the run until a resume
        registry.set_status(rec.run_id, "queued")
        with pytest.raises(OwnershipLostError, match=r"attempt 1 no longer owns the run: it was put "
                                                     r"back in the queue \(resumed\) after attempt 1"):
            registry.check_owner(rec.run_id, 1)
        assert registry.set_status(rec.run_id, "running").attempt == 2
        for write in (lambda: registry.set_status(rec.run_id, "succeeded", attempt=1),
                      lambda: registry.heartbeat(rec.run_id, attempt=1, last_step=5, last_step_at=1.0),
                      lambda: registry.update_summary(rec.run_id, {"loss": 0.5}, step=5, attempt=1)):
            with pytest.raises(OwnershipLostError, match="attempt 1 no longer owns the run"):
                write()
        after = registry.get(rec.run_id)
        assert (after.status, after.summary, after.last_step) == ("running", {}, None)
        assert registry.set_status(rec.run_id, "succeeded", attempt=2).status == "succeeded"

    def test_a_run_back_from_lost_drops_the_stale_error(self, workspace):
        registry = RunRegistry(workspace)
        rec = make_run(workspace, "x = 1\n", max_steps=5, save_every=5)
        registry.set_status(rec.run_id, "running", pid=os.getpid())
        registry.set_status(rec.run_id, "lost", error="lost: no heartbeat for 61s")
        done = registry.set_status(rec.run_id, "succeeded", attempt=1)
        assert (done.status, done.error) == ("succeeded", None)


class TestResumeRefusedWhileTheOldRunnerLives:
    @pytest.fixture
    def lost_with_live_runner(self, workspace):
        registry = RunRegistry(workspace)
        rec = make_run(workspace, "x = 1\n", max_steps=5, save_every=5)
        folder = registry.run_dir(rec.run_id)
        # A process that looks like the run's runner: the run folder is on its command line.
        old = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", str(folder)],
                               start_new_session=True)
        registry.set_status(rec.run_id, "running", pid=old.pid)
        registry.set_status(rec.run_id, "lost", error="lost: no heartbeat for 61s")
        yield rec.run_id, old
        old.kill()
        old.wait()

    def test_launcher_and_cli_refuse_then_resume_once_it_is_gone(self, workspace, capsys,
                                                                lost_with_live_runner, monkeypatch):
        run_id, old = lost_with_live_runner
        launcher = LocalLauncher(workspace, gpus=[], runner_module="no_such_runner_module")
        message = (rf"Run '{run_id}' cannot be resumed yet: its previous runner \(pid {old.pid}, attempt 1\) "
                   r"is still alive although the run is 'lost'\. Resuming now would let two processes "
                   rf"write the run\. Wait for it to exit, or end it \(kill -KILL -- -{old.pid}\), then resume\.")
        with pytest.raises(ValueError, match=message):
            launcher.resume(run_id, wait=0.2)
        monkeypatch.setattr(cli, "_launcher", lambda root, warm_spare=False: launcher)
        assert cli.main(["resume", run_id, "--detach"]) == 2
        assert re.search(message, capsys.readouterr().err)
        assert launcher.registry.get(run_id).status == "lost"
        old.kill()
        old.wait()
        monkeypatch.setattr(launcher, "poll", lambda: [])  # queue it, start nothing
        assert launcher.resume(run_id).status == "queued"

    def test_a_reused_pid_does_not_block_resume(self, workspace, lost_with_live_runner, monkeypatch):
        run_id, old = lost_with_live_runner
        registry = RunRegistry(workspace)
        import sqlite3

        with sqlite3.connect(registry.db_path) as conn:  # the pid now belongs to a later process
            conn.execute("UPDATE runs SET pid_started = pid_started - 100 WHERE run_id = ?", (run_id,))
        launcher = LocalLauncher(workspace, gpus=[])
        monkeypatch.setattr(launcher, "poll", lambda: [])
        assert launcher.resume(run_id, wait=0.0).status == "queued"
        assert old.poll() is None  # and it was not touched


def test_marking_a_run_lost_kills_what_is_left_of_its_process_group(workspace):
    registry = RunRegistry(workspace)
    rec = make_run(workspace, "x = 1\n", max_steps=5, save_every=5)
    folder = registry.run_dir(rec.run_id)
    script = ("import subprocess, sys, time\n"
              "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
              "time.sleep(60)\n")
    old = subprocess.Popen([sys.executable, "-c", script, str(folder)], start_new_session=True)
    try:
        registry.set_status(rec.run_id, "running", pid=old.pid)
        wait_for(lambda: len(_group(old.pid)) == 2)
        os.kill(old.pid, signal.SIGSTOP)  # stopped: its heartbeat goes stale
        launcher = LocalLauncher(workspace, gpus=[], heartbeat_timeout=0.0)
        time.sleep(0.05)
        assert launcher.reap_lost() == [rec.run_id]
        assert old.wait(timeout=10) == -signal.SIGKILL
        wait_for(lambda: not _group(old.pid), timeout=10)  # the child in its group is gone too
        assert registry.get(rec.run_id).status == "lost"
    finally:
        for pid in _group(old.pid):
            os.kill(pid, signal.SIGKILL)
        if old.poll() is None:
            old.kill()
        old.wait()


def _group(pgid: int) -> list[int]:
    import psutil

    out = []
    for proc in psutil.process_iter(["pid", "status"]):
        try:
            if os.getpgid(proc.pid) == pgid and proc.info["status"] != psutil.STATUS_ZOMBIE:
                out.append(proc.pid)
        except (ProcessLookupError, psutil.Error):
            continue
    return out


def test_the_reaper_never_kills_its_own_process(workspace):
    """A run recorded with the reaper's own pid (or an unrelated live pid) is marked lost, nothing is killed."""
    registry = RunRegistry(workspace)
    rec = make_run(workspace, "x = 1\n", max_steps=5, save_every=5)
    registry.set_status(rec.run_id, "running", pid=os.getpid())
    launcher = LocalLauncher(workspace, gpus=[], heartbeat_timeout=0.0)
    time.sleep(0.05)
    assert launcher.reap_lost() == [rec.run_id]  # and this test process is still here


def test_a_launcher_marks_lost_only_the_attempt_it_started(workspace):
    """Its runner gone, a launcher records 'lost' only while the run is still the attempt it
    started: a later attempt (resumed by another launcher) is left running."""
    import subprocess
    import sys

    from estimator_workbench.execution.launcher import LocalLauncher

    registry = RunRegistry(workspace)
    run_id = registry.create_run(name="t", action="train", dataset={"name": "none"},
                                 template={"name": "t", "code": ""}, params={}, run_config={},
                                 schedule={}).run_id
    launcher = LocalLauncher(workspace, gpus=[])
    first = registry.set_status(run_id, "running", pid=os.getpid())
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    launcher._procs[run_id], launcher._attempts[run_id] = gone, first.attempt
    registry.set_status(run_id, "lost", error="lost: no heartbeat")  # another launcher's verdict
    registry.set_status(run_id, "queued")  # resumed there ...
    later = registry.set_status(run_id, "running", pid=os.getpid())  # ... and running again
    launcher._reap_children()
    now = registry.get(run_id)
    assert (now.status, now.attempt) == ("running", later.attempt) and later.attempt == first.attempt + 1
