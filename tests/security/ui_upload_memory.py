"""Peak RSS of the UI server while N browsers upload a CSV on the Data page at once (issue 24.3).
Not a test (no ``test_``). Needs Debian's chromium.

    .venv/bin/python tests/security/ui_upload_memory.py big.csv 1 8811

Measured (2 loaded cores): one 148 MB CSV of 1.8M rows x 11 columns: 39 s, server RSS 186 MB ->
peak 960 MB, 670 MB kept.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import psutil
from playwright.sync_api import sync_playwright

FILE, N, PORT = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
URL = re.compile(r"http://127\.0\.0\.1:\d+/\?token=[\w-]+")
IDLE = ("() => document.querySelector(\"[data-testid='stApp']\")"
        "?.getAttribute('data-test-script-state') !== 'running'")

tmp = tempfile.mkdtemp(prefix="ui-upload-memory-")
for i in range(N):  # distinct names, one copy on disk
    os.link(FILE, os.path.join(tmp, f"big{i}.csv"))
log = os.path.join(tmp, "server.log")
env = dict(os.environ, PYTHONUNBUFFERED="1", WORKBENCH_WARM_SPARES="0")
with open(log, "w") as out:
    proc = subprocess.Popen([sys.executable, "-m", "estimator_workbench", "--workspace",
                             os.path.join(tmp, "workspace"), "ui", "--port", str(PORT)],
                            stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
try:
    while not URL.search(open(log).read()):
        time.sleep(0.3)
    url = URL.search(open(log).read()).group(0)
    server = next(p for p in psutil.Process(proc.pid).children(recursive=True)
                  if "streamlit" in " ".join(p.cmdline()))
    peak, stop = [server.memory_info().rss], []

    def sample() -> None:
        while not stop:
            try:
                peak.append(server.memory_info().rss)
            except psutil.Error:
                pass
            time.sleep(0.1)

    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=shutil.which("chromium"),
                                         args=["--no-sandbox", "--headless", "--disable-gpu"])
        pages = []
        for _ in range(N):
            page = browser.new_context().new_page()
            page.set_default_timeout(600_000)
            page.goto(url)
            page.wait_for_selector("h1:has-text('Data')")
            page.get_by_text("Upload a file", exact=True).click()
            page.wait_for_function(IDLE)
            pages.append(page)
        before = server.memory_info().rss
        threading.Thread(target=sample, daemon=True).start()
        start = time.monotonic()
        for i, page in enumerate(pages):
            page.get_by_test_id("stFileUploaderDropzoneInput").set_input_files(os.path.join(tmp, f"big{i}.csv"))
        for i, page in enumerate(pages):
            page.get_by_text(f"Using big{i}.csv").wait_for()
            page.wait_for_function(IDLE)
        took = time.monotonic() - start
        time.sleep(3)
        kept = server.memory_info().rss
        stop.append(True)
        browser.close()
    print(f"{N} upload(s) of {os.path.getsize(FILE) / 1e6:.0f} MB: {took:.0f} s; server RSS before "
          f"{before / 1e6:.0f} MB, peak {max(peak) / 1e6:.0f} MB, kept {kept / 1e6:.0f} MB")
finally:
    os.killpg(proc.pid, 15)
    proc.wait(30)
    shutil.rmtree(tmp, ignore_errors=True)
