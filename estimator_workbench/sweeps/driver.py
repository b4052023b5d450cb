"""The sweep driver: asks Optuna for params, runs each trial as a normal run, tells Optuna how it
went, and prunes trials whose evaluations fall behind.

It runs in a process of its own: the CLI's foreground (``estimator-workbench sweep``) or detached
(``python -m estimator_workbench.sweeps.driver --workspace ROOT NAME``, started by the Sweeps page and the
Train page through ``store.start_driver``); never in the UI process.

Loop (every ``poll_s`` seconds):

1. poll the launcher (starts queued runs, reaps finished ones);
2. per trial in flight, read the new evaluation rows of its run's ``metrics.jsonl`` (streamed by
   the runner's ``eval_stream_hook``), ``trial.report(value, step)`` each, and when
   ``trial.should_prune()`` record the run ``cancelled`` with ``"pruned by sweep ... at step N"``,
   end its process group and tell Optuna ``PRUNED``;
3. a finished run: ``succeeded`` -> ``COMPLETE`` with its final evaluation's metric; anything else
   (failed, cancelled by the user, lost, no evaluation of the metric) -> ``FAIL`` with the reason
   in the trial's ``error`` user attribute;
4. while fewer than ``parallel`` trials are in flight and the study holds fewer than ``trials``
   trials, ask Optuna for a new one, register its run (tag ``sweep:<name>``, name
   ``<name> #<number>``) through ``submit_run`` and submit it.

Stop: ``<sweep>/stop.request`` (``store.request_stop``), SIGTERM or SIGINT. The driver submits
nothing more, stops its running trial runs gracefully (each checkpoints) and exits ``stopped``,
leaving those trials RUNNING in the study. Continuing (same name) adopts them: a run stopped by
the sweep (or lost) is resumed from its checkpoint, a finished one is told, a live one watched.

Crashes (issue 24 item 4): adoption first reaps the runs a dead driver left ``running`` (their
runners died with it), so they are resumed from their checkpoints rather than adopted as live and
failed at the next poll; a run that is lost while the driver lives (its runner was killed) is
resumed too, up to ``_LOST_RESUMES`` times per driver, then its trial fails.

Why the driver prunes rather than a hook inside the runner: the runner stays free of Optuna and
of the study's storage (one writer of the study per sweep), and a pruned run is ended exactly as a
cancel ends it (process group signalled, last checkpoint kept).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import math
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from estimator_workbench.store import paths
from estimator_workbench.store.records import InvalidTransitionError, RunNotFoundError, RunRecord
from estimator_workbench.store.registry import RunRegistry
from estimator_workbench.sweeps import store
from estimator_workbench.sweeps.spec import SweepSpec

__all__ = ["SweepDriver", "best_trial_line", "main", "make_driver_launcher"]

_TERM_GRACE_S = 15.0  # a pruned run that ignores SIGTERM this long is killed
_STOP_WAIT_S = 120.0  # how long a stopping driver waits for its runs to checkpoint and end
_LOST_RESUMES = 3  # a trial's run lost while this driver lives is resumed this often, then failed


def make_driver_launcher(root: str | os.PathLike[str], parallel: int) -> Any:
    """The driver's launcher: Ray Jobs when ``$WORKBENCH_RAY_ADDRESS`` is set, else a
    ``LocalLauncher`` allowing ``parallel`` runs at once (and one warm spare runner unless
    ``WORKBENCH_WARM_SPARES=0``); ``WORKBENCH_RUNNER_MODULE`` / ``WORKBENCH_RUNNER_PYTHONPATH``
    swap the runner as they do for the UI."""
    from estimator_workbench.execution.launcher import LocalLauncher, make_launcher

    runner = os.environ.get("WORKBENCH_RUNNER_MODULE", "estimator_workbench.execution.runner")
    env = {}
    if os.environ.get("WORKBENCH_RUNNER_PYTHONPATH"):
        env["PYTHONPATH"] = os.environ["WORKBENCH_RUNNER_PYTHONPATH"]
    if os.environ.get("WORKBENCH_RAY_ADDRESS", "").strip():
        return make_launcher(root, runner_module=runner, env=env)
    spare = os.environ.get("WORKBENCH_WARM_SPARES", "1").strip().lower() not in ("0", "false", "no", "off")
    launcher = LocalLauncher(root, runner_module=runner, env=env,
                             warm_spares=1 if spare and runner == "estimator_workbench.execution.runner" else 0)
    launcher.max_concurrent = max(launcher.max_concurrent, int(parallel))
    return launcher


def _format_params(params: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in params.items())


def best_trial_line(study: Any, spec: SweepSpec) -> str:
    """``Best trial #N: accuracy=0.97 (run r-...) learning_rate=...`` or why there is none."""
    from optuna.trial import TrialState

    complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    if not complete:
        return f"No trial of sweep {spec.name!r} has completed yet: no best trial."
    best = study.best_trial
    return (f"Best trial #{best.number}: {spec.metric}={best.value:.6g} ({spec.direction}) "
            f"run {best.user_attrs.get('run_id')} {_format_params(best.params)}")


@dataclasses.dataclass
class _InFlight:
    trial: Any  # optuna.trial.Trial
    run_id: str
    tail: Any  # MetricsTail of the run's metrics.jsonl
    reported: set[int]
    kill_at: float | None = None  # pruned: SIGKILL the run's group if still alive by then
    pid: int | None = None


class SweepDriver:
    """Runs (or continues) the sweep ``name`` of workspace ``root`` until it has its trials, or
    a stop is requested.

    Args:
        root: the workspace.
        name: the sweep (its study and settings exist: ``store.create_study``).
        launcher: default ``make_driver_launcher(root, spec.parallel)``.
        poll_s: seconds between loop passes.
        out: where progress lines go (default: print to stdout, flushed).

    Example:
        >>> SweepDriver("workspace", "lr-search").run()   # doctest: +SKIP
        0
    """

    def __init__(self, root: str | os.PathLike[str], name: str, *, launcher: Any = None,
                 poll_s: float = 0.5, out: Callable[[str], None] | None = None) -> None:
        self.root = Path(root)
        self.name = name
        self.study = store.load_study(root, name)
        self.spec = store.load_spec(self.study)
        self.registry = RunRegistry(self.root)
        self.launcher = launcher if launcher is not None else make_driver_launcher(root, self.spec.parallel)
        self.poll_s = poll_s
        self._out = out or (lambda line: print(line, flush=True))
        self._stop = threading.Event()
        self._in_flight: dict[int, _InFlight] = {}
        self._draining: set[str] = set()  # finished runs whose process may still be exiting
        self._lost_resumes: dict[str, int] = {}  # run -> resumes after it was lost under this driver

    # -- public ----------------------------------------------------------------------------

    def request_stop(self) -> None:
        """Stop after this pass (what SIGTERM, SIGINT and the stop file do)."""
        self._stop.set()

    def run(self, *, install_signal_handlers: bool = False) -> int:
        """Drives the sweep; returns 0 when it has all its trials or was stopped, 1 on an error."""
        previous: dict[int, Any] = {}
        if install_signal_handlers and threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                previous[sig] = signal.signal(sig, lambda *_: self._stop.set())
        try:
            return self._drive()
        except BaseException as exc:
            store.write_driver_state(self.root, self.name, "failed", message=f"{type(exc).__name__}: {exc}")
            raise
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            with contextlib.suppress(Exception):
                if hasattr(self.launcher, "release_spare"):
                    self.launcher.release_spare()

    # -- the loop --------------------------------------------------------------------------

    def _drive(self) -> int:
        spec = self.spec
        self._state("running")
        self._out(f"Sweep {spec.name}: {spec.planned_trials} trials of {spec.template.get('name')}, "
                  f"{spec.parallel} at once, {spec.sampler} sampler, {spec.direction} {spec.metric}; "
                  f"study in {store.sweep_dir(self.root, spec.name) / store.JOURNAL_FILE}")
        self._adopt()
        while True:
            if store.stop_requested(self.root, self.name):
                self._stop.set()
            if self._stop.is_set():
                return self._stop_runs()
            self.launcher.poll()
            for number in list(self._in_flight):
                self._watch(number)
            while (len(self._in_flight) < spec.parallel and self._asked() < spec.planned_trials
                   and not self._stop.is_set()):
                self._start_trial()
            if not self._in_flight:
                break
            self._stop.wait(self.poll_s)
        self._drain()
        self._state("finished")
        self._out(f"Sweep {spec.name} finished: {self._counts()}.")
        self._out(best_trial_line(self.study, spec))
        return 0

    def _asked(self) -> int:
        """Trials asked so far (WAITING ones, queued by ``study.enqueue_trial``, are still to ask)."""
        from optuna.trial import TrialState

        return sum(1 for t in self.study.get_trials(deepcopy=False) if t.state != TrialState.WAITING)

    def _counts(self) -> str:
        from collections import Counter

        counts = Counter(t.state.name.lower() for t in self.study.get_trials(deepcopy=False))
        return ", ".join(f"{n} {state}" for state, n in sorted(counts.items())) or "no trials"

    def _state(self, state: str, **extra: Any) -> None:
        store.write_driver_state(self.root, self.name, state, trials=len(self.study.get_trials(deepcopy=False)),
                                 planned=self.spec.planned_trials, **extra)

    def _start_trial(self) -> None:
        from estimator_workbench.execution.submit import submit_run
        from estimator_workbench.store.run_spec import RunSpecError

        spec = self.spec
        trial = self.study.ask({p.name: p.distribution() for p in spec.space})
        label = f"{spec.name} #{trial.number}"
        try:
            record = submit_run(  # the params checked there, against the template's PARAMS
                self.registry, None, name=label, action="train_and_evaluate", dataset=spec.dataset,
                template=spec.template, params={**spec.base_params, **trial.params},
                run_config={**spec.run_config, "tf_random_seed": spec.seed},
                schedule={**spec.schedule, "max_steps": spec.steps, "eval_every_steps": spec.eval_every})
        except (RunSpecError, ValueError) as exc:
            self._fail(trial, f"its run was refused: {exc}")
            return
        trial.set_user_attr("run_id", record.run_id)
        self.registry.set_tags(record.run_id, [store.sweep_tag(spec.name)])
        self.launcher.submit(record.run_id)
        self._track(trial, record.run_id)
        self._out(f"Trial #{trial.number} started: run {record.run_id} {_format_params(dict(trial.params))}")
        self._state("running")

    def _track(self, trial: Any, run_id: str, reported: Any = ()) -> None:
        from estimator_workbench.store.metrics_store import MetricsTail

        self._in_flight[trial.number] = _InFlight(
            trial=trial, run_id=run_id, reported={int(step) for step in reported},
            tail=MetricsTail(self.registry.run_dir(run_id) / paths.METRICS_FILE))

    def _watch(self, number: int) -> None:
        item = self._in_flight[number]
        if item.kill_at is not None:
            self._finish_pruned(number)
            return
        for row in item.tail.read():
            if row.get("split") != "eval" or row.get("name") != self.spec.metric:
                continue
            step, value = row.get("step"), row.get("value")
            if step is None or value is None or not math.isfinite(float(value)) or int(step) in item.reported:
                continue
            item.reported.add(int(step))
            item.trial.report(float(value), int(step))
            if int(step) < self.spec.steps and item.trial.should_prune():
                if self._prune(item, int(step), float(value)):
                    return
        try:
            record = self.registry.get(item.run_id)
        except RunNotFoundError:
            self._fail_in_flight(number, f"its run {item.run_id} was deleted")
            return
        if record.status == "lost" and self._lost_resumes.get(item.run_id, 0) < _LOST_RESUMES:
            self._resume_lost(item, record)
            return
        if record.is_finished:
            self._finished(number, record)

    def _prune(self, item: _InFlight, step: int, value: float) -> bool:
        """Records the run cancelled as pruned, then ends its process group (as cancel does)."""
        from estimator_workbench.execution.processes import kill_group

        reason = (f"pruned by sweep {self.name} at step {step}: {self.spec.metric} {value:.4g} is worse "
                  f"than the median of earlier trials at that step")
        try:
            record = self.registry.set_status(item.run_id, "cancelled", error=reason, expected="running")
        except InvalidTransitionError:
            return False  # it finished meanwhile: told as finished
        proc = self.launcher.process(item.run_id) if hasattr(self.launcher, "process") else None
        item.pid = proc.pid if proc is not None else record.pid
        if item.pid:
            kill_group(item.pid, signal.SIGTERM)  # the runner checkpoints and exits
        item.kill_at = time.monotonic() + _TERM_GRACE_S
        self.study.tell(item.trial, state=_state("PRUNED"))
        self._out(f"Trial #{item.trial.number} pruned at step {step}: {self.spec.metric}={value:.4g} "
                  f"(run {item.run_id} cancelled)")
        self._state("running")
        return True

    def _finish_pruned(self, number: int) -> None:
        from estimator_workbench.execution.processes import kill_group, pid_alive

        item = self._in_flight[number]
        proc = self.launcher.process(item.run_id) if hasattr(self.launcher, "process") else None
        alive = proc.poll() is None if proc is not None else pid_alive(item.pid)
        if not alive:
            del self._in_flight[number]
        elif item.kill_at is not None and time.monotonic() > item.kill_at and item.pid:
            kill_group(item.pid, signal.SIGKILL)

    def _drain(self, timeout: float = 60.0) -> None:
        """Waits (at most ``timeout`` s) until the processes of the finished runs have exited, so
        that the driver never returns while a runner it started is still writing its last lines."""
        deadline = time.monotonic() + timeout
        ended = getattr(self.launcher, "_run_ended", None)
        while self._draining and ended is not None and time.monotonic() < deadline:
            self.launcher.poll()
            self._draining = {run_id for run_id in self._draining if not ended(run_id)}
            if self._draining:
                time.sleep(0.1)
        self._draining.clear()

    def _resume_lost(self, item: _InFlight, record: RunRecord) -> None:
        """A trial's run whose runner died (killed, out of memory) continues from its checkpoint."""
        self._lost_resumes[item.run_id] = self._lost_resumes.get(item.run_id, 0) + 1
        try:
            self.launcher.resume(item.run_id)
        except (ValueError, InvalidTransitionError) as exc:  # its old runner still lives: next pass
            self._out(f"Trial #{item.trial.number}: run {item.run_id} is lost and cannot be resumed yet: {exc}")
            return
        self._out(f"Trial #{item.trial.number} continued: run {item.run_id} was lost ({record.error}); "
                  "resumed from its checkpoint")

    def _finished(self, number: int, record: RunRecord) -> None:
        item = self._in_flight.pop(number)
        self._draining.add(record.run_id)
        if record.status != "succeeded":
            why = record.error or "no reason recorded"
            self._fail(item.trial, f"run {record.run_id} ended {record.status}: {why.splitlines()[0]}")
            return
        entry = record.summary.get(f"eval/{self.spec.metric}") or {}
        value = entry.get("last")
        if value is None or not math.isfinite(float(value)):
            self._fail(item.trial, f"run {record.run_id} succeeded but has no finite eval "
                                   f"{self.spec.metric} (last: {value!r})")
            return
        self.study.tell(item.trial, float(value))
        best = self.study.best_trial
        self._out(f"Trial #{item.trial.number} complete: {self.spec.metric}={float(value):.6g} "
                  f"(run {record.run_id}); best so far #{best.number} {best.value:.6g}")
        self._state("running")

    def _fail(self, trial: Any, reason: str) -> None:
        trial.set_user_attr("error", reason)
        self.study.tell(trial, state=_state("FAIL"))
        self._out(f"Trial #{trial.number} failed: {reason}")
        self._state("running")

    def _fail_in_flight(self, number: int, reason: str) -> None:
        self._fail(self._in_flight.pop(number).trial, reason)

    # -- stop and continue -----------------------------------------------------------------

    def _stop_runs(self) -> int:
        """Stops the in-flight runs gracefully, waits for them, and exits ``stopped``."""
        self._state("stopping")
        self._out(f"Sweep {self.name}: stopping {len(self._in_flight)} running trial(s)...")
        for item in self._in_flight.values():
            if item.kill_at is not None:
                continue
            item.trial.set_user_attr("stopped_by_sweep", True)
            with contextlib.suppress(ValueError):  # finished already
                self.launcher.stop(item.run_id)
        deadline = time.monotonic() + _STOP_WAIT_S
        while time.monotonic() < deadline:
            self.launcher.poll()
            pending = []
            for number, item in list(self._in_flight.items()):
                if item.kill_at is not None:
                    self._finish_pruned(number)
                    if number in self._in_flight:
                        pending.append(number)
                    continue
                with contextlib.suppress(RunNotFoundError):
                    record = self.registry.get(item.run_id)
                    if record.status == "succeeded":
                        self._finished(number, record)  # it ended before the stop took effect
                        continue
                    if not record.is_finished:
                        pending.append(number)
            if not pending:
                break
            time.sleep(min(self.poll_s, 0.5))
        else:
            for item in self._in_flight.values():
                with contextlib.suppress(Exception):
                    self.launcher.cancel(item.run_id, grace=5.0)
        self._draining.update(item.run_id for item in self._in_flight.values())
        self._in_flight.clear()
        self._drain()
        with contextlib.suppress(FileNotFoundError):
            (store.sweep_dir(self.root, self.name) / store.STOP_FILE).unlink()
        self._state("stopped")
        self._out(f"Sweep {self.name} stopped ({self._counts()}); continue it with "
                  f"`estimator-workbench sweep --resume {self.name}`.")
        self._out(best_trial_line(self.study, self.spec))
        return 0

    def _registered_run(self, number: int) -> str | None:
        """The run registered for trial ``number`` by a driver that died before it recorded the
        run's id in the study (``_start_trial``: the run exists, named ``<sweep> #<number>``)."""
        label, tag = f"{self.spec.name} #{number}", store.sweep_tag(self.spec.name)
        for record in self.registry.list_runs(newest_first=True):
            if record.name == label and record.action == "train_and_evaluate":
                if tag not in record.tags:
                    self.registry.set_tags(record.run_id, [*record.tags, tag])
                return record.run_id
        return None

    def _adopt(self) -> None:
        """Takes over the trials a previous driver left RUNNING (a stopped or dead sweep)."""
        import optuna
        from optuna.trial import TrialState

        # The runs a crashed driver left 'running' have no runner any more: reaped first, they
        # are 'lost' and resume from their checkpoints below (adopted as live, the next poll
        # would mark them lost and the trials would fail).
        reap = getattr(self.launcher, "reap_lost", None)
        if reap is not None:
            reap()
        for frozen in self.study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            trial = optuna.trial.Trial(self.study, frozen._trial_id)
            run_id = frozen.user_attrs.get("run_id") or self._registered_run(frozen.number)
            if not run_id:
                self._fail(trial, "the sweep stopped before its run was submitted")
                continue
            trial.set_user_attr("run_id", run_id)
            try:
                record = self.registry.get(run_id)
            except RunNotFoundError:
                self._fail(trial, f"its run {run_id} was deleted")
                continue
            if record.status in ("stopped", "cancelled", "lost") and (
                    frozen.user_attrs.get("stopped_by_sweep") or record.status == "lost"):
                trial.set_user_attr("stopped_by_sweep", False)
                self.launcher.resume(run_id)
                self._out(f"Trial #{frozen.number} continued: run {run_id} resumed from its checkpoint")
            elif record.is_finished and record.status != "succeeded":
                self._fail(trial, f"run {run_id} ended {record.status}: {(record.error or '').splitlines()[:1]}")
                continue
            else:
                self._out(f"Trial #{frozen.number} adopted: run {run_id} is {record.status}")
            self._track(trial, run_id, frozen.intermediate_values)


def _state(name: str) -> Any:
    from optuna.trial import TrialState

    return TrialState[name]


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m estimator_workbench.sweeps.driver [--workspace ROOT] NAME``: drive a sweep detached."""
    import optuna

    parser = argparse.ArgumentParser(prog="python -m estimator_workbench.sweeps.driver")
    parser.add_argument("--workspace")
    parser.add_argument("name")
    args = parser.parse_args(argv)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    root = paths.workspace_root(args.workspace)
    driver = SweepDriver(root, args.name)
    return driver.run(install_signal_handlers=True)


if __name__ == "__main__":
    paths.owner_only_umask()  # the sweep's study, driver log and trials: owner-only (issue 24.8)
    sys.exit(main())
