"""Plotly figures for the workbench: pure functions ``DataFrame/arrays -> go.Figure``.

No ``st.*`` calls here (the pages render what these return), so every figure is unit-testable.
Metric frames are in the long format of ``estimator_workbench.store.metrics_store``: one row per
``(step, wall_time, split, name, value)``, plus an optional ``run`` column when several runs are
overlaid.

Smoothing is TensorBoard's debiased exponential moving average (the same formula W&B documents):
``last = last * w + (1 - w) * v; smoothed = last / (1 - w ** n)`` over the finite values, ``n``
counting them; non-finite values pass through unchanged and do not update the average.

Text from the user's data and runs (class names, run names, metric and param names) goes
through ``plain``: plotly renders a subset of HTML in labels (``<b>``, ``<a href>``, ...), so ``&``,
``<`` and ``>`` are written as entities and show as typed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

__all__ = [
    "LEGEND_LIST_RUNS",
    "X_AXES",
    "confusion_matrix",
    "confusion_matrix_figure",
    "curves_figure",
    "ema_smooth",
    "empty_figure",
    "label_figure",
    "log_axis_dimension",
    "parallel_coordinates_figure",
    "param_scatter_figure",
    "plain",
    "pr_curve",
    "residuals_figure",
    "roc_curve",
    "roc_pr_figure",
    "run_colour",
    "spans_decades",
    "unique_run_labels",
    "x_values",
]

X_AXES = ("step", "relative", "wall")
LEGEND_LIST_RUNS = 8  # above this many overlaid runs the legend is a list of runs at the right
_SPLIT_DASH = {"train": "solid", "eval": "dash"}
_PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
            "#7f7f7f", "#bcbd22", "#17becf")


def plain(text: object) -> str:
    """``text`` for a plotly label, shown as typed rather than as plotly's HTML subset.

    Example:
        >>> plain("<b>a & b</b>")
        '&lt;b&gt;a &amp; b&lt;/b&gt;'
    """
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def ema_smooth(values: Sequence[float] | np.ndarray, weight: float) -> np.ndarray:
    """TensorBoard's debiased EMA of ``values`` with smoothing ``weight`` in [0, 1).

    Vectorised in blocks (no per-point Python loop): inside a block of ``B`` points the recurrence
    ``s_k = w * s_{k-1} + (1 - w) * v_k`` is ``s_k = w**k * (s_0 + (1 - w) * sum_i w**-i * v_i)``,
    with ``B`` small enough that ``w**-B`` stays finite.

    Example:
        >>> ema_smooth([1.0, 2.0], 0.5).round(4).tolist()   # [1, (0.25 + 1) / 0.75]
        [1.0, 1.6667]
    """
    if not isinstance(weight, (int, float)) or isinstance(weight, bool) or not 0 <= weight < 1:
        raise ValueError(f"weight must be a number in [0, 1), given: {weight!r}; use 0 for no "
                         "smoothing and at most 0.999.")
    arr = np.asarray(values, dtype=np.float64)
    out = arr.copy()
    finite = np.isfinite(arr)
    v = arr[finite]
    if weight == 0 or v.size == 0:
        return out
    w = float(weight)
    n = v.size
    # Block length: w**-B must not overflow float64 (|ln w| * B < ~600).
    block = max(1, min(n, int(600 / max(-math.log(w), 1e-12))))
    smoothed = np.empty(n, dtype=np.float64)
    last = 0.0
    for start in range(0, n, block):  # a loop over blocks, not points
        chunk = v[start:start + block]
        k = np.arange(1, chunk.size + 1, dtype=np.float64)
        inv = np.power(w, -k)
        acc = np.cumsum(chunk * inv) * (1 - w)
        raw = np.power(w, k) * (last + acc)
        smoothed[start:start + chunk.size] = raw
        last = float(raw[-1])
    debias = 1.0 - np.power(w, np.arange(1, n + 1, dtype=np.float64))
    out[finite] = smoothed / debias
    return out


def x_values(df: pd.DataFrame, x_axis: str, origin: float | None = None) -> pd.Series:
    """The x coordinate of each row: ``step``, ``relative`` (seconds since ``origin``, default
    the first wall time in ``df``) or ``wall`` (timestamps)."""
    if x_axis not in X_AXES:
        raise ValueError(f"x_axis must be one of {list(X_AXES)}, given: {x_axis!r}.")
    if x_axis == "step":
        return df["step"].astype("float64")
    wall = df["wall_time"].astype("float64")
    if x_axis == "relative":
        start = origin if origin is not None else (wall.min() if len(wall) else 0.0)
        return wall - start
    return pd.to_datetime(wall, unit="s")


def empty_figure(message: str, height: int = 260) -> go.Figure:
    """A blank figure carrying ``message`` (e.g. "waiting for the first metrics")."""
    fig = go.Figure()
    fig.add_annotation(text=message, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper",
                       font={"size": 14, "color": "#888"})
    fig.update_layout(height=height, xaxis={"visible": False}, yaxis={"visible": False},
                      margin={"l": 10, "r": 10, "t": 10, "b": 10})
    return fig


def _metric_order(names: Sequence[str]) -> list[str]:
    """loss first, then the rest alphabetically; bookkeeping series last."""
    uniq = list(dict.fromkeys(names))
    tail = {"steps_per_sec", "global_step/sec", "gpu_memory_mb"}
    return sorted(uniq, key=lambda n: (n != "loss", n in tail, n))


def curves_figure(df: pd.DataFrame, *, smoothing: float = 0.0, x_axis: str = "step",
                  log_y: bool = False, metrics: Sequence[str] | None = None,
                  run_labels: Mapping[str, str] | None = None, columns: int = 2,
                  height_per_row: int = 280, run_colours: Mapping[str, str] | None = None) -> go.Figure:
    """Loss and metric curves: one subplot per metric name, train and eval on the same axis.

    Args:
        df: long-format metrics (``step, wall_time, split, name, value`` and optionally ``run``).
        smoothing: EMA weight in [0, 1); the raw series stays drawn, faded, under the smoothed one.
        x_axis: ``step``, ``relative`` (seconds since the start of each run) or ``wall``.
        log_y: logarithmic y axes.
        metrics: the metric names to draw (default: all, loss first).
        run_labels: display names of runs (``run`` column values) for the legend.
        columns: subplots per row.
        run_colours: a colour per run (``run`` value), e.g. one per value of a param (Compare's
            'Colour by'); runs not in it keep their own.

    Returns:
        The figure (a placeholder figure when ``df`` is empty).
    """
    if df is None or len(df) == 0:
        return empty_figure("No metrics yet: the chart fills in as the run logs them.")
    names = _metric_order(df["name"].astype(str).tolist()) if metrics is None else list(metrics)
    names = [n for n in names if (df["name"] == n).any()]
    if not names:
        return empty_figure("None of the chosen metrics has values yet.")
    cols = max(1, min(columns, len(names)))
    rows = math.ceil(len(names) / cols)
    # ~90 px between rows: a row's x-axis title and the next row's subplot title must not overlap.
    grid = make_subplots(rows=rows, cols=cols, subplot_titles=[plain(n) for n in names], horizontal_spacing=0.08,
                         vertical_spacing=min(0.9 / max(rows - 1, 1), 90 / (rows * height_per_row)))
    multi_run = "run" in df.columns and df["run"].nunique() > 1
    runs = list(dict.fromkeys(df["run"].tolist())) if "run" in df.columns else [None]
    colours = {run: (run_colours or {}).get(run) or run_colour(i) for i, run in enumerate(runs)}
    # Many runs: one legend entry per run (the split is the dash), as a scrolling list at the right
    # instead of a horizontal band of run x split entries taller than the chart.
    as_list = multi_run and len(runs) > LEGEND_LIST_RUNS
    shown: set[str] = set()
    traces: list[dict] = []
    groups = df.groupby(["run", "name", "split"] if "run" in df.columns else ["name", "split"],
                        sort=False, dropna=False)
    origins = (df.groupby("run")["wall_time"].min().to_dict() if "run" in df.columns
               else {None: df["wall_time"].min()})
    for key, part in groups:
        run, name, split = key if "run" in df.columns else (None, *key)
        if name not in names:
            continue
        index = names.index(name)
        axes = {"xaxis": f"x{index + 1}" if index else "x", "yaxis": f"y{index + 1}" if index else "y"}  # row-major
        if not part["step"].is_monotonic_increasing:  # (files are in step order but for a resume)
            part = part.sort_values("step", kind="stable")
        x = x_values(part, x_axis, origin=origins.get(run)).to_numpy()  # numpy: plotly's fast path
        y = part["value"].to_numpy(dtype=np.float64)
        label_run = (run_labels or {}).get(run, run) if run is not None else None
        legend = plain(label_run if as_list else f"{label_run} · {split}" if multi_run else split)
        colour = colours[run] if multi_run else (_PALETTE[0] if split == "train" else _PALETTE[1])
        dash = _SPLIT_DASH.get(str(split), "dot") if multi_run else "solid"
        mode = "lines+markers" if split != "train" or len(part) < 3 else "lines"
        if smoothing > 0 and len(part) > 1:
            traces.append(dict(type="scatter", x=x, y=y, mode="lines", line={"color": colour, "width": 1},
                               opacity=0.25, legendgroup=legend, showlegend=False, hoverinfo="skip", **axes))
            y = ema_smooth(y, smoothing)
        hover = {"hovertemplate": f"{legend} · {plain(split)}<br>%{{x}}: %{{y:.4g}}<extra></extra>"} if as_list else {}
        traces.append(dict(type="scatter", x=x, y=y, mode=mode, name=legend, legendgroup=legend,
                           showlegend=legend not in shown,
                           line={"color": colour, "dash": dash, "width": 2 if not as_list else 1.5},
                           marker={"size": 5 if not as_list else 3}, **hover, **axes))
        shown.add(legend)
    # The traces are plain dicts of known-good keys, assembled without plotly's per-value
    # validation (a 50-run overlay spent over a second validating ~200 traces); the layout
    # (subplot grid, titles, axes) comes from make_subplots and is validated as usual.
    fig = go.Figure(data=traces, layout=grid.layout, _validate=False)
    x_title = {"step": "step", "relative": "seconds since start", "wall": "time"}[x_axis]
    fig.update_xaxes(title_text=x_title, title_standoff=2)
    if log_y:
        fig.update_yaxes(type="log")
    height = max(260, rows * height_per_row)
    if as_list:
        # A vertical legend scrolls inside the figure's height; hovering a line names it.
        fig.update_layout(height=max(height, 360), margin={"l": 40, "r": 10, "t": 40, "b": 40},
                          legend={"orientation": "v", "x": 1.01, "xanchor": "left", "y": 1, "yanchor": "top",
                                  "font": {"size": 11}, "title": {"text": "runs (eval dashed)"},
                                  "itemclick": "toggleothers", "itemdoubleclick": "toggle"},
                          hovermode="closest", uirevision="keep")
        return fig
    # The legend goes below the bottom x-axis title: ~45 px under the plot area, whatever its height.
    fig.update_layout(height=height, margin={"l": 40, "r": 10, "t": 40, "b": 40},
                      legend={"orientation": "h", "yanchor": "top", "y": -45 / (height - 80)},
                      hovermode="x unified", uirevision="keep")  # keep zoom across live updates
    return fig


def run_colour(index: int) -> str:
    """The palette's ten colours first, then distinct hues (the golden-angle walk) for more runs."""
    if index < len(_PALETTE):
        return _PALETTE[index]
    hue = (index * 137.508) % 360
    return f"hsl({hue:.0f}, 65%, {45 + 10 * (index % 2)}%)"


def confusion_matrix(y_true: Sequence[int] | np.ndarray, y_pred: Sequence[int] | np.ndarray,
                     n_classes: int) -> np.ndarray:
    """Counts ``[true class, predicted class]`` (ids outside ``[0, n_classes)`` are ignored).

    Example:
        >>> confusion_matrix([0, 1, 1], [0, 1, 0], 2).tolist()
        [[1, 0], [1, 1]]
    """
    t = np.asarray(y_true, dtype=np.int64)
    p = np.asarray(y_pred, dtype=np.int64)
    if t.shape != p.shape:
        raise ValueError(f"y_true and y_pred must have the same length, given {t.shape} and {p.shape}.")
    ok = (t >= 0) & (t < n_classes) & (p >= 0) & (p < n_classes)
    flat = np.bincount(t[ok] * n_classes + p[ok], minlength=n_classes * n_classes)
    return flat.reshape(n_classes, n_classes)


def confusion_matrix_figure(matrix: np.ndarray, class_names: Sequence[str] | None = None,
                            normalize: bool = False) -> go.Figure:
    """A heatmap of a confusion matrix (rows: true class, columns: predicted class)."""
    m = np.asarray(matrix, dtype=np.float64)
    names = [plain(c) for c in (class_names if class_names is not None else range(m.shape[0]))]
    z = m / np.maximum(m.sum(axis=1, keepdims=True), 1) if normalize else m
    text = [[f"{v:.2f}" if normalize else f"{int(v)}" for v in row] for row in z]
    fig = go.Figure(go.Heatmap(z=z, x=names, y=names, text=text, texttemplate="%{text}",
                               colorscale="Blues", showscale=False,
                               hovertemplate="true %{y}<br>predicted %{x}<br>%{text}<extra></extra>"))
    fig.update_layout(xaxis_title="predicted", yaxis_title="true", yaxis_autorange="reversed",
                      height=max(300, 60 * len(names) + 120), margin={"l": 60, "r": 10, "t": 30, "b": 50})
    return fig


def roc_curve(y_true: Sequence[int] | np.ndarray, scores: Sequence[float] | np.ndarray
              ) -> tuple[np.ndarray, np.ndarray, float]:
    """``(fpr, tpr, auc)`` of a binary problem (``y_true`` in {0, 1}); ties handled as one step.

    Example:
        >>> fpr, tpr, auc = roc_curve([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8])
        >>> round(auc, 2)
        0.75
    """
    y, s = np.asarray(y_true).astype(bool), np.asarray(scores, dtype=np.float64)
    order = np.argsort(-s, kind="stable")
    y, s = y[order], s[order]
    distinct = np.r_[np.flatnonzero(np.diff(s)), y.size - 1] if y.size else np.array([], int)
    tps = np.cumsum(y)[distinct]
    fps = (distinct + 1) - tps
    pos, neg = max(int(y.sum()), 1), max(int((~y).sum()), 1)
    tpr = np.r_[0.0, tps / pos]
    fpr = np.r_[0.0, fps / neg]
    return fpr, tpr, float(np.trapezoid(tpr, fpr))


def pr_curve(y_true: Sequence[int] | np.ndarray, scores: Sequence[float] | np.ndarray
             ) -> tuple[np.ndarray, np.ndarray, float]:
    """``(recall, precision, average_precision)`` of a binary problem.

    Example:
        >>> r, p, ap = pr_curve([0, 1], [0.2, 0.9])
        >>> ap
        1.0
    """
    y, s = np.asarray(y_true).astype(bool), np.asarray(scores, dtype=np.float64)
    order = np.argsort(-s, kind="stable")
    y, s = y[order], s[order]
    distinct = np.r_[np.flatnonzero(np.diff(s)), y.size - 1] if y.size else np.array([], int)
    tps = np.cumsum(y)[distinct]
    predicted = distinct + 1
    precision = tps / predicted
    recall = tps / max(int(y.sum()), 1)
    ap = float(np.sum(np.diff(np.r_[0.0, recall]) * precision))
    return np.r_[0.0, recall], np.r_[1.0, precision], ap


def roc_pr_figure(y_true: Sequence[int] | np.ndarray, probabilities: np.ndarray,
                  class_names: Sequence[str] | None = None) -> go.Figure:
    """ROC and precision-recall curves side by side, one-vs-rest for every class.

    Args:
        y_true: class ids ``[n]``.
        probabilities: ``[n, K]`` class probabilities (``[n]`` or ``[n, 1]``: the positive class
            of a binary problem).
        class_names: ``K`` names (default: the ids). A binary problem draws the positive class only.
    """
    p = np.asarray(probabilities, dtype=np.float64)
    if p.ndim == 1 or p.shape[1] == 1:
        p = p.reshape(-1)
        p = np.stack([1 - p, p], axis=1)
    y = np.asarray(y_true, dtype=np.int64)
    k = p.shape[1]
    names = [plain(c) for c in (class_names if class_names is not None else range(k))]
    fig = make_subplots(rows=1, cols=2, subplot_titles=("ROC", "Precision-recall"))
    classes = [1] if k == 2 else list(range(k))
    for c in classes:
        colour = _PALETTE[c % len(_PALETTE)]
        fpr, tpr, auc = roc_curve(y == c, p[:, c])
        rec, prec, ap = pr_curve(y == c, p[:, c])
        fig.add_trace(go.Scatter(x=fpr, y=tpr, mode="lines", line={"color": colour},
                                 name=f"{names[c]} (AUC {auc:.3f})", legendgroup=names[c]), row=1, col=1)
        fig.add_trace(go.Scatter(x=rec, y=prec, mode="lines", line={"color": colour, "shape": "hv"},
                                 name=f"{names[c]} (AP {ap:.3f})", legendgroup=names[c]), row=1, col=2)
    fig.add_trace(go.Scatter(x=[0, 1], y=[0, 1], mode="lines", line={"dash": "dot", "color": "#aaa"},
                             showlegend=False, hoverinfo="skip"), row=1, col=1)
    fig.update_xaxes(title_text="false positive rate", range=[0, 1], row=1, col=1)
    fig.update_yaxes(title_text="true positive rate", range=[0, 1.02], row=1, col=1)
    fig.update_xaxes(title_text="recall", range=[0, 1], row=1, col=2)
    fig.update_yaxes(title_text="precision", range=[0, 1.02], row=1, col=2)
    fig.update_layout(height=380, margin={"l": 50, "r": 10, "t": 40, "b": 40})
    return fig


def residuals_figure(y_true: Sequence[float] | np.ndarray, y_pred: Sequence[float] | np.ndarray
                     ) -> go.Figure:
    """Regression diagnostics: predicted vs true (with the identity line) and residual vs predicted."""
    t = np.asarray(y_true, dtype=np.float64).reshape(-1)
    p = np.asarray(y_pred, dtype=np.float64).reshape(-1)
    if t.shape != p.shape:
        raise ValueError(f"y_true and y_pred must have the same length, given {t.shape} and {p.shape}.")
    fig = make_subplots(rows=1, cols=2, subplot_titles=("Predicted vs true", "Residuals"))
    fig.add_trace(go.Scatter(x=t, y=p, mode="markers", marker={"size": 5, "opacity": 0.6},
                             name="examples", showlegend=False), row=1, col=1)
    if t.size:
        lo, hi = float(np.nanmin([t.min(), p.min()])), float(np.nanmax([t.max(), p.max()]))
        fig.add_trace(go.Scatter(x=[lo, hi], y=[lo, hi], mode="lines", line={"dash": "dot", "color": "#aaa"},
                                 showlegend=False, hoverinfo="skip"), row=1, col=1)
    fig.add_trace(go.Scatter(x=p, y=t - p, mode="markers", marker={"size": 5, "opacity": 0.6},
                             showlegend=False), row=1, col=2)
    fig.add_hline(y=0, line_dash="dot", line_color="#aaa", row=1, col=2)
    fig.update_xaxes(title_text="true", row=1, col=1)
    fig.update_yaxes(title_text="predicted", row=1, col=1)
    fig.update_xaxes(title_text="predicted", row=1, col=2)
    fig.update_yaxes(title_text="true - predicted", row=1, col=2)
    fig.update_layout(height=360, margin={"l": 50, "r": 10, "t": 40, "b": 40})
    return fig


def label_figure(label: pd.Series, *, max_classes: int = 30, bins: int = 30) -> go.Figure:
    """The label at a glance: examples per class (the ``max_classes`` most frequent), or a
    histogram of a numeric label with more distinct values than that. Missing labels are left out."""
    values = label.dropna()
    title = f"{plain(label.name)}: {len(values):,} labelled examples"
    if pd.api.types.is_numeric_dtype(values) and values.nunique() > max_classes:
        fig = go.Figure(go.Histogram(x=values.to_numpy(), nbinsx=bins, marker_color=_PALETTE[0]))
    else:
        counts = values.astype(str).value_counts().head(max_classes)
        fig = go.Figure(go.Bar(x=counts.index.tolist(), y=counts.to_numpy(), marker_color=_PALETTE[0],
                               text=counts.to_numpy(), textposition="auto"))
        title += f" in {values.nunique():,} classes"
    fig.update_layout(title={"text": title, "font": {"size": 13}}, height=200, bargap=0.15,
                      margin={"l": 40, "r": 10, "t": 36, "b": 30}, showlegend=False)
    return fig


def unique_run_labels(runs: Sequence[tuple[str, str]], max_length: int | None = None) -> dict[str, str]:
    """Display labels of runs, given as ``(run_id, name)`` pairs: the name, or ``"name · r-1a2b3c"``
    (the id's random suffix) for names that several runs share, so legends and points can be told
    apart (the whole id when even the suffixes collide).

    ``max_length`` shortens long names to that many characters (the middle replaced by ``…``, so
    a sweep's trial numbers at the end stay visible); names that collide once shortened get the
    id suffix too.

    Example:
        >>> unique_run_labels([("r-20250101-1a2b3c", "mlp"), ("r-20250102-4d5e6f", "mlp"),
        ...                    ("r-20250102-777777", "cnn")])["r-20250101-1a2b3c"]
        'mlp · r-1a2b3c'
        >>> unique_run_labels([("r-1-aaaaaa", "learning rate sweep of the MLP, trial 12")], 20)["r-1-aaaaaa"]
        'learning r… trial 12'
    """
    if max_length is not None and (not isinstance(max_length, int) or max_length < 5):
        raise ValueError(f"max_length must be an int >= 5 or None, given: {max_length!r}.")

    def shorten(name: str) -> str:
        if max_length is None or len(name) <= max_length:
            return name
        tail = (max_length - 1) // 2
        return name[:max_length - 1 - tail] + "…" + name[len(name) - tail:]

    names = {run_id: shorten(name) for run_id, name in runs}
    counts: dict[str, int] = {}
    for run_id, _ in runs:
        counts[names[run_id]] = counts.get(names[run_id], 0) + 1
    short = {run_id: f"r-{run_id.rsplit('-', 1)[-1]}" for run_id, _ in runs}
    suffixes = list(short.values())
    out = {}
    for run_id, _ in runs:
        name = names[run_id]
        if counts[name] == 1:
            out[run_id] = name
        else:
            out[run_id] = f"{name} · {short[run_id] if suffixes.count(short[run_id]) == 1 else run_id}"
    return out


def spans_decades(values: Sequence[float] | np.ndarray | pd.Series, decades: float = 2.0) -> bool:
    """Whether positive numbers span more than ``decades`` powers of ten (then a log axis reads
    better); False when any value is zero, negative or not a number.

    Example:
        >>> spans_decades([1e-4, 0.01, 0.1]), spans_decades([0.01, 0.5]), spans_decades([0, 1e3])
        (True, False, False)
    """
    try:
        arr = np.asarray(pd.to_numeric(pd.Series(values), errors="coerce"), dtype=np.float64)
    except (TypeError, ValueError):
        return False
    arr = arr[~np.isnan(arr)]
    if arr.size < 2 or not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        return False
    return bool(np.log10(arr.max()) - np.log10(arr.min()) > decades)


def param_scatter_figure(table: pd.DataFrame, param: str, metric: str,
                         label_column: str = "run", best: str | None = None,
                         log_x: bool | None = None) -> go.Figure:
    """One point per run: ``param`` on x, ``metric`` on y (categorical params become categories).

    Args:
        best: the label (``label_column`` value) of the best run, drawn as a gold star.
        log_x: a logarithmic x axis; by default when the param's values span more than two
            decades (``spans_decades``), as learning rates do.
    """
    for column in (param, metric):
        if column not in table.columns:
            raise ValueError(f"Column {column!r} is not in the table (columns: {list(table.columns)}).")
    data = table[[param, metric] + ([label_column] if label_column in table.columns else [])].dropna(
        subset=[metric])
    x = data[param]
    numeric = pd.api.types.is_numeric_dtype(x) and not pd.api.types.is_bool_dtype(x)
    if not numeric:
        x = x.astype(str).map(plain)
    labels = data[label_column] if label_column in data.columns else None
    log = (numeric and spans_decades(x)) if log_x is None else (bool(log_x) and numeric)
    is_best = (labels == best).to_numpy() if best is not None and labels is not None else np.zeros(len(data), bool)
    fig = go.Figure(go.Scatter(
        x=x[~is_best], y=data[metric][~is_best], mode="markers+text", marker={"size": 11}, name="runs",
        text=labels[~is_best].map(plain) if labels is not None else None, textposition="top center",
        hovertemplate=f"{plain(param)}=%{{x}}<br>{plain(metric)}=%{{y}}<br>%{{text}}<extra></extra>"))
    if is_best.any():
        fig.add_trace(go.Scatter(
            x=x[is_best], y=data[metric][is_best], mode="markers+text", name="best",
            marker={"size": 18, "symbol": "star", "color": "gold", "line": {"color": "#444", "width": 1}},
            text=labels[is_best].map(lambda t: f"best: {plain(t)}"), textposition="top center",
            hovertemplate=f"{plain(param)}=%{{x}}<br>{plain(metric)}=%{{y}}<br>%{{text}}<extra></extra>"))
    fig.update_layout(xaxis_title=plain(param) + (" (log scale)" if log else ""), yaxis_title=plain(metric),
                      height=360, showlegend=False, margin={"l": 50, "r": 10, "t": 20, "b": 40})
    if log:
        fig.update_xaxes(type="log")
    return fig


def log_axis_dimension(label: str, values: np.ndarray) -> dict[str, Any]:
    """A parallel-coordinates axis on a log scale for positive ``values``, laid out as Optuna's
    ``plot_parallel_coordinate`` (the Sweeps page's figure) lays out a log-scale param: the lines
    at ``log10`` of the values, ticks at each power of ten between them and at both ends, labelled
    with the values themselves (``0.001``, not ``-3``).

    Example:
        >>> axis = log_axis_dimension("lr", np.array([1e-4, 0.05]))
        >>> axis["label"], axis["ticktext"]
        ('lr (log scale)', ['0.0001', '0.001', '0.01', '0.05'])
    """
    logs = np.log10(np.asarray(values, dtype=np.float64))
    low, high = float(np.nanmin(logs)), float(np.nanmax(logs))
    ticks: list[float] = [float(t) for t in range(math.ceil(low), math.floor(high) + 1)]
    if low not in ticks:
        ticks = [low, *ticks]
    if high not in ticks:
        ticks = [*ticks, high]
    return {"label": f"{label} (log scale)", "values": logs, "range": [low, high], "tickvals": ticks,
            "ticktext": [f"{10 ** t:.3g}" for t in ticks]}


def parallel_coordinates_figure(table: pd.DataFrame, dimensions: Sequence[str], metric: str, *,
                                direction: str = "maximize", label_column: str = "run") -> go.Figure:
    """Parallel coordinates: one line per run through its values of ``dimensions`` (params, RunConfig
    fields, seed, steps) and ``metric`` last, coloured by the metric (the best end of the colour
    scale is dark, following ``direction``).

    Numbers spanning more than two decades are drawn on a log axis (``log_axis_dimension``, as the
    Sweeps page's Optuna figure draws them); text values become categories.
    Runs without a value of the metric are left out.

    Example:
        >>> t = pd.DataFrame({"run": ["a", "b"], "param: lr": [0.1, 0.001], "eval accuracy": [0.9, 0.8]})
        >>> [d["label"] for d in parallel_coordinates_figure(t, ["param: lr"], "eval accuracy").data[0].dimensions]
        ['lr', 'eval accuracy']
    """
    if direction not in ("maximize", "minimize"):
        raise ValueError(f"direction must be 'maximize' or 'minimize', given: {direction!r}.")
    for column in [*dimensions, metric]:
        if column not in table.columns:
            raise ValueError(f"Column {column!r} is not in the table (columns: {list(table.columns)}).")
    data = table.loc[pd.to_numeric(table[metric], errors="coerce").notna()]
    if not len(data):
        return empty_figure(f"No run has a value of {plain(metric)} yet.")
    dims = []
    for column in [*dimensions, metric]:
        label = plain(str(column).removeprefix("param: "))
        raw = data[column]
        values = pd.to_numeric(raw, errors="coerce")
        if column != metric and ((values.isna() & raw.notna()).any() or pd.api.types.is_bool_dtype(raw)):
            categories = sorted({str(v) for v in raw}, key=str)
            codes = raw.astype(str).map({c: i for i, c in enumerate(categories)})
            dims.append({"label": label, "values": codes.to_numpy(), "tickvals": list(range(len(categories))),
                         "ticktext": [plain(c) for c in categories]})
        elif column != metric and spans_decades(values):
            dims.append(log_axis_dimension(label, values.to_numpy(dtype=np.float64)))
        else:
            dims.append({"label": label, "values": values.to_numpy(dtype=np.float64)})
    colour = pd.to_numeric(data[metric], errors="coerce").to_numpy(dtype=np.float64)
    fig = go.Figure(go.Parcoords(
        line={"color": colour, "colorscale": "Viridis", "reversescale": direction == "minimize",
              "showscale": True, "colorbar": {"title": {"text": plain(metric)}}},
        dimensions=dims, labelangle=-15))
    fig.update_layout(height=380, margin={"l": 60, "r": 40, "t": 60, "b": 30})
    return fig
