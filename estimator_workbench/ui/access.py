"""Who may talk to the UI server: an access token (as Jupyter does) and same-origin checks, as
ASGI middleware in front of Streamlit's own (``estimator_workbench/ui/asgi.py`` installs it).

Why: 127.0.0.1 is not private. Every account on the machine can connect to a loopback port, and
the UI runs templates -- arbitrary Python -- as the user who started it. A page served from any
other port of localhost is "same-site" for the browser (cookies ignore ports), so it can send
requests with this server's cookies unless the server checks where they come from.

The rules, for every HTTP request and websocket:

1. Only ``/_stcore/health`` is public (it answers ``ok`` and nothing else; start scripts and
   tests poll it).
2. A request that names another origin is refused (403): an ``Origin`` header whose host[:port]
   is not this request's ``Host`` (``http://localhost:9999`` calling ``localhost:8501``), or a
   browser sub-request (``Sec-Fetch-Site: same-site`` or ``cross-site`` and not a top-level
   navigation) from another page. The ``Host`` itself must be in ``server.allowedHosts`` (DNS
   rebinding; Streamlit checks it on the websocket only).
3. Unless the server runs with ``--no-token``, the request carries the token: ``?token=`` (the URL
   printed at start), an ``Authorization: token <t>`` header, or the cookie set after the first
   visit (``HttpOnly; SameSite=Strict``, named per port because cookies are shared between the
   ports of one host). A page opened with ``?token=`` answers with the cookie and moves on to the
   same URL without the token, so the token does not stay in the address bar or the app's query
   parameters. Anything else gets 403: a page to paste the token into for a browser, a closed
   websocket (HTTP 403 on the upgrade) for a client.

Every browser also gets a random ``workbench-browser-<port>`` cookie on its first request (token
or not): the UI keeps a browser's unsaved editor text under it (``session.browser_id``).

The token is made fresh by each server (``secrets.token_urlsafe(32)``), printed in the URL at
start, and written to ``<workspace>/.ui/server-<port>.json`` (0600 in a 0700 folder), deleted when
the server stops.

Example::

    >>> gate = AccessGate(app=None, token="s3cret")  # doctest: +SKIP
    >>> # GET /?token=s3cret -> 200 + Set-Cookie; GET / (no cookie) -> 403
"""

from __future__ import annotations

import hashlib
import hmac
import html
import json
import logging
import os
import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from estimator_workbench.store import paths

__all__ = ["NO_TOKEN_ENV", "PUBLIC_PATHS", "AccessGate", "browser_cookie_name", "cookie_name", "cookie_value",
           "gate_installed", "new_token", "remove_token_file", "server_url", "write_token_file"]

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

# ``estimator-workbench ui --no-token`` sets this for the server: no token, Origin checks kept.
NO_TOKEN_ENV = "WORKBENCH_NO_TOKEN"
PUBLIC_PATHS = frozenset({"/_stcore/health"})
_SAFE_METHODS = frozenset({"GET", "HEAD"})
_installed: list[AccessGate] = []
_log = logging.getLogger("estimator_workbench.ui")


def new_token() -> str:
    """A fresh random access token (256 bits, URL-safe)."""
    return secrets.token_urlsafe(32)


def gate_installed() -> bool:
    """True in a server process whose ASGI app has the gate in front (``asgi.py``); False under
    ``streamlit run app.py`` or ``AppTest``."""
    return bool(_installed)


def cookie_name(port: int | str) -> str:
    """The cookie that holds this server's login: one per port, since a browser sends the
    cookies of ``localhost`` to every port of it."""
    return f"workbench-token-{port}"


def browser_cookie_name(port: int | str) -> str:
    """The cookie that tells this browser from others (a random id, set on its first request):
    what the UI keys a browser's unsaved editor text by, so that it comes back after a reload of
    that browser and never shows up in another one."""
    return f"workbench-browser-{port}"


def cookie_value(token: str) -> str:
    """What the cookie holds: a keyed hash of the token, not the token itself (it opens this
    server but cannot be turned back into the URL to share)."""
    return hmac.new(token.encode(), b"estimator-workbench-ui-cookie", hashlib.sha256).hexdigest()


def server_url(address: str, port: int, token: str | None) -> str:
    """The URL to open: ``http://127.0.0.1:8501/?token=...`` (no token part without one)."""
    host = address.strip().strip("[]")
    if host in ("", "0.0.0.0", "::"):
        host = "127.0.0.1"
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}/" + (f"?token={token}" if token else "")


def write_token_file(root: Path, port: int, url: str, token: str) -> Path:
    """Writes ``<workspace>/.ui/server-<port>.json`` ({"url", "token", "pid"}), owner-only."""
    path = paths.ui_server_file(root, port)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(path.parent, 0o700)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump({"url": url, "token": token, "pid": os.getpid()}, handle)
    os.replace(tmp, path)
    return path


def remove_token_file(root: Path, port: int) -> None:
    """Deletes the token file of a stopping server (only if it is this process's)."""
    path = paths.ui_server_file(root, port)
    try:
        if json.loads(path.read_text(encoding="utf-8")).get("pid") == os.getpid():
            path.unlink()
    except (OSError, ValueError):
        pass


def _same_origin(origin: str, host: str) -> bool:
    # Compared as host[:port], scheme aside, so that a TLS-terminating proxy that keeps the Host
    # header works; "null" (sandboxed frames, file://) never matches.
    netloc = urlsplit(origin).netloc.lower()
    return bool(netloc) and netloc == host.lower()


_LOGIN_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Estimator Workbench: token needed</title>
<style>body{{font-family:sans-serif;max-width:40em;margin:4em auto;line-height:1.5}}
input{{width:100%;padding:.4em;font-family:monospace}}</style></head>
<body><h1>Estimator Workbench</h1>
<p>{message}</p>
<p>Open the URL that <code>estimator-workbench ui</code> printed when it started (it ends with
<code>?token=...</code>), or paste the token here. The token is also in
<code>&lt;workspace&gt;/.ui/server-&lt;port&gt;.json</code>, readable by the account that started
the server only.</p>
<form method="get" action="{action}"><input name="token" type="password" autocomplete="off"
 placeholder="token" autofocus> <button type="submit">Open</button></form>
</body></html>
"""

_CONTINUE_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="0;url={url}">
<title>Estimator Workbench</title></head>
<body><p><a href="{url}">Continue to the Estimator Workbench</a></p></body></html>
"""


class AccessGate:
    """ASGI middleware: the token and same-origin rules of this module, in front of ``app``.

    Args:
        app: the ASGI app behind the gate (Streamlit's).
        token: the access token; None serves without one (``--no-token``; Origin checks stay).
        host_allowed: whether a ``Host`` header is accepted (Streamlit's check against
            ``server.allowedHosts``); None accepts any.

    Example::

        >>> from starlette.middleware import Middleware
        >>> Middleware(AccessGate, token=new_token())  # doctest: +SKIP
    """

    def __init__(self, app: ASGIApp, token: str | None,
                 host_allowed: Callable[[str | None], bool] | None = None) -> None:
        self.app = app
        self.token = token or None
        self._cookie = cookie_value(token) if token else None
        self._host_allowed = host_allowed or (lambda _host: True)
        _installed.append(self)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind not in ("http", "websocket") or scope.get("path") in PUBLIC_PATHS:
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        problem = self._foreign(kind, scope, headers)
        if problem:
            _log.warning("Refused %s %s: %s", kind, scope.get("path"), problem)
            await self._deny(kind, scope, send, problem)
            return
        send = self._with_browser_cookie(scope, headers, send)
        if self.token is None:
            await self.app(scope, receive, send)
            return
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True))
        given = query.get("token")
        if given is not None and hmac.compare_digest(given.encode(), self.token.encode()):
            if kind == "http" and scope.get("method") in _SAFE_METHODS:
                await self._set_cookie_and_continue(scope, send, query)
                return
            await self.app(scope, receive, send)
            return
        if self._authorized(headers, scope):
            await self.app(scope, receive, send)
            return
        await self._deny(kind, scope, send, "this server needs its access token"
                         + (": the token given is wrong" if given is not None else ""))

    def _foreign(self, kind: str, scope: Scope, headers: dict[str, str]) -> str | None:
        """Why the request comes from elsewhere than this server's own pages (None if it does not)."""
        host = headers.get("host", "")
        if not self._host_allowed(headers.get("host")):
            return f"Host {host!r} is not one of server.allowedHosts"
        origin = headers.get("origin")
        if origin is not None and not _same_origin(origin, host):
            return f"Origin {origin!r} is not this server ({host!r})"
        site = headers.get("sec-fetch-site")
        if site in ("same-site", "cross-site") and not (
                kind == "http" and headers.get("sec-fetch-mode") == "navigate"
                and scope.get("method") in _SAFE_METHODS):
            return f"a {site} request from another page"
        return None

    def _with_browser_cookie(self, scope: Scope, headers: dict[str, str], send: Send) -> Send:
        """``send`` that adds the browser-id cookie to an HTTP response when the request has none."""
        name = browser_cookie_name(_port(scope))
        if scope["type"] != "http" or f"{name}=" in headers.get("cookie", ""):
            return send
        cookie = (f"{name}={secrets.token_urlsafe(16)}; Path=/; HttpOnly; SameSite=Strict; "
                  "Max-Age=31536000").encode()

        async def send_with_cookie(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message = dict(message, headers=[*message.get("headers", []), (b"set-cookie", cookie)])
            await send(message)

        return send_with_cookie

    def _authorized(self, headers: dict[str, str], scope: Scope) -> bool:
        scheme, _, value = headers.get("authorization", "").partition(" ")
        if scheme.lower() == "token" and self.token and hmac.compare_digest(
                value.strip().encode(), self.token.encode()):
            return True
        wanted = cookie_name(_port(scope))
        for part in headers.get("cookie", "").split(";"):
            name, _, value = part.strip().partition("=")
            if name == wanted and self._cookie and hmac.compare_digest(value.encode(), self._cookie.encode()):
                return True
        return False

    async def _set_cookie_and_continue(self, scope: Scope, send: Send, query: dict[str, str]) -> None:
        # A page, not a 302: after a redirect that a link on another site started, the browser
        # would not send a SameSite=Strict cookie; a refresh from this page is same-origin.
        query.pop("token", None)
        url = scope.get("root_path", "") + scope["path"] + (f"?{urlencode(query)}" if query else "")
        cookie = (f"{cookie_name(_port(scope))}={self._cookie}; Path=/; HttpOnly; SameSite=Strict"
                  + ("; Secure" if scope.get("scheme") == "https" else ""))
        body = _CONTINUE_PAGE.format(url=html.escape(url, quote=True)).encode()
        await _respond(send, 200, body, "text/html; charset=utf-8",
                       [(b"set-cookie", cookie.encode()), (b"cache-control", b"no-store"),
                        (b"referrer-policy", b"no-referrer")])

    async def _deny(self, kind: str, scope: Scope, send: Send, reason: str) -> None:
        if kind == "websocket":
            # Closing before accepting makes the server answer the upgrade with HTTP 403.
            await send({"type": "websocket.close", "code": 1008, "reason": reason[:100]})
            return
        body = _LOGIN_PAGE.format(message=html.escape(reason[0].upper() + reason[1:] + "."),
                                  action=html.escape(scope.get("path", "/"), quote=True)).encode()
        await _respond(send, 403, body, "text/html; charset=utf-8", [(b"cache-control", b"no-store")])


def _port(scope: Scope) -> int | str:
    server = scope.get("server")
    return server[1] if server and server[1] else "0"


async def _respond(send: Send, status: int, body: bytes, content_type: str,
                   extra: list[tuple[bytes, bytes]]) -> None:
    headers = [(b"content-type", content_type.encode()), (b"content-length", str(len(body)).encode()),
               (b"x-content-type-options", b"nosniff"), *extra]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
