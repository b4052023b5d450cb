"""Shared pieces of the browser journeys: Chromium discovery, the app server's command, and the
helpers that drive Streamlit pages (wait for idle, go to a page, screenshot, read chart points, wait
for a run's status). The fixtures that start one server and one browser for the whole session live
in ``conftest.py``; each ``test_journey_*.py`` module drives one area of the app through them.
"""
from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import sys
import time
from pathlib import Path

import pytest

# CI sets REQUIRE_BROWSER_TESTS=1: there a missing browser or playwright is a failure, not a skip.
REQUIRED = os.environ.get("REQUIRE_BROWSER_TESTS") == "1"
try:
    import playwright.sync_api as playwright_sync
except ImportError:
    if REQUIRED:
        raise
    playwright_sync = None

REPO = Path(__file__).resolve().parents[2]
SHOTS = REPO / "docs" / "screenshots"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROME_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync"]
TIMINGS: dict[str, float] = {}

if REQUIRED and CHROMIUM is None:
    raise RuntimeError("REQUIRE_BROWSER_TESTS=1 but no chromium on PATH: apt-get install -y chromium")

# Every browser test module sets ``pytestmark = browser_kit.MARKS``.
MARKS = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="needs Debian chromium: apt-get install -y chromium"),
    pytest.mark.skipif(playwright_sync is None, reason="pip install playwright"),
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cli_command() -> list[str]:
    exe = Path(sys.executable).with_name("estimator-workbench")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "estimator_workbench"]


def kill_runners(home: Path) -> None:
    import sqlite3

    db = home / "registry.sqlite"
    if not db.exists():
        return
    with contextlib.closing(sqlite3.connect(db)) as conn:
        pids = [row[0] for row in conn.execute("SELECT pid FROM runs WHERE pid IS NOT NULL")]
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)


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
    from estimator_workbench.store.registry import RunRegistry

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
    # Always chosen, like the action below: the form keeps the last launch's values in the
    # workspace (issue 15's kept context), so an earlier journey's early stopping stayed ticked
    # and refused a later 'train' launch ("Early stopping watches the evaluations of
    # train_and_evaluate"), which then waited for a run page that never came.
    early = form.get_by_test_id("stCheckbox").filter(has_text="Early stopping")
    if early.locator("input").is_checked() != (early_stopping_patience is not None):
        early.get_by_text("Early stopping", exact=True).click()
    if early_stopping_patience is not None:
        set_number(page, "Patience (evaluations)", early_stopping_patience)
    form.get_by_test_id("stSelectbox").filter(has=page.get_by_text("Action", exact=True)).click()
    page.get_by_role("option", name=action, exact=True).click()
    clicked = time.monotonic()
    form.get_by_test_id("stBaseButton-primaryFormSubmit").click()  # Train (by name: also "Help for Train until step")
    try:
        page.wait_for_url(re.compile(r".*/run\?run=.*"), timeout=30_000)
    except playwright_sync.TimeoutError as error:  # say why Train stayed put (a refusal shows there)
        said = [*page.get_by_test_id("stAlert").all_inner_texts(), *page.get_by_test_id("stException").all_inner_texts()]
        raise AssertionError(f"Train did not open the run page; the Train page says: {said or 'nothing'}") from error
    return run_id_from_url(page), clicked




# -- helpers added by the Data journey (test_journey_data.py) --------------------------------------


def shot_at(page, locator, name: str) -> None:
    """A viewport screenshot with ``locator`` scrolled to the top (``shot`` shows the page's top;
    this shows a section further down, e.g. a choice below the tables)."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    locator.evaluate("e => e.scrollIntoView({block: 'start'})")
    page.wait_for_timeout(300)  # let the scroll settle before the capture
    page.screenshot(path=str(SHOTS / f"{name}.png"))
