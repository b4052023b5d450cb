"""``train_and_evaluate``: train with periodic evaluation and export (TF's ``training.py``, local mode).

Two evaluation cadences:

* TF's (``EvalSpec(every_n_steps=None)``, the default): evaluation is driven by checkpoint saves
  (``RunConfig.save_checkpoints_steps/secs``). The first save of the run (the starting state) is
  skipped; each later save is evaluated if ``throttle_secs`` have passed since the last evaluation
  (``throttle_secs=0``: every save); training ends with one more evaluation if its last step was
  not evaluated. Each evaluation restores the checkpoint into a fresh model, as TF does.
* In process (``EvalSpec(every_n_steps=N)``): a training hook evaluates the live model every N
  global steps and at the end, with no checkpoint saved or reloaded (modules switch to eval mode and
  back; the training RNG streams are not disturbed). Checkpoint frequency and ``throttle_secs``
  play no part; an exporter, which exports from a checkpoint, gets one saved at that step if there
  is none yet.

Either way the results are written to ``estimator.eval_dir(eval_spec.name)`` (so early stopping and
``BestExporter`` see them), exporters are called with ``is_the_final_export = global_step >=
max_steps``, and the call returns ``(metrics of the last evaluation, export results of it)``.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from estimator_engine._validation import step_count
from estimator_engine.exporter import Exporter, call_exporter
from estimator_engine.hooks.base import (
    CheckpointSaverListener,
    Session,
    SessionRunContext,
    SessionRunHook,
    SessionRunValues,
)
from estimator_engine.hooks.timer import SecondOrStepTimer

__all__ = ["EvalSpec", "InMemoryEvaluatorHook", "TrainSpec", "train_and_evaluate"]

_log = logging.getLogger("estimator_engine")


def _validate_hooks(hooks: Iterable[Any] | None) -> tuple[SessionRunHook, ...]:
    hooks = tuple(hooks or ())
    for hook in hooks:
        if not isinstance(hook, SessionRunHook):
            raise TypeError(f"All hooks must be `SessionRunHook` instances, given: {hook!r}")
    return hooks


def _validate_saving_listeners(listeners: Iterable[Any] | None) -> tuple[CheckpointSaverListener, ...]:
    listeners = tuple(listeners or ())
    for listener in listeners:
        if not isinstance(listener, CheckpointSaverListener):
            raise TypeError(f"All saving_listeners must be `CheckpointSaverListener` instances, given: {listener!r}")
    return listeners


def _validate_exporters(exporters: Any) -> tuple[Exporter, ...]:
    if not exporters:
        return ()
    if isinstance(exporters, Exporter):
        exporters = [exporters]
    try:
        exporters = list(exporters)
    except TypeError:
        raise TypeError(f"`exporters` must be an Exporter, an iterable of Exporter, or `None`, found {exporters!r}.") from None
    unique_names: list[str] = []
    for exporter in exporters:
        if not isinstance(exporter, Exporter):
            raise TypeError(f"`exporters` must be an Exporter, an iterable of Exporter, or `None`, found {exporters!r}.")
        if not exporter.name:
            raise ValueError("An Exporter cannot have a name that is `None` or empty. All exporter names: "
                             f"{[e.name for e in exporters]}")
        if not isinstance(exporter.name, str):
            raise ValueError(f"An Exporter must have a string name. Given: {type(exporter.name)}")
        if exporter.name in unique_names:
            raise ValueError("`exporters` must have unique names. Such a name cannot be `None`. All exporter "
                             f"names: {[e.name for e in exporters]}")
        unique_names.append(exporter.name)
    return tuple(exporters)


class TrainSpec(collections.namedtuple("TrainSpec", ["input_fn", "max_steps", "hooks", "saving_listeners"])):
    """The training half of ``train_and_evaluate``.

    Args:
        input_fn: the training input_fn.
        max_steps: train until the global step reaches it; ``None`` trains until the input ends.
        hooks: extra ``SessionRunHook`` s (early stopping goes here).
        saving_listeners: ``CheckpointSaverListener`` s.

    Example:
        >>> spec = TrainSpec(lambda: None, max_steps=100)
        >>> spec.max_steps, spec.hooks
        (100, ())
    """

    def __new__(cls, input_fn: Callable[..., Any], max_steps: int | None = None,
                hooks: Iterable[SessionRunHook] | None = None,
                saving_listeners: Iterable[CheckpointSaverListener] | None = None) -> TrainSpec:
        if not callable(input_fn):
            raise TypeError(f"`input_fn` must be callable, given: {input_fn!r}")
        max_steps = step_count("max_steps", max_steps)
        return super().__new__(cls, input_fn, max_steps, _validate_hooks(hooks),
                               _validate_saving_listeners(saving_listeners))


class EvalSpec(collections.namedtuple("EvalSpec", ["input_fn", "steps", "name", "hooks", "exporters",
                                                   "start_delay_secs", "throttle_secs", "every_n_steps"])):
    """The evaluation half of ``train_and_evaluate``.

    Args:
        input_fn: the evaluation input_fn (called again for every evaluation).
        steps: batches per evaluation; ``None`` evaluates until the input ends.
        name: evaluation name: results go to ``eval_<name>`` instead of ``eval``.
        hooks: ``SessionRunHook`` s run during evaluation.
        exporters: an ``Exporter`` or an iterable of them, called after each evaluation.
        start_delay_secs: accepted for TF compatibility (used by distributed evaluators only).
        throttle_secs: with checkpoint-driven evaluation, the least seconds between evaluations.
        every_n_steps: evaluate the live model every N training steps in process instead of on
            checkpoint saves (``throttle_secs`` then plays no part).

    Example:
        >>> spec = EvalSpec(lambda: None, steps=None, every_n_steps=50)
        >>> spec.exporters, spec.throttle_secs
        ((), 600)
    """

    def __new__(cls, input_fn: Callable[..., Any], steps: int | None = 100, name: str | None = None,
                hooks: Iterable[SessionRunHook] | None = None, exporters: Any = None,
                start_delay_secs: float = 120, throttle_secs: float = 600,
                every_n_steps: int | None = None) -> EvalSpec:
        if not callable(input_fn):
            raise TypeError(f"`input_fn` must be callable, given: {input_fn!r}")
        steps = step_count("steps", steps)
        if name is not None and not isinstance(name, str):
            raise TypeError(f"`name` must be string, given: {name!r}")
        hooks = _validate_hooks(hooks)
        exporters = _validate_exporters(exporters)
        if start_delay_secs < 0:
            raise ValueError(f"Must specify start_delay_secs >= 0, given: {start_delay_secs!r}")
        if throttle_secs < 0:
            raise ValueError(f"Must specify throttle_secs >= 0, given: {throttle_secs!r}")
        every_n_steps = step_count("every_n_steps", every_n_steps, none_text=" or None")
        return super().__new__(cls, input_fn, steps, name, hooks, exporters, start_delay_secs,
                               throttle_secs, every_n_steps)


@contextlib.contextmanager
def _preserved_rng() -> Iterator[None]:
    """An evaluation inside training must not move the training RNG streams (nor reseed them)."""
    from estimator_engine.estimator import _rng_state, _set_rng_state

    saved = _rng_state()
    try:
        yield
    finally:
        _set_rng_state(saved)


def _verify_eval_result(metrics: Any) -> dict[str, Any]:
    if not metrics:
        raise ValueError("Internal error: `Estimator.evaluate` should never return empty metrics.")
    if not isinstance(metrics, Mapping):
        raise TypeError(f"`Estimator.evaluate` should return dict. Given {type(metrics)}.")
    if "global_step" not in metrics:
        raise ValueError(f"Internal error: `Estimator.evaluate` result should have `global_step` in result. Given {metrics!r}")
    return dict(metrics)


class _Evaluator:
    """Evaluates, then calls the exporters; remembers the last result (TF's ``_Evaluator``)."""

    def __init__(self, estimator: Any, eval_spec: EvalSpec, max_training_steps: int | None) -> None:
        self._estimator = estimator
        self._eval_spec = eval_spec
        self._max_training_steps = max_training_steps
        self._previous_ckpt_path: str | None = None
        self.eval_result: dict[str, Any] | None = None
        self.export_results: list[Any] | None = None
        self.evaluated_step: int | None = None

    def evaluate_latest_checkpoint(self) -> str:
        """TF's ``evaluate_and_export``; returns the status ('evaluated', 'missing checkpoint', ...)."""
        latest = self._estimator.latest_checkpoint()
        if not latest:
            _log.warning("Estimator is not trained yet. Will start an evaluation when a checkpoint is ready.")
            return "missing checkpoint"
        if latest == self._previous_ckpt_path:
            _log.warning("No new checkpoint ready for evaluation. Skip the current evaluation pass as evaluation "
                         "results are expected to be same for the same checkpoint.")
            return "no new checkpoint"
        spec = self._eval_spec
        with _preserved_rng():
            metrics = self._estimator.evaluate(input_fn=spec.input_fn, steps=spec.steps, name=spec.name,
                                               checkpoint_path=latest, hooks=spec.hooks)
        self._record(metrics, latest)
        self._previous_ckpt_path = latest
        return "evaluated"

    def evaluate_live(self, session: Session) -> None:
        """Evaluates the running training state in process (``session.evaluate``)."""
        spec = self._eval_spec
        evaluate = getattr(session, "evaluate", None)
        if evaluate is None:
            raise RuntimeError("Evaluating while training needs the session of Estimator.train "
                               f"(one with evaluate()); given {type(session).__name__}.")
        checkpoint_path = None
        if spec.exporters and self._estimator.config.is_chief:
            checkpoint_path = session.save_checkpoint()  # the exporters export from it
        with _preserved_rng():
            metrics = evaluate(spec.input_fn, spec.steps, spec.hooks, spec.name, checkpoint_path)
        self._record(metrics, checkpoint_path)

    def _record(self, metrics: Any, checkpoint_path: str | None) -> None:
        metrics = _verify_eval_result(metrics)
        global_step = int(metrics["global_step"])
        is_the_final_export = (global_step >= self._max_training_steps if self._max_training_steps else False)
        export_results: list[Any] = []
        # Kept before exporting: an exporter's error must not lose the evaluation (already in eval/).
        self.eval_result, self.export_results, self.evaluated_step = metrics, export_results, global_step
        if self._eval_spec.exporters and self._estimator.config.is_chief:
            export_dir_base = os.path.join(self._estimator.model_dir, "export")
            for exporter in self._eval_spec.exporters:
                export_results.append(call_exporter(
                    exporter, estimator=self._estimator, export_path=os.path.join(export_dir_base, exporter.name),
                    checkpoint_path=checkpoint_path, eval_result=metrics,
                    is_the_final_export=is_the_final_export))


class _NewCheckpointListenerForEvaluate(CheckpointSaverListener):
    """Evaluates on checkpoint saves: not the first, throttled, and once more at the end."""

    def __init__(self, evaluator: _Evaluator, eval_throttle_secs: float) -> None:
        self._evaluator = evaluator
        self._eval_throttle_secs = eval_throttle_secs
        self._timer = SecondOrStepTimer(every_secs=eval_throttle_secs)
        self._is_first_run = True

    def begin(self) -> None:
        self._timer.reset()
        self._is_first_run = True

    def after_save(self, session: Session, global_step_value: int) -> bool:
        if self._is_first_run:  # the state the run started from: nothing trained yet
            self._is_first_run = False
            return False
        if self._timer.should_trigger_for_step(global_step_value):
            self._evaluate(global_step_value)
        else:
            _log.info("Skip the current checkpoint eval due to throttle secs (%s secs).", self._eval_throttle_secs)
        return False

    def end(self, session: Session, global_step_value: int) -> None:
        if global_step_value != self._timer.last_triggered_step():
            self._evaluate(global_step_value)

    def _evaluate(self, global_step_value: int) -> None:
        self._timer.update_last_triggered_step(global_step_value)
        status = self._evaluator.evaluate_latest_checkpoint()
        if status != "evaluated":
            raise RuntimeError(f"There was no new checkpoint after the training. Eval status: {status}. "
                               "Each evaluation needs a checkpoint saved after the previous one; check "
                               "RunConfig(save_checkpoints_steps/secs) and latest_checkpoint().")


class _InProcessEvaluatorHook(SessionRunHook):
    """Evaluates the live model every ``every_n_steps`` global steps and at the end of training."""

    def __init__(self, evaluator: _Evaluator, every_n_steps: int) -> None:
        self._evaluator = evaluator
        self._every_n_steps = every_n_steps
        self._failed = False

    def begin(self) -> None:
        self._failed = False

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        session = run_context.session
        if session is None:
            raise RuntimeError("the in-process evaluator hook needs run_context.session, given None")
        if session.global_step % self._every_n_steps == 0:
            self._evaluator.evaluate_live(session)

    def on_exception(self, exception: BaseException) -> None:
        self._failed = True

    def end(self, session: Session) -> None:
        if not self._failed and self._evaluator.evaluated_step != session.global_step:
            self._evaluator.evaluate_live(session)


class InMemoryEvaluatorHook(SessionRunHook):
    """Evaluates the model being trained, without a checkpoint (TF's
    ``tf.estimator.experimental.InMemoryEvaluatorHook``).

    As TF's: once when training starts (the model before its first step), every ``every_n_iter``
    iterations of this training call, and at its end (the final model); results go to
    ``model_dir/eval`` (``eval_<name>``) as ``evaluate``'s do. ``estimator`` supplies the EVAL
    ``model_fn``; the variables are the training ones as they are in memory (TF copies them by
    name). The training RNG streams are left where they were.

    Args:
        estimator: the Estimator whose ``model_fn`` evaluates (usually the one training).
        input_fn, steps, hooks, name: as in ``Estimator.evaluate``.
        every_n_iter: evaluate every N training iterations, >= 1.

    Raises:
        ValueError: ``every_n_iter`` is not positive, or the training is distributed.

    Example:
        >>> # evaluator = ee.InMemoryEvaluatorHook(estimator, eval_input_fn, every_n_iter=100)
        >>> # estimator.train(train_input_fn, hooks=[evaluator])
    """

    def __init__(self, estimator: Any, input_fn: Callable[..., Any], steps: int | None = None,
                 hooks: Iterable[SessionRunHook] | None = None, name: str | None = None,
                 every_n_iter: int = 100) -> None:
        if every_n_iter is None or not isinstance(every_n_iter, int) or every_n_iter <= 0:
            raise ValueError(f"invalid every_n_iter={every_n_iter}.")  # TF's message
        config = estimator.config
        if config.num_ps_replicas > 0 or config.num_worker_replicas > 1:
            raise ValueError("InMemoryEvaluator supports only single machine (aka Local) setting.")
        self._spec = EvalSpec(input_fn, steps=steps, name=name, hooks=hooks, throttle_secs=0)
        self._evaluator = _Evaluator(estimator, self._spec, max_training_steps=None)
        self._every_n_iter = every_n_iter
        self._timer = SecondOrStepTimer(every_steps=every_n_iter)
        self._iter_count = 0
        self._failed = False

    @property
    def eval_result(self) -> dict[str, Any] | None:
        """The last evaluation's results."""
        return self._evaluator.eval_result

    def begin(self) -> None:
        self._timer.reset()
        self._iter_count = 0
        self._failed = False

    def after_create_session(self, session: Any, coord: Any = None) -> None:
        self._evaluate(session)  # the metrics before training

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        self._iter_count += 1
        if self._timer.should_trigger_for_step(self._iter_count):
            self._evaluate(run_context.session)

    def on_exception(self, exception: BaseException) -> None:
        self._failed = True

    def end(self, session: Session) -> None:
        if not self._failed:  # TF's end is not reached after an error; the engine's always is
            self._evaluate(session)

    def _evaluate(self, session: Any) -> None:
        if session is None or not hasattr(session, "evaluate"):
            raise RuntimeError("InMemoryEvaluatorHook runs only as a hook of Estimator.train.")
        self._evaluator.evaluate_live(session)
        self._timer.update_last_triggered_step(self._iter_count)


def train_and_evaluate(estimator: Any, train_spec: TrainSpec,
                       eval_spec: EvalSpec) -> tuple[dict[str, Any] | None, list[Any] | None]:
    """Trains ``estimator`` with evaluation (and export) along the way; returns the last evaluation.

    Returns ``(metrics, export_results)`` of the last evaluation, or ``(None, None)`` when nothing
    was evaluated (e.g. ``max_steps`` was already reached). See the module docstring for when
    evaluations happen.

    Example:
        >>> # metrics, exports = ee.train_and_evaluate(
        >>> #     est, ee.TrainSpec(train_input_fn, max_steps=1000),
        >>> #     ee.EvalSpec(eval_input_fn, steps=None, every_n_steps=100))
    """
    from estimator_engine.estimator import Estimator

    if not isinstance(eval_spec, EvalSpec):
        raise TypeError(f"`eval_spec` must have type `EvalSpec`. Got: {type(eval_spec)}")
    if not isinstance(estimator, Estimator):
        raise TypeError(f"`estimator` must have type `Estimator`. Got: {type(estimator)}")
    if not isinstance(train_spec, TrainSpec):
        raise TypeError(f"`train_spec` must have type `TrainSpec`. Got: {type(train_spec)}")
    config = estimator.config
    if config.task_type == "evaluator" and config.task_id > 0:
        raise ValueError("For distributed training, there can only be one `evaluator` task (with task id 0).  "
                         f"Given task id {config.task_id}")
    evaluator = _Evaluator(estimator, eval_spec, train_spec.max_steps)
    hooks = list(train_spec.hooks)
    listeners = list(train_spec.saving_listeners)
    if eval_spec.every_n_steps is not None:
        _log.info("Start train and evaluate loop. Evaluating in process every %d steps.", eval_spec.every_n_steps)
        # First, so that hooks after it (early stopping) see an evaluation in the step it is made.
        hooks.insert(0, _InProcessEvaluatorHook(evaluator, eval_spec.every_n_steps))
    elif config.is_chief:
        _log.info("Start train and evaluate loop. The evaluate will happen after every checkpoint. Checkpoint "
                  "frequency is determined based on RunConfig arguments: save_checkpoints_steps %s or "
                  "save_checkpoints_secs %s.", config.save_checkpoints_steps, config.save_checkpoints_secs)
        listeners.append(_NewCheckpointListenerForEvaluate(evaluator, eval_spec.throttle_secs))
    estimator.train(input_fn=train_spec.input_fn, max_steps=train_spec.max_steps, hooks=hooks,
                    saving_listeners=listeners)
    return evaluator.eval_result, evaluator.export_results
