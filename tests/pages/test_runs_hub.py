"""The Runs page as the hub (issue 15 items 1, 5, 6): filters and columns, bulk compare / tag /
delete on selected rows, delete asks and moves to the trash, the trash restores and empties, and
the run page's header (rename, notes, queue place, a run in the trash)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("streamlit")
from app_pages import open_page

from estimator_workbench.store import paths, trash
from estimator_workbench.store.registry import RunRegistry
from estimator_workbench.ui.runs_hub import table_key


def add_run(home: Path, name: str, status: str = "succeeded", **overrides) -> str:
    reg = RunRegistry(home)
    kwargs = dict(name=name, action="train", dataset={"ref": {"kind": "bundled", "name": "iris"}},
                  template={"name": "mlp_classifier", "code": "def model_fn(features): ..."},
                  params={}, run_config={}, schedule={"max_steps": 100})
    kwargs.update(overrides)
    rec = reg.create_run(**kwargs)
    if status != "queued":
        reg.set_status(rec.run_id, "running")
    if status not in ("queued", "running"):
        reg.set_status(rec.run_id, status)
    return rec.run_id


def select(at, home: Path, names: list[str]):
    """Ticks the rows of ``names`` in the runs table (as the checkboxes do) and reruns."""
    frame = at.dataframe[0].value
    rows = [int(i) for i in frame.index[frame["name"].isin(names)]]
    at.session_state[table_key(RunRegistry(home).list_runs())] = {
        "selection": {"rows": rows, "columns": [], "cells": []}}
    return at.run()


def button(at, key: str):
    return at.button(key=key)


def names(records) -> set[str]:
    return {r.name for r in records}


def test_columns_filters_and_the_chosen_metric(home):
    a = add_run(home, "alpha", template={"name": "linear_classifier", "code": "x"})
    b = add_run(home, "beta", dataset={"ref": {"kind": "file", "path": "/data/wine.csv"}})
    reg = RunRegistry(home)
    reg.update_summary(a, {"accuracy": 0.8, "loss": 0.4}, step=100, split="eval")
    reg.update_summary(b, {"accuracy": 0.6, "loss": 0.2}, step=100, split="eval")
    with open(reg.run_dir(a) / paths.METRICS_FILE, "w") as fh:
        for step, loss in ((10, 1.0), (20, 0.5)):
            fh.write(json.dumps({"step": step, "wall_time": 1.0 * step, "split": "train", "name": "loss",
                                 "value": loss}) + "\n")
    reg.set_tags(b, ["baseline"])
    at = open_page("runs")
    frame = at.dataframe[0].value.set_index("name")
    for column in ("status", "action", "progress", "ETA", "queue", "dataset", "template", "steps",
                   "final eval accuracy", "best eval accuracy", "best at step", "smoothed loss", "created",
                   "duration"):
        assert column in frame.columns, column
    assert frame.loc["alpha", "final eval accuracy"] == 0.8 and frame.loc["beta", "dataset"] == "wine.csv"
    assert frame.loc["alpha", "smoothed loss"] == pytest.approx((0.1 * 0.9 * 1.0 + 0.1 * 0.5) / (1 - 0.81))
    at.selectbox(key="runs-metric").set_value("loss").run()
    assert at.dataframe[0].value.set_index("name").loc["beta", "best eval loss"] == 0.2
    at.multiselect(key="runs-tags").set_value(["baseline"]).run()
    assert list(at.dataframe[0].value["name"]) == ["beta"]
    at.multiselect(key="runs-tags").set_value([]).run()
    at.multiselect(key="runs-templates").set_value(["linear_classifier"]).run()
    assert list(at.dataframe[0].value["name"]) == ["alpha"]
    at.multiselect(key="runs-templates").set_value([]).run()
    at.multiselect(key="runs-datasets").set_value(["wine.csv"]).run()
    assert list(at.dataframe[0].value["name"]) == ["beta"]
    at.multiselect(key="runs-datasets").set_value([]).run()
    at.text_input(key="runs-filter").set_value("^al").run()
    assert list(at.dataframe[0].value["name"]) == ["alpha"]


def test_compare_the_selected_rows(home):
    for name in ("one", "two", "three"):
        add_run(home, name)
    at = select(open_page("runs"), home, ["one", "three"])
    assert button(at, "bulk-compare").label == "Compare (2)"
    button(at, "bulk-compare").click().run()
    assert not at.exception
    wanted = {r.run_id for r in RunRegistry(home).list_runs() if r.name in ("one", "three")}
    assert set(at.query_params["runs"].split(",")) == wanted
    assert set(at.session_state["compare_runs"]) == wanted
    assert at.title[0].value == "Compare runs"


def test_bulk_tag(home):
    for name in ("one", "two"):
        add_run(home, name)
    at = select(open_page("runs"), home, ["one", "two"])
    at.text_input(key="bulk-tag-text").set_value("keep")
    button(at, "bulk-tag").click().run()
    assert all(r.tags == ("keep",) for r in RunRegistry(home).list_runs())
    assert "Tag 'keep' added to 2 runs" in at.success[0].value


def test_bulk_delete_asks_then_moves_to_the_trash_and_restore_brings_back(home):
    for name in ("one", "two", "three"):
        add_run(home, name)
    reg = RunRegistry(home)
    at = select(open_page("runs"), home, ["one", "two"])
    button(at, "bulk-delete").click().run()
    assert "Move 2 runs to the trash: two, one?" in [m.value for m in at.markdown]  # newest first
    assert names(reg.list_runs()) == {"one", "two", "three"}  # nothing moved before the answer
    button(at, "cancel-trash").click().run()  # "Keep"
    assert names(reg.list_runs()) == {"one", "two", "three"}
    assert not [b for b in at.button if b.key == "confirm-trash"]  # the dialog closed

    button(at, "bulk-delete").click().run()
    button(at, "confirm-trash").click().run()
    assert not at.exception
    assert names(reg.list_runs()) == {"three"} and names(reg.list_runs(trashed=True)) == {"one", "two"}
    assert all(reg.run_dir(r.run_id).exists() for r in reg.list_runs(trashed=True))
    assert list(at.dataframe[0].value["name"]) == ["three"]
    trash_table = at.dataframe[1].value
    assert set(trash_table["name"]) == {"one", "two"} and "trashed" in trash_table.columns
    assert "2 runs in the trash" in " ".join(c.value for c in at.caption)

    rows = [int(i) for i in trash_table.index[trash_table["name"] == "one"]]
    at.session_state[table_key([t.record for t in trash.trashed_runs(reg)], "trash-table")] = {
        "selection": {"rows": rows, "columns": [], "cells": []}}
    at.run()
    button(at, "trash-restore").click().run()
    assert names(reg.list_runs()) == {"one", "three"} and names(reg.list_runs(trashed=True)) == {"two"}

    button(at, "trash-empty").click().run()
    assert "Delete the 1 run in the trash for good" in " ".join(m.value for m in at.markdown)
    assert reg.list_runs(trashed=True)  # still there before the answer
    gone = reg.list_runs(trashed=True)[0].run_id
    button(at, "confirm-empty").click().run()
    assert not at.exception
    assert reg.list_runs(trashed=True) == [] and not reg.exists(gone) and not reg.run_dir(gone).exists()
    assert names(reg.list_runs()) == {"one", "three"}


def test_a_running_run_in_the_selection_is_not_deleted(home):
    add_run(home, "done")
    busy = add_run(home, "busy", status="running")
    reg = RunRegistry(home)
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        # a live process, so that the page's launcher does not mark the run lost
        with sqlite3.connect(reg.db_path) as conn:
            conn.execute("UPDATE runs SET pid = ? WHERE run_id = ?", (sleeper.pid, busy))
        at = select(open_page("runs"), home, ["done", "busy"])
        button(at, "bulk-delete").click().run()
        assert "1 of the selected runs are queued or running (busy): cancel them first" in at.error[0].value
        assert not [b for b in at.button if b.key == "confirm-trash"]
        assert names(reg.list_runs()) == {"done", "busy"}
    finally:
        sleeper.kill()
        sleeper.wait()
        reg.set_status(busy, "cancelled")


def test_delete_on_the_run_page_asks_and_the_page_offers_restore(home):
    keep = add_run(home, "keep")
    run_id = add_run(home, "to delete")
    reg = RunRegistry(home)
    at = open_page("run", query={"run": run_id})
    button(at, f"detail-delete-{run_id}").click().run()
    assert "Move 1 run to the trash: to delete?" in [m.value for m in at.markdown]
    assert trash.trashed_times(reg) == {}
    button(at, "confirm-trash").click().run()
    assert not at.exception
    assert list(trash.trashed_times(reg)) == [run_id] and reg.run_dir(run_id).exists()
    # the link to a trashed run says where it is and offers Restore
    at = open_page("run", query={"run": run_id})
    assert "is in the trash" in at.warning[0].value
    button(at, f"restore-{run_id}").click().run()
    assert trash.trashed_times(reg) == {} and {r.run_id for r in reg.list_runs()} == {keep, run_id}


def test_rename_and_notes_on_the_run_page(home):
    run_id = add_run(home, "old name")
    at = open_page("run", query={"run": run_id})
    at.text_input(key=f"rename-{run_id}").set_value("lr 0.1, wider")
    at.text_area(key=f"note-{run_id}").set_value("Overfits after step 400.")
    at.button(key=f"FormSubmitter:name-note-{run_id}-Save name and notes").click().run()
    assert not at.exception
    record = RunRegistry(home).get(run_id)
    assert (record.name, record.note) == ("lr 0.1, wider", "Overfits after step 400.")
    at = open_page("run", query={"run": run_id})
    assert at.text_area(key=f"note-{run_id}").value == "Overfits after step 400."
    assert "**lr 0\\.1, wider**" in at.caption[0].value
    at.text_input(key=f"rename-{run_id}").set_value("  ")
    at.button(key=f"FormSubmitter:name-note-{run_id}-Save name and notes").click().run()
    assert "name must be a non\\-empty str, given\\: '  '" in at.error[0].value  # (markdown-escaped)
    assert RunRegistry(home).get(run_id).name == "lr 0.1, wider"


def test_queued_runs_show_their_place_in_the_queue(home):
    reg = RunRegistry(home)
    busy = add_run(home, "busy", status="running")
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    with sqlite3.connect(reg.db_path) as conn:  # the one slot is taken
        conn.execute("UPDATE runs SET pid = ? WHERE run_id = ?", (sleeper.pid, busy))
    first = add_run(home, "first", status="queued")
    time.sleep(0.01)
    second = add_run(home, "second", status="queued")
    try:
        at = open_page("runs")
        frame = at.dataframe[0].value.set_index("name")
        assert (frame.loc["first", "queue"], frame.loc["second", "queue"]) == (1, 2)
        at = open_page("run", query={"run": second})
        assert "queued: position 2 (1 = next)" in [c.value for c in at.caption]
        assert reg.get(first).status == "queued"
    finally:
        sleeper.kill()
        sleeper.wait()
        for run_id in (busy, first, second):
            reg.set_status(run_id, "cancelled")


# -- the page follows runs created elsewhere (issue 25 §2: a run submitted from Python shows up) ---


def _watcher_app(stale=None):
    """A page holding only the Runs page's watcher: drawn with ``stale`` (a stamp taken before
    a change) the first time, then with the registry's current stamp, like the Runs page."""
    from streamlit.testing.v1 import AppTest

    def script():
        import streamlit as st

        from estimator_workbench.ui import runs_hub, session

        st.session_state["draws"] = st.session_state.get("draws", 0) + 1
        drawn = st.session_state.pop("stale", None)
        runs_hub.refresh_when_changed(session.get_registry().change_stamp() if drawn is None else tuple(drawn))

    at = AppTest.from_function(script, default_timeout=30)
    if stale is not None:
        at.session_state["stale"] = stale
    return at.run()


def test_the_watcher_redraws_the_page_once_when_the_runs_changed_and_never_otherwise(home):
    add_run(home, "one")
    quiet = _watcher_app()
    assert not quiet.exception and quiet.session_state["draws"] == 1
    assert "_runs_refreshed" not in quiet.session_state

    before = RunRegistry(home).change_stamp()
    add_run(home, "from elsewhere", status="queued")
    changed = _watcher_app(stale=before)
    assert not changed.exception
    assert changed.session_state["draws"] == 2  # one redraw, then the stamps agree
    assert changed.session_state["_runs_refreshed"] is True  # (the page reads and clears it)


def test_the_redraw_shows_a_run_from_elsewhere_keeping_filter_and_ticked_runs_and_starts_nothing(home, monkeypatch):
    from estimator_workbench.ui import panels, session

    for name in ("alpha-1", "alpha-2", "beta"):
        add_run(home, name)
    reg = RunRegistry(home)
    at = open_page("runs")
    at.text_input(key="runs-filter").set_value("^alpha").run()
    shown = [r for r in reg.list_runs() if r.name.startswith("alpha")]
    ticked = next(r for r in shown if r.name == "alpha-1")
    at.session_state[table_key(shown)] = {"selection": {"rows": [shown.index(ticked)], "columns": [], "cells": []}}
    at.run()
    assert button(at, "bulk-compare").label == "Compare (1)"

    arrived = add_run(home, "alpha-3", status="queued")  # e.g. ws.submit() in a notebook
    polls: list[int] = []
    shared = session.get_launcher(poll=False)  # the server's launcher, as the redraw gets it unpolled

    def get_launcher(poll=True):
        if poll:
            polls.append(1)
        return shared

    monkeypatch.setattr(session, "get_launcher", get_launcher)
    monkeypatch.setattr(panels, "get_launcher", lambda: polls.append(2))  # (the run's buttons)
    at.session_state["_runs_refreshed"] = True  # as the watcher leaves it for its redraw
    at.run()
    assert not at.exception
    assert list(at.dataframe[0].value["name"]) == ["alpha-3", "alpha-2", "alpha-1"]  # newest first
    assert at.text_input(key="runs-filter").value == "^alpha"
    assert button(at, "bulk-compare").label == "Compare (1)"  # alpha-1, now on the third row
    assert polls == [] and reg.get(arrived).status == "queued"  # the redraw started nothing
    assert "_runs_refreshed" not in at.session_state

    at.run()  # the next ordinary run of the page polls the launcher again
    assert polls == [1]
    button(at, "bulk-compare").click().run()
    assert at.session_state["compare_runs"] == [ticked.run_id]


def test_a_filter_the_user_changes_starts_unticked(home):
    """Only the watcher's redraw ticks runs again: a filter (or a later visit) that brought back
    an earlier selection had the next click on a checkbox untick it (seen in the runs journey)."""
    for name in ("one", "two"):
        add_run(home, name)
    at = select(open_page("runs"), home, ["one"])
    assert button(at, "bulk-compare").label == "Compare (1)"
    at.text_input(key="runs-filter").set_value("^one$").run()
    assert list(at.dataframe[0].value["name"]) == ["one"]
    assert button(at, "bulk-compare").label == "Compare (0)"
