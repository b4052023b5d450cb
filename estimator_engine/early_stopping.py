"""Early stopping hooks (TF's ``tf.estimator.experimental.stop_if_*`` family).

A hook checks a predicate over the evaluation results written to the eval directory (by
``Estimator.evaluate`` or by ``train_and_evaluate``, including its in-process ``every_n_steps``
evaluation) and stops training when it holds. When the predicate runs: on the hook's timer,
``run_every_secs`` (default 60 s) or ``run_every_steps`` (pass ``run_every_secs=None`` to use
steps); the first step after training starts always checks. With in-process evaluation
(``EvalSpec(every_n_steps=N)``) put the hook in ``TrainSpec.hooks``: it sees an evaluation in the
same step it was written (the evaluation hook runs first) when it checks every step
(``run_every_secs=None, run_every_steps=1``; a check re-reads the results only when they have
changed). With ``run_every_steps=N`` the checks fall on steps 1, N+1, 2N+1, ... (the timer starts
at the first step, as TF's does), one step after each evaluation.

In multi-process training the chief checks the predicate and writes a stop marker file into
``model_dir``; the other processes poll that file every step and stop too.

Example:
    >>> # hook = stop_if_no_decrease_hook(est, 'loss', max_steps_without_decrease=1000,
    >>> #                                 run_every_secs=None, run_every_steps=100)
    >>> # ee.train_and_evaluate(est, ee.TrainSpec(input_fn, hooks=[hook]), eval_spec)
"""

from __future__ import annotations

import logging
import operator
import os
import time
from collections.abc import Callable
from typing import Any

from estimator_engine import gfile
from estimator_engine.hooks.base import SessionRunContext, SessionRunHook, SessionRunValues
from estimator_engine.hooks.timer import SecondOrStepTimer
from estimator_engine.summary import SUMMARIES_FILENAME, read_eval_metrics

__all__ = [
    "make_early_stopping_hook",
    "read_eval_metrics",
    "stop_if_higher_hook",
    "stop_if_lower_hook",
    "stop_if_no_decrease_hook",
    "stop_if_no_increase_hook",
]

_log = logging.getLogger("estimator_engine")
STOP_MARKER = "signal_early_stopping_STOP"


def _metric(metrics: dict[str, float], metric_name: str, step: int, eval_dir: str) -> float:
    try:
        return metrics[metric_name]
    except KeyError:
        raise KeyError(f"Metric {metric_name!r} is not in the eval results of step {step} in {eval_dir}; "
                       f"recorded metrics: {sorted(metrics)}. Pass one of them as metric_name.") from None


def _eval_dir(estimator: Any, eval_dir: str | os.PathLike | None) -> str:
    return gfile.normalize(eval_dir) if eval_dir else estimator.eval_dir()


def _when_results_change(predicate: Callable[[], bool], eval_dir: str) -> Callable[[], bool]:
    """``predicate``, re-run only when the eval results file has changed since its last run.

    The metric predicates depend on that file alone, so checking every step
    (``run_every_steps=1``, to stop in the step an in-process evaluation is made) costs a
    ``stat`` per step instead of a re-read of every evaluation.
    """
    path = gfile.join(eval_dir, SUMMARIES_FILENAME)
    seen: list[Any] = [object(), False]  # (file signature, answer)
    remote = gfile.is_remote(path)

    def checked() -> bool:
        try:
            if remote:  # one metadata request (HEAD) to the store
                signature: Any = gfile.version(path)
            else:
                info = os.stat(path)
                signature = (info.st_ino, info.st_size, info.st_mtime_ns)
        except FileNotFoundError:
            signature = None
        if signature != seen[0]:
            seen[1] = predicate()  # may raise (an unknown metric): then asked again next time
            seen[0] = signature
        return seen[1]

    return checked


def stop_if_higher_hook(estimator: Any, metric_name: str, threshold: float,
                        eval_dir: str | os.PathLike | None = None, min_steps: int = 0,
                        run_every_secs: float | None = 60, run_every_steps: int | None = None) -> SessionRunHook:
    """Stops training once any evaluation (at step >= ``min_steps``) has ``metric_name > threshold``.

    Example:
        >>> # hook = stop_if_higher_hook(est, 'accuracy', 0.9, run_every_secs=None, run_every_steps=10)
    """
    return _stop_if_threshold_crossed_hook(estimator, metric_name, threshold, True, eval_dir, min_steps,
                                           run_every_secs, run_every_steps)


def stop_if_lower_hook(estimator: Any, metric_name: str, threshold: float,
                       eval_dir: str | os.PathLike | None = None, min_steps: int = 0,
                       run_every_secs: float | None = 60, run_every_steps: int | None = None) -> SessionRunHook:
    """Stops training once any evaluation (at step >= ``min_steps``) has ``metric_name < threshold``.

    Example:
        >>> # hook = stop_if_lower_hook(est, 'loss', 0.01)
    """
    return _stop_if_threshold_crossed_hook(estimator, metric_name, threshold, False, eval_dir, min_steps,
                                           run_every_secs, run_every_steps)


def stop_if_no_increase_hook(estimator: Any, metric_name: str, max_steps_without_increase: int,
                             eval_dir: str | os.PathLike | None = None, min_steps: int = 0,
                             run_every_secs: float | None = 60,
                             run_every_steps: int | None = None,
                             min_delta: float = 0.0) -> SessionRunHook:
    """Stops training when ``metric_name`` has not strictly increased for ``max_steps_without_increase`` steps.

    ``min_delta`` (an extension of TF's hook, as in Keras' ``EarlyStopping``): an increase counts as
    an improvement only when it is larger than ``min_delta``.

    Example:
        >>> # hook = stop_if_no_increase_hook(est, 'accuracy', 1000)
    """
    return _stop_if_no_metric_improvement_hook(estimator, metric_name, max_steps_without_increase, True,
                                               eval_dir, min_steps, run_every_secs, run_every_steps,
                                               min_delta)


def stop_if_no_decrease_hook(estimator: Any, metric_name: str, max_steps_without_decrease: int,
                             eval_dir: str | os.PathLike | None = None, min_steps: int = 0,
                             run_every_secs: float | None = 60,
                             run_every_steps: int | None = None,
                             min_delta: float = 0.0) -> SessionRunHook:
    """Stops training when ``metric_name`` has not strictly decreased for ``max_steps_without_decrease`` steps.

    ``min_delta``: a decrease counts as an improvement only when it is larger than ``min_delta``.

    Example:
        >>> # hook = stop_if_no_decrease_hook(est, 'loss', 1000, run_every_secs=None, run_every_steps=100)
    """
    return _stop_if_no_metric_improvement_hook(estimator, metric_name, max_steps_without_decrease, False,
                                               eval_dir, min_steps, run_every_secs, run_every_steps,
                                               min_delta)


def _stop_if_threshold_crossed_hook(estimator, metric_name, threshold, higher_is_better, eval_dir,
                                    min_steps, run_every_secs, run_every_steps) -> SessionRunHook:
    eval_dir = _eval_dir(estimator, eval_dir)
    is_lhs_better = operator.gt if higher_is_better else operator.lt
    greater_or_lesser = "greater than" if higher_is_better else "less than"

    def stop_if_threshold_crossed_fn() -> bool:
        for step, metrics in read_eval_metrics(eval_dir).items():
            if step < min_steps:
                continue
            value = _metric(metrics, metric_name, step, eval_dir)
            if is_lhs_better(value, threshold):
                _log.info('At step %s, metric "%s" has value %s which is %s the configured threshold (%s) '
                          "for early stopping.", step, metric_name, value, greater_or_lesser, threshold)
                return True
        return False

    return make_early_stopping_hook(estimator, _when_results_change(stop_if_threshold_crossed_fn, eval_dir),
                                    run_every_secs, run_every_steps)


def _stop_if_no_metric_improvement_hook(estimator, metric_name, max_steps_without_improvement,
                                        higher_is_better, eval_dir, min_steps, run_every_secs,
                                        run_every_steps, min_delta: float = 0.0) -> SessionRunHook:
    if not min_delta >= 0:  # also refuses NaN
        raise ValueError(f"min_delta must be a number >= 0 (the smallest change that counts as an "
                         f"improvement), given: {min_delta!r}.")
    eval_dir = _eval_dir(estimator, eval_dir)

    def is_lhs_better(value: float, best: float) -> bool:
        return value - min_delta > best if higher_is_better else value + min_delta < best
    increase_or_decrease = "increase" if higher_is_better else "decrease"

    def stop_if_no_metric_improvement_fn() -> bool:
        best_value: float | None = None
        best_step = 0  # set with best_value on the first step counted
        for step, metrics in read_eval_metrics(eval_dir).items():
            if step < min_steps:
                continue
            value = _metric(metrics, metric_name, step, eval_dir)
            if best_value is None or is_lhs_better(value, best_value):
                best_value, best_step = value, step
            if step - best_step >= max_steps_without_improvement:
                _log.info('No %s in metric "%s" for %s steps, which is greater than or equal to max steps '
                          "(%s) configured for early stopping.", increase_or_decrease, metric_name,
                          step - best_step, max_steps_without_improvement)
                return True
        return False

    return make_early_stopping_hook(estimator, _when_results_change(stop_if_no_metric_improvement_fn, eval_dir),
                                    run_every_secs, run_every_steps)


def make_early_stopping_hook(estimator: Any, should_stop_fn: Callable[[], bool],
                             run_every_secs: float | None = 60,
                             run_every_steps: int | None = None) -> SessionRunHook:
    """A hook that stops training when ``should_stop_fn()`` returns True, checked on a timer.

    Args:
        estimator: the ``Estimator`` being trained.
        should_stop_fn: a no-argument predicate.
        run_every_secs: check at most every N seconds (pass ``None`` to use steps).
        run_every_steps: check every N global steps (only with ``run_every_secs=None``).

    Example:
        >>> # hook = make_early_stopping_hook(est, lambda: time.time() > deadline)
    """
    from estimator_engine.estimator import Estimator

    if not isinstance(estimator, Estimator):
        raise TypeError(f"`estimator` must have type `Estimator`. Got: {type(estimator)}")
    if run_every_secs is not None and run_every_steps is not None:
        raise ValueError("Only one of `run_every_secs` and `run_every_steps` must be set. Given "
                         f"run_every_secs={run_every_secs!r} and run_every_steps={run_every_steps!r}; "
                         "to check every N steps pass run_every_secs=None.")
    if estimator.config.is_chief:
        return _StopOnPredicateHook(should_stop_fn, run_every_secs, run_every_steps,
                                    marker=gfile.join(estimator.model_dir, STOP_MARKER)
                                    if estimator.config.world_size > 1 else None)
    return _CheckForStoppingHook(gfile.join(estimator.model_dir, STOP_MARKER))


class _StopOnPredicateHook(SessionRunHook):
    """Calls ``should_stop_fn`` when its timer triggers (always on the first step) and stops if True.

    ``stopped_at``: the global step at which it requested the stop (None until it does), so that a
    caller can tell an early stop from the end of ``max_steps``.
    """

    def __init__(self, should_stop_fn: Callable[[], bool], run_every_secs: float | None = 60,
                 run_every_steps: int | None = None, marker: str | None = None) -> None:
        if not callable(should_stop_fn):
            raise TypeError(f"`should_stop_fn` must be callable. Given: {should_stop_fn!r}")
        self._should_stop_fn = should_stop_fn
        self._timer = SecondOrStepTimer(every_secs=run_every_secs, every_steps=run_every_steps)
        self._marker = marker
        self.stopped_at: int | None = None

    def begin(self) -> None:
        self._timer.reset()
        self.stopped_at = None
        if self._marker is not None and gfile.exists(self._marker):
            gfile.remove(self._marker)  # a stale signal of an earlier run

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        if run_context.session is None:
            raise RuntimeError("The early-stopping hook needs run_context.session (the training loop's "
                               "session), given None: run it inside Estimator.train.")
        global_step = run_context.session.global_step
        if self._timer.should_trigger_for_step(global_step):
            self._timer.update_last_triggered_step(global_step)
            if self._should_stop_fn():
                _log.info("Requesting early stopping at global step %d", global_step)
                self.stopped_at = global_step
                if self._marker is not None:
                    gfile.write_bytes(self._marker, str(global_step).encode("utf-8"))
                run_context.request_stop()


class _CheckForStoppingHook(SessionRunHook):
    """Non-chief side: stops once the chief has written the stop marker."""

    def __init__(self, marker: str) -> None:
        self._marker = marker
        self._started = 0.0

    def begin(self) -> None:
        self._started = time.time()

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        try:
            signalled = gfile.getmtime(self._marker) >= self._started - 1.0  # not a stale marker
        except FileNotFoundError:
            signalled = False
        if signalled:
            _log.info("Early stopping signalled by the chief; stopping.")
            run_context.request_stop()
