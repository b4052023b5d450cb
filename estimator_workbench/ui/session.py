"""Session-wide UI state: the workspace, registry and launcher shared by all sessions, the
password gate, safe markdown and error text, page navigation, and the dataset and template the
user picked (with their in-editor edits), kept across reloads.

Context survives a browser reload: the chosen dataset, the template, the edited code (under the
browser's id: ``ui_state.browser_id``; never shown to another browser), the Train form's values
and the last pre-flight result are written (atomically, on change) to
``<workspace>/ui_state.json`` (``estimator_workbench.ui.ui_state``), and the dataset and template
also go in the URL (``estimator_workbench.ui.context``). A new browser session restores them once (``restore_context``), the
URL winning over the file.

The UI process never runs user code and never unpickles anything a model wrote: runs go through
the launcher (spawned runner processes), pre-flight checks through a child process, and everything
read back is JSON, JSONL or CSV.

Test hooks (environment variables, read when the shared launcher is built):
``WORKBENCH_RUNNER_MODULE`` (default ``estimator_workbench.execution.runner``) and
``WORKBENCH_RUNNER_PYTHONPATH`` (prepended to the runners' ``PYTHONPATH``) swap in a stub runner.
"""

from __future__ import annotations

import hmac
import logging
import math
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from estimator_workbench.store import paths
from estimator_workbench.store.registry import RunRegistry
from estimator_workbench.ui import login_throttle, ui_state
from estimator_workbench.ui.ui_state import UI_STATE_FILE, load_ui_state, save_ui_state

__all__ = ['DEFAULT_DATASET', 'DEFAULT_TEMPLATE', 'PASSWORD_ENV', 'PASSWORD_FILE_ENV', 'UI_STATE_FILE', 'apply_template_edit', 'bound_addresses', 'current_dataset', 'current_template', 'dataset_distributions', 'dataset_summary', 'dataset_token', 'editor_key', 'get_launcher', 'get_registry', 'inferred_schema', 'is_edited', 'label', 'load_dataset_frame', 'load_ui_state', 'md', 'page_link', 'password', 'plural', 'register_pages', 'require_password', 'restore_context', 'revert_template', 'save_ui_state', 'selected_run_id', 'set_selected_run', 'show_error', 'show_table', 'switch_to', 'template_code', 'use_template', 'warn_if_exposed', 'workspace']


DEFAULT_DATASET = "iris"


DEFAULT_TEMPLATE = "mlp_classifier"


PAGE_SCRIPTS: dict[str, Any] = {}


_EDITS_KEY = "template_edits"  # session state: template name -> the code applied in the editor


PASSWORD_ENV = "WORKBENCH_PASSWORD"


_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~:$&=])")


# An empty/unset server.address makes Streamlit bind every interface: that is exposed, not loopback.
_LOOPBACK = ("127.0.0.1", "localhost", "::1")
# The CLI passes the password through this 0600 file (deleted once read) instead of the server's
# environment, which user code could read from /proc/<pid>/environ.
PASSWORD_FILE_ENV = "WORKBENCH_PASSWORD_FILE"
_password_cache: list[str] = []


_log = logging.getLogger("estimator_workbench.ui")


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


# In a widget label only these characters can start markdown (links, code, emphasis, directives,
# HTML, maths); '_' only where it is not inside a word (GFM: intraword '_' is never emphasis), ':'
# only before a name (':red[', ':smile:', '://'), '.' only after 'www' (an autolink), and the
# line-start markers only at the start. Streamlit reads a label's raw text into its aria-label, so
# every backslash md() adds there is read out by a screen reader ("mlp backslash underscore ...").
_LABEL_SPECIAL = re.compile(r"[\\`*{}\[\]<>~$&|]|(?<![0-9A-Za-z])_|_(?![0-9A-Za-z])|:(?=[A-Za-z/])"
                            r"|(?<=www)\.|^[#+-]")
_ORDERED_LIST = re.compile(r"^(\d+)([.)])")  # "1. x" at the start would be a list item


def label(text: object) -> str:
    """``text`` for a widget label (``st.button``, ``st.radio``, ...): escaped like ``md`` where a
    character could act as markdown, but words such as ``mlp_classifier`` or ``seattle-weather.csv``
    stay as they are (a screen reader reads the label's raw text).

    Example:
        >>> print(label("mlp_classifier on seattle-weather.csv"), label("[x](y) _z_ :red[a]"))
        mlp_classifier on seattle-weather.csv \\[x\\](y) \\_z\\_ \\:red\\[a\\]
    """
    escaped = _LABEL_SPECIAL.sub(lambda m: "\\" + m.group(0), str(text).replace("\n", " "))
    return _ORDERED_LIST.sub(r"\1\\\2", escaped)


def show_table(frame: pd.DataFrame, *, digits: int = 4, column_config: Mapping[str, Any] | None = None,
               **kwargs: Any) -> Any:
    """``st.dataframe`` of a table the workbench computed: float columns with ``digits``
    significant digits, floats among text likewise (``tables.tidy_frame``), and missing values
    blank rather than "None". ``column_config`` entries win; other arguments go to ``st.dataframe``.
    """
    from estimator_workbench.ui.tables import tidy_frame

    config: dict[str, Any] = {c: st.column_config.NumberColumn(format=f"%.{digits}g") for c in frame.columns
                              if pd.api.types.is_float_dtype(frame[c])}
    config.update(column_config or {})
    return st.dataframe(tidy_frame(frame, digits), placeholder="", column_config=config, **kwargs)


def plural(count: int, noun: str, nouns: str | None = None) -> str:
    """``count`` and ``noun`` agreeing in number, the count with thousands separators.

    Example:
        >>> plural(1, "prediction"), plural(2_500, "prediction"), plural(0, "run")
        ('1 prediction', '2,500 predictions', '0 runs')
    """
    return f"{count:,} {noun if count == 1 else nouns or noun + 's'}"


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
    is constant-time (``hmac.compare_digest``), and every attempt of every session goes through
    the server's one ``login_throttle.PASSWORD_THROTTLE`` (one per second, doubling waits after
    five wrong ones in a row); an attempt made too early is refused unchecked.
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
        throttle = login_throttle.PASSWORD_THROTTLE
        wait = throttle.acquire()
        if wait > 0:
            st.error(f"Too many password attempts on this server: try again in {math.ceil(wait)} s.")
            return False
        if hmac.compare_digest(given.encode("utf-8"), expected.encode("utf-8")):
            throttle.succeeded()
            st.session_state["_authenticated"] = True
            st.session_state.pop("_password", None)
            st.rerun()
        throttle.failed()
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
    from estimator_workbench.execution.launcher import make_launcher

    env = {}
    if extra_pythonpath:
        env["PYTHONPATH"] = extra_pythonpath
    # A pre-started runner cuts launch -> first chart by its imports (see LocalLauncher); only
    # the real runner has a spare mode. It exits with the server (end of its stdin pipe).
    spares = 1 if warm_spare and runner_module == "estimator_workbench.execution.runner" else 0
    return make_launcher(root, runner_module=runner_module, env=env, warm_spares=spares)


def get_launcher(poll: bool = True) -> Any:
    """The launcher shared by every session of this server (one per workspace); ``poll()``ed
    unless ``poll=False`` (a redraw that only reads must not start queued runs).

    A ``RayJobLauncher`` when ``$WORKBENCH_RAY_ADDRESS`` is set, else a ``LocalLauncher`` that
    keeps one warm spare runner (``estimator_workbench.execution.launcher.make_launcher``); ``WORKBENCH_WARM_SPARES=0``
    turns the spare off (a machine short of memory, tests that check for leftover processes).
    """
    warm_spare = os.environ.get("WORKBENCH_WARM_SPARES", "1").strip().lower() not in (
        "0", "false", "no", "off")
    launcher = _launcher(str(workspace()), os.environ.get("WORKBENCH_RUNNER_MODULE", "estimator_workbench.execution.runner"),
                         os.environ.get("WORKBENCH_RUNNER_PYTHONPATH", ""),
                         os.environ.get("WORKBENCH_RAY_ADDRESS", "").strip(), warm_spare)
    if not poll:
        return launcher
    try:
        launcher.poll()  # reap finished children, mark lost runs, start queued ones
    except Exception as exc:  # a busy registry must not break the page
        st.toast(f"Launcher poll failed: {exc}")
    return launcher


def register_pages(pages: Mapping[str, Any]) -> None:
    """Called by ``app.py``: the ``st.Page`` objects by short name (for links and switches)."""
    PAGE_SCRIPTS.update(pages)


def page_link(name: str, label: str, icon: str | None = None, run_id: str | None = None) -> None:
    """A link to page ``name`` (optionally carrying ``?run=<id>``)."""
    page = PAGE_SCRIPTS.get(name)
    if page is None:
        return
    st.page_link(page, label=label, icon=icon,
                 query_params={"run": run_id} if run_id else None)


def switch_to(name: str, run_id: str | None = None) -> None:
    """Switches to page ``name`` (with ``?run=<id>`` when given)."""
    page = PAGE_SCRIPTS.get(name)
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


# One parsed copy per file for the whole server (cache_resource), never one per session or call:
# cache_data pickled the frame into the cache and unpickled a fresh copy on every call (issue
# 24.3: four sessions on a 209 MB CSV peaked at 13.2 GB). Callers only read the frame.
@st.cache_resource(show_spinner="Loading the dataset…", max_entries=4)
def _load_frame(path: str, mtime_ns: int, size: int, delimiter: str | None = None,
                encoding: str | None = None) -> pd.DataFrame:
    from estimator_workbench.data import datasets

    return datasets.load_table(path, delimiter=delimiter, encoding=encoding)


def load_dataset_frame(path: str | Path, delimiter: str | None = None, encoding: str | None = None) -> pd.DataFrame:
    """The table at ``path`` (cached by path, size, modification time and the CSV ``delimiter`` and
    ``encoding``, None: detected; a ``DatasetSpec``'s ``read_options``): the same frame object for
    every session of the server, so never modify it (copy first)."""
    stat = os.stat(path)
    return _load_frame(str(path), stat.st_mtime_ns, stat.st_size, delimiter, encoding)


@st.cache_data(show_spinner=False, max_entries=16)
def _inferred_schema(path: str, mtime_ns: int, size: int, delimiter: str | None = None,
                     encoding: str | None = None) -> Any:
    from estimator_workbench.data import datasets

    return datasets.infer_schema(_load_frame(path, mtime_ns, size, delimiter, encoding))


def inferred_schema(path: str | Path, delimiter: str | None = None, encoding: str | None = None) -> Any:
    """``infer_schema`` of the table at ``path`` (cached like ``load_dataset_frame``: the date
    detection parses text columns, too slow to redo on every widget change)."""
    stat = os.stat(path)
    return _inferred_schema(str(path), stat.st_mtime_ns, stat.st_size, delimiter, encoding)


@st.cache_data(show_spinner="Summarising the columns…", max_entries=16)
def _summary(path: str, mtime_ns: int, size: int, delimiter: str | None = None,
             encoding: str | None = None) -> pd.DataFrame:
    from estimator_workbench.data import datasets

    return datasets.summary(_load_frame(path, mtime_ns, size, delimiter, encoding))


def dataset_summary(path: str | Path, delimiter: str | None = None, encoding: str | None = None) -> pd.DataFrame:
    """``summary`` of the table at ``path`` (exact, over every row), computed once per file for the
    whole server (cached like ``inferred_schema``), not on every rerun of every session."""
    stat = os.stat(path)
    return _summary(str(path), stat.st_mtime_ns, stat.st_size, delimiter, encoding)


@st.cache_data(show_spinner="Profiling the columns…", max_entries=16)
def _distributions(path: str, mtime_ns: int, size: int, kinds: tuple[tuple[str, str], ...],
                   delimiter: str | None = None, encoding: str | None = None) -> pd.DataFrame:
    from estimator_workbench.data import datasets
    from estimator_workbench.data.schema import ColumnSchema, Schema

    schema = Schema(tuple(ColumnSchema(name, "feature", kind) for name, kind in kinds))
    return datasets.distribution_table(_load_frame(path, mtime_ns, size, delimiter, encoding), schema)


def dataset_distributions(path: str | Path, schema: Any, delimiter: str | None = None,
                          encoding: str | None = None) -> pd.DataFrame:
    """``distribution_table`` of the table at ``path`` (read as ``load_dataset_frame`` does) with
    the column types of ``schema`` (cached by file and types: 0.2-4 s per dataset, once)."""
    stat = os.stat(path)
    return _distributions(str(path), stat.st_mtime_ns, stat.st_size,
                          tuple((c.name, c.dtype) for c in schema.columns), delimiter, encoding)


def current_dataset() -> dict[str, Any]:
    """The dataset chosen on the Data page (a ``DatasetSpec.to_dict()`` with ``fingerprint``);
    the bundled iris sample with inferred roles when nothing was chosen yet (nor saved in the
    workspace or the URL: ``restore_context``)."""
    restore_context()
    chosen = st.session_state.get("dataset")
    if chosen:
        return chosen
    from estimator_workbench.data import datasets

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
    restore_context()
    chosen = st.session_state.get("template")
    if chosen:
        return chosen
    from estimator_workbench import templates

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
    from estimator_workbench import templates

    try:
        _, params = templates.parse_template(code, name)
        error = None
    except ValueError as exc:
        params, error = {}, str(exc)
    out = {"name": name, "code": code, "params": params, "error": error}
    st.session_state["template"] = out
    save_ui_state(template=name)
    return out


def apply_template_edit(name: str, code: str) -> None:
    """Records ``code`` as the session's edited code of template ``name`` and uses it."""
    st.session_state.setdefault(_EDITS_KEY, {})[name] = code
    ui_state.save_edits(st.session_state[_EDITS_KEY])
    use_template(name, code)


def revert_template(name: str, saved_code: str) -> None:
    """Drops the session's edits of template ``name``: the saved code is used again and the
    editor shows it (a fresh editor key, so the component forgets its text)."""
    st.session_state.setdefault(_EDITS_KEY, {}).pop(name, None)
    ui_state.save_edits(st.session_state[_EDITS_KEY])
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


# --- context kept across reloads: <workspace>/ui_state.json and the URL -------------------------

_RESTORED_KEY = "_context_restored"


FORMS_KEY = "_remembered_forms"  # session state: form name -> {widget key: value}


def dataset_token(dataset: Mapping[str, Any]) -> str | None:
    """The URL form of a dataset choice: the bundled name, ``upload:<file name>`` for an upload
    stored in the workspace, None for any other file."""
    ref = dataset.get("ref") or {}
    if ref.get("kind") == "bundled":
        return str(ref.get("name"))
    path = Path(str(ref.get("path", "")))
    from estimator_workbench.data.sources import UPLOADS_DIR

    if path.parent == workspace() / UPLOADS_DIR:
        return f"upload:{path.name}"
    return None


def _dataset_from_token(token: str) -> dict[str, Any]:
    """The dataset named in the URL, with inferred roles (ValueError when it does not exist)."""
    from estimator_workbench.data import datasets

    if token.startswith("upload:"):
        path = datasets.upload_path(workspace(), token.removeprefix("upload:"))
        ref: dict[str, Any] = {"kind": "file", "path": str(path)}
    else:
        path = datasets.bundled_path(token)
        ref = {"kind": "bundled", "name": token}
    spec = datasets.DatasetSpec(ref, datasets.infer_schema(load_dataset_frame(path)))
    return spec.to_dict() | {"fingerprint": spec.fingerprint()}


def _dataset_usable(dataset: Mapping[str, Any]) -> bool:
    from estimator_workbench.data import datasets

    try:
        return datasets.DatasetSpec.from_dict(dataset).path.is_file()
    except (ValueError, TypeError, KeyError):
        return False


def restore_context() -> None:
    """Once per browser session (a reload is a new one): the dataset, template, edited code, form
    values and pre-flight result saved in the workspace come back; ``?dataset=`` and
    ``?template=`` in the URL win over the saved ones. Something that no longer exists (a deleted
    upload, a removed template) is reported once and the default used instead."""
    if st.session_state.get(_RESTORED_KEY):
        return
    st.session_state[_RESTORED_KEY] = True
    saved = load_ui_state()
    notes = []
    edits = ui_state.saved_edits(saved)
    if isinstance(edits, dict) and _EDITS_KEY not in st.session_state:
        st.session_state[_EDITS_KEY] = {str(k): str(v) for k, v in edits.items()}
    forms = saved.get("forms")
    if isinstance(forms, dict):
        st.session_state.setdefault(FORMS_KEY, forms)
    if isinstance(saved.get("preflight"), dict):
        st.session_state.setdefault("preflight", saved["preflight"])
    if "dataset" not in st.session_state:
        url = st.query_params.get("dataset")
        dataset = saved.get("dataset") if isinstance(saved.get("dataset"), dict) else None
        if url and (dataset is None or dataset_token(dataset) != url):
            try:
                dataset = _dataset_from_token(str(url))
            except ValueError as exc:  # a stale or mistyped link: said, and the saved choice kept
                notes.append(f"The dataset in the address ({url!r}) cannot be used: {exc}")
        if dataset is not None and not _dataset_usable(dataset):
            notes.append(f"The dataset used last ({dataset_token(dataset) or dataset.get('ref')}) is gone; "
                         f"using {DEFAULT_DATASET!r}. Choose one on the Data page.")
            dataset = None
        if dataset is not None:
            st.session_state["dataset"] = dataset
    if "template" not in st.session_state:
        name = st.query_params.get("template") or saved.get("template")
        if name:
            from estimator_workbench import templates

            try:
                info = templates.get_template(str(name), workspace())
            except (ValueError, KeyError, OSError) as exc:
                notes.append(f"The template {name!r} used last cannot be opened ({exc}); using "
                             f"{DEFAULT_TEMPLATE!r}.")
            else:
                use_template(info.name, template_code(info.name, info.code))
    for note in notes:  # they quote the URL's ?dataset= and ?template=: shown as text, escaped
        st.toast(md(note), icon=":material/warning:")
        st.session_state.setdefault("_context_notes", []).append(note)
