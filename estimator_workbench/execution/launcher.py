"""``LocalLauncher``: runs queued runs as background processes on this machine.

Each run executes in a fresh interpreter (``python -m estimator_workbench.execution.runner RUN_DIR``, or under
``torch.distributed.run --standalone`` for ``num_processes > 1``) spawned with
``subprocess.Popen(start_new_session=True)``: the UI process is never forked (forking after CUDA
initialisation breaks CUDA), the run survives the UI, and cancel can signal the whole process
group (DataLoader workers included). Output goes to ``runs/<id>/worker.log``.

Each attempt's group is recorded in ``runs/<id>/process.json`` with a marker its processes inherit
(``estimator_workbench.execution.processes.RunProcess``): cancel signals exactly that group, then ends what
carries the marker, never another run. Only launchers start runs (a finished runner hands the
queue to a detached starter, ``runner.start_queued_runs``).

The registry is the only shared state: a launcher started later (a restarted UI, the CLI) finds
running runs through their pid and heartbeat, and ``reap_lost`` marks those whose process is gone
as ``lost``. Concurrency is limited to ``max_concurrent`` runs (default: one per GPU, one on CPU;
``$WORKBENCH_MAX_CONCURRENT`` or ``estimator-workbench --max-concurrent N`` sets it), each pinned
to a GPU through ``CUDA_VISIBLE_DEVICES`` when there are GPUs; the rest wait ``queued``.
Evaluate and predict runs of a model another run trained (helper runs: the evaluation plots, a
prediction) take slots of their own (``helper_slots``, default 1, ``$WORKBENCH_HELPER_SLOTS``):
a 40-row prediction never waits behind a long training run (issue 28 item 8). A launcher instance is thread-safe (the UI shares one between sessions).

Warm spares (``warm_spares=1``, CPU only, single-process runs of ``estimator_workbench.execution.runner``): while a
slot is free the launcher keeps one runner pre-started (``estimator_workbench.execution.spares``) that a
starting run takes; ``shutdown`` kills it. The spare is replaced only when a slot is free again,
so pre-starting never competes for CPU with a run that is starting up. Lost-run detection lives
in ``estimator_workbench.execution.liveness``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any

from estimator_workbench.store import paths
from estimator_workbench.store.records import InvalidTransitionError, RegistryError, RunRecord
from estimator_workbench.store.registry import RunRegistry

if TYPE_CHECKING:
    from estimator_workbench.execution.ray_launcher import RayJobLauncher

from estimator_workbench.execution.base import Launcher
from estimator_workbench.execution.liveness import (
    end_run_processes,
    lost_verdict,
    runner_alive,
    runner_liveness,
    runner_process,
)
from estimator_workbench.execution.processes import (
    RUN_MARKER_ENV,
    RunProcess,
    detect_gpus,
    end_marked,
    kill_group,
    new_run_marker,
    without_secrets,
)
from estimator_workbench.execution.spares import WarmSpare

__all__ = ['DEFAULT_HEARTBEAT_TIMEOUT_S', 'HELPER_ACTIONS', 'HELPER_SLOTS_ENV', 'MAX_CONCURRENT_ENV',
           'QUEUE_HANDOFF_ENV', 'LocalLauncher', 'is_helper_run', 'make_launcher', 'slots_from_env']


DEFAULT_HEARTBEAT_TIMEOUT_S = 60.0

# The local concurrency as a setting (issue 28 item 8): the CLI's --max-concurrent/--helper-slots
# set these for the UI server and runners; a UI settings panel changes the shared launcher.
MAX_CONCURRENT_ENV = "WORKBENCH_MAX_CONCURRENT"
HELPER_SLOTS_ENV = "WORKBENCH_HELPER_SLOTS"
DEFAULT_HELPER_SLOTS = 1
HELPER_ACTIONS = ("evaluate", "predict")


def is_helper_run(record: RunRecord) -> bool:
    """Whether a run is a helper of another run: an evaluate or predict run from a model trained
    by another run (evaluation plots, "Evaluate this checkpoint", a prediction). Such runs are
    short and take the helper slots, not the training slots."""
    return record.action in HELPER_ACTIONS and bool(record.parent_run_id)


def slots_from_env(name: str, minimum: int) -> int | None:
    """The int in environment variable ``name`` (None when unset or empty); a value that is not
    an int >= ``minimum`` raises ``ValueError`` saying which variable to fix.

    Example:
        >>> slots_from_env("WORKBENCH_HELPER_SLOTS", 0)   # with WORKBENCH_HELPER_SLOTS=2  # doctest: +SKIP
        2
    """
    text = os.environ.get(name, "").strip()
    if not text:
        return None
    try:
        value = int(text)
    except ValueError:
        value = minimum - 1
    if value < minimum:
        raise ValueError(f"${name} must be an integer >= {minimum}, given: {text!r}. Fix or unset it.")
    return value


# Set in a CPU runner's environment to the launcher's concurrency: at its end the runner hands the
# queue to a detached starter (no UI or CLI may be left to poll it: ``run --detach``).
QUEUE_HANDOFF_ENV = "WORKBENCH_QUEUE_SLOTS"


def _open_worker_log(folder: Path, run_id: str) -> Any:
    """The run's worker log, opened for appending; a full disk says so (the run stays queued)."""
    try:
        return open(folder / paths.WORKER_LOG, "ab")
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)):
            raise RegistryError(f"disk full: run {run_id!r} cannot start, its {paths.WORKER_LOG} cannot be "
                                f"written in {folder} ({exc.strerror}). Free space there; the run stays queued "
                                "and starts at the next poll.") from None
        raise


class LocalLauncher(Launcher):
    """Starts, queues, stops, cancels, resumes and reaps runs of one workspace.

    Args:
        root: the workspace folder.
        max_concurrent: runs allowed at once (default: ``$WORKBENCH_MAX_CONCURRENT``, else the
            number of GPUs, or 1 without GPUs); helper runs are not counted.
        helper_slots: helper runs (``is_helper_run``) allowed at once beside them (default:
            ``$WORKBENCH_HELPER_SLOTS``, else 1); 0 queues them with the other runs.
        gpus: GPU ids to hand out (default: ``detect_gpus()``); ``[]`` forces CPU.
        heartbeat_timeout: seconds without a heartbeat after which a running run is ``lost``.
        runner_module: the module run as ``python -m <runner_module> RUN_DIR``.
        env: extra environment variables for runner processes (the UI's secrets, see
            ``SECRET_ENV_VARS``, are dropped from these and from the inherited ones).
        warm_spares: keep up to this many pre-started runners while slots are free (0 or 1;
            used only without GPUs, for single-process runs of ``estimator_workbench.execution.runner``).

    Example:
        >>> launcher = LocalLauncher("workspace")                                # doctest: +SKIP
        >>> launcher.submit(run_id)          # starts now or waits in the queue  # doctest: +SKIP
        >>> launcher.poll()      # call periodically: reap, start, detect lost  # doctest: +SKIP
        >>> launcher.stop(run_id)    # graceful: checkpoint, then ``stopped``   # doctest: +SKIP
        >>> launcher.cancel(run_id, wait=False)  # SIGTERM now, SIGKILL later  # doctest: +SKIP
    """

    def __init__(self, root: str | os.PathLike[str], max_concurrent: int | None = None, *,
                 gpus: list[str] | None = None,
                 heartbeat_timeout: float = DEFAULT_HEARTBEAT_TIMEOUT_S,
                 runner_module: str = "estimator_workbench.execution.runner",
                 env: dict[str, str] | None = None, warm_spares: int = 0,
                 helper_slots: int | None = None) -> None:
        self.root = Path(root)
        self.registry = RunRegistry(self.root)
        self.gpus = list(detect_gpus() if gpus is None else gpus)
        if max_concurrent is None:
            max_concurrent = slots_from_env(MAX_CONCURRENT_ENV, 1) or max(1, len(self.gpus))
        if not isinstance(max_concurrent, int) or isinstance(max_concurrent, bool) or max_concurrent < 1:
            raise ValueError(f"max_concurrent must be an int >= 1, given: {max_concurrent!r}")
        self.max_concurrent = max_concurrent
        if helper_slots is None:
            helper_slots = slots_from_env(HELPER_SLOTS_ENV, 0)
            helper_slots = DEFAULT_HELPER_SLOTS if helper_slots is None else helper_slots
        if not isinstance(helper_slots, int) or isinstance(helper_slots, bool) or helper_slots < 0:
            raise ValueError(f"helper_slots must be an int >= 0, given: {helper_slots!r}")
        self.helper_slots = helper_slots
        self.heartbeat_timeout = float(heartbeat_timeout)
        self.runner_module = runner_module
        self.extra_env = dict(env or {})
        if warm_spares not in (0, 1) or isinstance(warm_spares, bool):
            raise ValueError(f"warm_spares must be 0 or 1, given: {warm_spares!r}")
        self.warm_spares = warm_spares
        self._procs: dict[str, subprocess.Popen[bytes]] = {}
        self._gpu_of: dict[str, list[str]] = {}
        self._spares = WarmSpare(self.root, runner_module, self._child_env)
        self._handles: dict[str, RunProcess] = {}  # the process group of each run started here
        self._attempts: dict[str, int] = {}  # the attempt (fencing token) each of them owns
        self._cancelling: dict[str, threading.Thread] = {}  # run -> its escalation thread
        self._shutting_down = False  # shutdown's cancels start nothing
        self._lock = threading.RLock()

    # -- queue -------------------------------------------------------------------------------

    def running_count(self, pool: str | None = None) -> int:
        """Runs of this workspace in the ``running`` state whose process is alive on this machine
        (runs on a Ray cluster take no local slot); only those of ``pool`` ('runs' or 'helpers')
        when given."""
        return sum(1 for r in self.registry.list_runs("running")
                   if (pool is None or self._pool_of(r) == pool)
                   and not self._on_ray(r) and runner_alive(r, self._procs.get(r.run_id),
                                                            self.registry.run_dir(r.run_id)))

    def poll(self) -> list[str]:
        """Reaps finished children, marks lost runs, and starts queued runs while slots are free.

        Returns the ids of the runs started by this call.
        """
        with self._lock:
            self._reap_children()
            self.reap_lost(start_next=False)
            started = self.start_queued()
            if self._free_slots() > 0:
                self._ensure_spare()
        self._start_due_mirrors()
        return started

    def _pool_of(self, record: RunRecord) -> str:
        return "helpers" if self.helper_slots > 0 and is_helper_run(record) else "runs"

    def _free_slots(self) -> int:
        return self.max_concurrent - self.running_count("runs")

    def _free_by_pool(self) -> dict[str, int | None]:
        free: dict[str, int | None] = {"runs": self._free_slots()}
        if self.helper_slots > 0:
            free["helpers"] = self.helper_slots - self.running_count("helpers")
        return free

    def _started_here(self, record: RunRecord) -> bool:
        return record.run_id in self._procs

    def start(self, run_id: str) -> RunRecord:
        """Spawns the runner for a queued run now (ignores the concurrency limit).

        The run is marked ``running`` with the child's pid before this returns, so no second
        launcher starts it again.
        """
        with self._lock:
            record, folder = self._queued_run_folder(run_id)
            gpus = self._assign_gpus(record.num_processes)
            marker = new_run_marker(run_id)
            env = self._child_env(gpus, marker)
            cmd = self._command(record, folder)
            with _open_worker_log(folder, run_id) as log:
                stamp = time.strftime('%Y-%m-%d %H:%M:%S')
                spare_marker = self._spares.marker
                spare = proc = self._claim_spare(record)
                if proc is not None:
                    marker = spare_marker or marker
                    log.write(f"\n=== {stamp} launch: warm spare runner pid {proc.pid} "
                              f"({' '.join(cmd)})\n".encode())
                else:
                    log.write(f"\n=== {stamp} launch: {' '.join(cmd)}\n".encode())
                    log.flush()
                    proc = subprocess.Popen(
                        cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                        cwd=str(folder), env=env, start_new_session=True, close_fds=True)
            handle = RunProcess.of(proc.pid, marker)
            try:
                handle.save(folder)
                record = self.registry.set_status(run_id, "running", pid=proc.pid, expected="queued")
            except BaseException:
                kill_group(proc.pid, signal.SIGKILL)
                proc.wait()
                raise
            if spare is not None:
                # Only now, with the run marked running under the spare's pid: the spare's
                # runner must find it 'running', as a freshly spawned runner always does.
                WarmSpare.hand_over(spare, folder)  # a spare dead meanwhile is reaped as 'lost'
            self._procs[run_id] = proc
            self._handles[run_id] = handle
            self._attempts[run_id] = record.attempt
            self._gpu_of[run_id] = gpus
            return record

    # -- warm spare --------------------------------------------------------------------------

    def _spares_enabled(self) -> bool:
        return self.warm_spares > 0 and not self.gpus and self.runner_module == "estimator_workbench.execution.runner"

    def _ensure_spare(self) -> None:
        """Starts the spare runner when enabled and none is waiting."""
        if self._spares_enabled():
            self._spares.ensure()

    def _claim_spare(self, record: RunRecord) -> subprocess.Popen[bytes] | None:
        """The waiting spare, taken out of the pool (None when there is none or it died)."""
        if self._spares.process is None or record.num_processes > 1 or not self._spares_enabled():
            return None
        return self._spares.claim()

    def release_spare(self) -> None:
        """Ends the idle spare (if any) and keeps no more: for a short-lived caller, such as the
        CLI, that pre-started one for a single run and is about to exit. Runs are not touched."""
        with self._lock:
            self.warm_spares = 0
            self._spares.discard()

    def _command(self, record: RunRecord, folder: Path) -> list[str]:
        if record.num_processes > 1:
            return [sys.executable, "-m", "torch.distributed.run", "--standalone",
                    "--nproc-per-node", str(record.num_processes),
                    "-m", self.runner_module, str(folder)]
        return [sys.executable, "-m", self.runner_module, str(folder)]

    def _assign_gpus(self, count: int) -> list[str]:
        if not self.gpus:
            return []
        count = max(1, count)
        busy = {g for ids in self._gpu_of.values() for g in ids}
        free = [g for g in self.gpus if g not in busy]
        # Not enough free GPUs (e.g. a run started by hand beyond the limit): share them.
        return free[:count] if len(free) >= count else self.gpus[:count]

    def _child_env(self, gpus: list[str], marker: str) -> dict[str, str]:
        # Secrets go even when passed in ``env=``: the runner executes user code.
        env = without_secrets({**os.environ, **self.extra_env})
        env[RUN_MARKER_ENV] = marker  # every process of the attempt inherits it
        # The child imports the installed package (wheel or editable install), whatever its cwd:
        # no checkout is put on PYTHONPATH.
        env["PYTHONUNBUFFERED"] = "1"
        if self.gpus:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(gpus)
            env.pop(QUEUE_HANDOFF_ENV, None)  # GPU assignment stays with launchers that see every run
        elif self.runner_module == "estimator_workbench.execution.runner":
            env[QUEUE_HANDOFF_ENV] = str(self.max_concurrent)
            env[HELPER_SLOTS_ENV] = str(self.helper_slots)  # the starter's launcher keeps them too
        return env

    # -- liveness ----------------------------------------------------------------------------

    def _reap_children(self) -> None:
        for run_id, proc in list(self._procs.items()):
            if run_id in self._cancelling:
                continue  # its escalation thread records how it ended
            code = proc.poll()
            if code is None:
                continue
            del self._procs[run_id]
            self._gpu_of.pop(run_id, None)
            attempt = self._attempts.pop(run_id, None)
            handle = self._handles.pop(run_id, None)
            if handle is not None:
                # What the runner could not end itself (it was SIGKILLed, or crashed): the ranks
                # of its torchrun agent, user code's children in sessions of their own.
                with contextlib.suppress(Exception):
                    end_marked(handle.marker)
            with contextlib.suppress(Exception):
                # The runner died before recording an outcome (SIGKILL, OOM killer, crash of
                # the interpreter): its last checkpoint stays usable, so the run is resumable.
                self.registry.set_status(
                    run_id, "lost", error=f"lost: runner exited with code {code} without "
                    "recording an outcome; see worker.log", expected="running",
                    attempt=attempt)  # only the attempt this launcher started: a later one lives on

    def _on_ray(self, record: RunRecord) -> bool:
        """A run submitted to Ray (``ray_job.json``) and not started by this launcher: its pid,
        if any, is on another machine; ``RayJobLauncher`` follows it."""
        from estimator_workbench.execution.ray_launcher import (
            is_ray_run,  # lazy: ray_launcher imports this module
        )

        return record.run_id not in self._procs and is_ray_run(self.registry.run_dir(record.run_id))

    def reap_lost(self, *, start_next: bool = True) -> list[str]:
        """Marks ``lost`` the running runs whose process is gone or whose heartbeat is too old,
        then (``start_next``) starts the queued runs their slots free.

        Runs on Ray are left alone: their pid is not on this machine (e.g. the CLI on a login
        node), and ``RayJobLauncher.reap_lost`` judges them by their job.
        """
        lost = []
        now = time.time()
        for record in self.registry.list_runs("running"):
            own = record.run_id in self._procs
            if self._on_ray(record):
                continue
            proc = self._procs.get(record.run_id)
            liveness = runner_liveness(record, proc, self.registry.run_dir(record.run_id))
            if own and not liveness.alive:
                continue  # our own child ended: _reap_children records how (with its exit code)
            verdict = lost_verdict(record, now, own=own, liveness=liveness,
                                   heartbeat_timeout=self.heartbeat_timeout)
            if verdict is None:
                continue
            status, error = verdict
            # One writer per run: what is left of its processes dies before the run can be
            # resumed (a stopped runner woken later would write beside the new attempt).
            end_run_processes(record, proc, self.registry.run_dir(record.run_id))
            try:
                self.registry.set_status(record.run_id, status, error=error, expected="running")
            except InvalidTransitionError:
                continue
            except RegistryError as exc:  # a full disk: the next poll tries again
                print(f"workbench: cannot mark run {record.run_id} {status}: {exc}", file=sys.stderr)
                continue
            lost.append(record.run_id)
        if lost and start_next:
            with self._lock:
                self.start_queued()
        return lost

    # -- control -----------------------------------------------------------------------------

    def cancel(self, run_id: str, grace: float = 10.0, *, wait: bool = True) -> RunRecord:
        """SIGTERM to the run's process group, SIGKILL after ``grace`` seconds; status ``cancelled``.

        Signals exactly the group recorded when the run started (``RunProcess``), while its leader
        is still that process. A background thread, holding no lock while it waits, escalates to
        SIGKILL after ``grace``, then ends what carries the attempt's marker (ranks of a killed
        torchrun agent, user code's children in other sessions). The runner records ``cancelled``
        when it honours SIGTERM, else that thread does. A queued run is just marked ``cancelled``;
        a second cancel of the same run does nothing more.

        Args:
            run_id: the run.
            grace: seconds between SIGTERM and SIGKILL.
            wait: block until the run's processes are gone and its status is final (the CLI,
                ``shutdown``; at most about ``grace`` plus five seconds); False: return once
                SIGTERM is sent (the UI).

        Returns:
            The run's record: with ``wait=False`` still ``running`` while it winds down.
        """
        with self._lock:
            record = self.registry.get(run_id)
            if record.status == "queued":
                with contextlib.suppress(InvalidTransitionError):
                    return self.registry.set_status(run_id, "cancelled", expected="queued")
                record = self.registry.get(run_id)
            ender = self._cancelling.get(run_id)
            if ender is None:
                # A run marked lost whose runner lives after all (a verdict of an older
                # workbench, a wedged runner that woke up) is cancelled like a running one.
                live_lost = record.status == "lost" and runner_process(
                    record, self._procs.get(run_id), self.registry.run_dir(run_id)) is not None
                if record.status != "running" and not live_lost:
                    raise ValueError(f"Run {run_id!r} is {record.status!r}; only a running or queued "
                                     "run (or a lost one whose runner still lives) can be cancelled.")
                if self._on_ray(record):  # its pid means nothing here: never signal it
                    raise ValueError(
                        f"Run {run_id!r} runs on a Ray cluster ({self.registry.run_dir(run_id)}"
                        "/ray_job.json); a local launcher cannot cancel it. Set WORKBENCH_RAY_ADDRESS "
                        "to the cluster's dashboard address to cancel it through Ray, or use stop "
                        "(stop.request on the shared storage).")
                handle = self._handle(run_id, record)
                if handle is not None:
                    handle.signal_group(signal.SIGTERM)
                ender = threading.Thread(target=self._end_cancelled, args=(run_id, handle, grace),
                                         name=f"workbench-cancel-{run_id}")
                self._cancelling[run_id] = ender
                ender.start()
        if wait:
            ender.join()
        return self.registry.get(run_id)

    def _handle(self, run_id: str, record: RunRecord) -> RunProcess | None:
        """The process group of the run's current attempt (started here, or by another launcher)."""
        return self._handles.get(run_id) or RunProcess.current(self.registry.run_dir(run_id), record.pid)

    def _end_cancelled(self, run_id: str, handle: RunProcess | None, grace: float) -> None:
        """The rest of ``cancel``, in its own thread: SIGKILL after ``grace``, then the leftovers,
        then the final status."""
        try:
            proc = self._procs.get(run_id)
            if handle is not None:
                if not self._wait_ended(handle, proc, grace):
                    handle.signal_group(signal.SIGKILL)
                    self._wait_ended(handle, proc, 5.0)
                end_marked(handle.marker)
            with self._lock:
                if proc is not None:
                    with contextlib.suppress(Exception):
                        proc.wait(timeout=1)
                    self._procs.pop(run_id, None)
                    self._handles.pop(run_id, None)
                    self._gpu_of.pop(run_id, None)
                record = self.registry.get(run_id)
                same_attempt = handle is None or record.pid in (None, handle.pid)
                if record.status in ("running", "lost") and same_attempt:
                    self.registry.set_status(run_id, "cancelled",
                                             error=record.error or "cancelled by the user")
                self._cancelling.pop(run_id, None)
                if not self._shutting_down:
                    self.start_queued()  # the slot is free: the next queued run starts now
        except Exception:  # a background thread: say what went wrong, never raise into nothing
            traceback.print_exc()
        finally:
            with self._lock:
                self._cancelling.pop(run_id, None)

    @staticmethod
    def _wait_ended(handle: RunProcess, proc: subprocess.Popen[bytes] | None, timeout: float) -> bool:
        """Waits for the run's leader to exit (reaping it when it is this launcher's child)."""
        if proc is None:
            return handle.wait_gone(timeout)
        try:
            proc.wait(timeout=timeout)
            return True
        except subprocess.TimeoutExpired:
            return False

    def resume(self, run_id: str, wait: float = 5.0) -> RunRecord:
        """Puts a finished run back in the queue (same model_dir: training continues from its last
        checkpoint) and starts it when a slot is free.

        Refuses while the run's previous runner process (same pid and start time) still exists,
        after waiting up to ``wait`` seconds for a runner that recorded its outcome to exit: two
        processes must never write one run.
        """
        with self._lock:
            record = self.registry.get(run_id)
            if record.status in ("queued", "running"):
                raise ValueError(f"Run {run_id!r} is {record.status!r}; only a stopped, cancelled, "
                                 "lost, failed or finished run can be resumed.")
            deadline = time.monotonic() + wait
            while (old := runner_process(record, self._procs.get(run_id), self.registry.run_dir(run_id))) is not None and time.monotonic() < deadline:
                time.sleep(0.05)
            if old is not None:
                raise ValueError(
                    f"Run {run_id!r} cannot be resumed yet: its previous runner (pid {old}, attempt "
                    f"{record.attempt}) is still alive although the run is {record.status!r}. Resuming "
                    "now would let two processes write the run. Wait for it to exit, or end it "
                    f"(kill -KILL -- -{old}), then resume.")
            folder = self.registry.run_dir(run_id)
            with contextlib.suppress(FileNotFoundError):
                (folder / paths.STOP_FILE).unlink()
            self.registry.set_status(run_id, "queued")
            self.poll()
            return self.registry.get(run_id)

    def _run_ended(self, run_id: str) -> bool:
        return run_id not in self._procs  # a process started elsewhere is not ours to wait for

    def shutdown(self, grace: float = 5.0) -> None:
        """Cancels every run this launcher started and is still running, and ends the warm spare
        (tests, CLI teardown); starts no queued run."""
        with self._lock:
            self._shutting_down = True
            self._spares.discard()
        for run_id in list(self._procs):
            with contextlib.suppress(Exception):
                self.cancel(run_id, grace=grace, wait=True)
        for ender in list(self._cancelling.values()):  # cancels asked for earlier
            ender.join()
        for run_id, proc in list(self._procs.items()):
            kill_group(proc.pid, signal.SIGKILL)
            with contextlib.suppress(Exception):
                proc.wait(timeout=5)
            self._procs.pop(run_id, None)
        with self._lock:
            self._spares.discard()  # one a concurrent poll() started while the runs were cancelled

    def process(self, run_id: str) -> Any:
        """The ``Popen`` of a run this launcher started (or None)."""
        return self._procs.get(run_id)


def make_launcher(root: str | os.PathLike[str], *, runner_module: str = "estimator_workbench.execution.runner",
                  env: dict[str, str] | None = None,
                  warm_spares: int = 0) -> LocalLauncher | RayJobLauncher:
    """The launcher of a workspace: Ray Jobs when ``$WORKBENCH_RAY_ADDRESS`` is set, else local.

    Args:
        root: the workspace folder.
        runner_module: the module run as ``python -m <runner_module> RUN_DIR``.
        env: extra environment variables for runner processes.
        warm_spares: pre-started runners of a ``LocalLauncher`` (0 or 1); a Ray cluster starts
            its own processes, so ``RayJobLauncher`` gets none.

    Example:
        >>> launcher = make_launcher("workspace", warm_spares=1)             # doctest: +SKIP
        >>> type(launcher).__name__  # RayJobLauncher with $WORKBENCH_RAY_ADDRESS  # doctest: +SKIP
        'LocalLauncher'
    """
    from estimator_workbench.execution import (
        ray_launcher,  # cheap: Ray itself is imported only by RayJobLauncher
    )

    address = os.environ.get(ray_launcher.ADDRESS_ENV_VAR, "").strip()
    if address:
        return ray_launcher.RayJobLauncher(root, address, runner_module=runner_module, env=env)
    return LocalLauncher(root, runner_module=runner_module, env=env, warm_spares=warm_spares)
