"""estimator_workbench.ui helpers outside a page: launching asks the runner for the pre-flight check."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from stub_runs import STUB_TEMPLATE, stub_run_args

pytest.importorskip("streamlit")

from estimator_workbench.store.records import RunRecord
from estimator_workbench.ui import forms, live, panels, session, tables

REPO = Path(__file__).resolve().parents[2]
DATASET = {"ref": {"kind": "bundled", "name": "iris"}}
TEMPLATE = STUB_TEMPLATE  # declares the stub runner's knobs (sleep, ...) as params


@pytest.fixture
def stub_ui(workspace, monkeypatch):
    """``ui`` with a launcher of its own running the stub runner; shut down afterwards."""
    monkeypatch.setenv("WORKBENCH_RUNNER_MODULE", "stub_runner")
    monkeypatch.setenv("WORKBENCH_RUNNER_PYTHONPATH", str(REPO / "tests" / "estimator_workbench"))
    session._launcher.clear()
    try:
        yield session
    finally:
        session.get_launcher().shutdown(grace=1.0)
        session._launcher.clear()


def launch(schedule: dict) -> RunRecord:
    return forms.launch_run(name="r", action="train", dataset=DATASET, template=TEMPLATE, run_config={},
                            **stub_run_args(schedule))


def test_launch_run_asks_the_runner_for_the_preflight_check(stub_ui):
    schedule = {"max_steps": 2, "sleep": 0.0}
    record = launch(schedule)
    assert stub_ui.get_registry().get(record.run_id).schedule["preflight"] is True
    assert "preflight" not in schedule  # the caller's dict is not changed
    assert stub_ui.get_launcher().wait(record.run_id, timeout=60).status == "succeeded"


def test_launch_run_keeps_the_callers_preflight_choice(stub_ui):
    record = launch({"max_steps": 2, "sleep": 0.0, "preflight": False})
    assert stub_ui.get_registry().get(record.run_id).schedule["preflight"] is False
    assert stub_ui.get_launcher().wait(record.run_id, timeout=60).status == "succeeded"


def test_evaluate_and_predict_from_a_run_skip_the_preflight_check(stub_ui):
    """The parent's code already ran, and data to predict on has no labels for the TRAIN stage."""
    parent = launch({"max_steps": 2, "sleep": 0.0, "batch_size": 7})
    assert stub_ui.get_launcher().wait(parent.run_id, timeout=60).status == "succeeded"
    parent = stub_ui.get_registry().get(parent.run_id)
    child = panels.launch_from(parent, "predict")
    assert stub_ui.get_registry().get(child.run_id).schedule == {"batch_size": 7, "preflight": False}
    stub_ui.get_launcher().wait(child.run_id, timeout=60)


@pytest.mark.slow
def test_a_multi_process_run_is_checked_before_launch_and_a_failed_check_launches_nothing(stub_ui):
    """torchrun's ranks do not check in-process, so the UI checks first, in a child process."""
    from estimator_workbench.cli import commands as cli

    broken = (REPO / "tests" / "data" / "bad" / "raises.py.txt").read_text()
    before = stub_ui.get_registry().list_runs()
    with pytest.raises(ValueError, match=r"^Pre-flight check failed in train: RuntimeError"):
        forms.launch_run(name="r", action="train", dataset=cli._dataset_dict("iris", None),
                           template={"name": "mine", "code": broken}, params={}, run_config={},
                           schedule={"max_steps": 2}, num_processes=2)
    assert stub_ui.get_registry().list_runs() == before  # nothing registered, nothing launched


def test_runs_frame_shows_an_evaluate_runs_eval_loss_and_step(workspace):
    reg = session.get_registry()
    trained = reg.create_run(name="t", action="train", dataset=DATASET, template=TEMPLATE, params={},
                             run_config={}, schedule={})
    evaluated = reg.create_run(name="e", action="evaluate", dataset=DATASET, template=TEMPLATE, params={},
                               run_config={}, schedule={})
    entry = {"last": 0.25, "last_step": 700, "best": 0.25, "best_step": 700}
    trained = dataclasses.replace(trained, summary={"train/loss": {**entry, "last": 0.5, "last_step": 900},
                                                    "eval/loss": entry})
    evaluated = dataclasses.replace(evaluated, summary={"eval/loss": entry, "eval/accuracy": {**entry, "last": 0.9}})
    frame = tables.runs_frame([trained, evaluated]).set_index("name")
    assert (frame.loc["t", "step"], frame.loc["t", "last loss"]) == (900, 0.5)  # training runs: the train loss
    assert (frame.loc["e", "step"], frame.loc["e", "last loss"]) == (700, 0.25)


def test_live_rows_start_over_when_the_metrics_file_is_replaced(tmp_path):
    """A resumed run replaces metrics.jsonl without its dead attempt's rows: the live chart's rows
    are replaced too, not appended to."""
    import json
    import os

    path = tmp_path / "metrics.jsonl"

    def write(steps):
        temp = tmp_path / "m.tmp"
        temp.write_text("".join(json.dumps({"step": s, "wall_time": 1.0, "split": "train", "name": "loss",
                                            "value": 1.0}) + "\n" for s in steps))
        os.replace(temp, path)

    write([1, 2, 3, 4])
    state = live._LiveState(path)
    assert state.update() == 4
    write([1, 2])
    state.update()
    assert state.frame["step"].tolist() == [1, 2]
    with path.open("a") as f:
        f.write(json.dumps({"step": 3, "wall_time": 2.0, "split": "train", "name": "loss", "value": 0.5}) + "\n")
    state.update()
    assert state.frame["step"].tolist() == [1, 2, 3]


def test_the_server_freezes_its_import_heap_once_so_streamlits_full_collections_skip_it(tmp_path):
    """Streamlit collects (``gc.collect(2)``) after every script and fragment run; the UI's import
    objects are frozen first, once, so those collections do not rescan them on every rerun."""
    import ast
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent("""
        import gc, sys
        from estimator_workbench.ui import heap
        assert gc.get_freeze_count() == 0
        heap.freeze_import_heap()
        first = gc.get_freeze_count()
        junk = [[i] for i in range(1000)]
        heap.freeze_import_heap()  # once per process: later objects stay collectable
        print(first, gc.get_freeze_count(), "plotly" in sys.modules, "estimator_workbench.ui.live" in sys.modules)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                         cwd=str(tmp_path), check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    first, second, plotly, pages_modules = out.stdout.split()
    assert int(first) > 50_000 and int(second) == int(first)
    assert (plotly, pages_modules) == ("True", "True")
    # app.py's main() freezes before it renders anything
    main = next(node for node in ast.parse((REPO / "estimator_workbench" / "ui" / "app.py").read_text()).body
                if isinstance(node, ast.FunctionDef) and node.name == "main")
    calls = [ast.unparse(node.func) for node in ast.walk(main) if isinstance(node, ast.Call)]
    assert calls.index("heap.freeze_import_heap") < calls.index("_safety_banner")
