"""``--json`` on ``run``, ``predict``, ``sweep`` and ``trash list``, as on ``runs``: one JSON document
on stdout (progress stays on stderr), the run objects shaped as ``runs --json`` prints them."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from estimator_workbench.cli import commands as cli
from estimator_workbench.execution.launcher import LocalLauncher
from estimator_workbench.store.registry import RunRegistry

HERE = Path(__file__).resolve().parent


@pytest.fixture
def stub_launchers(monkeypatch):
    """The CLI launches the stub runner (no engine); every launcher is shut down afterwards."""
    made = []

    def make(root, warm_spare=False):
        launcher = LocalLauncher(root, gpus=[], runner_module="stub_runner", env={"PYTHONPATH": str(HERE)})
        made.append(launcher)
        return launcher

    monkeypatch.setattr(cli, "_launcher", make)
    yield made
    for launcher in made:
        launcher.shutdown(grace=1.0)


def _last_json(out: str):
    return json.loads(out.strip().splitlines()[-1])


def _runs_json(capsys) -> list[dict]:
    assert cli.main(["runs", "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.slow
def test_run_and_trash_list_print_json(workspace, capsys, stub_launchers):
    assert cli.main(["run", "--dataset", "iris", "--template", "mlp_classifier", "--steps", "5",
                     "--no-preflight", "--json"]) == 0
    captured = capsys.readouterr()
    finished = json.loads(captured.out)  # stdout is the JSON document alone
    assert "submitted (train)" in captured.err and "succeeded" in captured.err
    assert finished["status"] == "succeeded" and finished["action"] == "train"
    assert finished == _runs_json(capsys)[0]

    assert cli.main(["run", "--dataset", "iris", "--template", "mlp_classifier", "--steps", "5",
                     "--no-preflight", "--detach", "--json"]) == 0
    submitted = json.loads(capsys.readouterr().out)
    assert submitted["run_id"] != finished["run_id"] and submitted["status"] in ("queued", "running", "succeeded")
    stub_launchers[-1].wait(submitted["run_id"], timeout=60)

    assert cli.main(["trash", "list", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []
    assert cli.main(["delete", finished["run_id"]]) == 0
    capsys.readouterr()
    assert cli.main(["trash", "list", "--json"]) == 0
    (trashed,) = json.loads(capsys.readouterr().out)
    assert trashed["run_id"] == finished["run_id"] and isinstance(trashed["trashed_at"], float)


def test_run_help_says_which_action_is_the_default(capsys):
    with pytest.raises(SystemExit):
        cli.main(["run", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "default: train (the UI's Train page starts with train_and_evaluate" in text


@pytest.mark.slow
def test_predict_prints_json_with_the_predictions_file(workspace, tmp_path, capsys, monkeypatch):
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
    data = tmp_path / "new.csv"
    pd.read_csv(datasets.bundled_path("iris")).head(4).drop(columns=["species"]).to_csv(data, index=False)
    out = tmp_path / "out.csv"
    assert cli.main(["predict", trained.run_id, "--data", str(data), "--out", str(out), "--json"]) == 0
    document = _last_json(capsys.readouterr().out)
    assert document["action"] == "predict" and document["status"] == "succeeded"
    assert document["predictions_file"] == str(out.resolve()) and len(pd.read_csv(out)) == 4


@pytest.mark.slow
def test_sweep_prints_json_when_it_ends(workspace, capsys):
    assert cli.main(["sweep", "--dataset", "iris", "--template", "mlp_classifier", "--steps", "10",
                     "--param", "learning_rate=0.001:0.1:log", "--trials", "1", "--metric", "loss",
                     "--pruner", "none", "--seed", "1", "--name", "js", "--json"]) == 0
    document = _last_json(capsys.readouterr().out)
    assert document["sweep"] == "js" and document["complete"] == 1 and document["trials"] == "1/1"
    assert document["best_trial"]["number"] == 0 and document["best_trial"]["metric"] == "loss"
    assert document["best_trial"]["run_id"] in {r["run_id"] for r in _runs_json(capsys)}
    assert cli.main(["sweep", "--stop", "js", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"sweep": "js", "stop_requested": True}
