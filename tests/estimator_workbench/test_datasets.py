"""estimator_workbench.data.datasets: loading with pinned errors, schema inference, validation, split, input_fns."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from estimator_workbench.data import datasets as ds
from estimator_workbench.data import sources
from estimator_workbench.data import spec as data_spec

BAD = Path(__file__).resolve().parents[1] / "data" / "bad"


def bundled(name: str) -> tuple[pd.DataFrame, ds.DatasetSpec]:
    df = ds.load_csv(ds.bundled_path(name))
    return df, ds.DatasetSpec({"kind": "bundled", "name": name}, ds.infer_schema(df))


# ----------------------------------------------------------------------------------- loading


@pytest.mark.parametrize("filename, pattern", [
    ("empty.csv", r"CSV file '.*empty\.csv' is empty \(0 bytes\)\. Provide a file with a header row"),
    ("ragged.csv", r"has a ragged row: line 4 has 4 fields but the header has 3 \(1 such rows\)\. Fix that line"),
    ("duplicate_columns.csv", r"has a duplicate column name: 'a' \(columns 1 and 3\)\. Rename them"),
    ("blank_column.csv", r"has a blank column name at column 2 of the header \['a', '', 'label'\]\. Give every column a name"),
    ("header_only.csv", r"has a header but no data rows\. Add at least one row\."),
])
def test_bad_csv_files_get_pinned_errors(filename, pattern):
    with pytest.raises(ValueError, match=pattern):
        ds.load_csv(BAD / filename)


CITIES = "name;city;price\nJosé;München;12,5\nZoë;Besançon;3,25\nÅsa;Malmö;7\n"


@pytest.mark.parametrize("raw, encoding, delimiter, decimal", [
    (CITIES.encode("cp1252"), "cp1252", ";", ","),           # a European Excel export
    (CITIES.replace(";", "\t").encode("utf-8-sig"), "utf-8-sig", "\t", ","),
    (CITIES.replace(";", "|").replace(",", ".").encode("utf-8"), "utf-8", "|", "."),
    (b"a,b\n1,x\n", "utf-8", ",", "."),
])
def test_delimiter_encoding_and_decimal_mark_are_detected_and_recorded(raw, encoding, delimiter, decimal):
    df = ds.load_csv(raw)
    assert sources.csv_format(df) == sources.CsvFormat(encoding, delimiter, decimal)
    if len(df.columns) == 3:
        assert df["name"].tolist() == ["José", "Zoë", "Åsa"] and df["city"].tolist()[1] == "Besançon"
        if delimiter != "|":  # '|': the file kept its ',' in the numbers, written with '.'
            assert df["price"].tolist() == [12.5, 3.25, 7.0]


def test_the_data_profile_reports_the_detected_format():
    from estimator_workbench.data import profile

    df = ds.load_csv(CITIES.encode("cp1252"))
    assert profile.source_format_note(df) == "Read as cp1252 text, ';' between fields, ',' as the decimal mark."
    assert profile.source_format_note(ds.load_csv(b"a,b\n1,x\n")) == "Read as utf-8 text, ',' between fields."


def test_latin1_bytes_cp1252_leaves_undefined_are_read_as_latin1():
    df = ds.load_csv("a;b\n1;x\x81é\n".encode("latin-1"))
    assert sources.csv_format(df).encoding == "latin-1" and df["b"].tolist() == ["x\x81é"]


def test_the_detected_choice_can_be_overridden():
    df = ds.load_csv("a;b\n1;é\n".encode("cp1252"), encoding="latin-1", delimiter=";")
    assert sources.csv_format(df) == sources.CsvFormat("latin-1", ";", ".") and df["b"].tolist() == ["é"]
    with pytest.raises(ValueError, match=r"is not valid utf-8: byte 0xe9 at line 2, column 3\. Give its encoding"):
        ds.load_csv("a;b\n1;é\n".encode("cp1252"), encoding="utf-8")
    with pytest.raises(ValueError, match=r"has only one column \('a;b'\)\. The header contains ';': give it as the delimiter"):
        ds.load_csv(b"a;b\n1;2\n", delimiter=",")
    with pytest.raises(ValueError, match=r"delimiter must be one character such as ',' or ';', given: ';;'"):
        ds.load_csv(b"a;b\n1;2\n", delimiter=";;")
    with pytest.raises(ValueError, match=r"encoding 'klingon' is not a known text encoding"):
        ds.load_csv(b"a;b\n1;2\n", encoding="klingon")


def test_size_limit_is_checked_before_reading(monkeypatch):
    def no_read(source):
        raise AssertionError("the file was read although it is over the limit")

    monkeypatch.setattr(sources, "_read_bytes", no_read)
    with pytest.raises(ValueError, match=r"is 3870 bytes, over the size limit of 100 bytes \(max_bytes=100\)\. "
                                         r"Upload a smaller sample"):
        ds.load_csv(ds.bundled_path("iris"), max_bytes=100)


def test_size_limit_applies_to_uploads_and_parquet(tmp_path):
    with pytest.raises(ValueError, match="over the size limit"):
        ds.load_csv(io.BytesIO(b"a,b\n1,2\n" * 50), max_bytes=10)
    big = tmp_path / "x.parquet"
    big.write_bytes(b"0" * 200)
    with pytest.raises(ValueError, match="over the size limit"):
        ds.load_table(big, max_bytes=100)


def test_load_csv_accepts_bytes_buffers_and_bom():
    df = ds.load_csv(b"\xef\xbb\xbfa,b\n1,x\n\n2,y\n")
    assert list(df.columns) == ["a", "b"] and df["a"].tolist() == [1, 2]
    upload = io.BytesIO(b"a,b\n1,NA\n")
    upload.name = "upload.csv"
    assert ds.load_csv(upload)["b"].isna().all()


def test_quoted_separators_and_newlines_are_not_ragged():
    df = ds.load_csv(b'a,b,label\n1,"x, y",p\n2,"multi\nline",q\n')
    assert df.shape == (2, 3)


def test_ragged_row_line_number_counts_quoted_newlines():
    with pytest.raises(ValueError, match="line 4 has 2 fields"):
        ds.load_csv(b'a,b,label\n1,"two\nlines",p\n2,q\n')


def test_missing_file_and_unknown_type(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        ds.load_csv(tmp_path / "nope.csv")
    (tmp_path / "x.xlsx").write_bytes(b"x")
    with pytest.raises(ValueError, match=r"Unsupported data file type '\.xlsx'.*expected a \.csv or \.parquet"):
        ds.load_table(tmp_path / "x.xlsx")


def test_parquet_roundtrip_or_clear_message(tmp_path):
    path = tmp_path / "d.parquet"
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        path.write_bytes(b"PAR1")
        with pytest.raises(ValueError, match=r"needs the 'pyarrow' package.*pip install pyarrow"):
            ds.load_table(path)
        return
    df = pd.DataFrame({"x": [1.0, 2.0], "label": ["a", "b"]})
    df.to_parquet(path)
    pd.testing.assert_frame_equal(ds.load_table(path), df, check_dtype=False)
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(b"not parquet")
    with pytest.raises(ValueError, match=r"Parquet file '.*broken\.parquet' could not be read .* Check that it is a Parquet file"):
        ds.load_table(broken)


def test_bundled_datasets_listed_and_loadable():
    infos = {i.name: i for i in ds.list_bundled()}
    assert set(infos) == {"iris", "wine", "breast_cancer", "diabetes", "digits", "penguins"}
    assert sum(i.size_bytes for i in infos.values()) < 1_000_000
    assert infos["iris"].n_rows == 150 and infos["digits"].columns[-1] == "label"
    assert (ds.SAMPLE_DATA_DIR / "README.md").read_text().count("licence") >= 1
    with pytest.raises(ValueError, match=r"Unknown bundled dataset name: '\.\./etc'"):
        ds.bundled_path("../etc")


def test_save_upload_checks_first_and_keeps_workspace_clean(tmp_path):
    with pytest.raises(ValueError, match="ragged row"):
        ds.save_upload(tmp_path, "bad.csv", (BAD / "ragged.csv").read_bytes())
    assert list((tmp_path / "datasets").iterdir()) == []
    path = ds.save_upload(tmp_path, "../../My Data!.csv", b"a,label\n1,x\n2,y\n")
    assert path == tmp_path / "datasets" / "My_Data.csv"
    again = ds.save_upload(tmp_path, "My Data.csv", b"a,label\n3,x\n4,y\n")
    assert again.name == "My_Data_2.csv" and path.read_bytes() == b"a,label\n1,x\n2,y\n"


def test_80_concurrent_uploads_are_neither_lost_nor_mixed(tmp_path):
    """Issue 24 item 7: sessions of one UI share a process, and the temp file was named by the
    pid: 10 of 80 concurrent uploads failed (9 with a raw FileNotFoundError) and one stored file
    held another session's data. 40 distinct contents under one name, 40 under their own."""
    import threading

    uploads = [("data.csv" if i % 2 else f"mine_{i}.csv", f"a,label\n{i},x\n{i + 1},y\n".encode() * (1 + i % 7))
               for i in range(80)]
    results: list[object] = [None] * len(uploads)
    barrier = threading.Barrier(len(uploads))

    def upload(i: int) -> None:
        barrier.wait()
        try:
            results[i] = ds.save_upload(tmp_path, *uploads[i])
        except Exception as exc:  # recorded: the test counts them
            results[i] = exc

    threads = [threading.Thread(target=upload, args=(i,)) for i in range(len(uploads))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    failed = [r for r in results if not isinstance(r, Path)]
    mixed = [i for i, r in enumerate(results) if isinstance(r, Path) and r.read_bytes() != uploads[i][1]]
    assert (failed, mixed) == ([], [])
    assert len({r for r in results}) == 80  # every content has its own file
    stored = sorted(p.name for p in (tmp_path / "datasets").iterdir() if not p.name.endswith(".owner"))
    assert stored == sorted(r.name for r in results)  # no temp left
    assert all(ds.upload_owner(tmp_path, name) for name in stored)  # and each has its uploader (issue 26.4)


# ------------------------------------------------------------------------------------ schema


def test_infer_schema_on_bundled_data():
    expectations = {
        "iris": ("species", "categorical", "classification"),
        "wine": ("cultivar", "categorical", "classification"),
        "breast_cancer": ("diagnosis", "categorical", "classification"),
        "diabetes": ("target", "numeric", "regression"),
        "digits": ("label", "categorical", "classification"),
        "penguins": ("species", "categorical", "classification"),
    }
    for name, (label, dtype, task) in expectations.items():
        df, spec = bundled(name)
        assert spec.schema.label == label
        assert spec.schema.column(label).dtype == dtype
        assert spec.task == task
        assert ds.validate(df, spec.schema) == []
    _, spec = bundled("penguins")
    assert spec.schema.column("island").dtype == "categorical"
    assert spec.schema.column("sex").n_missing == 11
    assert spec.schema.column("bill_length_mm").dtype == "numeric"


def test_infer_schema_roles_ids_weights_and_last_column():
    df = pd.DataFrame({
        "row_id": ["r1", "r2", "r3", "r4"],
        "n": [0, 1, 2, 3],                       # consecutive unique ints: a row number
        "x": [0.5, 0.1, 0.2, 0.9],
        "color": ["red", "blue", "red", "red"],
        "sample_weight": [1.0, 2.0, 1.0, 1.0],
        "empty": [np.nan] * 4,
        "price": [1.5, 2.5, 3.5, 10.25],         # no label-like name: the last column
    })
    s = ds.infer_schema(df)
    roles = {c.name: (c.role, c.dtype) for c in s.columns}
    assert roles == {
        "row_id": ("ignore", "categorical"), "n": ("ignore", "numeric"), "x": ("feature", "numeric"),
        "color": ("feature", "categorical"), "sample_weight": ("weight", "numeric"),
        "empty": ("ignore", "numeric"), "price": ("label", "numeric"),
    }
    assert s.label == "price" and s.weight == "sample_weight" and s.features == ("x", "color")
    # A weight column at the end is not taken for the label.
    trailing = ds.infer_schema(df[["x", "color", "price", "sample_weight"]])
    assert (trailing.label, trailing.weight) == ("price", "sample_weight")


def test_schema_replace_column_and_json_roundtrip():
    _, spec = bundled("penguins")
    s = spec.schema.replace_column("island", role="label")
    assert s.label == "island" and s.column("species").role == "ignore"  # old label never becomes a feature
    s = s.replace_column("year", dtype="categorical")
    assert s.column("year").dtype == "categorical"
    assert ds.Schema.from_dict(json.loads(json.dumps(s.to_dict()))) == s
    with pytest.raises(ValueError, match=r"role must be one of .* given: 'target'"):
        s.replace_column("year", role="target")
    with pytest.raises(ValueError, match=r"Unknown column name: 'nope'"):
        s.replace_column("nope", role="ignore")


# -------------------------------------------------------------------------------- validation


@pytest.mark.parametrize("filename, pattern", [
    ("one_class.csv", r"Label column 'label' has only one class \('x'\); a model needs at least two"),
    ("nan_label.csv", r"Label column 'label' has missing values in 2 of 5 rows \(e\.g\. rows \[1, 3\]\)\. "
                      r"Leave those rows out \(set 'Rows without a label' to 'drop' on the Data page, or "
                      r"--label-missing drop on the command line, or "
                      r"df\.dropna\(subset=\['label'\]\)\) or choose another label\."),
    ("no_feature.csv", r"No usable feature: no column has the role 'feature'"),
    ("negative_weight.csv", r"Weight column 'sample_weight' has missing or negative values"),
])
def test_bad_datasets_get_pinned_validation_errors(filename, pattern):
    df = ds.load_csv(BAD / filename)
    schema = ds.infer_schema(df)
    assert any(re.search(pattern, e) for e in ds.validate(df, schema)), ds.validate(df, schema)
    with pytest.raises(ValueError, match=r"The dataset cannot be used:\n- "):
        ds.validate(df, schema, raise_errors=True)


def test_validate_label_and_weight_rules():
    df = pd.DataFrame({"x": [1.0, 2.0, 3.0], "w": ["a", "b", "c"], "label": ["p", "q", "p"]})
    schema = ds.infer_schema(df).replace_column("label", role="ignore")
    assert any("No label: the action 'train' needs" in e for e in ds.validate(df, schema))
    assert ds.validate(df, schema, action="predict") == []
    schema = ds.infer_schema(df).replace_column("w", role="weight")
    assert any("Weight column 'w' is not numeric" in e for e in ds.validate(df, schema))


# ------------------------------------------------------------------------------ split & spec


def test_split_is_reproducible_and_stratified():
    df, spec = bundled("iris")
    train1, eval1 = ds.split(df, spec)
    train2, eval2 = ds.split(df, spec)
    assert train1.index.equals(train2.index) and eval1.index.equals(eval2.index)
    assert len(eval1) == 30 and len(train1) == 120
    assert set(train1.index).isdisjoint(eval1.index)
    assert eval1["species"].value_counts().tolist() == [10, 10, 10]  # exact class proportions
    other = ds.split(df, ds.DatasetSpec(spec.ref, spec.schema, seed=7))[1]
    assert not other.index.equals(eval1.index)


def test_a_tiny_stratified_split_still_evaluates_on_one_row():
    """5 rows in classes of 2/2/1 at 20 %: every class rounds to 0 eval rows; one row of a largest
    class goes to eval instead of leaving train_and_evaluate nothing to evaluate."""
    df, spec = bundled("iris")
    five = df.iloc[[0, 1, 50, 51, 100]]
    train, ev = ds.split(five, spec)
    assert len(ev) == 1 and len(train) == 4
    assert ev["species"].iloc[0] in ("setosa", "versicolor")
    assert set(train["species"]) == {"setosa", "versicolor", "virginica"}


def _customers(n_rows: int = 600, n_ids: int = 500):
    """A label that is an identifier: 500 customer ids over 600 rows (100 ids twice)."""
    ids = [f"cust{i:04d}" for i in range(n_ids)] + [f"cust{i:04d}" for i in range(n_rows - n_ids)]
    df = pd.DataFrame({"spend": np.arange(n_rows, dtype=float), "customer": ids})
    return df, ds.DatasetSpec({"kind": "file", "path": "customers.csv"}, ds.infer_schema(df))


def test_stratification_never_silently_shrinks_the_hold_out():
    """Stratified at 20 %, classes of one or two rows each round to 0 evaluation rows, so the hold-out
    was a single row of the 120 asked for (accuracy on it 0 or 1). The split falls back to the plain
    seeded split and says why."""
    df, spec = _customers()
    assert spec.task == "classification" and spec.stratify
    train, held_out = ds.split(df, spec)
    assert len(held_out) == 120 and len(train) == 480
    plain = ds.split(df, ds.DatasetSpec(spec.ref, spec.schema, stratify=False))[1]
    assert held_out.index.equals(plain.index)
    assert ds.split_note(df, spec) == (
        "Stratifying by 'customer' would hold out 1 of 120 rows (400 of its 500 classes have a single "
        "row, which stays in training): the split is a plain random one instead. Classes seen only in "
        "the evaluation part are new to the model.")
    singles, singles_spec = _customers(600, 600)
    assert len(ds.split(singles, singles_spec)[1]) == 120
    assert "would hold out 1 of 120 rows (600 of its 600 classes" in ds.split_note(singles, singles_spec)


def test_a_split_that_stratifies_has_no_note():
    df, spec = bundled("iris")
    assert ds.split_note(df, spec) is None
    assert ds.split_note(df, ds.DatasetSpec(spec.ref, spec.schema, stratify=False)) is None


def test_a_label_that_looks_like_an_identifier_is_warned_about():
    df, _ = _customers()
    assert ds.label_identifier_warning("customer", df["customer"]) == (
        "The label 'customer' has 500 distinct values in 600 rows: it looks like an identifier, not a "
        "class (most classes would have a single row, which a model cannot learn). Choose another label "
        "column, or type it 'numeric' if it is a quantity.")
    iris, _ = bundled("iris")
    assert ds.label_identifier_warning("species", iris["species"]) is None
    thirty = pd.Series([f"c{i % 30}" for i in range(1000)])  # many classes, each well populated
    assert ds.label_identifier_warning("c", thirty) is None
    assert ds.label_identifier_warning("c", pd.Series([f"c{i}" for i in range(20)])) is None  # few rows


def test_split_unstratified_and_regression():
    df, spec = bundled("diabetes")
    train, ev = ds.split(df, spec)
    assert len(ev) == round(442 * 0.2) and len(train) + len(ev) == 442
    iris, ispec = bundled("iris")
    ev = ds.split(iris, ds.DatasetSpec(ispec.ref, ispec.schema, stratify=False, eval_fraction=0.5))[1]
    assert len(ev) == 75


def test_fingerprint_changes_with_content_roles_and_seed(tmp_path):
    path = tmp_path / "d.csv"
    path.write_bytes(b"a,b,label\n1,2,x\n3,4,y\n5,6,x\n")
    df = ds.load_csv(path)
    spec = ds.DatasetSpec({"kind": "file", "path": str(path)}, ds.infer_schema(df))
    fp = spec.fingerprint()
    assert fp == ds.DatasetSpec.from_dict(spec.to_dict()).fingerprint() and len(fp) == 64
    assert ds.DatasetSpec(spec.ref, spec.schema.replace_column("b", role="ignore")).fingerprint() != fp
    assert ds.DatasetSpec(spec.ref, spec.schema, seed=43).fingerprint() != fp
    path.write_bytes(b"a,b,label\n1,2,x\n3,4,y\n5,7,x\n")
    assert spec.fingerprint() != fp


def test_a_ref_may_say_how_its_csv_file_is_read(tmp_path):
    """Issue 27: the delimiter and encoding an analyst chose travel in the ref; ``load`` (what the
    runner calls) reads the file with them, and refs without them read and fingerprint as before."""
    path = tmp_path / "d.csv"
    path.write_bytes(b"a;b;label\n1,5;2;x\n3;4;y\n5;6;\x80\n")  # cp1252 '\u20ac', Latin-1 '\x80'
    detected = ds.DatasetSpec({"kind": "file", "path": str(path)}, ds.infer_schema(ds.load_csv(path)))
    assert detected.read_options == {}
    assert detected.load()["label"].tolist() == ["x", "y", "\u20ac"] and detected.load()["a"].iloc[0] == 1.5
    # The fingerprint of a ref without read options, as computed before they existed (main at b9ec301).
    assert detected.fingerprint() == "c05db7f42888fd171a7687e0f67c87cd41937c8efb98a2156c8355a4a8754795"

    chosen = ds.DatasetSpec.from_dict({**detected.to_dict(), "ref": {**detected.ref, "encoding": "latin-1",
                                                                      "delimiter": ";"}})
    assert chosen.read_options == {"delimiter": ";", "encoding": "latin-1"}
    assert chosen.load()["label"].tolist() == ["x", "y", "\x80"]
    assert ds.DatasetSpec.from_dict(chosen.to_dict()) == chosen
    assert chosen.fingerprint() != detected.fingerprint()
    with pytest.raises(ValueError, match="has only one column"):
        ds.DatasetSpec(dict(detected.ref, delimiter="|"), detected.schema).load()

    with pytest.raises(ValueError, match=re.escape("DatasetSpec ref's delimiter must be one character such as "
                                                   "',' or ';', given: ';;'.")):
        ds.DatasetSpec(dict(detected.ref, delimiter=";;"), detected.schema)
    with pytest.raises(ValueError, match=re.escape("DatasetSpec ref's encoding 'klingon' is not a known text "
                                                   "encoding; use e.g. 'utf-8', 'cp1252' or 'latin-1'.")):
        ds.DatasetSpec(dict(detected.ref, encoding="klingon"), detected.schema)
    parquet = tmp_path / "d.parquet"
    pytest.importorskip("pyarrow")
    detected.load().to_parquet(parquet)
    with pytest.raises(ValueError, match="has no delimiter or text encoding to choose"):
        ds.load_table(parquet, encoding="utf-8")


def test_dataset_spec_validates_its_fields():
    _, spec = bundled("iris")
    with pytest.raises(ValueError, match=r"ref must be .* given: \{'kind': 'url'\}"):
        ds.DatasetSpec({"kind": "url"}, spec.schema)
    with pytest.raises(ValueError, match=r"eval_fraction must be a number in \[0, 1\), given: 1\.5"):
        ds.DatasetSpec(spec.ref, spec.schema, eval_fraction=1.5)
    with pytest.raises(ValueError, match=r"numeric_missing must be one of .* given: 'median'"):
        ds.DatasetSpec(spec.ref, spec.schema, numeric_missing="median")


def test_task_info_known_answers():
    df, spec = bundled("penguins")
    info = ds.task_info(df, spec)
    assert info["task"] == "classification" and info["n_classes"] == 3
    assert info["label_vocabulary"] == ["Adelie", "Chinstrap", "Gentoo"]
    assert info["categorical_features"] == ["island", "sex"]
    assert info["categorical_vocabularies"]["sex"] == ["<missing>", "female", "male"]
    train, _ = ds.split(df, spec)
    assert info["numeric_stats"]["body_mass_g"]["mean"] == pytest.approx(train["body_mass_g"].mean())
    json.dumps(info)  # JSON-serialisable: it travels in run.json and params
    digits, dspec = bundled("digits")
    assert ds.task_info(digits, dspec)["label_vocabulary"] == [str(i) for i in range(10)]
    labels = pd.Series([2, 10, 1, 10, 2])
    assert data_spec._sorted_classes(labels) == ["1", "2", "10"]  # natural order, not "10" < "2"


def test_summary_per_column_stats():
    df, _ = bundled("penguins")
    s = ds.summary(df)
    assert s.loc["bill_length_mm", "missing"] == 2
    assert s.loc["species", "top"] == "Adelie" and s.loc["species", "top_freq"] == 152
    assert s.loc["body_mass_g", "max"] == 6300.0 and np.isnan(s.loc["island", "mean"])


# ------------------------------------------------------------------------------- input_fns


def test_make_input_fns_types_and_label_encoding():
    df, spec = bundled("penguins")
    fns = ds.make_input_fns(spec, df, batch_size=16, shuffle_seed=0)
    features, labels = next(iter(fns.train()))
    assert labels.dtype.is_floating_point is False and labels.shape == (16,)
    assert int(labels.max()) < 3
    assert str(features["bill_length_mm"].dtype) == "torch.float32"
    assert not features["bill_length_mm"].isnan().any()  # missing numbers filled with the mean
    assert features["island"].dtype == object and set(features["island"]) <= {"Biscoe", "Dream", "Torgersen"}
    eval_rows = sum(len(batch[1]) for batch in fns.eval())
    assert eval_rows == fns.info["n_eval"] == 69
    predict_rows = sum(len(b["island"]) for b in fns.predict())
    assert predict_rows == len(df)


def test_train_shuffle_is_seeded():
    df, spec = bundled("iris")
    first = [next(iter(ds.make_input_fns(spec, df, batch_size=8, shuffle_seed=3).train()))[1].tolist()
             for _ in range(2)]
    assert first[0] == first[1]


def test_regression_labels_float_and_drop_missing():
    df, spec = bundled("diabetes")
    fns = ds.make_input_fns(spec, df, batch_size=4)
    _, labels = next(iter(fns.eval()))
    assert str(labels.dtype) == "torch.float32"
    pen, pspec = bundled("penguins")
    drop = ds.DatasetSpec(pspec.ref, pspec.schema, numeric_missing="drop")
    fns = ds.make_input_fns(drop, pen, batch_size=500, num_epochs=1)
    n_train = len(next(iter(fns.train()))[1])
    assert n_train == len(ds.split(pen, drop)[0].dropna(subset=["bill_length_mm"]))
    assert sum(len(b["island"]) for b in fns.predict()) == len(pen)  # predict never drops rows


def test_encode_labels_rejects_unknown_classes():
    info = {"task": "classification", "label": "y", "label_vocabulary": ["a", "b"]}
    assert ds.encode_labels(pd.Series(["b", "a"]), info).tolist() == [1, 0]
    with pytest.raises(ValueError, match=r"Label column 'y' has values \['c'\] that are not in the label vocabulary"):
        ds.encode_labels(pd.Series(["a", "c"]), info)


def test_predict_on_new_data_without_label_reuses_training_info():
    df, spec = bundled("iris")
    info = ds.task_info(df, spec)
    unlabeled = df.drop(columns=["species"]).iloc[:10]
    fns = ds.make_input_fns(spec, unlabeled, batch_size=4, info=info)
    assert fns.info is not info and fns.info == info
    assert sum(len(b["petal_width_cm"]) for b in fns.predict()) == 10
    with pytest.raises(ValueError, match=r"The data has no column\(s\) \['petal_width_cm'\] that the model was built with"):
        ds.make_predict_input_fn(spec, unlabeled.drop(columns=["petal_width_cm"]), info)


def test_prediction_spec_keeps_training_roles_and_drops_what_the_model_does_not_read():
    df, spec = bundled("iris")
    new = df.drop(columns=["species"]).head(5)
    ref = {"kind": "file", "path": "/data/new.csv"}
    predict_spec = ds.prediction_spec(spec, ref, new)
    assert predict_spec.ref == ref and predict_spec.schema.label is None
    assert predict_spec.schema.features == spec.schema.features
    assert ds.validate(new, predict_spec.schema, action="predict") == []
    with pytest.raises(ValueError, match=r"The data lacks the feature column\(s\) \['sepal_length_cm'\] the model "
                                         r"was trained on \(its columns: \['sepal_width_cm'"):
        ds.prediction_spec(spec, ref, new.drop(columns=["sepal_length_cm"]))


def test_validate_for_predict_needs_the_features_only():
    df, spec = bundled("iris")
    assert ds.validate(df.drop(columns=["species"]), spec.schema, action="predict") == []
    assert ds.validate(df.drop(columns=["petal_width_cm"]), spec.schema, action="predict") == [
        "The data lacks the feature column(s) ['petal_width_cm'] the model reads (columns: "
        "['sepal_length_cm', 'sepal_width_cm', 'petal_length_cm', 'species']). Predict on a file that has them."]
    assert "Infer the schema again" in ds.validate(df.drop(columns=["species"]), spec.schema, action="train")[0]


def test_predict_input_fns_ignore_missing_and_unseen_labels():
    """A predict run never reads labels: blanks or classes the model never saw do not stop it."""
    df, spec = bundled("iris")
    info = ds.task_info(df, spec)
    new = df.head(6).copy()
    new.loc[new.index[0], "species"] = None
    new.loc[new.index[1], "species"] = "Iris-unseen"
    with pytest.raises(ValueError, match="not in the label vocabulary"):
        ds.make_input_fns(spec, new, batch_size=4, info=info)
    fns = ds.make_input_fns(spec, new, batch_size=4, info=info, with_labels=False)
    assert sum(len(b["petal_width_cm"]) for b in fns.predict()) == 6


def test_rows_without_a_label_can_be_left_out_of_training_and_evaluation():
    df, spec = bundled("iris")
    df = df.copy()
    df.loc[[0, 60, 120], "species"] = None
    assert "missing values in 3 of 150 rows" in ds.validate(df, spec.schema)[0]
    assert ds.validate(df, spec.schema, label_missing="drop") == []
    dropping = ds.DatasetSpec(spec.ref, spec.schema, label_missing="drop")
    assert ds.DatasetSpec.from_dict(dropping.to_dict()) == dropping
    assert dropping.fingerprint() != spec.fingerprint()
    fns = ds.make_input_fns(dropping, df, batch_size=200, num_epochs=1)
    (_, train_y), = list(fns.train())
    (_, eval_y), = list(fns.eval())
    assert len(train_y) + len(eval_y) == 147  # the 3 unlabelled rows are left out
    assert sum(len(b["sepal_length_cm"]) for b in fns.predict()) == 150  # and still predicted
    with pytest.raises(ValueError, match="label_missing must be one of"):
        ds.DatasetSpec(spec.ref, spec.schema, label_missing="impute")
