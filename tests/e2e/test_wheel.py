"""The wheel is the product: build it, install it into a fresh venv outside the checkout, train a
bundled dataset from its CLI and open every UI page by URL path in Chromium (issue 17, item 1), and
run the example notebooks where a user runs them: ``pip install 'estimator-workbench[notebook]'``
into a venv of its own, its kernel, a folder outside the checkout (issue 25, "Done when")."""
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
def built_wheel(tmp_path_factory) -> Path:
    """The project's wheel, built once for the module's environments."""
    dist = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                    "-w", str(dist), str(REPO)], check=True, timeout=300)
    wheel, = dist.glob("estimator_workbench-*.whl")
    return wheel


def _clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without what would point a child at the checkout."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "WORKBENCH_HOME", "VIRTUAL_ENV")}
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def wheel_env(tmp_path_factory, built_wheel) -> dict:
    """A venv that sees this venv's packages but gets ``estimator_workbench`` from the wheel (fast)."""
    tmp = tmp_path_factory.mktemp("wheel")
    wheel = built_wheel
    venv.create(tmp / "venv", with_pip=False)
    python = tmp / "venv" / "bin" / "python"
    site = Path(subprocess.check_output(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], text=True).strip())
    # The current venv's packages (torch, streamlit...) as a plain path line: it does not run the
    # checkout's editable hook, so `workbench` can only come from the wheel.
    (site / "deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q",
                    "--no-deps", str(wheel)], check=True, timeout=300)
    env = _clean_env(PATH=f"{tmp / 'venv' / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
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


@pytest.fixture(scope="module")
def notebook_venv(tmp_path_factory, built_wheel) -> dict:
    """A venv of its own with ``estimator-workbench[notebook]`` installed from the wheel, as a user
    installs it (every dependency really installed, pinned by constraints/cpu.txt), plus ipykernel
    (what any Jupyter frontend brings) registered as a kernel under a private JUPYTER_PATH."""
    tmp = tmp_path_factory.mktemp("notebook-venv")
    venv.create(tmp / "venv", with_pip=False)
    python = tmp / "venv" / "bin" / "python"
    version = built_wheel.name.split("-")[1]  # this wheel, never an index's estimator-workbench
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q",
                    "--find-links", str(built_wheel.parent), "-c", str(REPO / "constraints" / "cpu.txt"),
                    f"estimator-workbench[notebook]=={version}", "ipykernel"],
                   check=True, timeout=900, env=_clean_env(), cwd=tmp)
    installed_s = time.monotonic() - started
    subprocess.run([str(python), "-m", "ipykernel", "install", "--prefix", str(tmp / "jupyter"),
                    "--name", "wheel-venv"], check=True, timeout=120, env=_clean_env(), cwd=tmp,
                   stdout=subprocess.DEVNULL)
    print(f"\n[notebook]-extra install into a fresh venv: {installed_s:.1f} s")
    return {"tmp": tmp, "python": python, "jupyter_path": tmp / "jupyter" / "share" / "jupyter",
            "site": Path(subprocess.check_output(
                [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], text=True).strip())}


@pytest.mark.parametrize("name", ["quickstart", "tf_porting", "workbench_tour"])
def test_example_notebook_runs_in_the_wheels_environment(notebook_venv, name, tmp_path, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    for key in ("PYTHONPATH", "VIRTUAL_ENV"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("JUPYTER_PATH", str(notebook_venv["jupyter_path"]))  # finds the "wheel-venv" kernel
    monkeypatch.setenv("WORKBENCH_HOME", str(tmp_path / "workspace"))  # the kernel inherits it
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    notebook = nbformat.read(REPO / "examples" / "notebooks" / f"{name}.ipynb", as_version=4)
    # One more cell: where the kernel's packages came from (the venv, never the checkout).
    notebook.cells.append(nbformat.v4.new_code_cell(
        "import sys, estimator_engine, estimator_workbench\n"
        "print('WHERE', sys.executable, estimator_engine.__file__, estimator_workbench.__file__)"))
    started = time.monotonic()
    nbclient.NotebookClient(notebook, timeout=600, kernel_name="wheel-venv",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()  # raises on a cell error
    print(f"\n{name}.ipynb in the wheel's venv: {time.monotonic() - started:.1f} s")
    where = next(o["text"] for o in notebook.cells[-1].outputs if o.get("name") == "stdout").split()
    assert where[0] == "WHERE" and where[1].startswith(str(notebook_venv["tmp"] / "venv")), where
    assert all(path.startswith(str(notebook_venv["site"])) for path in where[2:]), where
    text = "".join(o.get("text", "") for c in notebook.cells for o in c.get("outputs", ()))
    assert str(REPO) not in text
    if name == "quickstart":
        assert "Loss for final step:" in text
    if name == "workbench_tour":
        assert len(list((tmp_path / "workspace" / "runs").iterdir())) == 2
        assert list(tmp_path.glob("r-*.ipynb"))
        assert "best for final eval accuracy -> r-" in text  # ws.compare(), live widgets with the extra's anywidget
        compared = next(c for c in notebook.cells if c.cell_type == "code" and "ws.compare(" in c.source)
        assert sum("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in compared.outputs) == 3
