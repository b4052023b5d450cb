"""Shared Streamlit widgets of the workbench: workspace access, run table, forms, live metrics.

The UI process never runs user code and never unpickles anything a model wrote: runs go through
``workbench.launcher.LocalLauncher`` (spawned runner processes), pre-flight checks through
``workbench.preflight`` (a child process), and everything read back is JSON, JSONL or CSV.

Pure helpers (``runs_frame``, ``differing_params``, ``list_checkpoints``, ...) take and return
plain data so the AppTest smoke tests and unit tests can check them without a browser.

Test hooks (environment variables, read when the shared launcher is built):
``WORKBENCH_RUNNER_MODULE`` (default ``workbench.runner``) and ``WORKBENCH_RUNNER_PYTHONPATH``
(prepended to the runners' ``PYTHONPATH``) swap in a stub runner.
"""

from __future__ import annotations

import datetime as _dt
import hmac
import logging
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import streamlit as st

from workbench import figures, metrics_store, paths
from workbench.registry import TRAINING_ACTIONS, RunNotFoundError, RunRecord, RunRegistry

__all__ = [
    "DEFAULT_DATASET",
    "DEFAULT_TEMPLATE",
    "FIRST_POINT_INTERVAL_S",
    "LIVE_INTERVAL_S",
    "MAX_POINTS",
    "NAN_POLICIES",
    "PASSWORD_ENV",
    "STATUS_ICONS",
    "apply_template_edit",
    "chart_controls",
    "current_dataset",
    "current_template",
    "differing_params",
    "edit_code",
    "editor_key",
    "get_launcher",
    "get_registry",
    "is_edited",
    "launch_run",
    "list_checkpoints",
    "live_metrics",
    "load_dataset_frame",
    "md",
    "page_link",
    "params_form",
    "register_pages",
    "require_password",
    "revert_template",
    "run_actions",
    "run_config_form",
    "run_picker",
    "runs_frame",
    "selected_run_id",
    "series_csv",
    "set_selected_run",
    "show_error",
    "single_prediction",
    "status_badge",
    "switch_to",
    "template_code",
    "use_template",
    "warn_if_exposed",
    "workspace",
]

DEFAULT_DATASET = "iris"
DEFAULT_TEMPLATE = "mlp_classifier"
LIVE_INTERVAL_S = 1.0
FIRST_POINT_INTERVAL_S = 0.25  # a run just launched: poll faster until its first metric line
MAX_POINTS = 2000
STATUS_ICONS = {"queued": ":material/schedule:", "running": ":material/directions_run:",
                "succeeded": ":material/check_circle:", "failed": ":material/error:",
                "stopped": ":material/stop_circle:", "cancelled": ":material/cancel:",
                "lost": ":material/help:"}
_STATUS_COLOURS = {"queued": "gray", "running": "blue", "succeeded": "green", "failed": "red",
                   "stopped": "orange", "cancelled": "orange", "lost": "violet"}
_PAGES: dict[str, Any] = {}
_EDITS_KEY = "template_edits"  # session state: template name -> the code applied in the editor
_CKPT_RE = re.compile(r"^model\.ckpt-(\d+)$")
PASSWORD_ENV = "WORKBENCH_PASSWORD"
NAN_POLICIES = {"fail": "Fail the run", "stop": "Stop training (keep the last checkpoint)"}
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~:$&=])")
_LOOPBACK = ("127.0.0.1", "localhost", "::1", "")
_log = logging.getLogger("workbench.ui")


# -- safety: user text in markdown, the optional password, exposure warning ------------------------


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


def require_password() -> bool:
    """The optional shared-deployment password (``$WORKBENCH_PASSWORD``; off when unset or empty).

    Returns True when no password is set or this browser session entered it; otherwise draws the
    password form and returns False (the caller then stops before any page runs). The comparison
    is constant-time (``hmac.compare_digest``) and a wrong entry costs a one-second wait.
    """
    expected = os.environ.get(PASSWORD_ENV, "")
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
    if address is None or str(address).strip() in _LOOPBACK:
        return None
    text = (f"The workbench UI listens on {address!r}, not only on 127.0.0.1: anyone who can "
            "reach it can run arbitrary Python code on this machine as this user (templates are "
            f"code). Set {PASSWORD_ENV} and put it behind HTTPS, or bind 127.0.0.1.")
    _log.warning(text)
    return text


# -- workspace, registry, launcher --------------------------------------------------------------


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
    from workbench.launcher import make_launcher

    env = {}
    if extra_pythonpath:
        env["PYTHONPATH"] = extra_pythonpath
    # A pre-started runner cuts launch -> first chart by its imports (see LocalLauncher); only
    # the real runner has a spare mode. It exits with the server (end of its stdin pipe).
    spares = 1 if warm_spare and runner_module == "workbench.runner" else 0
    return make_launcher(root, runner_module=runner_module, env=env, warm_spares=spares)


def get_launcher() -> Any:
    """The launcher shared by every session of this server (one per workspace); ``poll()``ed.

    A ``RayJobLauncher`` when ``$WORKBENCH_RAY_ADDRESS`` is set, else a ``LocalLauncher`` that
    keeps one warm spare runner (``workbench.launcher.make_launcher``); ``WORKBENCH_WARM_SPARES=0``
    turns the spare off (a machine short of memory, tests that check for leftover processes).
    """
    warm_spare = os.environ.get("WORKBENCH_WARM_SPARES", "1").strip().lower() not in (
        "0", "false", "no", "off")
    launcher = _launcher(str(workspace()), os.environ.get("WORKBENCH_RUNNER_MODULE", "workbench.runner"),
                         os.environ.get("WORKBENCH_RUNNER_PYTHONPATH", ""),
                         os.environ.get("WORKBENCH_RAY_ADDRESS", "").strip(), warm_spare)
    try:
        launcher.poll()  # reap finished children, mark lost runs, start queued ones
    except Exception as exc:  # a busy registry must not break the page
        st.toast(f"Launcher poll failed: {exc}")
    return launcher


# -- navigation and the selected run -----------------------------------------------------------


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


def run_picker(records: Sequence[RunRecord], label: str = "Run", key: str = "run_picker") -> RunRecord | None:
    """A selectbox over ``records`` preselecting the URL's run; keeps the URL in sync."""
    if not records:
        return None
    ids = [r.run_id for r in records]
    wanted = selected_run_id()
    index = ids.index(wanted) if wanted in ids else 0
    by_id = {r.run_id: r for r in records}
    # No status in the label: the browser keeps a keyed selectbox's shown text when only its
    # formatting changes, so a finished run went on reading "[running]". The badge shows it.
    choice = st.selectbox(label, ids, index=index, key=key,
                          format_func=lambda i: f"{by_id[i].name} · {i}")
    if choice != wanted:
        set_selected_run(choice)
    return by_id[choice]


# -- status --------------------------------------------------------------------------------------


def status_badge(record: RunRecord) -> None:
    """A coloured badge with the run's status (in a container keyed ``status-<run id>``)."""
    colour = _STATUS_COLOURS.get(record.status, "gray")
    with st.container(key=f"status-{record.run_id}"):
        st.badge(record.status, icon=STATUS_ICONS.get(record.status), color=colour)


def _duration(record: RunRecord, now: float | None = None) -> float | None:
    if record.started_at is None:
        return None
    end = record.finished_at or (now or time.time())
    return max(0.0, end - record.started_at)


def _fmt_duration(seconds: float | None) -> str:
    if seconds is None:
        return ""
    seconds = round(seconds)
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}" if seconds >= 3600 \
        else f"{seconds // 60}:{seconds % 60:02d}"


# -- runs table (pure) ------------------------------------------------------------------------------


def differing_params(records: Sequence[RunRecord]) -> list[str]:
    """The params whose values are not the same in every run (the only ones worth a column)."""
    keys = sorted({k for r in records for k in r.params if k != "task"})
    out = []
    for key in keys:
        values = {repr(r.params.get(key)) for r in records}
        if len(values) > 1:
            out.append(key)
    return out


def _best_eval(summary: Mapping[str, Mapping[str, Any]]) -> tuple[str, Any]:
    for name in ("eval/accuracy", "eval/auc", "eval/loss", "eval/average_loss"):
        if name in summary:
            return name.split("/", 1)[1], summary[name].get("best")
    for name, entry in summary.items():
        if name.startswith("eval/"):
            return name.split("/", 1)[1], entry.get("best")
    return "", None


def runs_frame(records: Sequence[RunRecord], now: float | None = None) -> pd.DataFrame:
    """The runs table: id, name, status, action, template, dataset, step, last loss (the train
    loss, else the eval loss of an evaluate run), best eval metric, duration, created, tags, then
    one column per param that differs between runs."""
    now = time.time() if now is None else now
    diff = differing_params(records)
    rows = []
    for r in records:
        # an evaluate run has no train loss: its eval loss and the checkpoint's step instead
        loss = r.summary.get("train/loss") or r.summary.get("eval/loss") or {}
        metric, best = _best_eval(r.summary)
        ref = (r.dataset or {}).get("ref") or {}
        row = {
            "run": r.run_id,
            "name": r.name,
            "status": r.status,
            "action": r.action,
            "template": r.template_name or "",
            "dataset": str(ref.get("name") or Path(str(ref.get("path", ""))).name),
            "step": loss.get("last_step"),
            "last loss": loss.get("last"),
            "best eval": best,
            "eval metric": metric,
            "duration": _fmt_duration(_duration(r, now)),
            "created": _dt.datetime.fromtimestamp(r.created_at),
            "tags": ", ".join(r.tags),
        }
        for key in diff:
            value = r.params.get(key)
            row[f"param: {key}"] = value if isinstance(value, (int, float, str, bool)) or value is None else repr(value)
        rows.append(row)
    columns = ["run", "name", "status", "action", "template", "dataset", "step", "last loss",
               "best eval", "eval metric", "duration", "created", "tags"] + [f"param: {k}" for k in diff]
    frame = pd.DataFrame(rows, columns=columns)
    for column in ("step",):
        frame[column] = pd.to_numeric(frame[column], errors="coerce").astype("Int64")
    for column in ("last loss", "best eval"):
        frame[column] = pd.to_numeric(frame[column], errors="coerce").astype("float64")
    return frame


def filter_runs(records: Sequence[RunRecord], statuses: Sequence[str] = (), text: str = "") -> list[RunRecord]:
    """Runs whose status is in ``statuses`` (all when empty) and whose id, name, template or tags
    match ``text`` (a case-insensitive regex; a bad regex is matched literally)."""
    out = [r for r in records if not statuses or r.status in statuses]
    if text:
        try:
            pattern = re.compile(text, re.IGNORECASE)
        except re.error:
            pattern = re.compile(re.escape(text), re.IGNORECASE)
        out = [r for r in out if pattern.search(" ".join([r.run_id, r.name, r.template_name or "", *r.tags]))]
    return out


def list_checkpoints(run_dir: Path) -> pd.DataFrame:
    """The run's checkpoint files (``model/model.ckpt-<step>``) by step: step, file, size, time.

    Read from the folder listing only (no ``torch.load`` in the UI process)."""
    model = Path(run_dir) / paths.MODEL_DIR
    rows = []
    try:
        entries = list(os.scandir(model))
    except (FileNotFoundError, NotADirectoryError):
        entries = []
    for entry in entries:
        match = _CKPT_RE.match(entry.name)
        if match and entry.is_file():
            stat = entry.stat()
            rows.append({"step": int(match.group(1)), "file": entry.name,
                         "size kB": round(stat.st_size / 1024, 1),
                         "written": _dt.datetime.fromtimestamp(stat.st_mtime)})
    frame = pd.DataFrame(rows, columns=["step", "file", "size kB", "written"])
    return frame.sort_values("step", ignore_index=True)


def series_csv(records: Sequence[RunRecord], root: Path) -> Callable[[], bytes]:
    """A callable building one CSV of every metric series of ``records`` (for a lazy download)."""
    def build() -> bytes:
        frames = []
        for r in records:
            frame = metrics_store.read_all(paths.run_dir(root, r.run_id) / paths.METRICS_FILE)
            frame.insert(0, "run_name", r.name)
            frame.insert(0, "run", r.run_id)
            frames.append(frame)
        if not frames:
            return b"run,run_name,step,wall_time,split,name,value\n"
        from workbench.predictions import escape_formulas

        # Run names and metric names are user text: '=cmd|...' must not run in a spreadsheet.
        table = escape_formulas(pd.concat(frames, ignore_index=True))
        return table.to_csv(index=False).encode("utf-8")

    return build


# -- datasets and templates in the session -------------------------------------------------------


@st.cache_data(show_spinner="Loading the dataset…", max_entries=16)
def _load_frame(path: str, mtime_ns: int, size: int) -> pd.DataFrame:
    from workbench import datasets

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
    from workbench import datasets

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


def _editor_text(response: Any) -> str | None:
    """The text in a ``streamlit-code-editor`` response, None before its first event (an empty
    editor is ``''``, not None)."""
    if isinstance(response, Mapping):
        return str(response.get("text") or "") if response.get("id") else None
    return response if isinstance(response, str) else None


def edit_code(label: str, value: str, key: str, height: int = 420,
              on_change: Callable[[str], None] | None = None) -> str:
    """A code editor: ``streamlit-code-editor`` (Ace, bundled, works offline) when installed,
    else ``st.text_area``. Returns the current text.

    The Ace editor reports its text when it loses focus (a click on a button, a link or anywhere
    outside it) and on its Apply button / Ctrl+Enter; ``on_change(text)`` is then called as a
    widget callback, i.e. before the next script run of any page, so a click that leaves the
    editor and switches page still applies the edit."""
    def changed() -> None:
        text = _editor_text(st.session_state.get(key))
        if text is not None and on_change is not None:
            on_change(text)

    try:
        from code_editor import _component_func  # type: ignore[import-not-found]
    except ImportError:
        _component_func = None
    if _component_func is not None and not st.session_state.get("_plain_editor"):
        # code_editor() is this call without on_change (which it does not pass on); the private
        # function is pinned by the dependency's range, and a changed signature falls back below.
        try:
            response = _component_func(
                code=value, lang="python", theme="default", key=key, height=[18, 30], focus=False,
                shortcuts="vscode", snippets=["", ""], completions=[], keybindings={},
                buttons=[{"name": "Apply", "feather": "Check", "hasText": True, "alwaysOn": True,
                          "commands": ["submit"], "style": {"bottom": "0.4rem", "right": "0.4rem"}}],
                options={}, props={}, editor_props={}, component_props={}, menu={}, info={},
                allow_reset=False, replace_completer=False, response_mode=["blur"], ghost_text="",
                on_change=changed,
                default={"id": "", "type": "", "lang": "", "text": "", "selected": "", "cursor": ""})
        except TypeError:
            st.session_state["_plain_editor"] = True
        else:
            text = _editor_text(response)
            return value if text is None else text
    return st.text_area(label, value=value, height=height, key=key, on_change=changed)


# -- forms ------------------------------------------------------------------------------------------


def params_form(schema: Mapping[str, Mapping[str, Any]], values: Mapping[str, Any] | None = None,
                key: str = "params") -> dict[str, Any]:
    """One widget per PARAMS entry (int/float -> number, bool -> checkbox, choice -> selectbox,
    str -> text). Call inside an ``st.form``; returns the raw values (validate with
    ``templates.validate_params``)."""
    values = dict(values or {})
    out: dict[str, Any] = {}
    cols = st.columns(2)
    for i, (name, spec) in enumerate(schema.items()):
        ptype = spec.get("type")
        current = values.get(name, spec.get("default"))
        label = spec.get("label") or name
        help_text = spec.get("help")
        wkey = f"{key}-{name}"
        with cols[i % 2]:
            if ptype == "bool":
                out[name] = st.checkbox(label, value=bool(current), help=help_text, key=wkey)
            elif ptype == "choice":
                choices = list(spec.get("choices") or [])
                index = choices.index(current) if current in choices else 0
                out[name] = st.selectbox(label, choices, index=index, help=help_text, key=wkey)
            elif ptype == "int":
                out[name] = st.number_input(label, value=int(current), step=1,
                                            min_value=spec.get("min"), max_value=spec.get("max"),
                                            help=help_text, key=wkey)
            elif ptype == "float":
                lo, hi = spec.get("min"), spec.get("max")
                out[name] = st.number_input(label, value=float(current), format="%g",
                                            min_value=None if lo is None else float(lo),
                                            max_value=None if hi is None else float(hi),
                                            step=_float_step(float(current)), help=help_text, key=wkey)
            else:
                out[name] = st.text_input(label, value="" if current is None else str(current),
                                          help=help_text, key=wkey)
    return out


def _float_step(value: float) -> float:
    if value == 0:
        return 0.01
    return float(10 ** np.floor(np.log10(abs(value))))


def run_config_form(gpus: Sequence[str], key: str = "rc") -> dict[str, Any]:
    """The RunConfig and schedule widgets (call inside an ``st.form``).

    Returns ``{'action', 'schedule': {...}, 'run_config': {...}, 'num_processes'}``. The schedule
    always has ``nan_policy`` (``'fail'`` or ``'stop'``) and, only when the box is ticked,
    ``early_stopping = {'metric', 'mode', 'patience', 'min_delta'}`` (read by the runner's
    ``EarlyStopping.from_schedule``; train_and_evaluate only).
    """
    c1, c2, c3 = st.columns(3)
    action = c1.selectbox("Action", ["train_and_evaluate", "train", "evaluate", "predict"], key=f"{key}-action",
                          help="evaluate and predict use the checkpoint of the run chosen under "
                               "'Start from'.")
    max_steps = c2.number_input("Train until step (max_steps)", 1, 10_000_000, 500, step=100, key=f"{key}-steps")
    batch_size = c3.number_input("Batch size", 1, 65_536, 32, key=f"{key}-batch")
    c1, c2, c3 = st.columns(3)
    seed = c1.number_input("Seed (tf_random_seed)", 0, 2**31 - 1, 42, key=f"{key}-seed")
    ckpt_steps = c2.number_input("Checkpoint every N steps", 1, 10_000_000, 100, key=f"{key}-ckpt")
    keep = c3.number_input("Keep checkpoints (keep_checkpoint_max)", 0, 1000, 5, key=f"{key}-keep",
                           help="0 keeps all.")
    c1, c2, c3 = st.columns(3)
    metrics_every = c1.number_input("Log metrics every N steps", 1, 100_000, 10, key=f"{key}-metrics")
    eval_every = c2.number_input("Evaluate every N steps", 1, 10_000_000, 100, key=f"{key}-eval",
                                 help="train_and_evaluate only.")
    eval_steps = c3.number_input("Eval batches (0: the whole eval split)", 0, 1_000_000, 0, key=f"{key}-evalsteps")
    c1, c2, c3 = st.columns(3)
    devices = ["auto", "cpu"] + [f"cuda:{g}" for g in range(len(gpus))]
    device = c1.selectbox("Device", devices, key=f"{key}-device",
                          help=f"GPUs found: {len(gpus)}." if gpus else "No GPU found: CPU only.")
    num_processes = c2.number_input("Processes (torchrun)", 1, max(1, len(gpus)) if gpus else 4, 1,
                                    key=f"{key}-procs", help="More than one runs DDP under torchrun.")
    summary_steps = c3.number_input("Log loss every N steps (log_step_count_steps)", 1, 1_000_000, 100,
                                    key=f"{key}-log")
    # A form cannot show fields only once a box is ticked (it reruns on submit), so the early
    # stopping fields are always there and are used only when the box is ticked.
    c1, c2, c3, c4, c5 = st.columns([1.2, 1.2, 0.8, 1, 1], vertical_alignment="bottom")
    early = c1.checkbox("Early stopping", value=False, key=f"{key}-es",
                        help="train_and_evaluate only (it watches the evaluations, one every 'Evaluate "
                             "every N steps'): stops training when the eval metric has not improved "
                             "for 'patience' evaluations in a row.")
    es_metric = c2.text_input("Watch eval metric", value="loss", key=f"{key}-es-metric",
                              help="An eval metric the evaluation reports, e.g. loss, accuracy, auc, "
                                   "average_loss. Early stopping only applies to train_and_evaluate.")
    es_mode = c3.selectbox("Mode", ["min", "max"], key=f"{key}-es-mode",
                           help="min: lower is better (loss, error); max: higher is better (accuracy, auc).")
    es_patience = c4.number_input("Patience (evaluations)", 1, 10_000, 3, key=f"{key}-es-patience",
                                  help="Evaluations without improvement before training stops.")
    es_delta = c5.number_input("Min delta", min_value=0.0, value=0.0, format="%g", step=0.001,
                               key=f"{key}-es-delta",
                               help="A change smaller than this does not count as an improvement.")
    nan_policy = st.radio("On NaN loss", list(NAN_POLICIES), horizontal=True, key=f"{key}-nan",
                          format_func=NAN_POLICIES.get,
                          help="fail: the run fails with the step and the last finite loss (TF's "
                               "NanTensorHook default). stop: training stops there and the run ends "
                               "'stopped' with the same message, keeping its checkpoints from before "
                               "the NaN.")
    schedule = {"max_steps": int(max_steps), "batch_size": int(batch_size),
                "metrics_every_n_steps": int(metrics_every), "eval_every_steps": int(eval_every),
                "nan_policy": nan_policy}
    if eval_steps:
        schedule["eval_steps"] = int(eval_steps)
    if early:
        schedule["early_stopping"] = {"metric": es_metric.strip() or "loss", "mode": es_mode,
                                      "patience": int(es_patience), "min_delta": float(es_delta)}
    run_config = {"tf_random_seed": int(seed), "save_checkpoints_steps": int(ckpt_steps),
                  "keep_checkpoint_max": int(keep) or None, "log_step_count_steps": int(summary_steps),
                  "save_summary_steps": int(summary_steps), "device": device}
    return {"action": action, "schedule": schedule, "run_config": run_config,
            "num_processes": int(num_processes)}


def launch_run(*, name: str, action: str, dataset: Mapping[str, Any], template: Mapping[str, Any],
               params: Mapping[str, Any], run_config: Mapping[str, Any], schedule: Mapping[str, Any],
               parent_run_id: str | None = None, parent_relation: str | None = None,
               checkpoint_path: str | None = None, num_processes: int = 1) -> RunRecord:
    """Registers a run and hands it to the launcher (it starts now or waits in the queue).

    ``schedule['preflight']`` defaults to True: the runner checks the model_fn on a tiny batch in
    its own process before building the Estimator and fails the run with the check's error
    (``runner._preflight``). A caller that sets it keeps its value. Ranks under torchrun do not
    check, so a multi-process training run is checked here first, in a child process (as the
    CLI does); a failed check raises ``ValueError`` with its report and launches nothing.
    """
    schedule = dict(schedule)
    schedule.setdefault("preflight", True)
    if schedule["preflight"] and num_processes > 1 and action in TRAINING_ACTIONS:
        from workbench.preflight import run_preflight

        with st.spinner("Pre-flight check of the model_fn on a tiny batch..."):
            report = run_preflight(str(template.get("code") or ""), dict(dataset), dict(params),
                                   template_name=str(template.get("name") or "template"), action=action)
        if not report.ok:
            raise ValueError(report.summary())
    registry = get_registry()
    record = registry.create_run(
        name=name, action=action, dataset=dict(dataset),
        template={"name": template.get("name"), "code": template.get("code")}, params=dict(params),
        run_config=dict(run_config), schedule=dict(schedule), parent_run_id=parent_run_id,
        parent_relation=parent_relation, checkpoint_path=checkpoint_path, num_processes=num_processes)
    return get_launcher().submit(record.run_id)


def warm_start_check(*, template: Mapping[str, Any], params: Mapping[str, Any], dataset: Mapping[str, Any],
                     run_config: Mapping[str, Any], parent: RunRecord) -> Any:
    """Runs the compatibility check of a warm start (in a child process) and shows its report.

    Returns the ``CompatibilityReport``; a variable that differs in shape makes it not ``ok``.
    """
    from workbench.compat import check_compatibility

    spec = {"template": {"name": template.get("name"), "code": template.get("code")}, "params": dict(params),
            "dataset": dict(dataset), "run_config": dict(run_config), "action": "train"}
    with st.spinner(f"Checking that {parent.run_id}'s checkpoint fits this model..."):
        report = check_compatibility(spec, get_registry().run_dir(parent.run_id) / paths.MODEL_DIR)
    show = st.success if report.ok else (st.error if report.error or report.shape_mismatch else st.warning)
    show(md(report.summary()))
    if report.shape_mismatch:
        st.dataframe(pd.DataFrame([{"variable": name, "checkpoint shape": str(c), "model shape": str(m)}
                                   for name, (c, m) in report.shape_mismatch.items()]), hide_index=True)
    return report


def reproduce_panel(record: RunRecord) -> None:
    """The shell commands that re-run this run: one process, torchrun, multi-node, SLURM, Kubernetes."""
    from workbench.commands import reproduce_commands

    commands = reproduce_commands(record, run_dir=get_registry().run_dir(record.run_id))
    st.caption("One process")
    st.code(commands["single"], language="bash")
    st.caption("Data parallel on this machine (torchrun)")
    st.code(commands["torchrun"], language="bash")
    st.caption("Several machines (run on every node; the workspace on shared storage)")
    st.code(commands["multi_node"], language="bash")
    with st.expander("SLURM and Kubernetes"):
        st.code(commands["slurm"], language="bash")
        st.code(commands["kubernetes"], language="yaml")
    if commands.get("notes"):
        st.caption(md(commands["notes"]))


# -- run actions ------------------------------------------------------------------------------------


def run_actions(record: RunRecord, key: str = "act") -> None:
    """Stop / Cancel / Resume / Delete buttons for one run, enabled by its status."""
    launcher = get_launcher()
    c1, c2, c3, c4 = st.columns(4)
    active = record.status in ("queued", "running")
    try:
        if c1.button("Stop", key=f"{key}-stop-{record.run_id}", disabled=not active, icon=":material/stop:",
                     help="Graceful: checkpoint, then 'stopped' (resumable)."):
            launcher.stop(record.run_id)
            st.toast(f"Stop requested for {record.run_id}.")
        if c2.button("Cancel", key=f"{key}-cancel-{record.run_id}", disabled=not active, icon=":material/cancel:",
                     help="SIGTERM now, SIGKILL after a grace period."):
            launcher.cancel(record.run_id, grace=5.0)
            st.toast(f"Run {record.run_id} cancelled.")
            st.rerun()
        if c3.button("Resume", key=f"{key}-resume-{record.run_id}", icon=":material/play_arrow:",
                     disabled=active or record.action not in TRAINING_ACTIONS,
                     help="Continue from the last checkpoint in the same run."):
            launcher.resume(record.run_id)
            st.toast(f"Run {record.run_id} resumed.")
            st.rerun()
        if c4.button("Delete", key=f"{key}-delete-{record.run_id}", disabled=active, icon=":material/delete:"):
            get_registry().delete(record.run_id)
            set_selected_run(None)
            st.toast(f"Run {record.run_id} deleted.")
            st.rerun()
    except (ValueError, RunNotFoundError) as exc:
        show_error(exc)


# -- live metrics -----------------------------------------------------------------------------------


def chart_controls(key: str = "chart") -> dict[str, Any]:
    """Smoothing slider, x-axis choice and log-scale toggle (shared by the run and compare pages)."""
    c1, c2, c3 = st.columns([2, 2, 1])
    smoothing = c1.slider("Smoothing", 0.0, 0.99, 0.0, 0.01, key=f"{key}-smooth",
                          help="TensorBoard's debiased exponential moving average.")
    x_axis = c2.radio("X axis", figures.X_AXES, horizontal=True, key=f"{key}-x",
                      format_func={"step": "Step", "relative": "Relative", "wall": "Wall"}.get)
    log_y = c3.toggle("Log scale", key=f"{key}-log")
    return {"smoothing": smoothing, "x_axis": x_axis, "log_y": log_y}


class _LiveState:
    """Per session and run: the metrics tail (byte offset) and the rows read so far."""

    def __init__(self, path: Path) -> None:
        self.tail = metrics_store.MetricsTail(path)
        self.frame = metrics_store.rows_to_frame([])

    def update(self) -> int:
        generation = self.tail.generation
        new = self.tail.read_frame()
        if self.tail.generation != generation:  # the file was replaced (a resume dropped rows)
            self.frame = new
        elif len(new):
            self.frame = new if not len(self.frame) else pd.concat([self.frame, new], ignore_index=True)
        return len(new)


def _live_state(run_id: str) -> _LiveState:
    key = f"_live-{run_id}"
    state = st.session_state.get(key)
    if state is None:
        state = _LiveState(paths.run_dir(workspace(), run_id) / paths.METRICS_FILE)
        st.session_state[key] = state
    return state


def _progress(record: RunRecord, frame: pd.DataFrame) -> tuple[int, int | None]:
    total = record.schedule.get("max_steps") or record.schedule.get("steps")
    step = int(frame["step"].max()) if len(frame) and frame["step"].notna().any() else 0
    return step, (int(total) if total else None)


def live_metrics(run_id: str, controls: Mapping[str, Any], interval: float = LIVE_INTERVAL_S) -> None:
    """Status, progress and the loss/metric chart of a run, refreshed every ``interval`` seconds
    while the run is queued or running (``st.fragment(run_every=...)``), static once it ended.

    Only new lines of ``metrics.jsonl`` are read each tick (byte offset), long series are
    downsampled to ``MAX_POINTS`` per series, and the chart keeps one key so the browser updates
    it in place."""
    registry = get_registry()
    try:
        first = registry.get(run_id)
    except RunNotFoundError:
        st.warning(f"Run {run_id!r} no longer exists.")
        return
    # Until the first points arrive (a run just launched) the panel polls every
    # FIRST_POINT_INTERVAL_S, so the chart appears as soon as the runner writes; then a page
    # rerun re-registers it at ``interval``.
    state = _live_state(run_id)
    state.update()  # (a run opened mid-way has points already: no fast poll, no extra rerun)
    waiting = first.is_active and not len(state.frame)
    every = (min(interval, FIRST_POINT_INTERVAL_S) if waiting else interval) if first.is_active else None

    @st.fragment(run_every=every)
    def _panel() -> None:
        if every is not None:
            get_launcher()  # poll: reap the runner when it exits, start queued runs
        try:
            record = registry.get(run_id)
        except RunNotFoundError:
            st.warning(f"Run {run_id!r} no longer exists.")
            return
        state.update()
        step, total = _progress(record, state.frame)
        c1, c2 = st.columns([1, 4])
        with c1:
            status_badge(record)
        with c2:
            if total:
                st.progress(min(1.0, step / total), text=f"step {step} / {total}")
            else:
                st.caption(f"step {step}")
        if record.error and record.status in ("failed", "lost", "cancelled", "stopped"):
            # 'stopped' with an error: nan_policy 'stop' ended it on a NaN loss (a warning)
            show_error(record.error, level="warning" if record.status == "stopped" else "error")
        frame = metrics_store.downsample(state.frame, MAX_POINTS) if len(state.frame) else state.frame
        fig = figures.curves_figure(frame, **controls)
        st.plotly_chart(fig, key=f"curves-{run_id}", config={"displaylogo": False})
        if every is not None and (record.is_finished or (waiting and len(state.frame))):
            st.rerun()  # the whole page: re-registers this fragment at its next pace

    _panel()


# -- run detail panels ------------------------------------------------------------------------------


def summary_frame(summary: Mapping[str, Mapping[str, Any]]) -> pd.DataFrame:
    """The registry's summary metrics as a table: split, metric, last, step, best, best step."""
    rows = []
    for key, entry in sorted(summary.items()):
        split, _, name = key.partition("/")
        rows.append({"split": split, "metric": name, "last": entry.get("last"),
                     "last step": entry.get("last_step"), "best": entry.get("best"),
                     "best step": entry.get("best_step")})
    return pd.DataFrame(rows, columns=["split", "metric", "last", "last step", "best", "best step"])


def bundle_bytes(run_id: str) -> Callable[[], bytes]:
    """A callable writing the run's reproducible zip (``cli.export_bundle``) and returning it."""
    def build() -> bytes:
        from workbench.cli import export_bundle

        return Path(export_bundle(workspace(), run_id)).read_bytes()

    return build


def _children(record: RunRecord, relation: str) -> list[RunRecord]:
    return [r for r in get_registry().list_runs(action=relation.split("_")[0])
            if r.parent_run_id == record.run_id and r.parent_relation == relation]


def launch_from(record: RunRecord, action: str, checkpoint_path: str | None = None,
                dataset: Mapping[str, Any] | None = None, name: str | None = None) -> RunRecord:
    """Launches an ``evaluate`` or ``predict`` run from ``record``'s model (latest checkpoint by
    default), on its dataset unless another is given."""
    relation = {"evaluate": "evaluate_from", "predict": "predict_from"}[action]
    return launch_run(
        name=name or f"{action} with {record.name}", action=action,
        dataset=dataset if dataset is not None else record.dataset,
        template=record.template, params=record.params, run_config=record.run_config,
        # No pre-flight: the code already ran in the parent, and the check's TRAIN stage needs
        # labels that data to predict on usually lacks.
        schedule={k: v for k, v in record.schedule.items() if k in ("batch_size", "eval_steps")}
        | {"preflight": False},
        parent_run_id=record.run_id, parent_relation=relation, checkpoint_path=checkpoint_path)


def checkpoints_panel(record: RunRecord) -> None:
    """The run's checkpoints, with Evaluate / Predict from a chosen one."""
    folder = get_registry().run_dir(record.run_id)
    ckpts = list_checkpoints(folder)
    if not len(ckpts):
        st.caption("No checkpoints yet.")
        return
    st.dataframe(ckpts, hide_index=True)
    files = ckpts["file"].tolist()
    chosen = st.selectbox("Checkpoint", files, index=len(files) - 1, key=f"ckpt-{record.run_id}")
    path = str(folder / paths.MODEL_DIR / chosen)
    c1, c2 = st.columns(2)
    if c1.button("Evaluate this checkpoint", key=f"ckpt-eval-{record.run_id}"):
        child = launch_from(record, "evaluate", checkpoint_path=path)
        switch_to("run", child.run_id)
    if c2.button("Predict with this checkpoint", key=f"ckpt-pred-{record.run_id}"):
        child = launch_from(record, "predict", checkpoint_path=path)
        switch_to("run", child.run_id)


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


def _probability_columns(frame: pd.DataFrame) -> list[str]:
    return [c for c in frame.columns if str(c).startswith(("probability_", "probabilities_"))]


def evaluation_plots(record: RunRecord) -> None:
    """Confusion matrix and ROC/PR curves (classifiers) or residuals (regressors) on the run's
    evaluation split, from a predict run of its model (launched on demand: the UI never loads
    the model itself)."""
    from workbench import datasets

    if record.action not in TRAINING_ACTIONS:
        st.caption("Evaluation plots are drawn for training runs.")
        return
    done = [c for c in _children(record, "predict_from")
            if c.status == "succeeded" and c.dataset.get("fingerprint") == record.dataset.get("fingerprint")]
    pending = [c for c in _children(record, "predict_from") if c.is_active]
    if not done:
        if pending:
            st.info(f"Predicting with the model (run {pending[0].run_id})… reload the tab when it ends.")
        elif st.button("Compute evaluation plots", key=f"evalplots-{record.run_id}",
                       disabled=not record.is_finished, help="Runs predict on the dataset in a runner process."):
            launch_from(record, "predict", name=f"eval plots of {record.name}")
            st.rerun()
        return
    preds = predictions_frame(done[0].run_id)
    try:
        spec = datasets.DatasetSpec.from_dict(record.dataset)
        df = load_dataset_frame(spec.path)
    except (ValueError, OSError) as exc:
        show_error(exc, level="warning", prefix="The run's dataset cannot be read: ")
        return
    if preds is None or len(preds) != len(df):
        st.warning("The predictions do not line up with the dataset rows.")
        return
    _, eval_df = datasets.split(df, spec)
    rows = df.index.get_indexer(eval_df.index) if len(eval_df) else np.arange(len(df))
    label = spec.schema.label
    info = datasets.task_info(df, spec)
    part = preds.iloc[rows]
    st.caption(f"{len(rows)} evaluation rows · predictions from run {done[0].run_id}")
    if spec.task == "classification" and "class_ids" in preds.columns:
        y = datasets.encode_labels(df[label].iloc[rows], info)
        names = info["label_vocabulary"]
        matrix = figures.confusion_matrix(y, part["class_ids"].to_numpy(), len(names))
        normalize = st.toggle("Normalise rows", key=f"cm-norm-{record.run_id}")
        st.plotly_chart(figures.confusion_matrix_figure(matrix, names, normalize=normalize),
                        key=f"cm-{record.run_id}")
        prob_cols = _probability_columns(preds)
        if len(prob_cols) == len(names):
            st.plotly_chart(figures.roc_pr_figure(y, part[prob_cols].to_numpy(), names), key=f"roc-{record.run_id}")
    elif spec.task == "regression":
        column = next((c for c in ("predictions", "prediction", "predictions_0") if c in preds.columns), None)
        if column is None:
            st.caption("No numeric prediction column found.")
            return
        y = pd.to_numeric(df[label].iloc[rows], errors="coerce").to_numpy()
        st.plotly_chart(figures.residuals_figure(y, part[column].to_numpy()), key=f"res-{record.run_id}")


# -- predictions ------------------------------------------------------------------------------------


def prediction_dataset(base: Any, upload_name: str | None, upload_bytes: bytes | None) -> dict[str, Any]:
    """The dataset dict of a predict run: the training run's own (``upload_bytes`` None) or an
    uploaded file with the training roles (columns the file lacks, e.g. the label, are dropped)."""
    from workbench import datasets

    if upload_bytes is None:
        spec = base
    else:
        with st.spinner("Checking the file…"):
            path = datasets.save_upload(workspace(), upload_name or "upload.csv", upload_bytes)
            df = load_dataset_frame(path)
        try:
            spec = datasets.prediction_spec(base, {"kind": "file", "path": str(path)}, df)
        except ValueError as exc:
            raise ValueError(f"The file {upload_name!r}: {exc}") from None
    return spec.to_dict() | {"fingerprint": spec.fingerprint()}


def single_prediction(preds: pd.DataFrame) -> None:
    """The first row of a predictions table, readable at a glance: the predicted class and one
    probability per class (classifiers) or the predicted value (regressors).

    ``st.metric`` and ``st.table`` render markdown, so class names (user data) are escaped."""
    row = preds.iloc[0]
    prob_cols = _probability_columns(preds)
    value_col = next((c for c in ("class", "class_ids", "predictions", "prediction", "predictions_0")
                      if c in preds.columns), None)
    if value_col is None:
        return
    with st.container(key="single-prediction"):
        c1, c2 = st.columns([1, 2])
        value = row[value_col]
        shown = f"{value:.6g}" if isinstance(value, float) else str(value)
        c1.metric("Predicted class" if value_col.startswith("class") else "Prediction", md(shown))
        if prob_cols:
            names = [str(c).split("_", 1)[1] for c in prob_cols]
            c2.table(pd.DataFrame({"class": [md(n) for n in names],
                                   "probability": [f"{float(row[c]):.4f}" for c in prob_cols]}),
                     hide_index=True)


def prediction_result(run_id: str, interval: float = LIVE_INTERVAL_S) -> None:
    """Status of a predict run while it works (polling fragment), then a preview of its
    ``predictions.csv`` and a download button (the file is read only when clicked)."""
    registry = get_registry()
    try:
        first = registry.get(run_id)
    except RunNotFoundError:
        return
    every = interval if first.is_active else None

    @st.fragment(run_every=every)
    def _panel() -> None:
        if every is not None:
            get_launcher()
        record = registry.get(run_id)
        if record.is_active:
            st.info(f"Predicting… run {run_id} is {record.status}.", icon=":material/hourglass_top:")
            return
        if every is not None:
            st.rerun()
        if record.status != "succeeded":
            show_error(record.error or "see its worker log", prefix=f"Run {run_id} {record.status}: ")
            page_link("run", "Open the run", run_id=run_id)
            return
        preds = predictions_frame(run_id)
        if preds is None:
            st.error(f"Run {run_id} wrote no predictions file.")
            return
        st.success(f"{len(preds):,} predictions · {preds.shape[1]} columns (run {run_id})")
        if len(preds) == 1:
            single_prediction(preds)
        st.dataframe(preds.head(100), hide_index=True)
        path = paths.run_dir(workspace(), run_id) / paths.PREDICTIONS_FILE
        st.download_button("Download predictions CSV", data=lambda: path.read_bytes(),
                           file_name=f"predictions-{run_id}.csv", mime="text/csv", on_click="ignore",
                           icon=":material/download:", key=f"dl-{run_id}")

    _panel()
