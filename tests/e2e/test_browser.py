"""End-to-end: the analyst's journey in headless Chromium against the app started as the README does.

``estimator-workbench --workspace <tmp> ui --port <free port>`` from the repository root (so
``.streamlit/config.toml`` applies), readiness on ``/_stcore/health``, Playwright driving the
Debian ``chromium`` (``playwright install`` cannot download browsers here). The journey: upload a
CSV, keep the MLP template, launch a short CPU training run, watch the chart grow without
interaction, stop it, resume it, train a second run (train_and_evaluate with early stopping),
open its evaluation plots, compare the two, predict and download the predictions CSV, and
predict one row from the form. Screenshots of every page go to ``docs/screenshots/``.
The server and browser fixtures are in ``conftest.py``, the page helpers in ``browser_kit.py``.
"""

from __future__ import annotations

import io
import json
import re
import time
from pathlib import Path

import pandas as pd
from browser_kit import (
    MARKS,
    REPO,
    SHOTS,
    TIMINGS,
    chart_points,
    goto_page,
    launch_training,
    playwright_sync,
    registry,
    shot,
    wait_for_child,
    wait_idle,
    wait_status,
)

pytestmark = MARKS


# -- the journey -----------------------------------------------------------------------------------


def test_analyst_journey(server, page):
    home, url = server["home"], server["url"]
    started = time.monotonic()
    page.goto(url)
    wait_idle(page, 60)
    page.wait_for_selector("h1:has-text('Data')")

    # Data: upload a CSV (the iris sample under another name) and use it.
    page.get_by_text("Upload a file", exact=True).click()
    wait_idle(page)
    csv_bytes = (REPO / "sample_data" / "iris.csv").read_bytes()
    page.get_by_test_id("stFileUploaderDropzoneInput").set_input_files(
        files=[{"name": "my_flowers.csv", "mimeType": "text/csv", "buffer": csv_bytes}])
    page.get_by_text("Using my_flowers.csv").wait_for(timeout=30_000)
    wait_idle(page)
    shot(page, "1-data")

    # Model: the MLP classifier template (the default), code shown in the editor.
    goto_page(page, "Model")
    playwright_sync.expect(page.get_by_test_id("stSelectbox").first.locator("input")).to_have_value(
        re.compile("mlp_classifier"), timeout=20_000)
    # The code editor component (Ace, in an iframe) shows the template's code.
    playwright_sync.expect(page.frame_locator("iframe").first.locator(".ace_content")).to_contain_text(
        "import estimator_engine as ee", timeout=30_000)
    shot(page, "2-model")

    # Train: the form has the early stopping and NaN fields; a long-enough CPU run to watch and stop.
    goto_page(page, "Train")
    form = page.get_by_test_id("stForm")
    for label in ("Early stopping", "Watch eval metric", "Mode", "Patience (evaluations)", "Min delta",
                  "On NaN loss", "Fail the run", "Stop training (keep the last checkpoint)"):
        playwright_sync.expect(form.get_by_text(label, exact=True)).to_be_visible()
    playwright_sync.expect(page.get_by_label("Watch eval metric", exact=True)).to_have_value("loss")
    shot(page, "3-train")
    # 20,000 steps: long enough (several seconds even with a warm runner) to watch and stop
    run_a, clicked = launch_training(page, 20_000, action="train")
    page.wait_for_function("() => { const el = document.querySelector('.js-plotly-plot');"
                           " return el && el._fullData && el._fullData.some(t => t.x && t.x.length > 0); }",
                           timeout=60_000)
    TIMINGS["click_train_to_first_point_s"] = round(time.monotonic() - clicked, 2)
    first = chart_points(page)
    # No interaction: the fragment polls on its own, so the chart grows while the test only waits.
    page.wait_for_function(
        "n => { const el = document.querySelector('.js-plotly-plot');"
        " return el && el._fullData && el._fullData.reduce((s, t) => s + (t.x ? t.x.length : 0), 0) > n; }",
        arg=first, timeout=30_000)

    # Stop (graceful), then resume the same run to its budget.
    page.locator(f".st-key-detail-stop-{run_a} button:not([disabled])").first.click()
    assert wait_status(home, run_a, {"stopped", "succeeded"}, 60) == "stopped"
    page.locator(f".st-key-status-{run_a}", has_text="stopped").wait_for(timeout=15_000)
    wait_idle(page)
    page.locator(f".st-key-detail-resume-{run_a} button:not([disabled])").first.click()
    wait_status(home, run_a, {"running", "succeeded"}, 30)
    assert wait_status(home, run_a, {"succeeded", "failed", "stopped", "lost"}, 120) == "succeeded"
    page.locator(f".st-key-status-{run_a}", has_text="succeeded").wait_for(timeout=20_000)
    wait_idle(page)
    shot(page, "5-run-detail")

    # A second, short run with another learning rate (for the comparison), with early stopping
    # (patience 5 of 3 evaluations: it runs to the end) and the runner's pre-flight check.
    run_b, _ = launch_training(page, 300, lr=0.01, action="train_and_evaluate", early_stopping_patience=5)
    assert wait_status(home, run_b, {"succeeded", "failed", "stopped", "lost"}, 90) == "succeeded"
    record_b = registry(home).get(run_b)
    assert record_b.schedule["early_stopping"] == {"metric": "loss", "mode": "min", "patience": 5,
                                                   "min_delta": 0.0}
    assert record_b.schedule["nan_policy"] == "fail" and record_b.schedule["preflight"] is True
    assert json.loads((registry(home).run_dir(run_b) / "preflight.json").read_text())["ok"]

    # Its evaluation plots: a predict run on demand, then the confusion matrix and ROC/PR curves.
    page.locator(f".st-key-status-{run_b}", has_text="succeeded").wait_for(timeout=20_000)
    wait_idle(page)
    page.get_by_role("tab", name="Evaluation plots").click()
    page.get_by_role("button", name="Compute evaluation plots").click()
    plots_run = wait_for_child(home, run_b)
    assert wait_status(home, plots_run, {"succeeded", "failed", "stopped", "lost"}, 90) == "succeeded"
    page.reload()  # the tab does not poll: reload, as its message says
    wait_idle(page, 60)
    page.get_by_role("tab", name="Evaluation plots").click()
    panel = page.get_by_role("tabpanel", name="Evaluation plots")
    playwright_sync.expect(panel.locator(".js-plotly-plot")).to_have_count(2, timeout=30_000)
    for chart in panel.locator(".js-plotly-plot").all():
        playwright_sync.expect(chart).to_be_visible()
    kinds = panel.locator(".js-plotly-plot").evaluate_all(
        "els => els.map(el => [...new Set(el._fullData.map(t => t.type))].join(','))")
    assert kinds == ["heatmap", "scatter"], kinds  # the confusion matrix, then the ROC and PR curves
    playwright_sync.expect(panel.locator(".js-plotly-plot").nth(1)).to_contain_text("Precision-recall")
    panel.scroll_into_view_if_needed()
    panel.screenshot(path=str(SHOTS / "8-eval-plots.png"))  # the tab sits below the fold

    # Runs table.
    goto_page(page, "Runs")
    page.get_by_test_id("stDataFrame").first.wait_for()  # the runs table (the audit log has one too)
    shot(page, "4-runs")

    # Compare: both runs overlaid, the differing param, one CSV of every series.
    goto_page(page, "Compare")
    page.wait_for_selector(".js-plotly-plot")
    assert page.get_by_text("param: learning_rate").count() or page.get_by_text("learning_rate").count()
    shot(page, "6-compare")
    with page.expect_download() as dl:
        page.get_by_role("button", name="Download all series (CSV)").click()
    series = pd.read_csv(dl.value.path())
    assert set(series["run"]) == {run_a, run_b}

    # Predict: the run's dataset, then download and check the CSV.
    goto_page(page, "Predict")
    page.get_by_role("button", name="Predict", exact=True).click()
    button = page.get_by_role("button", name="Download predictions CSV")
    button.wait_for(timeout=60_000)
    wait_idle(page)
    with page.expect_download() as dl:
        button.click()
    preds = pd.read_csv(io.BytesIO(Path(dl.value.path()).read_bytes()))
    assert len(preds) == 150
    assert "class_ids" in preds.columns
    assert any(c.startswith("probabilit") for c in preds.columns)
    assert preds["class_ids"].between(0, 2).all()
    shot(page, "7-predict")

    # Predict one row from the form: the predicted class and its probabilities are shown.
    page.get_by_role("tab", name="Single row").click()
    row_form = page.get_by_test_id("stForm")
    boxes = row_form.get_by_role("spinbutton")  # typed inputs: a number field per numeric column
    playwright_sync.expect(boxes).to_have_count(4)
    values = ("6.9", "3.1", "5.4", "2.1")  # in the data's column order
    # The fields sit in a 3-column grid filled row by row, so the page lists them column by column.
    in_page_order = [i for c in range(3) for i in range(c, len(values), 3)]
    for box, index in zip(boxes.all(), in_page_order):
        box.fill(values[index])
        box.press("Tab")
    row_form.get_by_role("button", name="Predict this row").click()
    single = page.locator(".st-key-single-prediction")
    single.wait_for(timeout=60_000)
    classes = re.compile(r"^(setosa|versicolor|virginica)$")
    playwright_sync.expect(single.get_by_test_id("stMetricLabel")).to_contain_text("Predicted class")
    playwright_sync.expect(single.get_by_test_id("stMetricValue")).to_have_text(classes)
    table = single.locator("table")
    for name in ("setosa", "versicolor", "virginica"):
        playwright_sync.expect(table).to_contain_text(name)
    probabilities = [float(t) for t in re.findall(r"\d\.\d{4}", table.inner_text())]
    assert len(probabilities) == 3 and abs(sum(probabilities) - 1) < 2e-3, probabilities
    latest = registry(home).list_runs(action="predict")[0]
    one = pd.read_csv(registry(home).run_dir(latest.run_id) / "predictions.csv")
    assert len(one) == 1 and one.iloc[0, :4].tolist() == [6.9, 3.1, 5.4, 2.1]
    assert single.get_by_test_id("stMetricValue").inner_text() == one["class"].iloc[0]
    wait_idle(page)
    shot(page, "9-predict-row")

    TIMINGS["journey_s"] = round(time.monotonic() - started, 1)
