"""Helper runs in the Runs list and the concurrency settings (issue 28 items 8 and 9): evaluate and
predict runs launched from a trained run are grouped under it, the list filters by action, and the
Runs page's settings change the shared launcher's slots."""

from __future__ import annotations

import time

import pytest

pytest.importorskip("streamlit")
from app_pages import open_page
from test_runs_hub import add_run

from estimator_workbench.store.registry import RunRegistry
from estimator_workbench.ui.run_groups import group_helper_runs


def helper(home, parent: str, action: str, name: str, status: str = "succeeded") -> str:
    time.sleep(0.002)  # distinct creation times: the order under the parent is the launch order
    return add_run(home, name, status=status, action=action, parent_run_id=parent,
                   parent_relation=f"{action}_from")


def workspace_with_helpers(home):
    first = add_run(home, "first")
    second = add_run(home, "second")
    plots = helper(home, first, "predict", "eval plots of first @ step 100")
    pred = helper(home, first, "predict", "predict 1 row with first")
    ev = helper(home, first, "evaluate", "evaluate with first @ step 100")
    return first, second, plots, pred, ev


def test_group_helper_runs_hides_or_nests_them_under_their_parent(home):
    first, second, plots, pred, ev = workspace_with_helpers(home)
    records = RunRegistry(home).list_runs()  # newest first
    hidden = group_helper_runs(records, show_helpers=False)
    assert [r.run_id for r in hidden.rows] == [second, first]
    assert hidden.helpers == {first: "2 predict · 1 evaluate"} and not hidden.nested
    shown = group_helper_runs(records, show_helpers=True)
    assert [r.run_id for r in shown.rows] == [second, first, plots, pred, ev]
    assert shown.nested == {plots, pred, ev}
    # a helper whose parent is not listed (filtered out) stays a row of its own
    alone = group_helper_runs([r for r in records if r.run_id != first], show_helpers=False)
    assert [r.run_id for r in alone.rows] == [ev, pred, plots, second] and alone.helpers == {}


def test_the_runs_page_groups_helper_runs_and_filters_by_action(home):
    workspace_with_helpers(home)
    at = open_page("runs")
    frame = at.dataframe[0].value
    assert frame["name"].tolist() == ["second", "first"]
    assert frame.set_index("name").loc["first", "helpers"] == "2 predict · 1 evaluate"
    assert any(c.value.startswith("2 of 5 runs") for c in at.caption)
    at.toggle(key="runs-show-helpers").set_value(True).run()
    assert at.dataframe[0].value["name"].tolist() == [
        "second", "first", "↳ eval plots of first @ step 100", "↳ predict 1 row with first",
        "↳ evaluate with first @ step 100"]
    at.toggle(key="runs-show-helpers").set_value(False)
    at.multiselect(key="runs-actions").select("predict").run()
    # filtered to predict runs, their parent is not listed: they are rows of their own
    assert sorted(at.dataframe[0].value["name"]) == ["eval plots of first @ step 100", "predict 1 row with first"]


def test_the_runs_page_settings_change_the_launchers_slots(home):
    from estimator_workbench.ui import session

    add_run(home, "one")
    at = open_page("runs")
    launcher = session.get_launcher()
    assert (launcher.max_concurrent, launcher.helper_slots) == (1, 1)
    at.number_input(key="settings-max-concurrent").set_value(3)
    at.number_input(key="settings-helper-slots").set_value(2)
    at.button(key="FormSubmitter:settings-concurrency-Apply").click().run()
    assert not at.exception
    assert (launcher.max_concurrent, launcher.helper_slots) == (3, 2)
