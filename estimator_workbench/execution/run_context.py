"""The context an action executor gets (``RunContext``): the run's spec, folder and merged
schedule, its stop signals (stop file, SIGTERM) and its fencing token, with the metrics hooks and
evaluation rows written under that token.

``estimator_workbench.execution.runner`` makes one per run and hands it to the executor
(``estimator_workbench.execution.engine_run.execute_with_engine`` by default); ``run_schedule`` merges
``run.json['schedule']`` over the same keys in ``run_config`` (``SCHEDULE_KEYS``; what each means:
``estimator_workbench.execution.engine_run``).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from estimator_workbench.store import paths
from estimator_workbench.store.records import OwnershipLostError
from estimator_workbench.store.registry import RunRegistry

__all__ = ['SCHEDULE_KEYS', 'Executor', 'RunContext', 'engine_spec', 'run_schedule']


SCHEDULE_KEYS = ("max_steps", "steps", "eval_steps", "eval_every_steps", "metrics_every_n_steps",
                 "batch_size", "shuffle_seed", "preflight", "preflight_timeout")


@dataclass
class RunContext:
    """What an action executor gets: the run's spec and folder, and the stop signals.

    Attributes:
        run_dir: the run folder.
        spec: the parsed ``run.json``.
        schedule: the merged schedule (``run_schedule``; its keys: ``estimator_workbench.execution.engine_run``).
        is_chief: rank 0 (or not distributed).
        terminate: set by SIGTERM (cancel).
    """

    run_dir: Path
    spec: dict[str, Any]
    schedule: dict[str, Any]
    is_chief: bool = True
    terminate: threading.Event = field(default_factory=threading.Event)
    summary_rows: list[dict[str, Any]] = field(default_factory=list)
    nan_hook: Any = None  # the NanTensorHook of a run with nan_policy 'stop'
    registry: RunRegistry | None = None
    attempt: int | None = None  # the fencing token this runner writes under (chief only)
    ownership_lost: OwnershipLostError | None = None
    metrics_hooks: list[Any] = field(default_factory=list)

    def check_owner(self) -> None:
        """Raises ``OwnershipLostError`` unless this runner's attempt still owns the run (called
        before every metrics write and checkpoint save; a no-op without a token)."""
        if self.ownership_lost is not None:
            raise self.ownership_lost
        if self.registry is None or self.attempt is None or not self.is_chief:
            return
        try:
            self.registry.check_owner(self.run_id, self.attempt)
        except OwnershipLostError as exc:
            self.lose_ownership(exc)
            raise

    def lose_ownership(self, exc: OwnershipLostError) -> None:
        """Remembers that another attempt owns the run and asks the loop to stop at its next step."""
        if self.ownership_lost is None:
            self.ownership_lost = exc
        self.terminate.set()

    def progress(self) -> tuple[int, float] | None:
        """The last completed step and its wall time, from the newest metrics hook."""
        for hook in reversed(self.metrics_hooks):
            progress = hook.progress()
            if progress is not None:
                return progress
        return None

    def saving_listeners(self, estimator: Any) -> list[Any]:
        """The checkpoint fence (chief with a token, and only when the Estimator saves checkpoints)."""
        config = getattr(estimator, "config", None)
        if (self.attempt is None or not self.is_chief or config is None
                or not (config.save_checkpoints_steps or config.save_checkpoints_secs)):
            return []
        import estimator_engine as ee

        ctx = self

        class _OwnershipFence(ee.CheckpointSaverListener):
            """Checks that the run is still ours before each checkpoint save."""

            def before_save(self, session: Any, global_step_value: int) -> None:
                ctx.check_owner()

        return [_OwnershipFence()]

    @property
    def run_id(self) -> str:
        return str(self.spec["run_id"])

    @property
    def metrics_path(self) -> Path:
        return self.run_dir / paths.METRICS_FILE

    @property
    def stop_path(self) -> Path:
        return self.run_dir / paths.STOP_FILE

    @property
    def model_dir(self) -> Path:
        """The local model folder (see ``model_location`` for where the Estimator writes)."""
        return self.run_dir / paths.MODEL_DIR

    @property
    def model_location(self) -> str:
        """The Estimator's model_dir: the local folder, or a URL on the workspace's storage."""
        return paths.model_location(self.run_dir)

    def stop_requested(self) -> bool:
        """A graceful stop was asked for (stop file) or the process got SIGTERM."""
        return self.terminate.is_set() or self.stop_path.exists()

    def make_hook(self) -> Any:
        """A ``MetricsWriterHook`` wired to this run (rank > 0: stop signals only, no file writes)."""
        from estimator_workbench.store.metrics_hook import MetricsWriterHook

        every = int(self.schedule.get("metrics_every_n_steps") or 10)
        hook = MetricsWriterHook(
            self.metrics_path if self.is_chief else os.devnull, every_n_steps=every,
            stop_file=self.stop_path, should_stop=self.terminate.is_set,
            final_step=self.schedule.get("max_steps"),
            fence=self.check_owner if self.is_chief and self.attempt is not None else None)
        self.metrics_hooks.append(hook)
        return hook

    def diverged(self) -> str | None:
        """Why training stopped on a NaN loss (``nan_policy: 'stop'``), or None."""
        hook = self.nan_hook
        if hook is None or hook.diverged_at is None:
            return None
        from estimator_engine import checkpoints

        last = hook.last_finite_loss
        saved = checkpoints.read_global_step(self.model_dir) if self.model_dir.is_dir() else 0
        return (f"NaN loss at global step {hook.diverged_at} (last finite loss "
                f"{'none' if last is None else f'{last:.6g}'}); stopped as the run asked (nan_policy "
                f"'stop'). The newest checkpoint, step {saved}, is from before the divergence: lower "
                "the learning rate and resume, or warm-start a new run from it.")

    def write_eval(self, step: int, metrics: Mapping[str, Any], split: str = "eval") -> None:
        """Appends evaluation results to ``metrics.jsonl`` (chief only) and keeps them for the summary."""
        if not self.is_chief:
            return
        from estimator_workbench.store.metrics_hook import write_eval

        self.check_owner()
        self.summary_rows.extend(write_eval(self.metrics_path, step, metrics, split=split))


Executor = Callable[[RunContext], None]


def run_schedule(spec: Mapping[str, Any]) -> dict[str, Any]:
    merged = {k: v for k, v in (spec.get("run_config") or {}).items() if k in SCHEDULE_KEYS}
    merged.update(spec.get("schedule") or {})
    if merged.get("max_steps") is None and merged.get("steps") is not None:
        merged["max_steps"] = merged["steps"]
    return merged


def engine_spec(spec: Mapping[str, Any], model_dir: Path | str) -> dict[str, Any]:
    """The run spec handed to ``build_estimator``: RunConfig without schedule keys, absolute paths."""
    out = dict(spec)
    out["run_config"] = {k: v for k, v in (spec.get("run_config") or {}).items()
                         if k not in SCHEDULE_KEYS}
    out["schedule"] = run_schedule(spec)
    for key in ("batch_size", "shuffle_seed"):  # build_estimator reads these at the top level
        if out["schedule"].get(key) is not None:
            out[key] = out["schedule"][key]
    out["model_dir"] = str(model_dir)
    return out
