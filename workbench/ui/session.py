"""Session-wide UI state: the workspace, registry and launcher shared by all sessions, the
password gate, safe markdown and error text, page navigation, and the dataset and template the
user picked (with their in-editor edits).

The UI process never runs user code and never unpickles anything a model wrote: runs go through
the launcher (spawned runner processes), pre-flight checks through a child process, and everything
read back is JSON, JSONL or CSV.

Test hooks (environment variables, read when the shared launcher is built):
``WORKBENCH_RUNNER_MODULE`` (default ``workbench.execution.runner``) and
``WORKBENCH_RUNNER_PYTHONPATH`` (prepended to the runners' ``PYTHONPATH``) swap in a stub runner.
"""

from __future__ import annotations

import hmac
import logging
import os
import re
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from workbench.store import paths
from workbench.store.registry import RunRegistry

__all__ = ['DEFAULT_DATASET', 'DEFAULT_TEMPLATE', 'PASSWORD_ENV', 'PASSWORD_FILE_ENV', 'apply_template_edit', 'bound_addresses', 'current_dataset', 'current_template', 'editor_key', 'get_launcher', 'get_registry', 'is_edited', 'load_dataset_frame', 'md', 'page_link', 'password', 'register_pages', 'require_password', 'revert_template', 'selected_run_id', 'set_selected_run', 'show_error', 'switch_to', 'template_code', 'use_template', 'warn_if_exposed', 'workspace']


DEFAULT_DATASET = "iris"


DEFAULT_TEMPLATE = "mlp_classifier"


_PAGES: dict[str, Any] = {}


_EDITS_KEY = "template_edits"  # session state: template name -> the code applied in the editor


PASSWORD_ENV = "WORKBENCH_PASSWORD"


_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~:$&=])")


# An empty/unset server.address makes Streamlit bind every interface: that is exposed, not loopback.
_LOOPBACK = ("127.0.0.1", "localhost", "::1")
# The CLI passes the password through this 0600 file (deleted once read) instead of the server's
# environment, which user code could read from /proc/<pid>/environ.
PASSWORD_FILE_ENV = "WORKBENCH_PASSWORD_FILE"
_password_cache: list[str] = []


_log = logging.getLogger("workbench.ui")


def md(text: object) -> str:
    """``text`` with every markdown (and Streamlit directive) character escaped, for user text
    (run names, tags, column names, file names) placed inside ``st.caption``/``st.success``/...

    Streamlit never renders raw HTML without ``unsafe_allow_html`` (not used anywhere); this also
    keeps links, images, ``:color[...]`` directives and emphasis in user text as literal text.

    Example:
        >>> print(md("[x](y) <b>"))
        \\[x\\]\\(y\\) \\<b\\>
    """
    return _MD_SPECIAL.sub(r"\\\1", str(text)).replace("\n", " ")


def show_error(text: object, details: object | None = None, *, level: str = "error",
               prefix: str = "") -> None:
    """Shows error text that may hold user text (a run's error, a pre-flight message, a traceback,
    an exception naming a file, column or param value) as text, never as markdown or HTML.

    The first line of ``text`` goes into an ``st.error`` (or ``st.warning`` with
    ``level='warning'``) box, escaped with ``md`` after ``prefix`` (trusted markdown of ours);
    the rest of ``text`` and ``details`` (e.g. a traceback) go into one plain ``st.code`` block,
    which shows every character as is.

    Example:
        >>> show_error("ValueError: **x** <b>", "Traceback (most recent call last): ...")  # doctest: +SKIP
    """
    first, _, rest = str(text).strip("\n").partition("\n")
    box = st.warning if level == "warning" else st.error
    box(prefix + md(first), icon=":material/warning:" if level == "warning" else ":material/error:")
    more = "\n\n".join(part for part in (rest.strip("\n"), "" if details is None else str(details).strip("\n"))
                       if part)
    if more:
        st.code(more, language=None, wrap_lines=True)


def password() -> str:
    """The UI password: ``$WORKBENCH_PASSWORD`` (a server started by hand), else the file named by
    ``$WORKBENCH_PASSWORD_FILE`` (how ``estimator-workbench ui`` passes it, so that it is not in
    the server's /proc/<pid>/environ), read once and deleted. Empty when none is set; runners
    never see either variable (``without_secrets``)."""
    if os.environ.get(PASSWORD_ENV):
        return os.environ[PASSWORD_ENV]
    file = os.environ.pop(PASSWORD_FILE_ENV, "")
    if file:
        try:
            value = Path(file).read_text(encoding="utf-8")
            Path(file).unlink(missing_ok=True)
        except OSError as exc:
            _log.error("The UI password file %s cannot be read (%s): the UI stays locked.", file, exc)
            value = "\0unreadable"  # no one can type NUL: the gate stays shut
        _password_cache[:] = [value]
    return _password_cache[0] if _password_cache else ""


def bound_addresses() -> list[str]:
    """The addresses this process listens on for the Streamlit port (empty without a server, as
    under ``AppTest``), from the sockets themselves: the truth whichever route started the UI."""
    try:
        import psutil
    except ImportError:  # psutil comes with the ui extra; without it, trust the configured address
        address = st.get_option("server.address")
        return [address or ""]
    port = st.get_option("server.port")
    try:
        conns = psutil.Process().net_connections(kind="inet")
    except (psutil.Error, OSError):
        return []
    return sorted({c.laddr.ip for c in conns
                   if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port})


def require_password() -> bool:
    """The optional shared-deployment password (``$WORKBENCH_PASSWORD``; off when unset or empty).

    Returns True when no password is set or this browser session entered it; otherwise draws the
    password form and returns False (the caller then stops before any page runs). The comparison
    is constant-time (``hmac.compare_digest``) and a wrong entry costs a one-second wait.
    """
    expected = password()
    if not expected:
        return True
    if st.session_state.get("_authenticated"):
        return True
    st.title("Estimator Workbench")
    with st.form("login"):
        given = st.text_input("Password", type="password", key="_password")
        submitted = st.form_submit_button("Sign in")
    if submitted:
        if hmac.compare_digest(given.encode("utf-8"), expected.encode("utf-8")):
            st.session_state["_authenticated"] = True
            st.session_state.pop("_password", None)
            st.rerun()
        time.sleep(1.0)  # slows guessing down; Streamlit serves other sessions meanwhile
        st.error("Wrong password.")
    return False


def warn_if_exposed(address: str | None) -> str | None:
    """Logs (and returns) a warning when the server listens beyond loopback: anyone who reaches
    it can run code on this machine as this user."""
    if address is not None and str(address).strip().strip("[]") in _LOOPBACK:
        return None
    text = (f"The workbench UI listens on {address!r}, not only on 127.0.0.1: anyone who can "
            "reach it can run arbitrary Python code on this machine as this user (templates are "
            f"code). Set {PASSWORD_ENV} and put it behind HTTPS, or bind 127.0.0.1.")
    _log.warning(text)
    return text


def workspace() -> Path:
    """The workspace folder (``$WORKBENCH_HOME`` or ``./workspace``)."""
    return paths.workspace_root()


def get_registry() -> RunRegistry:
    """The run registry of the workspace (cheap: opens SQLite per call)."""
    return RunRegistry(workspace())


@st.cache_resource(show_spinner=False)
def _launcher(root: str, runner_module: str, extra_pythonpath: str, ray_address: str = "",
              warm_spare: bool = True) -> Any:
    # ray_address is only part of the cache key: make_launcher reads $WORKBENCH_RAY_ADDRESS.
    from workbench.execution.launcher import make_launcher

    env = {}
    if extra_pythonpath:
        env["PYTHONPATH"] = extra_pythonpath
    # A pre-started runner cuts launch -> first chart by its imports (see LocalLauncher); only
    # the real runner has a spare mode. It exits with the server (end of its stdin pipe).
    spares = 1 if warm_spare and runner_module == "workbench.execution.runner" else 0
    return make_launcher(root, runner_module=runner_module, env=env, warm_spares=spares)


def get_launcher() -> Any:
    """The launcher shared by every session of this server (one per workspace); ``poll()``ed.

    A ``RayJobLauncher`` when ``$WORKBENCH_RAY_ADDRESS`` is set, else a ``LocalLauncher`` that
    keeps one warm spare runner (``workbench.execution.launcher.make_launcher``); ``WORKBENCH_WARM_SPARES=0``
    turns the spare off (a machine short of memory, tests that check for leftover processes).
    """
    warm_spare = os.environ.get("WORKBENCH_WARM_SPARES", "1").strip().lower() not in (
        "0", "false", "no", "off")
    launcher = _launcher(str(workspace()), os.environ.get("WORKBENCH_RUNNER_MODULE", "workbench.execution.runner"),
                         os.environ.get("WORKBENCH_RUNNER_PYTHONPATH", ""),
                         os.environ.get("WORKBENCH_RAY_ADDRESS", "").strip(), warm_spare)
    try:
        launcher.poll()  # reap finished children, mark lost runs, start queued ones
    except Exception as exc:  # a busy registry must not break the page
        st.toast(f"Launcher poll failed: {exc}")
    return launcher


def register_pages(pages: Mapping[str, Any]) -> None:
    """Called by ``app.py``: the ``st.Page`` objects by short name (for links and switches)."""
    _PAGES.update(pages)


def page_link(name: str, label: str, icon: str | None = None, run_id: str | None = None) -> None:
    """A link to page ``name`` (optionally carrying ``?run=<id>``)."""
    page = _PAGES.get(name)
    if page is None:
        return
    st.page_link(page, label=label, icon=icon,
                 query_params={"run": run_id} if run_id else None)


def switch_to(name: str, run_id: str | None = None) -> None:
    """Switches to page ``name`` (with ``?run=<id>`` when given)."""
    page = _PAGES.get(name)
    if page is None:
        st.rerun()
    st.switch_page(page, query_params={"run": run_id} if run_id else None)


def selected_run_id() -> str | None:
    """The run in the URL (``?run=<id>``), else the session's last one."""
    run_id = st.query_params.get("run") or st.session_state.get("selected_run")
    return str(run_id) if run_id else None


def set_selected_run(run_id: str | None) -> None:
    """Remembers the selected run in the URL (a reload or a second browser reattaches to it)."""
    st.session_state["selected_run"] = run_id
    if run_id:
        st.query_params["run"] = run_id
    elif "run" in st.query_params:
        del st.query_params["run"]


@st.cache_data(show_spinner="Loading the dataset…", max_entries=16)
def _load_frame(path: str, mtime_ns: int, size: int) -> pd.DataFrame:
    from workbench.data import datasets

    return datasets.load_table(path)


def load_dataset_frame(path: str | Path) -> pd.DataFrame:
    """The table at ``path`` (cached by path, size and modification time)."""
    stat = os.stat(path)
    return _load_frame(str(path), stat.st_mtime_ns, stat.st_size)


def current_dataset() -> dict[str, Any]:
    """The dataset chosen on the Data page (a ``DatasetSpec.to_dict()`` with ``fingerprint``);
    the bundled iris sample with inferred roles when nothing was chosen yet."""
    chosen = st.session_state.get("dataset")
    if chosen:
        return chosen
    from workbench.data import datasets

    path = datasets.bundled_path(DEFAULT_DATASET)
    spec = datasets.DatasetSpec({"kind": "bundled", "name": DEFAULT_DATASET},
                                datasets.infer_schema(load_dataset_frame(path)))
    out = spec.to_dict()
    out["fingerprint"] = spec.fingerprint()
    st.session_state["dataset"] = out
    return out


def current_template() -> dict[str, Any]:
    """The template chosen on the Model page: ``{'name', 'code', 'params', 'error'}`` (schema from
    the code's literal PARAMS, never executed; ``error`` is why the code cannot be read, e.g. a
    syntax error, else None); MLP classifier by default."""
    chosen = st.session_state.get("template")
    if chosen:
        return chosen
    from workbench import templates

    info = templates.get_template(DEFAULT_TEMPLATE, workspace())
    return use_template(info.name, info.code)


def template_code(name: str, saved_code: str) -> str:
    """The code this session uses for template ``name``: its applied edits, else ``saved_code``
    (the template file's text)."""
    return st.session_state.get(_EDITS_KEY, {}).get(name, saved_code)


def use_template(name: str, code: str) -> dict[str, Any]:
    """Makes ``code`` (edited or saved) the session's code of template ``name`` and ``name`` the
    chosen template; returns ``current_template()``'s dict.

    Code that cannot be read is stored too, with its ``error`` (the Train page refuses it rather
    than train an older version than the one shown)."""
    from workbench import templates

    try:
        _, params = templates.parse_template(code, name)
        error = None
    except ValueError as exc:
        params, error = {}, str(exc)
    out = {"name": name, "code": code, "params": params, "error": error}
    st.session_state["template"] = out
    return out


def apply_template_edit(name: str, code: str) -> None:
    """Records ``code`` as the session's edited code of template ``name`` and uses it."""
    st.session_state.setdefault(_EDITS_KEY, {})[name] = code
    use_template(name, code)


def revert_template(name: str, saved_code: str) -> None:
    """Drops the session's edits of template ``name``: the saved code is used again and the
    editor shows it (a fresh editor key, so the component forgets its text)."""
    st.session_state.setdefault(_EDITS_KEY, {}).pop(name, None)
    revisions = st.session_state.setdefault("_editor_revisions", {})
    revisions[name] = revisions.get(name, 0) + 1
    use_template(name, saved_code)


def is_edited(name: str) -> bool:
    """Whether this session holds edits of template ``name``."""
    return name in st.session_state.get(_EDITS_KEY, {})


def editor_key(name: str) -> str:
    """The widget key of the code editor of template ``name`` (it changes on a revert)."""
    revision = st.session_state.get("_editor_revisions", {}).get(name, 0)
    return f"editor-{name}" if not revision else f"editor-{name}-r{revision}"


def predictions_frame(run_id: str) -> pd.DataFrame | None:
    """The ``predictions.csv`` of a run, or None when it has none."""
    path = paths.run_dir(workspace(), run_id) / paths.PREDICTIONS_FILE
    if not path.exists():
        return None
    stat = path.stat()
    return _read_predictions(str(path), stat.st_mtime_ns)


@st.cache_data(show_spinner=False, max_entries=8)
def _read_predictions(path: str, mtime_ns: int) -> pd.DataFrame:
    return pd.read_csv(path)
