"""The Data page's choices as `run` flags (estimator_workbench.cli.data_flags): each one lands in the run's
dataset spec exactly as the page would put it, and a bad one is refused naming the flag before a
run exists."""

from __future__ import annotations

import pandas as pd
import pytest

from estimator_workbench.cli import commands as cli
from estimator_workbench.store.registry import RunRegistry


@pytest.fixture
def weather_csv(tmp_path):
    path = tmp_path / "weather.csv"
    pd.DataFrame({
        "date": pd.date_range("2012-01-01", periods=60, freq="D").strftime("%Y-%m-%d"),
        "station": [f"s{i % 57}" for i in range(60)],
        "temp": [float(i % 13) for i in range(60)],
        "note": ["x"] * 60,
        "weather": ["sun", "rain", "fog"] * 20,
    }).to_csv(path, index=False)
    return path


def register(workspace, *argv):
    args = cli.build_parser().parse_args(["--workspace", str(workspace), "run", *argv])
    return cli._register_run(args, workspace, launcher=None)  # registered, not started


def test_every_data_choice_lands_in_the_dataset_spec(workspace, weather_csv):
    record = register(workspace, "--dataset", str(weather_csv), "--label", "weather", "--template", "mlp_classifier",
                      "--encoding", "date=ignore", "--encoding", "station=hash", "--hash-buckets", "16",
                      "--role", "note=ignore", "--type", "temp=categorical", "--eval-fraction", "0.3",
                      "--split-seed", "5", "--no-stratify", "--numeric-missing", "zero", "--no-preflight")
    data = record.dataset
    assert data["encodings"] == {"date": "ignore", "station": "hash"} and data["hash_buckets"] == 16
    assert data["split"] == {"eval_fraction": 0.3, "seed": 5, "stratify": False}
    assert data["missing"]["numeric"] == "zero"
    roles = {c["name"]: (c["role"], c["dtype"]) for c in data["schema"]["columns"]}
    assert roles["note"][0] == "ignore" and roles["temp"] == ("feature", "categorical")
    assert roles["weather"][0] == "label"


@pytest.mark.parametrize(("flags", "message"), [
    (["--encoding", "sky=hash"], "--encoding 'sky=hash': the data has no column 'sky'; its columns are ['date', "),
    (["--role", "note"], "--role takes COLUMN=VALUE, given: 'note'."),
    (["--encoding", "date=hash"], "encodings['date'] = 'hash' is not allowed"),
    (["--eval-fraction", "1.5"], "The data flags do not describe a usable dataset: "),
])
def test_a_bad_data_flag_is_refused_before_a_run_exists(workspace, capsys, weather_csv, flags, message):
    code = cli.main(["--workspace", str(workspace), "run", "--dataset", str(weather_csv), "--label", "weather",
                     "--template", "mlp_classifier", "--no-preflight", "--detach", *flags])
    err = capsys.readouterr().err
    assert code == 2 and message in err, err
    assert "Traceback" not in err
    assert RunRegistry(workspace).list_runs() == []
