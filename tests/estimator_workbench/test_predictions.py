"""estimator_workbench.data.predictions: columns, rows, chunking, atomic write and CSV formula escaping."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from estimator_workbench import templates
from estimator_workbench.data import datasets, predictions
from estimator_workbench.execution import build


class FakeEstimator:
    """Yields fixed prediction batches, like Estimator.predict(yield_single_examples=False)."""

    def __init__(self, batches):
        self.batches = batches
        self.calls = []

    def predict(self, input_fn, checkpoint_path=None, yield_single_examples=True):
        self.calls.append((input_fn, checkpoint_path, yield_single_examples))
        yield from self.batches


def classifier_batches(n_rows: int, batch: int = 3, n_classes: int = 3):
    out = []
    for start in range(0, n_rows, batch):
        ids = np.arange(start, min(start + batch, n_rows)) % n_classes
        probs = np.eye(n_classes, dtype=np.float32)[ids] * 0.8 + 0.2 / n_classes
        out.append({"class_ids": ids, "probabilities": probs})
    return out


def test_columns_rows_and_class_names(tmp_path):
    src = pd.DataFrame({"id": [10, 11, 12, 13, 14], "x": [0.5, -1.0, 2.0, 3.0, 4.0]})
    est = FakeEstimator(classifier_batches(5))
    out = tmp_path / "run" / "predictions.csv"
    result = predictions.write_predictions_csv(est, "input_fn", src, out, id_columns=["id"],
                                               label_vocabulary=["cat", "dog", "eel"],
                                               checkpoint_path="ckpt-5", chunk_rows=2)
    df = pd.read_csv(out)
    assert list(df.columns) == ["id", "class_ids", "class", "probability_cat", "probability_dog", "probability_eel"]
    assert df["id"].tolist() == [10, 11, 12, 13, 14]
    assert df["class"].tolist() == ["cat", "dog", "eel", "cat", "dog"]
    assert df["probability_dog"].round(4).tolist()[1] == pytest.approx(0.8667, abs=1e-4)
    assert result == {"path": str(out), "rows": 5, "columns": list(df.columns)}
    assert est.calls == [("input_fn", "ckpt-5", False)]
    assert not (tmp_path / "run" / "predictions.csv.tmp").exists()


def test_all_columns_by_default_and_regression_keys(tmp_path):
    src = pd.DataFrame({"a": [1, 2], "predictions": [0, 0]})
    est = FakeEstimator([{"predictions": np.array([1.5, 2.5]), "emb": np.ones((2, 2, 2))}])
    predictions.write_predictions_csv(est, None, src, tmp_path / "p.csv")
    df = pd.read_csv(tmp_path / "p.csv")
    assert list(df.columns) == ["a", "predictions", "predictions_pred", "emb_0", "emb_1", "emb_2", "emb_3"]
    assert df["predictions_pred"].tolist() == [1.5, 2.5]


def test_formula_injection_is_escaped(tmp_path):
    src = pd.DataFrame({"name": ["=HYPERLINK(\"x\")", "+1", "-cmd", "@SUM(A1)", "safe", "\tx"],
                        "num": [-1.5, 2.0, 3.0, 4.0, 5.0, 6.0]})
    est = FakeEstimator([{"class_ids": np.zeros(6, dtype=np.int64)}])
    predictions.write_predictions_csv(est, None, src, tmp_path / "p.csv", label_vocabulary=["=evil()"])
    df = pd.read_csv(tmp_path / "p.csv", keep_default_na=False)
    assert df["name"].tolist() == ["'=HYPERLINK(\"x\")", "'+1", "'-cmd", "'@SUM(A1)", "safe", "'\tx"]
    assert df["num"].tolist()[0] == -1.5  # numbers are not formulas
    assert set(df["class"]) == {"'=evil()"}
    header = pd.read_csv(tmp_path / "p.csv", nrows=0)
    esc = predictions.escape_formulas(pd.DataFrame({"=bad": [1]}))
    assert list(esc.columns) == ["'=bad"] and "name" in header.columns


@pytest.mark.parametrize(("cell", "escaped"), [
    (" =1+1", "' =1+1"),                     # a leading space: spreadsheets skip it
    ("\u3000=1+1", "'\u3000=1+1"),             # the full-width space too
    ("\uff1dHYPERLINK(\"x\")", "'\uff1dHYPERLINK(\"x\")"),  # full-width =, read as =
    ("\uff0b1", "'\uff0b1"), ("\uff0d2", "'\uff0d2"), ("\uff20SUM(A1)", "'\uff20SUM(A1)"),
    ("ok\n=cmd|' /C calc'!A0", "'ok\n'=cmd|' /C calc'!A0"),  # an embedded newline: each line
    ("\n@x", "'\n'@x"),
    ("safe text", "safe text"), ("a=b", "a=b"), ("x\ny", "x\ny"), ("", ""),
])
def test_formula_cells_hidden_behind_space_newlines_or_full_width_signs(cell, escaped):
    """Issue 24 item 14: these passed the escaping of prediction downloads."""
    out = predictions.escape_formulas(pd.DataFrame({"c": [cell]}))
    assert out["c"].tolist() == [escaped]


def test_missing_text_cells_stay_missing():
    frame = pd.DataFrame({"c": pd.array([None, " =1", "ok"], dtype="string"), "o": [None, "@x", float("nan")]})
    out = predictions.escape_formulas(frame)
    assert out["c"].isna().tolist() == [True, False, False] and out["c"].tolist()[1:] == ["' =1", "ok"]
    assert out["o"].isna().tolist() == [True, False, True] and out["o"][1] == "'@x"


def test_row_count_mismatch_leaves_no_file(tmp_path):
    src = pd.DataFrame({"a": range(4)})
    out = tmp_path / "p.csv"
    with pytest.raises(ValueError, match=r"The input_fn yielded 3 rows but the input has 4"):
        predictions.write_predictions_csv(FakeEstimator(classifier_batches(3)), None, src, out)
    with pytest.raises(ValueError, match=r"yielded more rows than the input has \(4\)"):
        predictions.write_predictions_csv(FakeEstimator(classifier_batches(6)), None, src, out, chunk_rows=1)
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ValueError, match=r"id_columns \['nope'\] are not columns of the input"):
        predictions.write_predictions_csv(FakeEstimator([]), None, src, out, id_columns=["nope"])
    with pytest.raises(ValueError, match=r"chunk_rows must be a positive int, given: 0"):
        predictions.write_predictions_csv(FakeEstimator([]), None, src, out, chunk_rows=0)


def test_existing_file_replaced_only_on_success(tmp_path):
    out = tmp_path / "p.csv"
    out.write_text("old\n")
    src = pd.DataFrame({"a": range(2)})
    with pytest.raises(ValueError):
        predictions.write_predictions_csv(FakeEstimator(classifier_batches(1)), None, src, out)
    assert out.read_text() == "old\n"


def test_memory_is_flat_in_rows(tmp_path):
    """Chunks are written as they fill: the writer never holds more than chunk_rows + a batch."""
    n = 5000
    src = pd.DataFrame({"a": np.arange(n)})
    held = []

    class Counting(FakeEstimator):
        def predict(self, input_fn, checkpoint_path=None, yield_single_examples=True):
            for b in classifier_batches(n, batch=100):
                held.append(out.with_name("p.csv.tmp").stat().st_size if out.with_name("p.csv.tmp").exists() else 0)
                yield b

    out = tmp_path / "p.csv"
    predictions.write_predictions_csv(Counting([]), None, src, out, chunk_rows=500)
    assert held[4] == 0 and held[5] > 0 and held[-1] > held[10]  # the file grows while predicting
    assert len(pd.read_csv(out)) == n


def test_end_to_end_with_a_trained_estimator(tmp_path):
    df = datasets.load_csv(datasets.bundled_path("iris"))
    spec = datasets.DatasetSpec({"kind": "bundled", "name": "iris"}, datasets.infer_schema(df))
    run_spec = {"template": {"name": "linear", "code": templates.get_template("linear").code},
                "params": {"learning_rate": 0.5}, "dataset": spec.to_dict(),
                "run_config": {"tf_random_seed": 0, "device": "cpu", "log_step_count_steps": None}}
    estimator, fns = build.build_estimator(run_spec, tmp_path / "model")
    estimator.train(fns.train, steps=100)
    new_rows = df.sample(frac=1.0, random_state=1).reset_index(drop=True)
    predict_fn = datasets.make_predict_input_fn(spec, new_rows, fns.info, batch_size=64)
    out = tmp_path / "predictions.csv"
    predictions.write_predictions_csv(estimator, predict_fn, new_rows, out,
                                      id_columns=list(new_rows.columns),
                                      label_vocabulary=fns.info["label_vocabulary"], chunk_rows=50)
    result = pd.read_csv(out)
    assert len(result) == 150
    assert [c for c in result.columns if c.startswith("probability_")] == [
        "probability_setosa", "probability_versicolor", "probability_virginica"]
    assert (result["class"] == result["species"]).mean() > 0.8
    probs = result.filter(like="probability_").to_numpy()
    assert np.allclose(probs.sum(axis=1), 1.0, atol=1e-5)
    assert torch.is_tensor(torch.as_tensor(probs))


def test_canned_head_keys_that_repeat_other_columns_are_left_out():
    batch = {"class_ids": np.array([[1], [0]]), "classes": np.array([[b"1"], [b"0"]]),
             "all_class_ids": np.array([[0, 1], [0, 1]]), "all_classes": np.array([[b"0", b"1"]] * 2),
             "logits": np.array([[0.5], [-0.5]]), "probabilities": np.array([[0.4, 0.6], [0.6, 0.4]])}
    columns = predictions.prediction_columns(batch, ["no", "yes"])
    assert list(columns) == ["class_ids", "class", "logits", "probability_no", "probability_yes"]
    assert columns["class"].tolist() == ["yes", "no"]
    # without class_ids, 'classes' is the only class column and stays
    assert list(predictions.prediction_columns({"classes": np.array([b"a"])})) == ["classes"]
