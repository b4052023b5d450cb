"""The warm spare of a ``LocalLauncher``: one runner pre-started while a slot is free.

``python -m estimator_workbench.execution.runner --spare`` imports torch, the engine and pandas, then waits
on its stdin; starting a run writes the run folder into that pipe instead of spawning a new
interpreter, which cuts launch -> first metric line by the imports (1-3 s on a small machine).
The spare exits on end of input, so it never outlives its launcher; at interpreter exit (a UI
server stopping) idle spares are ended at once. Its output goes to ``SPARE_LOG`` in the workspace
folder until it takes a run.
"""

from __future__ import annotations

import atexit
import contextlib
import signal
import subprocess
import sys
import weakref
from collections.abc import Callable
from pathlib import Path

from estimator_workbench.execution.processes import kill_group, new_run_marker

__all__ = ['SPARE_LOG', 'WarmSpare']


SPARE_LOG = "spare.log"  # the warm spare's output until it takes a run (workspace folder)


_STARTED: weakref.WeakSet[WarmSpare] = weakref.WeakSet()


@atexit.register
def _end_idle_spares() -> None:
    """At interpreter exit (a UI server stopping), idle spares end now rather than after their
    imports, when they would notice the end of their input."""
    for spare in list(_STARTED):
        with contextlib.suppress(Exception):
            spare.discard()


class WarmSpare:
    """Holds at most one pre-started runner of a workspace (not thread-safe: its launcher locks).

    Args:
        root: the workspace folder (the spare's working folder, where ``SPARE_LOG`` goes).
        runner_module: run as ``python -m <runner_module> --spare``.
        child_env: ``(gpus, marker) -> environment`` of a runner process (the launcher's).

    Example:
        >>> spare = WarmSpare(Path("workspace"), "estimator_workbench.execution.runner", env_of)  # doctest: +SKIP
        >>> spare.ensure()                      # pre-starts one unless one is waiting  # doctest: +SKIP
        >>> proc = spare.claim()                # the waiting runner, or None           # doctest: +SKIP
        >>> WarmSpare.hand_over(proc, run_folder)  # it runs that run now               # doctest: +SKIP
    """

    def __init__(self, root: Path, runner_module: str,
                 child_env: Callable[[list[str], str], dict[str, str]]) -> None:
        self.root = root
        self.runner_module = runner_module
        self._child_env = child_env
        self.process: subprocess.Popen[bytes] | None = None
        self.marker: str | None = None  # the run marker the waiting spare's processes carry

    def ensure(self) -> None:
        """Starts the spare runner when none is waiting."""
        if self.process is not None:
            if self.process.poll() is None:
                return
            self.discard()
        self.root.mkdir(parents=True, exist_ok=True)
        _STARTED.add(self)
        log = open(self.root / SPARE_LOG, "ab")
        marker = new_run_marker("spare")
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-m", self.runner_module, "--spare"], stdin=subprocess.PIPE,
                stdout=log, stderr=subprocess.STDOUT, cwd=str(self.root),
                env=self._child_env([], marker), start_new_session=True, close_fds=True)
            self.marker = marker
        finally:
            log.close()

    def claim(self) -> subprocess.Popen[bytes] | None:
        """The waiting spare, taken out of the pool (None when there is none or it died)."""
        spare, self.process = self.process, None
        if spare is None:
            return None
        if spare.poll() is not None or spare.stdin is None:
            self.reap(spare)
            return None
        return spare

    @staticmethod
    def hand_over(spare: subprocess.Popen[bytes], folder: Path) -> bool:
        """Sends the run folder to the spare; False when it has died."""
        try:
            stdin = spare.stdin
            if stdin is None:
                return False
            stdin.write(f"{folder}\n".encode())
            stdin.close()
        except OSError:
            return False
        return True

    def discard(self) -> None:
        """Ends the waiting spare, if any."""
        spare, self.process = self.process, None
        if spare is not None:
            self.reap(spare)

    @staticmethod
    def reap(spare: subprocess.Popen[bytes]) -> None:
        """Ends a spare: end of input (an idle spare exits by itself), SIGKILL if it still lives."""
        with contextlib.suppress(OSError, ValueError):
            if spare.stdin is not None:
                spare.stdin.close()  # end of input: an idle spare exits by itself
        if spare.poll() is None:
            kill_group(spare.pid, signal.SIGKILL)
        with contextlib.suppress(Exception):
            spare.wait(timeout=5)
