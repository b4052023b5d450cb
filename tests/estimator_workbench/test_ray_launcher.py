"""Tests of estimator_workbench.execution.ray_launcher.

Two parts: the status mapping and the job's command line against a fake ``JobSubmissionClient``
(always run), and the real thing against a local Ray head on 127.0.0.1 (skipped only when Ray is
not installed: ``pip install 'estimator-workbench[ray]'``; with ``REQUIRE_RAY_TESTS=1``, as CI sets
once it installs the ray extra, a missing Ray fails them instead: scale-out that CI never runs is
a claim, not a feature). The head is started by ``ray.init`` in
a child process (module scope) and shut down with it, so no other Ray instance on the machine is
touched. Runs use the stub runner of the launcher tests (no engine).
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from polling import wait_for
from stub_runs import stub_run_args

from estimator_workbench.execution.processes import pid_alive
from estimator_workbench.execution.ray_launcher import (
    RayJobLauncher,
    is_ray_run,
    main,
    read_ray_job,
)
from estimator_workbench.store.metrics_store import read_all
from estimator_workbench.store.registry import RunRegistry

HERE = Path(__file__).resolve().parent


def new_run(workspace, num_processes=1, **schedule):
    return RunRegistry(workspace).create_run(
        name="stub", action="train", dataset={"name": "none"},
        template={"name": "stub", "code": ""}, run_config={}, **stub_run_args(schedule),
        num_processes=num_processes).run_id


def metric_steps(workspace, run_id):
    return read_all(Path(workspace) / "runs" / run_id / "metrics.jsonl")["step"].tolist()




# -- fake client: status mapping, no Ray needed -----------------------------------------------


class FakeInfo:
    def __init__(self, message):
        self.message = message


class FakeClient:
    def __init__(self):
        self.jobs = {}
        self.submitted = []
        self.stopped = []

    def submit_job(self, *, entrypoint, runtime_env, submission_id, **kwargs):
        self.submitted.append({"entrypoint": entrypoint, "runtime_env": runtime_env,
                               "submission_id": submission_id, **kwargs})
        self.jobs[submission_id] = "PENDING"
        return submission_id

    def get_job_status(self, job):
        if job not in self.jobs:
            raise RuntimeError(f"Job {job} does not exist")
        return self.jobs[job]

    def get_job_info(self, job):
        return FakeInfo("runtime env setup failed")

    def get_job_logs(self, job):
        return f"logs of {job}"

    def stop_job(self, job):
        self.stopped.append(job)
        self.jobs[job] = "STOPPED"
        return True


@pytest.fixture
def fake(workspace):
    client = FakeClient()
    return client, RayJobLauncher(workspace, "http://fake:8265", client=client, python="py",
                                  num_gpus_per_process=1, env={"A": "1"})


def test_submit_builds_the_job(workspace, fake):
    client, launcher = fake
    run_id = new_run(workspace, num_processes=2)
    assert launcher.submit(run_id).status == "queued"  # PENDING: waiting for resources
    job = client.submitted[0]
    folder = str(RunRegistry(workspace).run_dir(run_id))
    assert job["submission_id"] == f"workbench-{run_id}-1"
    assert job["entrypoint"] == (
        f"cd {shlex.quote(folder)} && exec py -m estimator_workbench.execution.ray_launcher tee worker.log -- "
        f"py -m torch.distributed.run --standalone --nproc-per-node 2 -m estimator_workbench.execution.runner {folder}")
    assert job["entrypoint_num_gpus"] == 2 and "entrypoint_num_cpus" not in job
    env = job["runtime_env"]["env_vars"]
    assert env["A"] == "1" and env["WORKBENCH_HOME"] == str(workspace)
    assert env["RAY_JOB_STOP_WAIT_TIME_S"] == "10"
    # The job imports the nodes' installed package: no checkout is put on its PYTHONPATH.
    assert str(Path(__file__).resolve().parents[2]) not in env.get("PYTHONPATH", "").split(os.pathsep)
    info = read_ray_job(folder)
    assert info["submission_id"] == job["submission_id"] and info["address"] == "http://fake:8265"
    assert is_ray_run(folder) and launcher.logs(run_id) == f"logs of {job['submission_id']}"
    assert launcher.poll() == []  # idempotent: a pending job is not submitted twice
    assert len(client.submitted) == 1


def test_status_follows_the_job(workspace, fake):
    client, launcher = fake
    reg = launcher.registry
    ok, failed, gone, vanished, early = (new_run(workspace) for _ in range(5))
    for run_id in (ok, failed, gone, vanished, early):
        launcher.submit(run_id)
    jobs = {r: launcher.job_id(r) for r in (ok, failed, gone, vanished, early)}
    for run_id in (ok, failed, gone, vanished):
        client.jobs[jobs[run_id]] = "RUNNING"
    launcher.poll()
    assert {reg.get(r).status for r in (ok, failed, gone, vanished)} == {"running"}
    assert reg.get(early).status == "queued"
    reg.set_status(ok, "succeeded")  # what the runner records before it exits
    client.jobs[jobs[ok]] = "SUCCEEDED"
    client.jobs[jobs[failed]] = "FAILED"  # e.g. the entrypoint could not start
    client.jobs[jobs[gone]] = "SUCCEEDED"  # exited 0 without recording an outcome
    del client.jobs[jobs[vanished]]  # the head restarted
    client.jobs[jobs[early]] = "FAILED"  # failed before RUNNING
    assert sorted(launcher.reap_lost()) == sorted([gone, vanished])
    launcher.poll()
    assert reg.get(ok).status == "succeeded"
    assert reg.get(failed).status == "failed"
    assert reg.get(failed).error == f"Ray job {jobs[failed]} FAILED: runtime env setup failed"
    assert reg.get(gone).error.startswith(f"lost: Ray job {jobs[gone]} ended without the runner")
    assert reg.get(vanished).error == (f"lost: Ray job {jobs[vanished]} is unknown to the cluster "
                                       "at http://fake:8265")
    assert reg.get(early).status == "failed"


def test_stop_cancel_resume_with_fake(workspace, fake):
    client, launcher = fake
    reg = launcher.registry
    queued, running = new_run(workspace), new_run(workspace)
    launcher.submit(queued)
    launcher.submit(running)
    launcher.stop(queued)  # a pending job: stopped, run cancelled
    assert reg.get(queued).status == "cancelled" and client.stopped == [launcher.job_id(queued)]
    client.jobs[launcher.job_id(running)] = "RUNNING"
    launcher.poll()
    launcher.stop(running)
    assert (reg.run_dir(running) / "stop.request").exists()
    assert launcher.cancel(running, grace=0, wait=True).status == "cancelled"
    assert reg.get(running).error == "cancelled by the user"
    resumed = launcher.resume(running)
    assert resumed.status == "queued" and not (reg.run_dir(running) / "stop.request").exists()
    assert launcher.job_id(running) == f"workbench-{running}-2"
    assert read_ray_job(reg.run_dir(running))["history"] == [f"workbench-{running}-1",
                                                             f"workbench-{running}-2"]


def test_max_concurrent_and_foreign_runs(workspace):
    client = FakeClient()
    launcher = RayJobLauncher(workspace, client=client, max_concurrent=1)
    a, b, local = new_run(workspace), new_run(workspace), new_run(workspace)
    reg = launcher.registry
    reg.set_status(local, "running", pid=os.getpid())  # not a Ray run: left alone
    launcher.submit(a)
    launcher.submit(b)
    assert len(client.submitted) == 1 and launcher.job_id(b) is None
    client.jobs[launcher.job_id(a)] = "SUCCEEDED"
    launcher.poll()
    assert launcher.job_id(b) == f"workbench-{b}-1"
    assert launcher.reap_lost() == [] and reg.get(local).status == "running"


@pytest.mark.parametrize(("kwargs", "message"), [
    ({}, r"RayJobLauncher needs the Ray cluster address, given: address=None and "
         r"\$WORKBENCH_RAY_ADDRESS unset"),
    ({"client": object(), "max_concurrent": 0}, "max_concurrent must be None or an int >= 1, given: 0"),
    ({"client": object(), "num_gpus_per_process": -1},
     "num_gpus_per_process must be a number >= 0, given: -1"),
])
def test_bad_arguments(workspace, monkeypatch, kwargs, message):
    monkeypatch.delenv("WORKBENCH_RAY_ADDRESS", raising=False)
    with pytest.raises(ValueError, match=message):
        RayJobLauncher(workspace, **kwargs)


def test_address_from_the_environment(workspace, monkeypatch):
    monkeypatch.setenv("WORKBENCH_RAY_ADDRESS", "http://from-env:8265")
    assert RayJobLauncher(workspace, client=FakeClient()).address == "http://from-env:8265"


def test_tee_copies_output_and_exit_code(tmp_path, capfd):
    log = tmp_path / "worker.log"
    code = main(["tee", str(log), "--", sys.executable, "-c",
                 "import sys; print('hello'); sys.exit(3)"])
    assert code == 3
    assert log.read_text() == "hello\n" and "hello" in capfd.readouterr().out
    assert main(["tee", str(log)]) == 2


# -- a real local Ray head ----------------------------------------------------------------------

_HEAD = """
import sys, ray
ctx = ray.init(include_dashboard=True, dashboard_host="127.0.0.1", dashboard_port={port},
               num_cpus=4, _node_ip_address="127.0.0.1", _temp_dir={tmp!r},
               configure_logging=False, log_to_driver=False)
print("READY", ctx.dashboard_url, flush=True)
sys.stdin.read()  # until the test closes stdin
ray.shutdown()
"""


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


REQUIRE_RAY_ENV = "REQUIRE_RAY_TESTS"


def require_ray() -> None:
    """Skips without Ray, or fails when ``REQUIRE_RAY_TESTS=1`` says Ray must be there."""
    try:
        import ray.job_submission  # noqa: F401
    except ImportError as exc:
        message = (f"Ray is not installed ({exc}): pip install 'estimator-workbench[ray]'")
        if os.environ.get(REQUIRE_RAY_ENV, "").strip() not in ("", "0"):
            pytest.fail(f"{REQUIRE_RAY_ENV} is set but {message}", pytrace=False)
        pytest.skip(message)


def test_require_ray_fails_instead_of_skipping(monkeypatch):
    """Known answer with Ray blocked: skip by default, fail when required."""
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    monkeypatch.setitem(sys.modules, "ray.job_submission", None)
    monkeypatch.delenv(REQUIRE_RAY_ENV, raising=False)
    with pytest.raises(pytest.skip.Exception, match="Ray is not installed"):
        require_ray()
    monkeypatch.setenv(REQUIRE_RAY_ENV, "1")
    with pytest.raises(pytest.fail.Exception, match="REQUIRE_RAY_TESTS is set but Ray is not installed"):
        require_ray()


@pytest.fixture(scope="module")
def ray_address():
    require_ray()
    from ray.job_submission import JobSubmissionClient

    port = _free_port()
    tmp = tempfile.mkdtemp(prefix="wbray", dir="/tmp")  # short: Ray's socket paths are limited
    # Loopback-only test head: no token auth (it would also write ~/.ray/auth_token).
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", RAY_AUTH_MODE="disabled")
    head = subprocess.Popen([sys.executable, "-c", _HEAD.format(port=port, tmp=tmp)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)
    try:
        line = head.stdout.readline()
        if "READY" not in line:
            pytest.fail(f"the local Ray head did not start: {line!r}")
        address = f"http://127.0.0.1:{port}"
        client = JobSubmissionClient(address)
        wait_for(lambda: client.list_jobs() is not None, timeout=60)
        yield address
    finally:
        head.stdin.close()
        try:
            head.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, 9)
            head.wait()
        subprocess.run(["rm", "-rf", tmp], check=False)


@pytest.fixture
def make_ray(workspace, ray_address):
    made = []

    def make(**kwargs):
        kwargs.setdefault("stop_wait_s", 2.0)
        kwargs.setdefault("runner_module", "stub_runner")
        launcher = RayJobLauncher(workspace, ray_address, python=sys.executable,
                                  env={"PYTHONPATH": str(HERE)}, **kwargs)
        made.append(launcher)
        return launcher

    yield make
    for launcher in made:
        launcher.shutdown(grace=1.0)


@pytest.mark.slow
def test_ray_run_succeeds_with_logs(workspace, make_ray):
    launcher = make_ray()
    run_id = new_run(workspace, max_steps=5, sleep=0.01)
    launcher.submit(run_id)
    done = launcher.wait(run_id, timeout=120)
    assert done.status == "succeeded", (done.error, launcher.logs(run_id))
    assert launcher.job_status(run_id) == "SUCCEEDED"
    assert metric_steps(workspace, run_id) == [1, 2, 3, 4, 5]
    assert f"run {run_id} (train) started" in launcher.logs(run_id)
    log = (Path(workspace) / "runs" / run_id / "worker.log").read_text()
    assert f"ray job workbench-{run_id}-1" in log and f"run {run_id} succeeded" in log


@pytest.mark.slow
def test_ray_pending_job_is_queued_then_cancelled(workspace, make_ray):
    launcher = make_ray(num_gpus_per_process=1)  # the local head has no GPU: stays PENDING
    run_id = new_run(workspace, max_steps=5)
    assert launcher.submit(run_id).status == "queued"
    wait_for(lambda: launcher.job_status(run_id) == "PENDING")  # Ray has the job, cannot place it
    launcher.poll()
    assert launcher.job_status(run_id) == "PENDING" and launcher.registry.get(run_id).status == "queued"
    start = time.monotonic()
    assert launcher.cancel(run_id, grace=1, wait=True).status == "cancelled"
    assert time.monotonic() - start < 5  # a pending job is not waited for
    # Ray keeps an unschedulable job PENDING even after stop_job (until its start timeout); if
    # it ever ran, the runner would refuse a cancelled run. The registry stays cancelled.
    launcher.poll()
    assert launcher.registry.get(run_id).status == "cancelled"


@pytest.mark.slow
def test_ray_stop_resume_and_cancel(workspace, make_ray):
    launcher = make_ray()
    reg = launcher.registry
    run_id = new_run(workspace, max_steps=2000, sleep=0.02)
    launcher.submit(run_id)
    wait_for(lambda: len(metric_steps(workspace, run_id)) >= 3, timeout=120)
    launcher.stop(run_id)
    done = launcher.wait(run_id, timeout=60)
    assert done.status == "stopped" and done.error is None
    stopped_at = len(metric_steps(workspace, run_id))
    assert launcher.resume(run_id).status in ("queued", "running")
    wait_for(lambda: len(metric_steps(workspace, run_id)) >= stopped_at + 3, timeout=120)
    assert reg.get(run_id).status == "running"
    start = time.monotonic()
    assert launcher.cancel(run_id, grace=5, wait=True).status == "cancelled"
    assert time.monotonic() - start < 15
    assert launcher.job_status(run_id) == "STOPPED"
    steps = metric_steps(workspace, run_id)
    assert steps == list(range(1, len(steps) + 1))  # continued, nothing repeated
    assert "cancelled" in (Path(workspace) / "runs" / run_id / "worker.log").read_text()


@pytest.mark.slow
def test_ray_cancel_escalates_to_sigkill(workspace, make_ray):
    launcher = make_ray(stop_wait_s=1.0)
    run_id = new_run(workspace, max_steps=2000, sleep=0.02, ignore_sigterm=True)
    launcher.submit(run_id)
    wait_for(lambda: metric_steps(workspace, run_id), timeout=120)
    pid = json.loads((Path(workspace) / "runs" / run_id / "env.json").read_text())["pid"]
    record = launcher.cancel(run_id, grace=1, wait=True)
    assert record.status == "cancelled" and record.error == "cancelled by the user"
    wait_for(lambda: not pid_alive(pid), timeout=10)


@pytest.mark.slow
def test_ray_failures(workspace, make_ray):
    launcher = make_ray()
    failing = new_run(workspace, max_steps=2, sleep=0.01, fail=True)
    launcher.submit(failing)
    done = launcher.wait(failing, timeout=120)
    assert done.status == "failed" and "stub failure on purpose" in done.error
    assert launcher.job_status(failing) == "FAILED"
    broken = make_ray(runner_module="no_such_runner_module")
    run_id = new_run(workspace)
    broken.submit(run_id)
    done = broken.wait(run_id, timeout=120)
    assert done.status == "failed"
    assert done.error.startswith(f"Ray job workbench-{run_id}-1 FAILED")
    assert "No module named no_such_runner_module" in broken.logs(run_id)


@pytest.mark.slow
def test_ray_two_process_run_under_torchrun(workspace, make_ray):
    launcher = make_ray()
    run_id = new_run(workspace, num_processes=2, max_steps=5, sleep=0.01)
    launcher.submit(run_id)
    done = launcher.wait(run_id, timeout=180)
    logs = launcher.logs(run_id)
    assert done.status == "succeeded", (done.error, logs[-3000:])
    assert "torch.distributed.run" in logs and logs.count("started, pid") == 2
