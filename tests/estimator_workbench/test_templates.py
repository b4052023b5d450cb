"""estimator_workbench.templates / build / model_inputs: parsing without running, params, save, diff, build."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from estimator_workbench import templates
from estimator_workbench.data import datasets
from estimator_workbench.data.model_inputs import InputLayer, lookup_ids
from estimator_workbench.execution import build

BAD = Path(__file__).resolve().parents[1] / "data" / "bad"
BUNDLED = ("cnn_digits", "linear", "mlp_classifier", "mlp_regressor", "wide_and_deep")
MATCHING_DATASET = {"mlp_classifier": "iris", "mlp_regressor": "diabetes", "linear": "breast_cancer",
                    "wide_and_deep": "penguins", "cnn_digits": "digits"}


def bad(name: str) -> str:
    return (BAD / f"{name}.py.txt").read_text()


def test_bundled_templates_listed_with_params_and_descriptions():
    infos = {t.name: t for t in templates.list_templates()}
    assert set(BUNDLED) <= set(infos)
    for name in BUNDLED:
        info = infos[name]
        assert info.kind == "bundled" and info.error is None, info.error
        assert len(info.description) > 20 and "def model_fn(features, labels, mode, params)" in info.code
        templates.check_params_schema(info.params, name)
        assert templates.validate_params(info.params, {}) == info.defaults()
    assert all(t.kind == "canned" for t in templates.CANNED.values())  # see test_canned_templates.py


def test_reading_a_template_never_executes_it(tmp_path):
    marker = tmp_path / "ran"
    code = (f"import pathlib\npathlib.Path({str(marker)!r}).write_text('x')\n"
            "PARAMS = {'n': {'type': 'int', 'default': 1}}\nDESCRIPTION = 'd'\n"
            "def model_fn(features, labels, mode, params):\n    return None\n")
    info = templates.save_template(tmp_path, "side_effect", code)
    assert info.params == {"n": {"type": "int", "default": 1}}
    templates.get_template("side_effect", tmp_path)
    templates.list_templates(tmp_path)
    assert not marker.exists()


def test_parse_template_errors():
    with pytest.raises(ValueError, match=r"Template 'x' has a syntax error at line 7: expected ':'"):
        templates.parse_template(bad("syntax_error"), "x")
    with pytest.raises(ValueError, match=r"PARAMS at line 2 must be a literal \(a dict of dicts\) so that it can be read"):
        templates.parse_template(bad("computed_params"), "x")
    with pytest.raises(ValueError, match=r"defines no top-level model_fn"):
        templates.parse_template("PARAMS = {}\n", "x")
    with pytest.raises(ValueError, match=r"invalid PARAMS schema:\n- lr: type must be one of"):
        templates.parse_template("PARAMS = {'lr': {'type': 'double', 'default': 1}}\ndef model_fn(features): pass\n")
    with pytest.raises(ValueError, match=r"default of n=0: below the minimum 1"):
        templates.parse_template("PARAMS = {'n': {'type': 'int', 'default': 0, 'min': 1}}\ndef model_fn(features): pass\n")


SCHEMA = {
    "units": {"type": "int", "default": 8, "min": 1, "max": 512},
    "lr": {"type": "float", "default": 0.01, "min": 0.0, "max": 1.0},
    "act": {"type": "choice", "default": "relu", "choices": ["relu", "tanh"]},
    "bn": {"type": "bool", "default": False},
    "name": {"type": "str", "default": "m"},
}


def test_validate_params_coerces_and_fills_defaults():
    out = templates.validate_params(SCHEMA, {"units": "32", "lr": 1, "bn": "true", "act": "tanh"})
    assert out == {"units": 32, "lr": 1.0, "act": "tanh", "bn": True, "name": "m"}
    assert type(out["lr"]) is float and type(out["units"]) is int
    assert templates.validate_params(SCHEMA, None)["units"] == 8


def test_validate_params_lists_every_problem():
    with pytest.raises(ValueError) as info:
        templates.validate_params(SCHEMA, {"units": 0, "lr": "fast", "act": "gelu", "bn": "maybe",
                                           "name": 3, "dropout": 0.5, "task": {}})
    message = str(info.value)
    assert message.startswith("Invalid params:\n- ")
    for expected in [
        "unknown param 'dropout'; known params: ['act', 'bn', 'lr', 'name', 'units']",
        "unknown param 'task' (reserved: the workbench fills params['task'])",
        "units=0: below the minimum 1",
        "lr='fast': expected a finite float",
        "act='gelu': not one of the choices ['relu', 'tanh']",
        "bn='maybe': expected a bool (true/false)",
        "name=3: expected a str",
    ]:
        assert expected in message
    with pytest.raises(ValueError, match=r"units=1000: above the maximum 512"):
        templates.validate_params(SCHEMA, {"units": 1000})
    with pytest.raises(ValueError, match=r"units=True: expected an int"):
        templates.validate_params(SCHEMA, {"units": True})
    with pytest.raises(ValueError, match=r"lr=nan: expected a finite float"):
        templates.validate_params(SCHEMA, {"lr": float("nan")})


def test_save_template_sanitises_and_refuses(tmp_path):
    code = templates.get_template("linear").code
    info = templates.save_template(tmp_path, "my linear v2", code)
    assert info.name == "my_linear_v2" and info.kind == "user"
    assert (tmp_path / "templates" / "my_linear_v2.py").read_text() == code
    assert templates.get_template("my_linear_v2", tmp_path).code == code
    assert "my_linear_v2" in [t.name for t in templates.list_templates(tmp_path)]
    for name in ("../evil", "a/b", "..", "x\\y"):
        with pytest.raises(ValueError, match=r"Invalid template name: .*no path separators or '\.\.'"):
            templates.save_template(tmp_path, name, code)
    with pytest.raises(ValueError, match=r"Invalid template name: 'bad\$name'"):
        templates.save_template(tmp_path, "bad$name", code)
    with pytest.raises(ValueError, match=r"'linear' is a bundled template, which is read-only"):
        templates.save_template(tmp_path, "linear", code)
    with pytest.raises(ValueError, match=r"already exists .* Pass overwrite=True"):
        templates.save_template(tmp_path, "my_linear_v2", code)
    templates.save_template(tmp_path, "my_linear_v2", code + "\n# edited\n", overwrite=True)
    with pytest.raises(ValueError, match=r"syntax error at line 7"):
        templates.save_template(tmp_path, "broken", bad("syntax_error"))
    assert not (tmp_path / "templates" / "broken.py").exists()
    assert sorted(p.name for p in (tmp_path / "templates").iterdir()) == ["my_linear_v2.py"]
    with pytest.raises(ValueError, match=r"Unknown template name: 'nope'"):
        templates.get_template("nope", tmp_path)


def test_broken_user_template_is_listed_with_its_error(tmp_path):
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "broken.py").write_text(bad("syntax_error"))
    info = {t.name: t for t in templates.list_templates(tmp_path)}["broken"]
    assert info.error is not None and "line 7" in info.error and info.params == {}


def test_diff_templates():
    a = "def model_fn(features):\n    return 1\n"
    b = "def model_fn(features):\n    return 2\n"
    diff = templates.diff_templates(a, b, "v1", "v2")
    assert diff.startswith("--- v1\n+++ v2\n") and "-    return 1\n+    return 2\n" in diff
    assert templates.diff_templates(a, a) == ""


def test_load_model_fn_runs_code_and_keeps_line_numbers():
    fn = templates.load_model_fn("def model_fn(features):\n    return 1 / 0\n", "<template t1>")
    with pytest.raises(ZeroDivisionError) as info:
        fn({})
    frame = info.traceback[-1]
    assert str(frame.path) == "<template t1>" and frame.lineno + 1 == 2
    with pytest.raises(TypeError, match="defines no callable model_fn"):
        templates.load_model_fn("x = 1\n", "<template t2>")
    for name in ("workbench_template__template_t1_", "workbench_template__template_t2_"):
        sys.modules.pop(name, None)


def test_input_layer_standardises_and_embeds():
    task = {"numeric_features": ["x"], "numeric_stats": {"x": {"mean": 1.0, "std": 2.0}},
            "categorical_features": ["c"], "categorical_vocabularies": {"c": ["a", "b"]}}
    layer = InputLayer(task, embedding_dim=3)
    out = layer({"x": torch.tensor([1.0, 5.0]), "c": np.array(["b", "unseen"], dtype=object)})
    assert out.shape == (2, 4) and out[:, 0].tolist() == [0.0, 2.0]
    assert torch.equal(out[1, 1:], layer.embeddings[0].weight[2])  # unknown -> the OOV row
    assert lookup_ids(np.array(["a", "b", "c"]), np.array(["a", "b"])).tolist() == [0, 1, 2]
    assert sorted(layer.state_dict()) == ["embeddings.0.weight", "mean", "std"]  # stats are checkpointed


@pytest.mark.parametrize("name", BUNDLED)
def test_bundled_template_trains_on_its_dataset(name, tmp_path):
    dataset = MATCHING_DATASET[name]
    df = datasets.load_csv(datasets.bundled_path(dataset))
    spec = datasets.DatasetSpec({"kind": "bundled", "name": dataset}, datasets.infer_schema(df))
    run_spec = {
        "template": {"name": name, "code": templates.get_template(name).code},
        "params": {"label_scale": 100.0} if name == "mlp_regressor" else {},
        "run_config": {"tf_random_seed": 0, "device": "cpu", "log_step_count_steps": None},
        "dataset": spec.to_dict(),
        "schedule": {"batch_size": 32},
    }
    estimator, fns = build.build_estimator(run_spec, tmp_path / "model")
    estimator.train(fns.train, steps=60)
    result = estimator.evaluate(fns.eval)
    assert result["global_step"] == 60
    if spec.task == "classification":
        assert result["accuracy"] > 1.5 / fns.info["n_classes"], result  # well above chance
    else:
        assert result["mean_squared_error"] < float(df["target"].var()), result  # beats the mean
    batch = next(iter(estimator.predict(fns.predict, yield_single_examples=False)))
    keys = {"class_ids", "probabilities"} if spec.task == "classification" else {"predictions"}
    assert set(batch) == keys


def test_build_rejects_bad_run_specs(tmp_path):
    df = datasets.load_csv(datasets.bundled_path("iris"))
    spec = datasets.DatasetSpec({"kind": "bundled", "name": "iris"}, datasets.infer_schema(df))
    code = templates.get_template("mlp_classifier").code
    with pytest.raises(ValueError, match=r"Invalid params:\n- dropout=2\.0: above the maximum 0\.9"):
        build.prepare({"template": {"name": "m", "code": code}, "params": {"dropout": 2.0},
                       "dataset": spec.to_dict()})
    one_class = spec.schema.replace_column("species", role="ignore")
    with pytest.raises(ValueError, match=r"No label: the action 'train' needs"):
        build.prepare({"template": {"name": "m", "code": code}, "dataset": datasets.DatasetSpec(spec.ref, one_class).to_dict()})
    with pytest.raises(ValueError, match=r"The run's template has no code \(template.code = None\)"):
        build.prepare({"dataset": spec.to_dict()})
