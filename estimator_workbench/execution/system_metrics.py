"""System metrics of a run (issue 28 item 10): CPU and memory of the runner's process tree and,
when the run uses CUDA, GPU memory, sampled by a background thread of the runner at a low rate
into the run's one metrics stream (``metrics.jsonl``, split ``system``), where the run page
draws them beside the loss.

Example:
    >>> with SystemSampler(ctx.metrics_path, step=lambda: 0, every_s=10.0):  # doctest: +SKIP
    ...     train()
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from estimator_workbench.store.metrics_hook import append_rows

__all__ = ["DEFAULT_EVERY_S", "EVERY_ENV", "SYSTEM_SPLIT", "SystemSampler", "sample"]

SYSTEM_SPLIT = "system"
DEFAULT_EVERY_S = 10.0  # low rate: a sample costs ~0.2 ms, a run of an hour writes 360 of each
EVERY_ENV = "WORKBENCH_SYSTEM_METRICS_S"  # seconds between samples; 0 turns them off


def sample(process: Any) -> dict[str, float]:
    """One sample of ``process`` (a ``psutil.Process``) and its children: ``cpu_percent`` (100 =
    one core, since the previous sample), ``memory_mb`` (resident), ``system_memory_percent``, and
    ``gpu_memory_mb`` (CUDA memory allocated by this process) when CUDA is in use."""
    import psutil

    procs = [process]
    try:
        procs += process.children(recursive=True)
    except psutil.Error:
        pass
    cpu = memory = 0.0
    for proc in procs:
        try:
            cpu += proc.cpu_percent(None)
            memory += proc.memory_info().rss
        except psutil.Error:
            continue  # a child that ended meanwhile
    out = {"cpu_percent": cpu, "memory_mb": memory / 2**20,
           "system_memory_percent": float(psutil.virtual_memory().percent)}
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        out["gpu_memory_mb"] = float(torch.cuda.memory_allocated()) / 2**20
    return out


class SystemSampler:
    """A daemon thread appending a ``sample`` every ``every_s`` seconds (the first after one
    interval: CPU percent needs an interval to measure) at the run's current ``step()``."""

    def __init__(self, metrics_path: str | os.PathLike[str], step: Callable[[], int | None],
                 every_s: float | None = None) -> None:
        if every_s is None:
            text = os.environ.get(EVERY_ENV, "").strip()
            try:
                every_s = float(text) if text else DEFAULT_EVERY_S
            except ValueError:
                every_s = DEFAULT_EVERY_S
        self.path = Path(metrics_path)
        self.step = step
        self.every_s = every_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._children: dict[int, Any] = {}

    def __enter__(self) -> SystemSampler:
        if self.every_s > 0:
            import psutil

            self._process = psutil.Process()
            self._process.cpu_percent(None)  # the baseline of the first sample
            self._thread = threading.Thread(target=self._loop, name="workbench-system-metrics", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _loop(self) -> None:
        while not self._stop.wait(self.every_s):
            try:
                values = sample(self._process)
                step = self.step()
                wall = time.time()
                append_rows(self.path, [{"step": int(step or 0), "wall_time": wall, "split": SYSTEM_SPLIT,
                                         "name": name, "value": value} for name, value in values.items()])
            except Exception as exc:  # never let a sample end the run
                print(f"workbench: system metrics sample failed: {exc}", file=sys.stderr, flush=True)
