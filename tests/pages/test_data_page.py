"""The Data page shows the sizes of the train/eval split and warns when the eval part is empty."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("streamlit")
from app_pages import open_page
from streamlit.testing.v1 import AppTest

from estimator_workbench.data import datasets

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


def _upload(at: AppTest, name: str, body: bytes) -> AppTest:
    at.radio(key="data-source").set_value("Upload a file").run()
    at.file_uploader(key="data-upload").set_value((name, body, "text/csv")).run()
    assert not at.exception, at.exception
    return at


def _seattle() -> bytes:
    vega = pytest.importorskip("vega_datasets")
    return Path(vega.local_data.seattle_weather.filepath).read_bytes()


def _cars() -> bytes:
    vega = pytest.importorskip("vega_datasets")
    import pandas as pd

    return pd.read_json(vega.local_data.cars.filepath).to_csv(index=False).encode()


def test_each_column_shows_its_distribution_and_missing_values(home):
    at = _upload(data_page(), "cars.csv", _cars())
    table = next(d.value for d in at.dataframe if "distribution" in d.value.columns)
    rows = table.set_index("column")
    assert rows.loc["Miles_per_Gallon", "missing"] == 8 and rows.loc["Horsepower", "missing"] == 6
    assert rows.loc["Horsepower", "missing %"] == round(100 * 6 / 406, 1)
    assert sum(rows.loc["Weight_in_lbs", "distribution"]) == 406  # a histogram of every value
    assert list(rows.loc["Origin", "distribution"]) == [254, 79, 73]  # top categories: USA, Japan, Europe
    assert rows.loc["Origin", "values"] == "USA, Japan, Europe"


def test_a_date_column_is_expanded_or_left_out_as_chosen(home):
    at = _upload(data_page(), "seattle-weather.csv", _seattle())
    [date_choice] = [r for r in at.radio if r.label.startswith("Date column")]
    assert date_choice.value == "expand"
    assert any("expanded into date_year, date_month, date_dayofweek" in c.value.replace("\\", "") for c in at.caption)
    spec = datasets.DatasetSpec.from_dict(at.session_state["dataset"])
    assert spec.schema.column("date").dtype == "date" and spec.encoding("date") == "expand"
    df = datasets.load_table(spec.path)
    info = datasets.task_info(df, spec)  # what the runner hands the model
    assert info["feature_names"][:3] == ["date_year", "date_month", "date_dayofweek"]
    date_choice.set_value("ignore").run()
    spec = datasets.DatasetSpec.from_dict(at.session_state["dataset"])
    assert spec.encodings == {"date": "ignore"}
    assert "date_year" not in datasets.task_info(df, spec)["feature_names"]
    assert any("left out of the features" in c.value for c in at.caption)
    again = open_page()  # a reload keeps the choice
    assert [r.value for r in again.radio if r.label.startswith("Date column")] == ["ignore"]


def test_a_high_cardinality_text_column_is_flagged_with_a_choice(home):
    at = _upload(data_page(), "cars.csv", _cars())
    assert any("Name has 311 distinct values in 406 rows" in w.value.replace("\\", "") for w in at.warning)
    [choice] = [r for r in at.radio if r.label.startswith("Text column")]
    assert choice.options == ["Keep: one id per value", "Hash buckets", "Embedding", "Ignore"]
    choice.set_value("hash").run()
    at.number_input(key=next(n.key for n in at.number_input if n.key.endswith("-buckets"))).set_value(32).run()
    spec = datasets.DatasetSpec.from_dict(at.session_state["dataset"])
    assert (spec.encodings, spec.hash_buckets) == ({"Name": "hash"}, 32)
    info = datasets.task_info(datasets.training_rows(datasets.load_table(spec.path), spec), spec)
    assert info["hashed_features"] == {"Name": 32} and "Name" not in info["categorical_vocabularies"]


def test_an_identifier_label_is_warned_about_and_the_hold_out_keeps_its_size(home):
    """500 customer ids over 600 rows as the label: stratified, the hold-out would be one row."""
    ids = [f"cust{i:04d}" for i in range(500)] + [f"cust{i:04d}" for i in range(100)]
    body = "spend,customer\n" + "\n".join(f"{(i * 37) % 101 + 0.5},{c}" for i, c in enumerate(ids))
    at = _upload(data_page(), "customers.csv", body.encode())
    assert "Split: 480 training rows · 120 evaluation rows" in [c.value for c in at.caption]
    warnings = " ".join(w.value for w in at.warning).replace("\\", "")  # shown markdown-escaped
    assert "Stratifying by 'customer' would hold out 1 of 120 rows" in warnings
    assert "The label 'customer' has 500 distinct values in 600 rows: it looks like an identifier" in warnings


def _semicolon_cp1252() -> bytes:
    """A spreadsheet's CSV export on Western-European Windows: ';' between fields, decimal commas,
    cp1252 text ('é', and '€', a byte that Latin-1 reads as the control character U+0080)."""
    rows = ["taille;prix;catégorie"] + [f"{1 + i % 7},{i % 10};{10 + i},5;{'été' if i % 2 else 'hiver €'}"
                                         for i in range(40)]
    return "\r\n".join(rows).encode("cp1252")


def test_a_csv_upload_shows_its_detected_format_and_reads_it_as_chosen(home):
    """A ';'-delimited cp1252 upload: the Data page says how it was read (detected), the analyst
    changes the encoding and the delimiter (the file re-read, a misfit explained), and the choice is
    part of the dataset ref the run records, so the runner reads the file the same way."""
    from estimator_workbench.store.registry import RunRegistry
    from estimator_workbench.ui.session import md

    at = _upload(data_page(), "export.csv", _semicolon_cp1252())
    captions = [c.value for c in at.caption]
    assert md("Read as cp1252 text, ';' between fields, ',' as the decimal mark.") in captions
    ref = at.session_state["dataset"]["ref"]
    assert "delimiter" not in ref and "encoding" not in ref  # detected: nothing chosen
    assert [c["name"] for c in at.session_state["dataset"]["schema"]["columns"]] == ["taille", "prix", "catégorie"]
    key = "data-csv-export.csv"
    assert at.selectbox(key=f"{key}-delimiter").value is None  # "Detected"
    assert at.selectbox(key=f"{key}-encoding").value is None

    at.selectbox(key=f"{key}-encoding").set_value("latin-1").run()
    assert not at.exception and not at.error
    assert md("Read as latin-1 text, ';' between fields, ',' as the decimal mark.") in [c.value for c in at.caption]
    assert at.session_state["dataset"]["ref"]["encoding"] == "latin-1"

    at.selectbox(key=f"{key}-delimiter").set_value(",").run()  # a misfit: the header has no ','
    assert not at.exception
    assert at.error and "has only one column" in at.error[0].value + "".join(c.value for c in at.code)
    at.selectbox(key=f"{key}-delimiter").set_value(";").run()
    assert not at.exception and not at.error
    dataset = at.session_state["dataset"]
    assert (dataset["ref"]["delimiter"], dataset["ref"]["encoding"]) == (";", "latin-1")

    at.switch_page("../../pages/train.py").run()
    at.number_input(key="rc-steps").set_value(3)
    at.button[0].click()
    at.run()
    assert not at.exception, at.exception
    [record] = RunRegistry(home).list_runs()
    assert {k: record.dataset["ref"][k] for k in ("delimiter", "encoding")} == {"delimiter": ";", "encoding": "latin-1"}
    frame = datasets.DatasetSpec.from_dict(record.dataset).load()  # as the runner loads it
    assert frame["catégorie"].iloc[0] == "hiver \x80"  # Latin-1 as chosen; detected cp1252 reads '€'
    assert frame["prix"].iloc[0] == 10.5


def test_the_column_summary_is_computed_once_per_file_for_the_server(tmp_path, monkeypatch):
    """Issue 24.3: the whole-table summary ran on every rerun of every session; now once per file."""
    from estimator_workbench.ui import session

    path = tmp_path / "once.csv"
    path.write_text("x,y\n1,a\n2,b\n3,a\n")
    calls = []
    real = datasets.summary
    monkeypatch.setattr(datasets, "summary", lambda df: calls.append(len(df)) or real(df))
    first = session.dataset_summary(path)
    again = session.dataset_summary(path)  # another rerun, or another browser
    assert calls == [3] and first.equals(again)
    assert first.loc["y", "top"] == "a" and first.loc["x", "max"] == 3.0
    path.write_text("x,y\n1,a\n2,b\n")  # a new version of the file is summarised again
    assert session.dataset_summary(path).loc["x", "count"] == 2 and calls == [3, 2]
