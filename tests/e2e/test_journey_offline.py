"""Browser journey of issue 27 ("the UI fetches nothing from outside"): with every request to a host
other than the app's own (127.0.0.1 / localhost) recorded and aborted, as on a machine without
internet, the Data, Model (the code editor loaded), Train and Run pages of a finished run (its
plotly charts drawn) load and request nothing from outside. Before the fix, the favicon came from
fonts.gstatic.com on every page change and the code editor's font from fonts.googleapis.com.
"""

from __future__ import annotations

import os
import re
import subprocess

from browser_kit import MARKS, REPO, cli_command, goto_page, wait_idle, wait_status

pytestmark = MARKS

_LOCAL_HOSTS = ("127.0.0.1", "localhost")


def _train(home, name: str) -> str:
    """A short real run through the CLI (detached); returns its id."""
    env = dict(os.environ, OMP_NUM_THREADS="1", WORKBENCH_WARM_SPARES="0")
    out = subprocess.run([*cli_command(), "--workspace", str(home), "run", "--dataset", "iris", "--template",
                          "mlp_classifier", "--steps", "20", "--name", name, "--no-preflight", "--detach"],
                         cwd=REPO, env=env, capture_output=True, text=True, timeout=180, check=True)
    return out.stdout.strip().splitlines()[-1]


def _host(url: str) -> str | None:
    match = re.match(r"^[a-z][a-z0-9+.-]*://\[?([^/:\]]+)", url)
    return match.group(1) if match else None  # data:, blob: and about: URLs have no host


def test_no_page_requests_anything_from_outside(server, page):
    home, url = server["home"], server["url"]
    run_id = _train(home, "offline-journey")
    outside: list[str] = []
    requested: list[str] = []

    def block_outside(route) -> None:
        host = _host(route.request.url)
        if host is not None and host not in _LOCAL_HOSTS:
            outside.append(route.request.url)
            route.abort("internetdisconnected")
        else:
            route.continue_()

    def record(request) -> None:  # also what a route would not see (e.g. a service worker's fetch)
        requested.append(request.url)

    context = page.context
    context.route("**/*", block_outside)
    context.on("request", record)
    tab = context.new_page()  # a fresh page load, with the login cookie of the session's page
    tab.set_default_timeout(30_000)
    try:
        tab.goto(url)
        wait_idle(tab, 60)
        tab.wait_for_selector("h1:has-text('Data')")
        tab.get_by_text("Using ").first.wait_for()

        goto_page(tab, "Model")
        editor = tab.frame_locator("iframe[title*='code_editor']").locator(".ace_editor")
        editor.wait_for(timeout=30_000)  # the component has loaded its Ace theme and font settings
        assert "ace-tm" in (editor.get_attribute("class") or "")  # textmate, shipped with the component
        assert "monospace" in editor.evaluate("e => getComputedStyle(e).fontFamily")

        goto_page(tab, "Train")
        tab.get_by_test_id("stForm").wait_for()

        assert wait_status(home, run_id, {"succeeded"}, timeout=180) == "succeeded"
        tab.goto(f"{url}/run?run={run_id}")
        wait_idle(tab, 60)
        tab.wait_for_selector(".js-plotly-plot .main-svg", timeout=30_000)  # the metric charts drawn
        wait_idle(tab)
    finally:
        context.remove_listener("request", record)
        context.unroute("**/*", block_outside)
        tab.close()
    assert any(_host(u) in _LOCAL_HOSTS for u in requested), "no request was recorded at all"
    external = sorted({u for u in requested if _host(u) is not None and _host(u) not in _LOCAL_HOSTS})
    assert outside == [] and external == [], f"requests to other hosts: {sorted(set(outside)) or external}"
