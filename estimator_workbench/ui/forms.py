"""Input widgets: the code editor, the params and RunConfig forms, the run picker, and the launch
and warm-start actions behind the Train page's buttons."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import streamlit as st

from estimator_workbench.store import mlflow_state, paths
from estimator_workbench.store.records import RunRecord
from estimator_workbench.store.run_spec import (
    MAX_PROCESSES,
    EarlyStoppingSettings,
    RunConfigSettings,
    Schedule,
    field_bounds,
    machine_limit,
)
from estimator_workbench.ui.session import (
    get_launcher,
    get_registry,
    md,
    selected_run_id,
    set_selected_run,
)
from estimator_workbench.ui.session import (
    label as label_text,
)
from estimator_workbench.ui.signin import current_actor
from estimator_workbench.ui.tables import start_from_label

__all__ = ['EDITOR_FONT', 'NAN_POLICIES', 'csv_read_form', 'edit_code', 'encodings_form', 'keep_roles', 'kept_roles', 'launch_run', 'params_form', 'process_choices', 'run_config_form', 'run_picker', 'single_row_inputs',
           'start_from_picker', 'warm_start_check']


NAN_POLICIES = {"fail": "Fail the run", "stop": "Stop training (keep the last checkpoint)"}


def run_picker(records: Sequence[RunRecord], label: str = "Run", key: str = "run_picker") -> RunRecord | None:
    """A selectbox over ``records`` preselecting the URL's run (else the session's last one); the
    chosen run is put in the URL (``?run=``) on every page run, so a reload shows the same run."""
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
    # In the URL and the session on every page run, not only on a change: a sidebar link opens
    # the page without ?run=, and the run chosen through a link (never stored in the session) or
    # the URL lost on the way gave the newest run instead, on the page and on a reload (issue 28
    # item 2), with Stop, Cancel and Delete acting on it.
    if st.session_state.get("selected_run") != choice or st.query_params.get("run") != choice:
        set_selected_run(choice)
    return by_id[choice]


def start_from_picker(records: Sequence[RunRecord], label: str = "Start from (warm start / evaluate / predict)",
                      key: str = "start-from", default: str | None = None) -> str:
    """A selectbox of ``records`` (``tables.finished_runs_for_start``) labelled by
    ``tables.start_from_label``; returns the chosen
    run id, or ``''`` for a fresh initialisation."""
    by_id = {r.run_id: r for r in records}
    options = ["", *by_id]
    index = options.index(default) if default in options else 0
    chosen = st.selectbox(label, options, index=index, key=key,
                          format_func=lambda i: "fresh initialisation" if not i else start_from_label(by_id[i]),
                          help="Finished training runs, newest first.")
    return chosen or ""


def single_row_inputs(sample: pd.DataFrame, columns: Sequence[str], dtypes: Mapping[str, str],
                      key: str) -> dict[str, Any]:
    """Typed inputs for one row to predict (call inside an ``st.form``): a number field for a
    numeric column, a select of the values seen in ``sample`` for a categorical one (up to 1,000
    most frequent; more are typed as text), a date field for a date column. Starts from the
    first row of ``sample``; returns column -> value."""
    import datetime as _dt

    row: dict[str, Any] = {}
    grid = st.columns(3)
    for i, column in enumerate(columns):
        values = sample[column]
        first = values.iloc[0] if len(values) else None
        label, wkey, cell = label_text(column), f"{key}-{i}", grid[i % 3]
        kind = dtypes.get(column)
        if kind == "numeric":
            numbers = pd.to_numeric(values, errors="coerce")
            number = float(first) if first is not None and pd.notna(first) else \
                float(numbers.median()) if numbers.notna().any() else 0.0
            row[column] = cell.number_input(label, value=number, format="%g", key=wkey)
        elif kind == "date":
            from estimator_workbench.data.profile import parse_dates

            dates = parse_dates(values).dropna()
            day = dates.iloc[0].date() if len(dates) else _dt.date.today()
            row[column] = cell.date_input(label, value=day, key=wkey).isoformat()
        else:
            counts = values.dropna().astype(str).value_counts()
            if 0 < len(counts) <= 1000:
                options = sorted(counts.index)
                shown = str(first) if pd.notna(first) and str(first) in options else options[0]
                row[column] = cell.selectbox(label, options, index=options.index(shown), key=wkey)
            else:
                row[column] = cell.text_input(label, value="" if first is None or pd.isna(first) else str(first),
                                              key=wkey)
    return row


_DATE_CHOICES = {"expand": "Expand into year, month and day of week", "ignore": "Leave it out"}
_TEXT_CHOICES = {"vocabulary": "Keep: one id per value", "hash": "Hash buckets",
                 "embedding": "Embedding", "ignore": "Ignore"}


_DELIMITER_NAMES = {",": "',' comma", ";": "';' semicolon", "\t": "tab", "|": "'|' pipe"}


def csv_read_form(saved: Mapping[str, Any], key: str) -> dict[str, str]:
    """The Data page's choice of how a CSV file is read: its field delimiter and text encoding,
    each 'Detected' (``load_csv`` finds it) or one of ``DELIMITERS`` / ``CSV_ENCODINGS``, starting
    from ``saved`` (the ``read_options`` of the session's dataset for this file). Returns the
    chosen ones for the dataset ref (``DatasetSpec.read_options``): empty when both are detected."""
    from estimator_workbench.data.sources import CSV_ENCODINGS, DELIMITERS

    chosen: dict[str, str] = {}
    c1, c2 = st.columns(2)
    for column, name, label, choices, names in (
            (c1, "delimiter", "Delimiter", DELIMITERS, _DELIMITER_NAMES),
            (c2, "encoding", "Encoding", CSV_ENCODINGS, {})):
        options = [None, *choices]
        start = saved.get(name)
        value = column.selectbox(label, options, index=options.index(start) if start in options else 0,
                                 key=f"{key}-{name}", format_func=lambda v, n=names: "Detected" if v is None
                                 else n.get(v, v),
                                 help=f"How the file is read, for this page and for every run on it. "
                                      f"'Detected' lets the workbench find the {name}.")
        if value is not None:
            chosen[name] = value
    return chosen


_ROLES_KEY = "_data-roles"  # session state: dataset key -> {"base": rows, "edited": rows}


def kept_roles(table: pd.DataFrame, data_key: str, editing: bool) -> pd.DataFrame:
    """The table the Data page's roles editor starts from for the data ``data_key``: while its
    editor is on the page (``editing``), the table it was created with (its edits apply on top of
    it); a new editor (another dataset or page was shown meanwhile) starts from the roles this
    session last set for this data (``keep_roles``), else ``table``."""
    memory = st.session_state.setdefault(_ROLES_KEY, {})
    kept = memory.get(data_key)
    if editing and kept is not None:
        return pd.DataFrame(kept["base"])
    edited = (kept or {}).get("edited")
    start = pd.DataFrame(edited) if edited and [r["column"] for r in edited] == list(table["column"]) else table
    memory[data_key] = {"base": start.to_dict("records"), "edited": start.to_dict("records")}
    return start


def keep_roles(data_key: str, edited: pd.DataFrame) -> None:
    """Remembers the roles and types set in the editor of the data ``data_key`` (``kept_roles``)."""
    memory = st.session_state.setdefault(_ROLES_KEY, {})
    memory.setdefault(data_key, {"base": edited.to_dict("records")})["edited"] = edited.to_dict("records")


def encodings_form(df: pd.DataFrame, schema: Any, saved: Any, key: str) -> tuple[dict[str, str], int]:
    """The Data page's choices for date columns (expand / leave out) and high-cardinality text
    columns (keep, hash buckets, embedding, ignore), starting from ``saved`` (the session's
    ``DatasetSpec`` of this data, or None). Returns ``(encodings, hash_buckets)`` for the
    ``DatasetSpec``: only the columns not left at their default."""
    from estimator_workbench.data import datasets

    def start(column: str, kind: str, default: str) -> str:
        if saved is not None and column in saved.schema.names and saved.schema.column(column).dtype == kind:
            return saved.encoding(column)
        return default

    dates = [c.name for c in schema.columns if c.role == datasets.FEATURE and c.dtype == datasets.DATE]
    text = [c.name for c in schema.columns if c.role == datasets.FEATURE and c.dtype == datasets.CATEGORICAL]
    high = datasets.high_cardinality(df, text)
    encodings: dict[str, str] = {}
    hash_buckets = saved.hash_buckets if saved is not None else datasets.DEFAULT_HASH_BUCKETS
    if not dates and not high:
        return encodings, hash_buckets
    st.subheader("Dates and high-cardinality columns")
    for i, column in enumerate(dates):
        initial = list(_DATE_CHOICES).index(start(column, datasets.DATE, "expand"))
        choice = st.radio(label_text(f"Date column {column}"), list(_DATE_CHOICES), index=initial,
                          key=f"{key}-date-{i}-{column}", horizontal=True, format_func=_DATE_CHOICES.get) or "expand"
        st.caption(md(datasets.encoding_note(column, choice, "date", df[column] if column in df.columns else None)))
        if choice != "expand":
            encodings[column] = choice
    for i, (column, n) in enumerate(high.items()):
        initial = list(_TEXT_CHOICES).index(start(column, datasets.CATEGORICAL, "vocabulary"))
        st.warning(f"{md(column)} has {n:,} distinct values in {len(df):,} rows (over "
                   f"{datasets.HIGH_CARDINALITY}): one id per value learns little from values seen once. "
                   "Hash them into buckets, embed them, or ignore the column.", icon=":material/warning:")
        choice = st.radio(label_text(f"Text column {column}"), list(_TEXT_CHOICES), index=initial,
                          key=f"{key}-text-{i}-{column}", horizontal=True,
                          format_func=_TEXT_CHOICES.get) or "vocabulary"
        if choice != "vocabulary":
            encodings[column] = choice
    if "hash" in encodings.values():
        hash_buckets = int(st.number_input("Hash buckets", 2, 1_000_000, hash_buckets, key=f"{key}-buckets",
                                           help="Values hashed into the same bucket share one id."))
    return encodings, hash_buckets


def _editor_text(response: Any) -> str | None:
    """The text in a ``streamlit-code-editor`` response, None before its first event (an empty
    editor is ``''``, not None)."""
    if isinstance(response, Mapping):
        return str(response.get("text") or "") if response.get("id") else None
    return response if isinstance(response, str) else None


#: The code editor's font: local monospace fonts only. The component's default, "Source Code Pro",
#: comes with its Streamlit themes, which @import it from fonts.googleapis.com (issue 27).
EDITOR_FONT = 'ui-monospace, "SFMono-Regular", Menlo, Consolas, "DejaVu Sans Mono", "Liberation Mono", monospace'


def _editor_theme() -> str:
    """The Ace theme of the code editor: one that ships with the component (its own
    ``streamlit_light``/``streamlit_dark`` themes fetch their font from Google, offline a failure
    and a leak to a third party); dark when the browser shows Streamlit's dark theme."""
    try:
        dark = st.context.theme.type == "dark"
    except AttributeError:  # a Streamlit without st.context.theme
        dark = False
    return "tomorrow_night" if dark else "textmate"


def edit_code(label: str, value: str, key: str, height: int = 420,
              on_change: Callable[[str], None] | None = None) -> str:
    """A code editor: ``streamlit-code-editor`` (Ace, bundled, works offline) when installed,
    else ``st.text_area``. Returns the current text.

    The Ace editor reports its text when it loses focus (a click on a button, a link or anywhere
    outside it) and on its Apply button / Ctrl+Enter. Its public ``code_editor()`` takes no
    ``on_change``, so each report (a fresh event id) is recognised in the script run it starts and
    ``on_change(text)`` is called then, once per event. The text area calls it as its widget
    callback."""
    def changed() -> None:
        text = _editor_text(st.session_state.get(key))
        if text is not None and on_change is not None:
            on_change(text)

    try:
        from code_editor import code_editor
    except ImportError:
        code_editor = None
    if code_editor is not None and not st.session_state.get("_plain_editor"):
        try:
            response = code_editor(
                value, lang="python", theme="default", key=key, height=[18, 30], focus=False,
                shortcuts="vscode", snippets=["", ""], completions=[], keybindings={},
                buttons=[{"name": "Apply", "feather": "Check", "hasText": True, "alwaysOn": True,
                          "commands": ["submit"], "style": {"bottom": "0.4rem", "right": "0.4rem"}}],
                # props reach Ace last: their theme replaces the one `theme=` picks (always a
                # streamlit_* theme, which fetches its font from Google)
                options={"fontFamily": EDITOR_FONT}, props={"theme": _editor_theme()}, editor_props={},
                component_props={}, menu={}, info={},
                allow_reset=False, replace_completer=False, response_mode=["blur"], ghost_text="")
        except TypeError:  # a release with another signature: the plain editor still works
            st.session_state["_plain_editor"] = True
        else:
            text = _editor_text(response)
            if text is None:
                return value
            event = response.get("id") if isinstance(response, Mapping) else None
            handled = f"_editor_event-{key}"  # the last event passed to on_change
            if event and st.session_state.get(handled) != event:
                st.session_state[handled] = event
                if on_change is not None:
                    on_change(text)
            return text
    return st.text_area(label, value=value, height=height, key=key, on_change=changed)


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
        label = label_text(spec.get("label") or name)
        help_text = spec.get("help")
        wkey = f"{key}-{name}"
        with cols[i % 2]:
            if ptype == "bool":
                out[name] = st.checkbox(label, value=bool(current), help=help_text, key=wkey)
            elif ptype == "choice":
                choices = list(spec.get("choices") or [])
                index = choices.index(current) if current in choices else 0
                out[name] = st.selectbox(label, choices, index=index, help=help_text, key=wkey)
            # No min/max on the widgets: the browser marks a value out of bounds red with its reason
            # in a tooltip only, and the form's button then did nothing (issue 28 item 3). The
            # bounds are checked on submit (``templates.validate_params``), every problem in words.
            elif ptype == "int":
                out[name] = st.number_input(label, value=int(current), step=1, help=_bounds_help(spec, help_text),
                                            key=wkey)
            elif ptype == "float":
                out[name] = st.number_input(label, value=float(current), format="%g",
                                            step=_float_step(float(current)), help=_bounds_help(spec, help_text),
                                            key=wkey)
            else:
                out[name] = st.text_input(label, value="" if current is None else str(current),
                                          help=help_text, key=wkey)
    return out


def _bounds_help(spec: Mapping[str, Any], help_text: str | None) -> str | None:
    lo, hi = spec.get("min"), spec.get("max")
    bounds = _range_text(lo, hi)
    return " ".join(t for t in (help_text, f"Allowed: {bounds}." if bounds else None) if t) or None


def _range_text(lo: Any, hi: Any) -> str:
    """'from 1 to 100', 'at least 0', 'at most 5' or '' (numbers as ``:,`` / ``:g``)."""
    def fmt(v: Any) -> str:
        return f"{v:,}" if isinstance(v, int) else f"{v:g}"

    if lo is not None and hi is not None:
        return f"from {fmt(lo)} to {fmt(hi)}"
    return f"at least {fmt(lo)}" if lo is not None else f"at most {fmt(hi)}" if hi is not None else ""


def _float_step(value: float) -> float:
    if value == 0:
        return 0.01
    return float(10 ** np.floor(np.log10(abs(value))))


def run_config_form(gpus: Sequence[str], key: str = "rc", values: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The RunConfig and schedule widgets (call inside an ``st.form``).

    Every number's limits are the run contract's (``estimator_workbench.store.run_spec``: the
    ``ge``/``le`` of the ``Schedule``, ``RunConfigSettings`` and ``EarlyStoppingSettings``
    fields), so the form and the CLI accept the same values. They are named in each field's help
    and checked here, not by the widget: a value out of them is listed in ``problems`` in words,
    for the page to show next to its button. The process count offers only what this machine
    holds (``process_choices``). ``values`` (widget key -> value, e.g.
    ``context.remembered_form``) sets the initial values.

    Returns ``{'action', 'schedule': {...}, 'run_config': {...}, 'num_processes', 'problems'}``. The schedule
    always has ``nan_policy`` (``'fail'`` or ``'stop'``) and, only when the box is ticked,
    ``early_stopping = {'metric', 'mode', 'patience', 'min_delta'}`` (read by the runner's
    the engine's early-stopping hook; train_and_evaluate only).
    """
    values = dict(values or {})
    problems: list[str] = []

    def number(column: Any, label: str, model: Any, field: str, default: Any, name: str,
               low: Any = None, **kwargs: Any) -> Any:
        lo, hi = field_bounds(model, field)
        lo = lo if low is None else low
        value = values.get(f"{key}-{name}", default)
        if (isinstance(default, int) and not isinstance(value, int)) or not (lo is None or value >= lo) \
                or not (hi is None or value <= hi):
            value = default  # a remembered value the contract no longer allows
        # The contract's bounds are checked here, not by the widget: a widget marks a value out of
        # its bounds red with a tooltip and keeps the form from submitting, without a word.
        allowed = _range_text(lo, hi)
        help_text = " ".join(t for t in (kwargs.pop("help", None), f"Allowed: {allowed}." if allowed else None) if t)
        chosen = column.number_input(label, value=value, key=f"{key}-{name}", help=help_text or None, **kwargs)
        if (lo is not None and chosen < lo) or (hi is not None and chosen > hi):
            problems.append(f"'{label}' is {chosen:g}: it must be {allowed}.")
        return chosen

    def choice(column: Any, label: str, options: Sequence[str], name: str, **kwargs: Any) -> Any:
        remembered = values.get(f"{key}-{name}")
        index = list(options).index(str(remembered)) if remembered in options else 0
        return column.selectbox(label, options, index=index, key=f"{key}-{name}", **kwargs)

    c1, c2, c3 = st.columns(3)
    action = choice(c1, "Action", ["train_and_evaluate", "train", "evaluate", "predict"], "action",
                    help="evaluate and predict use the checkpoint of the run chosen under 'Start from'.")
    max_steps = number(c2, "Train until step (max_steps)", Schedule, "max_steps", 500, "steps", step=100)
    batch_size = number(c3, "Batch size", Schedule, "batch_size", 32, "batch")
    c1, c2, c3 = st.columns(3)
    seed = number(c1, "Seed (tf_random_seed)", RunConfigSettings, "tf_random_seed", 42, "seed")
    ckpt_steps = number(c2, "Checkpoint every N steps", RunConfigSettings, "save_checkpoints_steps", 100, "ckpt")
    keep = number(c3, "Keep checkpoints (keep_checkpoint_max)", RunConfigSettings, "keep_checkpoint_max", 5,
                  "keep", help="0 keeps all.")
    c1, c2, c3 = st.columns(3)
    metrics_every = number(c1, "Log metrics every N steps", Schedule, "metrics_every_n_steps", 10, "metrics")
    eval_every = number(c2, "Evaluate every N steps", Schedule, "eval_every_steps", 100, "eval",
                        help="train_and_evaluate only.")
    # 0 is the form's "not set" (the run contract has no value for it): the whole eval split
    eval_steps = number(c3, "Eval batches (0: the whole eval split)", Schedule, "eval_steps", 0, "evalsteps", low=0)
    c1, c2, c3 = st.columns(3)
    devices = ["auto", "cpu"] + [f"cuda:{g}" for g in range(len(gpus))]
    device = choice(c1, "Device", devices, "device",
                    help=f"GPUs found: {len(gpus)}." if gpus else "No GPU found: CPU only.")
    allowed, why = process_choices(len(gpus))
    processes = values.get(f"{key}-procs", 1)
    num_processes = c2.selectbox("Processes (torchrun)", allowed, key=f"{key}-procs",
                                 index=allowed.index(processes) if processes in allowed else 0,
                                 help=f"More than one runs DDP under torchrun. At most {allowed[-1]}: {why}.")
    summary_steps = number(c3, "Log loss every N steps (log_step_count_steps)", RunConfigSettings,
                           "log_step_count_steps", 100, "log")
    # A form cannot show fields only once a box is ticked (it reruns on submit), so the early
    # stopping fields are always there and are used only when the box is ticked.
    c1, c2, c3, c4, c5 = st.columns([1.2, 1.2, 0.8, 1, 1], vertical_alignment="bottom")
    early = c1.checkbox("Early stopping", value=bool(values.get(f"{key}-es", False)), key=f"{key}-es",
                        help="train_and_evaluate only (it watches the evaluations, one every 'Evaluate "
                             "every N steps'): stops training when the eval metric has not improved "
                             "for 'patience' evaluations in a row.")
    es_metric = c2.text_input("Watch eval metric", value=str(values.get(f"{key}-es-metric", "loss")),
                              key=f"{key}-es-metric",
                              help="An eval metric the evaluation reports, e.g. loss, accuracy, auc, "
                                   "average_loss. Early stopping only applies to train_and_evaluate.")
    es_mode = choice(c3, "Mode", ["min", "max"], "es-mode",
                     help="min: lower is better (loss, error); max: higher is better (accuracy, auc).")
    es_patience = number(c4, "Patience (evaluations)", EarlyStoppingSettings, "patience", 3, "es-patience",
                         help="Evaluations without improvement before training stops.")
    es_delta = number(c5, "Min delta", EarlyStoppingSettings, "min_delta", 0.0, "es-delta", format="%g",
                      step=0.001, help="A change smaller than this does not count as an improvement.")
    remembered_nan = values.get(f"{key}-nan")
    nan_policy = st.radio("On NaN loss", list(NAN_POLICIES), horizontal=True, key=f"{key}-nan",
                          index=list(NAN_POLICIES).index(remembered_nan) if remembered_nan in NAN_POLICIES else 0,
                          format_func=NAN_POLICIES.get,
                          help="fail: the run fails with the step and the last finite loss (TF's "
                               "NanTensorHook default). stop: training stops there and the run ends "
                               "'stopped' with the same message, keeping its checkpoints from before "
                               "the NaN.")
    mirror_uri = mlflow_state.mirror_uri()
    mirror = st.checkbox(
        # On whenever a server is set (per run, not remembered): $WORKBENCH_MLFLOW_URI asks for every run.
        "Mirror to MLflow", value=mirror_uri is not None,
        key=f"{key}-mlflow", disabled=mirror_uri is None,
        help=(f"Once the run has finished, its params, RunConfig, metrics, tags, notes and model go to the MLflow "
              f"server at {mlflow_state.redact_uri(mirror_uri)}. MLflow being down never fails the run: the "
              "run page says so and the mirror is retried." if mirror_uri is not None else
              f"Set {mlflow_state.URI_ENV_VAR} to an MLflow tracking server's URI before starting the workbench "
              "to mirror runs there (and install the mlflow extra)."))
    schedule: dict[str, Any] = {"max_steps": int(max_steps), "batch_size": int(batch_size),
                "metrics_every_n_steps": int(metrics_every), "eval_every_steps": int(eval_every),
                "nan_policy": nan_policy}
    if eval_steps:
        schedule["eval_steps"] = int(eval_steps)
    if mirror_uri is not None:
        schedule["mlflow"] = bool(mirror)
    if early:
        schedule["early_stopping"] = {"metric": es_metric.strip() or "loss", "mode": es_mode,
                                      "patience": int(es_patience), "min_delta": float(es_delta)}
    run_config = {"tf_random_seed": int(seed), "save_checkpoints_steps": int(ckpt_steps),
                  "keep_checkpoint_max": int(keep) or None, "log_step_count_steps": int(summary_steps),
                  "save_summary_steps": int(summary_steps), "device": device}
    return {"action": action, "schedule": schedule, "run_config": run_config,
            "num_processes": int(num_processes), "problems": problems}


def process_choices(gpu_count: int) -> tuple[list[int], str]:
    """``(the process counts the Train form offers, why the largest)``: 1 up to what this
    machine holds (``run_spec.machine_limit``, which the submit enforces too) and, with GPUs, one
    process per GPU.

    Example:
        >>> process_choices(0)[0][0]
        1
    """
    limit = machine_limit()
    top, why = min(limit.processes, MAX_PROCESSES), limit.reason
    if gpu_count and gpu_count < top:
        top, why = gpu_count, f"one process per GPU, {gpu_count} found"
    return list(range(1, max(1, top) + 1)), why


# Run-contract field -> the Train form's control, so a refusal names what to change on the page.
UI_CONTROLS = {"max_steps": "'Train until step'", "batch_size": "'Batch size'",
               "tf_random_seed": "'Seed'", "save_checkpoints_steps": "'Checkpoint every N steps'",
               "keep_checkpoint_max": "'Keep checkpoints'", "metrics_every_n_steps": "'Log metrics every N steps'",
               "eval_every_steps": "'Evaluate every N steps'", "eval_steps": "'Eval batches'",
               "num_processes": "'Processes (torchrun)'", "log_step_count_steps": "'Log loss every N steps'",
               "early_stopping.metric": "'Watch eval metric'", "early_stopping.mode": "'Mode'",
               "early_stopping.patience": "'Patience (evaluations)'", "early_stopping.min_delta": "'Min delta'",
               "nan_policy": "'On NaN loss'", "action": "'Action'",
               "early_stopping": "untick 'Early stopping'"}


def launch_run(*, name: str, action: str, dataset: Mapping[str, Any], template: Mapping[str, Any],
               params: Mapping[str, Any], run_config: Mapping[str, Any], schedule: Mapping[str, Any],
               parent_run_id: str | None = None, parent_relation: str | None = None,
               checkpoint_path: str | None = None, num_processes: int = 1) -> RunRecord:
    """Submits a run through the one submit path (``estimator_workbench.execution.submit.submit_run``):
    validated against the run contract (a ``RunSpecError``, a ``ValueError``, names the form's
    control), pre-flight policy, registered, handed to the launcher (it starts now or waits in the
    queue). A multi-process training run is checked first, under a spinner; a failed check
    launches nothing.
    """
    from estimator_workbench.execution.preflight import run_preflight
    from estimator_workbench.execution.submit import submit_run

    def preflight_with_spinner(*args: Any, **kwargs: Any) -> Any:
        with st.spinner("Pre-flight check of the model_fn on a tiny batch..."):
            return run_preflight(*args, **kwargs)

    return submit_run(get_registry(), get_launcher(), name=name, action=action, dataset=dataset,
                      template=template, params=params, run_config=run_config, schedule=schedule,
                      num_processes=num_processes, parent_run_id=parent_run_id, relation=parent_relation,
                      checkpoint_path=checkpoint_path, control=UI_CONTROLS,
                      preflight_runner=preflight_with_spinner, owner=current_actor().name)


def warm_start_check(*, template: Mapping[str, Any], params: Mapping[str, Any], dataset: Mapping[str, Any],
                     run_config: Mapping[str, Any], parent: RunRecord) -> Any:
    """Runs the compatibility check of a warm start (in a child process) and shows its report.

    Returns the ``CompatibilityReport``; a variable that differs in shape makes it not ``ok``.
    """
    from estimator_workbench.execution.compat import check_compatibility

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
