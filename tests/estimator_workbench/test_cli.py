"""Tests of estimator_workbench.cli.commands: commands, the UI command line, and clear errors (exit 2, no traceback)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import child_processes
import pytest

from estimator_workbench.cli import commands as cli
from estimator_workbench.cli import serve
from estimator_workbench.execution import launcher as launcher_module
from estimator_workbench.execution.launcher import LocalLauncher
from estimator_workbench.store.registry import RunRegistry

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


@pytest.fixture
def stub_launchers(monkeypatch):
    """Makes the CLI launch the stub runner (no engine), and cleans up every launcher."""
    made = []

    def make(root, warm_spare=False):  # the stub runner has no spare mode
        launcher = LocalLauncher(root, gpus=[], runner_module="stub_runner",
                                 env={"PYTHONPATH": str(HERE)})
        made.append(launcher)
        return launcher

    monkeypatch.setattr(cli, "_launcher", make)
    yield made
    for launcher in made:
        launcher.shutdown(grace=1.0)


def run_cli(*argv):
    return cli.main(list(argv))


class TestUI:
    def test_ui_command_binds_loopback(self):
        cmd = serve.ui_command()
        assert cmd[:4] == [sys.executable, "-m", "streamlit", "run"]
        assert cmd[4].endswith("estimator_workbench/ui/asgi.py")  # app.py behind the token gate (issue 24.1)
        assert cmd[5:] == ["--server.address", "127.0.0.1", "--server.headless", "true",
                           "--server.enableXsrfProtection", "true", "--server.enableCORS", "true",
                           "--browser.gatherUsageStats", "false", "--logger.hideWelcomeMessage", "true",
                           "--server.allowedHosts", "localhost", "--server.allowedHosts", "127.0.0.1",
                           "--server.allowedHosts", "::1"]  # issue 14.1

    def test_no_arguments_starts_the_ui(self, monkeypatch, workspace, tmp_path):
        calls = []
        monkeypatch.setattr(serve, "_serve", lambda cmd, env: calls.append((cmd, env)) or 0)
        assert serve._UI_SCRIPT.exists()  # found through importlib.resources, not the checkout
        assert run_cli("--workspace", str(tmp_path / "ws")) == 0
        (cmd, env), = calls
        assert "streamlit" in cmd and env["WORKBENCH_HOME"] == str((tmp_path / "ws").resolve())

    def test_dry_run(self, capsys):
        assert run_cli("ui", "--dry-run", "--port", "8600") == 0
        assert capsys.readouterr().out.strip().endswith("--server.port 8600")


class TestErrors:
    @pytest.mark.parametrize("argv,message", [
        (["stop", "r-nope"], "No run 'r-nope' in this workspace"),
        (["cancel", "../etc"], "Unsafe name '../etc'"),
        (["export", "r-nope"], "No run 'r-nope'"),
        (["run", "--dataset", "iris"], "run needs --dataset and --template"),
        (["run", "--dataset", "iris", "--template", "mlp_classifier", "--params", "{bad"],
         r"--params must be a JSON object, given: '\{bad'"),
        (["run", "--dataset", "iris", "--template", "mlp_classifier", "--params", "[1]"],
         "--params must be a JSON object"),
        (["run", "--dataset", "no_such_data", "--template", "mlp_classifier", "--no-preflight"],
         "Unknown bundled dataset name: 'no_such_data'"),
        (["run", "--dataset", "iris", "--template", "nope", "--no-preflight"],
         "Unknown template name: 'nope'"),
        (["run", "--dataset", "iris", "--template", "mlp_classifier", "--steps", "0"],
         "--steps = 0 is out of range: it must be an integer from 1 to 10000000"),
        (["run", "--dataset", "iris", "--template", "mlp_classifier", "--config", '{"bogus_field": 1}'],
         r"--config key 'bogus_field' is not a known setting; --config takes \['tf_random_seed', "),
        (["run", "--dataset", "/no/such.csv", "--template", "mlp_classifier"],
         "--dataset file '/no/such.csv' does not exist"),
        (["run", "--file", "/no/run.json"], "--file '/no/run.json' does not exist"),
        (["runs", "--status", "done"], "--status must be one of"),
        (["run", "--dataset", "iris", "--template", "mlp_classifier", "--action", "predict"],
         "--action predict needs --from RUN: the trained run whose model to use"),
        (["run", "--dataset", "iris", "--template", "mlp_classifier", "--checkpoint", "model.ckpt-5"],
         "--checkpoint names a checkpoint of the run given with --from RUN"),
        (["run", "--action", "evaluate", "--from", "r-nope"], "No run 'r-nope'"),
        (["predict", "r-nope", "--data", "x.csv", "--out", "y.csv"], "No run 'r-nope'"),
    ])
    def test_bad_input_exit_2(self, workspace, capsys, argv, message):
        import re

        assert run_cli(*argv) == 2
        err = capsys.readouterr().err
        assert re.search(message, err), err
        assert "Traceback" not in err and err.startswith("estimator-workbench: error: ")

    def test_bad_params_for_schema(self, workspace, capsys):
        assert run_cli("run", "--dataset", "iris", "--template", "mlp_classifier",
                       "--params", '{"no_such_param": 1}', "--no-preflight") == 2
        assert "no_such_param" in capsys.readouterr().err
        assert RunRegistry(workspace).list_runs() == []

    def test_argparse_errors_exit_2_in_a_subprocess(self, workspace):
        proc = subprocess.run([sys.executable, "-m", "estimator_workbench", "frobnicate"], cwd=REPO,
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2 and "invalid choice: 'frobnicate'" in proc.stderr
        assert "Traceback" not in proc.stderr


@pytest.mark.slow
class TestCommands:
    def test_run_follow_runs_stop_resume_export(self, workspace, capsys, stub_launchers):
        assert run_cli("runs") == 0
        assert "No runs" in capsys.readouterr().out
        code = run_cli("run", "--dataset", "iris", "--template", "mlp_classifier", "--steps", "5",
                       "--params", '{"hidden_units": "8"}', "--no-preflight", "--name", "first")
        captured = capsys.readouterr()
        assert code == 0, captured.err
        assert "succeeded [####################] step 5/5  loss 0.2" in captured.err
        (record,) = RunRegistry(workspace).list_runs()
        assert record.status == "succeeded" and record.name == "first"
        assert record.dataset_fingerprint and record.template_name == "mlp_classifier"
        assert record.schedule["max_steps"] == 5 and "def model_fn" in record.template_code

        assert run_cli("runs") == 0
        table = capsys.readouterr().out.splitlines()
        assert table[0].split() == ["RUN", "NAME", "ACTION", "STATUS", "STEP", "LOSS", "CREATED"]
        assert table[1].split()[:5] == [record.run_id, "first", "train", "succeeded", "5"]
        assert run_cli("runs", "--json") == 0
        assert json.loads(capsys.readouterr().out)[0]["run_id"] == record.run_id

        # A long detached run: stop, then resume to completion.
        assert run_cli("run", "--dataset", "iris", "--template", "mlp_classifier", "--steps",
                       "100", "--no-preflight", "--detach", "--config", '{"tf_random_seed": 3}') == 0
        run_id = capsys.readouterr().out.strip()
        launcher = stub_launchers[-1]
        assert RunRegistry(workspace).get(run_id).run_config == {"tf_random_seed": 3}
        assert run_cli("stop", run_id) == 0
        assert launcher.wait(run_id, timeout=30).status == "stopped"
        assert run_cli("resume", run_id) == 0
        assert RunRegistry(workspace).get(run_id).status == "succeeded"

        assert run_cli("export", record.run_id) == 0
        bundle = Path(capsys.readouterr().out.strip().splitlines()[-1])
        assert bundle == workspace.resolve() / "runs" / record.run_id / "export" / f"{record.run_id}.zip"
        with zipfile.ZipFile(bundle) as zf:
            names = set(zf.namelist())
            assert {"model_fn.py", "run.json", "params.json", "run_config.json", "dataset.json",
                    "versions.json", "rerun.py", "summary.json"} <= names
            assert "def model_fn" in zf.read("model_fn.py").decode()
            assert "torch" in json.loads(zf.read("versions.json"))
            dataset = json.loads(zf.read("dataset.json"))
            assert dataset["fingerprint"] == record.dataset_fingerprint and "split" in dataset
            compile(zf.read("rerun.py"), "rerun.py", "exec")

    def test_cancel_command(self, workspace, capsys, stub_launchers):
        assert run_cli("run", "--dataset", "iris", "--template", "mlp_classifier", "--steps",
                       "2000", "--no-preflight", "--detach") == 0
        run_id = capsys.readouterr().out.strip()
        assert run_cli("cancel", run_id, "--grace", "5") == 0
        assert f"Run {run_id} cancelled." in capsys.readouterr().out

    def test_run_from_file(self, workspace, tmp_path, capsys, stub_launchers):
        spec = {"dataset": "iris", "template": "mlp_classifier", "action": "train",
                "params": {}, "schedule": {"max_steps": 3}, "name": "from file"}
        path = tmp_path / "run.json"
        path.write_text(json.dumps(spec))
        assert run_cli("run", "--file", str(path), "--no-preflight") == 0
        (record,) = RunRegistry(workspace).list_runs()
        assert record.name == "from file" and record.status == "succeeded"


@pytest.mark.slow
def test_run_checks_in_the_runner_by_default(workspace, capsys, stub_launchers):
    assert run_cli("run", "--dataset", "iris", "--template", "mlp_classifier", "--steps", "3",
                   "--detach", "--preflight-timeout", "45") == 0
    (record,) = RunRegistry(workspace).list_runs()
    assert record.schedule["preflight"] is True and record.schedule["preflight_timeout"] == 45
    assert run_cli("run", "--dataset", "iris", "--template", "mlp_classifier", "--steps", "3",
                   "--detach", "--no-preflight") == 0
    newest = RunRegistry(workspace).list_runs()[0]
    assert not newest.schedule.get("preflight")  # the contract stores the choice: False
    # evaluate/predict reuse a trained model (the check trains a step and needs labels)
    assert run_cli("run", "--action", "evaluate", "--from", record.run_id, "--detach") == 0
    evaluated = RunRegistry(workspace).list_runs()[0]
    assert evaluated.action == "evaluate" and not evaluated.schedule.get("preflight")
    assert (evaluated.parent_run_id, evaluated.parent_relation) == (record.run_id, "evaluate_from")
    for launcher in stub_launchers:
        for run in (newest, record, evaluated):
            launcher.wait(run.run_id, timeout=30)


def test_run_starts_its_runner_before_importing_pandas_or_pydantic(tmp_path):
    """``run`` starts the runner (its imports take seconds) as soon as its arguments are parsed;
    the parser importing pandas (through the data modules, for the flags' choices) delayed that
    by 0.2 s of every CLI launch, the run contract's pydantic models by 0.06 s. Checked in a
    fresh interpreter, up to the spare's start."""
    script = f"""
import sys
from estimator_workbench.cli import commands
from estimator_workbench.execution import launcher

def started(self, *args, **kwargs):
    print(sorted(m for m in ("pandas", "numpy", "torch", "pydantic") if m in sys.modules))
    raise SystemExit(0)

launcher.LocalLauncher.poll = started
commands.main(["--workspace", {str(tmp_path)!r}, "run", "--dataset", "iris", "--template", "mlp_classifier"])
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]"


def test_launcher_follows_the_ray_address(workspace, monkeypatch):
    """``$WORKBENCH_RAY_ADDRESS`` makes every command use Ray Jobs; unset, a local launcher
    without a warm spare (a CLI command starts at most one run)."""
    from estimator_workbench.execution import ray_launcher

    monkeypatch.delenv("WORKBENCH_RAY_ADDRESS", raising=False)
    local = cli._launcher(workspace)
    assert type(local) is LocalLauncher and local.warm_spares == 0
    real = ray_launcher.RayJobLauncher
    monkeypatch.setattr(ray_launcher, "RayJobLauncher",
                        lambda *args, **kwargs: real(*args, client=object(), **kwargs))
    monkeypatch.setenv("WORKBENCH_RAY_ADDRESS", "http://head:8265")
    remote = cli._launcher(workspace)
    assert type(remote) is real and remote.address == "http://head:8265"


@pytest.mark.slow
class TestPreStartedRunner:
    """``run`` starts the runner before validating, so its imports overlap the CLI's work."""

    @staticmethod
    def spare_pids(workspace: Path) -> list[int]:
        import re

        log = workspace / "spare.log"
        return [int(p) for p in re.findall(r"spare pid (\d+) ready", log.read_text())] if log.exists() else []

    def test_the_pre_started_runner_takes_the_run(self, workspace, monkeypatch, capsys):
        from estimator_workbench.store.registry import RunRegistry

        monkeypatch.setattr(launcher_module, "detect_gpus", list)  # spares are CPU-only
        code = run_cli("run", "--dataset", "iris", "--template", "mlp_classifier", "--steps", "5",
                       "--no-preflight", "--detach")
        assert code == 0, capsys.readouterr().err
        run_id = capsys.readouterr().out.strip().splitlines()[-1]
        launcher = LocalLauncher(workspace, gpus=[])
        try:
            record = launcher.wait(run_id, timeout=120)
        finally:
            launcher.shutdown(grace=1.0)
        assert record.status == "succeeded", record.error
        assert self.spare_pids(workspace) == [record.pid]  # started before validation, then took the run
        deadline = time.monotonic() + 30  # the CLI's launcher is gone: reap its runner here
        while record.pid in child_processes.child_pids(os.getpid()) and time.monotonic() < deadline:
            time.sleep(0.05)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(record.pid, 0)
        assert (RunRegistry(workspace).run_dir(run_id) / "metrics.jsonl").exists()

    def test_bad_input_ends_the_pre_started_runner(self, workspace, monkeypatch, capsys):
        monkeypatch.setattr(launcher_module, "detect_gpus", list)  # spares are CPU-only
        before = set(child_processes.child_pids(os.getpid()))  # (an earlier test's may be ending)
        assert run_cli("run", "--dataset", "no_such_dataset", "--template", "mlp_classifier") == 2
        assert "no_such_dataset" in capsys.readouterr().err
        from estimator_workbench.execution.processes import pid_alive

        for pid in self.spare_pids(workspace):  # (empty when it was ended before its imports)
            assert not pid_alive(pid)
        assert not set(child_processes.child_pids(os.getpid())) - before



@pytest.mark.slow
def test_predict_command_on_new_data_with_no_or_odd_labels(workspace, tmp_path, capsys, monkeypatch):
    """New data to predict on has no label, or a label with blanks or classes never seen: the
    model reads features only. A file without a feature column is refused before any run."""
    import pandas as pd

    from estimator_workbench import templates
    from estimator_workbench.data import datasets
    from estimator_workbench.execution import runner

    monkeypatch.setattr(cli, "_launcher", lambda root, warm_spare=False: LocalLauncher(root, gpus=[]))
    info = templates.get_template("mlp_classifier")
    trained = RunRegistry(workspace).create_run(
        name="iris", action="train", dataset=cli._dataset_dict("iris", None),
        template={"name": info.name, "code": info.code}, params={}, run_config={"tf_random_seed": 0},
        schedule={"max_steps": 5})
    assert runner.run(RunRegistry(workspace).run_dir(trained.run_id), install_signal_handlers=False) == 0
    flowers = pd.read_csv(datasets.bundled_path("iris")).head(6)
    no_label, odd_labels, no_feature = (tmp_path / name for name in ("no_label.csv", "odd.csv", "bad.csv"))
    flowers.drop(columns=["species"]).to_csv(no_label, index=False)
    flowers.assign(species=[None, "Iris-unseen", *flowers["species"][2:]]).to_csv(odd_labels, index=False)
    flowers.drop(columns=["sepal_length_cm"]).to_csv(no_feature, index=False)

    for data in (no_label, odd_labels):
        out = tmp_path / f"pred_{data.name}"
        assert run_cli("predict", trained.run_id, "--data", str(data), "--out", str(out)) == 0, capsys.readouterr().err
        predictions = pd.read_csv(out)
        assert len(predictions) == 6 and predictions["class"].notna().all()
    # Registered through submit_run, as `run` registers (its policy recorded: no pre-flight check).
    predicted = [r for r in RunRegistry(workspace).list_runs() if r.action == "predict"]
    assert len(predicted) == 2
    assert all(r.schedule == {"preflight": False} and r.parent_relation == "predict_from" for r in predicted)
    capsys.readouterr()
    runs_before = len(RunRegistry(workspace).list_runs())
    assert run_cli("predict", trained.run_id, "--data", str(no_feature), "--out", str(tmp_path / "x.csv")) == 2
    assert (f"--data {str(no_feature)!r}: The data lacks the feature column(s) ['sepal_length_cm'] the model was "
            "trained on") in capsys.readouterr().err
    assert len(RunRegistry(workspace).list_runs()) == runs_before


def test_commands_mark_a_run_whose_runner_died_lost_with_its_metrics(workspace, capsys, stub_launchers):
    """No process watches the workspace between commands: runs/stop/resume reap first, and the
    summary of a lost run comes from the metrics its runner wrote before it died."""
    reg = RunRegistry(workspace)
    record = reg.create_run(name="killed", action="train", dataset={"ref": {"kind": "bundled", "name": "iris"}},
                            template={"name": "t", "code": "x = 1\n"}, params={}, run_config={},
                            schedule={"max_steps": 100})
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    reg.set_status(record.run_id, "running", pid=dead.pid)
    (reg.run_dir(record.run_id) / "metrics.jsonl").write_text("".join(
        json.dumps({"step": step, "wall_time": 1.0 + step, "split": "train", "name": "loss", "value": 1.0 / step}) + "\n"
        for step in (10, 20, 30)))

    assert run_cli("stop", record.run_id) == 2
    assert f"Run {record.run_id!r} is 'lost'; only a running or queued run can be stopped." in capsys.readouterr().err
    lost = reg.get(record.run_id)
    assert lost.status == "lost" and lost.error == f"lost: runner process is gone (pid {dead.pid} no longer exists)"
    assert lost.summary["train/loss"] == {"last": 1 / 30, "last_step": 30, "best": 1 / 30, "best_step": 30}
    assert run_cli("runs") == 0
    assert capsys.readouterr().out.splitlines()[1].split()[3:6] == ["lost", "30", f"{1 / 30:.4g}"]


def test_run_records_a_seed_and_its_source_run(workspace, tmp_path, capsys, stub_launchers):
    """Every run records tf_random_seed (its bundle reproduces it); --from makes an evaluate or
    predict run use a trained run's model, template, params and (by default) data."""
    import pandas as pd

    from estimator_workbench.data import datasets

    assert run_cli("run", "--dataset", "iris", "--template", "mlp_classifier", "--steps", "3",
                   "--no-preflight", "--detach", "--params", '{"hidden_units": "8"}') == 0
    assert run_cli("run", "--dataset", "iris", "--template", "mlp_classifier", "--steps", "3",
                   "--no-preflight", "--detach", "--seed", "11") == 0
    seeded, drawn = RunRegistry(workspace).list_runs()
    assert seeded.run_config["tf_random_seed"] == 11
    assert isinstance(drawn.run_config["tf_random_seed"], int)

    new_rows = tmp_path / "new.csv"
    pd.read_csv(datasets.bundled_path("iris")).drop(columns=["species"]).head(4).to_csv(new_rows, index=False)
    assert run_cli("run", "--action", "predict", "--from", drawn.run_id, "--checkpoint", "model.ckpt-3",
                   "--dataset", str(new_rows), "--detach") == 0
    predict = RunRegistry(workspace).list_runs()[0]
    assert (predict.parent_run_id, predict.parent_relation, predict.checkpoint_path) == (
        drawn.run_id, "predict_from", "model.ckpt-3")
    assert predict.template == drawn.template and predict.params["hidden_units"] == "8"
    assert predict.run_config["tf_random_seed"] == drawn.run_config["tf_random_seed"]
    assert predict.dataset["ref"] == {"kind": "file", "path": str(new_rows.resolve())}
    assert "species" not in [c["name"] for c in predict.dataset["schema"]["columns"]]

    assert run_cli("run", "--dataset", "iris", "--template", "mlp_classifier", "--from", drawn.run_id,
                   "--steps", "3", "--no-preflight", "--detach") == 0
    warm = RunRegistry(workspace).list_runs()[0]
    assert (warm.action, warm.parent_run_id, warm.parent_relation) == ("train", drawn.run_id, "warm_start")
    for launcher in stub_launchers:
        for run in RunRegistry(workspace).list_runs():
            launcher.wait(run.run_id, timeout=30)


def test_export_without_a_checkpoint_leaves_nothing_behind(workspace, capsys):
    record = RunRegistry(workspace).create_run(
        name="untrained", action="train", dataset={"ref": {"kind": "bundled", "name": "iris"}},
        template={"name": "t", "code": "x = 1\n"}, params={}, run_config={}, schedule={})
    assert run_cli("export", record.run_id, "--with-checkpoint") == 2
    assert f"Run {record.run_id!r} has no checkpoint to include." in capsys.readouterr().err
    assert not (RunRegistry(workspace).run_dir(record.run_id) / "export").exists() or not any(
        (RunRegistry(workspace).run_dir(record.run_id) / "export").iterdir())


def test_concurrency_flags_set_the_launchers_settings(tmp_path, monkeypatch, capsys):
    """Issue 28 item 8: --max-concurrent / --helper-slots reach every launcher of the process and
    its children (as the environment variables the launcher reads); bad values exit 2."""
    monkeypatch.delenv(launcher_module.MAX_CONCURRENT_ENV, raising=False)
    monkeypatch.delenv(launcher_module.HELPER_SLOTS_ENV, raising=False)
    assert cli.main(["--workspace", str(tmp_path), "--max-concurrent", "2", "--helper-slots", "0", "runs"]) == 0
    assert os.environ[launcher_module.MAX_CONCURRENT_ENV] == "2"
    assert os.environ[launcher_module.HELPER_SLOTS_ENV] == "0"
    launcher = LocalLauncher(tmp_path, gpus=[])
    assert (launcher.max_concurrent, launcher.helper_slots) == (2, 0)
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--workspace", str(tmp_path), "--helper-slots", "-1", "runs"])
    assert exit_info.value.code == 2
    assert "--helper-slots: must be an integer >= 0, given '-1'" in capsys.readouterr().err
