"""The Data page shows the sizes of the train/eval split and warns when the eval part is empty."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("streamlit")
from app_pages import open_page
from streamlit.testing.v1 import AppTest

from workbench.data import datasets

REPO = Path(__file__).resolve().parents[2]
EMPTY_EVAL = "The evaluation part is empty"


def data_page() -> AppTest:
    return open_page()  # the app opens on the Data page


def test_the_split_sizes_are_shown(home):
    at = data_page()  # iris, 150 rows, 20 % held out, stratified
    df = datasets.load_table(datasets.bundled_path("iris"))
    train, held_out = datasets.split(df, datasets.DatasetSpec.from_dict(at.session_state["dataset"]))
    assert len(train) + len(held_out) == 150 and len(held_out) == 30
    assert f"Split: {len(train)} training rows · {len(held_out)} evaluation rows" in [c.value for c in at.caption]
    assert not [w for w in at.warning if EMPTY_EVAL in w.value]


def test_an_empty_eval_part_is_warned_about(home, monkeypatch):
    # whatever rule datasets.split follows for tiny classes, an empty eval part must be reported
    monkeypatch.setattr(datasets, "split", lambda df, spec: (df, df.iloc[:0]))
    at = data_page()
    assert "Split: 150 training rows · 0 evaluation rows" in [c.value for c in at.caption]
    [warning] = [w.value for w in at.warning if EMPTY_EVAL in w.value]
    assert "Raise 'Held out for evaluation' or untick 'Stratify by label'" in warning
    at.checkbox(key="data-stratify").uncheck().run()
    [warning] = [w.value for w in at.warning if EMPTY_EVAL in w.value]
    assert "Stratify" not in warning
    at.slider(key="data-eval").set_value(0.0).run()  # nothing held out on purpose: no warning
    assert not [w for w in at.warning if EMPTY_EVAL in w.value]


def test_rows_without_a_label_can_be_left_out(home):
    """An uploaded file whose label has blanks: an error naming the rows, or (chosen) those rows
    left out of training and evaluation, the dataset then usable."""
    rows = (REPO / "sample_data" / "iris.csv").read_text().splitlines()
    rows[1], rows[60] = rows[1].rsplit(",", 1)[0] + ",", rows[60].rsplit(",", 1)[0] + ","
    at = data_page()
    at.radio(key="data-source").set_value("Upload a file").run()
    at.file_uploader(key="data-upload").set_value(("blanks.csv", "\n".join(rows).encode(), "text/csv")).run()
    assert not at.exception, at.exception
    assert at.error and any("Label column 'species' has missing values in 2 of 150 rows" in c.value for c in at.code)
    at.radio(key="data-label-missing").set_value("drop").run()
    assert not at.error and not at.exception
    spec = datasets.DatasetSpec.from_dict(at.session_state["dataset"])
    assert spec.label_missing == "drop"
    assert "Split: 118 training rows · 30 evaluation rows" in [c.value for c in at.caption]
