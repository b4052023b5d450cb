"""A run's lineage before it starts: what it takes from its parent (task info, checkpoint for
resume or warm start), and the metric lines a resumed run drops (logged after its checkpoint)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from estimator_workbench.store import paths

if TYPE_CHECKING:
    from estimator_workbench.execution.run_context import RunContext

__all__ = ['TASK_INFO_FILE', 'Lineage', 'drop_orphaned_metrics', 'prepare_lineage']


TASK_INFO_FILE = "task_info.json"


class Lineage(NamedTuple):
    """What a run takes from its parent (``prepare_lineage``)."""

    task_info: dict[str, Any] | None = None  # the statistics and vocabularies the model was trained with
    warm_start_from: str | None = None
    checkpoint_path: str | None = None  # the checkpoint to evaluate or predict from


def _parent_dir(ctx: RunContext) -> Path | None:
    parent = ctx.spec.parent_run_id
    return None if not parent else paths.run_dir(ctx.run_dir.parent.parent, parent)


def prepare_lineage(ctx: RunContext) -> Lineage:
    """The ``task_info``, ``warm_start_from`` and checkpoint a run takes from its parent.

    - own ``task_info.json`` (a resumed run) or the parent's: the model keeps the statistics and
      vocabularies it was trained with;
    - ``warm_start``: ``warm_start_from`` = ``checkpoint_path`` or the parent's model_dir;
    - ``resume`` (a new run continuing another): the parent's checkpoints are copied into this
      run's empty model_dir, so the global step continues;
    - ``evaluate_from`` / ``predict_from``: ``checkpoint_path`` or the parent's latest checkpoint.
    """
    parent_dir = _parent_dir(ctx)
    task_info = warm_start_from = None
    for source in (ctx.run_dir, parent_dir):
        if source is not None and (source / TASK_INFO_FILE).exists():
            task_info = json.loads((source / TASK_INFO_FILE).read_text("utf-8"))
            break
    relation = ctx.spec.parent_relation
    checkpoint = ctx.spec.checkpoint_path
    parent_model = None if parent_dir is None else parent_dir / paths.MODEL_DIR
    if parent_dir is not None and parent_model is not None and not parent_model.is_dir():
        remote_parent = paths.model_location(parent_dir)
        if remote_parent != str(parent_model):  # the parent's artifacts are on the workspace's storage
            return _prepare_remote_lineage(ctx, task_info, relation, checkpoint, remote_parent)
    if parent_dir is not None and parent_model is not None and checkpoint and not os.path.isabs(checkpoint):
        # 'model.ckpt-100' as the checkpoint list shows it, or 'model/model.ckpt-100' from the run folder
        in_model_dir = parent_model / checkpoint
        checkpoint = str(in_model_dir if in_model_dir.exists() else parent_dir / checkpoint)
    if relation == "warm_start":
        warm_start_from = checkpoint or str(parent_model)
    elif relation == "resume" and parent_model is not None and parent_model.is_dir():
        if not any(ctx.model_dir.iterdir()):
            import shutil

            shutil.copytree(parent_model, ctx.model_dir, dirs_exist_ok=True)
    elif relation in ("evaluate_from", "predict_from") and not checkpoint and parent_model is not None:
        from estimator_engine import checkpoints

        checkpoint = checkpoints.latest_checkpoint(parent_model)
        if checkpoint is None:
            raise ValueError(f"The parent run {ctx.spec.parent_run_id!r} has no checkpoint "
                             f"in {parent_model}; train it first.")
    return Lineage(task_info, warm_start_from, checkpoint)


def _prepare_remote_lineage(ctx: RunContext, task_info: dict[str, Any] | None, relation: str | None,
                            checkpoint: str | None, parent_model: str) -> Lineage:
    """prepare_lineage for a parent whose model_dir is on the workspace's storage (a URL)."""
    from estimator_engine import checkpoints, gfile

    warm_start_from = None
    if checkpoint and not gfile.is_url(checkpoint) and not os.path.isabs(checkpoint):
        checkpoint = gfile.join(parent_model, checkpoint.removeprefix(f"{paths.MODEL_DIR}/"))
    if relation == "warm_start":
        warm_start_from = checkpoint or parent_model
    elif relation == "resume":
        target = ctx.model_location
        if checkpoints.latest_checkpoint(target) is None:  # copy the parent's checkpoints once
            fs, inner = gfile.filesystem(parent_model)
            _, target_inner = gfile.filesystem(target)
            with gfile.reporting("copy", parent_model):
                fs.copy(inner.rstrip("/") + "/", target_inner.rstrip("/") + "/", recursive=True)
    elif relation in ("evaluate_from", "predict_from") and not checkpoint:
        checkpoint = checkpoints.latest_checkpoint(parent_model)
        if checkpoint is None:
            raise ValueError(f"The parent run {ctx.spec.parent_run_id!r} has no checkpoint "
                             f"in {parent_model}; train it first.")
    return Lineage(task_info, warm_start_from, checkpoint)


def drop_orphaned_metrics(metrics_path: Path, model_dir: Path) -> int:
    """Removes the rows logged past the newest checkpoint; returns how many.

    Training resumes from that checkpoint, so rows beyond it came from an attempt that died before
    saving them; kept, the charts would show two histories for the same steps and the summary the
    dead attempt's loss. TensorBoard purges such orphaned steps the same way. The file is
    replaced (temp file + rename): tailing readers see a new file and read it again.
    """
    from estimator_engine import checkpoints

    if not metrics_path.exists():
        return 0
    latest = checkpoints.latest_checkpoint(model_dir) if model_dir.is_dir() else None
    try:  # the step from the name (model.ckpt-N): a checkpoint that fails to load keeps every row
        resumed_at = 0 if latest is None else int(Path(latest).name.rpartition("-")[2])
    except ValueError:
        return 0
    lines = metrics_path.read_bytes().splitlines(keepends=True)
    kept = [line for line in lines if not _logged_after(line, resumed_at)]
    if len(kept) == len(lines):
        return 0
    temp = metrics_path.with_name(metrics_path.name + f".{os.getpid()}.tmp")
    temp.write_bytes(b"".join(kept))
    os.replace(temp, metrics_path)
    return len(lines) - len(kept)


def _logged_after(line: bytes, step: int) -> bool:
    try:
        row_step = json.loads(line).get("step")
    except (ValueError, AttributeError):
        return False  # a partial or odd line: left to the readers, which skip it
    return isinstance(row_step, int) and row_step > step
