"""The run contract (estimator_workbench.store.run_spec) and the one submit path (estimator_workbench.execution.submit):
every bad value is refused before a run exists, with one message naming the field, the value and
the allowed range, and the control of the front end that set it (CLI flag or UI form control)."""

from __future__ import annotations

import json

import pytest

from estimator_workbench.cli import commands as cli
from estimator_workbench.execution.submit import PARENT_RELATION, submit_run, validate_run
from estimator_workbench.store.registry import RunRegistry
from estimator_workbench.store.run_spec import RunSpecError, check_request, check_schedule

STUB_TEMPLATE = {"name": "t", "code": "def model_fn(features, labels, mode, params): ..."}
RUN = ["run", "--dataset", "iris", "--template", "mlp_classifier", "--no-preflight", "--detach"]


def cli_refuses(workspace, capsys, argv: list[str], message: str) -> None:
    assert cli.main(["--workspace", str(workspace), *argv]) == 2
    err = capsys.readouterr().err
    assert message in err, err
    assert "Traceback" not in err
    assert RunRegistry(workspace).list_runs() == []  # refused before a run was registered


@pytest.mark.parametrize(("flags", "message"), [
    (["--config", '{"batch_size": -3}'], "--batch-size = -3 is out of range: it must be an integer from 1 to 65536."),
    (["--config", '{"batch_size": 0}'], "--batch-size = 0 is out of range: it must be an integer from 1 to 65536."),
    (["--batch-size", "1000000000"], "--batch-size = 1000000000 is out of range: it must be an integer from 1 to 65536."),
    (["--num-processes", "500"], "--num-processes = 500 is out of range: it must be an integer from 1 to 64."),
    (["--preflight-timeout", "-1"], "--preflight-timeout = -1.0 is out of range: it must be a number over 0 and at most 3600.0."),
    (["--config", '{"keep_checkpoint_max": -1}'], "--config key 'keep_checkpoint_max' = -1 is out of range: it must be an integer from 0 to 100000."),
    (["--early-stopping-mode", "min", "--action", "train"],
     "Early stopping watches the evaluations of train_and_evaluate; the action 'train' has none."),
])
def test_cli_refuses_each_bad_value_before_a_run_exists(workspace, capsys, flags, message):
    cli_refuses(workspace, capsys, [*RUN, *flags], message)


def test_cli_refuses_a_run_file_with_a_bad_early_stopping_mode(workspace, capsys, tmp_path):
    run_file = tmp_path / "run.json"
    run_file.write_text(json.dumps({"dataset": "iris", "template": "mlp_classifier", "action": "train_and_evaluate",
                                    "schedule": {"early_stopping": {"metric": "accuss", "mode": "sideways"}}}))
    cli_refuses(workspace, capsys, ["run", "--file", str(run_file), "--no-preflight", "--detach"],
                "--early-stopping-mode = 'sideways' is not allowed: it must be 'min' or 'max'.")


def test_cli_refuses_an_unknown_schedule_key_from_a_file(workspace, capsys, tmp_path):
    run_file = tmp_path / "run.json"
    run_file.write_text(json.dumps({"dataset": "iris", "template": "mlp_classifier", "schedule": {"max_stpes": 5}}))
    cli_refuses(workspace, capsys, ["run", "--file", str(run_file), "--no-preflight", "--detach"],
                "--file schedule key 'max_stpes' is not a known setting; --file schedule takes ['max_steps', ")


def test_ui_and_cli_get_the_same_refusal_naming_their_own_control(workspace):
    from estimator_workbench.ui.forms import UI_CONTROLS

    with pytest.raises(RunSpecError, match=r"^'Batch size' = 0 is out of range: it must be an integer from 1 to 65536\.$"):
        validate_run(action="train", run_config={}, schedule={"batch_size": 0}, control=UI_CONTROLS)
    with pytest.raises(RunSpecError, match=r"^--batch-size = 0 is out of range: it must be an integer from 1 to 65536\.$"):
        validate_run(action="train", run_config={}, schedule={"batch_size": 0}, control=cli.CLI_CONTROLS)


def test_ui_launch_run_refuses_before_registering(workspace):
    from estimator_workbench.ui import forms, session

    session._launcher.clear()
    with pytest.raises(RunSpecError, match=r"'Processes \(torchrun\)' = 500 is out of range"):
        forms.launch_run(name="r", action="train", dataset={"ref": {"kind": "bundled", "name": "iris"}},
                         template=STUB_TEMPLATE, params={}, run_config={},
                         schedule={"max_steps": 5}, num_processes=500)
    assert RunRegistry(workspace).list_runs() == []


def test_known_answers_of_the_contract():
    assert check_schedule({"max_steps": 5, "batch_size": 8}) == {"max_steps": 5, "batch_size": 8}
    config, schedule, processes = check_request(run_config={"batch_size": 16, "tf_random_seed": 3},
                                                schedule={"max_steps": 5}, num_processes=2)
    assert (config, schedule, processes) == ({"tf_random_seed": 3}, {"batch_size": 16, "max_steps": 5}, 2)
    with pytest.raises(RunSpecError, match=r"^schedule.nan_policy = 'ignore' is not allowed: it must be 'fail' or 'stop'\.$"):
        check_schedule({"nan_policy": "ignore"})
    with pytest.raises(RunSpecError, match=r"^schedule.early_stopping.min_delta = -0.5 is out of range"):
        check_schedule({"early_stopping": {"min_delta": -0.5}})


def test_submit_defaults_and_parent_relation(workspace):
    registry = RunRegistry(workspace)
    record = submit_run(registry, None, name="r", action="train", dataset={"ref": {"kind": "bundled", "name": "iris"}},
                        template=STUB_TEMPLATE, params={}, run_config={}, schedule={},
                        parent_run_id=None)
    assert record.schedule["max_steps"] == 1000 and record.schedule["preflight"] is True
    assert record.schedule["preflight_timeout"] == 60.0
    assert 0 <= record.run_config["tf_random_seed"] < 2**31  # always recorded: the bundle reproduces it
    child = submit_run(registry, None, name="p", action="predict", dataset=record.dataset, template=record.template,
                       params={}, run_config={"tf_random_seed": 1}, schedule={"preflight": False},
                       parent_run_id=record.run_id)
    assert child.parent_relation == PARENT_RELATION["predict"] == "predict_from"
    assert "max_steps" not in child.schedule


def test_a_multi_process_run_is_checked_before_registering(workspace):
    class Failed:
        ok = False

        def summary(self):
            return "Pre-flight check failed at train: boom"

    with pytest.raises(RunSpecError, match="Pre-flight check failed at train: boom"):
        submit_run(RunRegistry(workspace), None, name="r", action="train", dataset={}, template=STUB_TEMPLATE,
                   params={}, run_config={}, schedule={}, num_processes=2,
                   preflight_runner=lambda *a, **k: Failed())
    assert RunRegistry(workspace).list_runs() == []


def test_cli_refuses_an_early_stopping_metric_the_template_does_not_report(workspace, capsys, tmp_path):
    # The template's EVAL spec is checked (in a child process) before the run exists: TF's
    # evaluate reports eval_metric_ops' keys and 'loss', so 'accuss' could never be watched.
    run_file = tmp_path / "run.json"
    run_file.write_text(json.dumps({"dataset": "iris", "template": "mlp_classifier", "action": "train_and_evaluate",
                                    "schedule": {"max_steps": 5, "early_stopping": {"metric": "accuss"}}}))
    cli_refuses(workspace, capsys, ["run", "--file", str(run_file), "--detach"],
                "--early-stopping-metric = 'accuss' is not an evaluation metric of template 'mlp_classifier'; "
                "its evaluation reports ['accuracy', 'loss']. Watch one of these.")


class _Report:
    ok = True

    def __init__(self, metric_keys):
        self.modes = {"eval": {"ok": True, "metric_keys": metric_keys}}

    def to_dict(self):
        return {"ok": True, "modes": self.modes}


def test_a_watched_metric_is_checked_once_before_registering(workspace):
    from estimator_workbench.ui.forms import UI_CONTROLS

    calls = []

    def preflight(*args, **kwargs):
        calls.append(kwargs["action"])
        return _Report(["accuracy", "auc"])

    common = dict(name="r", action="train_and_evaluate", dataset={}, template=STUB_TEMPLATE, params={},
                  run_config={}, preflight_runner=preflight, control=UI_CONTROLS)
    with pytest.raises(RunSpecError, match=r"^'Watch eval metric' = 'AUC' is not an evaluation metric of template "
                                           r"'t'; its evaluation reports \['accuracy', 'auc', 'loss'\]\."):
        submit_run(RunRegistry(workspace), None, schedule={"early_stopping": {"metric": "AUC"}}, **common)
    assert RunRegistry(workspace).list_runs() == []
    record = submit_run(RunRegistry(workspace), None, schedule={"early_stopping": {"metric": "auc"}}, **common)
    # Checked here, so the runner does not check again; the report is kept with the run.
    assert record.schedule["preflight"] is False
    saved = json.loads((RunRegistry(workspace).run_dir(record.run_id) / "preflight.json").read_text())
    assert saved["modes"]["eval"]["metric_keys"] == ["accuracy", "auc"]
    # Watching 'loss' needs no check before registering (the runner checks as usual).
    plain = submit_run(RunRegistry(workspace), None, schedule={"early_stopping": {"metric": "loss"}}, **common)
    assert plain.schedule["preflight"] is True
    assert calls == ["train_and_evaluate", "train_and_evaluate"]


def test_stall_settings_of_the_schedule():
    """Issue 14.6: how long a run may go without a step, and what then happens."""
    assert check_schedule({"stall_timeout_s": 120, "stall_action": "fail"}) == {
        "stall_timeout_s": 120.0, "stall_action": "fail"}
    assert check_schedule({}) == {}  # default: 600 s, 'warn' (RunRecord.stall_timeout_s / stall_action)
    with pytest.raises(RunSpecError, match=r"^schedule\.stall_timeout_s = 0 is out of range: it must be a "
                                           r"number over 0 and at most 604800\.0\.$"):
        check_schedule({"stall_timeout_s": 0})
    with pytest.raises(RunSpecError, match=r"^schedule\.stall_action = 'kill' is not allowed: it must be "
                                           r"'warn' or 'fail'\.$"):
        check_schedule({"stall_action": "kill"})


class TestMachineLimit:
    """Issue 24 item 9: ``sweep --parallel 100000`` and ``--num-processes 64`` on 2 cores were
    accepted (4 runners measured 1.6 GB). Both are capped by the machine's cores and memory, in
    the run contract, with the reason in the refusal."""

    @pytest.fixture
    def small_machine(self, monkeypatch):
        """2 cores, 1.2 GiB: room for 3 runners of 400 MiB, so the cores decide; 0.7 GiB: 1 runner."""
        import os
        from types import SimpleNamespace

        import psutil

        memory = {"total": int(1.2 * 2**30)}
        monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
        monkeypatch.setattr(psutil, "virtual_memory", lambda: SimpleNamespace(total=memory["total"]))
        monkeypatch.delenv("WORKBENCH_RAY_ADDRESS", raising=False)
        return memory

    REASON = "this machine has 2 CPU cores and 1.2 GiB of memory, room for 3 runners of about 400 MiB"

    def test_cli_run_refuses_more_processes_than_cores(self, workspace, capsys, small_machine):
        cli_refuses(workspace, capsys, [*RUN, "--num-processes", "64"],
                    f"--num-processes = 64 is more processes than this machine can run at once: at most 2 "
                    f"({self.REASON}). Use 2 or fewer.")

    def test_memory_caps_too(self, small_machine):
        from estimator_workbench.store.run_spec import check_num_processes, machine_limit

        small_machine["total"] = int(0.7 * 2**30)
        assert machine_limit().processes == 1
        with pytest.raises(RunSpecError, match=r"^n = 2 is more processes than this machine can run at once: at "
                                               r"most 1 \(this machine has 2 CPU cores and 0\.7 GiB of memory, room "
                                               r"for 1 runner of about 400 MiB\)\. Use 1 or fewer\.$"):
            check_num_processes(2, "n")

    def test_ui_gets_the_same_refusal(self, workspace, small_machine):
        from estimator_workbench.ui import forms, session

        session._launcher.clear()
        with pytest.raises(RunSpecError, match=r"^'Processes \(torchrun\)' = 4 is more processes than this machine"):
            forms.launch_run(name="r", action="train", dataset={"ref": {"kind": "bundled", "name": "iris"}},
                             template=STUB_TEMPLATE, params={}, run_config={},
                             schedule={"max_steps": 5}, num_processes=4)
        assert RunRegistry(workspace).list_runs() == []

    def test_sweep_parallel_is_capped(self, workspace, capsys, small_machine):
        argv = ["--workspace", str(workspace), "sweep", "--dataset", "iris", "--template", "mlp_classifier",
                "--steps", "50", "--metric", "accuracy", "--param", "learning_rate=0.001:0.1:log", "--trials", "4",
                "--parallel", "100000"]
        assert cli.main(argv) == 2
        err = capsys.readouterr().err
        assert (f"--parallel = 100000 is more runs than this machine can run at once: at most 2 ({self.REASON}). "
                "Use 2 or fewer; the other trials wait in the queue.") in err, err
        assert "Traceback" not in err


class TestBadArguments:
    """Issue 24 item 15: bad arguments that were accepted, misnamed or crashed."""

    def test_runs_limit_must_be_positive(self, workspace, capsys):
        for bad in ("-1", "0"):
            with pytest.raises(SystemExit) as exit_:
                cli.main(["runs", "--limit", bad])
            assert exit_.value.code == 2
            assert f"argument --limit: must be an integer >= 1, given '{bad}'" in capsys.readouterr().err

    def test_a_folder_given_as_dataset_is_called_a_folder(self, workspace, capsys, tmp_path):
        cli_refuses(workspace, capsys, ["run", "--dataset", str(tmp_path), "--template", "mlp_classifier",
                                        "--no-preflight", "--detach"],
                    f"--dataset {str(tmp_path)!r} is a folder, not a data file. Give the path of a .csv or "
                    ".parquet file (e.g. data/train.csv), or a bundled dataset name.")

    def test_a_deeply_nested_run_file_is_refused_in_one_line(self, workspace, capsys, tmp_path):
        run_file = tmp_path / "deep.json"
        run_file.write_text("[" * 100_000 + "]" * 100_000)
        cli_refuses(workspace, capsys, ["run", "--file", str(run_file), "--detach"],
                    f"--file {str(run_file)!r} is nested too deeply to read")
        cli_refuses(workspace, capsys, [*RUN, "--params", "{\"a\": " + "[" * 100_000 + "]" * 100_000 + "}"],
                    "--params is nested too deeply to read")

    @pytest.mark.parametrize(("filename", "reason"), [
        ("one_row.csv", "The dataset has 1 row(s); the action 'train' needs at least 2 rows"),
        ("all_nan_label.csv", "has no values: all 3 rows are missing"),
        ("one_class.csv", "Label column 'label' has only one class ('x')"),
        ("nan_label.csv", "Label column 'label' has missing values in 2 of 5 rows"),
        ("no_feature.csv", "No usable feature"),
        ("reserved_name.csv", "Column '__label__' has a name the workbench reserves"),
    ])
    def test_bad_data_is_refused_before_a_run_is_registered(self, workspace, capsys, filename, reason):
        from pathlib import Path

        data = Path(__file__).resolve().parents[1] / "data" / "bad" / filename
        assert cli.main(["--workspace", str(workspace), "run", "--dataset", str(data), "--template",
                         "mlp_classifier", "--action", "train", "--no-preflight", "--detach"]) == 2
        err = capsys.readouterr().err
        assert "error: The dataset cannot be used for 'train': " in err and reason in err, err
        assert "Traceback" not in err
        assert RunRegistry(workspace).list_runs() == []  # before: a run registered, then failed
