"""The workbench from Python (issue 25 §2, §4): estimator_workbench.Workspace / Run over real runs.

The slow tests submit real iris runs through the API (the CLI's submit path and runner process)
and check what comes back against what the run itself recorded: the metrics stream, the summary,
the UI's predictions CSV, and the exported notebook executed on a fresh kernel.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pandas as pd
import pytest

import estimator_workbench as wb
from estimator_workbench.data import datasets
from estimator_workbench.store.run_spec import RunSpecError

STEPS = 40
CONFIG = {"tf_random_seed": 7, "save_checkpoints_steps": 20}


@pytest.fixture
def ws(workspace):
    return wb.Workspace(workspace)


class TestWithoutRuns:
    def test_package_import_stays_light_and_exports_the_api_lazily(self):
        code = ("import sys, estimator_workbench as wb; light = 'estimator_workbench.api' not in sys.modules "
                "and 'pandas' not in sys.modules; print(light, wb.Workspace.__name__, wb.Run.__module__)")
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                              env={**os.environ, "PYTHONPATH": os.getcwd()})
        assert done.stdout.split() == ["True", "Workspace", "estimator_workbench.api"], done.stderr[-2000:]

    def test_default_workspace_is_the_clis(self, workspace):
        assert wb.Workspace().root == workspace  # $WORKBENCH_HOME, as `estimator-workbench` resolves it

    def test_datasets_and_templates(self, ws):
        names = ws.datasets()
        iris = names.set_index("name").loc["iris"]
        assert (iris["kind"], iris["rows"]) == ("bundled", 150)
        templates = ws.templates().set_index("name")
        assert "mlp_classifier" in templates.index
        assert "learning_rate" in templates.loc["mlp_classifier", "params"]

    @pytest.mark.parametrize("kwargs, message", [
        ({"dataset": "no_such_data"}, r"dataset: Unknown bundled dataset name: 'no_such_data'"),
        ({"dataset": "/no/such.csv"}, r"dataset file '/no/such.csv' does not exist"),
        ({"template": "nope"}, r"template: Unknown template name: 'nope'"),
        ({"steps": 0}, r"steps = 0 is out of range: it must be an integer from 1 to 10000000"),
        ({"config": {"bogus": 1}}, r"config.bogus is not a known setting; config takes \['tf_random_seed', "),
        ({"params": {"learning_rate": -1}}, r"params: Invalid params:\n- learning_rate=-1: below the minimum 1e-06"),
        ({"action": "predict"}, r"action='predict' needs from_run"),
    ])
    def test_bad_input_is_refused_naming_the_field_before_anything_starts(self, ws, kwargs, message):
        request = {"dataset": "iris", "template": "mlp_classifier", "steps": 10, **kwargs}
        with pytest.raises(RunSpecError, match=message) as caught:
            ws.submit(**request)
        assert isinstance(caught.value, ValueError)
        assert ws.runs().empty

    def test_a_dataframe_is_stored_as_an_upload(self, ws):
        frame = datasets.load_csv(datasets.bundled_path("iris"))
        with pytest.raises(RunSpecError, match="steps = 0"):  # stored, then refused: no run
            ws.submit(dataset=frame, template="mlp_classifier", steps=0)
        uploads = ws.datasets().query("kind == 'upload'")
        assert list(uploads["name"]) == ["dataframe.csv"]
        assert pd.read_csv(uploads["path"].iloc[0]).equals(frame)


@pytest.mark.slow
class TestRealRuns:
    def test_submit_watch_compare_predict_and_export(self, ws, tmp_path):
        started = time.monotonic()
        run = ws.submit(dataset="iris", template="mlp_classifier", steps=STEPS, config=CONFIG, batch_size=16,
                        action="train_and_evaluate", schedule={"eval_every_steps": 20}, name="api iris")
        while run.metrics().empty:
            assert run.status in ("queued", "running", "succeeded"), run.record.error
            time.sleep(0.05)
        first_metric_s = time.monotonic() - started
        assert run.wait(timeout=240, progress=False) is run
        assert run.status == "succeeded", run.record.error
        print(f"\nws.submit() to first metric row: {first_metric_s:.2f} s")

        # The metrics stream, long and wide, against the registry's summary of the same run.
        long = run.metrics()
        assert list(long.columns) == ["step", "tag", "value", "wall_time"]
        wide = run.metrics(wide=True)
        assert {"step", "train/loss", "eval/accuracy", "eval/loss"} <= set(wide.columns)
        summary = run.summary
        last_eval = wide.dropna(subset=["eval/accuracy"]).iloc[-1]
        assert (int(last_eval["step"]), last_eval["eval/accuracy"]) == (
            STEPS, summary["eval/accuracy"]["last"])

        # ws.runs(): one row, mlflow.search_runs()-style columns.
        table = ws.runs()
        row = table.set_index("run_id").loc[run.id]
        assert (row["name"], row["status"], row["dataset"], row["template"]) == (
            "api iris", "succeeded", "iris", "mlp_classifier")
        assert row["params.learning_rate"] == run.params["learning_rate"]
        assert row["config.tf_random_seed"] == 7
        assert row["metrics.eval/accuracy"] == summary["eval/accuracy"]["last"]
        assert ws.runs(status="failed").empty

        # The trained model, in this process: the same evaluation as the run recorded.
        results = run.evaluate()
        assert results["global_step"] == STEPS
        assert results["accuracy"] == summary["eval/accuracy"]["last"]
        assert results["loss"] == pytest.approx(summary["eval/loss"]["last"], rel=1e-9)
        assert run.estimator().latest_checkpoint().endswith(f"model.ckpt-{STEPS}")

        # Predictions as a DataFrame == the predictions CSV of a predict run (what the UI downloads).
        frame = datasets.load_csv(datasets.bundled_path("iris")).drop(columns="species").head(12)
        mine = run.predict(frame)
        predict_run = ws.submit(dataset=frame, template=None, action="predict", from_run=run, wait=True)
        assert predict_run.status == "succeeded", predict_run.record.error
        csv = pd.read_csv(predict_run.folder / "predictions.csv")
        assert list(mine.columns) == list(csv.columns)
        pd.testing.assert_frame_equal(mine, csv)
        assert len(mine) == 12

        # The run as a notebook, executed headless on a fresh kernel: the run's recorded metrics.
        nbformat = pytest.importorskip("nbformat")
        nbclient = pytest.importorskip("nbclient")
        path = run.to_notebook(tmp_path / "nb" / "run.ipynb")
        notebook = nbformat.read(path, as_version=4)
        assert notebook.metadata["estimator_workbench"]["run_id"] == run.id
        nbclient.NotebookClient(notebook, timeout=300, kernel_name="python3",
                                resources={"metadata": {"path": str(path.parent)}}).execute()
        printed = "".join(o.get("text", "") for c in notebook.cells for o in c.get("outputs", ())
                          if o.get("name") == "stdout")
        line = next(s for s in printed.splitlines() if s.startswith("RESULTS_JSON "))
        reproduced = json.loads(line.split(" ", 1)[1])
        print(f"notebook: {reproduced}; run: { {k: v['last'] for k, v in summary.items() if k.startswith('eval/')} }")
        assert reproduced["global_step"] == STEPS
        assert reproduced["accuracy"] == summary["eval/accuracy"]["last"]
        assert reproduced["loss"] == pytest.approx(summary["eval/loss"]["last"], rel=1e-6)

    def test_stop_and_resume(self, ws):
        run = ws.submit(dataset="iris", template="mlp_classifier", steps=100_000, config=CONFIG)
        from polling import wait_for

        wait_for(lambda: not run.metrics().empty, timeout=120)
        run.stop()
        run.wait(timeout=120, progress=False)
        assert run.status == "stopped"
        stopped_at = run.estimator().get_variable_value("global_step")
        assert 0 < stopped_at < 100_000
        run.resume()
        wait_for(lambda: run.status == "running" and (run.record.last_step or 0) > stopped_at, timeout=120)
        run.cancel(grace=5)
        run.wait(timeout=60, progress=False)
        assert run.status == "cancelled"


@pytest.mark.slow
def test_live_chart_follows_a_run_in_a_background_thread_and_ends_with_it(ws, capsys):
    run = ws.submit(dataset="iris", template="mlp_classifier", steps=150, config=CONFIG, batch_size=16)
    chart = run.live(interval=0.2, widget=True)  # the widget path, as in a Jupyter kernel
    assert type(chart.figure).__name__ == "FigureWidget"
    chart.join(timeout=240)  # ends by itself once the run has finished
    assert not chart.running and run.record.is_finished
    run.wait(timeout=60, progress=False)
    assert run.status == "succeeded", run.record.error
    losses = run.metrics().query("tag == 'train/loss'")
    drawn = [trace for trace in chart.figure.data if trace.name == "train"]  # loss first, then steps/s
    assert drawn and [float(x) for x in drawn[0].x] == [float(x) for x in losses["step"]]  # up to the last step
    assert [float(y) for y in drawn[0].y] == pytest.approx(list(losses["value"]))
    assert chart.figure.layout.title.text == f"{run.id}: succeeded"

    static = run.live()  # outside Jupyter: the figure as it is now, and a status line
    assert type(static.figure).__name__ == "Figure" and not static.running
    assert f"{run.id}: succeeded, step 150/150" in capsys.readouterr().out


@pytest.mark.slow
def test_sweep_runs_its_trials_as_runs_and_reports_the_best(ws):
    # (sampler="grid" is left out: the driver's tell() after the grid is exhausted raises optuna's
    # "Study.stop is supposed to be invoked inside an objective function", as from the CLI.)
    sweep = ws.sweep("iris", "mlp_classifier", space={"learning_rate": "0.001:0.03:log"}, steps=30,
                     metric="accuracy", direction="maximize", trials=2, sampler="random", seed=0,
                     params={"hidden_units": "8"}, name="api-sweep")
    assert sweep.wait(timeout=300) is sweep
    trials = sweep.trials()
    assert len(trials) == 2 and all(0.001 <= v <= 0.03 for v in trials["param learning_rate"])
    assert set(trials["state"]) == {"complete"} and set(trials["run status"]) == {"succeeded"}
    best = sweep.best_run
    assert best is not None and best.id in set(trials["run"])
    assert best.summary["eval/accuracy"]["last"] == trials["value"].max()
    assert set(ws.runs()["run_id"]) == set(trials["run"])  # each trial is an ordinary run
    assert sweep.parallel_coordinates() is not None


@pytest.mark.slow
def test_compare_draws_the_compare_pages_figures_live_and_static(ws):
    from estimator_workbench.ui import compare, figures

    runs = [ws.submit(dataset="iris", template="mlp_classifier", steps=STEPS, config=CONFIG, batch_size=16,
                      params={"learning_rate": lr}, action="train_and_evaluate", schedule={"eval_every_steps": 20},
                      name=f"lr {lr}") for lr in (0.003, 0.1)]
    view = ws.compare(runs, interval=0.2, widget=True)  # live while they train, as in a Jupyter kernel
    assert {type(f).__name__ for f in view.figures.values()} == {"FigureWidget"}
    view.join(timeout=240)  # ends by itself once both runs have finished
    assert not view.running and view.updates >= 1
    for run in runs:
        assert run.wait(timeout=60, progress=False).status == "succeeded", run.record.error

    # The page's choices: the first eval metric (accuracy) maximized, the differing param on x.
    assert (view.metric, view.direction, view.param) == ("final eval accuracy", "maximize", "param: learning_rate")
    accuracies = {run.id: run.summary["eval/accuracy"]["last"] for run in runs}
    table = view.table.set_index("run")
    assert table["final eval accuracy"].to_dict() == accuracies
    best = max(accuracies, key=lambda i: (accuracies[i], -list(accuracies).index(i)))  # ties: the first
    assert view.best == best and table.loc[best, "best"]

    # Each figure is the one the page draws from the same inputs (its functions, not a copy).
    records = [run.record for run in runs]
    labels = figures.unique_run_labels([(r.run_id, r.name) for r in records], max_length=32)
    data, losses = compare.overlay_frame(records, ws.root)
    page_table, differing = compare.comparison_frame(records, labels, losses, compare.DEFAULT_SMOOTHING)
    expected = {
        "curves": figures.curves_figure(data, run_labels=labels, smoothing=0.0, x_axis="step", log_y=False),
        "parallel": figures.parallel_coordinates_figure(page_table, ["param: learning_rate"], "final eval accuracy",
                                                        direction="maximize", label_column="name"),
        "scatter": figures.param_scatter_figure(page_table, "param: learning_rate", "final eval accuracy",
                                                label_column="name", best=labels[best]),
    }
    assert differing == ["param: learning_rate"]
    for key, figure in expected.items():
        assert json.loads(view.figures[key].to_json()) == json.loads(figure.to_json()), key
    loss_traces = [t for t in view.figures["curves"].data if t.name == "lr 0.1 · train"]
    losses_b = runs[1].metrics().query("tag == 'train/loss'")
    assert [float(x) for x in loss_traces[0].x] == [float(x) for x in losses_b["step"]]

    static = ws.compare([r.id for r in runs], metric="train loss (smoothed)")  # outside Jupyter
    assert {type(f).__name__ for f in static.figures.values()} == {"Figure"} and not static.running
    assert (static.direction, static.best) == (
        "minimize", min(static.table["run"], key=lambda i: static.table.set_index("run").loc[i, "train loss (smoothed)"]))

    # the name of before the values were labelled: the final value
    assert ws.compare([r.id for r in runs], metric="eval accuracy").metric == "final eval accuracy"

    with pytest.raises(ValueError, match=r"compare\(\): no run 'r-nope' in .*\(ws.runs\(\) lists the run ids\)"):
        ws.compare([runs[0].id, "r-nope"])
    with pytest.raises(ValueError, match=r"compare\(\): metric 'eval auc' is not one of these runs' metrics: "
                                         r"\['final eval accuracy', "):
        ws.compare(runs, metric="eval auc")
