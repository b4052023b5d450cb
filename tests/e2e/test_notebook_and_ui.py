"""Both halves are one workbench (issue 25, "Done when"): a run submitted from the Python API while
the UI's Runs page is open on the same workspace shows up in its table by itself (no reload, no
navigation, the filter kept), and a run started on the UI's Train page is in ``Workspace.runs()``
with its params. Short runs (20 steps) on iris.

The second test runs after the other journeys in one session (``pytest tests/e2e``): its launch
sets every field it relies on, because the Train form keeps the last launch's values in the
workspace (an earlier journey's early stopping once refused its 'train' launch).
"""

from __future__ import annotations

import re
import time
import uuid

from browser_kit import (
    MARKS,
    TIMINGS,
    goto_page,
    launch_training,
    playwright_sync,
    wait_idle,
    wait_status,
)

from estimator_workbench import Workspace

pytestmark = MARKS

FILTER = "Filter (regex on id, name, template, dataset, tags, notes)"


def _filter_to(page, pattern: str) -> None:
    box = page.get_by_label(FILTER)
    box.fill(pattern)
    box.press("Enter")
    wait_idle(page)


def test_a_run_submitted_from_python_appears_in_the_open_runs_table(server, page):
    home, url = server["home"], server["url"]
    ws = Workspace(home)
    if not ws.runs().shape[0]:  # alone (-k), the workspace is empty: the page would say "No runs yet"
        ws.submit(dataset="iris", template="mlp_classifier", steps=1, name="another run").wait(timeout=180)
    page.goto(url)
    wait_idle(page, 60)
    goto_page(page, "Runs")  # the UI is open on the workspace before the run exists
    name = f"from-python-{uuid.uuid4().hex[:6]}"
    _filter_to(page, f"^{re.escape(name)}$")  # the user waits for it, filtered by its name
    playwright_sync.expect(page.get_by_text("No runs match.")).to_be_visible()
    page.evaluate("() => { window.__not_reloaded = true; }")  # a reload would drop it

    submitted = time.monotonic()
    run = ws.submit(dataset="iris", template="mlp_classifier", steps=20, name=name,
                    params={"learning_rate": 0.05})

    # No reload and no navigation: the page redraws itself when the registry changed.
    grid = page.get_by_test_id("stDataFrame").first
    playwright_sync.expect(grid).to_contain_text(name, timeout=20_000)  # (the id is the grid's hidden index)
    TIMINGS["python_submit_to_open_runs_table_s"] = round(time.monotonic() - submitted, 2)
    playwright_sync.expect(page.get_by_text("1 of ", exact=False)).to_be_visible()
    assert page.get_by_label(FILTER).input_value() == f"^{re.escape(name)}$"  # the filter was kept
    assert page.evaluate("() => window.__not_reloaded === true")

    # Its end reaches the open table the same way.
    assert run.wait(timeout=120, progress=False).status == "succeeded"
    playwright_sync.expect(page.get_by_test_id("stDataFrame").first).to_contain_text(
        f"{name}succeeded", timeout=20_000)
    assert wait_status(home, run.id, {"succeeded"}, 10) == "succeeded"


def test_a_run_started_in_the_browser_is_in_workspace_runs(server, page):
    home, url = server["home"], server["url"]
    page.goto(url)
    wait_idle(page, 60)
    run_id, _ = launch_training(page, 20, lr=0.03, action="train")

    ws = Workspace(home)
    runs = ws.runs()
    assert run_id in set(runs["run_id"]), runs[["run_id", "name", "status"]]
    row = runs.set_index("run_id").loc[run_id]
    assert row["template"] == "mlp_classifier" and row["dataset"] == "iris"
    assert row["params.learning_rate"] == 0.03
    assert ws.run(run_id).params == {k.removeprefix("params."): v for k, v in row.items()
                                     if k.startswith("params.") and v == v}  # (NaN: another run's param)
    assert ws.run(run_id).wait(timeout=120, progress=False).status == "succeeded"
    finished = ws.runs().set_index("run_id").loc[run_id]
    assert finished["status"] == "succeeded" and finished["metrics.train/loss"] > 0
