"""Processes of runs: liveness, a run's process group and the processes it left behind, the GPUs
of this machine, and the environment without the UI's secrets.

How a run's processes are found and ended (issue 14 item 5, issue 17 item 4), through psutil so
that it works on macOS as well as Linux:

- every run attempt is started by a launcher in a session (process group) of its own, with a
  unique marker in its environment (``RUN_MARKER_ENV``) that every process it starts inherits
  (torchrun's agent and ranks, DataLoader workers, the pre-flight child, user code's
  ``subprocess`` children, even those in a session of their own);
- the launcher records ``RunProcess`` (pid, pgid, start, marker) in ``runs/<id>/process.json``
  when it starts the run: cancel signals exactly that group, only while its leader is still
  that process (a reused pid is never signalled), and never re-collects descendants;
- when the run has ended, ``end_marked`` kills whatever still carries its marker: a run queued
  behind it carries another marker, so it is never touched;
- a runner process (``set_up_run_process``) is a child subreaper on Linux, so the orphans of
  user code (``setsid``, double forks) re-parent to it, and at exit it ends every descendant
  (``end_descendants``), whatever the run's outcome;
- a torchrun rank arms the parent-death signal after checking that its parent is still its
  agent (``die_with_torchrun_agent``), so it dies with the agent even during its start-up.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import psutil

from estimator_workbench.store.guards import process_start_time, same_process

__all__ = [
    'PROCESS_FILE',
    'RUN_MARKER_ENV',
    'SECRET_ENV_VARS',
    'RunProcess',
    'after_run_exit',
    'descendants',
    'detect_gpus',
    'die_with_torchrun_agent',
    'end_descendants',
    'end_marked',
    'is_secret_env_var',
    'marked_processes',
    'new_run_marker',
    'pid_alive',
    'set_up_run_process',
    'spare_from_cleanup',
    'without_secrets',
]


# Secrets: runner processes execute user code, which must not read them. The UI password (and its
# file), and any variable whose name says secret -- *PASSWORD*, *SECRET*, *TOKEN*, *CREDENTIAL*,
# *_KEY / *_KEY_ID (AWS_SECRET_ACCESS_KEY, OPENAI_API_KEY, AZURE_STORAGE_KEY...) -- whatever its prefix.
# The MLflow mirror's URI may carry a password (https://user:password@host); its token and password
# (MLFLOW_TRACKING_TOKEN, MLFLOW_TRACKING_PASSWORD) are secrets by name. Only the sync process,
# which runs no user code, gets them (execution.mirror_trigger).
SECRET_ENV_VARS = ("WORKBENCH_PASSWORD", "WORKBENCH_PASSWORD_FILE", "GOOGLE_APPLICATION_CREDENTIALS",
                   "AZURE_CLIENT_CERTIFICATE_PATH", "AZURE_STORAGE_CONNECTION_STRING", "WORKBENCH_MLFLOW_URI")


_SECRET_WORDS = ("PASSWORD", "PASSWD", "SECRET", "TOKEN", "CREDENTIAL", "PRIVATE_KEY", "API_KEY",
                 "ACCESS_KEY")
_SECRET_ENDINGS = ("_KEY", "_KEY_ID", "_PASS", "_PWD")


def is_secret_env_var(name: str) -> bool:
    """Whether a variable of the UI's environment is kept from runner processes (see
    ``SECRET_ENV_VARS``): ``WORKBENCH_PASSWORD``, ``AWS_SECRET_ACCESS_KEY``, ``HF_TOKEN`` yes;
    ``WORKBENCH_HOME``, ``PATH``, ``KEYBOARD`` no."""
    upper = name.upper()
    if upper in SECRET_ENV_VARS:
        return True
    return any(word in upper for word in _SECRET_WORDS) or upper.endswith(_SECRET_ENDINGS)


def without_secrets(env: Mapping[str, str]) -> dict[str, str]:
    """A copy of ``env`` without the UI's secrets (``is_secret_env_var``), for child processes.

    Example:
        >>> without_secrets({"WORKBENCH_PASSWORD": "s3cret", "WORKBENCH_HOME": "/ws"})
        {'WORKBENCH_HOME': '/ws'}
    """
    return {k: v for k, v in env.items() if not is_secret_env_var(k)}


def detect_gpus() -> list[str]:
    """GPU ids this machine offers, honouring an existing ``CUDA_VISIBLE_DEVICES``.

    Uses ``torch.cuda.device_count()`` only when torch is already imported (importing torch in the
    UI process just to count GPUs costs a second); otherwise asks ``nvidia-smi -L``.
    """
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return [d.strip() for d in visible.split(",") if d.strip() and d.strip() != "-1"]
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            return [str(i) for i in range(torch.cuda.device_count())]
        except Exception:
            return []
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=10,
                             check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [str(i) for i, line in enumerate(out.splitlines()) if line.startswith("GPU ")]


# A run attempt's marker: inherited by every process of the attempt, unique to it (see the module
# docstring). Not a secret: it only tells the attempt's processes from everyone else's.
RUN_MARKER_ENV = "WORKBENCH_RUN_MARKER"


PROCESS_FILE = "process.json"  # RunProcess of the run's current attempt, in its run folder


_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
_PR_SET_CHILD_SUBREAPER = 36


def new_run_marker(label: str) -> str:
    """A fresh marker for one attempt of a run (or a warm spare): ``label`` plus random hex.

    Example:
        >>> new_run_marker("r-1").startswith("r-1:")
        True
    """
    return f"{label}:{secrets.token_hex(8)}"


def pid_alive(pid: int | None) -> bool:
    """Whether a process with this pid exists and is not a zombie."""
    if not pid or pid <= 0:
        return False
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True


def _running(proc: psutil.Process) -> bool:
    """Still the same process (psutil checks the create time) and not a zombie."""
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True


@dataclass(frozen=True)
class RunProcess:
    """The process group of one run attempt, as its launcher started it.

    Attributes:
        pid: the leader (the runner, or torchrun's agent), started in a session of its own.
        pgid: its process group (the pid itself).
        started: the leader's start (``store.guards.process_start_time``: seconds since boot on
            Linux, which a step of the wall clock does not move), so that a reused pid is never
            signalled. A ``process.json`` written before issue 24 holds psutil's ``create_time``.
        marker: the ``RUN_MARKER_ENV`` value every process of the attempt inherits (None for a run
            started before markers existed).

    Example:
        >>> child = subprocess.Popen(["sleep", "60"], start_new_session=True)     # doctest: +SKIP
        >>> handle = RunProcess.of(child.pid, marker="r-1:ab12")               # doctest: +SKIP
        >>> handle.signal_group(signal.SIGTERM), handle.wait_gone(5.0)         # doctest: +SKIP
        (True, True)
    """

    pid: int
    pgid: int
    started: float
    marker: str | None = None

    @classmethod
    def of(cls, pid: int, marker: str | None = None) -> RunProcess:
        """The group led by ``pid`` now (call right after starting it)."""
        started = process_start_time(pid)
        if started is None:
            started = 0.0  # already gone: never matches a live process
        try:
            pgid = os.getpgid(pid)
        except OSError:
            pgid = pid
        return cls(pid=pid, pgid=pgid, started=started, marker=marker)

    def save(self, folder: str | os.PathLike[str]) -> None:
        """Writes ``PROCESS_FILE`` into the run folder (atomically)."""
        path = Path(folder) / PROCESS_FILE
        partial = path.with_name(f".{PROCESS_FILE}.{os.getpid()}.tmp")
        partial.write_text(json.dumps(asdict(self)), encoding="utf-8")
        os.replace(partial, path)

    @classmethod
    def load(cls, folder: str | os.PathLike[str]) -> RunProcess | None:
        """The ``PROCESS_FILE`` of a run folder, or None when there is none (or it is unreadable)."""
        try:
            data: dict[str, Any] = json.loads((Path(folder) / PROCESS_FILE).read_text("utf-8"))
            started = data["started"] if "started" in data else data["create_time"]  # before issue 24
            return cls(pid=int(data["pid"]), pgid=int(data["pgid"]), started=float(started),
                       marker=data.get("marker"))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    @classmethod
    def current(cls, folder: str | os.PathLike[str], pid: int | None) -> RunProcess | None:
        """The attempt whose leader is the registered ``pid``: from ``PROCESS_FILE`` when it is
        that attempt's, else (a run started before the file existed) the group ``pid`` leads now."""
        handle = cls.load(folder)
        if handle is not None and handle.pid == pid:
            return handle
        return cls.of(pid) if pid else None

    def _leader(self) -> psutil.Process | None:
        """The leader while it is still the process that was started (zombie or not). When the
        starts cannot tell (an epoch start recorded before issue 24: a clock step moves it), the
        attempt's marker in the process's environment does."""
        same = same_process(self.pid, self.started)
        try:
            proc = psutil.Process(self.pid)
            if same is None and self.marker:
                same = proc.environ().get(RUN_MARKER_ENV) == self.marker
            if same:
                return proc
        except psutil.Error:
            pass
        return None

    def alive(self) -> bool:
        """Whether the leader is still running (not a zombie, not a reused pid)."""
        leader = self._leader()
        return leader is not None and _running(leader)

    def signal_group(self, sig: int) -> bool:
        """Sends ``sig`` to the run's process group while its leader is still the same process
        (a zombie leader still holds the group id); False when it is gone."""
        if self._leader() is None:
            return False
        try:
            os.killpg(self.pgid, sig)
        except ProcessLookupError:
            return False
        except PermissionError:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(self.pid, sig)
        return True

    def wait_gone(self, timeout: float) -> bool:
        """Waits until the leader has exited; False when it still runs at ``timeout``."""
        deadline = time.monotonic() + timeout
        while self.alive():
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)
        return True


def marked_processes(marker: str) -> list[psutil.Process]:
    """Every live process (but this one) whose environment carries ``RUN_MARKER_ENV=marker``.

    Processes of other users, whose environment cannot be read, are skipped.
    """
    found = []
    me = os.getpid()
    for proc in psutil.process_iter():
        if proc.pid == me:
            continue
        try:
            if proc.environ().get(RUN_MARKER_ENV) == marker and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except (psutil.Error, OSError):
            continue
    return found


def _end(procs: list[psutil.Process], grace: float) -> list[int]:
    """SIGTERM (when ``grace`` > 0), then SIGKILL after ``grace`` seconds, to every process still
    running; returns their pids."""
    procs = [p for p in procs if _running(p)]
    if grace > 0:
        for proc in procs:
            with contextlib.suppress(psutil.Error):
                proc.terminate()  # psutil refuses a reused pid (NoSuchProcess)
        deadline = time.monotonic() + grace
        while any(_running(p) for p in procs) and time.monotonic() < deadline:
            time.sleep(0.05)
    for proc in procs:
        if _running(proc):
            with contextlib.suppress(psutil.Error):
                proc.kill()
    return [p.pid for p in procs]


def end_marked(marker: str | None, grace: float = 0.0) -> list[int]:
    """Ends every process that carries the run attempt's ``marker`` (SIGKILL, or SIGTERM first
    when ``grace`` > 0); returns their pids. Called once the attempt's leader has exited: what is
    left are the ranks of a dead agent and user code's children in sessions of their own."""
    if not marker:
        return []
    return _end(marked_processes(marker), grace)


def descendants(pid: int) -> dict[int, float]:
    """Every live descendant of ``pid`` (children, grandchildren, ..., in any session) -> its
    start (``process_start_time``, to tell a process from a later one that reuses its pid).

    Example:
        >>> child = subprocess.Popen(["sleep", "5"])                         # doctest: +SKIP
        >>> child.pid in descendants(os.getpid())                            # doctest: +SKIP
        True
    """
    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return {}
    found = {}
    for child in children:
        with contextlib.suppress(psutil.Error):
            started = process_start_time(child.pid)
            if child.status() != psutil.STATUS_ZOMBIE and started is not None:
                found[child.pid] = started
    return found


def _tree_processes(tree: Mapping[int, float]) -> list[psutil.Process]:
    """The processes of a ``descendants`` snapshot that are still the same processes."""
    found = []
    for pid, created in tree.items():
        with contextlib.suppress(psutil.Error):
            proc = psutil.Process(pid)
            if same_process(pid, created) and _running(proc):
                found.append(proc)
    return found


def kill_tree(tree: Mapping[int, float], root: int) -> None:
    """SIGKILLs every process of a ``descendants`` snapshot that is still the same process, and
    the process groups they lead (a rank's own DataLoader workers), never this process's group."""
    own_group = os.getpgrp()
    leaders = set(tree) | {root}
    for proc in _tree_processes(tree):
        with contextlib.suppress(OSError):
            pgid = os.getpgid(proc.pid)
            if pgid in leaders and pgid != own_group:
                os.killpg(pgid, signal.SIGKILL)
        with contextlib.suppress(psutil.Error):
            proc.kill()


def _wait_tree_gone(tree: Mapping[int, float], timeout: float) -> bool:
    """Waits until no process of the snapshot is alive; False when some still are at ``timeout``."""
    deadline = time.monotonic() + timeout
    while _tree_processes(tree):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def end_descendants(spare: Iterable[int] = (), grace: float = 1.0) -> list[int]:
    """Ends every descendant of this process, but those in ``spare`` and below them: SIGTERM,
    then SIGKILL after ``grace`` seconds. Returns their pids."""
    try:
        children = psutil.Process().children(recursive=True)
    except psutil.Error:
        return []
    keep = set(spare)
    for pid in list(keep):
        keep.update(descendants(pid))
    return _end([c for c in children if c.pid not in keep], grace)


# -- a runner process's set-up --------------------------------------------------------------------

_SET_UP = False
_SPARED: set[int] = set()  # children that outlive the run on purpose (the queue's starter)
_AFTER_CLEANUP: list[Any] = []


def _prctl(option: int, value: int) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(option, value, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def _is_torchrun_agent(pid: int) -> bool:
    """Whether ``pid`` is this rank's torchrun agent: with a run marker, the agent carries the same
    one; without (torchrun started by hand, a Ray job), its command line is torchrun's."""
    if pid <= 1:
        return False
    try:
        proc = psutil.Process(pid)
        marker = os.environ.get(RUN_MARKER_ENV)
        if marker:
            return proc.environ().get(RUN_MARKER_ENV) == marker
        return any("torch.distributed.run" in part or part.endswith("torchrun")
                   for part in proc.cmdline())
    except psutil.AccessDenied:
        return True  # cannot tell: trust the parent, as before markers
    except psutil.Error:
        return False


def die_with_torchrun_agent() -> bool:
    """Under ``torch.distributed.run``, asks Linux to SIGKILL this rank when its agent dies.

    torchrun starts each rank in a session of its own, so a rank that ignores SIGTERM or hangs
    in a collective would outlive an agent killed with SIGKILL (cancel's escalation) as an
    orphan. ``prctl(PR_SET_PDEATHSIG, SIGKILL)`` ties the rank to its parent. The parent is read
    first and checked to be the agent (same run marker, or torchrun's command line): an agent
    that died during the rank's start-up has left an orphan whose parent is now init or a
    subreaper, and the rank then ends itself at once; the parent is read again after the call,
    for an agent that dies in between. Applies only when torchrun's ``LOCAL_RANK`` and
    ``WORLD_SIZE`` are set, on Linux; returns whether the death signal is armed.

    Example:
        >>> die_with_torchrun_agent()  # not under torchrun: does nothing
        False
    """
    if not sys.platform.startswith("linux") or not {"LOCAL_RANK", "WORLD_SIZE"} <= set(os.environ):
        return False
    parent = os.getppid()
    if not _is_torchrun_agent(parent):  # the agent died before this rank got here
        os.kill(os.getpid(), signal.SIGKILL)
    if not _prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL)):
        return False
    if os.getppid() != parent:  # the agent died before prctl: no death signal will come
        os.kill(os.getpid(), signal.SIGKILL)
    return True


def set_up_run_process() -> bool:
    """A runner process's set-up (``estimator_workbench.execution.runner.run`` calls it first, after
    ``die_with_torchrun_agent``).

    In a process a launcher started for a run (``RUN_MARKER_ENV`` set), it becomes a child
    subreaper (Linux), so
    that user code's orphans (``setsid``, double forks) re-parent to it, and ends every
    descendant when it exits (``end_descendants``), whatever the run's outcome; then it runs the
    callbacks of ``after_run_exit`` (the queue's starter). Returns whether the exit clean-up is
    registered (not in a process that merely calls ``run``, such as a test). Idempotent.
    """
    global _SET_UP
    if _SET_UP:
        return True
    if not os.environ.get(RUN_MARKER_ENV):
        return False
    _SET_UP = True
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    atexit.register(_at_exit)
    return True


def spare_from_cleanup(pid: int) -> None:
    """Keeps the child ``pid`` (and what it starts) alive through this runner's exit clean-up."""
    _SPARED.add(pid)


def after_run_exit(callback: Any) -> bool:
    """Runs ``callback()`` at this runner's exit, after its descendants have been ended, when the
    process was set up (``set_up_run_process``); False (nothing registered) otherwise."""
    if not _SET_UP:
        return False
    _AFTER_CLEANUP.append(callback)
    return True


def _at_exit() -> None:
    with contextlib.suppress(Exception):
        ended = end_descendants(_SPARED)
        if ended:
            print(f"estimator_workbench.execution.runner: ended {len(ended)} process(es) the run left "
                  f"behind: {sorted(ended)}", file=sys.stderr, flush=True)
    # Orphans of later children go to init again: what starts now is not part of this run.
    _prctl(_PR_SET_CHILD_SUBREAPER, 0)
    for callback in _AFTER_CLEANUP:
        with contextlib.suppress(Exception):
            callback()


def kill_group(pid: int, sig: int) -> None:
    """Signals the process group led by ``pid`` (a child just started in its own session)."""
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)
