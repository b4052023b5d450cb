"""run.json stays readable: versioned (schema_version) and migrated on read."""

from __future__ import annotations

import json

import pytest

from estimator_workbench.execution import runner
from estimator_workbench.store.records import (
    RUN_JSON_SCHEMA_VERSION,
    migrate_run_json,
    read_run_json,
)
from estimator_workbench.store.registry import RunRegistry


def test_a_run_json_without_a_version_moves_schedule_keys_out_of_run_config():
    old = {"run_id": "r-1", "run_config": {"tf_random_seed": 3, "steps": 40, "eval_every_steps": 20},
           "schedule": {"eval_every_steps": 10}}
    new = migrate_run_json(old)
    assert new["schema_version"] == RUN_JSON_SCHEMA_VERSION == 1
    assert new["run_config"] == {"tf_random_seed": 3}
    assert new["schedule"] == {"max_steps": 40, "eval_every_steps": 10}  # the schedule's own value wins
    assert old["run_config"]["steps"] == 40  # the input is not changed


def test_the_current_version_reads_unchanged(tmp_path):
    spec = {"schema_version": 1, "run_config": {"steps": 5}, "schedule": {}}
    (tmp_path / "run.json").write_text(json.dumps(spec))
    assert read_run_json(tmp_path / "run.json") == spec


@pytest.mark.parametrize(("version", "message"), [
    (2, r"run.json has schema_version 2, newer than this workbench reads \(1\): upgrade estimator-workbench"),
    ("1", r"schema_version must be a whole number >= 0, given '1'"),
])
def test_an_unreadable_version_is_refused_plainly(version, message):
    with pytest.raises(ValueError, match=message):
        migrate_run_json({"schema_version": version})


def test_the_runner_refuses_a_run_json_from_a_newer_workbench(workspace, capsys):
    rec = RunRegistry(workspace).create_run(name="t", action="train", dataset={"name": "none"},
                                            template={"name": "t", "code": ""}, params={}, run_config={},
                                            schedule={})
    folder = RunRegistry(workspace).run_dir(rec.run_id)
    spec = json.loads((folder / "run.json").read_text())
    (folder / "run.json").write_text(json.dumps({**spec, "schema_version": 99}))
    assert runner.run(folder, execute=lambda ctx: None, install_signal_handlers=False) == 2
    assert "schema_version 99, newer than this workbench reads (1)" in capsys.readouterr().err


def test_the_runner_reads_a_pre_version_run_json(workspace):
    rec = RunRegistry(workspace).create_run(name="t", action="train", dataset={"name": "none"},
                                            template={"name": "t", "code": ""}, params={}, run_config={},
                                            schedule={})
    folder = RunRegistry(workspace).run_dir(rec.run_id)
    spec = json.loads((folder / "run.json").read_text())
    del spec["schema_version"]
    spec["run_config"], spec["schedule"] = {"steps": 7}, {}
    (folder / "run.json").write_text(json.dumps(spec))
    seen = {}
    assert runner.run(folder, execute=lambda ctx: seen.update(ctx.schedule), install_signal_handlers=False) == 0
    assert seen["max_steps"] == 7
