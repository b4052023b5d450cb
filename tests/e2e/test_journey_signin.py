"""Browser journey of issue 26.4: a team's UI server signs people in with OpenID Connect through
Streamlit's ``st.login``, against a real OIDC provider on this machine (``oidc-provider-mock``, a
Flask server from the test extra, started here as a process on 127.0.0.1). The UI is started as a
team starts it (``estimator-workbench ui --oidc-metadata-url ... --oidc-client-id ...`` with
``$WORKBENCH_OIDC_CLIENT_SECRET``); Chromium opens it, is sent to the provider, signs in as Alice
there, comes back through ``/oauth2callback``, sees her name and the pages. (That a run started in
a signed-in session records its owner is checked under AppTest: tests/pages/test_signin.py.)

Under CI (``REQUIRE_OIDC_TESTS=1``) a missing provider package is a failure, not a skip.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from browser_kit import (
    CHROME_FLAGS,
    CHROMIUM,
    MARKS,
    REPO,
    cli_command,
    free_port,
    kill_runners,
    wait_idle,
)
from child_processes import stop_group

pytestmark = MARKS

ALICE = {"sub": "alice", "email": "alice@example.com", "name": "Alice Example"}


def _provider_installed() -> bool:
    try:
        import authlib  # noqa: F401  (st.login's)
        import oidc_provider_mock  # noqa: F401
    except ImportError as exc:
        if os.environ.get("REQUIRE_OIDC_TESTS") == "1":
            pytest.fail(f"REQUIRE_OIDC_TESTS=1 but {exc}: pip install -e '.[test]'")
        return False
    return True


def _wait_http(url: str, proc: subprocess.Popen, log: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(OSError):
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{url} did not answer:\n{log.read_text()}")
        time.sleep(0.2)


@pytest.fixture(scope="module")
def team_server(tmp_path_factory):
    if not _provider_installed():
        pytest.skip("needs oidc-provider-mock and Authlib (the test and auth extras)")
    base = tmp_path_factory.mktemp("signin")
    home = base / "workspace"
    idp_port, ui_port = free_port(), free_port()
    idp_log, ui_log = base / "provider.log", base / "server.log"
    with open(idp_log, "wb") as out:
        provider = subprocess.Popen(
            [sys.executable, "-m", "oidc_provider_mock", "--host", "127.0.0.1", "--port", str(idp_port),
             "--user-claims", json.dumps(ALICE)],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    metadata = f"http://127.0.0.1:{idp_port}/.well-known/openid-configuration"
    ui = None
    try:
        _wait_http(metadata, provider, idp_log)
        env = dict(os.environ, PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1", WORKBENCH_WARM_SPARES="0",
                   WORKBENCH_OIDC_CLIENT_SECRET="workbench-secret")
        with open(ui_log, "wb") as out:
            ui = subprocess.Popen(
                [*cli_command(), "--workspace", str(home), "ui", "--port", str(ui_port),
                 "--oidc-metadata-url", metadata, "--oidc-client-id", "workbench"],
                cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        url = f"http://localhost:{ui_port}"  # the default redirect URI's host: the auth cookie's
        _wait_http(f"{url}/_stcore/health", ui, ui_log)
        yield {"url": url, "home": home, "log": ui_log}
    finally:
        if ui is not None:
            stop_group(ui)
            kill_runners(home)
        stop_group(provider)


def test_alice_signs_in_with_the_identity_provider(team_server, playwright, tmp_path):
    url = team_server["url"]
    assert "Everyone signs in through your identity provider" in team_server["log"].read_text()
    context = playwright.chromium.launch_persistent_context(
        str(tmp_path / "profile"), executable_path=CHROMIUM, args=CHROME_FLAGS, headless=True,
        viewport={"width": 1300, "height": 1000})
    try:
        page = context.pages[0] if context.pages else context.new_page()
        page.set_default_timeout(60_000)
        page.goto(url)  # no token: people sign in instead
        wait_idle(page)
        assert page.get_by_test_id("stSidebarNav").count() == 0  # no page before signing in
        page.get_by_role("button", name="Sign in").click()
        # The provider's own page: pick the predefined user.
        page.wait_for_url(re.compile(r"^http://127\.0\.0\.1:\d+/"))
        page.locator("button[name='sub'][value='alice']").click()
        page.wait_for_url(re.compile(rf"^{re.escape(url)}/"))
        wait_idle(page)
        signed_in = page.get_by_test_id("stSidebar").get_by_text("Signed in as")
        signed_in.wait_for()
        assert "Alice Example (alice@example.com)" in signed_in.inner_text()
        page.get_by_test_id("stSidebarNav").get_by_role("link", name="Runs", exact=True).click()
        page.wait_for_selector("h1:has-text('Runs')")  # the pages are open to her
    finally:
        context.close()
