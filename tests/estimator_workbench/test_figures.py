"""Known-answer tests of the pure plotly figure functions (no streamlit)."""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest

from estimator_workbench.ui import figures


def _reference_ema(values, weight):
    """TensorBoard's loop (vz_line_chart2 resmoothDataset), written out."""
    last, n, out = 0.0, 0, []
    for v in values:
        if not np.isfinite(v):
            out.append(v)
            continue
        last = last * weight + (1 - weight) * v
        n += 1
        out.append(last / (1 - weight ** n))
    return np.array(out)


def _frame(n=50, splits=("train",), names=("loss",), run=None):
    rows = [{"step": s, "wall_time": 1000.0 + s, "split": sp, "name": nm, "value": 1.0 / s}
            for s in range(1, n + 1) for sp in splits for nm in names]
    df = pd.DataFrame(rows)
    if run is not None:
        df["run"] = run
    return df


class TestEmaSmooth:
    @pytest.mark.parametrize("weight", [0.0, 0.01, 0.5, 0.9, 0.99, 0.999])
    def test_matches_tensorboard_loop(self, weight):
        values = np.random.default_rng(0).normal(size=3000)
        np.testing.assert_allclose(figures.ema_smooth(values, weight), _reference_ema(values, weight),
                                   rtol=1e-9, atol=1e-9)

    def test_known_answer_and_debias(self):
        assert figures.ema_smooth([1.0, 2.0], 0.5).tolist() == pytest.approx([1.0, 5 / 3])
        assert figures.ema_smooth([3.0, 3.0, 3.0], 0.9).tolist() == pytest.approx([3.0, 3.0, 3.0])

    def test_non_finite_values_pass_through_and_do_not_count(self):
        out = figures.ema_smooth([1.0, np.nan, 2.0, np.inf], 0.5)
        assert np.isnan(out[1]) and np.isinf(out[3])
        assert out[[0, 2]].tolist() == pytest.approx([1.0, 5 / 3])

    @pytest.mark.parametrize("weight", [-0.1, 1.0, True, "0.5"])
    def test_rejects_bad_weight(self, weight):
        with pytest.raises(ValueError, match="weight must be a number in"):
            figures.ema_smooth([1.0], weight)

    def test_fast_on_100k_points(self):
        values = np.random.default_rng(1).normal(size=100_000)
        start = time.perf_counter()
        figures.ema_smooth(values, 0.6)
        assert time.perf_counter() - start < 0.5


class TestCurves:
    def test_empty_frame_gives_a_placeholder(self):
        fig = figures.curves_figure(pd.DataFrame(columns=["step", "wall_time", "split", "name", "value"]))
        assert isinstance(fig, go.Figure) and not fig.data
        assert "No metrics yet" in fig.layout.annotations[0].text

    def test_train_and_eval_share_one_subplot_per_metric(self):
        df = _frame(10, splits=("train", "eval"), names=("loss", "accuracy"))
        fig = figures.curves_figure(df)
        assert [a.text for a in fig.layout.annotations] == ["loss", "accuracy"]  # loss first
        by_axis = {}
        for trace in fig.data:
            by_axis.setdefault(trace.xaxis, set()).add(trace.name)
        assert all(names == {"train", "eval"} for names in by_axis.values())

    def test_smoothing_adds_faded_raw_trace(self):
        fig = figures.curves_figure(_frame(20), smoothing=0.6)
        raw, smooth = fig.data
        assert raw.opacity == 0.25 and not raw.showlegend
        np.testing.assert_allclose(smooth.y, figures.ema_smooth(np.asarray(raw.y), 0.6))

    def test_x_axis_choices_and_log_scale(self):
        df = _frame(5)
        assert list(figures.curves_figure(df, x_axis="relative").data[0].x) == [0.0, 1.0, 2.0, 3.0, 4.0]
        wall = figures.curves_figure(df, x_axis="wall").data[0].x
        assert pd.Timestamp(wall[0]) == pd.Timestamp(1001.0, unit="s")
        assert figures.curves_figure(df, log_y=True).layout.yaxis.type == "log"
        with pytest.raises(ValueError, match="x_axis must be one of"):
            figures.curves_figure(df, x_axis="epoch")

    def test_runs_are_coloured_and_labelled(self):
        df = pd.concat([_frame(5, run="r-1"), _frame(5, run="r-2")])
        fig = figures.curves_figure(df, run_labels={"r-1": "first", "r-2": "second"})
        assert {t.name for t in fig.data} == {"first · train", "second · train"}
        assert fig.data[0].line.color != fig.data[1].line.color


class TestClassifierFigures:
    def test_confusion_matrix_counts(self):
        m = figures.confusion_matrix([0, 0, 1, 2, 2, 2], [0, 1, 1, 2, 2, 0], 3)
        assert m.tolist() == [[1, 1, 0], [0, 1, 0], [1, 0, 2]]
        fig = figures.confusion_matrix_figure(m, ["a", "b", "c"], normalize=True)
        assert fig.data[0].z[2][2] == pytest.approx(2 / 3)

    def test_roc_auc_known_answer(self):
        fpr, tpr, auc = figures.roc_curve([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8])
        assert auc == pytest.approx(0.75)
        assert (fpr[0], tpr[0], fpr[-1], tpr[-1]) == (0.0, 0.0, 1.0, 1.0)

    def test_ties_count_once(self):
        _, _, auc = figures.roc_curve([0, 1], [0.5, 0.5])
        assert auc == pytest.approx(0.5)

    def test_average_precision_known_answer(self):
        _, _, ap = figures.pr_curve([1, 0, 1], [0.9, 0.8, 0.7])
        assert ap == pytest.approx(0.5 * 1.0 + 0.5 * (2 / 3))

    def test_roc_pr_figure_one_vs_rest(self):
        probs = np.array([[0.8, 0.1, 0.1], [0.1, 0.8, 0.1], [0.1, 0.1, 0.8], [0.6, 0.3, 0.1]])
        fig = figures.roc_pr_figure([0, 1, 2, 0], probs, ["a", "b", "c"])
        assert sum("AUC 1.000" in (t.name or "") for t in fig.data) == 3
        binary = figures.roc_pr_figure([0, 1], np.array([0.2, 0.9]))
        assert sum(t.name is not None and "AUC" in t.name for t in binary.data) == 1


def test_residuals_and_param_scatter():
    fig = figures.residuals_figure([1.0, 2.0, 3.0], [1.5, 2.0, 2.0])
    assert list(fig.data[-1].y) == [-0.5, 0.0, 1.0]
    with pytest.raises(ValueError, match="same length"):
        figures.residuals_figure([1.0], [1.0, 2.0])
    table = pd.DataFrame({"run": ["a", "b"], "param: lr": [0.1, 0.01], "best eval": [0.9, 0.95]})
    scatter = figures.param_scatter_figure(table, "param: lr", "best eval")
    assert list(scatter.data[0].y) == [0.9, 0.95]
    with pytest.raises(ValueError, match="not in the table"):
        figures.param_scatter_figure(table, "param: nope", "best eval")


def test_user_text_in_labels_is_shown_as_typed_not_as_plotly_html():
    hostile = "<a href='javascript:alert(1)'>x</a> & <b>y</b>"
    escaped = "&lt;a href='javascript:alert(1)'&gt;x&lt;/a&gt; &amp; &lt;b&gt;y&lt;/b&gt;"
    matrix = figures.confusion_matrix_figure(np.eye(2, dtype=int), [hostile, "ok"])
    assert list(matrix.data[0].x) == [escaped, "ok"] and list(matrix.data[0].y) == [escaped, "ok"]
    roc = figures.roc_pr_figure(np.array([0, 1, 1, 0]), np.array([[0.9, 0.1], [0.2, 0.8], [0.3, 0.7], [0.6, 0.4]]),
                                ["no", hostile])
    assert roc.data[0].name.startswith(escaped + " (AUC ")
    df = pd.DataFrame({"step": [1, 2], "wall_time": [0.0, 1.0], "split": ["train"] * 2,
                       "name": [hostile] * 2, "value": [1.0, 0.5], "run": ["<i>r</i>"] * 2})
    curves = figures.curves_figure(df)
    assert curves.layout.annotations[0].text == escaped
    scatter = figures.param_scatter_figure(pd.DataFrame({"<p>": ["<b>", "c"], "m": [1.0, 2.0],
                                                         "run": ["<s>a</s>", "b"]}), "<p>", "m")
    assert list(scatter.data[0].x) == ["&lt;b&gt;", "c"] and scatter.data[0].text[0] == "&lt;s&gt;a&lt;/s&gt;"
    assert scatter.layout.xaxis.title.text == "&lt;p&gt;"


class TestUniqueRunLabels:
    def test_shared_names_get_the_id_suffix_and_unique_names_stay(self):
        labels = figures.unique_run_labels([("r-20250101-1a2b3c", "mlp"), ("r-20250102-4d5e6f", "mlp"),
                                            ("r-20250102-777777", "cnn")])
        assert labels == {"r-20250101-1a2b3c": "mlp · r-1a2b3c", "r-20250102-4d5e6f": "mlp · r-4d5e6f",
                          "r-20250102-777777": "cnn"}

    def test_colliding_suffixes_fall_back_to_the_whole_id(self):
        labels = figures.unique_run_labels([("r-20250101-aaaaaa", "x"), ("r-20250202-aaaaaa", "x")])
        assert labels == {"r-20250101-aaaaaa": "x · r-20250101-aaaaaa", "r-20250202-aaaaaa": "x · r-20250202-aaaaaa"}

    def test_labels_keep_two_runs_apart_in_the_legend(self):
        frame = pd.concat([_frame(5, run="r-20250101-1a2b3c"), _frame(5, run="r-20250101-4d5e6f")])
        labels = figures.unique_run_labels([("r-20250101-1a2b3c", "same"), ("r-20250101-4d5e6f", "same")])
        names = {t.name for t in figures.curves_figure(frame, run_labels=labels).data}
        assert names == {"same · r-1a2b3c · train", "same · r-4d5e6f · train"}


class TestCompareAtScale:
    """Issue 15, item 5: a readable legend at 20+ runs, log axes for params spanning decades, the
    best run highlighted, parallel coordinates of params against a metric."""

    def test_many_runs_get_one_legend_entry_each_in_a_vertical_list(self):
        runs = [f"r-20250101-{i:06x}" for i in range(25)]
        frame = pd.concat([_frame(5, splits=("train", "eval"), run=r) for r in runs])
        fig = figures.curves_figure(frame, run_labels={r: f"trial {i}" for i, r in enumerate(runs)})
        shown = [t.name for t in fig.data if t.showlegend is not False]
        assert shown == [f"trial {i}" for i in range(25)]  # one per run, not run x split
        assert fig.layout.legend.orientation == "v" and fig.layout.hovermode == "closest"
        assert len({t.line.color for t in fig.data}) == 25  # distinct colours past the palette's ten
        dashes = {(t.name, t.line.dash) for t in fig.data if t.name == "trial 0"}
        assert dashes == {("trial 0", "solid"), ("trial 0", "dash")}  # train solid, eval dashed

    def test_a_few_runs_keep_the_horizontal_legend(self):
        frame = pd.concat([_frame(5, run=f"r-20250101-00000{i}") for i in range(3)])
        fig = figures.curves_figure(frame)
        assert fig.layout.legend.orientation == "h" and fig.layout.hovermode == "x unified"

    def test_long_names_are_shortened_and_stay_unique(self):
        runs = [("r-1-aaaaaa", "a learning rate sweep of the wide model, trial 1"),
                ("r-1-bbbbbb", "a learning rate sweep of the wide model, trial 2"),
                ("r-1-cccccc", "a learning rate sweep of the deep model, trial 1")]
        labels = figures.unique_run_labels(runs, max_length=20)
        assert labels == {"r-1-aaaaaa": "a learning…, trial 1 · r-aaaaaa",
                          "r-1-bbbbbb": "a learning…, trial 2",
                          "r-1-cccccc": "a learning…, trial 1 · r-cccccc"}
        with pytest.raises(ValueError, match="max_length must be an int >= 5"):
            figures.unique_run_labels(runs, max_length=2)

    def test_spans_decades(self):
        assert figures.spans_decades([1e-4, 3e-3, 0.1])
        assert not figures.spans_decades([0.01, 0.9])
        assert not figures.spans_decades([0.0, 1e-4, 10.0])  # zero: no log axis
        assert not figures.spans_decades(["a", "b"])

    def test_scatter_uses_a_log_axis_for_a_learning_rate_sweep_and_stars_the_best(self):
        table = pd.DataFrame({"name": ["a", "b", "c"], "param: lr": [1e-4, 1e-3, 1e-1],
                              "eval accuracy": [0.7, 0.9, 0.8]})
        fig = figures.param_scatter_figure(table, "param: lr", "eval accuracy", label_column="name", best="b")
        assert fig.layout.xaxis.type == "log" and fig.layout.xaxis.title.text == "param: lr (log scale)"
        assert list(fig.data[0].text) == ["a", "c"]
        assert fig.data[1].marker.symbol == "star" and list(fig.data[1].text) == ["best: b"]
        assert list(fig.data[1].x) == [1e-3] and list(fig.data[1].y) == [0.9]
        linear = figures.param_scatter_figure(table.assign(**{"param: lr": [0.1, 0.2, 0.3]}), "param: lr",
                                              "eval accuracy", label_column="name")
        assert linear.layout.xaxis.type is None and len(linear.data) == 1

    def test_parallel_coordinates_of_params_against_a_metric(self):
        table = pd.DataFrame({"run": ["a", "b", "c"], "param: lr": [1e-4, 1e-1, 1.0],
                              "param: optimizer": ["adam", "sgd", "adam"], "seed": [1, 2, 3],
                              "eval loss": [0.5, 0.2, np.nan]})
        fig = figures.parallel_coordinates_figure(table, ["param: lr", "param: optimizer", "seed"], "eval loss",
                                                  direction="minimize")
        trace = fig.data[0]
        labels = [d.label for d in trace.dimensions]
        assert labels == ["lr (log scale)", "optimizer", "seed", "eval loss"]
        assert list(trace.dimensions[0].values) == [-4.0, -1.0]  # the run without a metric is left out
        assert list(trace.dimensions[0].ticktext) == ["0.0001", "0.001", "0.01", "0.1"]  # the values, not -4
        assert list(trace.dimensions[1].ticktext) == ["adam", "sgd"] and list(trace.dimensions[1].values) == [0, 1]
        assert list(trace.line.color) == [0.5, 0.2] and trace.line.reversescale is True
        with pytest.raises(ValueError, match="direction must be 'maximize' or 'minimize'"):
            figures.parallel_coordinates_figure(table, ["seed"], "eval loss", direction="up")
        with pytest.raises(ValueError, match="Column 'nope' is not in the table"):
            figures.parallel_coordinates_figure(table, ["nope"], "eval loss")
        empty = figures.parallel_coordinates_figure(table.assign(**{"eval loss": np.nan}), ["seed"], "eval loss")
        assert empty.layout.annotations[0].text == "No run has a value of eval loss yet."


def test_label_figure_counts_classes_and_bins_a_numeric_label():
    classes = figures.label_figure(pd.Series(["b", "a", "b", None, "b"], name="kind"))
    bar = classes.data[0]
    assert bar.type == "bar" and list(bar.x) == ["b", "a"] and list(bar.y) == [3, 1]
    assert classes.layout.title.text == "kind: 4 labelled examples in 2 classes"
    numeric = figures.label_figure(pd.Series(range(100), name="price", dtype=float), bins=10)
    assert numeric.data[0].type == "histogram" and numeric.data[0].nbinsx == 10
    assert numeric.layout.title.text == "price: 100 labelled examples"
    few = figures.label_figure(pd.Series([0, 1, 1], name="y"))  # a few numeric values are classes
    assert few.data[0].type == "bar" and list(few.data[0].y) == [2, 1]
