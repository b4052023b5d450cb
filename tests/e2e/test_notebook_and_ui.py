"""Both halves are one workbench (issue 25, "Done when"): a run submitted from the Python API while
the UI server is open on the same workspace is in the browser's runs table. Short runs (20 steps)
on iris. The reverse (a run started on the Train page is in ``Workspace.runs()``) is checked with
AppTest in tests/pages/test_api_and_ui.py: its Chromium version timed out on Train's navigation
when it ran after the other journeys in one session (alone it passed; cause not found yet).
"""

from __future__ import annotations

import re
import time
import uuid

from browser_kit import (
    MARKS,
    TIMINGS,
    goto_page,
    playwright_sync,
    wait_idle,
    wait_status,
)

from estimator_workbench import Workspace

pytestmark = MARKS


def _filter_to(page, pattern: str) -> None:
    box = page.get_by_label("Filter (regex on id, name, template, dataset, tags)")
    box.fill(pattern)
    box.press("Enter")
    wait_idle(page)


def test_a_run_submitted_from_python_is_in_the_browsers_runs_table(server, page):
    home, url = server["home"], server["url"]
    page.goto(url)
    wait_idle(page, 60)
    goto_page(page, "Runs")  # the UI is open on the workspace before the run exists

    name = f"from-python-{uuid.uuid4().hex[:6]}"
    ws = Workspace(home)
    submitted = time.monotonic()
    run = ws.submit(dataset="iris", template="mlp_classifier", steps=20, name=name,
                    params={"learning_rate": 0.05})

    # The user goes to the Runs page again (it reads the registry on each visit) and filters.
    goto_page(page, "Data")
    goto_page(page, "Runs")
    _filter_to(page, f"^{re.escape(run.id)}$")  # the filter matches ids too: this run's row only
    grid = page.get_by_test_id("stDataFrame").first
    playwright_sync.expect(page.get_by_text("1 of ", exact=False)).to_be_visible()
    playwright_sync.expect(grid).to_contain_text(name)  # (the grid's text: the id is its hidden index)
    TIMINGS["python_submit_to_browser_runs_table_s"] = round(time.monotonic() - submitted, 2)

    assert run.wait(timeout=120, progress=False).status == "succeeded"
    page.reload()  # its final status reaches the table too
    wait_idle(page, 60)
    _filter_to(page, f"^{re.escape(run.id)}$")
    playwright_sync.expect(page.get_by_test_id("stDataFrame").first).to_contain_text(f"{name}succeeded")
    assert wait_status(home, run.id, {"succeeded"}, 10) == "succeeded"
