"""The Streamlit entry point of the workbench: a router over ``../pages/*.py``.

Start it with ``estimator-workbench`` (or ``streamlit run estimator_workbench/ui/asgi.py``: this
script behind the access token; served alone, it refuses). Page titles and icons live here; each
page is a thin script that reads widgets, calls ``workbench`` and renders.
"""

from __future__ import annotations

import os
import sqlite3

import streamlit as st

from estimator_workbench import resources
from estimator_workbench.ui import access, auth_config, heap, session, signin

__all__ = ["PAGES_DIR", "main"]

PAGES_DIR = resources.pages_dir()  # installed as estimator_workbench.pages (a wheel or the checkout's pages/)

# (short name, file, title, icon); the first one is the landing page.
_PAGES = (
    ("data", "data.py", "Data", ":material/table_chart:"),
    ("model", "model.py", "Model", ":material/code:"),
    ("train", "train.py", "Train", ":material/play_arrow:"),
    ("runs", "runs.py", "Runs", ":material/list:"),
    ("run", "run.py", "Run detail", ":material/monitoring:"),
    ("compare", "compare.py", "Compare", ":material/compare_arrows:"),
    ("sweeps", "sweeps.py", "Sweeps", ":material/tune:"),
    ("predict", "predict.py", "Predict", ":material/batch_prediction:"),
)


def _safety_banner() -> None:
    """Warns (log and sidebar) when the server is exposed beyond loopback, accepts any Host or runs
    without XSRF; refuses to serve when exposed without a password, or when started without the
    access gate of ``asgi.py``, whatever route started it."""
    bound = session.bound_addresses()
    if bound and not access.gate_installed():
        st.error("This server runs without the workbench's access gate (started as `streamlit run "
                 ".../ui/app.py`?): every account on this machine could open it and run code as "
                 "you. Start it with `estimator-workbench ui` (or `streamlit run "
                 "estimator_workbench/ui/asgi.py`), which asks for an access token.",
                 icon=":material/gpp_bad:")
        st.stop()
    exposed = None
    for address in bound:
        exposed = exposed or session.warn_if_exposed(address)
    if exposed and signin.mode() == "none":
        if os.environ.get(auth_config.INSECURE_ENV) != "1":
            st.error(exposed + " Refusing to serve: this server listens beyond loopback and nobody "
                     "signs in. Restart it with --server.address 127.0.0.1 (`estimator-workbench "
                     "ui`), set up sign-in (`estimator-workbench users add NAME`, OIDC, or "
                     f"{session.PASSWORD_ENV}), or pass --insecure-no-auth.",
                     icon=":material/gpp_bad:")
            st.stop()
        st.warning("**Insecure: no sign-in.** This server listens beyond this machine and nobody "
                   "signs in (started with --insecure-no-auth): whoever reaches it can run code on "
                   "the server as the account that started it.", icon=":material/gpp_bad:")
    hosts = st.get_option("server.allowedHosts") or []
    if not hosts or "*" in hosts:
        st.sidebar.warning("server.allowedHosts is open: any web page on a DNS-rebinding domain can "
                           "drive this UI. Start it with `estimator-workbench ui` or list the "
                           "host names in .streamlit/config.toml.", icon=":material/warning:")
    if exposed and not st.session_state.get("_exposed_seen"):
        st.session_state["_exposed_seen"] = True
        st.toast(exposed, icon=":material/warning:")
    if not st.get_option("server.enableXsrfProtection"):
        st.sidebar.warning("Streamlit's XSRF protection is off: turn server.enableXsrfProtection "
                           "back on.", icon=":material/warning:")


def main() -> None:
    """Builds the navigation and runs the selected page (after the optional password)."""
    # An emoji favicon is drawn in the browser (a data: URL); a :material/...: one is fetched
    # from fonts.gstatic.com on every page change (issue 27: nothing is fetched from outside).
    st.set_page_config(page_title="Estimator Workbench", page_icon="📈", layout="wide")
    heap.freeze_import_heap()
    _safety_banner()
    if not signin.require_sign_in():
        st.stop()
    pages = {name: st.Page(PAGES_DIR / file, title=title, icon=icon, url_path=name,
                           default=(i == 0))
             for i, (name, file, title, icon) in enumerate(_PAGES)}
    session.register_pages(pages)
    nav = st.navigation({"Build": [pages["data"], pages["model"], pages["train"]],
                         "Analyse": [pages["runs"], pages["run"], pages["compare"], pages["sweeps"], pages["predict"]]})
    signin.signed_in_box()
    st.sidebar.caption(f"Workspace: {session.md(session.workspace())}")
    try:
        nav.run()
    except sqlite3.OperationalError as exc:
        # The registry stayed locked through every retry (or is unreadable): say so, never crash.
        st.warning(f"The run registry {session.md(session.get_registry().db_path)} cannot be read right now "
                   f"({session.md(exc)}). Another process holds it; runs keep going. Retry in a moment.",
                   icon=":material/hourglass_top:")
        st.button("Retry", key="_registry_retry")


main()
