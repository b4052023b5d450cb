"""Learning-rate schedules: TF 2.15's values, and the Estimator applying them per global step."""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest
import torch

import estimator_engine as ee
from estimator_engine.learning_rate import (
    ExponentialDecay,
    PiecewiseConstantDecay,
    exponential_decay,
    piecewise_constant,
    scheduled,
)

DATA = json.loads((pathlib.Path(__file__).parent / "data" / "learning_rate" / "schedules.json").read_text())


@pytest.mark.parametrize("name", sorted(DATA["cases"]))
def test_schedules_equal_tf(name):
    case = DATA["cases"][name]
    if case["kind"] == "exponential":
        lr, decay_steps, rate, staircase = case["args"]
        keras = ExponentialDecay(lr, decay_steps, rate, staircase=staircase)
        tf1 = [exponential_decay(lr, step, decay_steps, rate, staircase=staircase) for step in DATA["steps"]]
    else:
        boundaries, values = case["args"]
        keras = PiecewiseConstantDecay(boundaries, values)
        tf1 = [piecewise_constant(step, boundaries, values) for step in DATA["steps"]]
    # TF computes in float32 (rate ** 50 at step 5000 differs from float64's by 1.1e-6).
    assert [keras(step) for step in DATA["steps"]] == pytest.approx(case["keras"], rel=2e-6)
    assert tf1 == pytest.approx(case["tf1"], rel=2e-6)


def test_piecewise_constant_validates_its_lengths():
    with pytest.raises(ValueError, match="The length of boundaries should be 1 less than the length of values"):
        PiecewiseConstantDecay([10, 20], [1.0, 0.5])


def test_the_estimator_sets_the_rate_of_each_step_from_the_global_step_it_reads(tmp_path):
    # loss = w: each SGD step subtracts that step's learning rate from w.
    schedule = PiecewiseConstantDecay([2, 4], [1.0, 0.5, 0.25])

    def zero_weight():
        net = torch.nn.Linear(1, 1, bias=False)
        torch.nn.init.zeros_(net.weight)
        return net

    def model_fn(features, labels, mode):
        net = ee.get_module("w", zero_weight)
        loss = net.weight.sum() + 0 * features["x"].sum()
        optimizer = ee.get_optimizer("sgd", lambda: scheduled(torch.optim.SGD, schedule)(net.parameters()))
        return ee.EstimatorSpec(mode, loss=loss, train_op=ee.minimize(optimizer, loss))

    input_fn = ee.inputs.numpy_input_fn({"x": np.zeros((4, 1), np.float32)}, np.zeros((4, 1), np.float32),
                                        batch_size=1, num_epochs=None, shuffle=False)
    est = ee.Estimator(model_fn, model_dir=str(tmp_path))
    est.train(input_fn, steps=3)
    est.train(input_fn, steps=3)  # resumed at global step 3: the schedule goes on from there
    # Steps 0..5 read global steps 0..5: 1.0 up to 2 (included), 0.5 up to 4, then 0.25.
    assert float(est.get_variable_value("w/weight").item()) == pytest.approx(-(1 + 1 + 1 + 0.5 + 0.5 + 0.25))


def test_a_canned_estimator_takes_a_scheduled_optimizer(tmp_path):
    x = np.linspace(-1, 1, 16, dtype=np.float32).reshape(-1, 1)
    constant = ee.LinearRegressor([ee.feature_column.numeric_column("x")], model_dir=str(tmp_path / "a"),
                                  optimizer=scheduled(torch.optim.SGD, PiecewiseConstantDecay([1000], [0.1, 0.1])))
    decayed = ee.LinearRegressor([ee.feature_column.numeric_column("x")], model_dir=str(tmp_path / "b"),
                                 optimizer=scheduled(torch.optim.SGD, PiecewiseConstantDecay([1], [0.1, 0.0])))
    for est in (constant, decayed):
        est.train(ee.inputs.numpy_input_fn({"x": x}, 2 * x, batch_size=16, num_epochs=None, shuffle=False), steps=5)
    name = "linear/linear_model/x/weights"
    first_two = decayed.get_variable_value(name)  # steps 0, 1 at 0.1; then 0.0
    assert constant.get_variable_value(name) != pytest.approx(first_two)
    again = ee.LinearRegressor([ee.feature_column.numeric_column("x")], model_dir=str(tmp_path / "c"),
                               optimizer=scheduled(torch.optim.SGD, PiecewiseConstantDecay([1000], [0.1, 0.1])))
    again.train(ee.inputs.numpy_input_fn({"x": x}, 2 * x, batch_size=16, num_epochs=None, shuffle=False), steps=2)
    assert again.get_variable_value(name) == pytest.approx(first_two)
