"""Browser journey of issue 15's eval views and Compare at scale (items 2, 3 and 5).

Two short ``train_and_evaluate`` runs with different learning rates, launched from the Train
page: after each launch the run page keeps its tabs while the chart goes live (item 3). The
second run's evaluation plots are computed on demand and name the checkpoint step they come from
(item 2), without a reload. Compare is opened with ``?runs=<a>,<b>`` (as the Runs table sends
it): the differing learning rate, the parallel coordinates and the best run are shown (item 5).
Runs other journeys created in the same workspace are left alone: ours are found by id.
Screenshots: ``compare-scale``, ``eval-checkpoint``.
"""

from __future__ import annotations

import re

from browser_kit import (
    MARKS,
    SHOTS,
    chart_points,
    launch_training,
    playwright_sync,
    registry,
    shot,
    wait_for_child,
    wait_idle,
    wait_status,
)

pytestmark = MARKS

TABS = ("Metrics summary", "Checkpoints", "Evaluation plots", "Params", "Worker log", "Reproduce")
ENDED = {"succeeded", "failed", "stopped", "lost", "cancelled"}


def launch_and_watch(page, home, lr: float) -> str:
    """Launches a run and checks that the run page keeps its tabs from the first chart point to
    the end of the run (the live panel never reruns the page)."""
    run_id, _ = launch_training(page, 200, lr=lr, action="train_and_evaluate")
    page.wait_for_function("() => { const el = document.querySelector('.js-plotly-plot');"
                           " return el && el._fullData && el._fullData.some(t => t.x && t.x.length); }",
                           timeout=90_000)
    for name in TABS:
        playwright_sync.expect(page.get_by_role("tab", name=name)).to_be_visible()
    assert wait_status(home, run_id, ENDED, 120) == "succeeded"
    page.locator(f".st-key-status-{run_id}", has_text="succeeded").wait_for(timeout=30_000)
    for name in TABS:
        playwright_sync.expect(page.get_by_role("tab", name=name)).to_be_visible()
    assert chart_points(page) > 0
    return run_id


def test_eval_views_and_compare_at_scale(server, page):
    home, url = server["home"], server["url"]
    page.goto(url)
    wait_idle(page, 60)
    run_a = launch_and_watch(page, home, 0.1)
    run_b = launch_and_watch(page, home, 0.001)

    # Evaluation plots of run b: computed in a runner, shown without a reload, named by checkpoint.
    wait_idle(page)
    page.get_by_role("tab", name="Evaluation plots").click()
    page.get_by_role("button", name="Compute evaluation plots").click()
    plots_run = wait_for_child(home, run_b)
    assert wait_status(home, plots_run, ENDED, 90) == "succeeded"
    child = registry(home).get(plots_run)
    step = int(re.search(r"model\.ckpt-(\d+)$", child.checkpoint_path).group(1))
    panel = page.get_by_role("tabpanel", name="Evaluation plots")
    source = panel.locator(f".st-key-eval-source-{run_b}")
    playwright_sync.expect(source).to_contain_text(
        f"from checkpoint step {step} (model.ckpt-{step})", timeout=30_000)
    playwright_sync.expect(panel.locator(".js-plotly-plot")).to_have_count(2, timeout=30_000)
    wait_idle(page)
    panel.scroll_into_view_if_needed()
    panel.screenshot(path=str(SHOTS / "eval-checkpoint.png"))  # the tab sits below the fold

    # Compare with the selection in the URL.
    page.goto(f"{url}/compare?runs={run_a},{run_b}")
    wait_idle(page, 60)
    page.get_by_role("heading", name="What differs").wait_for(timeout=30_000)
    # curves, parallel coordinates, param scatter, and run b's confusion matrix in the per-class
    # view (run a has no evaluation plots: a button offers them; issue 28 item 6)
    playwright_sync.expect(page.locator(".js-plotly-plot")).to_have_count(4, timeout=30_000)
    kinds = page.locator(".js-plotly-plot").evaluate_all(
        "els => els.map(el => [...new Set(el._fullData.map(t => t.type))].join(','))")
    assert kinds[1] == "parcoords" and kinds[3] == "heatmap", kinds
    playwright_sync.expect(page.get_by_role("button", name=re.compile(r"^Compute them \(1 run\)"))).to_be_visible()
    best = page.get_by_text(re.compile(r"^Best run for final eval accuracy \(maximize\)"))
    playwright_sync.expect(best).to_be_visible()
    accuracies = {r: registry(home).get(r).summary["eval/accuracy"]["last"] for r in (run_a, run_b)}
    winner = max(accuracies, key=lambda r: accuracies[r])
    playwright_sync.expect(best).to_contain_text(winner)
    picked = page.get_by_test_id("stMultiSelect").get_by_text(re.compile(rf"· {run_a}$"))
    playwright_sync.expect(picked).to_be_visible()
    assert page.get_by_text("param: learning_rate").count()
    wait_idle(page)
    shot(page, "compare-scale")
