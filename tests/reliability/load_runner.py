"""A runner for the load tests: the real ``estimator_workbench.execution.runner`` lifecycle around an action that
appends metric lines exactly like ``estimator_workbench.store.metrics_hook`` (one ``os.write`` per batch on an
``O_APPEND`` descriptor) and beats the registry heartbeat every step (far more registry writes
than a real run makes). No torch import, so eight of them start fast.

Schedule keys: ``max_steps`` (default 200), ``sleep`` (seconds per step, default 0.005).
"""

from __future__ import annotations

import json
import os
import sys
import time

from estimator_workbench.execution import runner
from estimator_workbench.execution.run_context import RunContext
from estimator_workbench.store.registry import RunRegistry

__all__ = ["execute"]


def execute(ctx: RunContext) -> None:
    steps = ctx.schedule.train_until or 200
    sleep = float(ctx.spec.params.get("sleep", 0.005))
    registry = RunRegistry(ctx.run_dir.parent.parent)
    for step in range(1, steps + 1):
        rows = [{"step": step, "wall_time": time.time(), "split": "train", "name": "loss",
                 "value": 1.0 / step},
                {"step": step, "wall_time": time.time(), "split": "train", "name": "accuracy",
                 "value": step / steps}]
        data = "".join(json.dumps(r) + "\n" for r in rows).encode()
        fd = os.open(ctx.metrics_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        registry.heartbeat(ctx.run_id)  # a registry write per step: contention on purpose
        time.sleep(sleep)
    ctx.write_eval(steps, {"accuracy": 1.0, "loss": 1.0 / steps})


if __name__ == "__main__":
    sys.exit(runner.run(sys.argv[1], execute=execute))
