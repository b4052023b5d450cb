"""``RayJobLauncher``: submits workbench runs to a Ray cluster as Ray Jobs (optional extra).

The same launcher interface as ``estimator_workbench.execution.launcher.LocalLauncher`` (``submit``, ``start``,
``poll``, ``stop``, ``cancel``, ``resume``, ``reap_lost``, ``wait``, ``shutdown``, plus ``logs``),
the same entry point (``python -m estimator_workbench.execution.runner RUN_DIR``, or ``torch.distributed.run
--standalone --nproc-per-node N`` for ``num_processes > 1``), submitted with Ray Jobs semantics
(``JobSubmissionClient(address).submit_job(entrypoint=..., runtime_env=..., submission_id=...)``)
instead of spawned here. Install with ``pip install 'estimator-workbench[ray]'``.

Requirements:
    - **The workspace is on shared storage** mounted at the same path on the machine running the
      UI and on every Ray node: the runner reads ``runs/<id>/run.json``, writes checkpoints,
      ``metrics.jsonl`` and ``worker.log`` there, and updates ``registry.sqlite`` (see
      ``docs/SCALE.md`` for the file-system caveats of SQLite on network storage).
    - The project (``workbench`` and ``estimator_engine``) is importable on the nodes: installed in
      the nodes' environment (``pip install estimator-workbench``; nothing is taken from a checkout
      or the job's working directory).
    - The cluster address comes from ``address=`` or ``$WORKBENCH_RAY_ADDRESS`` (the dashboard's
      HTTP address, e.g. ``http://head-node:8265``).

Status: the job status drives the registry. ``PENDING`` (waiting for cluster resources) keeps the
run ``queued``; ``RUNNING`` makes it ``running``; the runner itself records ``succeeded``,
``stopped``, ``cancelled`` or ``failed`` (with the user-code traceback) before it exits. A job
that ends without the runner having recorded an outcome becomes ``failed`` (``FAILED``: e.g. the
runtime environment could not be set up), ``cancelled`` (``STOPPED``) or ``lost`` (``SUCCEEDED``).
Stop writes ``stop.request`` (graceful: every rank sees it, the chief checkpoints, the run ends
``stopped``); Cancel is ``stop_job``: Ray sends SIGTERM to the entrypoint and all its descendants
(every torchrun rank), then SIGKILL after ``stop_wait_s``.

Which job belongs to a run is kept in ``runs/<id>/ray_job.json`` (address, submission ids), so a
restarted UI finds its jobs again.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from estimator_workbench.execution.base import Launcher
from estimator_workbench.execution.processes import without_secrets
from estimator_workbench.store import paths
from estimator_workbench.store.records import InvalidTransitionError, RunRecord
from estimator_workbench.store.registry import RunRegistry

__all__ = [
    "ADDRESS_ENV_VAR",
    "RAY_JOB_FILE",
    "RayJobLauncher",
    "is_ray_run",
    "main",
    "read_ray_job",
]

ADDRESS_ENV_VAR = "WORKBENCH_RAY_ADDRESS"
RAY_JOB_FILE = "ray_job.json"
DEFAULT_HEARTBEAT_TIMEOUT_S = 60.0
_TERMINAL = ("SUCCEEDED", "FAILED", "STOPPED")
_INSTALL_HINT = "install the optional extra: pip install 'estimator-workbench[ray]'"


def read_ray_job(run_dir: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The content of ``<run_dir>/ray_job.json`` (None for a run never submitted to Ray)."""
    try:
        return json.loads((Path(run_dir) / RAY_JOB_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def is_ray_run(run_dir: str | os.PathLike[str]) -> bool:
    """Whether the run was submitted to Ray (its pid, if any, is on another machine)."""
    return (Path(run_dir) / RAY_JOB_FILE).exists()


def _status_name(status: Any) -> str:
    return str(getattr(status, "value", status)).upper()


class RayJobLauncher(Launcher):
    """Submits, follows, stops, cancels and resumes runs of one workspace as Ray Jobs.

    Args:
        root: the workspace folder (on storage every Ray node mounts at the same path).
        address: the Ray dashboard address (default: ``$WORKBENCH_RAY_ADDRESS``).
        max_concurrent: runs submitted at once; ``None`` (default) submits every queued run and
            lets Ray queue them (``PENDING``) until the cluster has the resources.
        runner_module: the module run as ``python -m <runner_module> RUN_DIR``.
        env: extra environment variables for the job (merged into ``runtime_env['env_vars']``;
            the UI's secrets, see ``estimator_workbench.execution.launcher.SECRET_ENV_VARS``, are dropped).
        python: the interpreter on the cluster nodes (``python`` from the nodes' ``PATH``).
        num_cpus_per_process / num_gpus_per_process: entrypoint resources per process (times
            ``num_processes``); Ray places the job on a node that has them. ``0`` (default)
            requests nothing, so Ray runs the job on the head node.
        runtime_env: a base Ray runtime environment (e.g. ``{'pip': [...]}``).
        heartbeat_timeout: seconds without a heartbeat after which a running run is ``lost``.
        stop_wait_s: seconds between Ray's SIGTERM and SIGKILL on cancel
            (``RAY_JOB_STOP_WAIT_TIME_S`` of the job).
        client: a ``JobSubmissionClient`` (default: one for ``address``; tests inject fakes).

    Example:
        >>> launcher = RayJobLauncher("/shared/workspace", "http://head:8265")   # doctest: +SKIP
        >>> launcher.submit(run_id)        # submit_job; the run is queued until Ray starts it
        >>> launcher.poll()                # call periodically: follows the job statuses
        >>> print(launcher.logs(run_id))   # get_job_logs
        >>> launcher.stop(run_id)          # graceful: stop.request, checkpoint, ``stopped``
        >>> launcher.cancel(run_id)        # stop_job: SIGTERM to every rank, then SIGKILL
    """

    wait_interval_s = 0.2  # each job status is a request to the Ray dashboard

    def __init__(self, root: str | os.PathLike[str], address: str | None = None, *,
                 max_concurrent: int | None = None, runner_module: str = "estimator_workbench.execution.runner",
                 env: dict[str, str] | None = None, python: str = "python",
                 num_cpus_per_process: float = 0.0, num_gpus_per_process: float = 0.0,
                 runtime_env: dict[str, Any] | None = None,
                 heartbeat_timeout: float = DEFAULT_HEARTBEAT_TIMEOUT_S,
                 stop_wait_s: float = 10.0, client: Any = None) -> None:
        address = address or os.environ.get(ADDRESS_ENV_VAR) or None
        if client is None and not address:
            raise ValueError(
                f"RayJobLauncher needs the Ray cluster address, given: address={address!r} and "
                f"${ADDRESS_ENV_VAR} unset; pass address='http://HEAD:8265' or set "
                f"{ADDRESS_ENV_VAR}.")
        if max_concurrent is not None and (not isinstance(max_concurrent, int)
                                           or isinstance(max_concurrent, bool) or max_concurrent < 1):
            raise ValueError(f"max_concurrent must be None or an int >= 1, given: {max_concurrent!r}")
        for name, value in (("num_cpus_per_process", num_cpus_per_process),
                            ("num_gpus_per_process", num_gpus_per_process),
                            ("stop_wait_s", stop_wait_s)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise ValueError(f"{name} must be a number >= 0, given: {value!r}")
        if client is None:
            try:
                from ray.job_submission import JobSubmissionClient
            except ImportError as exc:
                raise ImportError(f"RayJobLauncher needs Ray: {_INSTALL_HINT}.") from exc
            client = JobSubmissionClient(address)
        self.root = Path(root)
        self.registry = RunRegistry(self.root)
        self.address = address
        self.client = client
        self.max_concurrent = max_concurrent
        self.runner_module = runner_module
        self.extra_env = dict(env or {})
        self.python = python
        self.num_cpus_per_process = float(num_cpus_per_process)
        self.num_gpus_per_process = float(num_gpus_per_process)
        self.base_runtime_env = dict(runtime_env or {})
        self.heartbeat_timeout = float(heartbeat_timeout)
        self.stop_wait_s = float(stop_wait_s)
        self._lock = threading.RLock()

    # -- job bookkeeping ---------------------------------------------------------------------

    def job_id(self, run_id: str) -> str | None:
        """The submission id of the run's latest Ray job (None if never submitted)."""
        info = read_ray_job(self.registry.run_dir(run_id))
        return None if info is None else info.get("submission_id")

    def job_status(self, run_id: str) -> str | None:
        """The latest job's status (``PENDING``, ``RUNNING``, ``SUCCEEDED``, ``FAILED``,
        ``STOPPED``), ``'MISSING'`` when the cluster no longer knows it, None if never submitted."""
        job = self.job_id(run_id)
        if job is None:
            return None
        try:
            return _status_name(self.client.get_job_status(job))
        except Exception as exc:  # the cluster forgot the job (restarted head) or is unreachable
            if "does not exist" in str(exc) or "not found" in str(exc).lower():
                return "MISSING"
            raise

    def logs(self, run_id: str) -> str:
        """The job's logs as Ray keeps them (``get_job_logs``); ``''`` if never submitted.

        The same output is appended to ``runs/<id>/worker.log`` on the shared storage.
        """
        job = self.job_id(run_id)
        return "" if job is None else str(self.client.get_job_logs(job))

    def _write_job(self, run_id: str, submission_id: str, entrypoint: str) -> None:
        folder = self.registry.run_dir(run_id)
        info = read_ray_job(folder) or {"history": []}
        info["history"] = [*info.get("history", []), submission_id]
        info.update(address=self.address, submission_id=submission_id,
                    submitted_at=time.time(), entrypoint=entrypoint)
        self._save_job(folder, info)

    @staticmethod
    def _save_job(folder: Path, info: dict[str, Any]) -> None:
        tmp = folder / (RAY_JOB_FILE + ".tmp")
        tmp.write_text(json.dumps(info, indent=2), encoding="utf-8")
        os.replace(tmp, folder / RAY_JOB_FILE)

    # -- queue -------------------------------------------------------------------------------

    def _submitted(self, record: RunRecord) -> bool:
        """A queued run that has a job of its own (pending, running, or ended before it ran:
        ``_sync`` records the outcome of that one)."""
        return self.job_id(record.run_id) is not None

    def running_count(self) -> int:
        """Runs of this workspace with a live Ray job (pending or running)."""
        active = self.registry.list_runs(("queued", "running"))
        return sum(1 for r in active if self.job_status(r.run_id) in ("PENDING", "RUNNING"))

    def poll(self) -> list[str]:
        """Follows the job statuses into the registry, marks lost runs, and submits queued runs.

        Returns the ids of the runs submitted by this call.
        """
        with self._lock:
            self._sync()
            self.reap_lost()
            started = self.start_queued()
        self._start_due_mirrors()
        return started

    def _free_slots(self) -> int | None:
        return None if self.max_concurrent is None else self.max_concurrent - self.running_count()

    def _started_here(self, record: RunRecord) -> bool:
        return self._submitted(record)

    def start(self, run_id: str) -> RunRecord:
        """Submits the Ray job of a queued run now (ignores ``max_concurrent``)."""
        with self._lock:
            record, folder = self._queued_run_folder(run_id)
            attempt = len((read_ray_job(folder) or {}).get("history", [])) + 1
            submission_id = f"workbench-{run_id}-{attempt}"
            entrypoint = self.entrypoint(record, folder)
            kwargs: dict[str, Any] = {}
            n = max(1, record.num_processes)
            if self.num_cpus_per_process:
                kwargs["entrypoint_num_cpus"] = self.num_cpus_per_process * n
            if self.num_gpus_per_process:
                kwargs["entrypoint_num_gpus"] = self.num_gpus_per_process * n
            with open(folder / paths.WORKER_LOG, "ab") as log:
                log.write(f"\n=== {time.strftime('%Y-%m-%d %H:%M:%S')} ray job {submission_id} "
                          f"at {self.address}: {entrypoint}\n".encode())
            # The job file first: a poll racing with this submit must see the run as ours.
            self._write_job(run_id, submission_id, entrypoint)
            self.client.submit_job(entrypoint=entrypoint, runtime_env=self._runtime_env(),
                                   submission_id=submission_id,
                                   metadata={"workbench_run_id": run_id}, **kwargs)
            return self.registry.get(run_id)

    def entrypoint(self, record: RunRecord, folder: Path) -> str:
        """The job's shell command: the runner (under torchrun for several processes), its output
        copied into ``worker.log`` by ``python -m estimator_workbench.execution.ray_launcher tee``."""
        python = self.python
        if record.num_processes > 1:
            cmd = [python, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
                   str(record.num_processes), "-m", self.runner_module, str(folder)]
        else:
            cmd = [python, "-m", self.runner_module, str(folder)]
        tee = [python, "-m", "estimator_workbench.execution.ray_launcher", "tee", paths.WORKER_LOG, "--"]
        return f"cd {shlex.quote(str(folder))} && exec {shlex.join(tee + cmd)}"

    def _runtime_env(self) -> dict[str, Any]:
        runtime_env = json.loads(json.dumps(self.base_runtime_env))  # a deep copy
        env_vars = dict(runtime_env.get("env_vars") or {})
        env_vars.update(self.extra_env)
        env_vars["PYTHONUNBUFFERED"] = "1"
        env_vars[paths.ENV_VAR] = str(self.root)
        env_vars.setdefault("RAY_JOB_STOP_WAIT_TIME_S", str(max(1, round(self.stop_wait_s))))
        runtime_env["env_vars"] = without_secrets(env_vars)  # the job executes user code
        return runtime_env

    # -- status ------------------------------------------------------------------------------

    def _sync(self) -> None:
        """Moves the registry along the job statuses of queued and running Ray runs."""
        for record in self.registry.list_runs(("queued", "running")):
            if not is_ray_run(self.registry.run_dir(record.run_id)):
                continue
            status = self.job_status(record.run_id)
            self._apply(record, status)

    def _apply(self, record: RunRecord, status: str | None) -> None:
        run_id, job = record.run_id, self.job_id(record.run_id)
        with contextlib.suppress(InvalidTransitionError):
            if status == "RUNNING" and record.status == "queued":
                self.registry.set_status(run_id, "running", expected="queued")
            elif status in (*_TERMINAL, "MISSING"):
                # Re-read: the runner records its outcome just before the job ends.
                record = self.registry.get(run_id)
                if record.status == "queued" and status != "MISSING" and job is not None:
                    if status == "STOPPED":
                        self.registry.set_status(run_id, "cancelled", expected="queued",
                                                 error="cancelled: Ray job stopped before it ran")
                        return
                    self.registry.set_status(run_id, "running", expected="queued")
                    record = self.registry.get(run_id)
                if record.status != "running":
                    return
                message = self._job_message(job)
                if status == "FAILED":
                    self.registry.set_status(run_id, "failed", expected="running",
                                             error=f"Ray job {job} FAILED: {message}")
                elif status == "STOPPED":
                    self.registry.set_status(run_id, "cancelled", expected="running",
                                             error=f"cancelled: Ray job {job} stopped")
                elif status == "MISSING":
                    self.registry.set_status(run_id, "lost", expected="running",
                                             error=f"lost: Ray job {job} is unknown to the "
                                                   f"cluster at {self.address}")
                else:
                    self.registry.set_status(
                        run_id, "lost", expected="running",
                        error=f"lost: Ray job {job} ended without the runner recording an "
                              "outcome; see worker.log")

    def _job_message(self, job: str | None) -> str:
        if job is None:
            return ""
        try:
            info = self.client.get_job_info(job)
        except Exception:
            return ""
        return str(getattr(info, "message", "") or "")

    def reap_lost(self) -> list[str]:
        """Marks ``lost`` the running Ray runs whose job is gone or whose heartbeat is too old.

        Runs not submitted to Ray are left alone (their pid is not for this launcher to judge).
        """
        lost = []
        now = time.time()
        for record in self.registry.list_runs("running"):
            if not is_ray_run(self.registry.run_dir(record.run_id)):
                continue
            status = self.job_status(record.run_id)
            if status in (*_TERMINAL, "MISSING"):
                self._apply(record, status)
                if self.registry.get(record.run_id).status == "lost":
                    lost.append(record.run_id)
                continue
            if record.heartbeat_at is not None and now - record.heartbeat_at > self.heartbeat_timeout:
                with contextlib.suppress(InvalidTransitionError):
                    self.registry.set_status(
                        record.run_id, "lost", expected="running",
                        error=f"lost: no heartbeat for {now - record.heartbeat_at:.0f}s")
                    lost.append(record.run_id)
        return lost

    # -- control -----------------------------------------------------------------------------

    def _drop_queued(self, run_id: str) -> None:
        self._stop_job(run_id)  # the pending job of a queued run that is stopped

    def _stop_job(self, run_id: str) -> bool:
        job = self.job_id(run_id)
        if job is None:
            return False
        try:
            return bool(self.client.stop_job(job))
        except Exception as exc:
            if "does not exist" in str(exc):
                return False
            raise

    def cancel(self, run_id: str, grace: float | None = None, *, wait: bool = True) -> RunRecord:
        """``stop_job``: Ray sends SIGTERM to the entrypoint and every descendant (all ranks), then
        SIGKILL after ``stop_wait_s``; the run ends ``cancelled``. Returns once the job has ended
        (at most ``grace`` plus ``stop_wait_s`` plus a few seconds), or with ``wait=False`` once
        the stop is sent (``poll`` records the outcome when the job has ended; the UI).

        Args:
            grace: extra seconds to wait for the job to end with ``wait`` (default ``stop_wait_s``).
            wait: block until the job has ended and the run is ``cancelled``; False for the UI.
        """
        with self._lock:
            record = self.registry.get(run_id)
            if record.status not in ("queued", "running"):
                raise ValueError(f"Run {run_id!r} is {record.status!r}; only a running or queued "
                                 "run can be cancelled.")
            self._stop_job(run_id)
            if record.status == "queued":  # nothing runs yet: no processes to wait for
                with contextlib.suppress(InvalidTransitionError):
                    return self.registry.set_status(run_id, "cancelled", expected="queued")
                record = self.registry.get(run_id)
            if not wait:  # Ray escalates to SIGKILL by itself: the UI does not wait for it
                return record
            deadline = (time.monotonic() + (self.stop_wait_s if grace is None else float(grace))
                        + self.stop_wait_s + 5.0)
            while time.monotonic() < deadline:
                status = self.job_status(run_id)
                if status is None or status in (*_TERMINAL, "MISSING"):
                    break
                time.sleep(0.1)
            record = self.registry.get(run_id)
            with contextlib.suppress(InvalidTransitionError):
                if record.status == "queued":
                    return self.registry.set_status(run_id, "cancelled", expected="queued")
                if record.status in ("running", "lost"):
                    return self.registry.set_status(
                        run_id, "cancelled", error=record.error or "cancelled by the user")
            return self.registry.get(run_id)

    def resume(self, run_id: str) -> RunRecord:
        """Puts a finished run back in the queue (training continues from its last checkpoint in
        the same folder) and submits a new job for it."""
        with self._lock:
            record = self.registry.get(run_id)
            if record.status in ("queued", "running"):
                raise ValueError(f"Run {run_id!r} is {record.status!r}; only a stopped, cancelled, "
                                 "lost, failed or finished run can be resumed.")
            # The previous job may still be exiting (the runner records its outcome first).
            deadline = time.monotonic() + 30.0
            while self.job_status(run_id) in ("PENDING", "RUNNING"):
                if time.monotonic() > deadline:
                    raise ValueError(f"Run {run_id!r} still has a live Ray job "
                                     f"{self.job_id(run_id)!r}; cancel it before resuming.")
                time.sleep(0.1)
            folder = self.registry.run_dir(run_id)
            with contextlib.suppress(FileNotFoundError):
                (folder / paths.STOP_FILE).unlink()
            info = read_ray_job(folder)
            if info is not None:  # the ended job is history: the queued run has no job yet
                info["submission_id"] = None
                self._save_job(folder, info)
            self.registry.set_status(run_id, "queued")
            self.poll()
            return self.registry.get(run_id)

    def _run_ended(self, run_id: str) -> bool:
        return self.job_status(run_id) not in ("PENDING", "RUNNING")

    def shutdown(self, grace: float = 5.0) -> None:
        """Cancels every queued or running Ray run of this workspace (tests, CLI teardown)."""
        for record in self.registry.list_runs(("queued", "running")):
            if is_ray_run(self.registry.run_dir(record.run_id)):
                with contextlib.suppress(Exception):
                    self.cancel(record.run_id, grace=grace, wait=True)

    def process(self, run_id: str) -> Any:
        """Always None: the processes run on the Ray cluster (interface parity with LocalLauncher)."""
        return None


# -- job-side helper --------------------------------------------------------------------------


def _tee(log_path: str, cmd: list[str]) -> int:
    """Runs ``cmd``, copying its output to stdout (Ray's job log) and appending it to ``log_path``.

    SIGTERM is ignored here: Ray signals every process of the job, so the runner gets it directly
    and this copier keeps going until the runner has written its last line.
    """
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL)
    previous = signal.signal(signal.SIGTERM, signal.SIG_IGN)  # after the spawn: not inherited
    try:
        if proc.stdout is not None:
            with open(log_path, "ab", buffering=0) as log:
                for line in iter(proc.stdout.readline, b""):
                    sys.stdout.buffer.write(line)
                    sys.stdout.flush()
                    log.write(line)
        return proc.wait()
    finally:
        signal.signal(signal.SIGTERM, previous)


def main(argv: list[str] | None = None) -> int:
    """``python -m estimator_workbench.execution.ray_launcher tee LOG -- CMD...`` (the job's entrypoint wrapper)."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) < 4 or args[0] != "tee" or args[2] != "--":
        print("usage: python -m estimator_workbench.execution.ray_launcher tee LOG -- CMD [ARGS...]", file=sys.stderr)
        return 2
    code = _tee(args[1], args[3:])
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    paths.owner_only_umask()  # the Ray job writes worker.log into the workspace (issue 24.8)
    sys.exit(main())
