"""How a run's action maps onto the engine: ``execute_with_engine`` runs the pre-flight check when
asked, builds the Estimator (``estimator_workbench.execution.build.build_estimator``) and calls its
``train``, ``evaluate``, ``predict`` or ``ee.train_and_evaluate`` with the runner's hooks (the
metrics stream, the stop signals, the NaN policy, early stopping) and checkpoint fence.

The run's schedule (``RunSpec.schedule``, ``estimator_workbench.store.run_spec.Schedule``, checked
when the run was submitted): training ends at ``schedule.train_until`` (``max_steps``; ``steps`` is
read as the same target, so a resumed run finishes the original budget instead of adding to it),
``eval_steps``, ``eval_every_steps`` (train_and_evaluate), ``metrics_every_n_steps``, the input
settings ``batch_size`` and ``shuffle_seed``, and ``preflight`` / ``preflight_timeout``: when
``preflight`` is true, the pre-flight check (``estimator_workbench.execution.preflight.check_in_process``)
runs in this process before the Estimator is built (not under ``torch.distributed.run``, where the
caller checks before launching, and not for ``evaluate``/``predict``, which reuse a trained model on
data that may have no label); its report goes to ``runs/<id>/preflight.json`` and a failed check
fails the run with the check's error. ``early_stopping`` (train_and_evaluate; see
``engine_hooks.early_stopping_hook``: the engine's hooks) and ``nan_policy`` (``'fail'``, the
default, or ``'stop'``: the run ends ``stopped`` at the first NaN loss, its newest checkpoint the
last finite one).
Checking here rather than in a separate process before the launch saves a second interpreter
start and torch import (seconds) between pressing Train and the first metric line.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from estimator_workbench.execution.lineage import (
    TASK_INFO_FILE,
    drop_orphaned_metrics,
    prepare_lineage,
)
from estimator_workbench.execution.run_context import RunContext
from estimator_workbench.store import paths
from estimator_workbench.store.records import IMPORT_ACTION, TRAINING_ACTIONS
from estimator_workbench.store.run_spec import DEFAULT_PREFLIGHT_TIMEOUT_S

__all__ = ['PREFLIGHT_FILE', 'PreflightFailed', 'execute_with_engine']


PREFLIGHT_FILE = "preflight.json"


def _input_fn(input_fns: Any, key: str) -> Any:
    from estimator_workbench.data import datasets

    if isinstance(input_fns, Mapping):
        value = input_fns.get(key)
    else:
        value = getattr(input_fns, key, None)
    if value is None and key == "eval" and isinstance(input_fns, datasets.InputFns):
        info = input_fns.info
        raise ValueError(f"No evaluation rows: the split put {info.get('n_train')} rows in train and "
                         f"{info.get('n_eval')} in eval. Raise the dataset's eval fraction (or add "
                         "rows), or choose the action 'train'.")
    if value is None:
        raise ValueError(f"The template's build_estimator gave no {key!r} input_fn.")
    return value


class PreflightFailed(Exception):
    """The run's pre-flight check failed; ``report`` is the ``PreflightReport``."""

    def __init__(self, report: Any) -> None:
        super().__init__(report.summary())
        self.report = report


def _preflight(ctx: RunContext) -> None:
    """Runs the pre-flight check in this process when the schedule asks for it (see the module
    docstring); raises ``PreflightFailed`` when it fails."""
    spec = ctx.spec
    if not spec.schedule.preflight or int(os.environ.get("WORLD_SIZE", "1")) > 1:
        return
    if spec.action not in TRAINING_ACTIONS:
        # The check trains a step; these actions reuse a trained model (whose code already ran)
        # on data that may have no label.
        return
    from estimator_workbench.execution.preflight import check_in_process

    timeout = spec.schedule.preflight_timeout  # set by submit_run whenever preflight is
    report = check_in_process(
        spec.template.code or "", spec.dataset, spec.params,
        DEFAULT_PREFLIGHT_TIMEOUT_S if timeout is None else timeout,
        template_name=spec.template.name or "template", action=spec.action,
        report_path=ctx.run_dir / PREFLIGHT_FILE if ctx.is_chief else None)
    print(report.summary(), flush=True)
    if not report.ok:
        raise PreflightFailed(report)


def execute_with_engine(ctx: RunContext) -> None:
    """Runs the pre-flight check when asked, builds the Estimator through
    ``estimator_workbench.execution.build.build_estimator`` and runs the action (an ``import_tf``
    run: ``estimator_workbench.execution.tf_import.execute_import``)."""
    if ctx.spec.action == IMPORT_ACTION:
        from estimator_workbench.execution.tf_import import execute_import

        execute_import(ctx)
        return
    _preflight(ctx)
    if ctx.stop_requested():
        return
    from estimator_workbench.execution.build import build_estimator

    model_dir = ctx.model_location  # <run_dir>/model, or <storage URL>/runs/<id>/model
    remote = model_dir != str(ctx.model_dir)
    if not remote:
        ctx.model_dir.mkdir(parents=True, exist_ok=True)
    lineage = prepare_lineage(ctx)
    action = ctx.spec.action
    if ctx.is_chief and action in TRAINING_ACTIONS and not remote:
        drop_orphaned_metrics(ctx.metrics_path, ctx.model_dir)
    estimator, input_fns = build_estimator(ctx.spec, model_dir, task_info=lineage.task_info,
                                           warm_start_from=lineage.warm_start_from)
    info = getattr(input_fns, "info", None)
    if ctx.is_chief and info is not None and not (ctx.run_dir / TASK_INFO_FILE).exists():
        (ctx.run_dir / TASK_INFO_FILE).write_text(json.dumps(info, default=_json_default), "utf-8")
    max_steps = ctx.schedule.train_until
    eval_steps = ctx.schedule.eval_steps
    checkpoint_path = lineage.checkpoint_path
    if ctx.stop_requested():
        return
    if action == "train":
        estimator.train(_input_fn(input_fns, "train"), hooks=_train_hooks(ctx), max_steps=max_steps,
                        saving_listeners=ctx.saving_listeners(estimator))
    elif action == "evaluate":
        results = estimator.evaluate(_input_fn(input_fns, "eval"), steps=eval_steps,
                                     hooks=[ctx.make_hook()], checkpoint_path=checkpoint_path)
        ctx.write_eval(int(results.get("global_step", 0)), results)
    elif action == "train_and_evaluate":
        _train_and_evaluate(ctx, estimator, input_fns, max_steps, eval_steps)
    elif action == "predict":
        _predict(ctx, estimator, input_fns, checkpoint_path)


def _json_default(value: Any) -> Any:
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"not JSON-serialisable: {value!r}")


def _current_step(estimator: Any) -> int:
    from estimator_engine import checkpoints

    return int(checkpoints.read_global_step(estimator.model_dir))


def _train_and_evaluate(ctx: RunContext, estimator: Any, input_fns: Any, max_steps: int | None,
                        eval_steps: int | None) -> None:
    """``ee.train_and_evaluate`` with in-process evaluation every ``eval_every_steps`` steps and the
    engine's early-stopping hook; the runner adds only the metrics stream and the stop signals."""
    import estimator_engine as ee
    from estimator_workbench.execution.engine_hooks import early_stopping_hook, eval_stream_hook

    if max_steps is None:
        raise ValueError("train_and_evaluate needs schedule['max_steps'] (how long to train), "
                         "given none; set max_steps in the run's schedule.")
    every = ctx.schedule.eval_every_steps or max(1, max_steps // 10)
    train_fn, eval_fn = _input_fn(input_fns, "train"), _input_fn(input_fns, "eval")
    hooks = _train_hooks(ctx)
    hooks.append(eval_stream_hook(ctx, estimator.eval_dir(), every))  # runs after the engine's evaluator
    settings = ctx.schedule.early_stopping
    stopper = early_stopping_hook(estimator, settings, every)
    hooks += [stopper] if stopper is not None else []
    ee.train_and_evaluate(estimator, ee.TrainSpec(train_fn, max_steps=max_steps, hooks=hooks,
                                                  saving_listeners=ctx.saving_listeners(estimator)),
                          ee.EvalSpec(eval_fn, steps=eval_steps, every_n_steps=every))
    if settings is not None and getattr(stopper, "stopped_at", None) is not None:  # (chief only: the others obey its marker)
        patience = settings.patience
        print(f"estimator_workbench.execution.runner: early stopping at step {stopper.stopped_at}: eval {settings.metric} "
              f"has not improved by more than {settings.min_delta:g} for {patience} evaluations "
              f"({patience * every} steps)", flush=True)


def _train_hooks(ctx: RunContext) -> list[Any]:
    """The metrics hook, plus ``NanTensorHook(fail_on_nan_loss=False)`` when the run asks to stop
    (rather than fail) on a NaN loss; it then replaces the engine's default NaN check."""
    hooks = [ctx.make_hook()]
    if ctx.schedule.nan_policy == "stop":
        import estimator_engine as ee

        ctx.nan_hook = ctx.nan_hook or ee.NanTensorHook("loss", fail_on_nan_loss=False)
        hooks.append(ctx.nan_hook)
    return hooks


def _predict(ctx: RunContext, estimator: Any, input_fns: Any, checkpoint_path: str | None) -> None:
    """Writes ``predictions.csv``: the input rows plus the prediction columns, streaming
    (``estimator_workbench.data.predictions.write_predictions_csv``)."""
    out = ctx.run_dir / paths.PREDICTIONS_FILE
    predict_fn = _input_fn(input_fns, "predict")
    from estimator_workbench.data import datasets
    from estimator_workbench.data.predictions import write_predictions_csv

    source = datasets.DatasetSpec.from_dict(ctx.spec.dataset).load()
    info = getattr(input_fns, "info", None) or {}
    write_predictions_csv(estimator, predict_fn, source, out,
                          label_vocabulary=info.get("label_vocabulary"),
                          checkpoint_path=checkpoint_path)
