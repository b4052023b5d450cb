"""estimator_workbench.execution.preflight: every bundled template passes; every broken template gets a pinned error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from estimator_workbench import templates
from estimator_workbench.data import datasets
from estimator_workbench.execution import preflight

BAD = Path(__file__).resolve().parents[1] / "data" / "bad"
MATCHING_DATASET = {"mlp_classifier": "iris", "mlp_regressor": "diabetes", "linear": "breast_cancer",
                    "wide_and_deep": "penguins", "cnn_digits": "digits"}


def spec_for(name: str) -> datasets.DatasetSpec:
    df = datasets.load_csv(datasets.bundled_path(name))
    return datasets.DatasetSpec({"kind": "bundled", "name": name}, datasets.infer_schema(df))


def bad(name: str) -> str:
    return (BAD / f"{name}.py.txt").read_text()


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(MATCHING_DATASET))
def test_every_bundled_template_passes_on_its_dataset(name):
    spec = spec_for(MATCHING_DATASET[name])
    report = preflight.run_preflight(templates.get_template(name).code, spec, {}, timeout=120,
                                     template_name=name)
    assert report.ok, report.summary()
    assert report.stage == "done" and report.error is None
    train, ev, pred = report.modes["train"], report.modes["eval"], report.modes["predict"]
    assert train["loss_shape"] == [] and train["train_op"] is True
    assert train["parameter_count"] > 0 and pred["parameter_count"] == train["parameter_count"]
    assert ev["train_op"] is False and ev["metric_keys"] and set(ev["metric_keys"]) <= set(ev["metrics"])
    info = datasets.task_info(datasets.load_csv(spec.path), spec)
    if spec.task == "classification":
        assert pred["prediction_keys"] == ["class_ids", "probabilities"]
        assert pred["prediction_shapes"] == {"class_ids": [8], "probabilities": [8, info["n_classes"]]}
        assert "accuracy" in ev["metric_keys"]
    else:
        assert pred["prediction_shapes"] == {"predictions": [8]}
    json.dumps(report.to_dict())  # JSON all the way
    assert "Pre-flight check passed." in report.summary()


def test_syntax_error_points_at_the_line():
    report = preflight.run_preflight(bad("syntax_error"), spec_for("iris"), template_name="mine")
    assert not report.ok and report.modes == {}
    err = report.error
    assert (err["stage"], err["type"], err["line"]) == ("import", "SyntaxError", 7)
    assert err["code_line"] == "def model_fn(features, labels, mode, params)"
    assert err["message"] == "expected ':'"
    assert "line 7: def model_fn" in report.summary()


def test_import_error_points_at_the_line():
    report = preflight.run_preflight(bad("import_error"), spec_for("iris"), template_name="mine")
    err = report.error
    assert (err["stage"], err["type"], err["line"]) == ("import", "ModuleNotFoundError", 3)
    assert err["code_line"] == "import no_such_module_for_the_preflight_test"
    assert "No module named 'no_such_module_for_the_preflight_test'" in err["message"]
    assert 'File "<template mine>", line 3' in err["traceback"]


@pytest.mark.slow
def test_exception_in_model_fn_points_at_the_users_line():
    report = preflight.run_preflight(bad("raises"), spec_for("iris"), template_name="mine", timeout=120)
    assert not report.ok and report.error is None
    err = report.modes["train"]["error"]
    assert (err["stage"], err["type"], err["line"]) == ("train", "RuntimeError", 14)
    assert err["code_line"] == "logits = net(wrong)"
    assert "mat1 and mat2 shapes cannot be multiplied" in err["message"]
    assert report.modes["eval"] == {"ok": False, "skipped": "TRAIN failed, so there is no checkpoint to use"}
    assert report.summary().startswith("Pre-flight check failed in train: RuntimeError")


@pytest.mark.slow
def test_infinite_loop_times_out():
    report = preflight.run_preflight(bad("infinite_loop"), spec_for("iris"), timeout=12)
    assert not report.ok
    assert report.error["type"] == "TimeoutError"
    assert report.error["message"].startswith("timed out after 12 s (in train)")
    assert 12 <= report.duration_s < 40


@pytest.mark.slow
def test_non_estimator_spec_return():
    report = preflight.run_preflight(bad("returns_dict"), spec_for("iris"), timeout=120)
    err = report.modes["train"]["error"]
    assert err["type"] == "TypeError"
    assert err["message"].startswith("model_fn returned dict ({'loss': tensor(0.)}) in TRAIN mode; it must "
                                     "return ee.EstimatorSpec(")


def test_bad_signature():
    report = preflight.run_preflight(bad("bad_signature"), spec_for("iris"))
    err = report.error
    assert (err["stage"], err["type"], err["line"]) == ("signature", "TypeError", 5)
    assert err["message"] == ("model_fn has unexpected arguments ['hidden_units']: it may take only "
                              "['features', 'labels', 'mode', 'params', 'config'] (put hyper-parameters in params).")
    assert err["code_line"] == "def model_fn(features, labels, mode, hidden_units):"


def test_params_outside_schema():
    code = templates.get_template("mlp_classifier").code
    report = preflight.run_preflight(code, spec_for("iris"), {"dropout": 5, "nope": 1})
    err = report.error
    assert err["stage"] == "params"
    assert "unknown param 'nope'" in err["message"] and "dropout=5: above the maximum 0.9" in err["message"]


def test_dataset_problems_are_reported(tmp_path):
    path = tmp_path / "one_class.csv"
    path.write_bytes((BAD / "one_class.csv").read_bytes())
    df = datasets.load_csv(path)
    spec = datasets.DatasetSpec({"kind": "file", "path": str(path)}, datasets.infer_schema(df))
    report = preflight.run_preflight(templates.get_template("mlp_classifier").code, spec)
    assert report.error["stage"] == "dataset"
    assert "Label column 'label' has only one class ('x')" in report.error["message"]


def test_report_roundtrip_and_child_usage(tmp_path):
    report = preflight.PreflightReport(ok=False, stage="import", error={"stage": "import", "type": "X",
                                       "message": "m", "line": 2, "code_line": "y"})
    assert preflight.PreflightReport.from_dict(json.loads(json.dumps(report.to_dict()))) == report
    assert preflight.main(["only-one-arg"]) == 2


@pytest.mark.slow
def test_in_process_check_matches_the_child_and_restores_rng(tmp_path):
    import random

    import numpy as np
    import torch

    torch.manual_seed(123)
    np.random.seed(123)
    random.seed(123)
    states = (torch.random.get_rng_state(), np.random.get_state()[1].copy(), random.getstate())
    out = tmp_path / "preflight.json"
    report = preflight.check_in_process(templates.get_template("mlp_classifier").code, spec_for("iris"),
                                        {}, timeout=60, report_path=out)
    assert report.ok and report.stage == "done", report.summary()
    assert report.modes["train"]["prediction_keys"] == ["class_ids", "probabilities"]
    assert json.loads(out.read_text())["ok"] is True
    assert torch.equal(torch.random.get_rng_state(), states[0])
    assert (np.random.get_state()[1] == states[1]).all() and random.getstate() == states[2]


@pytest.mark.slow
def test_in_process_check_errors_and_timeout():
    import signal

    report = preflight.check_in_process(bad("raises"), spec_for("iris"), template_name="mine")
    err = report.modes["train"]["error"]
    assert not report.ok and (err["type"], err["line"]) == ("RuntimeError", 14)
    before = signal.getsignal(signal.SIGALRM)
    report = preflight.check_in_process(bad("infinite_loop"), spec_for("iris"), timeout=3)
    assert not report.ok and report.error["type"] == "TimeoutError"
    assert report.error["message"].startswith("timed out after 3 s (in train)")
    assert signal.getsignal(signal.SIGALRM) is before
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


@pytest.mark.slow
def test_the_scratch_model_sits_beside_the_report_and_a_killed_checks_leftover_is_removed(tmp_path, monkeypatch):
    """A runner killed mid-check (a cancel) must not leave its scratch model in /tmp: the model
    lives in the run's folder, and the next check there removes a killed one's leftover."""
    run_dir = tmp_path / "run"
    (run_dir / "preflight-model-killed" / "model").mkdir(parents=True)
    used = []
    original = preflight._run_checks

    def recording(job, out, model_dir):
        used.append(Path(model_dir))
        assert Path(model_dir).is_dir()
        return original(job, out, model_dir)

    monkeypatch.setattr(preflight, "_run_checks", recording)
    report = preflight.check_in_process(templates.get_template("mlp_classifier").code, spec_for("iris"), {},
                                        timeout=60, report_path=run_dir / "preflight.json")
    assert report.ok, report.summary()
    assert used[0].parent == run_dir and used[0].name.startswith("preflight-model-")
    assert sorted(p.name for p in run_dir.iterdir()) == ["preflight.json"]
