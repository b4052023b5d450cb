"""The Compare page's logic: which runs (URL ``?runs=`` and a picker), what differs between them,
the metrics worth comparing, the best run, and the live overlay of their curves.

Pure helpers (``run_facts``, ``differing_facts``, ``comparison_frame``, ``metric_options``,
``default_direction``, ``best_run``) take and return plain data and are unit-tested directly; the
functions that draw (``pick_runs``, ``compare_view``) are the page's body and import streamlit
where they run, so the helpers import without it (the layering test checks that).

Speed with many runs: each run's ``metrics.jsonl`` is parsed once per change of the file
(``st.cache_data`` keyed by path, modification time and size), downsampled to a per-run point
budget so that the overlay of 50 runs stays a few thousand points per series, and the figure is
built in one batch of traces (``figures.curves_figure``).

Example:
    >>> facts = [{"param: learning_rate": 0.1, "seed": 1}, {"param: learning_rate": 0.01, "seed": 1}]
    >>> differing_facts(facts)
    ['param: learning_rate']
"""

from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from estimator_workbench.execution.system_metrics import SYSTEM_SPLIT
from estimator_workbench.store import metrics_store, paths
from estimator_workbench.store.metric_values import BEST, FINAL, metric_label, metric_value
from estimator_workbench.store.records import RunRecord, is_lower_better
from estimator_workbench.ui import figures

__all__ = [
    "DEFAULT_SMOOTHING",
    "QUERY_KEY",
    "SMOOTHED_LOSS",
    "STATE_KEY",
    "best_run",
    "compare_view",
    "comparison_frame",
    "default_direction",
    "differing_facts",
    "metric_options",
    "overlay_frame",
    "parse_run_ids",
    "pick_runs",
    "resolve_metric",
    "run_facts",
    "run_series",
    "smoothed_last",
]

QUERY_KEY = "runs"  # ?runs=r-1,r-2 (the Runs table's "Compare" sends it)
SMOOTHED_LOSS = "train loss (smoothed)"
DEFAULT_SMOOTHING = 0.6  # TensorBoard's default, used for the table when the chart's slider is at 0
_TOTAL_POINTS = 40_000  # per metric series over all overlaid runs (the browser draws them all)
STATE_KEY = "compare_runs"  # the session's run set (the Runs page's open_compare sets it too)
_PICKER_KEY = "cmp-runs"
_SEEN_QUERY_KEY = "_cmp-query-seen"


def parse_run_ids(value: str | Sequence[str] | None, known: Sequence[str]) -> tuple[list[str], list[str]]:
    """``(ids, unknown)`` from a ``?runs=`` value (comma-separated; repeated keys allowed): the known
    ids in the given order without repeats, and the ones this workspace lacks.

    Example:
        >>> parse_run_ids("r-1, r-2,r-1,r-9", ["r-1", "r-2"])
        (['r-1', 'r-2'], ['r-9'])
    """
    if value is None:
        return [], []
    parts = [value] if isinstance(value, str) else list(value)
    wanted = [p.strip() for part in parts for p in str(part).split(",") if p.strip()]
    known_set = set(known)
    ids = list(dict.fromkeys(w for w in wanted if w in known_set))
    unknown = list(dict.fromkeys(w for w in wanted if w not in known_set))
    return ids, unknown


def _short_hash(text: str | None) -> str:
    return hashlib.sha256((text or "").encode("utf-8")).hexdigest()[:8]


def _plain_value(value: Any) -> Any:
    return value if isinstance(value, (int, float, str, bool)) or value is None else repr(value)


def run_facts(record: RunRecord) -> dict[str, Any]:
    """What defines a run, flat: template (name, and a hash of its code when edited), dataset (name
    and fingerprint), seed, steps, one ``param: <name>`` per param and ``config: <field>`` per
    RunConfig setting (the seed has its own key)."""
    ref = (record.dataset or {}).get("ref") or {}
    dataset = str(ref.get("name") or Path(str(ref.get("path", ""))).name or "?")
    fingerprint = record.dataset_fingerprint or (record.dataset or {}).get("fingerprint")
    schedule = record.schedule or {}
    steps = schedule.get("max_steps") or schedule.get("steps")
    facts: dict[str, Any] = {
        "template": f"{record.template_name or '?'} ({_short_hash(record.template_code)})",
        "dataset": f"{dataset} ({str(fingerprint).removeprefix('sha256:')[:8]})" if fingerprint else dataset,
        "seed": (record.run_config or {}).get("tf_random_seed"),
        "steps": steps,
    }
    for key in sorted(record.params):
        if key != "task":
            facts[f"param: {key}"] = _plain_value(record.params[key])
    for key in sorted(record.run_config or {}):
        if key != "tf_random_seed":
            facts[f"config: {key}"] = _plain_value(record.run_config[key])
    return facts


def differing_facts(facts: Sequence[Mapping[str, Any]]) -> list[str]:
    """The keys of ``facts`` (one mapping per run) whose values are not the same in every run, in
    first-seen order (a key a run lacks counts as None)."""
    keys = list(dict.fromkeys(k for f in facts for k in f))
    return [k for k in keys if len({repr(f.get(k)) for f in facts}) > 1]


def smoothed_last(values: Sequence[float] | np.ndarray, weight: float = DEFAULT_SMOOTHING) -> float | None:
    """The last value of the debiased EMA of ``values`` (TensorBoard's smoothing), None if empty.

    Example:
        >>> round(smoothed_last([4.0, 0.0], 0.5), 4)   # a noisy last 0.0 reads as 1.3333
        1.3333
    """
    arr = np.asarray(values, dtype=np.float64)
    arr = arr[np.isfinite(arr)]
    if not arr.size:
        return None
    return float(figures.ema_smooth(arr, weight)[-1])


@functools.lru_cache(maxsize=1024)
def _read_series(path: str, mtime_ns: int, size: int, max_points: int) -> tuple[pd.DataFrame, np.ndarray]:
    # Keyed by (path, mtime, size): a file that grew or was replaced is read again, others never.
    # A process-wide LRU of shared, read-only results (callers copy before changing anything):
    # st.cache_data's pickled copies cost more than the parse itself at 50 runs.
    frame = metrics_store.read_all(path)
    loss = frame.loc[(frame["split"] == "train") & (frame["name"] == "loss")].sort_values("step", kind="stable")
    return metrics_store.downsample(frame, max_points), loss["value"].to_numpy(dtype=np.float64)


def run_series(root: Path, run_id: str, max_points: int = 2000) -> tuple[pd.DataFrame, np.ndarray]:
    """``(metrics frame downsampled to max_points per series, every train loss value in step
    order)`` of a run, cached per version of its metrics file."""
    path = paths.run_dir(root, run_id) / paths.METRICS_FILE
    try:
        stat = os.stat(path)
    except OSError:
        return metrics_store.rows_to_frame([]), np.empty(0)
    return _read_series(str(path), stat.st_mtime_ns, stat.st_size, max_points)


def _eval_metric_names(records: Sequence[RunRecord]) -> list[str]:
    names = {key.split("/", 1)[1] for r in records for key in r.summary if key.startswith("eval/")}
    preferred = ("accuracy", "auc", "average_loss", "loss")
    return sorted(names, key=lambda n: (preferred.index(n) if n in preferred else len(preferred), n))


def metric_options(records: Sequence[RunRecord]) -> list[str]:
    """The metrics to compare on: the final value of every eval metric a run logged (``final eval
    <name>``, accuracy and AUC first), then their best values (``best eval <name>``; the one
    definition of ``store.metric_values``), and the smoothed train loss."""
    names = _eval_metric_names(records)
    return ([metric_label(f"eval/{n}", FINAL) for n in names] + [metric_label(f"eval/{n}", BEST) for n in names]
            + [SMOOTHED_LOSS])


def resolve_metric(metric: str, options: Sequence[str]) -> str:
    """``metric`` as one of ``options``: ``'eval accuracy'`` (the name before values were labelled
    final or best) means ``'final eval accuracy'``.

    Example:
        >>> resolve_metric("eval accuracy", ["final eval accuracy", "best eval accuracy"])
        'final eval accuracy'
    """
    if metric not in options and f"{FINAL} {metric}" in options:
        return f"{FINAL} {metric}"
    return metric


def default_direction(metric: str) -> str:
    """``minimize`` for losses and errors, else ``maximize``.

    Example:
        >>> default_direction("eval average_loss"), default_direction("eval accuracy")
        ('minimize', 'maximize')
    """
    return "minimize" if is_lower_better(metric) else "maximize"


def comparison_frame(records: Sequence[RunRecord], labels: Mapping[str, str],
                     train_losses: Mapping[str, np.ndarray], smoothing: float = DEFAULT_SMOOTHING
                     ) -> tuple[pd.DataFrame, list[str]]:
    """``(table, differing)``: one row per run (run, name, status, every fact that differs, the
    last step, the smoothed train loss and each eval metric's final and best value, named as
    ``metric_options`` names them) and the differing facts.
    """
    facts = [run_facts(r) for r in records]
    differing = differing_facts(facts)
    evals = _eval_metric_names(records)
    rows = []
    for record, fact in zip(records, facts):
        summary = record.summary
        steps = [entry.get("last_step") for entry in summary.values() if entry.get("last_step") is not None]
        row: dict[str, Any] = {"run": record.run_id, "name": labels.get(record.run_id, record.name),
                               "status": record.status, "step": max(steps) if steps else None}
        row.update({key: fact.get(key) for key in differing})
        row[SMOOTHED_LOSS] = smoothed_last(train_losses.get(record.run_id, np.empty(0)), smoothing)
        for kind in (FINAL, BEST):
            for name in evals:
                value = metric_value(summary, f"eval/{name}", kind)
                row[value.label] = value.value
        rows.append(row)
    values = [metric_label(f"eval/{n}", kind) for kind in (FINAL, BEST) for n in evals]
    columns = ["run", "name", "status", *differing, "step", SMOOTHED_LOSS, *values]
    table = pd.DataFrame(rows, columns=columns)
    table["step"] = pd.to_numeric(table["step"], errors="coerce").astype("Int64")
    for column in [SMOOTHED_LOSS, *values]:
        table[column] = pd.to_numeric(table[column], errors="coerce").astype("float64")
    return table, differing


def best_run(table: pd.DataFrame, metric: str, direction: str) -> str | None:
    """The ``run`` of the row with the best ``metric`` (``maximize`` or ``minimize``); None when no
    run has a finite value. Ties go to the first row."""
    if direction not in ("maximize", "minimize"):
        raise ValueError(f"direction must be 'maximize' or 'minimize', given: {direction!r}.")
    if metric not in table.columns:
        raise ValueError(f"Metric {metric!r} is not a column of the comparison (columns: {list(table.columns)}).")
    values = pd.to_numeric(table[metric], errors="coerce").to_numpy(dtype=np.float64)
    finite = np.isfinite(values)
    if not finite.any():
        return None
    masked = np.where(finite, values, -np.inf if direction == "maximize" else np.inf)
    index = int(np.argmax(masked) if direction == "maximize" else np.argmin(masked))
    return str(table["run"].iloc[index])


def overlay_frame(runs: Sequence[RunRecord], root: Path) -> tuple[pd.DataFrame, dict[str, np.ndarray]]:
    """``(the runs' metrics in one long frame with a ``run`` column, every train loss per run)``:
    what the compare curves draw, each run downsampled to its share of the point budget."""
    budget = max(100, _TOTAL_POINTS // max(len(runs), 1))
    frames, owners, losses = [], [], {}
    for r in runs:
        frame, loss = run_series(root, r.run_id, budget)
        losses[r.run_id] = loss
        if len(frame) and (frame["split"] == SYSTEM_SPLIT).any():  # CPU/memory: the run page's own chart
            frame = frame[frame["split"] != SYSTEM_SPLIT]
        if len(frame):
            frames.append(frame)
            owners.append((r.run_id, len(frame)))
    if not frames:
        return metrics_store.rows_to_frame([]), losses
    data = pd.concat(frames, ignore_index=True)  # a new frame: the cached ones stay untouched
    data["run"] = np.repeat([o for o, _ in owners], [n for _, n in owners])
    return data, losses


# -- drawing ------------------------------------------------------------------------------------


def pick_runs(records: Sequence[RunRecord]) -> list[RunRecord]:
    """The runs to compare: those in the URL's ``?runs=`` (the Runs table sends it) when it changed
    since this session last saw it, else the session's last choice (kept when the page is left:
    a widget's own state is dropped then), else the picker's default; the choice is written back
    to the URL on every page run so that a reload, a return through the sidebar or a shared link
    shows the same comparison."""
    import streamlit as st

    by_id = {r.run_id: r for r in records}
    query = st.query_params.get_all(QUERY_KEY)
    query_text = ",".join(query)
    ids, unknown = parse_run_ids(query, list(by_id))
    if query and query_text != st.session_state.get(_SEEN_QUERY_KEY):
        st.session_state[_SEEN_QUERY_KEY] = query_text
        st.session_state[_PICKER_KEY] = ids  # before the widget exists: allowed
    elif _PICKER_KEY not in st.session_state and STATE_KEY in st.session_state:
        st.session_state[_PICKER_KEY] = [i for i in st.session_state[STATE_KEY] if i in by_id]
    if unknown:  # URL text: a crafted link's [x](http://...) or ![img](...) stays literal
        from estimator_workbench.ui.session import md

        st.caption(f"Not in this workspace (deleted?): {', '.join(md(u) for u in unknown)}")
    default = ids or list(by_id)[:2]
    chosen = st.multiselect("Runs", list(by_id), default=None if _PICKER_KEY in st.session_state else default,
                            key=_PICKER_KEY, format_func=lambda i: f"{by_id[i].name} · {i}",
                            placeholder="Choose runs to compare")
    st.session_state[STATE_KEY] = list(chosen)
    text = ",".join(chosen)
    if text != query_text:
        st.query_params[QUERY_KEY] = text
        st.session_state[_SEEN_QUERY_KEY] = text
    return [by_id[i] for i in chosen]


def compare_view(runs: Sequence[RunRecord], root: Path, controls: Mapping[str, Any],
                 interval: float = 1.0) -> None:
    """Curves, differences, metric choice with the best run, parallel coordinates and scatter of
    ``runs``; refreshed every ``interval`` seconds while any of them is queued or running."""
    import streamlit as st

    from estimator_workbench.store.registry import RunRegistry

    ids = [r.run_id for r in runs]
    every = interval if any(r.is_active for r in runs) else None

    @st.fragment(run_every=every)
    def _view() -> None:
        current = runs
        if every is not None:  # a live tick: fresh statuses and summaries
            registry = RunRegistry(root)
            fresh = {r.run_id: r for r in registry.list_runs() if r.run_id in set(ids)}
            current = [fresh[i] for i in ids if i in fresh]
        labels = figures.unique_run_labels([(r.run_id, r.name) for r in current], max_length=32)
        data, losses = overlay_frame(current, root)
        st.plotly_chart(figures.curves_figure(data, run_labels=labels, **controls), key="cmp-curves")
        smoothing = controls.get("smoothing") or DEFAULT_SMOOTHING
        table, differing = comparison_frame(current, labels, losses, smoothing)

        options = metric_options(current)
        c1, c2 = st.columns([3, 2])
        metric = c1.selectbox("Metric", options, key="cmp-metric",
                              help=f"Eval metrics: 'final' is the value at the run's last evaluation (the model "
                                   f"it ended with), 'best' the best it reached; the train loss smoothed with "
                                   f"weight {smoothing:g} (TensorBoard's EMA), not its noisy last value.")
        direction = c2.radio("Best is", ["maximize", "minimize"], horizontal=True,
                             index=["maximize", "minimize"].index(default_direction(metric)),
                             key=f"cmp-direction-{metric}")
        best = best_run(table, metric, direction)
        if best is not None:
            value = table.loc[table["run"] == best, metric].iloc[0]
            st.success(f"Best run for {_md(metric)} ({direction}): **{_md(labels.get(best, best))}** "
                       f"({best}) · {value:.6g}", icon=":material/trophy:")
        st.subheader("What differs")
        same = [k for k in ("template", "dataset", "seed", "steps") if k not in differing]
        if same and len(current) > 1:
            st.caption("Same in every run: " + ", ".join(same) + ".")
        shown = table.assign(best=np.where(table["run"] == best, "★", ""))  # (a Styler costs 0.3 s at 50 runs)
        _show_table(shown[["best", *table.columns]], hide_index=True, key="cmp-table",
                     column_config={"best": st.column_config.TextColumn("best", width="small",
                                                                        help=f"Best for {metric} ({direction})")})

        dims = [c for c in differing if c not in ("template", "dataset")]
        if len(current) > 1 and dims:
            st.subheader("Parameters against the metric")
            st.plotly_chart(figures.parallel_coordinates_figure(table, dims, metric, direction=direction,
                                                                label_column="name"), key="cmp-parcoords")
            param = st.selectbox("Parameter on x", dims, key="cmp-param",
                                 format_func=lambda c: c.removeprefix("param: "))
            st.plotly_chart(figures.param_scatter_figure(table, param, metric, label_column="name",
                                                         best=labels.get(best) if best else None),
                            key="cmp-scatter")
        elif len(current) > 1:
            st.caption("The selected runs have the same params, RunConfig, seed and steps.")

    _view()


def _show_table(frame: pd.DataFrame, **kwargs: Any) -> Any:
    from estimator_workbench.ui.session import show_table

    return show_table(frame, **kwargs)


def _md(text: object) -> str:
    from estimator_workbench.ui.session import md

    return md(text)
