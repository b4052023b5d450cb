"""Starts the MLflow mirror of finished runs from a launcher's ``poll``, in the background.

A launcher whose process has ``$WORKBENCH_MLFLOW_URI`` set (the UI, the CLI) checks the workspace's
sync queue (``store.mlflow_state``) every ``check_every_s`` seconds; when a queued run has
finished and its back-off has passed, it starts one sync process (``python -m
estimator_workbench.tracking.mlflow_mirror --workspace WS``) in a session of its own, so the mirror
never delays a run, a poll or the UI, and outlives a CLI that exits. The sync runs no user code
(the export it needs runs in its own child, without secrets), so it gets this process's
environment as it is: the MLflow credentials (``MLFLOW_TRACKING_TOKEN``...), which the runner
processes never get. A runner (and the queue starter it hands over to) has no
``$WORKBENCH_MLFLOW_URI``, so it never starts a sync without those credentials.

Example:
    >>> trigger = MirrorTrigger(registry)             # a launcher makes one    # doctest: +SKIP
    >>> trigger.poll()                                # from its poll()         # doctest: +SKIP
    False
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from estimator_workbench.store import mlflow_state, paths
from estimator_workbench.store.records import RunNotFoundError
from estimator_workbench.store.registry import RunRegistry

__all__ = ["SYNC_MODULE", "MirrorTrigger"]

SYNC_MODULE = "estimator_workbench.tracking.mlflow_mirror"
_SYNC_LOG = ".sync.log"  # in the sync queue's folder
_LOG_LIMIT_BYTES = 1 << 20


class MirrorTrigger:
    """Starts a background sync when a queued mirror is due (see the module docstring).

    Args:
        registry: the workspace's registry.
        check_every_s: how often ``poll`` looks at the queue (a folder listing and one registry
            read per queued run).
    """

    def __init__(self, registry: RunRegistry, check_every_s: float = 2.0) -> None:
        self.registry = registry
        self.root = Path(registry.root)
        self.check_every_s = float(check_every_s)
        self._last_check = -float("inf")
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def enabled(self) -> bool:
        """Whether this process mirrors (``$WORKBENCH_MLFLOW_URI`` set)."""
        return mlflow_state.mirror_uri() is not None

    def due_run_ids(self, now: float | None = None) -> list[str]:
        """The queued runs whose mirror is due now."""
        due = []
        for run_id in mlflow_state.pending_run_ids(self.root):
            try:
                record = self.registry.get(run_id)
            except (RunNotFoundError, ValueError):
                continue
            if mlflow_state.is_due(record, mlflow_state.read_state(paths.run_dir(self.root, run_id)), now):
                due.append(run_id)
        return due

    def running(self) -> bool:
        """Whether the sync this trigger started is still running (reaping it when it ended)."""
        if self._proc is None:
            return False
        if self._proc.poll() is None:
            return True
        self._proc = None
        return False

    def poll(self, *, now: bool = False) -> bool:
        """Starts a sync when one is due and none of this trigger's is running; returns whether
        it started one. ``now``: look at the queue whatever the time since the last look."""
        if not self.enabled or self.running():
            return False
        clock = time.monotonic()
        if not now and clock - self._last_check < self.check_every_s:
            return False
        self._last_check = clock
        if not self.due_run_ids():
            return False
        self._start()
        return True

    def _start(self) -> None:
        log_path = self.root / mlflow_state.PENDING_DIR / _SYNC_LOG
        with contextlib.suppress(OSError):
            if log_path.stat().st_size > _LOG_LIMIT_BYTES:
                os.replace(log_path, log_path.with_name(_SYNC_LOG + ".1"))
        with open(log_path, "ab") as log:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", SYNC_MODULE, "--workspace", str(self.root)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ),
                start_new_session=True, close_fds=True)

    def wait(self, timeout: float | None = None) -> bool:
        """Waits for the running sync to end (at most ``timeout`` s); returns whether it ended."""
        if self._proc is None:
            return True
        try:
            self._proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return False
        self._proc = None
        return True

    def process(self) -> Any:
        """The ``Popen`` of the running sync (or None)."""
        return self._proc if self.running() else None
