"""The wheel is the product: build it, install it into a fresh venv outside the checkout, train a
bundled dataset from its CLI and open every UI page by URL path in Chromium (issue 17, item 1)."""
from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import time
import urllib.request
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROME_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync"]
PAGES = ("data", "model", "train", "runs", "run", "compare", "predict")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def wheel_env(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                    "-w", str(tmp / "dist"), str(REPO)], check=True, timeout=300)
    wheel, = (tmp / "dist").glob("estimator_workbench-*.whl")
    venv.create(tmp / "venv", with_pip=False)
    python = tmp / "venv" / "bin" / "python"
    site = Path(subprocess.check_output(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], text=True).strip())
    # The current venv's packages (torch, streamlit...) as a plain path line: it does not run the
    # checkout's editable hook, so `workbench` can only come from the wheel.
    (site / "deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q",
                    "--no-deps", str(wheel)], check=True, timeout=300)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "WORKBENCH_HOME")}
    env.update(PATH=f"{tmp / 'venv' / 'bin'}{os.pathsep}{env.get('PATH', '')}",
               WORKBENCH_HOME=str(tmp / "ws"), OMP_NUM_THREADS="1")
    return {"tmp": tmp, "python": python, "site": site, "env": env}


def test_workbench_is_imported_from_the_wheel(wheel_env):
    out = subprocess.check_output(
        [str(wheel_env["python"]), "-c",
         "import estimator_workbench, estimator_workbench.resources as r; print(estimator_workbench.__file__); "
         "print(r.pages_dir()); print(r.sample_data_dir())"],
        cwd=wheel_env["tmp"], env=wheel_env["env"], text=True).split()
    assert all(line.startswith(str(wheel_env["site"])) for line in out), out
    assert not any(str(REPO) in line for line in out)


def test_cli_trains_a_bundled_dataset_from_the_wheel(wheel_env):
    proc = subprocess.run(
        [str(wheel_env["tmp"] / "venv" / "bin" / "estimator-workbench"), "run", "--dataset", "iris",
         "--template", "mlp_classifier", "--steps", "20"],
        cwd=wheel_env["tmp"], env=wheel_env["env"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian chromium: apt-get install -y chromium")
def test_every_page_opens_from_the_wheel(wheel_env, playwright):
    port = _free_port()
    server = subprocess.Popen(
        [str(wheel_env["tmp"] / "venv" / "bin" / "estimator-workbench"), "ui", "--port", str(port)],
        cwd=wheel_env["tmp"], env=wheel_env["env"], start_new_session=True,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{url}/_stcore/health", timeout=2)
                break
            except OSError:
                assert server.poll() is None and time.monotonic() < deadline, "the UI did not start"
                time.sleep(0.5)
        # The URL the command printed, with its access token (issue 24.1), opened as a user does.
        printed = None
        while printed is None:
            line = server.stdout.readline().decode(errors="replace")
            assert line, "the UI printed no URL with a token"
            printed = re.search(rf"{re.escape(url)}/\?token=[\w-]+", line)
        # The session's Playwright driver (tests/e2e/conftest.py): one per thread.
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROME_FLAGS, headless=True)
        page = browser.new_page()
        page.goto(printed.group(0))
        page.wait_for_selector('[data-testid="stApp"]', timeout=30_000)
        for name in PAGES:
            page.goto(f"{url}/{name}")
            page.wait_for_selector('[data-testid="stMain"]', timeout=30_000)
            page.wait_for_timeout(1500)
            assert page.locator('[data-testid="stException"]').count() == 0, (
                name, page.locator('[data-testid="stException"]').first.inner_text())
        browser.close()
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=20)


def test_the_wheel_carries_the_licence_and_the_sample_data_licences(wheel_env):
    dist, = wheel_env["site"].glob("estimator_workbench-*.dist-info")
    licence = (dist / "licenses" / "LICENSE").read_text()
    assert licence.lstrip().startswith("Apache License") and "Version 2.0, January 2004" in licence
    assert "END OF TERMS AND CONDITIONS" in licence  # the full text, not a pointer to it
    assert "License-Expression: Apache-2.0" in (dist / "METADATA").read_text()
    data_readme = (wheel_env["site"] / "estimator_workbench" / "sample_data" / "README.md").read_text()
    assert "licence" in data_readme
