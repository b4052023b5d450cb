"""InMemoryEvaluatorHook: TF's schedule (start, every N iterations, end), no checkpoint needed."""

from __future__ import annotations

import os
import types

import pytest

import estimator_engine as ee
from estimator_engine.testing import linear_model_fn, make_linear_data


def _input_fn(num_epochs=None, n=64):
    x, y = make_linear_data(n=n)
    return ee.inputs.numpy_input_fn(x, y, batch_size=16, num_epochs=num_epochs, shuffle=False)


def _estimator(tmp_path, **config):
    return ee.Estimator(linear_model_fn, model_dir=str(tmp_path), params={},
                        config=ee.RunConfig(tf_random_seed=1, **config))


def test_evaluates_at_start_every_n_iterations_and_at_end(tmp_path):
    est = _estimator(tmp_path)
    hook = ee.InMemoryEvaluatorHook(est, _input_fn(num_epochs=1), every_n_iter=3)
    est.train(_input_fn(), steps=7, hooks=[hook])
    written = ee.read_eval_metrics(os.path.join(str(tmp_path), "eval"))
    assert sorted(written) == [0, 3, 6, 7]
    # The last one is the final model's, as evaluate() of its checkpoint gives it.
    assert hook.eval_result["loss"] == pytest.approx(est.evaluate(_input_fn(num_epochs=1))["loss"])
    assert written[0]["loss"] > written[7]["loss"]


def test_a_named_evaluation_writes_its_own_folder_and_counts_iterations_per_call(tmp_path):
    est = _estimator(tmp_path)
    hook = ee.InMemoryEvaluatorHook(est, _input_fn(num_epochs=1), steps=2, name="holdout",
                                    every_n_iter=4)
    est.train(_input_fn(), steps=5, hooks=[hook])
    est.train(_input_fn(), steps=5, hooks=[hook])  # iterations counted from each call's start
    assert sorted(ee.read_eval_metrics(os.path.join(str(tmp_path), "eval_holdout"))) == [0, 4, 5, 9, 10]


def test_invalid_arguments_are_refused_with_tfs_messages(tmp_path):
    est = _estimator(tmp_path)
    with pytest.raises(ValueError, match=r"invalid every_n_iter=0\."):
        ee.InMemoryEvaluatorHook(est, _input_fn, every_n_iter=0)
    # What RunConfig reads from a TF_CONFIG with two workers.
    two_workers = types.SimpleNamespace(config=types.SimpleNamespace(num_ps_replicas=0, num_worker_replicas=2))
    with pytest.raises(ValueError, match=r"InMemoryEvaluator supports only single machine \(aka Local\) setting\."):
        ee.InMemoryEvaluatorHook(two_workers, _input_fn)
