"""The context an action executor gets (``RunContext``): the run's contract (``RunSpec``, read
from ``run.json``), its folder, its stop signals (stop file, SIGTERM) and its fencing token, with
the metrics hooks and evaluation rows written under that token.

``estimator_workbench.execution.runner`` makes one per run and hands it to the executor
(``estimator_workbench.execution.engine_run.execute_with_engine`` by default).
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
from estimator_workbench.store.run_spec import RunSpec, Schedule

__all__ = ['Executor', 'RunContext']


@dataclass
class RunContext:
    """What an action executor gets: the run's spec and folder, and the stop signals.

    Attributes:
        run_dir: the run folder.
        spec: the run's contract, read from ``run.json`` (``RunSpec.read``).
        is_chief: rank 0 (or not distributed).
        terminate: set by SIGTERM (cancel).

    Example:
        >>> ctx = RunContext(run_dir=Path("/ws/runs/r-1"), spec=RunSpec(run_id="r-1", schedule={"steps": 5}))
        >>> ctx.run_id, ctx.schedule.train_until
        ('r-1', 5)
    """

    run_dir: Path
    spec: RunSpec
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
        return str(self.spec.run_id)

    @property
    def schedule(self) -> Schedule:
        """How the run is driven (``RunSpec.schedule``)."""
        return self.spec.schedule

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

        every = self.schedule.metrics_every_n_steps or 10
        hook = MetricsWriterHook(
            self.metrics_path if self.is_chief else os.devnull, every_n_steps=every,
            stop_file=self.stop_path, should_stop=self.terminate.is_set,
            final_step=self.schedule.train_until,
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
