"""Tests of estimator_workbench.execution.launcher with a stub runner (real processes, no engine).

The stub (``tests/estimator_workbench/stub_runner.py``) runs the real ``estimator_workbench.execution.runner`` lifecycle around
a fake action that sleeps and appends metric lines, so spawn, queue, stop, cancel, the reaper and
resume are tested without training anything.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import polling
import pytest
from stub_runs import stub_run_args

from estimator_workbench.execution import launcher as launcher_module
from estimator_workbench.execution.launcher import LocalLauncher
from estimator_workbench.execution.processes import descendants, pid_alive
from estimator_workbench.store.metrics_store import read_all
from estimator_workbench.store.registry import RunRegistry

HERE = Path(__file__).resolve().parent
pytestmark = pytest.mark.slow


@pytest.fixture
def make_launcher(workspace):
    made = []

    def make(**kwargs):
        kwargs.setdefault("gpus", [])
        launcher = LocalLauncher(workspace, runner_module="stub_runner",
                                 env={"PYTHONPATH": str(HERE)}, **kwargs)
        made.append(launcher)
        return launcher

    yield make
    for launcher in made:
        launcher.shutdown(grace=1.0)


def new_run(workspace, **schedule):
    return RunRegistry(workspace).create_run(
        name="stub", action="train", dataset={"name": "none"},
        template={"name": "stub", "code": ""}, run_config={}, **stub_run_args(schedule)).run_id


wait_for = functools.partial(polling.wait_for, timeout=30.0)


def metric_steps(workspace, run_id):
    frame = read_all(Path(workspace) / "runs" / run_id / "metrics.jsonl")
    return frame["step"].tolist()


def test_spawn_runs_to_success(workspace, make_launcher):
    launcher = make_launcher()
    run_id = new_run(workspace, max_steps=5, sleep=0.01)
    record = launcher.submit(run_id)
    assert record.status == "running" and record.pid
    done = launcher.wait(run_id, timeout=60)
    assert done.status == "succeeded", (done.error, done.traceback)
    assert metric_steps(workspace, run_id) == [1, 2, 3, 4, 5]
    assert done.summary["train/loss"] == {"last": 0.2, "last_step": 5, "best": 0.2, "best_step": 5}
    log = (Path(workspace) / "runs" / run_id / "worker.log").read_text()
    assert "launch:" in log and "succeeded" in log
    assert launcher.process(run_id) is None  # reaped


def test_queue_respects_max_concurrent(workspace, make_launcher):
    launcher = make_launcher(max_concurrent=1)
    first = new_run(workspace, max_steps=15, sleep=0.05)
    second = new_run(workspace, max_steps=2, sleep=0.01)
    launcher.submit(first)
    assert launcher.submit(second).status == "queued"
    assert launcher.poll() == []
    assert launcher.wait(first, timeout=60).status == "succeeded"
    wait_for(lambda: launcher.registry.get(second).status != "queued" or launcher.poll())
    assert launcher.wait(second, timeout=60).status == "succeeded"
    reg = launcher.registry
    assert reg.get(second).started_at >= reg.get(first).finished_at


def test_default_concurrency_and_gpu_pinning(workspace, make_launcher):
    assert make_launcher().max_concurrent == 1
    launcher = make_launcher(gpus=["0", "1"])
    assert launcher.max_concurrent == 2
    a, b = new_run(workspace, max_steps=3, sleep=0.2), new_run(workspace, max_steps=3, sleep=0.2)
    launcher.submit(a)
    launcher.submit(b)
    envs = [wait_for(lambda r=r: _read_json(Path(workspace) / "runs" / r / "env.json")) for r in (a, b)]
    assert sorted(e["CUDA_VISIBLE_DEVICES"] for e in envs) == ["0", "1"]
    for r in (a, b):
        assert launcher.wait(r, timeout=60).status == "succeeded"


def _read_json(path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def test_stop_is_graceful(workspace, make_launcher):
    launcher = make_launcher()
    run_id = new_run(workspace, max_steps=2000, sleep=0.02)
    launcher.submit(run_id)
    wait_for(lambda: len(metric_steps(workspace, run_id)) >= 3)
    launcher.stop(run_id)
    done = launcher.wait(run_id, timeout=30)
    assert done.status == "stopped" and done.error is None
    assert 3 <= len(metric_steps(workspace, run_id)) < 2000


def test_cancel_sigterm_is_honoured(workspace, make_launcher):
    launcher = make_launcher()
    run_id = new_run(workspace, max_steps=2000, sleep=0.02)
    launcher.submit(run_id)
    wait_for(lambda: metric_steps(workspace, run_id))
    start = time.monotonic()
    record = launcher.cancel(run_id, grace=10, wait=True)
    assert record.status == "cancelled"
    assert time.monotonic() - start < 5  # the runner exited on SIGTERM, no SIGKILL needed
    assert "cancelled" in (Path(workspace) / "runs" / run_id / "worker.log").read_text()


def test_cancel_escalates_to_sigkill(workspace, make_launcher):
    launcher = make_launcher()
    run_id = new_run(workspace, max_steps=2000, sleep=0.02, ignore_sigterm=True)
    launcher.submit(run_id)
    wait_for(lambda: metric_steps(workspace, run_id))
    pid = launcher.registry.get(run_id).pid
    start = time.monotonic()
    record = launcher.cancel(run_id, grace=0.5, wait=True)
    assert record.status == "cancelled" and record.error == "cancelled by the user"
    assert 0.5 <= time.monotonic() - start < 5
    assert not pid_alive(pid)


# A runner that starts a helper in a session of its own (as torchrun starts its ranks), which
# ignores SIGTERM and has no death signal: the run's marker (and the runner's exit clean-up) reach it.
TREE_STUB = """
import signal, subprocess, sys, time
from estimator_workbench.execution import runner

HELPER = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(120)"

def execute(ctx):
    helper = subprocess.Popen([sys.executable, "-c", HELPER], start_new_session=True)
    (ctx.run_dir / "helper.pid").write_text(str(helper.pid))
    if ctx.spec.params.get("ignore_sigterm"):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    while not ctx.stop_requested():
        time.sleep(0.02)

if __name__ == "__main__":
    sys.exit(runner.run(sys.argv[1], execute=execute))
"""


@pytest.mark.parametrize("ignore_sigterm", [True, False], ids=["sigkill", "sigterm"])
def test_cancel_kills_descendants_in_other_sessions(workspace, ignore_sigterm, source_runner_launcher):
    launcher = source_runner_launcher("tree_stub", TREE_STUB)
    helper = None
    try:
        run_id = new_run(workspace, ignore_sigterm=ignore_sigterm)
        launcher.submit(run_id)
        pid_file = Path(workspace) / "runs" / run_id / "helper.pid"
        helper = wait_for(lambda: pid_file.exists() and pid_file.read_text() and
                          int(pid_file.read_text()))
        assert pid_alive(helper)
        assert launcher.cancel(run_id, grace=0.5, wait=True).status == "cancelled"
        wait_for(lambda: not pid_alive(helper), timeout=10)
    finally:
        if helper and pid_alive(helper):
            os.kill(helper, signal.SIGKILL)


def test_descendants_crosses_sessions(tmp_path):
    """Known answer: a child and the grandchild it started in a session of its own."""
    pid_file = tmp_path / "grandchild.pid"
    code = ("import subprocess, sys, time; g = subprocess.Popen(['sleep', '60'], "
            "start_new_session=True); open(sys.argv[1], 'w').write(str(g.pid)); time.sleep(60)")
    child = subprocess.Popen([sys.executable, "-c", code, str(pid_file)])
    grandchild = None
    try:
        grandchild = wait_for(lambda: pid_file.exists() and pid_file.read_text() and
                              int(pid_file.read_text()))
        found = descendants(os.getpid())
        assert child.pid in found and grandchild in found
        assert set(descendants(child.pid)) == {grandchild}
        assert descendants(grandchild) == {}
    finally:
        child.kill()
        child.wait(timeout=10)
        if grandchild and pid_alive(grandchild):
            os.kill(grandchild, signal.SIGKILL)


@pytest.mark.usefixtures("db_backend")
def test_queued_run_cancel_and_stop(workspace, make_launcher):
    launcher = make_launcher(max_concurrent=1)
    blocker = new_run(workspace, max_steps=2000, sleep=0.02)
    a, b = new_run(workspace), new_run(workspace)
    launcher.submit(blocker)
    launcher.submit(a)
    launcher.submit(b)
    assert launcher.cancel(a).status == "cancelled"
    launcher.stop(b)
    assert launcher.registry.get(b).status == "cancelled"
    launcher.cancel(blocker, grace=5, wait=True)


@pytest.mark.usefixtures("db_backend")
def test_reaper_marks_sigkilled_runner_lost_and_resume_continues(workspace, make_launcher):
    launcher = make_launcher()
    run_id = new_run(workspace, max_steps=40, sleep=0.05)
    launcher.submit(run_id)
    wait_for(lambda: len(metric_steps(workspace, run_id)) >= 5)
    os.killpg(launcher.registry.get(run_id).pid, signal.SIGKILL)
    record = wait_for(lambda: (launcher.poll(), launcher.registry.get(run_id))[1].status == "lost"
                      and launcher.registry.get(run_id))
    assert "runner exited with code -9" in record.error
    killed_at = len(metric_steps(workspace, run_id))
    resumed = launcher.resume(run_id)
    assert resumed.status == "running" and resumed.error is None
    done = launcher.wait(run_id, timeout=60)
    assert done.status == "succeeded"
    steps = metric_steps(workspace, run_id)
    assert steps == list(range(1, 41)) and killed_at < 40  # continued, nothing repeated


def test_reaper_from_a_fresh_launcher(workspace, make_launcher):
    """A restarted UI has no Popen handles: the pid and the heartbeat tell it what was lost."""
    first = make_launcher()
    run_id = new_run(workspace, max_steps=2000, sleep=0.02)
    first.submit(run_id)
    wait_for(lambda: metric_steps(workspace, run_id))
    pid = first.registry.get(run_id).pid
    second = make_launcher()
    assert second.reap_lost() == []  # alive
    os.killpg(pid, signal.SIGKILL)
    wait_for(lambda: not pid_alive(pid))
    assert second.reap_lost() == [run_id]
    assert first.registry.get(run_id).error == f"lost: runner process is gone (pid {pid} no longer exists)"


def test_reaper_leaves_ray_runs_alone(workspace, make_launcher):
    """A local launcher (the CLI on a login node) cannot judge a cluster run by its pid."""
    from estimator_workbench.execution.ray_launcher import RAY_JOB_FILE

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # a pid that is not alive on this machine
    launcher = make_launcher(heartbeat_timeout=0.0)
    reg = launcher.registry
    on_ray, local = new_run(workspace), new_run(workspace)
    for run_id in (on_ray, local):
        reg.set_status(run_id, "running", pid=gone.pid)
    job_file = reg.run_dir(on_ray) / RAY_JOB_FILE
    job_file.write_text(json.dumps({"submission_id": f"workbench-{on_ray}-1"}))
    time.sleep(0.01)  # both heartbeats are stale too
    assert launcher.reap_lost() == [local]
    assert reg.get(on_ray).status == "running" and launcher.running_count() == 0
    with pytest.raises(ValueError, match=r"runs on a Ray cluster .*ray_job.json\); a local "
                                         r"launcher cannot cancel it. Set WORKBENCH_RAY_ADDRESS"):
        launcher.cancel(on_ray)
    job_file.unlink()  # the same run without its job file is judged like any local run
    assert launcher.reap_lost() == [on_ray]


def test_reaper_stale_heartbeat(workspace, make_launcher):
    launcher = make_launcher(heartbeat_timeout=0.2)
    reg = launcher.registry
    run_id = new_run(workspace)
    reg.set_status(run_id, "running", pid=os.getpid())  # alive, but silent
    assert launcher.reap_lost() == []
    time.sleep(0.3)
    assert launcher.reap_lost() == [run_id]
    assert reg.get(run_id).error.startswith("lost: no heartbeat for")


def test_failure_records_user_traceback(workspace, make_launcher):
    launcher = make_launcher()
    run_id = new_run(workspace, max_steps=2, sleep=0.01, fail=True)
    launcher.submit(run_id)
    done = launcher.wait(run_id, timeout=60)
    assert done.status == "failed"
    assert done.error.startswith("ValueError: stub failure on purpose (stub_runner.py, line ")
    assert "user code only" in done.traceback and "estimator_workbench/execution/runner.py" not in done.traceback


def test_invalid_requests(workspace, make_launcher):
    launcher = make_launcher()
    run_id = new_run(workspace)
    launcher.registry.set_status(run_id, "cancelled")
    with pytest.raises(ValueError, match="only queued runs can be submitted"):
        launcher.submit(run_id)
    with pytest.raises(ValueError, match="only a running or queued run can be stopped"):
        launcher.stop(run_id)
    with pytest.raises(ValueError, match=r"only a running or queued run \(or a lost one whose runner still "
                                         r"lives\) can be cancelled"):
        launcher.cancel(run_id)
    with pytest.raises(ValueError, match="max_concurrent must be an int >= 1, given: 0"):
        LocalLauncher(workspace, max_concurrent=0)


def test_multi_process_command(workspace, make_launcher):
    launcher = make_launcher()
    reg = launcher.registry
    rec = reg.create_run(name="ddp", action="train", dataset={}, template={}, params={},
                         run_config={}, num_processes=2)
    cmd = launcher._command(rec, reg.run_dir(rec.run_id))
    assert cmd[:7] == [sys.executable, "-m", "torch.distributed.run", "--standalone",
                       "--nproc-per-node", "2", "-m"]
    assert cmd[-1].endswith(rec.run_id)


def test_warm_spare_takes_the_next_run(workspace):
    """A real runner pre-started with its imports done takes the run through its stdin pipe."""
    from estimator_workbench import templates
    from estimator_workbench.cli import commands as cli

    launcher = LocalLauncher(workspace, gpus=[], warm_spares=1)
    try:
        launcher.poll()
        spare = launcher._spares.process
        assert spare is not None and spare.poll() is None
        wait_for(lambda: b" ready" in (Path(workspace) / "spare.log").read_bytes(), timeout=60)
        info = templates.get_template("mlp_classifier")
        run_id = RunRegistry(workspace).create_run(
            name="warm", action="train", dataset=cli._dataset_dict("iris", None),
            template={"name": info.name, "code": info.code}, params={"hidden_units": "8"},
            run_config={"tf_random_seed": 0}, schedule={"max_steps": 20}).run_id
        record = launcher.submit(run_id)
        assert record.status == "running" and record.pid == spare.pid
        assert launcher.process(run_id) is spare and launcher._spares.process is None
        assert launcher.wait(run_id, timeout=60).status == "succeeded"
        assert metric_steps(workspace, run_id)[-1] == 20
        log = (Path(workspace) / "runs" / run_id / "worker.log").read_text()
        assert f"warm spare runner pid {spare.pid}" in log and "succeeded" in log
        # The slot is free again: a new spare waits; shutdown ends it.
        launcher.poll()
        replacement = launcher._spares.process
        assert replacement is not None and replacement is not spare
    finally:
        launcher.shutdown(grace=1.0)
    assert launcher._spares.process is None and replacement.poll() is not None


def test_warm_spares_only_on_cpu_and_validated(workspace):
    with pytest.raises(ValueError, match="warm_spares must be 0 or 1, given: 2"):
        LocalLauncher(workspace, gpus=[], warm_spares=2)
    launcher = LocalLauncher(workspace, gpus=["0"], warm_spares=1)
    launcher.poll()
    assert launcher._spares.process is None  # GPU pinning happens at spawn: no spare with GPUs


def test_shutdown_ends_the_spare_while_it_imports_and_while_it_waits(workspace):
    for wait_until_ready in (False, True):
        launcher = LocalLauncher(workspace, gpus=[], warm_spares=1)
        launcher.poll()
        spare = launcher._spares.process
        assert spare is not None
        if wait_until_ready:
            wait_for(lambda: b" ready" in (Path(workspace) / "spare.log").read_bytes(), timeout=60)
        launcher.shutdown(grace=1.0)
        assert launcher._spares.process is None and spare.poll() is not None
        with pytest.raises(ProcessLookupError):  # nothing left in its process group either
            os.killpg(spare.pid, 0)
        (Path(workspace) / "spare.log").unlink()


def test_shutdown_ends_a_spare_started_by_a_concurrent_poll(workspace, monkeypatch):
    """The UI shares one launcher between sessions: a page's poll() may start a new spare while
    shutdown is cancelling runs."""
    launcher = LocalLauncher(workspace, gpus=[], warm_spares=1)
    busy = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                            start_new_session=True)
    launcher._procs["busy"] = busy  # a run of ours, so that shutdown has something to cancel
    spares = []

    def cancel_while_another_session_polls(run_id, grace=10.0, wait=False):
        launcher.poll()
        spares.append(launcher._spares.process)
        raise ValueError("not in the registry")  # shutdown then SIGKILLs the run's group

    monkeypatch.setattr(launcher, "cancel", cancel_while_another_session_polls)
    launcher.shutdown(grace=1.0)
    assert spares and spares[0] is not None
    assert spares[0].poll() is not None and launcher._spares.process is None and busy.poll() is not None


# A stand-in for the Streamlit server: builds the UI's shared launcher (warm spare on), then
# exits without shutdown() or is SIGKILLed, as a server stopped or crashing would.
UI_SERVER = """
import sys, time
from estimator_workbench.ui import session
spare = session.get_launcher()._spares.process
open(sys.argv[1], "w").write(str(spare.pid if spare is not None else 0))
if sys.argv[2] == "exit":
    sys.exit(0)
time.sleep(120)
"""


@pytest.mark.parametrize("how", ["exit", "sigkill"])
def test_ui_spare_does_not_outlive_the_server(workspace, tmp_path, how):
    pytest.importorskip("streamlit")
    pid_file = tmp_path / "spare.pid"
    env = dict(os.environ, WORKBENCH_HOME=str(workspace), WORKBENCH_WARM_SPARES="1",
               CUDA_VISIBLE_DEVICES="", PYTHONPATH=str(HERE.parents[1]))
    env.pop("WORKBENCH_RUNNER_MODULE", None)
    server = subprocess.Popen([sys.executable, "-c", UI_SERVER, str(pid_file), how], env=env,
                              start_new_session=True)
    spare = 0
    try:
        spare = wait_for(lambda: pid_file.exists() and pid_file.read_text() and
                         int(pid_file.read_text()), timeout=120)
        assert spare > 0
        if how == "sigkill":
            assert pid_alive(spare)
            server.kill()
        assert server.wait(timeout=60) in (0, -signal.SIGKILL)
        if how == "exit":  # the server's exit handler ended it: gone before the server was
            assert not pid_alive(spare)
        # SIGKILL: end of its stdin pipe; the spare exits by itself once its imports are done.
        wait_for(lambda: not pid_alive(spare), timeout=120)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait(timeout=10)
        if spare and pid_alive(spare):
            os.kill(spare, signal.SIGKILL)


# -- make_launcher -------------------------------------------------------------------------------


def test_make_launcher_is_local_without_a_ray_address(workspace, monkeypatch):
    for value in (None, "", "   "):
        if value is None:
            monkeypatch.delenv("WORKBENCH_RAY_ADDRESS", raising=False)
        else:
            monkeypatch.setenv("WORKBENCH_RAY_ADDRESS", value)
        launcher = launcher_module.make_launcher(workspace, runner_module="stub_runner",
                                                 env={"A": "1"}, warm_spares=1)
        assert type(launcher) is LocalLauncher
        assert (launcher.runner_module, launcher.extra_env, launcher.warm_spares) == (
            "stub_runner", {"A": "1"}, 1)
    assert launcher_module.make_launcher(workspace).warm_spares == 0


def test_make_launcher_is_ray_with_an_address(workspace, monkeypatch):
    from estimator_workbench.execution import ray_launcher

    real = ray_launcher.RayJobLauncher
    # No cluster here: the real class with a stand-in client (a passed warm_spares would fail).
    monkeypatch.setattr(ray_launcher, "RayJobLauncher",
                        lambda *args, **kwargs: real(*args, client=object(), **kwargs))
    monkeypatch.setenv("WORKBENCH_RAY_ADDRESS", " http://head:8265 ")
    launcher = launcher_module.make_launcher(workspace, runner_module="stub_runner",
                                             env={"A": "1"}, warm_spares=1)
    assert type(launcher) is real
    assert (launcher.address, launcher.runner_module, launcher.extra_env) == (
        "http://head:8265", "stub_runner", {"A": "1"})


def test_make_launcher_says_how_to_install_ray(workspace, monkeypatch):
    """Runs whether Ray is installed or not: Ray is blocked here (``import ray`` fails), so no
    address is ever contacted."""
    for name in [m for m in sys.modules if m == "ray" or m.startswith("ray.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "ray", None)
    monkeypatch.setitem(sys.modules, "ray.job_submission", None)
    monkeypatch.setenv("WORKBENCH_RAY_ADDRESS", "http://head:8265")
    with pytest.raises(ImportError, match=r"RayJobLauncher needs Ray: install the optional extra"):
        launcher_module.make_launcher(workspace)


def test_ui_launcher_has_a_warm_spare_for_the_real_runner_only(workspace, monkeypatch):
    pytest.importorskip("streamlit")
    from estimator_workbench.ui import session

    monkeypatch.delenv("WORKBENCH_RAY_ADDRESS", raising=False)
    session._launcher.clear()
    try:
        root = str(workspace)
        assert session._launcher(root, "estimator_workbench.execution.runner", "").warm_spares == 1
        assert session._launcher(root, "stub_runner", str(HERE)).warm_spares == 0
        assert session._launcher(root, "estimator_workbench.execution.runner", "", "", False).warm_spares == 0
        monkeypatch.setenv("WORKBENCH_WARM_SPARES", "0")
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
        launcher = session.get_launcher()
        assert launcher.warm_spares == 0 and launcher._spares.process is None
    finally:
        session._launcher.clear()


def _helper_run(workspace, parent, action="predict", **schedule):
    return RunRegistry(workspace).create_run(
        name=f"{action} with stub", action=action, dataset={"name": "none"},
        template={"name": "stub", "code": ""}, run_config={}, **stub_run_args(schedule),
        parent_run_id=parent, parent_relation=f"{action}_from").run_id


def test_helper_runs_take_their_own_slot_beside_training(workspace, make_launcher):
    """Issue 28 item 8: a predict of a trained model starts while a training run holds the single
    training slot; a second training run still queues, and so does a second helper run."""
    launcher = make_launcher(max_concurrent=1)
    assert launcher.helper_slots == 1
    parent = new_run(workspace, max_steps=1, sleep=0.01)
    assert launcher.wait(launcher.submit(parent).run_id, timeout=60).status == "succeeded"
    training = new_run(workspace, max_steps=2000, sleep=0.02)
    launcher.submit(training)
    second_training = new_run(workspace, max_steps=2, sleep=0.01)
    assert launcher.submit(second_training).status == "queued"
    predict = _helper_run(workspace, parent, max_steps=400, sleep=0.02)
    assert launcher.submit(predict).status == "running"  # not behind the training run
    evaluate = _helper_run(workspace, parent, "evaluate", max_steps=2, sleep=0.01)
    assert launcher.submit(evaluate).status == "queued"  # one helper slot: behind the predict
    assert launcher.running_count("runs") == 1 and launcher.running_count("helpers") == 1
    launcher.cancel(predict, grace=1.0)
    assert launcher.wait(evaluate, timeout=60).status == "succeeded"
    assert launcher.registry.get(training).status == "running"
    assert launcher.registry.get(second_training).status == "queued"


def test_helper_slots_zero_queues_helpers_with_training(workspace, make_launcher):
    launcher = make_launcher(max_concurrent=1, helper_slots=0)
    parent = new_run(workspace, max_steps=1, sleep=0.01)
    launcher.wait(launcher.submit(parent).run_id, timeout=60)
    launcher.submit(new_run(workspace, max_steps=2000, sleep=0.02))
    assert launcher.submit(_helper_run(workspace, parent, max_steps=2)).status == "queued"


def test_concurrency_settings_from_the_environment(workspace, make_launcher, monkeypatch):
    monkeypatch.setenv(launcher_module.MAX_CONCURRENT_ENV, "3")
    monkeypatch.setenv(launcher_module.HELPER_SLOTS_ENV, "2")
    launcher = make_launcher()
    assert (launcher.max_concurrent, launcher.helper_slots) == (3, 2)
    monkeypatch.setenv(launcher_module.HELPER_SLOTS_ENV, "-1")
    with pytest.raises(ValueError, match=r"\$WORKBENCH_HELPER_SLOTS must be an integer >= 0, given: '-1'"):
        make_launcher()
    monkeypatch.setenv(launcher_module.MAX_CONCURRENT_ENV, "two")
    with pytest.raises(ValueError, match=r"\$WORKBENCH_MAX_CONCURRENT must be an integer >= 1, given: 'two'"):
        make_launcher()
