"""Early stopping hooks: TF's predicates (strict comparisons, min_steps), timer, errors, in-process use."""

from __future__ import annotations

import pytest

import estimator_engine as ee
from estimator_engine import early_stopping
from estimator_engine.hooks import SessionRunContext, SessionRunValues
from estimator_engine.summary import SummaryWriterCache
from estimator_engine.testing import linear_model_fn, make_linear_data
from estimator_engine.train_eval import EvalSpec, TrainSpec, train_and_evaluate

FEATURES, LABELS = make_linear_data(n=128, noise=0.1)


class FakeSession:
    def __init__(self, step):
        self.global_step = step


def write_results(est, results, name=None):
    writer = SummaryWriterCache.get(est.eval_dir(name))
    for step, metrics in results.items():
        writer.add_scalars(metrics, step=step)
    writer.flush()


def should_stop(hook, step=1):
    context = SessionRunContext(original_args=None, session=FakeSession(step))
    hook.begin()
    hook.after_run(context, SessionRunValues(None))
    return context.stop_requested


@pytest.fixture
def est(tmp_path):
    return ee.Estimator(linear_model_fn, model_dir=str(tmp_path), params={})


def test_read_eval_metrics_is_reexported():
    assert early_stopping.read_eval_metrics is ee.read_eval_metrics


@pytest.mark.parametrize("factory, threshold, expected", [
    (early_stopping.stop_if_higher_hook, 0.5, True),
    (early_stopping.stop_if_higher_hook, 0.9, False),   # strict: 0.9 is not > 0.9
    (early_stopping.stop_if_lower_hook, 0.5, True),
    (early_stopping.stop_if_lower_hook, 0.2, False),    # strict: 0.2 is not < 0.2
])
def test_threshold_hooks_are_strict(est, factory, threshold, expected):
    write_results(est, {10: {"m": 0.2}, 20: {"m": 0.9}})
    assert should_stop(factory(est, "m", threshold)) is expected


def test_min_steps_ignores_early_results(est):
    write_results(est, {10: {"m": 0.95}, 20: {"m": 0.1}})
    assert should_stop(early_stopping.stop_if_higher_hook(est, "m", 0.9, min_steps=11)) is False
    assert should_stop(early_stopping.stop_if_higher_hook(est, "m", 0.9, min_steps=10)) is True


@pytest.mark.parametrize("values, max_steps, expected", [
    ({10: 1.0, 20: 0.9, 30: 0.9, 40: 0.95}, 20, True),   # best 0.9 at 20 (equal is not better); 40 - 20 >= 20
    ({10: 1.0, 20: 0.9, 30: 0.9, 40: 0.95}, 21, False),
    ({10: 1.0, 20: 0.9, 30: 0.8}, 10, False),
])
def test_no_decrease(est, values, max_steps, expected):
    write_results(est, {step: {"loss": value} for step, value in values.items()})
    assert should_stop(early_stopping.stop_if_no_decrease_hook(est, "loss", max_steps)) is expected


def test_no_increase_and_named_eval_dir(est):
    write_results(est, {10: {"acc": 0.5}, 20: {"acc": 0.7}, 30: {"acc": 0.6}, 40: {"acc": 0.7}}, name="val")
    eval_dir = est.eval_dir("val")
    assert should_stop(early_stopping.stop_if_no_increase_hook(est, "acc", 20, eval_dir=eval_dir)) is True
    assert should_stop(early_stopping.stop_if_no_increase_hook(est, "acc", 21, eval_dir=eval_dir)) is False
    assert should_stop(early_stopping.stop_if_no_increase_hook(est, "acc", 1)) is False  # default dir: empty


@pytest.mark.parametrize("min_delta, expected", [
    (0.0, False),   # 1.0 -> 0.9 -> 0.85: each step improves; best at 30, 30 - 30 < 20
    (0.06, True),   # 0.85 is only 0.05 under 0.9: best stays at 20, and 40 - 20 >= 20
    (0.2, True),    # no change counts: best stays at 10, 40 - 10 >= 20
])
def test_no_decrease_with_min_delta(est, min_delta, expected):
    write_results(est, {10: {"loss": 1.0}, 20: {"loss": 0.9}, 30: {"loss": 0.85}, 40: {"loss": 0.86}})
    hook = early_stopping.stop_if_no_decrease_hook(est, "loss", 20, min_delta=min_delta)
    assert should_stop(hook) is expected


def test_no_increase_with_min_delta(est):
    write_results(est, {10: {"acc": 0.5}, 20: {"acc": 0.52}, 30: {"acc": 0.53}})
    assert should_stop(early_stopping.stop_if_no_increase_hook(est, "acc", 20)) is False
    assert should_stop(early_stopping.stop_if_no_increase_hook(est, "acc", 20, min_delta=0.05)) is True


@pytest.mark.parametrize("min_delta", [-0.1, float("nan")])
def test_min_delta_must_be_non_negative(est, min_delta):
    with pytest.raises(ValueError, match=r"min_delta must be a number >= 0 \(the smallest change that "
                                         r"counts as an improvement\), given: "):
        early_stopping.stop_if_no_decrease_hook(est, "loss", 10, min_delta=min_delta)


def test_missing_metric_names_the_recorded_ones(est):
    write_results(est, {10: {"loss": 1.0}})
    with pytest.raises(KeyError, match=r"Metric 'auc' is not in the eval results of step 10.*\['loss'\]"):
        should_stop(early_stopping.stop_if_higher_hook(est, "auc", 0.5))


def test_make_early_stopping_hook_errors(est):
    with pytest.raises(TypeError, match="`estimator` must have type `Estimator`"):
        early_stopping.make_early_stopping_hook(object(), lambda: True)
    with pytest.raises(ValueError, match=r"Only one of `run_every_secs` and `run_every_steps` must be set\."):
        early_stopping.make_early_stopping_hook(est, lambda: True, run_every_secs=60, run_every_steps=10)
    with pytest.raises(TypeError, match="`should_stop_fn` must be callable"):
        early_stopping.make_early_stopping_hook(est, None)


def test_timer_first_after_run_triggers_then_every_n_steps(est):
    calls = []
    hook = early_stopping.make_early_stopping_hook(est, lambda: calls.append(1) or False,
                                                   run_every_secs=None, run_every_steps=3)
    hook.begin()
    for step in range(1, 8):
        hook.after_run(SessionRunContext(None, FakeSession(step)), SessionRunValues(None))
    assert len(calls) == 3  # steps 1, 4, 7
    secs = []
    hook = early_stopping.make_early_stopping_hook(est, lambda: secs.append(1) or False)  # every 60 s
    hook.begin()
    for step in range(1, 5):
        hook.after_run(SessionRunContext(None, FakeSession(step)), SessionRunValues(None))
    assert len(secs) == 1


def test_hook_without_a_session_says_so(est):
    hook = early_stopping.make_early_stopping_hook(est, lambda: True)
    hook.begin()
    with pytest.raises(RuntimeError, match=r"needs run_context\.session .*given None: run it inside Estimator\.train"):
        hook.after_run(SessionRunContext(None, None), SessionRunValues(None))


def train_input_fn():
    return ee.inputs.numpy_input_fn(FEATURES, LABELS, batch_size=16, shuffle=True, num_epochs=None)()


def eval_input_fn():
    return ee.inputs.numpy_input_fn(FEATURES, LABELS, batch_size=128, shuffle=False, num_epochs=1)()


def test_stops_train_and_evaluate_with_in_process_evaluation(tmp_path):
    config = ee.RunConfig(save_checkpoints_steps=None, save_checkpoints_secs=None)
    # A learning rate of 0: the eval loss never decreases after the first evaluation (step 5).
    est = ee.Estimator(linear_model_fn, model_dir=str(tmp_path / "flat"), params={"learning_rate": 0.0}, config=config)
    hook = early_stopping.stop_if_no_decrease_hook(est, "loss", 10, run_every_secs=None, run_every_steps=1)
    metrics, _ = train_and_evaluate(est, TrainSpec(train_input_fn, max_steps=1000, hooks=[hook]),
                                    EvalSpec(eval_input_fn, steps=None, every_n_steps=5))
    assert metrics["global_step"] == 15  # evaluated at 5, 10, 15: 15 - 5 >= 10 stops in that step
    assert list(ee.read_eval_metrics(est.eval_dir())) == [5, 10, 15]
    assert hook.stopped_at == 15  # tells the caller it was an early stop, and where


def test_stopped_at_stays_none_when_training_reaches_max_steps(tmp_path):
    config = ee.RunConfig(save_checkpoints_steps=None, save_checkpoints_secs=None)
    est = ee.Estimator(linear_model_fn, model_dir=str(tmp_path / "m"), params={"learning_rate": 0.0}, config=config)
    hook = early_stopping.stop_if_no_decrease_hook(est, "loss", 100, run_every_secs=None, run_every_steps=1)
    train_and_evaluate(est, TrainSpec(train_input_fn, max_steps=10, hooks=[hook]),
                       EvalSpec(eval_input_fn, steps=None, every_n_steps=5))
    assert hook.stopped_at is None


def test_stops_a_converging_model_when_it_plateaus(tmp_path):
    config = ee.RunConfig(save_checkpoints_steps=None, save_checkpoints_secs=None, log_step_count_steps=None)
    est = ee.Estimator(linear_model_fn, model_dir=str(tmp_path / "fit"), params={"learning_rate": 0.1}, config=config)
    hook = early_stopping.stop_if_no_decrease_hook(est, "loss", 50, run_every_secs=None, run_every_steps=1)
    metrics, _ = train_and_evaluate(est, TrainSpec(train_input_fn, max_steps=5000, hooks=[hook]),
                                    EvalSpec(eval_input_fn, steps=None, every_n_steps=5))
    history = ee.read_eval_metrics(est.eval_dir())
    stopped = metrics["global_step"]
    assert stopped < 5000 and stopped == max(history)
    best_step = min(history, key=lambda step: (history[step]["loss"], step))
    assert history[best_step]["loss"] < history[5]["loss"] / 10  # it did learn first
    assert stopped - best_step >= 50
