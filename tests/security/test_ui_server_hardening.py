"""Issue 14 items 1-3 and issue 17.4 against a real Streamlit server: DNS rebinding (Host allow-list
on the websocket), an exposed UI refuses to serve without a password, the password never sits in
the server's or a runner's environment, and SIGTERM to `estimator-workbench ui` ends the server."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
import tomllib

psutil = pytest.importorskip("psutil")
pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

from estimator_workbench.cli import serve  # noqa: E402
from estimator_workbench.execution.processes import without_secrets  # noqa: E402
from estimator_workbench.store import paths  # noqa: E402
from estimator_workbench.ui import access, session  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
APP = str(REPO / "estimator_workbench" / "ui" / "app.py")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(port: int, proc: subprocess.Popen, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"the UI server exited with {proc.returncode}"
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                s.sendall(f"GET /_stcore/health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                          "Connection: close\r\n\r\n".encode())
                if s.recv(64).startswith(b"HTTP/1.1 200"):
                    return
        time.sleep(0.3)
    raise AssertionError("the UI server did not become healthy")


def websocket_status(port: int, host: str, token: str = "") -> bytes:
    """The status line the server answers to a websocket upgrade whose Host and Origin are
    ``host`` (what a page on a DNS-rebinding domain sends to 127.0.0.1), with the access token."""
    request = (f"GET /_stcore/stream?token={token} HTTP/1.1\r\nHost: {host}\r\nOrigin: http://{host}\r\n"
               "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
               "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
               "Sec-WebSocket-Protocol: streamlit\r\n\r\n")
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(request.encode())
        return s.recv(256).split(b"\r\n", 1)[0]


@pytest.fixture
def ui_server(workspace, tmp_path):
    """``estimator-workbench ui`` started as a user would, with WORKBENCH_PASSWORD and a cloud key
    in its environment; yields (cli process, port); ended by SIGTERM to the CLI."""
    port = free_port()
    env = dict(os.environ, WORKBENCH_HOME=str(workspace), WORKBENCH_PASSWORD="hunter2-secret",
               AWS_SECRET_ACCESS_KEY="aws-secret-value")
    proc = subprocess.Popen([sys.executable, "-m", "estimator_workbench", "ui", "--port", str(port)],
                            cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_healthy(port, proc)
        yield proc, port
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                for child in psutil.Process(proc.pid).children(recursive=True):
                    child.kill()
                proc.kill()
                proc.wait()


class TestDnsRebinding:
    def test_command_and_config_accept_only_the_bound_hosts(self):
        cmd = serve.ui_command("127.0.0.1", 8501, ["proxy.example.org"])
        hosts = [cmd[i + 1] for i, a in enumerate(cmd) if a == "--server.allowedHosts"]
        assert hosts == ["localhost", "127.0.0.1", "::1", "proxy.example.org"]
        assert serve.allowed_hosts("192.168.1.5") == ["localhost", "127.0.0.1", "::1", "192.168.1.5"]
        assert socket.gethostname().lower() in serve.allowed_hosts("0.0.0.0")
        config = tomllib.loads((REPO / ".streamlit" / "config.toml").read_text())
        assert config["server"]["allowedHosts"] == ["localhost", "127.0.0.1", "::1"]

    def test_a_rebinding_host_is_refused_on_the_websocket(self, ui_server, workspace):
        _, port = ui_server
        token = json.loads(paths.ui_server_file(workspace, port).read_text())["token"]
        assert websocket_status(port, f"127.0.0.1:{port}", token).startswith(b"HTTP/1.1 101")
        assert websocket_status(port, f"localhost:{port}", token).startswith(b"HTTP/1.1 101")
        refused = websocket_status(port, f"rebind.attacker.test:{port}", token)
        assert not refused.startswith(b"HTTP/1.1 101"), refused


class TestSecretsStayOutOfEnvironments:
    def test_the_server_environment_has_no_password_and_sigterm_ends_the_server(self, ui_server):
        cli_proc, port = ui_server
        servers = psutil.Process(cli_proc.pid).children(recursive=True)
        assert servers, "the CLI started no server process"
        for server in servers:
            environ = server.environ()
            assert "WORKBENCH_PASSWORD" not in environ
            assert "hunter2-secret" not in "\n".join(environ.values())
            secret_file = Path(environ["WORKBENCH_PASSWORD_FILE"])
            assert stat.S_IMODE(secret_file.stat().st_mode) == 0o600
            assert secret_file.read_text() == "hunter2-secret"
        cli_proc.send_signal(signal.SIGTERM)
        cli_proc.wait(20)
        _, alive = psutil.wait_procs(servers, timeout=20)
        assert not alive, f"SIGTERM to the UI command left the server running: {alive}"
        with socket.socket() as s:
            assert s.connect_ex(("127.0.0.1", port)) != 0, "the port still listens"
        assert not secret_file.exists(), "the password file outlived the server"

    def test_the_app_reads_the_password_file_once_and_deletes_it(self, workspace, monkeypatch,
                                                                 tmp_path):
        secret = tmp_path / "pw"
        secret.write_text("from-file")
        monkeypatch.setattr(session, "_password_cache", [])
        monkeypatch.delenv("WORKBENCH_PASSWORD", raising=False)
        monkeypatch.setenv("WORKBENCH_PASSWORD_FILE", str(secret))
        assert session.password() == "from-file"
        assert not secret.exists() and "WORKBENCH_PASSWORD_FILE" not in os.environ
        assert session.password() == "from-file"  # cached: the file is gone

    @pytest.mark.parametrize("name", ["AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "HF_TOKEN",
                                      "GITHUB_TOKEN", "OPENAI_API_KEY", "DB_PASSWORD",
                                      "AZURE_STORAGE_KEY", "GOOGLE_APPLICATION_CREDENTIALS",
                                      "WORKBENCH_PASSWORD_FILE", "AWS_ACCESS_KEY_ID"])
    def test_runner_environment_drops_every_secret_looking_variable(self, name):
        kept = {"PATH": "/bin", "WORKBENCH_HOME": "/ws", "KEYBOARD": "us", "GIT_AUTHOR_NAME": "a",
                "CUDA_VISIBLE_DEVICES": "0"}
        assert without_secrets({**kept, name: "value"}) == kept


class TestExposedByAnyRoute:
    def test_an_empty_address_is_exposed(self):
        assert session.warn_if_exposed("") is not None
        assert session.warn_if_exposed(None) is not None
        assert session.warn_if_exposed("127.0.0.1") is None and session.warn_if_exposed("::1") is None

    def test_the_app_refuses_to_serve_beyond_loopback_without_a_password(self, workspace,
                                                                         monkeypatch):
        monkeypatch.setattr(session, "bound_addresses", lambda: ["0.0.0.0"])
        monkeypatch.setattr(access, "gate_installed", lambda: True)  # served by asgi.py
        monkeypatch.setattr(session, "_password_cache", [])
        monkeypatch.delenv("WORKBENCH_PASSWORD", raising=False)
        at = AppTest.from_file(APP, default_timeout=60)
        at.run()
        assert not at.exception
        assert any("Refusing to serve" in e.value for e in at.error)
        assert not at.title  # no page ran

    def test_with_a_password_it_asks_for_it(self, workspace, monkeypatch):
        monkeypatch.setattr(session, "bound_addresses", lambda: ["0.0.0.0"])
        monkeypatch.setattr(access, "gate_installed", lambda: True)
        monkeypatch.setattr(session, "_password_cache", [])
        monkeypatch.setenv("WORKBENCH_PASSWORD", "pw")
        at = AppTest.from_file(APP, default_timeout=60)
        at.run()
        assert not at.exception and not at.error
        assert [t for t in at.text_input if t.key == "_password"]

    def test_bound_addresses_reads_the_real_listening_socket(self, monkeypatch):
        with socket.socket() as s:
            s.bind(("0.0.0.0", 0))
            s.listen()
            port = s.getsockname()[1]
            monkeypatch.setattr(session.st, "get_option",
                                lambda name: port if name == "server.port" else None)
            assert session.bound_addresses() == ["0.0.0.0"]
