"""The warm-start compatibility report, built in a child process."""

from __future__ import annotations

import pytest

from estimator_workbench import templates
from estimator_workbench.cli import commands as cli
from estimator_workbench.execution.build import build_estimator
from estimator_workbench.execution.compat import CompatibilityReport, check_compatibility


def _spec(hidden_units: str) -> dict:
    info = templates.get_template("mlp_classifier")
    return {"template": {"name": info.name, "code": info.code}, "params": {"hidden_units": hidden_units},
            "dataset": cli._dataset_dict("iris", None), "run_config": {"tf_random_seed": 0},
            "action": "train"}


@pytest.fixture(scope="module")
def source_checkpoint(tmp_path_factory):
    model_dir = tmp_path_factory.mktemp("source")
    estimator, input_fns = build_estimator(_spec("16"), model_dir)
    estimator.train(input_fns.train, steps=2)
    return str(model_dir)


@pytest.mark.slow
def test_same_architecture_matches_everything(source_checkpoint):
    report = check_compatibility(_spec("16"), source_checkpoint)
    assert report.error is None and report.ok
    assert report.matching and not report.missing and not report.shape_mismatch
    assert report.summary().startswith(f"{len(report.matching)} variables match")


@pytest.mark.slow
def test_wider_model_lists_the_variables_that_differ(source_checkpoint):
    report = check_compatibility(_spec("32"), source_checkpoint)
    assert not report.ok
    assert report.shape_mismatch, report
    name, (in_checkpoint, in_model) = next(iter(report.shape_mismatch.items()))
    assert name.startswith("mlp") or "/" in name
    assert in_checkpoint != in_model
    assert "differ in shape" in report.summary()


@pytest.mark.slow
def test_errors_are_reported_not_raised(tmp_path):
    report = check_compatibility(_spec("16"), tmp_path / "no_checkpoint_here")
    assert report.error and report.error.startswith("CheckpointNotFoundError: Checkpoint ")
    assert "no_checkpoint_here" in report.error
    assert not report.ok


def test_report_summary_without_error():
    report = CompatibilityReport(matching=["a"], missing=["b"], unexpected=["c"],
                                 shape_mismatch={"d": [[1], [2]]})
    assert report.summary() == ("1 variables match; 1 missing from the checkpoint (start fresh): b; "
                                "1 differ in shape: d [1] -> [2]; 1 in the checkpoint only (unused).")
