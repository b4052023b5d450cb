"""The worker entry point: ``python -m estimator_workbench.execution.runner RUN_DIR`` executes one run.

Separation of concerns:
    - the **launcher** (``estimator_workbench.execution.launcher``) spawns this module in a fresh interpreter and may
      signal it; it never runs model code itself;
    - the **runner** (this module) owns the run's lifecycle: it reads ``run.json``, marks the run
      ``running``, beats the heartbeat, builds the Estimator (``estimator_workbench.templates``), executes
      the action, appends metrics (``estimator_workbench.store.metrics_hook``), and records the outcome
      (``succeeded``, ``stopped``, ``cancelled`` or ``failed`` with the user-code traceback);
    - the **engine** (``estimator_engine``) trains, evaluates and predicts, and writes checkpoints
      into ``runs/<id>/model/`` (so a resumed run continues from the last one).

Stop and cancel: ``runs/<id>/stop.request`` (written by ``LocalLauncher.stop``) makes the metrics
hook request a stop between steps; the engine then writes its end-of-training checkpoint and the
run ends ``stopped``. SIGTERM (``LocalLauncher.cancel``) does the same but ends ``cancelled``.

Under ``torch.distributed.run`` every rank runs this module; only rank 0 writes to the registry
and to ``metrics.jsonl``. Each rank dies with its torchrun agent (``die_with_torchrun_agent``).

One writer per run: the runner takes the run's fencing token (``RunRecord.attempt``) when it
starts, and writes metrics, evaluation rows, checkpoints (a ``CheckpointSaverListener``), its
heartbeat and its outcome only while the registry still names that attempt as the owner. A runner
that finds another attempt owns the run (it was marked lost while stopped, then resumed) stops at
once, writes nothing more, says why in its log and exits with ``EXIT_OWNERSHIP_LOST``.

Failures the runner reports itself: a ``KeyboardInterrupt`` raised by user code fails the run
(only the stop file and SIGTERM end it stopped/cancelled); ``os._exit(n)`` in user code is logged
with its location and recorded as the run's error; on a full disk the runner frees its disk
reserve (``run_process.DiskReserve``) to say "disk full" in the log and record the failure, and
retries the record while the disk stays full (``OUTCOME_RETRY_S``).

The run's contract is ``run.json``, read as a ``RunSpec`` (``estimator_workbench.store.run_spec``,
validated when the run was submitted; an older file is migrated): see
``estimator_workbench.execution.engine_run``, which maps the run's action onto the engine; the context
an executor gets is ``estimator_workbench.execution.run_context.RunContext``.
"""

from __future__ import annotations

import contextlib
import gc
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

from estimator_workbench.execution.engine_run import PreflightFailed, execute_with_engine
from estimator_workbench.execution.run_context import Executor, RunContext
from estimator_workbench.execution.run_process import (
    DiskReserve,
    Heartbeat,
    die_with_torchrun_agent,
    format_user_traceback,
    log_tail,
    preflight_error,
    report_os_exit,
)
from estimator_workbench.execution.system_metrics import SystemSampler
from estimator_workbench.store import paths
from estimator_workbench.store.guards import is_disk_full
from estimator_workbench.store.records import (
    SUMMARISED_ON_STATUS,
    InvalidTransitionError,
    OwnershipLostError,
    RegistryError,
    RunRecord,
)
from estimator_workbench.store.registry import RunRegistry
from estimator_workbench.store.run_spec import RunSpec

__all__ = ['EXIT_OWNERSHIP_LOST', 'OUTCOME_RETRY_S', 'SPARE_FLAG', 'START_QUEUED_FLAG', 'main', 'preload', 'run', 'start_queued_runs']


_HEARTBEAT_EVERY_S = 2.0


EXIT_OWNERSHIP_LOST = 3  # the runner's attempt no longer owns the run: it stopped without writing


# How long a runner on a full disk keeps trying to record its outcome (every few seconds) before
# it gives up and leaves the run to the launcher (which then marks it lost).
OUTCOME_RETRY_S = 300.0


def _say(message: str) -> None:
    """A line in the worker log (stderr), never raising: the log may sit on a full disk."""
    try:
        print(f"estimator_workbench.execution.runner: {message}", file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


def _record(ctx: RunContext, reserve: DiskReserve | None, write: Callable[[], Any]) -> Any:
    """Runs a registry write of the outcome; on a full disk frees the reserve, says "disk full"
    in the log and retries every few seconds for up to ``OUTCOME_RETRY_S`` (the write lands as
    soon as the disk frees). ``OwnershipLostError`` and other errors pass through."""
    deadline = time.monotonic() + OUTCOME_RETRY_S
    delay, said = 1.0, False
    while True:
        try:
            return write()
        except RegistryError as exc:
            if isinstance(exc, OwnershipLostError) or not is_disk_full(exc):
                raise
            freed = reserve.release() if reserve is not None else False
            if not said:
                said = True
                _say(f"{exc} The run's outcome is recorded as soon as there is space (retrying for up to "
                     f"{OUTCOME_RETRY_S:.0f} s).")
                if freed:
                    continue  # the reserve's space may be enough right now
            if time.monotonic() >= deadline:
                _say(f"disk full: gave up recording the outcome of run {ctx.run_id} after "
                     f"{OUTCOME_RETRY_S:.0f} s; the launcher will mark it lost (its checkpoints are kept).")
                raise
            time.sleep(delay)
            delay = min(delay * 2, 10.0)


def _finish(registry: RunRegistry, run_id: str, status: str, *, ctx: RunContext | None = None,
            reserve: DiskReserve | None = None, **kwargs: Any) -> None:
    """Records the run's outcome, its summary made from its metrics file first (set_status does
    that itself for the outcomes in ``SUMMARISED_ON_STATUS``), under the runner's fencing token.

    Raises ``OwnershipLostError`` when another attempt owns the run; an outcome already recorded
    by the launcher (e.g. cancelled after SIGKILL) is left as it is.
    """
    attempt = ctx.attempt if ctx is not None else None

    def write() -> None:
        if status not in SUMMARISED_ON_STATUS:
            try:
                registry.refresh_summary(run_id, attempt=attempt)
            except RegistryError:
                raise
            except Exception:
                traceback.print_exc()
        try:
            registry.set_status(run_id, status, attempt=attempt, **kwargs)
        except InvalidTransitionError:
            pass  # the launcher already recorded an outcome (e.g. cancelled after SIGKILL)

    if ctx is None:
        write()
    else:
        _record(ctx, reserve, write)


def _started_for_this_process(record: RunRecord) -> bool:
    """Whether the ``running`` record was started for this process: its pid is this process or
    an ancestor (torchrun's agent, a wrapper), or unknown (a Ray job)."""
    if record.pid is None or record.pid == os.getpid():
        return True
    try:
        import psutil

        return record.pid in {p.pid for p in psutil.Process().parents()}
    except Exception:
        return record.pid == os.getppid()


def _take_ownership(ctx: RunContext, registry: RunRegistry) -> int | None:
    """Makes this runner the run's owner (its fencing token in ``ctx.attempt``); returns an exit
    code when it must not run."""
    record = registry.get(ctx.run_id)
    if record.status == "queued":
        try:
            record = registry.set_status(ctx.run_id, "running", pid=os.getpid(), expected="queued")
        except InvalidTransitionError:  # its launcher marked it running meanwhile (a Ray job's poll)
            record = registry.get(ctx.run_id)
        if record.status == "running" and record.pid == os.getpid():
            ctx.attempt = record.attempt
            return None
    if record.status == "running":
        if not _started_for_this_process(record):
            _say(f"run {ctx.run_id} is running as attempt {record.attempt} of pid {record.pid}, not "
                 f"of this process (pid {os.getpid()}); not starting it (one writer per run).")
            return EXIT_OWNERSHIP_LOST
        registry.heartbeat(ctx.run_id, attempt=record.attempt)
    else:
        _say(f"run {ctx.run_id} is {record.status!r}, not starting it.")
        return 0
    ctx.attempt = record.attempt
    return None


def _keyboard_interrupt_error(summary: str) -> str:
    where = summary[len("KeyboardInterrupt"):].lstrip(":").strip()
    return (f"KeyboardInterrupt in user code{' ' + where if where else ''}: a KeyboardInterrupt "
            "raised by the run's code fails the run (Stop or Cancel end a run on purpose).")[:2000]


def _record_os_exit(ctx: RunContext, registry: RunRegistry, code: int, where: str) -> None:
    """Records the error of a run whose user code called ``os._exit`` (before the process ends)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    tail = log_tail(ctx.run_dir / paths.WORKER_LOG)
    error = (f"runner exited with code {code} without reporting: os._exit({code}) was called ({where}); "
             f"last log lines: {tail or '(none)'}")
    with contextlib.suppress(Exception):
        _finish(registry, ctx.run_id, "failed", error=error[:2000],
                traceback="".join(traceback.format_stack()[:-3]))


def run(run_dir: str | os.PathLike[str], *, execute: Executor | None = None,
        install_signal_handlers: bool = True) -> int:
    """Executes the run in ``run_dir``; returns the process exit code (0 unless it failed;
    ``EXIT_OWNERSHIP_LOST`` when another attempt owns the run).

    Args:
        run_dir: ``<workspace>/runs/<run_id>``.
        execute: the action executor (default: ``execute_with_engine``); tests pass a stub.
        install_signal_handlers: turn SIGTERM into a graceful stop (main thread only).
    """
    die_with_torchrun_agent()
    from estimator_workbench.execution.processes import set_up_run_process

    set_up_run_process()  # a launcher's run process: subreaper, and its leftovers ended at exit
    run_dir = Path(run_dir).resolve()
    spec_file = run_dir / paths.RUN_JSON
    try:
        spec = RunSpec.read(spec_file)  # migrated to the current schema_version
    except (OSError, ValueError) as exc:
        print(f"estimator_workbench.execution.runner: cannot read {spec_file}: {exc}", file=sys.stderr)
        return 2
    root = run_dir.parent.parent
    registry = RunRegistry(root)
    is_chief = int(os.environ.get("RANK", "0")) == 0
    ctx = RunContext(run_dir=run_dir, spec=spec, is_chief=is_chief, registry=registry)
    run_id = ctx.run_id

    previous: Any = None
    if install_signal_handlers and threading.current_thread() is threading.main_thread():
        def on_sigterm(signum: int, frame: FrameType | None) -> None:
            ctx.terminate.set()

        previous = signal.signal(signal.SIGTERM, on_sigterm)
    reserve: DiskReserve | None = None
    restore_exit: Callable[[], None] | None = None

    def on_disk_full(exc: BaseException) -> None:
        if reserve is not None:
            reserve.release()
        _say(f"disk full: {exc} (heartbeat); the run goes on and fails if it cannot write.")

    try:
        if is_chief:
            refusal = _take_ownership(ctx, registry)
            if refusal is not None:
                return refusal
            _mark_mirror_pending(ctx, "the run is running")
            reserve = DiskReserve(run_dir)
            restore_exit = report_os_exit(lambda code, where: _record_os_exit(ctx, registry, code, where))
        print(f"estimator_workbench.execution.runner: run {run_id} ({spec.action}) started, pid {os.getpid()}"
              + (f", attempt {ctx.attempt}" if ctx.attempt is not None else ""), flush=True)
        started = time.monotonic()
        try:
            if is_chief:
                with Heartbeat(registry, run_id, ctx.metrics_path, every_s=_HEARTBEAT_EVERY_S,
                               attempt=ctx.attempt, progress=ctx.progress, on_lost=ctx.lose_ownership,
                               on_disk_full=on_disk_full), \
                        SystemSampler(ctx.metrics_path, step=lambda: (ctx.progress() or (0, 0.0))[0]):
                    (execute or execute_with_engine)(ctx)
            else:
                (execute or execute_with_engine)(ctx)
        except BaseException as exc:
            lost = ctx.ownership_lost or (exc if isinstance(exc, OwnershipLostError) else None)
            if is_chief and lost is not None:
                raise lost from exc
            if is_disk_full(exc):
                if reserve is not None:
                    reserve.release()  # room for the log line and the outcome
                _say(f"disk full: {exc}. Free space on {run_dir.parent.parent}, then resume the run: "
                     "its last checkpoint is kept.")
            if not isinstance(exc, PreflightFailed):  # (its summary is already in the log)
                with contextlib.suppress(OSError, ValueError):
                    traceback.print_exc()
            if not is_chief:
                return 1
            summary, text = (preflight_error(exc.report) if isinstance(exc, PreflightFailed)
                             else format_user_traceback(exc))
            if ctx.terminate.is_set() and not isinstance(exc, KeyboardInterrupt):
                _finish(registry, run_id, "cancelled", ctx=ctx, reserve=reserve, error=summary,
                        traceback=text)
                return 0
            if isinstance(exc, KeyboardInterrupt):
                summary = _keyboard_interrupt_error(summary)
            _finish(registry, run_id, "failed", ctx=ctx, reserve=reserve, error=summary, traceback=text)
            return 1
        if not is_chief:
            return 0
        if ctx.ownership_lost is not None:
            raise ctx.ownership_lost
        diverged = ctx.diverged()
        if ctx.terminate.is_set():
            status = "cancelled"
        elif ctx.stop_path.exists() or diverged:
            status = "stopped"
        else:
            status = "succeeded"
        _finish(registry, run_id, status, ctx=ctx, reserve=reserve, error=diverged)
        print(f"estimator_workbench.execution.runner: run {run_id} {status} in {time.monotonic() - started:.1f}s",
              flush=True)
        return 0
    except OwnershipLostError as exc:
        ctx.ownership_lost = ctx.ownership_lost or exc
        _say(f"{exc} (this process: pid {os.getpid()})")
        return EXIT_OWNERSHIP_LOST
    except RegistryError as exc:  # the outcome could not be recorded (disk full past every retry)
        _say(str(exc))
        return 1
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        if restore_exit is not None:
            restore_exit()
        if reserve is not None:
            reserve.release()
        registry.close_owner_check()
        if is_chief and ctx.ownership_lost is None:
            _mark_mirror_pending(ctx, "the run has finished; the next sync mirrors it")
            _safe(lambda: start_queued_runs(root))


def _mark_mirror_pending(ctx: RunContext, reason: str) -> None:
    """Queues the run's MLflow mirror (``schedule['mlflow']``) for the next sync, which a launcher
    starts once the run has finished; the runner itself never talks to MLflow (it has none of
    its credentials), and nothing here can fail the run."""
    if ctx.schedule.mlflow and ctx.is_chief:
        from estimator_workbench.store import mlflow_state

        _safe(lambda: mlflow_state.mark_pending(ctx.run_dir.parent.parent, ctx.run_id, reason=reason))


def start_queued_runs(root: Path) -> list[str]:
    """Hands the runs queued behind this one to a starter, when its launcher asked for that (CPU).

    Without it, runs submitted with ``run --detach`` while another ran would wait for a UI or a
    CLI command to poll the queue. The runner never starts a run itself: a run it started would be
    its descendant, ended by its exit clean-up or by a cancel of this run. It starts a short-lived
    starter (``python -m estimator_workbench.execution.runner --start-queued ROOT``) in a session of its
    own, without this run's marker, after its exit clean-up (``processes.after_run_exit``) and with
    its subreaper role dropped, so the starter and the runs it starts belong to no run; the
    starter polls a launcher once and exits. A launcher that also polls cannot start a run twice:
    a run moves from queued to running once. Returns ``[]`` (the starter reports nothing back).
    """
    from estimator_workbench.execution.launcher import QUEUE_HANDOFF_ENV
    from estimator_workbench.execution.processes import after_run_exit

    slots = os.environ.get(QUEUE_HANDOFF_ENV)
    if not slots:
        return []
    if not after_run_exit(lambda: _spawn_queue_starter(root)):
        _spawn_queue_starter(root)  # not a launcher's run process (nothing to clean up first)
    return []


START_QUEUED_FLAG = "--start-queued"


def _spawn_queue_starter(root: Path) -> None:
    import subprocess

    from estimator_workbench.execution.processes import RUN_MARKER_ENV

    env = {k: v for k, v in os.environ.items() if k != RUN_MARKER_ENV}
    main_spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    module = main_spec.name if main_spec is not None else __name__
    if module == "__main__":
        module = "estimator_workbench.execution.runner"
    subprocess.Popen(  # not waited for: it outlives this runner (then init reaps it)
        [sys.executable, "-m", "estimator_workbench.execution.runner", START_QUEUED_FLAG, str(root), module],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env=env, start_new_session=True, close_fds=True)


def _start_queued(root: str, runner_module: str) -> int:
    """The starter's body: one poll of a CPU launcher with the handed-over concurrency."""
    from estimator_workbench.execution.launcher import QUEUE_HANDOFF_ENV, LocalLauncher

    slots = int(os.environ.get(QUEUE_HANDOFF_ENV) or 1)
    launcher = LocalLauncher(root, max_concurrent=slots, gpus=[], runner_module=runner_module)
    started = launcher.poll()
    print(f"estimator_workbench.execution.runner: started queued runs {started}", flush=True)
    return 0


def _safe(fn: Callable[[], Any]) -> None:
    try:
        fn()
    except Exception:
        traceback.print_exc()


SPARE_FLAG = "--spare"


def preload() -> None:
    """Imports what every run needs before it has a run: torch, the engine, pandas and the data
    and build helpers, tensorboardX, and ``torch._dynamo`` (which the first ``torch.optim``
    optimizer of a process imports), then moves what they created out of the garbage collector's
    reach. A warm spare calls it while it waits: an import left to the run delays its first metric
    line, by 1-2 s on a busy 2-core machine for pandas alone."""
    try:
        import pandas  # noqa: F401  (the engine imports it lazily now: ~0.5 s, 1-2 s on a busy CPU)
        import tensorboardX  # noqa: F401  (the engine's event writer, imported on first summary)
        import torch._dynamo  # noqa: F401  (the optimizer's lazy import: ~1 s on a small CPU)

        import estimator_engine  # noqa: F401
        from estimator_workbench.data import datasets, model_inputs  # noqa: F401
        from estimator_workbench.execution import (
            build,  # noqa: F401
            engine_run,  # noqa: F401
            preflight,  # noqa: F401
        )
        from estimator_workbench.store import metrics_hook  # noqa: F401
    except Exception:  # a broken install: the real run reports it in its own log
        traceback.print_exc()
    # The imports leave ~330,000 objects that each full collection walks again (0.15-0.22 s): the
    # run's first one cost its start 0.2-0.3 s. Frozen, they are never scanned again (gc.freeze).
    # No collection first: it would find ~150 garbage objects and cost the launch that 0.15 s.
    gc.freeze()


def _spare(stdin: Any = None) -> int:
    """A warm spare runner (``python -m estimator_workbench.execution.runner --spare``, started by the launcher).

    Imports what every run needs (``preload``), then waits for one line on stdin: the RUN_DIR to
    execute, exactly as ``python -m estimator_workbench.execution.runner RUN_DIR`` would (output to the run's
    worker.log, cwd the run folder). End of input (the launcher closed the pipe or died) ends the
    spare without running anything.
    """
    stdin = sys.stdin if stdin is None else stdin
    preload()
    print(f"estimator_workbench.execution.runner: spare pid {os.getpid()} ready", flush=True)
    line = stdin.readline()
    if not line.strip():
        return 0
    run_dir = Path(line.strip())
    fd = os.open(run_dir / paths.WORKER_LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    os.chdir(run_dir)
    return run(run_dir)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry: ``python -m estimator_workbench.execution.runner RUN_DIR`` (or ``--spare``, see ``_spare``)."""
    args = sys.argv[1:] if argv is None else argv
    if args == [SPARE_FLAG]:
        return _spare()
    if len(args) == 3 and args[0] == START_QUEUED_FLAG:
        return _start_queued(args[1], args[2])
    if len(args) != 1:
        print("usage: python -m estimator_workbench.execution.runner RUN_DIR", file=sys.stderr)
        return 2
    return run(args[0])


if __name__ == "__main__":
    paths.owner_only_umask()  # a runner Ray starts does not inherit the UI's umask
    sys.exit(main())
