"""Tests of estimator_workbench.sweeps: param specs, the checks before anything exists, and the sweep driver
end to end through ``estimator-workbench sweep`` (real runs of the bundled iris data)."""

from __future__ import annotations

import json
import re
import threading
import time

import optuna
import pytest

from estimator_workbench import templates
from estimator_workbench.cli import commands as cli
from estimator_workbench.store.registry import RunRegistry
from estimator_workbench.sweeps import store
from estimator_workbench.sweeps.driver import SweepDriver
from estimator_workbench.sweeps.plan import eval_metric_keys, plan_sweep
from estimator_workbench.sweeps.spec import (
    ParamSpec,
    SweepSpec,
    SweepSpecError,
    grid_space,
    make_sampler,
    parse_param,
    resolve_params,
)

MLP_SCHEMA = templates.get_template("mlp_classifier").params


def mlp_template() -> dict:
    info = templates.get_template("mlp_classifier")
    return {"name": info.name, "code": info.code}


class TestParseParam:
    def test_log_range(self):
        assert parse_param("learning_rate=0.0001:0.1:log") == ParamSpec(
            "learning_rate", "float", low=0.0001, high=0.1, log=True)

    def test_int_range_and_choices(self):
        assert parse_param("units=8:256:int:log") == ParamSpec("units", "int", low=8, high=256, log=True)
        assert parse_param("hidden_units=32,64,32").choices == ("32", "64", "32")

    def test_round_trip(self):
        for text in ("learning_rate=0.0001:0.1:log", "units=8:256:int", "act=relu,tanh"):
            assert parse_param(parse_param(text).to_text()) == parse_param(text)

    @pytest.mark.parametrize("text, message", [
        ("learning_rate", r"must look like NAME=LOW:HIGH"),
        ("learning_rate=0.1:0.001", r"LOW must be below HIGH, given 0.1 >= 0.001"),
        ("learning_rate=0.1:0.1", r"LOW must be below HIGH"),
        ("learning_rate=0:0.1:log", r"a log range needs LOW > 0, given 0"),
        ("learning_rate=-1:0.1:log", r"a log range needs LOW > 0, given -1"),
        ("learning_rate=a:b", r"LOW and HIGH must be numbers"),
        ("learning_rate=0.001:0.1:exp", r"unknown flag 'exp'"),
        ("units=1.5:4:int", r"an :int range needs whole numbers"),
        ("learning_rate=0.1:1,2", r"mixes a range"),
        ("learning-rate=1,2", r"is not a param name"),
        ("learning_rate=", r"gives no values"),
    ])
    def test_bad_specs_say_what_to_write(self, text, message):
        with pytest.raises(SweepSpecError, match=message):
            parse_param(text)


class TestResolve:
    def test_unknown_param_lists_the_templates_params(self):
        with pytest.raises(SweepSpecError, match=r"the template has no param 'lr'; its params are \[.*'learning_rate'"):
            resolve_params([parse_param("lr=0.001:0.1")], MLP_SCHEMA)

    def test_types_follow_the_schema(self):
        specs = resolve_params([parse_param("embedding_dim=2:16"), parse_param("dropout=0,0.25"),
                                parse_param("hidden_units=32,64")], MLP_SCHEMA)
        assert specs[0] == ParamSpec("embedding_dim", "int", low=2, high=16)
        assert specs[1].choices == (0.0, 0.25)
        assert specs[2].choices == ("32", "64")

    def test_bounds_outside_the_schema_and_every_problem_at_once(self):
        with pytest.raises(SweepSpecError) as info:
            resolve_params([parse_param("learning_rate=0.001:2"), parse_param("nope=1,2"),
                            parse_param("hidden_units=0:3")], MLP_SCHEMA)
        text = str(info.value)
        assert "learning_rate" in text and "1.0" in text  # the schema's max
        assert "no param 'nope'" in text
        assert "hidden_units is a str" in text

    def test_a_param_given_twice(self):
        with pytest.raises(SweepSpecError, match="given twice"):
            resolve_params([parse_param("dropout=0,0.1"), parse_param("dropout=0:0.5")], MLP_SCHEMA)


def _spec(**kw) -> SweepSpec:
    base = dict(name="s1", dataset={}, template={"name": "t", "code": ""}, base_params={},
                space=(parse_param("learning_rate=0.001:0.1:log"),), steps=100, trials=5, parallel=1,
                metric="accuracy")
    return SweepSpec(**{**base, **kw})


class TestSweepSpec:
    def test_defaults(self):
        spec = _spec()
        assert (spec.direction, spec.eval_every, spec.sampler, spec.pruner) == ("maximize", 20, "tpe", "median")
        assert _spec(metric="loss").direction == "minimize"
        assert SweepSpec.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec

    def test_grid_refuses_a_continuous_range(self):
        with pytest.raises(SweepSpecError, match=r"learning_rate=0.001:0.1:log is a continuous range.*"
                                                 r"list the values to try, e\.g\. learning_rate=0\.001,0\.01,0\.1"):
            _spec(sampler="grid")

    def test_a_grid_is_walked_to_its_last_point_by_ask_and_tell(self):
        import optuna

        spec = _spec(sampler="grid", trials=6, space=(ParamSpec("units", "int", low=1, high=3),
                                                      ParamSpec("act", "categorical", choices=("a", "b"))))
        study = optuna.create_study(sampler=make_sampler(spec))
        seen = set()
        for _ in range(spec.planned_trials):  # the driver's loop; the last tell used to raise
            trial = study.ask({p.name: p.distribution() for p in spec.space})
            seen.add((trial.params["units"], trial.params["act"]))
            study.tell(trial, 1.0)
        assert seen == {(u, a) for u in (1, 2, 3) for a in ("a", "b")}

    def test_grid_size_caps_the_trials(self):
        spec = _spec(sampler="grid", trials=50, space=(ParamSpec("units", "int", low=1, high=3),
                                                       parse_param("act=a,b")))
        assert grid_space(spec.space) == {"units": [1, 2, 3], "act": ["a", "b"]}
        assert spec.planned_trials == 6

    def test_every_bad_setting_at_once(self):
        with pytest.raises(SweepSpecError) as info:
            _spec(name="../x", trials=0, parallel=0, sampler="cma", direction="up", space=())
        text = str(info.value)
        for part in ("Sweep name '../x'", "--trials must be an int >= 1", "--parallel must be",
                     "--sampler must be one of", "--direction must be one of", "at least one --param"):
            assert part in text


class _Report:
    def __init__(self, ok=True, keys=("accuracy",)):
        self.ok, self.modes = ok, {"eval": {"metric_keys": list(keys)}}

    def summary(self):
        return "Pre-flight check failed in eval: KeyError"


def _plan(root, report=None, **kw):
    calls = []

    def preflight(code, dataset, params, **options):
        calls.append(params)
        return report or _Report()

    args = dict(name="s1", dataset=cli._dataset_dict("iris", None), template=mlp_template(),
                params=["learning_rate=0.001:0.1:log"], steps=50, trials=4, parallel=2, metric="accuracy")
    args.update(kw)
    return plan_sweep(root, preflight=preflight, **args), calls


class TestPlan:
    def test_checks_one_trial_with_the_lowest_values(self, workspace):
        spec, calls = _plan(workspace)
        assert calls[0]["learning_rate"] == 0.001 and calls[0]["hidden_units"] == "64,32"
        assert spec.base_params["dropout"] == 0.1
        assert not (workspace / "sweeps").exists() and not (workspace / "runs").exists()

    def test_metric_the_template_does_not_produce(self, workspace):
        with pytest.raises(SweepSpecError, match=r"--metric 'auc': the template 'mlp_classifier' does not "
                                                 r"produce it on this dataset; its evaluation gives \['accuracy', 'loss'\]"):
            _plan(workspace, metric="auc")
        assert eval_metric_keys(_Report(keys=["auc"])) == ["auc", "loss"]

    def test_template_that_fails_the_preflight(self, workspace):
        with pytest.raises(SweepSpecError, match="The template does not run on this dataset"):
            _plan(workspace, report=_Report(ok=False))

    def test_trial_run_contract(self, workspace):
        with pytest.raises(SweepSpecError, match="A trial's run would be refused"):
            _plan(workspace, schedule={"batch_size": -3})


def run_cli(*argv):
    return cli.main(list(argv))


SWEEP = ("sweep", "--dataset", "iris", "--template", "mlp_classifier")


class TestCLIRefusals:
    @pytest.mark.parametrize("extra, message", [
        (("--param", "lr=0.001:0.1"), r"the template has no param 'lr'"),
        (("--param", "learning_rate=0.1:0.001"), r"LOW must be below HIGH"),
        (("--param", "learning_rate=0:0.1:log"), r"a log range needs LOW > 0"),
        (("--param", "learning_rate=0.001:0.1", "--sampler", "grid"), r"is a continuous range"),
        ((), r"sweep needs --param"),
    ])
    def test_bad_specs_exit_2_before_anything_exists(self, workspace, capsys, extra, message):
        code = run_cli(*SWEEP, "--steps", "20", "--metric", "accuracy", *extra)
        err = capsys.readouterr().err
        assert code == 2
        assert re.search(message, err), err
        assert "Traceback" not in err
        assert not (workspace / "sweeps").exists()
        assert RunRegistry(workspace).list_runs() == []

    def test_metric_not_produced_is_refused_after_the_preflight(self, workspace, capsys):
        code = run_cli(*SWEEP, "--steps", "20", "--metric", "auc", "--param", "learning_rate=0.001:0.1:log")
        err = capsys.readouterr().err
        assert code == 2
        assert "--metric 'auc': the template 'mlp_classifier' does not produce it" in err
        assert "['accuracy', 'loss']" in err
        assert store.list_sweeps(workspace) == [] and RunRegistry(workspace).list_runs() == []

    def test_unknown_sweep_to_resume(self, workspace, capsys):
        assert run_cli("sweep", "--resume", "nope") == 2
        assert "No sweep named 'nope'" in capsys.readouterr().err


def _trials_and_runs(root, name):
    study = store.load_study(root, name, with_sampler=False)
    runs = {r.run_id: r for r in RunRegistry(root).list_runs(tag=store.sweep_tag(name))}
    return study, runs


@pytest.mark.slow
def test_cli_sweep_every_trial_is_a_run_and_the_best_is_printed(workspace, capsys):
    code = run_cli(*SWEEP, "--steps", "40", "--eval-every", "20", "--param", "learning_rate=0.001:0.1:log",
                   "--param", "hidden_units=8,16", "--trials", "4", "--parallel", "2", "--metric", "accuracy",
                   "--direction", "maximize", "--pruner", "none", "--seed", "3", "--name", "lr")
    out = capsys.readouterr().out
    assert code == 0, out
    study, runs = _trials_and_runs(workspace, "lr")
    assert len(study.trials) == 4 and len(runs) == 4
    for trial in study.trials:
        run = runs[trial.user_attrs["run_id"]]
        assert run.name == f"lr #{trial.number}"
        assert run.action == "train_and_evaluate" and run.status == "succeeded"
        assert run.params["learning_rate"] == pytest.approx(trial.params["learning_rate"])
        assert run.run_config["tf_random_seed"] == 3
        assert trial.value == pytest.approx(run.summary["eval/accuracy"]["last"])
    best_run = max(runs.values(), key=lambda r: r.summary["eval/accuracy"]["last"])
    best_value = best_run.summary["eval/accuracy"]["last"]
    line = [x for x in out.splitlines() if x.startswith("Best trial #")][-1]
    assert f"accuracy={best_value:.6g}" in line
    assert study.best_value == pytest.approx(best_value)
    assert study.best_trial.user_attrs["run_id"] in line
    assert "Trial #3 started" in out and "finished: 4 complete" in out
    listed = json.loads(_runs_json(capsys, workspace))
    assert {r["run_id"] for r in listed} == set(runs)


def _runs_json(capsys, root):
    assert run_cli("runs", "--json") == 0
    return capsys.readouterr().out


@pytest.mark.slow
def test_stop_and_continue_the_same_study(workspace, capsys):
    assert run_cli(*SWEEP, "--steps", "3000", "--eval-every", "1000", "--param", "learning_rate=0.001:0.1:log",
                   "--trials", "2", "--parallel", "1", "--metric", "loss", "--pruner", "none", "--seed", "1",
                   "--name", "st", "--detach") == 0
    assert capsys.readouterr().out.strip() == "st"
    registry = RunRegistry(workspace)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # the first trial's run is training
        runs = registry.list_runs("running", tag=store.sweep_tag("st"))
        if runs and (registry.run_dir(runs[0].run_id) / "metrics.jsonl").exists():
            break
        time.sleep(0.2)
    assert store.driver_state(workspace, "st")["state"] == "running"
    assert run_cli("sweep", "--stop", "st") == 0
    for proc in list(store._STARTED):
        proc.wait(timeout=120)
    state = store.driver_state(workspace, "st")
    assert state["state"] == "stopped", state
    study, runs = _trials_and_runs(workspace, "st")
    assert [t.state.name for t in study.trials] == ["RUNNING"]
    stopped = runs[study.trials[0].user_attrs["run_id"]]
    assert stopped.status == "stopped"
    capsys.readouterr()
    # Continue (same study): the stopped run resumes from its checkpoint, one more trial follows.
    assert run_cli("sweep", "--resume", "st") == 0
    out = capsys.readouterr().out
    assert f"Trial #0 continued: run {stopped.run_id} resumed" in out
    study, runs = _trials_and_runs(workspace, "st")
    assert [t.state.name for t in study.trials] == ["COMPLETE"] * 2
    assert len(runs) == 2 and runs[stopped.run_id].status == "succeeded"
    assert runs[stopped.run_id].summary["train/loss"]["last_step"] == 3000
    assert "Best trial #" in out


@pytest.mark.slow
def test_an_unpromising_trial_is_pruned_and_its_run_cancelled_with_the_reason(workspace):
    spec, _ = _plan(workspace, name="pr", params=["learning_rate=0.000001:0.5:log"], steps=4000, trials=2,
                    parallel=1, eval_every=200, prune_after=1, seed=0, report=_Report())
    study = store.create_study(workspace, spec)
    study.enqueue_trial({"learning_rate": 0.05})    # learns iris: accuracy near 1 at step 200
    study.enqueue_trial({"learning_rate": 0.000001})  # learns nothing: pruned at its first evaluation
    lines = []
    assert SweepDriver(workspace, "pr", poll_s=0.1, out=lines.append).run() == 0
    study, runs = _trials_and_runs(workspace, "pr")
    assert [t.state.name for t in study.trials] == ["COMPLETE", "PRUNED"], lines
    pruned = runs[study.trials[1].user_attrs["run_id"]]
    assert pruned.status == "cancelled"
    assert re.match(r"pruned by sweep pr at step \d+: accuracy ", pruned.error)
    step = int(re.search(r"at step (\d+)", pruned.error).group(1))
    assert step < 4000 and step in study.trials[1].intermediate_values
    assert any(line.startswith("Trial #1 pruned at step") for line in lines)


def test_the_driver_fails_a_trial_whose_run_is_refused(workspace):
    spec, _ = _plan(workspace, name="bad", trials=1, parallel=1, report=_Report())
    store.create_study(workspace, spec)
    study = store.load_study(workspace, "bad")
    study.enqueue_trial({"learning_rate": 5.0}, skip_if_exists=False)  # above the template's max 1.0

    class NoLauncher:  # nothing may be submitted
        def poll(self):
            return []

        def submit(self, run_id):
            raise AssertionError("submitted")

    lines = []
    assert SweepDriver(workspace, "bad", launcher=NoLauncher(), out=lines.append).run() == 0
    trial = store.load_study(workspace, "bad").trials[0]
    assert trial.state == optuna.trial.TrialState.FAIL
    assert "its run was refused" in trial.user_attrs["error"] and "learning_rate" in trial.user_attrs["error"]
    assert store.driver_state(workspace, "bad")["state"] == "finished"


def test_a_second_driver_is_refused_while_one_works(workspace):
    spec, _ = _plan(workspace, name="busy", report=_Report())
    store.create_study(workspace, spec)
    store.write_driver_state(workspace, "busy", "running")  # this process: alive
    with pytest.raises(SweepSpecError, match="is running already"):
        store.start_driver(workspace, "busy")
    with pytest.raises(SweepSpecError, match="exists already"):
        store.create_study(workspace, spec)


def test_driver_state_of_a_dead_driver_is_lost(workspace):
    spec, _ = _plan(workspace, name="dead", report=_Report())
    store.create_study(workspace, spec)
    folder = store.sweep_dir(workspace, "dead")
    (folder / store.DRIVER_STATE).write_text(json.dumps({"state": "running", "pid": 2**22 + 12345}))
    assert store.driver_state(workspace, "dead")["state"] == "lost"
    assert not store.driver_alive(workspace, "dead")


def test_the_journal_is_shared_by_threads_writing_at_once(workspace):
    """The study file takes concurrent writers (driver + UI + CLI): no trial is lost."""
    spec, _ = _plan(workspace, name="journal", report=_Report())
    store.create_study(workspace, spec)

    def write():
        study = store.load_study(workspace, "journal")
        for _ in range(10):
            trial = study.ask({"learning_rate": optuna.distributions.FloatDistribution(0.001, 0.1)})
            study.tell(trial, 0.5)

    threads = [threading.Thread(target=write) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    study = store.load_study(workspace, "journal")
    assert len(study.trials) == 30 and len({t.number for t in study.trials}) == 30
