"""A run as a notebook (issue 25 §4), without running it: what the cells hold, the CLI command,
refusals. The executed notebook reaching the run's metrics is tests/estimator_workbench/test_api.py."""

from __future__ import annotations

import ast

import nbformat
import pytest

from estimator_workbench import templates
from estimator_workbench.cli.commands import main
from estimator_workbench.execution.notebook import (
    notebook_bytes,
    notebook_for_run,
    write_run_notebook,
)
from estimator_workbench.store.registry import RunRegistry

DATASET = {"ref": {"kind": "bundled", "name": "iris"}, "fingerprint": "abc"}


def _run(home, action="train_and_evaluate"):
    reg = RunRegistry(home)
    info = templates.get_template("mlp_classifier")
    rec = reg.create_run(name="nb", action=action, dataset=DATASET,
                         template={"name": info.name, "code": info.code},
                         params={"learning_rate": 0.01, "hidden_units": "8"},
                         run_config={"tf_random_seed": 3, "save_checkpoints_steps": 10},
                         schedule={"max_steps": 30, "batch_size": 16, "eval_every_steps": 10, "preflight": True})
    reg.update_summary(rec.run_id, {"accuracy": 0.9}, step=30, split="eval")
    return reg.get(rec.run_id)


def _namespace(notebook, name):
    """The value assigned to ``name`` in the notebook's code cells (a literal)."""
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        for node in ast.parse(cell.source).body:
            if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == name:
                return ast.literal_eval(node.value)
    raise AssertionError(f"{name} is not assigned in the notebook")


def test_cells_hold_the_runs_settings_and_template_source(workspace):
    record = _run(workspace)
    notebook = notebook_for_run(record)
    nbformat.validate(notebook)
    assert _namespace(notebook, "RUN_PARAMS") == record.params
    assert _namespace(notebook, "RUN_CONFIG") == {"save_checkpoints_steps": 10, "tf_random_seed": 3}
    assert _namespace(notebook, "SCHEDULE") == {"max_steps": 30, "batch_size": 16, "eval_every_steps": 10}
    assert _namespace(notebook, "DATASET") == {"ref": {"kind": "bundled", "name": "iris"}}
    assert _namespace(notebook, "RECORDED") == {"accuracy": 0.9}
    assert any(cell.source == record.template_code.rstrip() for cell in notebook.cells)
    assert any("ee.train_and_evaluate(" in cell.source for cell in notebook.cells)
    assert all(not cell.get("outputs") for cell in notebook.cells if cell.cell_type == "code")
    downloaded = nbformat.reads(notebook_bytes(workspace, record.run_id).decode(), as_version=4)
    assert [c.source for c in downloaded.cells] == [c.source for c in notebook.cells]


def test_a_train_run_trains_without_evaluating_in_between(workspace):
    notebook = notebook_for_run(_run(workspace, action="train"))
    assert any("estimator.train(input_fns.train, max_steps=SCHEDULE['max_steps']" in c.source for c in notebook.cells)


def test_a_predict_run_is_refused(workspace):
    with pytest.raises(ValueError, match="is a 'predict' run; a notebook reproduces a training run"):
        notebook_for_run(_run(workspace, action="predict"))


def test_cli_writes_it_and_refuses_an_unknown_run(workspace, tmp_path, capsys):
    record = _run(workspace)
    out = tmp_path / "out" / "run.ipynb"
    assert main(["--workspace", str(workspace), "notebook", record.run_id, "-o", str(out)]) == 0
    assert capsys.readouterr().out.strip() == str(out)
    assert nbformat.read(out, as_version=4).metadata["estimator_workbench"]["run_id"] == record.run_id
    assert main(["--workspace", str(workspace), "notebook", "r-nope"]) == 2
    assert "No run 'r-nope' in this workspace" in capsys.readouterr().err


def test_writing_onto_a_folder_is_refused(workspace, tmp_path):
    with pytest.raises(ValueError, match="is a folder; give a file name like"):
        write_run_notebook(workspace, _run(workspace).run_id, tmp_path)
