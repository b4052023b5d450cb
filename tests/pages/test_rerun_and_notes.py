"""Issue 28 item 10: 'Re-run with these settings' fills the Train form from any run; Compare
links to each run; notes are shown in Runs and Compare and are searchable; runs filtered by a
metric condition."""

from __future__ import annotations

import pytest

pytest.importorskip("streamlit")
from app_pages import open_page
from test_eval_views import iris

from estimator_workbench import templates
from estimator_workbench.store.registry import RunRegistry


def mlp_run(home, **overrides):
    info = templates.get_template("mlp_classifier", home)
    reg = RunRegistry(home)
    kwargs = dict(name="tuned mlp", action="train_and_evaluate", dataset=iris(),
                  template={"name": info.name, "code": info.code + "\n# tuned by hand\n"},
                  params={"learning_rate": 0.0123, "hidden_units": "32,16"},
                  run_config={"tf_random_seed": 7, "save_checkpoints_steps": 50, "keep_checkpoint_max": None,
                              "log_step_count_steps": 25, "device": "cpu"},
                  schedule={"max_steps": 1300, "batch_size": 16, "eval_every_steps": 200,
                            "metrics_every_n_steps": 5, "nan_policy": "stop",
                            "early_stopping": {"metric": "accuracy", "mode": "max", "patience": 4, "min_delta": 0.01}})
    kwargs.update(overrides)
    rec = reg.create_run(**kwargs)
    reg.set_status(rec.run_id, "running")
    return reg.set_status(rec.run_id, "succeeded")


def test_rerun_with_these_settings_fills_the_train_form(home):
    rec = mlp_run(home)
    at = open_page("run", query={"run": rec.run_id})
    at.button(key=f"rerun-{rec.run_id}").click().run()
    assert not at.exception, at.exception
    assert at.title[0].value == "Train"  # the button opened the Train page
    assert any(f"Filled from run tuned mlp ({rec.run_id})" in i.value for i in at.info)
    assert at.session_state["template"]["code"].endswith("# tuned by hand\n")  # the run's own code
    assert at.number_input(key="rc-steps").value == 1300
    assert at.number_input(key="rc-batch").value == 16
    assert at.number_input(key="rc-seed").value == 7
    assert at.number_input(key="rc-ckpt").value == 50
    assert at.number_input(key="rc-keep").value == 0  # keep all
    assert at.number_input(key="rc-eval").value == 200
    assert at.selectbox(key="rc-action").value == "train_and_evaluate"
    assert at.selectbox(key="rc-device").value == "cpu"
    assert at.checkbox(key="rc-es").value is True
    assert at.text_input(key="rc-es-metric").value == "accuracy"
    assert at.number_input(key="rc-es-patience").value == 4
    assert at.radio(key="rc-nan").value == "stop"
    assert at.number_input(key="p-mlp_classifier-learning_rate").value == pytest.approx(0.0123)
    assert at.text_input(key="p-mlp_classifier-hidden_units").value == "32,16"


def test_metric_conditions_are_parsed_not_evaluated():
    from estimator_workbench.ui.run_query import MetricCondition, parse_condition

    assert parse_condition("accuracy > 0.7 and train/loss<=1e-1, auc != 1") == [
        MetricCondition("eval/accuracy", ">", 0.7), MetricCondition("train/loss", "<=", 0.1),
        MetricCondition("eval/auc", "!=", 1.0)]
    assert parse_condition("  ") == []
    for bad in ("__import__('os').system('true') > 1", "accuracy > 0.7 or loss < 1", "accuracy >", "0.7 < accuracy"):
        with pytest.raises(ValueError, match="is not '<metric> <operator> <number>'"):
            parse_condition(bad)


def test_the_runs_page_shows_notes_searches_them_and_filters_by_a_metric_condition(home):
    reg = RunRegistry(home)
    good, bad, none = (mlp_run(home, name=n) for n in ("good", "bad", "no eval"))
    reg.update_summary(good.run_id, {"accuracy": 0.9, "loss": 0.3}, step=100, split="eval")
    reg.update_summary(bad.run_id, {"accuracy": 0.6, "loss": 0.2}, step=100, split="eval")
    reg.set_note(good.run_id, "wider layers helped\nsecond line")
    reg.set_note(none.run_id, "baseline without evaluation")
    at = open_page("runs")
    frame = at.dataframe[0].value.set_index("name")
    assert frame.loc["good", "notes"] == "wider layers helped" and frame.loc["bad", "notes"] == ""
    at.text_input(key="runs-filter").input("layers").run()
    assert at.dataframe[0].value["name"].tolist() == ["good"]
    at.text_input(key="runs-filter").input("").run()
    at.text_input(key="runs-condition").input("accuracy > 0.7").run()
    assert at.dataframe[0].value["name"].tolist() == ["good"]
    at.text_input(key="runs-condition").input("loss < 0.25").run()
    assert at.dataframe[0].value["name"].tolist() == ["bad"]
    at.text_input(key="runs-condition").input("accuracy >> 1").run()
    assert any("'accuracy >> 1' is not '<metric> <operator> <number>'" in e.value.replace("\\", "") for e in at.error)


def test_compare_links_to_each_run_with_its_notes(home):
    a, b = mlp_run(home, name="first"), mlp_run(home, name="second")
    RunRegistry(home).set_note(a.run_id, "the baseline")
    at = open_page("compare", query={"runs": f"{a.run_id},{b.run_id}"})
    links = at.get("page_link")
    assert [(link.proto.label, link.proto.query_string) for link in links] == [
        (f"first · {a.run_id}", f"run={a.run_id}"), (f"second · {b.run_id}", f"run={b.run_id}")]
    texts = [c.value for c in at.caption]
    assert "succeeded · the baseline" in texts and "succeeded · no notes" in texts


def test_compare_colours_the_curves_by_a_param(home):
    import json

    reg = RunRegistry(home)
    runs = [mlp_run(home, name=f"lr {lr}", params={"learning_rate": lr}) for lr in (0.1, 0.01, 0.1)]
    for rec in runs:
        (reg.run_dir(rec.run_id) / "metrics.jsonl").write_text("".join(
            json.dumps({"step": s, "wall_time": float(s), "split": "train", "name": "loss", "value": 1.0 / s}) + "\n"
            for s in (1, 2)))
    at = open_page("compare", query={"runs": ",".join(r.run_id for r in runs)})
    at.selectbox(key="cmp-colour-by").select("learning_rate").run()
    assert not at.exception
    assert "learning_rate: :blue[■] 0.01 (1 run) · :orange[■] 0.1 (2 runs)" in [
        c.value.replace("\\", "") for c in at.caption]
    spec = json.loads(next(c for c in at.get("plotly_chart") if "cmp-curves" in c.proto.id).proto.spec)
    colours = {t["name"].split(" · ")[0] + ("" if t["name"].count(" · ") < 2 else " " + t["name"].split(" · ")[1]):
               t["line"]["color"] for t in spec["data"]}
    # the two runs with learning_rate 0.1 share the second colour, the 0.01 run has the first
    assert sorted(colours.values()) == ["#1f77b4", "#ff7f0e", "#ff7f0e"]
    assert colours["lr 0.01"] == "#1f77b4"


def test_param_colours_group_runs_by_value():
    from estimator_workbench.ui.compare_eval import param_colours

    class R:
        def __init__(self, run_id, **params):
            self.run_id, self.params = run_id, params

    runs = [R("a", lr=0.1), R("b", lr=0.01), R("c", lr=0.1), R("d")]
    by_run, by_value = param_colours(runs, "lr")  # type: ignore[arg-type]
    assert list(by_value) == ["0.01", "0.1", "(not set)"]
    assert by_run["a"] == by_run["c"] == by_value["0.1"] != by_run["b"]
    assert by_run["d"] == by_value["(not set)"]
