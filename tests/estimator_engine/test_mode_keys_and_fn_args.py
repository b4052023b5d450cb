"""Tests of ``ModeKeys`` and of ``fn_args`` / ``call_with_declared`` (TF's ``function_utils.fn_args``)."""

from __future__ import annotations

import copy
import functools
import inspect
import pickle

import pytest

from estimator_engine._fn_args import call_with_declared, fn_args
from estimator_engine.mode_keys import ModeKeys

# -- ModeKeys -------------------------------------------------------------------------------------


def test_mode_key_values_are_tf_strings():
    assert [m.value for m in ModeKeys] == ["train", "eval", "infer"]
    assert [m.name for m in ModeKeys] == ["TRAIN", "EVAL", "PREDICT"]


def test_mode_keys_compare_equal_to_strings():
    assert ModeKeys.TRAIN == "train"
    assert ModeKeys.EVAL == "eval"
    assert ModeKeys.PREDICT == "infer"
    assert ModeKeys.PREDICT != "predict"
    assert isinstance(ModeKeys.TRAIN, str)


def test_mode_keys_hash_like_strings():
    table = {"train": 1, "eval": 2, "infer": 3}
    assert [table[m] for m in ModeKeys] == [1, 2, 3]
    assert "infer" in {ModeKeys.PREDICT}


def test_mode_keys_format_as_their_values():
    assert str(ModeKeys.TRAIN) == "train"
    assert f"{ModeKeys.PREDICT}" == "infer"
    assert format(ModeKeys.EVAL) == "eval"
    assert repr(ModeKeys.EVAL) == "<ModeKeys.EVAL: 'eval'>"


def test_mode_keys_lookup_by_value():
    assert ModeKeys("infer") is ModeKeys.PREDICT
    assert ModeKeys["PREDICT"] is ModeKeys.PREDICT
    with pytest.raises(ValueError):
        ModeKeys("predict")


def test_mode_keys_survive_copies():
    assert pickle.loads(pickle.dumps(ModeKeys.EVAL)) is ModeKeys.EVAL
    assert copy.deepcopy(ModeKeys.TRAIN) is ModeKeys.TRAIN


# -- fn_args: plain functions ---------------------------------------------------------------------


def _model_fn(features, labels, mode, params, config):
    return features, labels, mode, params, config


def test_plain_function():
    assert fn_args(_model_fn) == ("features", "labels", "mode", "params", "config")


def test_order_follows_the_signature():
    def fn(mode, features):
        return mode, features

    assert fn_args(fn) == ("mode", "features")


def test_defaults_keep_the_argument():
    def fn(features, labels=None, params=None):
        return features

    assert fn_args(fn) == ("features", "labels", "params")


def test_keyword_only_arguments_are_included():
    def fn(features, *, mode, config=None):
        return features

    assert fn_args(fn) == ("features", "mode", "config")


def test_var_args_and_kwargs_are_excluded():
    def fn(features, *args, **kwargs):
        return features

    assert fn_args(fn) == ("features",)


def test_positional_only_arguments_are_excluded():
    def fn(features, /, labels):
        return features

    assert fn_args(fn) == ("labels",)


def test_no_arguments():
    assert fn_args(lambda: None) == ()


def test_lambda():
    assert fn_args(lambda features, labels: None) == ("features", "labels")


def test_wrapped_function_reports_the_wrapped_signature():
    def decorator(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            return fn(*args, **kwargs)

        return wrapper

    assert fn_args(decorator(_model_fn)) == ("features", "labels", "mode", "params", "config")


def test_closures_of_one_factory_share_a_cached_answer_and_wrapping_still_counts():
    """Cached per code object (an input_fn factory returns a new closure per call), but a wrapper
    made from the same code with another __wrapped__ or __signature__ is inspected on its own."""
    def factory(target):
        def wrapper(*args, **kwargs):
            return target(*args, **kwargs)

        return wrapper

    plain = factory(None)
    assert fn_args(plain) == () and fn_args(factory(None)) == ()
    assert fn_args(functools.wraps(_model_fn)(factory(_model_fn))) == (
        "features", "labels", "mode", "params", "config")
    signed = factory(None)
    signed.__signature__ = inspect.signature(lambda mode, params: None)
    assert fn_args(signed) == ("mode", "params")
    assert fn_args(factory(None)) == ()


# -- fn_args: methods and callable objects (TF's test_if_model_fn_is_a_member_function_of_a_class,
# test_callable_model_fn) ------------------------------------------------------------------------


class _ModelFns:
    def model_fn(self, features, labels, mode):
        return features

    def renamed_self(this, features, params):
        return features

    @classmethod
    def from_class(cls, features, config):
        return features

    @staticmethod
    def static(features, mode):
        return features


def test_bound_method_drops_self():
    assert fn_args(_ModelFns().model_fn) == ("features", "labels", "mode")


def test_bound_method_drops_the_first_argument_whatever_its_name():
    assert fn_args(_ModelFns().renamed_self) == ("features", "params")


def test_classmethod_drops_cls():
    assert fn_args(_ModelFns.from_class) == ("features", "config")


def test_staticmethod():
    assert fn_args(_ModelFns.static) == ("features", "mode")
    assert fn_args(_ModelFns().static) == ("features", "mode")


class _CallableModelFn:
    def __init__(self, scale):
        self.scale = scale

    def __call__(self, features, labels, mode, params):
        return features


def test_callable_object_uses_call():
    assert fn_args(_CallableModelFn(2)) == ("features", "labels", "mode", "params")


# -- fn_args: functools.partial (TF's test_partial_model_fn_args) --------------------------------


def test_partial_keyword_bound_arguments_are_excluded():
    fn = functools.partial(_model_fn, params={"a": 1}, config=None)
    assert fn_args(fn) == ("features", "labels", "mode")


def test_partial_positional_bound_arguments_are_excluded():
    fn = functools.partial(_model_fn, {"x": 1}, None)
    assert fn_args(fn) == ("mode", "params", "config")


def test_partial_of_a_partial():
    fn = functools.partial(functools.partial(_model_fn, config=None), {"x": 1})
    assert fn_args(fn) == ("labels", "mode", "params")


def test_partial_of_a_bound_method():
    fn = functools.partial(_ModelFns().model_fn, mode="train")
    assert fn_args(fn) == ("features", "labels")


def test_partial_of_a_callable_object():
    fn = functools.partial(_CallableModelFn(1), labels=None)
    assert fn_args(fn) == ("features", "mode", "params")


def test_partial_bound_keyword_in_the_middle():
    fn = functools.partial(_model_fn, labels=None)
    assert fn_args(fn) == ("features", "mode", "params", "config")


# -- call_with_declared ---------------------------------------------------------------------------

AVAILABLE = {"features": "F", "labels": "L", "mode": "M", "params": "P", "config": "C"}


def test_call_with_declared_passes_only_declared_arguments():
    seen = {}

    def fn(mode, features):
        seen.update(mode=mode, features=features)
        return "done"

    assert call_with_declared(fn, AVAILABLE) == "done"
    assert seen == {"mode": "M", "features": "F"}


def test_call_with_declared_passes_everything_by_keyword():
    assert call_with_declared(_model_fn, AVAILABLE) == ("F", "L", "M", "P", "C")


def test_call_with_declared_no_arguments():
    assert call_with_declared(lambda: 42, AVAILABLE) == 42


def test_call_with_declared_leaves_defaults_for_missing_names():
    def fn(features, other=7):
        return features, other

    assert call_with_declared(fn, AVAILABLE) == ("F", 7)


def test_call_with_declared_partial_and_methods():
    assert call_with_declared(functools.partial(_model_fn, params="bound"), AVAILABLE) == (
        "F", "L", "M", "bound", "C")
    assert call_with_declared(_ModelFns().model_fn, AVAILABLE) == "F"
    assert call_with_declared(_CallableModelFn(1), AVAILABLE) == "F"


def test_call_with_declared_does_not_mutate_available():
    available = dict(AVAILABLE)
    call_with_declared(lambda features: features, available)
    assert available == AVAILABLE


def test_call_with_declared_missing_required_argument_raises():
    def fn(features, extra):
        return features

    with pytest.raises(TypeError, match="extra"):
        call_with_declared(fn, AVAILABLE)
