"""``params`` given as an attribute object (TF 1's HParams style) reaches model_fn as that object."""

from __future__ import annotations

import types

import torch

import estimator_engine as ee
from estimator_engine.testing import make_linear_data


class HParams:
    """The shape of tf.contrib.training.HParams: keyword arguments become attributes."""

    def __init__(self, **kwargs):
        self.__dict__.update(kwargs)

    def values(self):
        return dict(self.__dict__)


def _input_fn():
    x, y = make_linear_data(n=32)
    return ee.inputs.numpy_input_fn(x, y, batch_size=8, num_epochs=None, shuffle=False)


def _model_fn(features, labels, mode, params):
    seen.append((type(params).__name__, params.hidden, params.learning_rate))
    params.hidden = -1  # a model_fn that mutates its params must not change the Estimator's
    net = ee.get_module("net", lambda: torch.nn.Linear(1, 1))
    y = net(features["x"])
    if mode == ee.ModeKeys.PREDICT:
        return ee.EstimatorSpec(mode, predictions={"y": y})
    loss = torch.nn.functional.mse_loss(y, labels)
    optimizer = ee.get_optimizer("sgd", lambda: torch.optim.SGD(net.parameters(), lr=params.learning_rate))
    return ee.EstimatorSpec(mode, loss=loss, train_op=ee.minimize(optimizer, loss))


seen: list = []


def test_hparams_object_keeps_attribute_access(tmp_path):
    seen.clear()
    hparams = HParams(hidden=4, learning_rate=0.05)
    est = ee.Estimator(_model_fn, model_dir=str(tmp_path), params=hparams)
    est.train(_input_fn(), steps=2)
    assert seen[0] == ("HParams", 4, 0.05)
    # Deep-copied as TF does: neither the caller's object nor the Estimator's sees the mutation.
    assert hparams.hidden == 4 and est.params.hidden == 4 and est.params is not est.params
    assert est.params.values() == {"hidden": 4, "learning_rate": 0.05}
    seen.clear()
    est.train(_input_fn(), steps=1)
    assert seen == [("HParams", 4, 0.05)]


def test_simple_namespace_params(tmp_path):
    seen.clear()
    est = ee.Estimator(_model_fn, model_dir=str(tmp_path),
                       params=types.SimpleNamespace(hidden=8, learning_rate=0.1))
    est.train(_input_fn(), steps=1)
    assert seen == [("SimpleNamespace", 8, 0.1)]


def test_dict_params_stay_a_dict(tmp_path):
    est = ee.Estimator(lambda features, labels, mode, params: None, model_dir=str(tmp_path),
                       params={"a": 1})
    assert est.params == {"a": 1} and isinstance(est.params, dict)
