"""Compare's classification view (issue 28 item 6): the compared runs' confusion matrices side by
side and one per-class precision / recall table, from each run's evaluation-plots predictions
(the predict run of its newest checkpoint on its own dataset; the UI never loads a model)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import streamlit as st

from estimator_workbench.store.records import MODEL_ACTIONS, RunRecord
from estimator_workbench.ui import figures
from estimator_workbench.ui.panels import (
    checkpoint_text,
    evaluation_rows,
    launch_plots,
    newest_checkpoint,
    plots_source,
)
from estimator_workbench.ui.session import md, page_link, predictions_frame

__all__ = ["class_metrics_view", "colour_by_param", "param_colours", "per_class_frame", "run_links"]


def per_class_frame(matrix: np.ndarray, class_names: Sequence[str]) -> pd.DataFrame:
    """Precision, recall and support per class of a confusion matrix (rows: true class, columns:
    predicted class); a class never predicted has no precision (NaN), not 0.

    Example:
        >>> per_class_frame(np.array([[3, 1], [0, 2]]), ["a", "b"]).round(3).to_dict("records")
        [{'class': 'a', 'precision': 1.0, 'recall': 0.75, 'support': 4}, {'class': 'b', 'precision': 0.667, 'recall': 1.0, 'support': 2}]
    """
    m = np.asarray(matrix, dtype=np.float64)
    hits = np.diag(m)
    predicted, actual = m.sum(axis=0), m.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        precision = np.where(predicted > 0, hits / predicted, np.nan)
        recall = np.where(actual > 0, hits / actual, np.nan)
    return pd.DataFrame({"class": list(class_names), "precision": precision, "recall": recall,
                         "support": actual.astype(np.int64)})


def _task(record: RunRecord) -> str | None:
    from estimator_workbench.data import datasets

    try:
        return datasets.DatasetSpec.from_dict(record.dataset).task
    except (ValueError, KeyError, TypeError):
        return None


def _matrices(runs: Sequence[RunRecord]) -> tuple[dict[str, tuple[np.ndarray, list[str], int | None]], list[RunRecord]]:
    """The confusion matrix (with class names and checkpoint step) of each run that has plots,
    and the classification runs that have none yet."""
    found: dict[str, tuple[np.ndarray, list[str], int | None]] = {}
    missing: list[RunRecord] = []
    for record in runs:
        if record.action not in MODEL_ACTIONS or _task(record) != "classification":
            continue
        source = plots_source(record)
        if source is None:
            missing.append(record)
            continue
        child, step = source
        try:
            rows = evaluation_rows(record.dataset, predictions_frame(child.run_id))
        except (ValueError, KeyError):
            continue
        if rows.task != "classification" or "class_ids" not in rows.predictions.columns:
            continue
        names = rows.class_names
        found[record.run_id] = (figures.confusion_matrix(rows.y, rows.predictions["class_ids"].to_numpy(), len(names)),
                                names, step)
    return found, missing


def class_metrics_view(runs: Sequence[RunRecord], labels: Mapping[str, str] | None = None) -> None:
    """Side-by-side confusion matrices and a per-class precision / recall table of the compared
    classification runs; a run without evaluation plots yet gets a button that computes them."""
    labels = dict(labels or {r.run_id: r.name for r in runs})
    found, missing = _matrices(runs)
    if not found and not missing:
        return
    st.subheader("Per class")
    if missing:
        st.caption("No evaluation plots yet for: " + ", ".join(md(labels.get(r.run_id, r.name)) for r in missing) + ".")
        finished = [r for r in missing if r.is_finished and newest_checkpoint(r) is not None]
        if finished and st.button(f"Compute them ({len(finished)} run{'' if len(finished) == 1 else 's'})",
                                  key="cmp-compute-plots", icon=":material/insights:",
                                  help="Predicts on each run's dataset from its newest checkpoint, in runner processes."):
            for record in finished:
                newest = newest_checkpoint(record)
                if newest is not None:
                    launch_plots(record, newest[1])
            st.toast("Computing; the matrices appear here when the predictions are done.")
    if not found:
        return
    normalize = st.toggle("Normalise rows", key="cmp-cm-norm")
    ids = list(found)
    for start in range(0, len(ids), 3):
        for column, run_id in zip(st.columns(3), ids[start:start + 3]):
            matrix, names, step = found[run_id]
            with column:
                st.caption(f"**{md(labels.get(run_id, run_id))}** · {checkpoint_text(step)}")
                st.plotly_chart(figures.confusion_matrix_figure(matrix, names, normalize=normalize),
                                key=f"cmp-cm-{run_id}")
    frames = []
    for run_id in ids:
        matrix, names, _ = found[run_id]
        frame = per_class_frame(matrix, names).set_index("class")
        label = labels.get(run_id, run_id)
        frames.append(frame[["precision", "recall"]].add_prefix(f"{label} · "))
    table = pd.concat(frames, axis=1).reset_index()
    st.dataframe(table, hide_index=True, key="cmp-per-class",
                 column_config={c: st.column_config.NumberColumn(c, format="%.3f") for c in table.columns if c != "class"})


def run_links(runs: Sequence[RunRecord]) -> None:
    """One line per compared run (issue 28 item 10): a link to its run page, its status, and its
    notes (the first line, the rest on hover)."""
    with st.container(key="cmp-run-links"):
        for record in runs:
            c1, c2 = st.columns([2, 3], vertical_alignment="center")
            with c1:
                page_link("run", f"{record.name} · {record.run_id}", icon=":material/monitoring:",
                          run_id=record.run_id)
            note = (record.note or "").strip()
            first = note.splitlines()[0] if note else ""
            c2.caption(f"{record.status} · " + (md(first) if note else "no notes"),
                       help=md(note) if len(first) < len(note) else None)


def param_colours(runs: Sequence[RunRecord], param: str) -> tuple[dict[str, str], dict[str, str]]:
    """``(colour per run id, colour per value)``: runs with the same value of ``param`` share a
    colour (values in sorted order; a run without the param is '(not set)').

    Example:
        >>> by_run, by_value = param_colours(records, "learning_rate")  # doctest: +SKIP
        >>> by_value                                                   # doctest: +SKIP
        {'0.001': '#1f77b4', '0.01': '#ff7f0e'}
    """
    values = {r.run_id: _value_text(r.params.get(param)) for r in runs}
    ordered = sorted(set(values.values()), key=_sort_key)
    by_value = {v: figures.run_colour(i) for i, v in enumerate(ordered)}
    return {run: by_value[v] for run, v in values.items()}, by_value


def _value_text(value: object) -> str:
    return "(not set)" if value is None else str(value)


def _sort_key(text: str) -> tuple[int, float, str]:
    try:
        return (0, float(text), text)
    except ValueError:
        return (1, 0.0, text)


def colour_by_param(runs: Sequence[RunRecord], key: str = "cmp-colour-by") -> dict[str, str] | None:
    """'Colour curves by' a param whose value differs between the runs (issue 28 item 10): the
    runs grouped by its value, one colour per value, named in a caption; None: colour per run."""
    params = sorted({k for r in runs for k in r.params
                     if len({_value_text(x.params.get(k)) for x in runs}) > 1})
    if len(runs) < 2 or not params:
        return None
    choice = st.selectbox("Colour curves by", ["(each run)", *params], key=key,
                          help="Runs with the same value of this param get the same colour.")
    if choice == "(each run)":
        return None
    by_run, by_value = param_colours(runs, choice)
    parts = []
    for i, (value, colour) in enumerate(by_value.items()):
        count = sum(1 for c in by_run.values() if c == colour)
        swatch = f":{_NAMED[i]}[■] " if i < len(_NAMED) else ""  # the palette's first colours by name
        parts.append(f"{swatch}{md(value)} ({count} run{'' if count == 1 else 's'})")
    st.caption(f"{md(choice)}: " + " · ".join(parts))
    return by_run


_NAMED = ("blue", "orange", "green", "red", "violet")  # Streamlit's names of figures' first palette colours
