"""canned.optimizers: FTRL against a hand-computed step and TF's ftrl_test numbers; name handling."""

from __future__ import annotations

import math

import pytest
import torch

from estimator_engine.canned.optimizers import Ftrl, TFAdam, get_optimizer_factory


def test_ftrl_one_step_by_hand():
    w = torch.nn.Parameter(torch.tensor([1.0]))
    opt = Ftrl([w], lr=0.1)
    w.grad = torch.tensor([0.5])
    opt.step()
    n_old, n_new = 0.1, 0.1 + 0.25
    z = 0.5 - (math.sqrt(n_new) - math.sqrt(n_old)) / 0.1 * 1.0
    assert w.item() == pytest.approx(-z / (math.sqrt(n_new) / 0.1), rel=1e-6)
    assert opt.state[w]["accumulator"].item() == pytest.approx(n_new)


@pytest.mark.parametrize(("start0", "start1", "expected0", "expected1"), [
    # TF ftrl_test.py testFtrlwithoutRegularization / testFtrlwithoutRegularization2
    ([0.0, 0.0], [0.0, 0.0], [-2.60260963, -4.29698515], [-0.28432083, -0.56694895]),
    ([1.0, 2.0], [4.0, 3.0], [-2.55607247, -3.98729396], [-0.28232238, -0.56096673]),
])
def test_ftrl_matches_tf_three_steps(start0, start1, expected0, expected1):
    v0 = torch.nn.Parameter(torch.tensor(start0))
    v1 = torch.nn.Parameter(torch.tensor(start1))
    opt = Ftrl([v0, v1], lr=3.0)
    for _ in range(3):
        v0.grad = torch.tensor([0.1, 0.2])
        v1.grad = torch.tensor([0.01, 0.02])
        opt.step()
    torch.testing.assert_close(v0.detach(), torch.tensor(expected0), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(v1.detach(), torch.tensor(expected1), rtol=1e-5, atol=1e-6)


def test_ftrl_l1_zeroes_small_weights():
    w = torch.nn.Parameter(torch.tensor([0.0, 0.0]))
    opt = Ftrl([w], lr=1.0, l1=0.5)
    w.grad = torch.tensor([0.1, 2.0])
    opt.step()
    assert w[0].item() == 0.0
    assert w[1].item() < 0


def test_ftrl_argument_errors():
    with pytest.raises(ValueError, match="lr must be > 0"):
        Ftrl([torch.nn.Parameter(torch.zeros(1))], lr=0.0)
    with pytest.raises(ValueError, match="l1 must be >= 0"):
        Ftrl([torch.nn.Parameter(torch.zeros(1))], l1=-1.0)


def test_named_optimizers_use_tf_hyperparameters():
    params = [torch.nn.Parameter(torch.zeros(2))]
    adagrad = get_optimizer_factory("Adagrad", 0.05)(params)
    assert isinstance(adagrad, torch.optim.Adagrad)
    assert adagrad.defaults["initial_accumulator_value"] == 0.1
    assert adagrad.defaults["lr"] == 0.05
    assert isinstance(get_optimizer_factory("ftrl", 0.2)(params), Ftrl)
    assert get_optimizer_factory("RMSProp", 0.1)(params).defaults["alpha"] == 0.9
    assert isinstance(get_optimizer_factory(torch.optim.SGD, 0.1)(params), torch.optim.SGD)
    with pytest.raises(TypeError, match=r"must be a torch\.optim\.Optimizer subclass"):
        get_optimizer_factory(int, 0.1)
    with pytest.raises(TypeError, match="must be a name"):
        get_optimizer_factory(3, 0.1)


def test_named_optimizers_use_the_fastest_cpu_kernel_with_the_same_rule():
    params = [torch.nn.Parameter(torch.zeros(3)), torch.nn.Parameter(torch.zeros(2, 2))]
    assert get_optimizer_factory("Adam")(params).defaults["fused"] is True
    assert get_optimizer_factory("Adagrad")(params).defaults["fused"] is True
    assert get_optimizer_factory("RMSProp")(params).defaults["foreach"] is True
    # Same updates as the per-tensor loop, to float precision.
    for name, cls, extra in (("Adam", TFAdam, {}),
                             ("Adagrad", torch.optim.Adagrad, {"initial_accumulator_value": 0.1})):
        fast = [torch.nn.Parameter(torch.ones(4))]
        slow = [torch.nn.Parameter(torch.ones(4))]
        fast_opt = get_optimizer_factory(name, 0.1)(fast)
        slow_opt = cls(slow, lr=0.1, eps=1e-7, foreach=False, **extra)
        for step in range(5):
            grad = torch.tensor([0.5, -1.0, 2.0, 0.0]) * (step + 1)
            fast[0].grad, slow[0].grad = grad.clone(), grad.clone()
            fast_opt.step()
            slow_opt.step()
        torch.testing.assert_close(fast[0].detach(), slow[0].detach(), rtol=1e-6, atol=1e-7)


def test_named_adam_places_epsilon_as_tf_does():
    """TF's ApplyAdam: w -= lr*sqrt(1-b2^t)/(1-b1^t) * m/(sqrt(v)+eps); torch's Adam adds eps after
    the bias correction (0.9990909 after one step on a 1e-6 gradient, TF 0.9997597)."""
    w = torch.nn.Parameter(torch.tensor([1.0]))
    opt = get_optimizer_factory("Adam")([w])
    expected, m, v = 1.0, 0.0, 0.0
    for t in (1, 2, 3):
        g = 1e-6 * t
        w.grad = torch.tensor([g])
        opt.step()
        m, v = 0.9 * m + 0.1 * g, 0.999 * v + 0.001 * g * g
        expected -= 0.001 * math.sqrt(1 - 0.999 ** t) / (1 - 0.9 ** t) * m / (math.sqrt(v) + 1e-7)
        assert w.item() == pytest.approx(expected, rel=1e-7)


def test_tf_adam_resumes_from_a_plain_adam_state():
    """A checkpoint written by torch's Adam (before TFAdam) loads; TF's epsilon is taken from its eps."""
    w = torch.nn.Parameter(torch.tensor([1.0]))
    plain = torch.optim.Adam([w], lr=0.001, eps=1e-7)
    w.grad = torch.tensor([1e-3])
    plain.step()
    resumed = TFAdam([w], lr=0.001)
    resumed.load_state_dict(plain.state_dict())
    w.grad = torch.tensor([1e-3])
    resumed.step()
    assert resumed.param_groups[0]["tf_epsilon"] == 1e-7
    assert resumed.param_groups[0]["eps"] == pytest.approx(1e-7 / math.sqrt(1 - 0.999 ** 2))
