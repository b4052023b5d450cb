"""What the runner adds to the engine's ``train_and_evaluate``: the engine's early-stopping hook for
a run's ``schedule['early_stopping']``, and a hook that streams each evaluation to ``metrics.jsonl``.

Neither trains, evaluates or decides anything itself: ``estimator_engine`` does
(``ee.train_and_evaluate`` with ``EvalSpec(every_n_steps=...)``,
``ee.early_stopping.stop_if_no_{decrease,increase}_hook``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from estimator_workbench.execution.run_context import RunContext
    from estimator_workbench.store.run_spec import EarlyStoppingSettings

__all__ = ["early_stopping_hook", "eval_stream_hook"]


def early_stopping_hook(estimator: Any, settings: EarlyStoppingSettings | None, every: int) -> Any:
    """The engine's ``stop_if_no_{decrease,increase}_hook`` for ``schedule['early_stopping']``, or None.

    ``patience`` counts evaluations, made every ``every`` steps: training stops when the metric has
    not improved by more than ``min_delta`` for ``patience * every`` steps. ``mode`` defaults to
    ``'min'`` for names with 'loss' or 'error' in them and ``'max'`` otherwise.

    Example:
        >>> # hook = early_stopping_hook(est, EarlyStoppingSettings(metric='loss', patience=3), every=100)
    """
    if settings is None or not settings.patience:
        return None
    from estimator_engine import early_stopping
    from estimator_workbench.store.records import is_lower_better

    metric = settings.metric
    mode = settings.mode or ("min" if is_lower_better(metric) else "max")
    make = (early_stopping.stop_if_no_decrease_hook if mode == "min"
            else early_stopping.stop_if_no_increase_hook)
    # Checked every step (a stat of the results file unless an evaluation was just written): it stops
    # in the step of the evaluation that decides it.
    return make(estimator, metric, settings.patience * every, run_every_secs=None,
                run_every_steps=1, min_delta=settings.min_delta)


def eval_stream_hook(ctx: RunContext, eval_dir: str, every: int) -> Any:
    """A hook that appends each new evaluation of ``eval_dir`` to ``metrics.jsonl`` (chief only):
    every ``every`` steps and at the end of training. Put it after the engine's evaluator (which
    ``train_and_evaluate`` puts first). A factory, so that importing this module skips torch.

    Example:
        >>> # hooks.append(eval_stream_hook(ctx, estimator.eval_dir(), every=100))
    """
    from estimator_engine.hooks.base import SessionRunHook
    from estimator_engine.summary import read_eval_metrics

    class EvalStreamHook(SessionRunHook):
        def __init__(self) -> None:
            self._written: set[int] = set()

        def begin(self) -> None:
            self._written = set(read_eval_metrics(eval_dir))  # streamed by an earlier attempt

        def after_run(self, run_context: Any, run_values: Any) -> None:
            if run_context.session.global_step % every == 0:  # when the engine evaluates
                self._stream()

        def end(self, session: Any) -> None:
            self._stream()

        def _stream(self) -> None:
            if not ctx.is_chief:
                return
            for step, metrics in read_eval_metrics(eval_dir).items():
                if step not in self._written:
                    self._written.add(step)
                    ctx.write_eval(step, metrics)

    return EvalStreamHook()
