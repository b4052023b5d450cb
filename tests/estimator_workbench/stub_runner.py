"""A test-only runner: the real ``estimator_workbench.execution.runner`` lifecycle around a fake action (no engine).

It runs ``schedule.max_steps`` steps (default 50); its knobs travel in the run's params
(``tests/stub_runs.py``): ``sleep`` (seconds per step, default 0.02), ``ignore_sigterm`` (to test
the SIGKILL escalation), ``fail`` (raise after the steps).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

from estimator_workbench.execution import runner
from estimator_workbench.execution.run_context import RunContext

__all__ = ["execute"]


def execute(ctx: RunContext) -> None:
    knobs = ctx.spec.params
    steps = ctx.schedule.train_until or 50
    sleep = float(knobs.get("sleep", 0.02))
    (ctx.run_dir / "env.json").write_text(json.dumps(
        {"CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES"), "pid": os.getpid()}))
    if knobs.get("ignore_sigterm"):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    start = 0
    done = ctx.run_dir / "stub_step"  # resumable progress, like a checkpoint
    if done.exists():
        start = int(done.read_text())
    for step in range(start + 1, steps + 1):
        if ctx.stop_requested():
            break
        time.sleep(sleep)
        # Written here rather than through estimator_workbench.store.metrics_hook: no torch import, fast start.
        with open(ctx.metrics_path, "a") as f:
            f.write(json.dumps({"step": step, "wall_time": time.time(), "split": "train",
                                "name": "loss", "value": 1.0 / step}) + "\n")
        # Atomic, like a checkpoint: a SIGKILL mid-write must not leave an empty progress file.
        partial = done.with_suffix(".tmp")
        partial.write_text(str(step))
        os.replace(partial, done)
    if knobs.get("fail"):
        raise ValueError("stub failure on purpose")


if __name__ == "__main__":
    sys.exit(runner.run(sys.argv[1], execute=execute))
