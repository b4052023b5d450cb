"""Following a run from the command line: one progress line per update until it finishes."""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from typing import Any, TextIO

from estimator_workbench.cli.usage import PROG as _PROG
from estimator_workbench.store import paths
from estimator_workbench.store.registry import RunRegistry

__all__ = []


def follow_run(launcher: Any, run_id: str, out: TextIO | None = None, interval: float = 0.25) -> int:
    """Prints a one-line progress bar until the run finishes; Ctrl-C detaches (the run goes on)."""
    from estimator_workbench.store.metrics_store import MetricsTail

    out = out or sys.stderr
    reg: RunRegistry = launcher.registry
    tail = MetricsTail(reg.run_dir(run_id) / paths.METRICS_FILE)
    latest: dict[str, Any] = {}
    step = 0
    record = reg.get(run_id)
    total = record.schedule.get("max_steps") or record.schedule.get("steps")
    interactive = out.isatty()
    last_line = ""
    try:
        while True:
            launcher.poll()
            record = reg.get(run_id)
            for row in tail.read():
                latest[f"{row.get('split')}/{row.get('name')}"] = row.get("value")
                if isinstance(row.get("step"), int):
                    step = max(step, row["step"])
            line = _progress_line(record.status, step, total, latest)
            if line != last_line:
                out.write("\r" + line.ljust(100)[:120] if interactive else line + "\n")
                out.flush()
                last_line = line
            if record.is_finished and launcher.process(run_id) is None:
                break
            time.sleep(interval)
    except KeyboardInterrupt:
        out.write(f"\nDetached; run {run_id} goes on. Stop it with `{_PROG} stop {run_id}`.\n")
        return 0
    if interactive:
        out.write("\n")
    print(f"Run {run_id} {record.status}.", file=out)
    if record.error:
        print(record.error, file=out)
    if record.status == "failed" and record.traceback:
        print(record.traceback, file=out)
    return 0 if record.status in ("succeeded", "stopped") else 1


def _progress_line(status: str, step: int, total: int | None, latest: Mapping[str, Any]) -> str:
    if total:
        done = min(1.0, step / total)
        bar = "[" + "#" * int(done * 20) + "." * (20 - int(done * 20)) + "]"
        text = f"{status:<9} {bar} step {step}/{total}"
    else:
        text = f"{status:<9} step {step}"
    for key in ("train/loss", "train/steps_per_sec"):
        if isinstance(latest.get(key), (int, float)):
            text += f"  {key.split('/')[1]} {latest[key]:.4g}"
    for key, value in latest.items():
        if key.startswith("eval/") and isinstance(value, (int, float)):
            text += f"  {key} {value:.4g}"
    return text
