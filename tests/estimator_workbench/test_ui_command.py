"""``estimator-workbench ui`` leaves no Streamlit server behind: the server replaces the command's
process (exec), so SIGTERM to the command stops the server and frees its port."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil
import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_open(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.mark.slow
def test_sigterm_to_the_ui_command_stops_the_server(tmp_path):
    command = shutil.which("estimator-workbench", path=str(Path(sys.executable).parent))
    assert command, "estimator-workbench is not installed in this venv (pip install -e .)"
    port = free_port()
    proc = subprocess.Popen([command, "--workspace", str(tmp_path / "ws"), "ui", "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=1) as r:
                    if r.read() == b"ok":
                        break
            except OSError:
                pass
            assert proc.poll() is None, "the UI command ended before serving"
            assert time.monotonic() < deadline, "the UI did not answer /_stcore/health within 60 s"
            time.sleep(0.2)
        family = [proc.pid] + [c.pid for c in psutil.Process(proc.pid).children(recursive=True)]
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        deadline = time.monotonic() + 10
        while port_open(port) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not port_open(port), "the Streamlit server still listens after SIGTERM to the command"
        left = [p for p in family if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
        assert left == [], f"processes left behind: {left}"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
