"""AppTest of the Sweeps page (a study written directly, its trial runs registered) and of the
Train page's Sweep section."""

from __future__ import annotations

import json

import optuna
from app_pages import open_page

from estimator_workbench import templates
from estimator_workbench.store.registry import RunRegistry
from estimator_workbench.sweeps import store
from estimator_workbench.sweeps.spec import SweepSpec, parse_param


def make_sweep(root, name="lr", values=(0.9, 0.7, 0.95), pruned=0, running=0):
    """A sweep whose trials are told ``values`` (each with a registered run), plus pruned and
    running ones."""
    info = templates.get_template("mlp_classifier")
    spec = SweepSpec(name=name, dataset={"ref": {"kind": "bundled", "name": "iris"}},
                     template={"name": info.name, "code": info.code}, base_params={},
                     space=(parse_param("learning_rate=0.0001:0.1:log"), parse_param("dropout=0.0:0.5")),
                     steps=100, trials=len(values) + pruned + running + 2, parallel=1, metric="accuracy")
    study = store.create_study(root, spec)
    registry = RunRegistry(root)
    dists = {p.name: p.distribution() for p in spec.space}

    def trial_with_run():
        trial = study.ask(dists)
        record = registry.create_run(name=f"{name} #{trial.number}", action="train_and_evaluate",
                                     dataset=spec.dataset, template=spec.template, params=trial.params,
                                     run_config={}, schedule={"max_steps": 100})
        registry.set_tags(record.run_id, [store.sweep_tag(name)])
        trial.set_user_attr("run_id", record.run_id)
        return trial, record

    for value in values:
        trial, _ = trial_with_run()
        trial.report(value, 20)
        study.tell(trial, value)
    for _ in range(pruned):
        trial, record = trial_with_run()
        trial.report(0.1, 20)
        registry.set_status(record.run_id, "running", pid=1)
        registry.set_status(record.run_id, "cancelled", error="pruned by sweep lr at step 20: accuracy 0.1")
        study.tell(trial, state=optuna.trial.TrialState.PRUNED)
    for _ in range(running):
        trial_with_run()
    return study


def parallel_axes(figure: dict) -> set[str]:
    """The axes of Optuna's parallel-coordinates figure: a ``parcoords`` trace (Optuna 4) or one
    line per trial across labelled x positions (Optuna 5)."""
    coords = [d for d in figure["data"] if d["type"] == "parcoords"]
    if coords:
        return {d["label"] for d in coords[0]["dimensions"]}
    return set(figure["layout"]["xaxis"]["ticktext"])


def test_no_sweeps_says_how_to_start_one(home):
    at = open_page("sweeps")
    assert "No sweeps yet" in at.info[0].value


def test_sweep_page_best_trial_figures_and_trials_table(home):
    study = make_sweep(home, pruned=1)
    best_run = study.best_trial.user_attrs["run_id"]
    at = open_page("sweeps")
    assert not at.exception
    text = " ".join(m.value for m in at.markdown)
    assert "**Best trial #2**: accuracy = **0.95**" in text
    links = [link for link in at.get("page_link")]
    assert any(best_run in link.proto.label for link in links)
    charts = at.get("plotly_chart")
    assert len(charts) == 2  # parallel coordinates + importances
    parallel = json.loads(charts[0].proto.spec)
    assert parallel_axes(parallel) == {"accuracy", "learning_rate", "dropout"}
    importance = json.loads(charts[1].proto.spec)
    assert set(importance["data"][0]["y"]) == {"learning_rate", "dropout"}
    overview, trials = at.dataframe[0].value, at.dataframe[1].value
    assert overview.loc[0, "sweep"] == "lr" and overview.loc[0, "complete"] == 3 and overview.loc[0, "pruned"] == 1
    assert list(trials["state"]) == ["complete", "complete", "complete", "pruned"]
    assert trials.loc[3, "reason"].startswith("pruned by sweep lr at step 20")
    assert trials.loc[2, "open"] == f"run?run={best_run}"
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Complete"] == "3" and metrics["Pruned"] == "1"


def test_importances_need_two_complete_trials(home):
    make_sweep(home, values=(0.8,))
    at = open_page("sweeps")
    assert any("need at least 2 complete trials; this sweep has 1" in i.value for i in at.info)
    assert len(at.get("plotly_chart")) == 1  # the parallel coordinates only


def test_stop_and_continue_buttons(home, monkeypatch):
    make_sweep(home, values=(0.8,), running=1)
    store.write_driver_state(home, "lr", "running")  # this process plays the driver: alive
    at = open_page("sweeps")
    stop, cont = at.button(key="sweep-stop-lr"), at.button(key="sweep-continue-lr")
    assert not stop.disabled and cont.disabled
    stop.click().run()
    assert store.stop_requested(home, "lr")
    store.write_driver_state(home, "lr", "stopped")
    started = []
    monkeypatch.setattr(store, "start_driver", lambda root, name, owner=None: started.append((name, owner)) or 1)
    monkeypatch.setenv("WORKBENCH_USER", "carol")
    at = open_page("sweeps")
    assert at.button(key="sweep-stop-lr").disabled
    at.button(key="sweep-continue-lr").click().run()
    assert started == [("lr", "carol")]  # its new trials are the session's user's (issue 26.4)


def test_query_param_picks_the_sweep(home):
    make_sweep(home, name="first", values=(0.5, 0.6))
    make_sweep(home, name="second", values=(0.7, 0.8))
    at = open_page("sweeps", query={"sweep": "first"})
    assert at.selectbox(key="sweeps-pick").value == "first"
    assert any(m.value.startswith("**Best trial #1**: accuracy = **0.6**") for m in at.markdown)


def test_train_page_sweep_section_refuses_a_bad_range_before_anything_exists(home):
    at = open_page("train")
    assert at.toggle(key="sw-open").label.startswith("Sweep")
    assert not [w for w in at.multiselect if w.key == "sw-params"]  # nothing drawn while off
    at.toggle(key="sw-open").set_value(True).run()
    assert at.multiselect(key="sw-params").value == ["learning_rate"]
    assert at.checkbox(key="sw-log-learning_rate").value is True  # log scale for learning rates
    at.number_input(key="sw-low-learning_rate").set_value(0.5)
    at.number_input(key="sw-high-learning_rate").set_value(0.1)
    at.button(key="sw-start").click().run()
    assert any("LOW must be below HIGH" in e.value for e in at.error), [e.value for e in at.error]
    assert store.list_sweeps(home) == [] and RunRegistry(home).list_runs() == []
