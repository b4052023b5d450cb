"""One app server and one Chromium for every browser journey of the session (starting them costs
~10 s on two cores). Teardown kills the server's process group and every runner process group the
registry knows, and writes the timings the journeys measured to ``docs/screenshots/timings.json``.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import browser_kit
import pytest
from browser_kit import (
    CHROME_FLAGS,
    CHROMIUM,
    REPO,
    SHOTS,
    TIMINGS,
    cli_command,
    free_port,
    kill_runners,
)
from child_processes import stop_group


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    home = tmp_path_factory.mktemp("e2e") / "workspace"
    port = free_port()
    # The UI as the README starts it: with its warm spare runner (tests turn it off elsewhere).
    env = dict(os.environ, PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1", WORKBENCH_WARM_SPARES="1")
    log = open(home.parent / "server.log", "wb")
    proc = subprocess.Popen([*cli_command(), "--workspace", str(home), "ui", "--port", str(port)],
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
        # The URL the command printed, with its access token (issue 24.1): what a user opens.
        printed = re.search(rf"{re.escape(url)}/\?token=[\w-]+", (home.parent / "server.log").read_text())
        assert printed, "the UI printed no URL with a token:\n" + (home.parent / "server.log").read_text()
        yield {"url": url, "home": home, "login_url": printed.group(0)}
    finally:
        stop_group(proc)
        kill_runners(home)
        log.close()


@pytest.fixture(scope="session")
def playwright():
    """One Playwright driver for the session: its sync API runs one event loop per thread, so
    every browser test (the wheel's too) launches its Chromium from this one."""
    if browser_kit.playwright_sync is None:
        pytest.skip("pip install playwright")
    with browser_kit.playwright_sync.sync_playwright() as driver:
        yield driver


@pytest.fixture(scope="session")
def page(server, playwright, tmp_path_factory):
    profile = tmp_path_factory.mktemp("chromium-profile")
    context = playwright.chromium.launch_persistent_context(
        str(profile), executable_path=CHROMIUM, args=CHROME_FLAGS, headless=True,
        accept_downloads=True, viewport={"width": 1400, "height": 1300})
    pg = context.pages[0] if context.pages else context.new_page()
    pg.set_default_timeout(30_000)
    # Open the printed URL once, as a user does: the server answers with its login cookie, so the
    # journeys' page.goto(url) calls need no token.
    pg.goto(server["login_url"])
    pg.wait_for_selector("[data-testid='stApp']")
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


@pytest.fixture(scope="session", autouse=True)
def _write_timings():
    yield
    if TIMINGS:
        SHOTS.mkdir(parents=True, exist_ok=True)
        (SHOTS / "timings.json").write_text(json.dumps(TIMINGS, indent=2, sort_keys=True) + "\n")
        print("e2e timings:", TIMINGS)
