"""Optimizers the engine manages get torch's fastest CPU kernel when the user left fused/foreach unset."""

from __future__ import annotations

import pytest
import torch

import estimator_engine as ee
from estimator_engine.model_state import use_fastest_kernel
from estimator_engine.testing import make_linear_data


def _params():
    return [torch.nn.Parameter(torch.ones(3, 2)), torch.nn.Parameter(torch.zeros(2))]


@pytest.mark.parametrize(("make", "kernel"), [
    (lambda p: torch.optim.Adam(p, lr=0.1), "fused"),
    (lambda p: torch.optim.AdamW(p, lr=0.1), "fused"),
    (lambda p: torch.optim.Adagrad(p, lr=0.1), "fused"),
    (lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9), "fused"),
    (lambda p: torch.optim.RMSprop(p, lr=0.1), "foreach"),
])
def test_unset_kernels_become_the_fastest(make, kernel):
    optimizer = make(_params())
    assert use_fastest_kernel(optimizer) == kernel
    assert all(group[kernel] is True for group in optimizer.param_groups)


@pytest.mark.parametrize("make", [
    lambda p: torch.optim.Adam(p, lr=0.1, fused=False),
    lambda p: torch.optim.Adam(p, lr=0.1, foreach=False),
    lambda p: torch.optim.Adam(p, lr=0.1, foreach=True),
    lambda p: torch.optim.SGD(p, lr=0.1),  # plain SGD: torch's loop was the fastest
    lambda p: torch.optim.Adam(p, lr=0.1, differentiable=True),
    lambda p: torch.optim.Adamax(p, lr=0.1),  # not in the table
    lambda p: torch.optim.Adam([torch.nn.Parameter(torch.ones(2, dtype=torch.complex64))], lr=0.1),
])
def test_a_user_choice_or_an_unsupported_case_is_left_alone(make):
    optimizer = make(_params())
    before = [dict(g) for g in optimizer.param_groups]
    assert use_fastest_kernel(optimizer) is None
    assert [dict(g) for g in optimizer.param_groups] == before


def _model_fn(features, labels, mode, params):
    net = ee.get_module("net", lambda: torch.nn.Sequential(torch.nn.Linear(1, 8), torch.nn.Tanh(),
                                                           torch.nn.Linear(8, 1)))
    loss = torch.nn.functional.mse_loss(net(features["x"]), labels)
    optimizer = ee.get_optimizer("opt", lambda: params["make"](net.parameters()),
                                 fastest_kernel=params["fastest"])
    kernels.append(optimizer.param_groups[0].get("fused"))
    return ee.EstimatorSpec(mode, loss=loss, train_op=ee.minimize(optimizer, loss))


kernels: list = []


def _train(tmp_path, make, fastest, steps=40):
    x, y = make_linear_data(n=64)
    est = ee.Estimator(_model_fn, model_dir=str(tmp_path), params={"make": make, "fastest": fastest},
                       config=ee.RunConfig(tf_random_seed=3))
    est.train(ee.inputs.numpy_input_fn(x, y, batch_size=16, num_epochs=None, shuffle=False), steps=steps)
    return est


@pytest.mark.parametrize("make", [
    lambda p: torch.optim.Adam(p, lr=0.01),
    lambda p: torch.optim.AdamW(p, lr=0.01, weight_decay=0.1),
    lambda p: torch.optim.Adagrad(p, lr=0.1),
    lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, nesterov=True),
], ids=["Adam", "AdamW", "Adagrad", "SGD-nesterov"])
def test_the_fast_kernel_trains_to_the_same_numbers(tmp_path, make):
    kernels.clear()
    fast = _train(tmp_path / "fast", make, fastest=True)
    assert kernels[-1] is True
    kernels.clear()
    default = _train(tmp_path / "default", make, fastest=False)
    assert not kernels[-1]
    for name in fast.get_variable_names():
        if name != "global_step":
            assert fast.get_variable_value(name) == pytest.approx(default.get_variable_value(name), abs=2e-6), name


def test_resuming_a_checkpoint_of_torchs_default_kernel(tmp_path):
    make = lambda p: torch.optim.Adam(p, lr=0.01)  # noqa: E731
    _train(tmp_path / "a", make, fastest=False, steps=20)
    resumed = _train(tmp_path / "a", make, fastest=True, steps=20)  # default-kernel state, fused now
    straight = _train(tmp_path / "b", make, fastest=False, steps=40)
    for name in straight.get_variable_names():
        if name != "global_step":
            assert resumed.get_variable_value(name) == pytest.approx(straight.get_variable_value(name), abs=2e-6)


def test_minimize_picks_the_kernel_of_an_optimizer_it_has_not_seen():
    w = torch.nn.Parameter(torch.ones(2))
    optimizer = torch.optim.Adam([w], lr=0.1)
    ee.minimize(optimizer, (w ** 2).sum())()
    assert optimizer.param_groups[0]["fused"] is True
    kept = torch.optim.Adam([w], lr=0.1)
    ee.minimize(kept, (w ** 2).sum(), fastest_kernel=False)()
    assert kept.param_groups[0]["fused"] is None
