"""A real ``mlflow server`` for tests: SQLite backend and a local artifact root in a temporary folder,
on a loopback port, in a process group of its own (stopped with SIGTERM, then SIGKILL).

The workbench's ``mlflow`` extra is MLflow's client (mlflow-skinny); the server needs the full
``mlflow`` package, which caps pyarrow below the project's lock, so it may live in a venv of its
own: ``$WORKBENCH_TEST_MLFLOW_SERVER`` names its ``mlflow`` executable (.ci/run makes that venv).
Without it, the test venv's ``mlflow`` is used when it can serve. ``find_server`` says why not.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from child_processes import stop_group

__all__ = ["SERVER_ENV_VAR", "MlflowServer", "find_server", "free_port"]

SERVER_ENV_VAR = "WORKBENCH_TEST_MLFLOW_SERVER"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def find_server() -> tuple[str | None, str]:
    """``(mlflow executable, '')`` of a server that can start, or ``(None, why not)``."""
    given = os.environ.get(SERVER_ENV_VAR)
    if given:
        return (given, "") if os.access(given, os.X_OK) else (None, f"${SERVER_ENV_VAR}={given!r} is not executable")
    here = Path(sys.executable).with_name("mlflow")
    if here.exists() and importlib.util.find_spec("flask") is not None and importlib.util.find_spec("mlflow.server"):
        return str(here), ""
    on_path = shutil.which("mlflow")
    why = (f"no MLflow server: set ${SERVER_ENV_VAR} to the `mlflow` executable of a venv with the full mlflow "
           "package (pip install mlflow), as .ci/run does")
    return (None, why) if on_path is None else (None, why + f" ({on_path} was found, but may not serve)")


class MlflowServer:
    """``mlflow server`` with a SQLite backend under ``folder``; ``start()`` waits for ``/health``.

    Example:
        >>> server = MlflowServer("/path/to/mlflow", tmp_path); server.start()     # doctest: +SKIP
        >>> server.uri                                                              # doctest: +SKIP
        'http://127.0.0.1:53211'
    """

    def __init__(self, executable: str, folder: Path, port: int | None = None) -> None:
        self.executable = executable
        self.folder = Path(folder)
        self.port = port or free_port()
        self.uri = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None
        self._log = None

    def start(self, timeout: float = 240.0) -> MlflowServer:
        self.folder.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}  # no job workers (huey)
        self._log = open(self.folder / "server.log", "ab")  # closed in stop()
        self.proc = subprocess.Popen(
            [self.executable, "server", "--backend-store-uri", f"sqlite:///{self.folder / 'mlflow.db'}",
             "--artifacts-destination", str(self.folder / "artifacts"), "--host", "127.0.0.1",
             "--port", str(self.port), "--workers", "1"],
            stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
            cwd=self.folder, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"mlflow server exited with {self.proc.returncode}:\n{self.output()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{self.uri}/health", timeout=5) as response:
                    if response.status == 200:
                        return self
            except OSError:
                time.sleep(0.3)  # polling for the port to open, not waiting for an assertion
        self.stop()
        raise RuntimeError(f"mlflow server did not answer /health within {timeout:.0f} s:\n{self.output()[-3000:]}")

    def output(self) -> str:
        path = self.folder / "server.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self) -> None:
        """SIGTERM to the server's group (uvicorn and its workers), SIGKILL to what is left."""
        if self.proc is not None:
            stop_group(self.proc, grace=30)
            self.proc = None
        if self._log is not None:
            self._log.close()
            self._log = None
