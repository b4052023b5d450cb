"""Tests of estimator_workbench.execution.runner: the run lifecycle in-process (fake actions), and real engine runs
through the launcher (train, SIGKILL mid-training then resume, train_and_evaluate, predict)."""

from __future__ import annotations

import functools
import inspect
import json
import os
import signal
from pathlib import Path

import polling
import pytest

from estimator_workbench.execution import (
    engine_hooks,
    engine_run,
    lineage,
    run_context,
    run_process,
    runner,
)
from estimator_workbench.store.registry import RunRegistry
from estimator_workbench.store.run_spec import (
    EarlyStoppingSettings,
    RunSpec,
    RunSpecError,
    check_schedule,
)


def new_run(workspace, action="train", schedule=None, run_config=None, **kwargs):
    return RunRegistry(workspace).create_run(
        name="t", action=action, dataset={"name": "none"}, template={"name": "t", "code": ""},
        params={}, run_config=run_config or {}, schedule=schedule or {}, **kwargs)


def run_in_process(workspace, execute, **kwargs):
    rec = new_run(workspace, **kwargs)
    code = runner.run(RunRegistry(workspace).run_dir(rec.run_id), execute=execute,
                      install_signal_handlers=False)
    return code, RunRegistry(workspace).get(rec.run_id)


def test_a_run_its_launcher_marks_running_first_still_runs(workspace, monkeypatch):
    """A Ray job's status poll can mark the run running between the runner's read of 'queued' and
    its own change: the runner takes the run as started for it (CI saw 'from running to running')."""
    rec = new_run(workspace)
    real_set_status = RunRegistry.set_status
    raced = []

    def launcher_first(self, run_id, status, **kwargs):
        if status == "running" and kwargs.get("expected") == "queued" and not raced:
            raced.append(real_set_status(self, run_id, "running", expected="queued"))  # the launcher
        return real_set_status(self, run_id, status, **kwargs)

    monkeypatch.setattr(RunRegistry, "set_status", launcher_first)
    code = runner.run(RunRegistry(workspace).run_dir(rec.run_id), execute=lambda ctx: None,
                      install_signal_handlers=False)
    assert raced and code == 0
    assert RunRegistry(workspace).get(rec.run_id).status == "succeeded"


class TestLifecycle:
    def test_success_marks_running_then_succeeded_with_summary(self, workspace):
        seen = {}

        def execute(ctx):
            seen["status"] = RunRegistry(workspace).get(ctx.run_id).status
            ctx.write_eval(7, {"accuracy": 0.5, "loss": 0.25, "global_step": 7})

        code, record = run_in_process(workspace, execute)
        assert code == 0 and seen["status"] == "running"
        assert record.status == "succeeded" and record.pid == os.getpid()
        assert record.summary["eval/accuracy"] == {"last": 0.5, "last_step": 7, "best": 0.5,
                                                   "best_step": 7}

    def test_stop_file_ends_stopped(self, workspace):
        def execute(ctx):
            ctx.stop_path.write_text("x")
            assert ctx.stop_requested()

        assert run_in_process(workspace, execute)[1].status == "stopped"

    def test_terminate_ends_cancelled(self, workspace):
        def execute(ctx):
            ctx.terminate.set()

        assert run_in_process(workspace, execute)[1].status == "cancelled"

    def test_exception_ends_failed_with_user_frames(self, workspace):
        code = "def model_fn(features):\n    x = 1\n    raise ValueError('bad shape')\n"
        compiled = compile(code, "<template demo>", "exec")
        namespace = {}
        exec(compiled, namespace)

        def execute(ctx):
            namespace["model_fn"](None)

        status, record = run_in_process(workspace, execute)
        assert status == 1 and record.status == "failed"
        assert record.error == "ValueError: bad shape (<template demo>, line 3, in model_fn)"
        assert record.traceback.startswith("Traceback (user code only")
        assert "estimator_workbench/execution/runner.py" not in record.traceback

    def test_library_frames_are_not_user_code(self):
        try:
            line = inspect.currentframe().f_lineno + 1
            json.loads("{")
        except ValueError as exc:
            summary, text = runner.format_user_traceback(exc)
        assert summary.startswith("json.decoder.JSONDecodeError: Expecting property name")
        assert summary.endswith(f"(test_runner.py, line {line}, in test_library_frames_are_not_user_code)")
        assert "json/decoder.py" not in text  # stdlib frames are cut
        assert not run_process._is_user_frame(runner.__file__)

    def test_not_queued_run_is_not_started(self, workspace):
        rec = new_run(workspace)
        RunRegistry(workspace).set_status(rec.run_id, "cancelled")
        ran = []
        code = runner.run(RunRegistry(workspace).run_dir(rec.run_id), execute=ran.append,
                          install_signal_handlers=False)
        assert code == 0 and ran == []

    def test_missing_run_json(self, tmp_path, capsys):
        assert runner.main([str(tmp_path / "nope")]) == 2
        assert "cannot read" in capsys.readouterr().err
        assert runner.main([]) == 2

    def test_the_schedule_is_read_from_the_spec(self):
        spec = RunSpec.model_validate({"schema_version": 2, "run_config": {"tf_random_seed": 1},
                                       "schedule": {"steps": 50, "eval_steps": 2, "batch_size": 8}})
        ctx = run_context.RunContext(run_dir=Path("/ws/runs/r"), spec=spec)
        assert ctx.schedule.train_until == 50 and ctx.schedule.max_steps is None  # steps: the same target
        assert ctx.schedule.batch_size == 8 and spec.run_config.to_engine() == {"tf_random_seed": 1}
        assert RunSpec(schedule={"max_steps": 5, "steps": 50}).schedule.train_until == 5


# -- real engine runs --------------------------------------------------------------------------


def iris_run(workspace, action="train", schedule=None, run_config=None, **kwargs):
    from estimator_workbench import templates
    from estimator_workbench.cli import commands as cli

    dataset = cli._dataset_dict("iris", None)
    info = templates.get_template("mlp_classifier")
    return RunRegistry(workspace).create_run(
        name="iris", action=action, dataset=dataset,
        template={"name": info.name, "code": info.code}, params={"hidden_units": "16"},
        run_config=run_config or {"tf_random_seed": 0}, schedule=schedule or {}, **kwargs)


def rows(workspace, run_id):
    from estimator_workbench.store.metrics_store import read_all

    return read_all(Path(workspace) / "runs" / run_id / "metrics.jsonl")


@pytest.fixture
def launcher(workspace):
    from estimator_workbench.execution.launcher import LocalLauncher

    made = LocalLauncher(workspace, gpus=[])
    yield made
    made.shutdown(grace=2.0)


wait_for = functools.partial(polling.wait_for, timeout=120.0)


@pytest.mark.slow
class TestEngineRuns:
    def test_sigkill_mid_training_then_resume_to_completion(self, workspace, launcher):
        from estimator_engine import checkpoints

        rec = iris_run(workspace, schedule={"max_steps": 1500, "metrics_every_n_steps": 10},
                       run_config={"tf_random_seed": 0, "save_checkpoints_steps": 25})
        model_dir = Path(workspace) / "runs" / rec.run_id / "model"
        launcher.submit(rec.run_id)
        wait_for(lambda: checkpoints.read_global_step(model_dir) >= 50 if model_dir.is_dir() else False)
        os.killpg(launcher.registry.get(rec.run_id).pid, signal.SIGKILL)

        def polled_lost():
            launcher.poll()
            record = launcher.registry.get(rec.run_id)
            return record if record.status == "lost" else None

        lost = wait_for(polled_lost, timeout=30)
        assert "code -9" in lost.error
        killed_step = checkpoints.read_global_step(model_dir)
        assert 50 <= killed_step < 1500, killed_step
        before = rows(workspace, rec.run_id)
        launcher.resume(rec.run_id)
        done = launcher.wait(rec.run_id, timeout=300)
        assert done.status == "succeeded", (done.error, done.traceback)
        assert checkpoints.read_global_step(model_dir) == 1500
        frame = rows(workspace, rec.run_id)
        # Rows the killed process logged past its last checkpoint were dropped: one history.
        kept = before[before["step"] <= killed_step]
        assert frame.iloc[:len(kept)].equals(kept.reset_index(drop=True))
        train_loss = frame[(frame["split"] == "train") & (frame["name"] == "loss")]
        assert train_loss["step"].is_unique and train_loss["step"].is_monotonic_increasing
        # The resumed process starts from the checkpoint, not from step 0.
        resumed = train_loss[train_loss["step"] > killed_step]
        assert resumed["step"].iloc[0] == killed_step + 1
        assert resumed["step"].iloc[-1] == 1500
        assert done.summary["train/loss"]["last_step"] == 1500

    def test_train_and_evaluate_then_predict_and_evaluate_from(self, workspace, launcher, tmp_path,
                                                               capsys, monkeypatch):
        from estimator_workbench.cli import commands as cli

        rec = iris_run(workspace, action="train_and_evaluate",
                       schedule={"max_steps": 60, "eval_every_steps": 30})
        launcher.submit(rec.run_id)
        done = launcher.wait(rec.run_id, timeout=300)
        assert done.status == "succeeded", (done.error, done.traceback)
        frame = rows(workspace, rec.run_id)
        evals = frame[(frame["split"] == "eval") & (frame["name"] == "accuracy")]
        assert evals["step"].tolist() == [30, 60]
        assert 0.0 <= done.summary["eval/accuracy"]["best"] <= 1.0
        assert (Path(workspace) / "runs" / rec.run_id / "task_info.json").exists()

        ev = RunRegistry(workspace).create_run(
            name="eval", action="evaluate", dataset=done.dataset, template=done.template,
            params=done.params, run_config=done.run_config, parent_run_id=rec.run_id,
            parent_relation="evaluate_from")
        launcher.submit(ev.run_id)
        ev_done = launcher.wait(ev.run_id, timeout=300)
        assert ev_done.status == "succeeded", (ev_done.error, ev_done.traceback)
        assert ev_done.summary["eval/accuracy"]["last"] == pytest.approx(
            done.summary["eval/accuracy"]["last"])
        assert ev_done.summary["eval/accuracy"]["last_step"] == 60

        from estimator_workbench.data import datasets

        data = tmp_path / "new.csv"
        datasets.load_csv(datasets.bundled_path("iris")).head(7).to_csv(data, index=False)
        out = tmp_path / "preds.csv"
        monkeypatch.setattr(cli, "_launcher", lambda root: launcher)
        assert cli.main(["predict", rec.run_id, "--data", str(data), "--out", str(out)]) == 0
        import pandas as pd

        predictions = pd.read_csv(out)
        assert len(predictions) == 7
        assert {"species", "class_ids", "class"} <= set(predictions.columns)
        assert [c for c in predictions.columns if c.startswith("probability_")]


class TestLineage:
    def make_ctx(self, workspace, **kwargs):
        rec = new_run(workspace, **kwargs)
        folder = RunRegistry(workspace).run_dir(rec.run_id)
        ctx = run_context.RunContext(run_dir=folder, spec=RunSpec.read(folder / "run.json"))
        ctx.model_dir.mkdir()
        return ctx

    def test_warm_start_and_task_info_from_parent(self, workspace):
        parent = new_run(workspace)
        parent_dir = RunRegistry(workspace).run_dir(parent.run_id)
        (parent_dir / "task_info.json").write_text('{"task": "classification"}')
        ctx = self.make_ctx(workspace, parent_run_id=parent.run_id, parent_relation="warm_start")
        found = lineage.prepare_lineage(ctx)
        assert found.warm_start_from == str(parent_dir / "model")
        assert found.task_info == {"task": "classification"}

    def test_resume_as_new_run_copies_checkpoints(self, workspace):
        parent = new_run(workspace)
        parent_model = RunRegistry(workspace).run_dir(parent.run_id) / "model"
        parent_model.mkdir()
        (parent_model / "checkpoint").write_text("x")
        ctx = self.make_ctx(workspace, parent_run_id=parent.run_id, parent_relation="resume")
        lineage.prepare_lineage(ctx)
        assert (ctx.model_dir / "checkpoint").read_text() == "x"

    def test_evaluate_from_parent_without_checkpoint(self, workspace):
        parent = new_run(workspace)
        (RunRegistry(workspace).run_dir(parent.run_id) / "model").mkdir()
        ctx = self.make_ctx(workspace, action="evaluate", parent_run_id=parent.run_id,
                            parent_relation="evaluate_from")
        with pytest.raises(ValueError, match=f"The parent run '{parent.run_id}' has no checkpoint"):
            lineage.prepare_lineage(ctx)

    def test_relative_checkpoint_resolves_in_parent(self, workspace):
        parent = new_run(workspace)
        ctx = self.make_ctx(workspace, action="predict", parent_run_id=parent.run_id,
                            parent_relation="predict_from", checkpoint_path="model/model.ckpt-5")
        assert lineage.prepare_lineage(ctx).checkpoint_path == str(
            RunRegistry(workspace).run_dir(parent.run_id) / "model" / "model.ckpt-5")

    def test_checkpoint_name_as_listed_resolves_in_the_parents_model_dir(self, workspace):
        parent = new_run(workspace)
        model_dir = RunRegistry(workspace).run_dir(parent.run_id) / "model"
        model_dir.mkdir()
        (model_dir / "model.ckpt-5").write_bytes(b"")
        ctx = self.make_ctx(workspace, action="predict", parent_run_id=parent.run_id,
                            parent_relation="predict_from", checkpoint_path="model.ckpt-5")
        assert lineage.prepare_lineage(ctx).checkpoint_path == str(model_dir / "model.ckpt-5")


@pytest.mark.slow
def test_two_process_run_under_torchrun(workspace, launcher):
    from estimator_engine import checkpoints

    rec = iris_run(workspace, schedule={"max_steps": 40},
                   run_config={"tf_random_seed": 0, "save_checkpoints_steps": 20}, num_processes=2)
    launcher.submit(rec.run_id)
    done = launcher.wait(rec.run_id, timeout=300)
    log = (Path(workspace) / "runs" / rec.run_id / "worker.log").read_text()
    assert done.status == "succeeded", log[-3000:]
    assert "torch.distributed.run" in log and log.count("started, pid") == 2
    assert checkpoints.read_global_step(Path(workspace) / "runs" / rec.run_id / "model") == 40
    frame = rows(workspace, rec.run_id)
    assert frame[frame["name"] == "loss"]["step"].is_unique  # only rank 0 writes metrics


# -- pre-flight check in the runner's process ----------------------------------------------------

BAD_TEMPLATES = Path(__file__).resolve().parents[1] / "data" / "bad"


@pytest.mark.slow
class TestInProcessPreflight:
    def test_passing_check_writes_report_then_trains(self, workspace):
        import torch

        rec = iris_run(workspace, schedule={"max_steps": 20, "preflight": True}, run_config={})
        folder = RunRegistry(workspace).run_dir(rec.run_id)
        state = torch.random.get_rng_state()
        code = runner.run(folder, install_signal_handlers=False)
        record = RunRegistry(workspace).get(rec.run_id)
        assert code == 0 and record.status == "succeeded"
        report = json.loads((folder / engine_run.PREFLIGHT_FILE).read_text())
        assert report["ok"] and report["stage"] == "done"
        assert set(report["modes"]) == {"train", "eval", "predict"}
        assert rows(workspace, rec.run_id)["step"].max() == 20
        # the check's seed (0) did not leak into the run: training drew from the caller's state
        assert not torch.equal(torch.random.get_rng_state(), state)

    def test_failing_check_fails_the_run_before_training(self, workspace):
        rec = iris_run(workspace, schedule={"max_steps": 20, "preflight": True})
        spec_file = RunRegistry(workspace).run_dir(rec.run_id) / "run.json"
        spec = json.loads(spec_file.read_text())
        spec["template"] = {"name": "mine", "code": (BAD_TEMPLATES / "raises.py.txt").read_text()}
        spec["params"] = {}
        spec_file.write_text(json.dumps(spec))
        folder = spec_file.parent
        code = runner.run(folder, install_signal_handlers=False)
        record = RunRegistry(workspace).get(rec.run_id)
        assert code == 1 and record.status == "failed"
        assert record.error.startswith("Pre-flight check failed in train: RuntimeError")
        assert "line 14: logits = net(wrong)" in record.error
        assert "mat1 and mat2 shapes cannot be multiplied" in record.traceback
        assert not (folder / "metrics.jsonl").exists()  # training never started
        assert not json.loads((folder / engine_run.PREFLIGHT_FILE).read_text())["ok"]

    def test_spare_runner_takes_a_run_from_stdin(self, workspace, tmp_path, capfd):
        import io

        rec = new_run(workspace)
        # End of input: an idle spare exits without running anything.
        assert runner._spare(io.StringIO("")) == 0
        assert RunRegistry(workspace).get(rec.run_id).status == "queued"
        assert "spare pid" in capfd.readouterr().out


class TestEarlyStoppingAndNanPolicy:
    @pytest.mark.slow
    def test_train_and_evaluate_stops_early_on_a_plateau(self, workspace, capfd):
        from estimator_engine import checkpoints

        # min_delta 100: no evaluation after the first counts as better, so patience 2 stops
        # training after the third evaluation, far before max_steps.
        rec = iris_run(workspace, action="train_and_evaluate", schedule={
            "max_steps": 5000, "eval_every_steps": 20, "metrics_every_n_steps": 10,
            "early_stopping": {"metric": "loss", "mode": "min", "patience": 2, "min_delta": 100.0}})
        folder = RunRegistry(workspace).run_dir(rec.run_id)
        code = runner.run(folder, install_signal_handlers=False)
        record = RunRegistry(workspace).get(rec.run_id)
        assert code == 0 and record.status == "succeeded", record.error
        assert checkpoints.read_global_step(folder / "model") == 60
        frame = rows(workspace, rec.run_id)
        eval_loss = frame[(frame["split"] == "eval") & (frame["name"] == "loss")]
        assert eval_loss["step"].tolist() == [20, 40, 60]
        first = float(eval_loss["value"].iloc[0])
        assert first > 0
        assert ("early stopping at step 60: eval loss has not improved by more than 100 for 2 "
                "evaluations (40 steps)") in capfd.readouterr().out

    def test_early_stopping_on_an_unknown_metric_fails_the_run(self, workspace):
        rec = iris_run(workspace, action="train_and_evaluate", schedule={
            "max_steps": 40, "eval_every_steps": 20, "early_stopping": {"metric": "auc", "patience": 1}})
        code = runner.run(RunRegistry(workspace).run_dir(rec.run_id), install_signal_handlers=False)
        record = RunRegistry(workspace).get(rec.run_id)
        assert code == 1 and record.status == "failed"
        # The engine's hook (a KeyError, as TF's) names the metrics that exist, at the first evaluation.
        assert record.error.startswith("KeyError: \"Metric 'auc' is not in the eval results of step 20"), \
            record.error
        assert "recorded metrics: ['accuracy', 'loss']. Pass one of them as metric_name." in record.error

    def test_early_stopping_settings_map_onto_the_engines_hooks(self, tmp_path):
        import estimator_engine as ee
        from estimator_engine.early_stopping import _StopOnPredicateHook

        est = ee.Estimator(lambda features, labels, mode: None, model_dir=str(tmp_path))
        assert engine_hooks.early_stopping_hook(est, None, 10) is None
        assert engine_hooks.early_stopping_hook(est, EarlyStoppingSettings(patience=0), 10) is None
        assert isinstance(engine_hooks.early_stopping_hook(est, EarlyStoppingSettings(patience=2, metric="accuracy"), 10),
                          _StopOnPredicateHook)
        # Bad modes and deltas never reach the runner: the contract refuses them at submit.
        with pytest.raises(RunSpecError, match=r"schedule.early_stopping.mode = 'up' is not allowed"):
            check_schedule({"early_stopping": {"patience": 1, "mode": "up"}})
        with pytest.raises(RunSpecError, match=r"schedule.early_stopping.min_delta = -1.0 is out of range"):
            check_schedule({"early_stopping": {"patience": 1, "min_delta": -1.0}})

    @pytest.mark.slow
    def test_the_workbench_and_the_engine_stop_at_the_same_step_with_the_same_checkpoints(
            self, workspace, tmp_path):
        """Issue 13: the runner has no early-stopping logic of its own; the same run through
        ``ee.train_and_evaluate`` stops at the same step and leaves the same checkpoints."""
        import estimator_engine as ee
        from estimator_engine import checkpoints
        from estimator_workbench.execution.build import build_estimator

        schedule = {"max_steps": 5000, "eval_every_steps": 20,
                    "early_stopping": {"metric": "loss", "mode": "min", "patience": 2, "min_delta": 100.0}}
        rec = iris_run(workspace, action="train_and_evaluate", schedule=schedule)
        folder = RunRegistry(workspace).run_dir(rec.run_id)
        assert runner.run(folder, install_signal_handlers=False) == 0
        assert RunRegistry(workspace).get(rec.run_id).status == "succeeded"

        model_dir = tmp_path / "engine"
        est, input_fns = build_estimator(RunSpec.read(folder / "run.json"), str(model_dir))
        hook = ee.early_stopping.stop_if_no_decrease_hook(est, "loss", 40, run_every_secs=None,
                                                          run_every_steps=1, min_delta=100.0)
        metrics, _ = ee.train_and_evaluate(
            est, ee.TrainSpec(input_fns.train, max_steps=5000, hooks=[hook]),
            ee.EvalSpec(input_fns.eval, steps=None, every_n_steps=20))

        assert checkpoints.read_global_step(folder / "model") == metrics["global_step"] == 60
        assert sorted(p.name for p in (folder / "model").glob("model.ckpt-*")) \
            == sorted(p.name for p in model_dir.glob("model.ckpt-*"))
        workbench_evals = ee.read_eval_metrics(folder / "model" / "eval")
        engine_evals = ee.read_eval_metrics(model_dir / "eval")
        assert list(workbench_evals) == list(engine_evals) == [20, 40, 60]
        for step in engine_evals:
            assert workbench_evals[step]["loss"] == pytest.approx(engine_evals[step]["loss"], rel=1e-6)


@pytest.mark.slow
def test_predict_run_on_unlabelled_data_skips_the_preflight_check(workspace, tmp_path):
    """The check trains a step, which needs labels: predict/evaluate runs reuse a trained model."""
    import pandas as pd

    from estimator_workbench.cli import commands as cli
    from estimator_workbench.data import datasets

    trained = iris_run(workspace, schedule={"max_steps": 5})
    assert runner.run(RunRegistry(workspace).run_dir(trained.run_id), install_signal_handlers=False) == 0
    rows_path = tmp_path / "new_flowers.csv"
    pd.read_csv(datasets.bundled_path("iris")).drop(columns=["species"]).head(7).to_csv(rows_path, index=False)
    rec = iris_run(workspace, action="predict", schedule={"preflight": True},
                   parent_run_id=trained.run_id, parent_relation="predict_from")
    spec_file = RunRegistry(workspace).run_dir(rec.run_id) / "run.json"
    spec = json.loads(spec_file.read_text())
    spec["dataset"] = cli._dataset_dict(str(rows_path), None)
    spec_file.write_text(json.dumps(spec))
    code = runner.run(spec_file.parent, install_signal_handlers=False)
    record = RunRegistry(workspace).get(rec.run_id)
    assert code == 0 and record.status == "succeeded", record.error
    assert not (spec_file.parent / engine_run.PREFLIGHT_FILE).exists()
    assert len(pd.read_csv(spec_file.parent / "predictions.csv")) == 7


def test_no_evaluation_rows_is_said_plainly():
    from estimator_workbench.data import datasets

    df = datasets.load_csv(datasets.bundled_path("iris")).head(4)
    spec = datasets.DatasetSpec({"kind": "bundled", "name": "iris"}, datasets.infer_schema(df), eval_fraction=0.0)
    fns = datasets.make_input_fns(spec, df, batch_size=2)
    with pytest.raises(ValueError, match=r"^No evaluation rows: the split put 4 rows in train and 0 in eval\. "
                                         r"Raise the dataset's eval fraction \(or add rows\), or choose the action 'train'\.$"):
        engine_run._input_fn(fns, "eval")
    with pytest.raises(ValueError, match=r"^The template's build_estimator gave no 'train' input_fn\.$"):
        engine_run._input_fn({"eval": fns.eval}, "train")


@pytest.mark.slow
def test_a_run_that_ends_starts_the_one_queued_behind_it(workspace, launcher):
    """`run --detach` twice from a script: the CLI is gone when the first run ends, so the first
    runner starts the second (CPU slot handed over); the submitting launcher never polls again."""
    from estimator_workbench.execution.processes import pid_alive

    first = iris_run(workspace, schedule={"max_steps": 3})
    second = iris_run(workspace, schedule={"max_steps": 3})
    launcher.submit(first.run_id)
    launcher.submit(second.run_id)
    registry = RunRegistry(workspace)
    assert registry.get(second.run_id).status == "queued"
    try:
        done = wait_for(lambda: (r := registry.get(second.run_id)).is_finished and r)
        assert done.status == "succeeded", done.error
        assert registry.get(first.run_id).status == "succeeded"
        log = (registry.run_dir(second.run_id) / "worker.log").read_text()
        assert "started, pid" in log
        wait_for(lambda: not pid_alive(done.pid), timeout=30)
    finally:
        pid = registry.get(second.run_id).pid
        if pid and pid_alive(pid):
            os.killpg(pid, signal.SIGKILL)


def test_a_resume_drops_the_rows_its_dead_attempt_logged_past_the_checkpoint(workspace, tmp_path):
    """Killed at step 340 with model.ckpt-200 saved: training resumes at 200, so rows after 200 are
    another history; they go (the file is replaced, tailing readers start over), the rest stays."""
    from estimator_engine import checkpoints
    from estimator_workbench.store.metrics_store import MetricsTail

    model_dir = tmp_path / "model"
    checkpoints.create_checkpoint(str(model_dir), {"w": [1.0]}, 200)
    metrics = tmp_path / "metrics.jsonl"
    rows = [{"step": s, "wall_time": float(s), "split": "train", "name": "loss", "value": 1.0 / s}
            for s in range(100, 341, 60)] + [{"step": 200, "wall_time": 201.0, "split": "eval", "name": "loss", "value": 0.3}]
    metrics.write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"step": 3')  # a partial last line
    tail = MetricsTail(metrics)
    assert len(tail.read()) == 6 and tail.generation == 0
    assert lineage.drop_orphaned_metrics(metrics, model_dir) == 3  # steps 220, 280 and 340
    assert [(r["split"], r["step"]) for r in tail.read()] == [("train", 100), ("train", 160), ("eval", 200)]
    assert tail.generation == 1
    assert metrics.read_text().endswith('{"step": 3')
    assert lineage.drop_orphaned_metrics(metrics, model_dir) == 0
    assert lineage.drop_orphaned_metrics(metrics, tmp_path / "no_model") == 3  # no checkpoint: resumes at 0


def test_a_running_runs_summary_follows_its_metrics(workspace, monkeypatch):
    """The runs tables show a running run's step and loss: the heartbeat merges new lines."""
    monkeypatch.setattr(runner, "_HEARTBEAT_EVERY_S", 0.02)

    def execute(ctx):
        def summarised_step():
            return RunRegistry(workspace).get(ctx.run_id).summary.get("train/loss", {}).get("last_step")

        for step, loss in ((10, 0.9), (20, 0.4)):
            with open(ctx.metrics_path, "a") as f:
                f.write(json.dumps({"step": step, "wall_time": 1.0, "split": "train", "name": "loss",
                                    "value": loss}) + "\n")
            wait_for(lambda step=step: summarised_step() == step, timeout=10)  # while the run runs

    code, record = run_in_process(workspace, execute)
    assert code == 0 and record.status == "succeeded"
    assert record.summary["train/loss"] == {"last": 0.4, "last_step": 20, "best": 0.4, "best_step": 20}


def test_a_warm_spare_has_imported_what_a_run_needs(tmp_path):
    """A run handed to a warm spare imports nothing heavy: pandas alone took 1-2 s of a busy
    2-core machine between the Train click and the first chart point when the spare left it to
    the run. Checked in a fresh interpreter: ``preload``, then a real 2-step iris run with its
    pre-flight check. The imports' objects are frozen out of the garbage collector (a full
    collection over them cost a run's start 0.2-0.3 s)."""
    import ast
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(f"""
        import os, sys
        from estimator_workbench.execution import runner
        runner.preload()
        import gc
        assert gc.get_freeze_count() > 100_000, gc.get_freeze_count()  # the imports' objects, frozen
        from estimator_workbench import templates
        from estimator_workbench.cli import commands as cli
        from estimator_workbench.store.registry import RunRegistry
        reg = RunRegistry({str(tmp_path)!r})
        template, schema = cli._template_dict("mlp_classifier", reg.root)
        rec = reg.create_run(name="spare", action="train", dataset=cli._dataset_dict("iris", None),
                             template=template, params=templates.validate_params(schema, {{}}),
                             run_config={{}}, schedule={{"max_steps": 2, "preflight": True}})
        before = set(sys.modules)
        os.chdir(reg.run_dir(rec.run_id))
        assert runner.run(reg.run_dir(rec.run_id), install_signal_handlers=False) == 0
        print(sorted({{m.split(".")[0] for m in set(sys.modules) - before}}))
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                         cwd=str(tmp_path), check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    imported = set(ast.literal_eval(out.stdout.strip().splitlines()[-1]))
    # the run's own code (workbench, the template module), torch submodules and stdlib leftovers only
    assert not imported & {"pandas", "numpy", "tensorboardX", "google", "estimator_engine", "pydantic",
                            "sqlite3", "psutil"}, imported
