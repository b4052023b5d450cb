"""End-to-end: the analyst's journey in headless Chromium against the app started as the README does.

``estimator-workbench --workspace <tmp> ui --port <free port>`` from the repository root (so
``.streamlit/config.toml`` applies), readiness on ``/_stcore/health``, Playwright driving the
Debian ``chromium`` (``playwright install`` cannot download browsers here). The journey: upload a
CSV, keep the MLP template, launch a short CPU training run, watch the chart grow without
interaction, stop it, resume it, train a second run (train_and_evaluate with early stopping),
open its evaluation plots, compare the two, predict and download the predictions CSV, and
predict one row from the form. Screenshots of every page go to ``docs/screenshots/``.

Teardown kills the server's process group and every runner process group the registry knows.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pandas as pd
import pytest

# CI sets REQUIRE_BROWSER_TESTS=1: there a missing browser or playwright is a failure, not a skip.
REQUIRED = os.environ.get("REQUIRE_BROWSER_TESTS") == "1"
if REQUIRED:
    import playwright.sync_api as playwright_sync
else:
    playwright_sync = pytest.importorskip("playwright.sync_api", reason="pip install playwright")

REPO = Path(__file__).resolve().parents[2]
SHOTS = REPO / "docs" / "screenshots"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROME_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync"]
TIMINGS: dict[str, float] = {}

if REQUIRED and CHROMIUM is None:
    raise RuntimeError("REQUIRE_BROWSER_TESTS=1 but no chromium on PATH: apt-get install -y chromium")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="needs Debian chromium: apt-get install -y chromium"),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cli() -> list[str]:
    exe = Path(sys.executable).with_name("estimator-workbench")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "workbench"]


def _kill_runners(home: Path) -> None:
    import sqlite3

    db = home / "registry.sqlite"
    if not db.exists():
        return
    with contextlib.closing(sqlite3.connect(db)) as conn:
        pids = [row[0] for row in conn.execute("SELECT pid FROM runs WHERE pid IS NOT NULL")]
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    home = tmp_path_factory.mktemp("e2e") / "workspace"
    port = _free_port()
    # The UI as the README starts it: with its warm spare runner (tests turn it off elsewhere).
    env = dict(os.environ, PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1", WORKBENCH_WARM_SPARES="1")
    log = open(home.parent / "server.log", "wb")
    proc = subprocess.Popen([*_cli(), "--workspace", str(home), "ui", "--port", str(port)],
                            cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    try:
        while True:
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                    if r.read().strip() == b"ok":
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the app did not start:\n" + (home.parent / "server.log").read_text())
            time.sleep(0.2)
        yield {"url": url, "home": home}
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        _kill_runners(home)
        log.close()


@pytest.fixture(scope="module")
def page(server, tmp_path_factory):
    profile = tmp_path_factory.mktemp("chromium-profile")
    with playwright_sync.sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(profile), executable_path=CHROMIUM, args=CHROME_FLAGS, headless=True,
            accept_downloads=True, viewport={"width": 1400, "height": 1300})
        pg = context.pages[0] if context.pages else context.new_page()
        pg.set_default_timeout(30_000)
        # Playwright reads uploads and downloads in its event loop's default executor, whose
        # worker thread lives as long as the loop: start it here, outside the test's hygiene check.
        loop = getattr(pg, "_loop", None)
        if loop is not None:
            loop.set_default_executor(ThreadPoolExecutor(max_workers=1))
            loop.run_in_executor(None, lambda: None)
        try:
            yield pg
        finally:
            with contextlib.suppress(Exception):
                pg.screenshot(path=str(server["home"].parent / "last.png"), full_page=True)
            context.close()


# -- helpers ---------------------------------------------------------------------------------------


def wait_idle(page, timeout: float = 30) -> None:
    """Waits until the app is connected and its script is not running."""
    page.wait_for_selector("[data-testid='stApp'][data-test-connection-state='CONNECTED']",
                           timeout=timeout * 1000)
    page.wait_for_function(
        "() => document.querySelector(\"[data-testid='stApp']\")?.getAttribute('data-test-script-state') !== 'running'",
        timeout=timeout * 1000)


def goto_page(page, title: str) -> None:
    page.get_by_test_id("stSidebarNav").get_by_role("link", name=title, exact=True).click()
    page.wait_for_selector(f"h1:has-text('{title.split()[0]}')")
    wait_idle(page)


def shot(page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.evaluate("() => { window.scrollTo(0, 0); document.querySelectorAll('[data-testid=stMain], section')"
                  ".forEach(e => e.scrollTo && e.scrollTo(0, 0)); }")
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def chart_points(page) -> int:
    """Points drawn in the first plotly chart (0 while it is the empty placeholder)."""
    return page.evaluate("""() => {
        const el = document.querySelector('.js-plotly-plot');
        if (!el || !el._fullData) return 0;
        return el._fullData.reduce((n, t) => n + (t.x ? t.x.length : 0), 0);
    }""")


def run_id_from_url(page) -> str:
    match = re.search(r"[?&]run=([\w-]+)", page.url)
    assert match, f"no run id in {page.url}"
    return match.group(1)


def registry(home: Path):
    from workbench.store.registry import RunRegistry

    return RunRegistry(home)


def registry_status(home: Path, run_id: str) -> str:
    return registry(home).get(run_id).status


def wait_for_child(home: Path, parent: str, timeout: float = 30) -> str:
    """The id of the first predict run launched from ``parent``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        children = [r.run_id for r in registry(home).list_runs(action="predict") if r.parent_run_id == parent]
        if children:
            return children[0]
        time.sleep(0.2)
    raise AssertionError(f"no predict run was launched from {parent}")


def wait_status(home: Path, run_id: str, wanted: set[str], timeout: float = 60) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = registry_status(home, run_id)
        if status in wanted:
            return status
        time.sleep(0.2)
    raise AssertionError(f"run {run_id} is {registry_status(home, run_id)!r}, expected {wanted}")


def set_number(page, label: str, value: int) -> None:
    box = page.get_by_label(label, exact=True)
    box.fill(str(value))
    box.press("Tab")


def launch_training(page, steps: int, *, lr: float | None = None, action: str = "train",
                    early_stopping_patience: int | None = None) -> tuple[str, float]:
    goto_page(page, "Train")
    form = page.get_by_test_id("stForm")
    if lr is not None:
        set_number(page, "learning_rate", lr)
    set_number(page, "Train until step (max_steps)", steps)
    if early_stopping_patience is not None:
        form.get_by_text("Early stopping", exact=True).click()
        set_number(page, "Patience (evaluations)", early_stopping_patience)
    if action != "train_and_evaluate":
        form.get_by_test_id("stSelectbox").filter(has=page.get_by_text("Action", exact=True)).click()
        page.get_by_role("option", name=action, exact=True).click()
    clicked = time.monotonic()
    form.get_by_role("button", name="Train").click()
    page.wait_for_url(re.compile(r".*/run\?run=.*"), timeout=30_000)
    return run_id_from_url(page), clicked


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
    time.sleep(2.5)  # no interaction: the fragment polls on its own
    grown = chart_points(page)
    assert grown > first, f"the live chart did not grow without interaction ({first} -> {grown})"

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
    page.get_by_test_id("stDataFrame").wait_for()
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
    boxes = row_form.get_by_role("textbox")
    playwright_sync.expect(boxes).to_have_count(4)
    for box, value in zip(boxes.all(), ("6.9", "3.1", "5.4", "2.1")):
        box.fill(value)
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
    (SHOTS / "timings.json").write_text(json.dumps(TIMINGS, indent=2) + "\n")
    print("e2e timings:", TIMINGS)
