"""Tests of ``EstimatorSpec``, ``Scaffold`` and ``cheap_validation`` against TF's ``model_fn.py`` rules."""

from __future__ import annotations

import copy
import threading

import numpy as np
import pytest
import torch

import estimator_engine.spec as spec_module
from estimator_engine.export_output import (
    ClassificationOutput,
    ExportOutput,
    PredictOutput,
    RegressionOutput,
)
from estimator_engine.hooks.base import SessionRunHook
from estimator_engine.metric_op import MetricOp
from estimator_engine.mode_keys import ModeKeys
from estimator_engine.spec import (
    AVERAGE_LOSS_METRIC_KEY,
    DEFAULT_SERVING_KEY,
    LOSS_METRIC_KEY,
    EstimatorSpec,
    Scaffold,
    cheap_validation,
)

TF_FIELDS = (
    "mode", "predictions", "loss", "train_op", "eval_metric_ops", "export_outputs",
    "training_chief_hooks", "training_hooks", "scaffold", "evaluation_hooks", "prediction_hooks",
)
HOOK_FIELDS = ("training_chief_hooks", "training_hooks", "evaluation_hooks", "prediction_hooks")


def _train_op() -> None:
    """A zero-argument callable standing in for ``ee.minimize(...)``."""


def _metric() -> MetricOp:
    return MetricOp({"total": torch.tensor(3.0), "count": torch.tensor(2.0)},
                    lambda s: s["total"] / s["count"])


def _train_spec(**kwargs) -> EstimatorSpec:
    fields = {"loss": torch.tensor(1.0), "train_op": _train_op}
    fields.update(kwargs)
    return EstimatorSpec(ModeKeys.TRAIN, **fields)


class _Hook(SessionRunHook):
    pass


# -- structure and constants ---------------------------------------------------------------------


def test_constants_match_tf():
    assert LOSS_METRIC_KEY == "loss"
    assert AVERAGE_LOSS_METRIC_KEY == "average_loss"
    assert DEFAULT_SERVING_KEY == "serving_default"


def test_is_namedtuple_with_tf_fields_in_tf_order():
    assert EstimatorSpec._fields == TF_FIELDS
    spec = _train_spec()
    assert isinstance(spec, tuple)
    assert len(spec) == 11
    assert spec[0] is ModeKeys.TRAIN
    assert list(spec._asdict()) == list(TF_FIELDS)


def test_positional_construction_follows_tf_order():
    loss = torch.tensor(2.0)
    spec = EstimatorSpec(ModeKeys.TRAIN, {"y": torch.zeros(1)}, loss, _train_op)
    assert spec.loss is loss
    assert spec.train_op is _train_op
    assert set(spec.predictions) == {"y"}


def test_train_defaults():
    loss = torch.tensor(0.5)
    spec = EstimatorSpec(ModeKeys.TRAIN, loss=loss, train_op=_train_op)
    assert spec.mode is ModeKeys.TRAIN
    assert spec.loss is loss
    assert spec.train_op is _train_op
    assert spec.predictions == {}
    assert spec.eval_metric_ops == {}
    assert spec.export_outputs == {}
    for field in HOOK_FIELDS:
        assert getattr(spec, field) == ()
    assert isinstance(spec.scaffold, Scaffold)
    assert spec.scaffold.init_fn is None


def test_eval_needs_only_loss():
    spec = EstimatorSpec(ModeKeys.EVAL, loss=torch.tensor(1.0))
    assert spec.train_op is None
    assert spec.predictions == {}
    assert spec.export_outputs == {}


def test_predict_needs_only_predictions():
    spec = EstimatorSpec(ModeKeys.PREDICT, predictions={"y": torch.zeros(3)})
    assert spec.loss is None
    assert spec.train_op is None


# -- mode -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("given", "expected"), [
    ("train", ModeKeys.TRAIN), ("eval", ModeKeys.EVAL), ("infer", ModeKeys.PREDICT),
])
def test_mode_strings_become_mode_keys(given, expected):
    spec = EstimatorSpec(given, predictions={"y": torch.zeros(1)}, loss=torch.tensor(1.0),
                         train_op=_train_op)
    assert spec.mode is expected


@pytest.mark.parametrize("bad", ["training", "predict", "TRAIN", 3])
def test_unknown_mode_is_rejected(bad):
    with pytest.raises(ValueError, match="EstimatorSpec mode must be one of") as info:
        EstimatorSpec(bad, loss=torch.tensor(1.0), train_op=_train_op)
    assert repr(bad) in str(info.value)


def test_mode_none_is_accepted_and_requires_nothing():
    # TF's test_minimal_model_fn_args returns EstimatorSpec(mode=None, ...) and trains fine.
    spec = EstimatorSpec(None)
    assert spec.mode is None
    assert spec.loss is None
    assert spec.predictions == {}
    assert spec.export_outputs == {}
    spec = EstimatorSpec(None, loss=torch.tensor([3.0]), train_op=_train_op)
    assert spec.loss.shape == ()


def test_mode_none_still_validates_given_fields():
    with pytest.raises(TypeError, match="loss must be Tensor"):
        EstimatorSpec(None, loss=1.0)


# -- train_op -------------------------------------------------------------------------------------


def test_missing_train_op_in_train():
    with pytest.raises(ValueError, match="Missing train_op"):
        EstimatorSpec(ModeKeys.TRAIN, loss=torch.tensor(1.0))


@pytest.mark.parametrize("bad", [1.0, "step", torch.tensor(1.0)])
def test_train_op_must_be_callable(bad):
    with pytest.raises(TypeError, match="train_op must be"):
        EstimatorSpec(ModeKeys.TRAIN, loss=torch.tensor(1.0), train_op=bad)


def test_train_op_is_validated_in_eval_too():
    with pytest.raises(TypeError, match="train_op must be"):
        EstimatorSpec(ModeKeys.EVAL, loss=torch.tensor(1.0), train_op=42)


def test_train_op_is_kept_in_eval():
    spec = EstimatorSpec(ModeKeys.EVAL, loss=torch.tensor(1.0), train_op=_train_op)
    assert spec.train_op is _train_op


# -- loss -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", [ModeKeys.TRAIN, ModeKeys.EVAL])
def test_missing_loss(mode):
    with pytest.raises(ValueError, match="Missing loss"):
        EstimatorSpec(mode, train_op=_train_op)


@pytest.mark.parametrize("bad", [1.0, 1, np.float32(1.0), np.array(1.0), [1.0]])
def test_loss_must_be_tensor(bad):
    with pytest.raises(TypeError, match="loss must be Tensor"):
        EstimatorSpec(ModeKeys.EVAL, loss=bad)


@pytest.mark.parametrize("shape", [(2,), (2, 1), (1, 3), (0,)])
def test_loss_must_be_scalar(shape):
    with pytest.raises(ValueError, match="Loss must be scalar") as info:
        EstimatorSpec(ModeKeys.EVAL, loss=torch.zeros(shape))
    assert str(shape) in str(info.value)


@pytest.mark.parametrize("shape", [(1,), (1, 1)])
def test_single_element_loss_is_reshaped_to_scalar(shape):
    spec = EstimatorSpec(ModeKeys.EVAL, loss=torch.full(shape, 2.5))
    assert spec.loss.shape == torch.Size([])
    assert spec.loss.item() == 2.5


def test_reshaped_loss_keeps_the_graph():
    w = torch.tensor([2.0], requires_grad=True)
    spec = _train_spec(loss=w * 3.0)
    assert spec.loss.shape == ()
    spec.loss.backward()
    assert w.grad.tolist() == [3.0]


def test_scalar_loss_is_kept_as_is():
    loss = torch.tensor(1.0)
    assert _train_spec(loss=loss).loss is loss


def test_loss_is_optional_but_validated_in_predict():
    spec = EstimatorSpec(ModeKeys.PREDICT, predictions=torch.zeros(2))
    assert spec.loss is None
    with pytest.raises(ValueError, match="Loss must be scalar"):
        EstimatorSpec(ModeKeys.PREDICT, predictions=torch.zeros(2), loss=torch.zeros(2))


# -- predictions ----------------------------------------------------------------------------------


def test_missing_predictions_in_predict():
    with pytest.raises(ValueError, match="Missing predictions"):
        EstimatorSpec(ModeKeys.PREDICT)


@pytest.mark.parametrize("mode", [ModeKeys.TRAIN, ModeKeys.EVAL])
def test_predictions_none_becomes_empty_dict(mode):
    spec = EstimatorSpec(mode, loss=torch.tensor(1.0), train_op=_train_op)
    assert spec.predictions == {}


@pytest.mark.parametrize("bad", [[1.0, 2.0], 1.0, "y"])
def test_predictions_must_be_tensor(bad):
    with pytest.raises(TypeError, match="predictions must be Tensor"):
        EstimatorSpec(ModeKeys.PREDICT, predictions=bad)


def test_prediction_dict_values_must_be_tensors():
    with pytest.raises(TypeError, match=r"predictions\['k'\] must be Tensor"):
        EstimatorSpec(ModeKeys.PREDICT, predictions={"ok": torch.zeros(1), "k": [1.0]})


def test_prediction_dict_keys_must_be_strings():
    with pytest.raises(TypeError, match="prediction keys must be strings"):
        EstimatorSpec(ModeKeys.PREDICT, predictions={1: torch.zeros(1)})


def test_predictions_are_validated_in_train_too():
    with pytest.raises(TypeError, match=r"predictions\['k'\] must be Tensor"):
        _train_spec(predictions={"k": 3})


def test_numpy_prediction_values_are_accepted():
    classes = np.array([b"a", b"b"])
    spec = EstimatorSpec(ModeKeys.PREDICT, predictions={"y": torch.zeros(2), "classes": classes})
    assert spec.predictions["classes"] is classes


def test_prediction_dict_is_copied():
    predictions = {"y": torch.zeros(2)}
    spec = EstimatorSpec(ModeKeys.PREDICT, predictions=predictions)
    assert spec.predictions == predictions
    predictions["z"] = torch.ones(2)
    assert set(spec.predictions) == {"y"}


def test_tensor_predictions_are_kept():
    y = torch.arange(3.0)
    assert EstimatorSpec(ModeKeys.PREDICT, predictions=y).predictions is y


# -- eval_metric_ops ------------------------------------------------------------------------------


def test_eval_metric_ops_none_becomes_empty_dict():
    assert EstimatorSpec(ModeKeys.EVAL, loss=torch.tensor(1.0)).eval_metric_ops == {}


def test_eval_metric_ops_accepts_metric_ops():
    op = _metric()
    spec = EstimatorSpec(ModeKeys.EVAL, loss=torch.tensor(1.0), eval_metric_ops={"mean": op})
    assert spec.eval_metric_ops == {"mean": op}
    assert spec.eval_metric_ops["mean"].result().item() == 1.5


@pytest.mark.parametrize("bad", [[_metric()], _metric(), (torch.tensor(1.0), _train_op)])
def test_eval_metric_ops_must_be_a_dict(bad):
    with pytest.raises(TypeError, match="eval_metric_ops must be a dict"):
        EstimatorSpec(ModeKeys.EVAL, loss=torch.tensor(1.0), eval_metric_ops=bad)


@pytest.mark.parametrize("bad", [(torch.tensor(1.0), torch.tensor(1.0)), torch.tensor(1.0), 1.0])
def test_eval_metric_ops_values_must_be_metric_ops(bad):
    with pytest.raises(TypeError, match="Values of eval_metric_ops must be") as info:
        EstimatorSpec(ModeKeys.EVAL, loss=torch.tensor(1.0), eval_metric_ops={"acc": bad})
    assert "for key: acc" in str(info.value)


def test_eval_metric_ops_keys_must_be_strings():
    with pytest.raises(TypeError, match="eval_metric_ops keys must be strings"):
        EstimatorSpec(ModeKeys.EVAL, loss=torch.tensor(1.0), eval_metric_ops={1: _metric()})


def test_eval_metric_ops_are_validated_in_train_too():
    with pytest.raises(TypeError, match="Values of eval_metric_ops must be"):
        _train_spec(eval_metric_ops={"acc": 1.0})


def test_eval_metric_ops_dict_is_copied():
    metrics = {"m": _metric()}
    spec = EstimatorSpec(ModeKeys.EVAL, loss=torch.tensor(1.0), eval_metric_ops=metrics)
    metrics["n"] = _metric()
    assert set(spec.eval_metric_ops) == {"m"}


# -- export_outputs -------------------------------------------------------------------------------


def test_default_export_output_of_dict_predictions():
    y, z = torch.zeros(2), torch.ones(2)
    spec = EstimatorSpec(ModeKeys.PREDICT, predictions={"y": y, "z": z})
    assert list(spec.export_outputs) == [DEFAULT_SERVING_KEY]
    output = spec.export_outputs[DEFAULT_SERVING_KEY]
    assert isinstance(output, PredictOutput)
    assert output.outputs == {"y": y, "z": z}


def test_default_export_output_of_tensor_predictions():
    y = torch.zeros(2, 3)
    spec = EstimatorSpec(ModeKeys.PREDICT, predictions=y)
    output = spec.export_outputs[DEFAULT_SERVING_KEY]
    assert isinstance(output, PredictOutput)
    assert output.outputs == {"output": y}


def test_default_export_output_skips_numpy_prediction_values():
    y = torch.zeros(2)
    spec = EstimatorSpec(ModeKeys.PREDICT, predictions={"y": y, "names": np.array(["a", "b"])})
    assert spec.export_outputs[DEFAULT_SERVING_KEY].outputs == {"y": y}


def test_default_export_output_of_scalar_tensor_predictions():
    y = torch.tensor(1.0)
    spec = EstimatorSpec(ModeKeys.PREDICT, predictions=y)
    assert spec.export_outputs[DEFAULT_SERVING_KEY].outputs == {"output": y}


@pytest.mark.parametrize("bad", [[PredictOutput(torch.zeros(1))], PredictOutput(torch.zeros(1))])
def test_export_outputs_must_be_dict(bad):
    with pytest.raises(TypeError, match="export_outputs must be dict"):
        EstimatorSpec(ModeKeys.PREDICT, predictions=torch.zeros(1), export_outputs=bad)


@pytest.mark.parametrize("bad", [torch.zeros(1), {"y": torch.zeros(1)}, None])
def test_export_output_values_must_be_export_outputs(bad):
    with pytest.raises(TypeError, match="Values in export_outputs must be ExportOutput"):
        EstimatorSpec(ModeKeys.PREDICT, predictions=torch.zeros(1), export_outputs={"sig": bad})


def test_single_non_default_export_output_is_duplicated_under_serving_default():
    output = RegressionOutput(torch.zeros(2))
    given = {"regress": output}
    spec = EstimatorSpec(ModeKeys.PREDICT, predictions=torch.zeros(2), export_outputs=given)
    assert set(spec.export_outputs) == {"regress", DEFAULT_SERVING_KEY}
    assert spec.export_outputs[DEFAULT_SERVING_KEY] is output
    assert spec.export_outputs["regress"] is output
    assert given == {"regress": output}  # the caller's dict is not mutated


def test_single_default_export_output_is_kept():
    output = PredictOutput(torch.zeros(2))
    spec = EstimatorSpec(ModeKeys.PREDICT, predictions=torch.zeros(2),
                         export_outputs={DEFAULT_SERVING_KEY: output})
    assert spec.export_outputs == {DEFAULT_SERVING_KEY: output}


def test_multiple_export_outputs_need_a_default():
    outputs = {"a": RegressionOutput(torch.zeros(2)),
               "b": ClassificationOutput(scores=torch.zeros(2, 2))}
    with pytest.raises(ValueError, match=(
            "Multiple export_outputs were provided, but none of them is specified as the default")):
        EstimatorSpec(ModeKeys.PREDICT, predictions=torch.zeros(2), export_outputs=outputs)


def test_multiple_export_outputs_with_a_default_are_kept():
    outputs = {"a": RegressionOutput(torch.zeros(2)),
               DEFAULT_SERVING_KEY: ClassificationOutput(scores=torch.zeros(2, 2))}
    spec = EstimatorSpec(ModeKeys.PREDICT, predictions=torch.zeros(2), export_outputs=outputs)
    assert spec.export_outputs == outputs


def test_empty_export_outputs_stay_empty():
    # TF's get_export_outputs only fills the default when export_outputs is None.
    spec = EstimatorSpec(ModeKeys.PREDICT, predictions=torch.zeros(2), export_outputs={})
    assert spec.export_outputs == {}


@pytest.mark.parametrize("mode", [ModeKeys.TRAIN, ModeKeys.EVAL, None])
def test_export_outputs_not_filled_outside_predict(mode):
    spec = EstimatorSpec(mode, predictions={"y": torch.zeros(2)}, loss=torch.tensor(1.0),
                         train_op=_train_op)
    assert spec.export_outputs == {}
    output = RegressionOutput(torch.zeros(2))
    spec = EstimatorSpec(mode, loss=torch.tensor(1.0), train_op=_train_op,
                         export_outputs={"regress": output})
    assert spec.export_outputs == {"regress": output}


def test_export_output_base_class_is_abstract():
    with pytest.raises(NotImplementedError):
        ExportOutput().as_signature_outputs()


# -- hooks ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("field", HOOK_FIELDS)
def test_hooks_are_stored_as_tuples(field):
    hooks = [_Hook(), _Hook()]
    spec = _train_spec(**{field: hooks})
    assert isinstance(getattr(spec, field), tuple)
    assert getattr(spec, field) == tuple(hooks)
    for other in set(HOOK_FIELDS) - {field}:
        assert getattr(spec, other) == ()


@pytest.mark.parametrize("field", HOOK_FIELDS)
def test_hooks_accept_any_iterable(field):
    hooks = [_Hook()]
    assert getattr(_train_spec(**{field: iter(hooks)}), field) == tuple(hooks)


@pytest.mark.parametrize("field", HOOK_FIELDS)
@pytest.mark.parametrize("bad", [object(), _Hook, "hook"])
def test_hooks_must_be_session_run_hooks(field, bad):
    with pytest.raises(TypeError, match="All hooks must be SessionRunHook instances") as info:
        _train_spec(**{field: [_Hook(), bad]})
    assert field in str(info.value)


@pytest.mark.parametrize("mode", [ModeKeys.EVAL, ModeKeys.PREDICT])
def test_training_hooks_are_validated_in_every_mode(mode):
    with pytest.raises(TypeError, match="All hooks must be SessionRunHook instances"):
        EstimatorSpec(mode, loss=torch.tensor(1.0), predictions=torch.zeros(1),
                      training_hooks=[object()])


# -- scaffold -------------------------------------------------------------------------------------


def test_scaffold_defaults_to_a_new_scaffold():
    first, second = _train_spec(), _train_spec()
    assert isinstance(first.scaffold, Scaffold)
    assert first.scaffold is not second.scaffold


def test_scaffold_is_kept():
    scaffold = Scaffold(init_fn=lambda scaffold, session: None)
    assert _train_spec(scaffold=scaffold).scaffold is scaffold


@pytest.mark.parametrize("bad", [object(), {"init_fn": None}, lambda scaffold, session: None])
def test_scaffold_must_be_a_scaffold(bad):
    with pytest.raises(TypeError, match="scaffold must be"):
        _train_spec(scaffold=bad)


def test_scaffold_init_fn_must_be_callable():
    with pytest.raises(TypeError, match="Scaffold init_fn must be callable"):
        Scaffold(init_fn="load weights")


def test_scaffold_init_fn_is_stored():
    calls = []

    def init_fn(scaffold, session):
        calls.append((scaffold, session))

    scaffold = Scaffold(init_fn)
    scaffold.init_fn(scaffold, "session")
    assert calls == [(scaffold, "session")]
    assert Scaffold().init_fn is None


# -- _replace -------------------------------------------------------------------------------------


def test_replace_returns_a_validated_copy():
    spec = _train_spec()
    new_loss = torch.tensor([4.0])
    replaced = spec._replace(loss=new_loss)
    assert isinstance(replaced, EstimatorSpec)
    assert replaced.loss.shape == () and replaced.loss.item() == 4.0  # reshaped again
    assert replaced.train_op is spec.train_op
    assert spec.loss.item() == 1.0


def test_replace_revalidates_loss():
    with pytest.raises(ValueError, match="Loss must be scalar"):
        _train_spec()._replace(loss=torch.zeros(3))


def test_replace_revalidates_other_fields():
    spec = _train_spec()
    with pytest.raises(ValueError, match="Missing train_op"):
        spec._replace(train_op=None)
    with pytest.raises(TypeError, match="All hooks must be SessionRunHook instances"):
        spec._replace(training_hooks=[1])
    with pytest.raises(TypeError, match="Values of eval_metric_ops must be"):
        spec._replace(eval_metric_ops={"a": (1, 2)})


def test_replace_cannot_change_mode():
    with pytest.raises(ValueError, match="mode of EstimatorSpec cannot be changed"):
        _train_spec()._replace(mode=ModeKeys.EVAL)
    with pytest.raises(ValueError, match="mode of EstimatorSpec cannot be changed"):
        EstimatorSpec(None)._replace(mode=ModeKeys.TRAIN)


def test_replace_with_the_same_mode_is_allowed():
    spec = _train_spec()
    assert spec._replace(mode=ModeKeys.TRAIN).mode is ModeKeys.TRAIN
    assert spec._replace(mode="train").mode is ModeKeys.TRAIN


def test_replace_rejects_unknown_fields():
    with pytest.raises(ValueError, match="unexpected field names"):
        _train_spec()._replace(losses=torch.tensor(1.0))


def test_replace_keeps_filled_export_outputs_in_predict():
    spec = EstimatorSpec(ModeKeys.PREDICT, predictions={"y": torch.zeros(2)})
    replaced = spec._replace(prediction_hooks=[_Hook()])
    assert replaced.export_outputs is not None
    assert set(replaced.export_outputs) == {DEFAULT_SERVING_KEY}
    assert len(replaced.prediction_hooks) == 1


def test_deepcopy_gives_an_equivalent_spec():
    spec = EstimatorSpec(ModeKeys.EVAL, loss=torch.tensor(2.0), eval_metric_ops={"m": _metric()},
                         evaluation_hooks=[_Hook()])
    copied = copy.deepcopy(spec)
    assert isinstance(copied, EstimatorSpec)
    assert copied.mode is ModeKeys.EVAL
    assert copied.loss.item() == 2.0
    assert set(copied.eval_metric_ops) == {"m"}
    assert len(copied.evaluation_hooks) == 1


# -- cheap_validation -----------------------------------------------------------------------------


def test_cheap_validation_flag_is_scoped():
    assert spec_module._validation.cheap is False
    with cheap_validation():
        assert spec_module._validation.cheap is True
        with cheap_validation():
            assert spec_module._validation.cheap is True
        assert spec_module._validation.cheap is True  # nesting restores the outer value
    assert spec_module._validation.cheap is False


def test_cheap_validation_flag_is_restored_after_an_error():
    with pytest.raises(ValueError, match="Missing loss"), cheap_validation():
        EstimatorSpec(ModeKeys.EVAL)
    assert spec_module._validation.cheap is False
    with pytest.raises(TypeError, match="Values of eval_metric_ops must be"):
        EstimatorSpec(ModeKeys.EVAL, loss=torch.tensor(1.0), eval_metric_ops={"a": 1})


def test_cheap_path_still_rejects_missing_required_fields():
    with cheap_validation():
        with pytest.raises(ValueError, match="Missing train_op"):
            EstimatorSpec(ModeKeys.TRAIN, loss=torch.tensor(1.0))
        with pytest.raises(ValueError, match="Missing loss"):
            EstimatorSpec(ModeKeys.TRAIN, train_op=_train_op)
        with pytest.raises(ValueError, match="Missing loss"):
            EstimatorSpec(ModeKeys.EVAL)
        with pytest.raises(ValueError, match="Missing predictions"):
            EstimatorSpec(ModeKeys.PREDICT)


def test_cheap_path_still_checks_the_loss_tensor():
    with cheap_validation():
        with pytest.raises(TypeError, match="loss must be Tensor"):
            EstimatorSpec(ModeKeys.TRAIN, loss=1.0, train_op=_train_op)
        with pytest.raises(ValueError, match="Loss must be scalar"):
            EstimatorSpec(ModeKeys.EVAL, loss=torch.zeros(2))
        spec = EstimatorSpec(ModeKeys.TRAIN, loss=torch.tensor([2.0]), train_op=_train_op)
    assert spec.loss.shape == ()


def test_cheap_path_skips_the_other_validations():
    with cheap_validation():
        spec = EstimatorSpec(ModeKeys.EVAL, loss=torch.tensor(1.0), eval_metric_ops={"a": 1},
                             training_hooks=[object()], scaffold="not a scaffold",
                             predictions={"k": [1]})
    assert spec.eval_metric_ops == {"a": 1}
    assert spec.predictions == {"k": [1]}


def test_cheap_path_fills_empty_defaults():
    with cheap_validation():
        spec = EstimatorSpec(ModeKeys.TRAIN, loss=torch.tensor(1.0), train_op=_train_op)
    assert isinstance(spec, EstimatorSpec)
    assert spec.predictions == {}
    assert spec.eval_metric_ops == {}
    assert spec.export_outputs == {}
    for field in HOOK_FIELDS:
        assert getattr(spec, field) == ()


def _explode(*args, **kwargs):
    raise AssertionError("full validator called on the cheap path")


@pytest.mark.parametrize("mode", [ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.PREDICT])
def test_cheap_path_does_not_call_the_full_validators(monkeypatch, mode):
    for name in ("_validate_metrics", "_validate_export_outputs", "_validate_hooks",
                 "_validate_mode", "_validate_predictions"):
        monkeypatch.setattr(spec_module, name, _explode)
    fields = {"loss": torch.tensor(1.0), "train_op": _train_op,
              "predictions": {"y": torch.zeros(2)}, "eval_metric_ops": {"m": _metric()},
              "training_hooks": [_Hook()], "evaluation_hooks": [_Hook()]}
    with cheap_validation():
        spec = EstimatorSpec(mode, **fields)
    assert spec.loss.item() == 1.0
    with pytest.raises(AssertionError, match="full validator called"):
        EstimatorSpec(mode, **fields)  # outside the block the full path runs again


def test_cheap_path_replace_skips_full_validation(monkeypatch):
    spec = _train_spec(eval_metric_ops={"m": _metric()})
    monkeypatch.setattr(spec_module, "_validate_metrics", _explode)
    with cheap_validation():
        replaced = spec._replace(loss=torch.tensor(5.0))
    assert replaced.loss.item() == 5.0


def test_cheap_validation_does_not_leak_to_other_threads():
    errors: list[BaseException] = []

    def build_invalid_spec():
        try:
            EstimatorSpec(ModeKeys.EVAL, loss=torch.tensor(1.0), eval_metric_ops={"a": 1})
        except TypeError as error:
            errors.append(error)

    with cheap_validation():
        thread = threading.Thread(target=build_invalid_spec)
        thread.start()
        thread.join()
    assert len(errors) == 1
