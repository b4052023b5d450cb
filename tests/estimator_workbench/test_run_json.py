"""run.json is the run contract (``RunSpec``) on disk: written once by submit (through the registry),
read back by the runner as an object, versioned (``schema_version``) and migrated in one place
(``store.run_spec.migrate``) so that files written by older workbenches still run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import estimator_engine as ee
from estimator_workbench.execution import runner
from estimator_workbench.execution.submit import submit_run
from estimator_workbench.store.registry import RunRegistry
from estimator_workbench.store.run_spec import (
    RUN_JSON_SCHEMA_VERSION,
    RunSpec,
    RunSpecError,
    migrate,
)

FIXTURES = Path(__file__).parent / "fixtures" / "run_json"  # written by make_run_json.py (older code)
TEMPLATE = {"name": "t", "code": 'PARAMS = {"units": {"type": "int", "default": 4, "min": 1}}\n'
                                 "def model_fn(features, labels, mode, params): ...\n"}


def test_a_run_json_without_a_version_moves_schedule_keys_out_of_run_config():
    old = {"run_id": "r-1", "run_config": {"tf_random_seed": 3, "steps": 40, "eval_every_steps": 20},
           "schedule": {"eval_every_steps": 10}}
    new = migrate(old)
    assert new["schema_version"] == RUN_JSON_SCHEMA_VERSION == 2
    assert new["run_config"] == {"tf_random_seed": 3}
    assert new["schedule"] == {"max_steps": 40, "eval_every_steps": 10}  # the schedule's own value wins
    assert old["run_config"]["steps"] == 40  # the input is not changed


@pytest.mark.parametrize(("old", "engine"), [("fp32", "32"), ("bf16", "bf16-mixed"), ("fp16", "16-mixed"),
                                             ("16-mixed", "16-mixed")])
def test_a_version_1_precision_becomes_the_engines_name(old, engine):
    spec = RunSpec.model_validate({"schema_version": 1, "run_config": {"precision": old}})
    assert spec.run_config.precision == engine
    with pytest.raises(ValueError, match=r"run_config\.precision"):  # a current file keeps the contract
        RunSpec.model_validate({"schema_version": 2, "run_config": {"precision": "fp16"}})


@pytest.mark.parametrize("name", ["v0_train.json", "v1_train.json", "v1_predict.json"])
def test_older_run_json_files_load_and_build_an_engine_run_config(name, tmp_path):
    spec = RunSpec.read(FIXTURES / name)
    assert spec.schema_version == RUN_JSON_SCHEMA_VERSION
    assert spec.template.name == "mlp_classifier" and spec.dataset["fingerprint"] == "sha256:abc"
    ee.RunConfig(**spec.run_config.to_engine(), model_dir=str(tmp_path))
    if "train" in name:
        assert spec.action == "train_and_evaluate"
        assert spec.run_config.to_engine() == {"tf_random_seed": 7, "save_checkpoints_steps": 50,
                                               "precision": "bf16-mixed", "device": "cpu"}
        assert spec.schedule.train_until == 200 and spec.schedule.batch_size == 16
        assert spec.schedule.early_stopping is not None and spec.schedule.early_stopping.metric == "accuracy"
    else:
        assert (spec.parent_relation, spec.checkpoint_path) == ("predict_from", "model.ckpt-200")
        assert spec.schedule.preflight is False


@pytest.mark.parametrize(("version", "message"), [
    (3, r"run.json has schema_version 3, newer than this workbench reads \(2\): upgrade estimator-workbench"),
    ("1", r"schema_version must be a whole number >= 0, given '1'"),
])
def test_an_unreadable_version_is_refused_plainly(version, message):
    with pytest.raises(ValueError, match=message):
        migrate({"schema_version": version})


def test_submit_writes_the_validated_spec_the_runner_reads_back(workspace):
    """What submit validated is what the runner gets, as an object: params checked and completed
    against the template's PARAMS, the defaults a run gets, and only the settings the run set."""
    registry = RunRegistry(workspace)
    record = submit_run(registry, None, name="r", action="train", dataset={}, template=TEMPLATE,
                        params={"units": "8"}, run_config={"num_threads": 2, "batch_size": 4},
                        schedule={"max_steps": 5})
    path = registry.run_dir(record.run_id) / "run.json"
    written = json.loads(path.read_text())
    assert written["run_config"] == {"num_threads": 2, "tf_random_seed": record.run_config["tf_random_seed"]}
    assert written["schedule"] == {"max_steps": 5, "batch_size": 4, "preflight": True, "preflight_timeout": 60.0}
    spec = RunSpec.read(path)
    assert spec.run_id == record.run_id and spec.params == {"units": 8}
    assert spec.schedule.batch_size == 4 and spec.run_config.num_threads == 2
    assert (spec.run_config.to_engine(), spec.schedule.model_dump(exclude_unset=True), spec.params) == \
           (record.run_config, record.schedule, record.params)  # the registry row holds the same


def test_submit_names_every_problem_of_a_request_at_once(workspace):
    with pytest.raises(RunSpecError) as refused:
        submit_run(RunRegistry(workspace), None, name="r", action="train", dataset={}, template=TEMPLATE,
                   params={"units": 0, "depth": 2}, run_config={"precision": "fp16"}, schedule={"batch_size": 0})
    lines = str(refused.value).splitlines()
    assert lines[:2] == ["schedule.batch_size = 0 is out of range: it must be an integer from 1 to 65536.",
                         "run_config.precision = 'fp16' is not allowed: it must be '32', '16-mixed' or 'bf16-mixed'."]
    assert lines[2] == "Invalid params:" and "unknown param 'depth'" in lines[3] and "units" in lines[4]
    assert RunRegistry(workspace).list_runs() == []


def test_the_runner_refuses_a_run_json_from_a_newer_workbench(workspace, capsys):
    rec = RunRegistry(workspace).create_run(name="t", action="train", dataset={"name": "none"},
                                            template={"name": "t", "code": ""}, params={}, run_config={},
                                            schedule={})
    folder = RunRegistry(workspace).run_dir(rec.run_id)
    spec = json.loads((folder / "run.json").read_text())
    (folder / "run.json").write_text(json.dumps({**spec, "schema_version": 99}))
    assert runner.run(folder, execute=lambda ctx: None, install_signal_handlers=False) == 2
    assert "schema_version 99, newer than this workbench reads (2)" in capsys.readouterr().err


def test_the_runner_reads_a_pre_version_run_json(workspace):
    rec = RunRegistry(workspace).create_run(name="t", action="train", dataset={"name": "none"},
                                            template={"name": "t", "code": ""}, params={}, run_config={},
                                            schedule={})
    folder = RunRegistry(workspace).run_dir(rec.run_id)
    spec = json.loads((folder / "run.json").read_text())
    del spec["schema_version"]
    spec["run_config"], spec["schedule"] = {"steps": 7, "precision": "fp16"}, {}
    (folder / "run.json").write_text(json.dumps(spec))
    seen = []
    assert runner.run(folder, execute=seen.append, install_signal_handlers=False) == 0
    assert isinstance(seen[0].spec, RunSpec)
    assert seen[0].schedule.max_steps == 7 and seen[0].spec.run_config.precision == "16-mixed"


RUNNER_MODULES = ("runner.py", "run_context.py", "build.py", "engine_run.py", "lineage.py", "engine_hooks.py")
# Names the runner modules gave the run dict and its parts before the contract travelled to them.
RUN_DICT_NAMES = {"spec", "run_spec", "schedule", "settings", "template", "merged", "out", "config_kwargs", "early"}


def run_dict_reads(source: str) -> int:
    """``x.get("key")`` / ``x.setdefault("key")`` / ``x.pop("key")`` / ``x["key"]`` on the run dict
    or a part of it (by the names above). 60 in the runner modules of commit 3f02bb7; count them
    there with ``git show 3f02bb7:estimator_workbench/execution/<module>``."""
    import ast

    def base(node: ast.AST) -> str | None:
        if isinstance(node, ast.Name):
            return node.id
        if isinstance(node, ast.Attribute):
            return node.attr
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
            return base(node.func.value)
        if isinstance(node, ast.BoolOp):
            return base(node.values[0])
        if isinstance(node, ast.Subscript):
            return base(node.value)
        return None

    count = 0
    for node in ast.walk(ast.parse(source)):
        target = None
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("get", "setdefault", "pop") and node.args
                and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            target = node.func.value
        elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) \
                and isinstance(node.slice.value, str):
            target = node.value
        count += target is not None and base(target) in RUN_DICT_NAMES
    return count


def test_the_runner_reads_the_run_as_an_object():
    assert run_dict_reads('spec.get("action"); ctx.schedule["max_steps"]; (spec.get("t") or {}).get("code")') == 4
    folder = Path(__file__).parents[2] / "estimator_workbench" / "execution"
    assert {name: run_dict_reads((folder / name).read_text()) for name in RUNNER_MODULES} == dict.fromkeys(RUNNER_MODULES, 0)
