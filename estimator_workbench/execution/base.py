"""``Launcher``: what every launcher (local processes, Ray jobs) shares over the run registry."""

from __future__ import annotations

import contextlib
import time
import traceback
from pathlib import Path
from typing import TYPE_CHECKING

from estimator_workbench.execution.mirror_trigger import MirrorTrigger
from estimator_workbench.store import paths
from estimator_workbench.store.records import InvalidTransitionError, RegistryError, RunRecord
from estimator_workbench.store.registry import RunRegistry

if TYPE_CHECKING:
    pass

__all__ = ['Launcher']


class Launcher:
    """What every launcher shares: submit, graceful stop and wait, over the run registry.

    Subclasses (``LocalLauncher``, ``estimator_workbench.execution.ray_launcher.RayJobLauncher``) set ``registry``
    and implement ``poll`` (follow running runs, then ``start_queued``), ``start``, ``cancel``,
    ``resume``, ``shutdown``, ``_free_slots``, ``_started_here`` and ``_run_ended`` (whether a
    finished run's process or job has gone too).

    ``start_queued`` is the one queue loop (issue 24 item 5): whoever ends a run's slot calls it
    (``poll``, the end of a cancel, the reaper that marks a run lost, the detached starter a
    finished runner hands the queue to), so a queued run never waits for a UI to poll.
    ``cancel(run_id, grace)`` blocks until the run is ``cancelled`` (the CLI); with
    ``wait=False`` it sends the stop and returns at once (the UI never waits).

    Example:
        >>> launcher = make_launcher("workspace")                    # doctest: +SKIP
        >>> launcher.wait(launcher.submit(run_id).run_id).status     # doctest: +SKIP
        'succeeded'
    """

    registry: RunRegistry
    wait_interval_s = 0.1  # how often ``wait`` polls
    _mirror_trigger: MirrorTrigger | None = None

    @property
    def mirrors(self) -> MirrorTrigger:
        """Starts the MLflow mirror of finished runs in the background (``poll`` calls it)."""
        if self._mirror_trigger is None:
            self._mirror_trigger = MirrorTrigger(self.registry)
        return self._mirror_trigger

    def _start_due_mirrors(self) -> None:
        """The end of every ``poll``: a mirror that is due starts in a process of its own; nothing
        about MLflow can break a poll."""
        try:
            self.mirrors.poll()
        except Exception:
            traceback.print_exc()

    def poll(self) -> list[str]:
        raise NotImplementedError

    def start(self, run_id: str) -> RunRecord:
        raise NotImplementedError

    def _free_slots(self) -> int | None:
        """Runs that may start now (None: no limit)."""
        raise NotImplementedError

    def _started_here(self, record: RunRecord) -> bool:
        """Whether this launcher has started (or submitted) the queued run already."""
        return False

    def _pool_of(self, record: RunRecord) -> str:
        """The pool of slots a run takes (one pool unless a launcher keeps more, see
        ``LocalLauncher``'s helper slots)."""
        return "runs"

    def _free_by_pool(self) -> dict[str, int | None]:
        """Runs that may start now in each pool (None: no limit)."""
        return {"runs": self._free_slots()}

    def _queued_run_folder(self, run_id: str) -> tuple[RunRecord, Path]:
        """The record and folder of a run ``start`` may launch: queued, with its run.json written."""
        record = self.registry.get(run_id)
        if record.status != "queued":
            raise InvalidTransitionError(f"Cannot start run {run_id!r}: it is {record.status!r}, not 'queued'.")
        folder = self.registry.run_dir(run_id)
        if not (folder / paths.RUN_JSON).exists():
            raise FileNotFoundError(f"Run {run_id!r} has no {paths.RUN_JSON} in {folder}.")
        return record, folder

    def start_queued(self) -> list[str]:
        """Starts queued runs, oldest first, while slots are free; returns their ids.

        A run another launcher takes meanwhile is skipped; on a full disk nothing starts (the
        runs stay queued for a later call)."""
        started: list[str] = []
        free = self._free_by_pool()
        for record in self.registry.list_runs("queued", newest_first=False):
            if all(n is not None and n <= 0 for n in free.values()):
                break
            pool = self._pool_of(record)
            limit = free.get(pool)
            if limit is not None and limit <= 0:
                continue  # its pool is full; a run of another pool may still start
            if self._started_here(record):
                continue
            try:
                self.start(record.run_id)
            except InvalidTransitionError:
                continue  # another launcher took it
            except RegistryError as exc:
                if not str(exc).startswith("disk full"):
                    raise
                break
            started.append(record.run_id)
            if limit is not None:
                free[pool] = limit - 1
        return started

    def cancel(self, run_id: str, grace: float = 10.0, *, wait: bool = True) -> RunRecord:
        """SIGTERM to the run's processes, SIGKILL after ``grace`` s; see the class docstring."""
        raise NotImplementedError

    def _run_ended(self, run_id: str) -> bool:
        """Whether nothing of a finished run is still running under this launcher."""
        raise NotImplementedError

    def _drop_queued(self, run_id: str) -> None:
        """Called when a queued run is stopped, before it is marked ``cancelled``."""

    def submit(self, run_id: str) -> RunRecord:
        """Queues a ``queued`` run and starts it at once when a slot is free (idempotent)."""
        record = self.registry.get(run_id)
        if record.status not in ("queued", "running"):
            raise ValueError(f"Run {run_id!r} is {record.status!r}; only queued runs can be "
                             "submitted (use resume for a finished run).")
        self.poll()
        return self.registry.get(run_id)

    def stop(self, run_id: str) -> None:
        """Asks a run to stop gracefully (``stop.request``: checkpoint, then ``stopped``); a
        queued run is cancelled."""
        record = self.registry.get(run_id)
        if record.status == "queued":
            self._drop_queued(run_id)
            with contextlib.suppress(InvalidTransitionError):
                self.registry.set_status(run_id, "cancelled", expected="queued")
            return
        if record.status != "running":
            raise ValueError(f"Run {run_id!r} is {record.status!r}; only a running or queued run "
                             "can be stopped.")
        stop_file = self.registry.run_dir(run_id) / paths.STOP_FILE
        stop_file.write_text(f"{time.time()}\n", encoding="utf-8")

    def wait(self, run_id: str, timeout: float | None = None, interval: float | None = None) -> RunRecord:
        """Polls until the run has finished and its process or job has ended, or ``timeout``
        seconds passed (every ``interval`` s, default ``wait_interval_s``); returns its record."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            self.poll()
            record = self.registry.get(run_id)
            if record.is_finished and self._run_ended(run_id):
                return record
            if deadline is not None and time.monotonic() > deadline:
                return record
            time.sleep(self.wait_interval_s if interval is None else interval)
