"""The UI server's ASGI app: Streamlit's ``st.App`` over ``app.py`` with the access gate
(``estimator_workbench.ui.access``) in front. ``estimator-workbench ui`` runs
``streamlit run <this file>``; Streamlit finds ``app`` below and serves it with uvicorn.

The server creates files owner-only (umask 077) and makes an existing workspace 0700 at start.
At start it makes the access token (unless ``$WORKBENCH_NO_TOKEN`` is ``1``: ``--no-token``),
prints the URL that carries it, and writes it to ``<workspace>/.ui/server-<port>.json`` (0600),
deleted at shutdown.
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import streamlit as st
from starlette.middleware import Middleware
from streamlit import config as st_config
from streamlit.web.server.starlette.starlette_websocket import is_host_allowed

from estimator_workbench.store import paths
from estimator_workbench.ui import access, auth_config

__all__ = ["app"]

paths.owner_only_umask()  # uploads, ui_state.json, run folders: owner-only (issue 24.8)
# Each person signs in (OIDC or the users file): that replaces the token, as a password does in
# Jupyter; the provider's redirect to /oauth2callback could not carry its SameSite=Strict cookie.
_SIGN_IN = auth_config.sign_in_mode(paths.workspace_root())
_TOKEN = None if os.environ.get(access.NO_TOKEN_ENV) == "1" or _SIGN_IN in ("oidc", "users") \
    else access.new_token()


@asynccontextmanager
async def _announce(_app: Any) -> AsyncIterator[None]:
    port = int(st_config.get_option("server.port"))
    url = access.server_url(st_config.get_option("server.address") or "", port, _TOKEN)
    root = paths.workspace_root()
    note = paths.secure_workspace(root)
    if note:
        print(f"estimator-workbench: {note}", flush=True)
    if _SIGN_IN in ("oidc", "users"):
        how = "your identity provider (OpenID Connect)" if _SIGN_IN == "oidc" else "the users file"
        print(f"\n  Estimator Workbench: {url}\n  Everyone signs in through {how}.\n", flush=True)
    elif _TOKEN is None:
        print(f"\n  Estimator Workbench (NO access token): {url}\n"
              "  warning: every account on this machine can open this UI and run code as you.\n",
              flush=True)
    else:
        where = access.write_token_file(root, port, url, _TOKEN)
        print(f"\n  Estimator Workbench: open this URL (it carries the access token):\n    {url}\n"
              f"  The token is also in {where} (readable by you only).\n", flush=True)
    try:
        yield
    finally:
        if _TOKEN is not None:
            access.remove_token_file(root, port)
        sys.stdout.flush()


app = st.App(str(Path(__file__).with_name("app.py")), lifespan=_announce,
             middleware=[Middleware(access.AccessGate, token=_TOKEN, host_allowed=is_host_allowed)])
