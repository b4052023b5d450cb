"""Issue 24 item 1: 127.0.0.1 is reachable by every account on the machine, so the UI server asks
for an access token (as Jupyter does) on every HTTP request and websocket, sets an HttpOnly
SameSite=Strict cookie after ``?token=``, refuses other origins (a page on another localhost port),
and ``--no-token`` serves without it after a warning. Against real ``estimator-workbench ui``
servers; one test connects as another Unix account (uid 65534)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("streamlit")
websockets_client = pytest.importorskip("websockets.sync.client")
from websockets.exceptions import InvalidStatus  # noqa: E402

from estimator_workbench.cli import serve  # noqa: E402
from estimator_workbench.store import paths  # noqa: E402
from estimator_workbench.ui import access  # noqa: E402

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_ui(home: Path, log: Path, *extra: str) -> tuple[subprocess.Popen, int]:
    port = free_port()
    env = dict(os.environ, PYTHONUNBUFFERED="1", WORKBENCH_WARM_SPARES="0")
    env.pop("WORKBENCH_HOME", None)
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "estimator_workbench", "--workspace", str(home),
                                 "ui", "--port", str(port), *extra], cwd=home.parent, env=env,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                preexec_fn=lambda: os.umask(0o022))  # a shell's usual umask
    deadline = time.monotonic() + 90
    while "http://127.0.0.1:" not in log.read_text(errors="replace"):
        assert proc.poll() is None, f"the UI server exited:\n{log.read_text()}"
        assert time.monotonic() < deadline, f"no URL printed:\n{log.read_text()}"
        time.sleep(0.2)
    return proc, port


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.fixture(scope="module")
def ui(tmp_path_factory):
    """A UI started as a user does; yields (port, URL printed, workspace, log)."""
    base = tmp_path_factory.mktemp("token-ui")
    home, log = base / "workspace", base / "server.log"
    proc, port = start_ui(home, log)
    url = re.search(r"(http://127\.0\.0\.1:\d+/\?token=[\w-]+)", log.read_text()).group(1)
    try:
        yield {"port": port, "url": url, "home": home, "log": log, "proc": proc}
    finally:
        stop(proc)


def get(url: str, headers: dict[str, str] | None = None, method: str = "GET",
        data: bytes | None = None) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, headers=headers or {}, method=method, data=data)
    try:
        with urllib.request.urlopen(request, timeout=20) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def set_cookies(url: str, headers: dict[str, str] | None = None) -> dict[str, str]:
    """name -> the full Set-Cookie value of each cookie the answer sets."""
    request = urllib.request.Request(url, headers=headers or {})
    try:
        response = urllib.request.urlopen(request, timeout=20)
    except urllib.error.HTTPError as exc:
        response = exc
    with response:
        return {c.split("=", 1)[0]: c for c in response.headers.get_all("set-cookie") or []}


def login_cookie(ui) -> str:
    status, _, body = get(ui["url"])
    assert status == 200, body
    return set_cookies(ui["url"])[access.cookie_name(ui["port"])].split(";", 1)[0]


def ws_status(port: int, *, headers: dict[str, str] | None = None, query: str = "") -> int:
    """The HTTP status of a websocket upgrade to the app's stream (101 when it opens)."""
    try:
        with websockets_client.connect(f"ws://127.0.0.1:{port}/_stcore/stream{query}",
                                       additional_headers=headers or {}, subprotocols=["streamlit"],
                                       open_timeout=20, origin=None):
            return 101
    except InvalidStatus as exc:
        return exc.response.status_code


class TestTokenRequired:
    def test_the_printed_url_carries_the_token_kept_owner_only(self, ui):
        record = paths.ui_server_file(ui["home"], ui["port"])
        assert stat.S_IMODE(record.stat().st_mode) == 0o600
        assert stat.S_IMODE(record.parent.stat().st_mode) == 0o700
        saved = json.loads(record.read_text())
        assert saved["url"] == ui["url"] and ui["url"].endswith("?token=" + saved["token"])
        assert len(saved["token"]) >= 40
        assert "You can now view your Streamlit app" not in ui["log"].read_text()  # no tokenless URL

    @pytest.mark.parametrize("path", ["/", "/run?run=x", "/_stcore/host-config",
                                      "/static/js/index.js", "/_stcore/upload_file/s/f",
                                      "/media/x.png", "/component/x/index.html", "/?token=wrong"])
    def test_without_the_token_every_path_but_health_is_403(self, ui, path):
        status, _, body = get(f"http://127.0.0.1:{ui['port']}{path}")
        assert status == 403
        assert b"access token" in body
        assert get(f"http://127.0.0.1:{ui['port']}/_stcore/health")[0] == 200

    def test_an_upload_without_the_token_is_refused(self, ui):
        status, _, _ = get(f"http://127.0.0.1:{ui['port']}/_stcore/upload_file/s/f", method="PUT",
                           data=b"x" * 1000, headers={"Content-Type": "application/octet-stream"})
        assert status == 403

    def test_the_token_sets_an_httponly_strict_cookie_and_drops_the_token_from_the_url(self, ui):
        status, _, body = get(ui["url"].replace("/?", "/run?run=r-1&"))
        assert status == 200
        cookie = set_cookies(ui["url"])[f"workbench-token-{ui['port']}"]
        assert cookie.startswith(f"workbench-token-{ui['port']}=")
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
        token = ui["url"].rsplit("=", 1)[1]
        assert token not in cookie  # a keyed hash of it, not the token
        assert b'url=/run?run=r-1"' in body and token.encode() not in body

    def test_with_the_cookie_pages_static_files_and_the_stream_work(self, ui):
        cookie = login_cookie(ui)
        status, _, body = get(f"http://127.0.0.1:{ui['port']}/", {"Cookie": cookie})
        assert status == 200 and b"<script" in body
        script = re.search(rb'src="\.?(/static/js/[^"]+)"', body).group(1).decode()
        assert get(f"http://127.0.0.1:{ui['port']}{script}", {"Cookie": cookie})[0] == 200
        assert ws_status(ui["port"], headers={"Cookie": cookie}) == 101
        assert ws_status(ui["port"], headers={"Authorization": "token " + ui["url"].rsplit("=", 1)[1]}) == 101

    def test_the_stream_without_the_token_is_refused(self, ui):
        assert ws_status(ui["port"]) == 403
        assert ws_status(ui["port"], query="?token=guess") == 403
        assert ws_status(ui["port"], headers={"Cookie": f"workbench-token-{ui['port']}=00"}) == 403

    def test_each_browser_gets_its_own_id_cookie_once(self, ui):
        """Issue 24.6: the UI keys a browser's unsaved editor text by this cookie."""
        name = access.browser_cookie_name(ui["port"])
        first, second = set_cookies(ui["url"])[name], set_cookies(ui["url"])[name]
        assert first != second  # two browsers, two ids
        assert "HttpOnly" in first and "SameSite=Strict" in first
        cookie = login_cookie(ui) + "; " + first.split(";", 1)[0]
        assert name not in set_cookies(f"http://127.0.0.1:{ui['port']}/", {"Cookie": cookie})

    def test_another_servers_cookie_does_not_open_this_one(self, ui):
        value = login_cookie(ui).split("=", 1)[1]
        other = f"workbench-token-{ui['port'] + 1}={value}"
        assert get(f"http://127.0.0.1:{ui['port']}/", {"Cookie": other})[0] == 403


def test_the_server_runs_with_umask_077_and_an_owner_only_workspace(ui):
    """Issue 24.8: uploads and ui_state.json are written by the server process: its umask."""
    import psutil

    servers = [p for p in psutil.Process(ui["proc"].pid).children(recursive=True)
               if "streamlit" in " ".join(p.cmdline())]
    assert servers
    for server in servers:
        umask = next(line for line in Path(f"/proc/{server.pid}/status").read_text().splitlines()
                     if line.startswith("Umask:"))
        assert umask.split()[1] == "0077"
    assert stat.S_IMODE(ui["home"].stat().st_mode) == 0o700


class TestOrigin:
    @pytest.mark.parametrize("origin", ["http://localhost:9999", "http://127.0.0.1:9999",
                                        "http://evil.test", "null"])
    def test_another_origin_is_refused_even_with_the_cookie(self, ui, origin):
        cookie = login_cookie(ui)
        port = ui["port"]
        assert ws_status(port, headers={"Cookie": cookie, "Origin": origin}) == 403
        status, _, _ = get(f"http://127.0.0.1:{port}/_stcore/upload_file/s/f", method="PUT", data=b"x",
                           headers={"Cookie": cookie, "Origin": origin})
        assert status == 403
        assert get(f"http://127.0.0.1:{port}/_stcore/host-config", {"Cookie": cookie, "Origin": origin})[0] == 403

    def test_the_servers_own_origin_is_accepted(self, ui):
        cookie, port = login_cookie(ui), ui["port"]
        assert ws_status(port, headers={"Cookie": cookie, "Origin": f"http://127.0.0.1:{port}"}) == 101
        assert get(f"http://127.0.0.1:{port}/_stcore/host-config",
                   {"Cookie": cookie, "Origin": f"http://127.0.0.1:{port}"})[0] == 200

    def test_a_subresource_request_from_another_port_is_refused(self, ui):
        # <img src> or <script src> on a page of localhost:9999: no Origin, but Sec-Fetch-Site.
        cookie, port = login_cookie(ui), ui["port"]
        headers = {"Cookie": cookie, "Sec-Fetch-Site": "same-site", "Sec-Fetch-Mode": "no-cors"}
        assert get(f"http://127.0.0.1:{port}/_stcore/host-config", headers)[0] == 403
        navigate = {"Cookie": cookie, "Sec-Fetch-Site": "same-site", "Sec-Fetch-Mode": "navigate"}
        assert get(f"http://127.0.0.1:{port}/", navigate)[0] == 200  # a link the user follows

    def test_a_rebinding_host_is_refused_on_http_too(self, ui):
        cookie, port = login_cookie(ui), ui["port"]
        assert get(f"http://127.0.0.1:{port}/", {"Cookie": cookie, "Host": f"rebind.attacker.test:{port}"})[0] == 403


_OTHER_ACCOUNT = textwrap.dedent("""
    import json, sys
    from websockets.sync.client import connect
    from websockets.exceptions import InvalidStatus
    port, record = int(sys.argv[1]), sys.argv[2]
    result = {}
    try:
        open(record).read()
        result["token_file"] = "read"
    except OSError as exc:
        result["token_file"] = type(exc).__name__
    try:
        with connect(f"ws://127.0.0.1:{port}/_stcore/stream", subprotocols=["streamlit"],
                     open_timeout=20):
            result["stream"] = 101
    except InvalidStatus as exc:
        result["stream"] = exc.response.status_code
    print(json.dumps(result))
""")


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                    reason="needs root and setpriv to act as another account")
def test_another_account_cannot_open_the_stream(ui):
    """uid 65534 on the same machine: neither reads the token file nor opens the websocket."""
    record = paths.ui_server_file(ui["home"], ui["port"])
    proc = subprocess.run(["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups",
                           sys.executable, "-c", _OTHER_ACCOUNT, str(ui["port"]), str(record)],
                          capture_output=True, text=True, timeout=60, cwd="/",
                          env={"PATH": os.environ["PATH"], "HOME": "/nonexistent"})
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result == {"token_file": "PermissionError", "stream": 403}


def test_no_token_serves_without_it_after_a_warning_and_keeps_origin_checks(tmp_path):
    log = tmp_path / "server.log"
    proc, port = start_ui(tmp_path / "workspace", log, "--no-token")
    try:
        text = log.read_text()
        assert serve.NO_TOKEN_WARNING in text
        assert "NO access token" in text
        assert not paths.ui_server_file(tmp_path / "workspace", port).exists()
        assert get(f"http://127.0.0.1:{port}/")[0] == 200
        assert ws_status(port) == 101
        assert ws_status(port, headers={"Origin": "http://localhost:9999"}) == 403
    finally:
        stop(proc)


def test_the_token_file_is_removed_when_the_server_stops(tmp_path):
    home = tmp_path / "workspace"
    proc, port = start_ui(home, tmp_path / "server.log")
    record = paths.ui_server_file(home, port)
    assert record.exists()
    stop(proc)
    assert not record.exists()


def test_the_command_serves_the_gated_app_and_hides_the_tokenless_url():
    cmd = serve.ui_command()
    assert cmd[4].endswith("estimator_workbench/ui/asgi.py")
    assert cmd[cmd.index("--logger.hideWelcomeMessage") + 1] == "true"
    assert access.server_url("::1", 8501, "t") == "http://[::1]:8501/?token=t"
    assert access.server_url("0.0.0.0", 8501, None) == "http://127.0.0.1:8501/"


def test_the_app_refuses_to_serve_without_the_gate(workspace, monkeypatch):
    """``streamlit run estimator_workbench/ui/app.py`` by hand: a real server, no token gate."""
    from streamlit.testing.v1 import AppTest

    from estimator_workbench.ui import session

    monkeypatch.setattr(session, "bound_addresses", lambda: ["127.0.0.1"])
    at = AppTest.from_file(str(REPO / "estimator_workbench" / "ui" / "app.py"), default_timeout=60)
    at.run()
    assert not at.exception
    assert any("without the workbench's access gate" in e.value for e in at.error)
    assert not at.title  # no page ran
    monkeypatch.setattr(access, "gate_installed", lambda: True)
    at = AppTest.from_file(str(REPO / "estimator_workbench" / "ui" / "app.py"), default_timeout=60)
    at.run()
    assert not at.exception and not at.error and at.title
