"""Issue 14 items 7-8: every file of tests/data/bad/ and every bad argument gets one pinned, clear
message from the data functions (the CLI and UI call these before a run is registered)."""

from __future__ import annotations

import errno
import re
import time
from pathlib import Path

import pandas as pd
import pytest

from estimator_workbench.data import datasets as ds
from estimator_workbench.data import sources

BAD = Path(__file__).resolve().parents[1] / "data" / "bad"

# Files the loader refuses: (file, pinned message).
REFUSED_BY_LOADER = [
    ("parquet_named.csv", r"is not a CSV file: it is a Parquet file\. Rename it to \.parquet"),
    ("xlsx_named.csv", r"is not a CSV file: it is an Excel \(\.xlsx\) workbook\. Open it and save it as 'CSV UTF-8'"),
    ("gzip_named.csv", r"is not a CSV file: it is a gzip-compressed file\. Decompress it"),
    ("zip_named.csv", r"is not a CSV file: it is a zip archive\. Unzip it"),
    ("xls_named.csv", r"is not a CSV file: it is an old Excel \(\.xls\) workbook"),
    ("pdf_named.csv", r"is not a CSV file: it is a PDF document"),
    ("html_page.csv", r"is an HTML page, not a CSV file .* Download the raw CSV file"),
    ("binary_junk.csv", r"holds binary data \(NUL bytes\), not text"),
    ("utf16.csv", r"holds binary data \(NUL bytes\).*UTF-16 files: save them as UTF-8"),
    ("folder.csv", r"'.*folder\.csv' is a folder, not a file\. Give the path of a \.csv or \.parquet file inside it"),
    ("whitespace_only.csv", r"is empty \(6 bytes\)"),
    ("label_only.csv", r"has only one column \('species'\)\. A dataset needs at least one feature column"),
    ("thousands_separator.csv", r"ragged row: line 2 has 3 fields but the header has 2 \(2 such rows\)"),
    ("long_line.csv", r"could not be parsed: field larger than field limit \(131072\)"),
    ("unclosed_quote.csv", r"could not be parsed: .*EOF inside string.*Check the quoting"),
    ("zero_rows.parquet", r"Parquet file '.*zero_rows\.parquet' is empty"),
    ("truncated.parquet", r"Parquet file '.*truncated\.parquet' could not be read \(.*magic bytes"),
    # The original corpus, through load_table as well.
    ("empty.csv", r"is empty \(0 bytes\)"),
    ("ragged.csv", r"ragged row: line 4 has 4 fields but the header has 3"),
    ("duplicate_columns.csv", r"duplicate column name: 'a' \(columns 1 and 3\)"),
    ("blank_column.csv", r"blank column name at column 2"),
    ("header_only.csv", r"has a header but no data rows"),
]

# Files that load but cannot be trained on: (file, roles to set, pinned problems in order).
REFUSED_BY_VALIDATE = [
    ("one_row.csv", {}, [r"^The dataset has 1 row\(s\); the action 'train' needs at least 2 rows"]),
    ("inf_values.csv", {"x": "feature"},
     [r"^Column 'x' \(feature\) has 2 infinite value\(s\) \(e\.g\. row 1: inf\).*infinities make the loss NaN"]),
    ("inf_label.csv", {"x": "feature"}, [r"^Column 'y' \(label\) has 1 infinite value\(s\) \(e\.g\. row 1: inf\)"]),
    ("reserved_name.csv", {"x": "feature"},
     [r"^Column '__label__' has a name the workbench reserves.*Rename that column in the data file \(e\.g\. to 'label'\)"]),
    ("all_nan_label.csv", {"x": "feature"}, [r"^Label column 'y' has no values: all 3 rows are missing"]),
    ("empty_label.csv", {"x": "feature"}, [r"^Label column 'y' has no values: all 4 rows are missing"]),
    ("one_row_per_class.csv", {"x": "feature"},
     [r"^Label column 'name' has one row per class \(4 rows, 4 classes\).*looks like an identifier"]),
    ("nan_features.csv", {}, [r"^No usable feature"]),
    ("no_feature.csv", {}, [r"^No usable feature"]),
    ("one_class.csv", {}, [r"^Label column 'label' has only one class \('x'\)"]),
    ("nan_label.csv", {}, [r"^Label column 'label' has missing values in 2 of 5 rows"]),
    ("negative_weight.csv", {}, [r"^Weight column 'sample_weight' has missing or negative values"]),
]

# Realistic files that must load (and validate) with known shapes.
ACCEPTED = [
    ("bom.csv", (4, 2), ["x", "y"]),
    ("cr_only.csv", (4, 2), ["x", "y"]),
    ("crlf.csv", (4, 2), ["x", "y"]),
    ("quoted_newlines.csv", (3, 3), ["x", "note", "y"]),
    ("blank_lines.csv", (2, 2), ["x", "y"]),
    ("mixed_types.csv", (4, 2), ["x", "y"]),
    ("repeated_header.csv", (5, 2), ["x", "y"]),
    # The delimiter and the encoding are detected (they were refused before).
    ("semicolon.csv", (2, 2), ["x", "y"]),
    ("tab_separated.csv", (2, 2), ["x", "y"]),
    ("latin1.csv", (2, 3), ["name", "city", "label"]),
    ("one_column.csv", (2, 3), ["a", "b", "label"]),
]


def test_the_corpus_has_at_least_41_files():
    files = [p for p in BAD.rglob("*") if p.is_file()]
    assert len(files) >= 41, len(files)
    pinned = {f for f, _ in REFUSED_BY_LOADER} | {f for f, _, _ in REFUSED_BY_VALIDATE} | {f for f, _, _ in ACCEPTED}
    data_files = {p.name for p in BAD.iterdir() if p.suffix in (".csv", ".parquet")}
    assert data_files <= pinned, f"unpinned corpus files: {sorted(data_files - pinned)}"


@pytest.mark.parametrize("filename, pattern", REFUSED_BY_LOADER)
def test_bad_file_is_refused_with_its_pinned_message(filename, pattern):
    with pytest.raises(ValueError, match=pattern):
        ds.load_table(BAD / filename)


@pytest.mark.parametrize("filename, roles, patterns", REFUSED_BY_VALIDATE)
def test_bad_data_is_refused_before_a_run_with_the_right_reason(filename, roles, patterns):
    df = ds.load_table(BAD / filename)
    schema = ds.infer_schema(df)
    for name, role in roles.items():
        schema = schema.replace_column(name, role=role)
    problems = ds.validate(df, schema, action="train")
    assert len(problems) == len(patterns), problems
    for problem, pattern in zip(problems, patterns):
        assert re.search(pattern, problem), problem
    with pytest.raises(ValueError, match=r"The dataset cannot be used:\n- " + patterns[0].lstrip("^")):
        ds.validate(df, schema, action="train", raise_errors=True)


@pytest.mark.parametrize("filename, shape, columns", ACCEPTED)
def test_realistic_files_load(filename, shape, columns):
    df = ds.load_table(BAD / filename)
    assert df.shape == shape and list(df.columns) == columns


def test_cr_only_line_endings_give_the_same_rows_as_lf():
    lf = ds.load_csv((BAD / "cr_only.csv").read_bytes().replace(b"\r", b"\n"))
    pd.testing.assert_frame_equal(ds.load_table(BAD / "cr_only.csv"), lf)


# Argument cases: (callable, pinned message).
def _spec(**kw):
    schema = ds.Schema((ds.ColumnSchema("a", "feature", "numeric", 0), ds.ColumnSchema("b", "label", "categorical", 0)))
    return ds.DatasetSpec(kw.pop("ref", {"kind": "bundled", "name": "iris"}), schema, **kw)


def _validate_wrong_label():
    df = pd.DataFrame({"a": [1.0, 2.0], "b": ["x", "y"]})
    schema = ds.Schema((ds.ColumnSchema("a", "feature", "numeric", 0), ds.ColumnSchema("species", "label", "categorical", 0)))
    ds.validate(df, schema, raise_errors=True)


ARGUMENTS = [
    ("missing file", lambda tmp: ds.load_table(tmp / "nope.csv"), r"'.*nope\.csv' does not exist\. Check the path"),
    ("missing parquet", lambda tmp: ds.load_table(tmp / "nope.parquet"), r"does not exist\. Check the path"),
    ("directory", lambda tmp: ds.load_table(tmp), r"is a folder, not a file"),
    ("directory via load_csv", lambda tmp: ds.load_csv(tmp), r"is a folder, not a file"),
    ("no extension", lambda tmp: ds.load_table(tmp / "data"), r"Unsupported data file type '\(no extension\)'"),
    ("xlsx extension", lambda tmp: ds.load_table(tmp / "data.xlsx"), r"Unsupported data file type '\.xlsx'.*expected a \.csv or \.parquet"),
    ("zero max_bytes", lambda tmp: ds.load_csv(b"a,b\n1,2\n", max_bytes=0), r"max_bytes must be a positive number of bytes or None, got 0"),
    ("negative max_bytes", lambda tmp: ds.load_csv(b"a,b\n1,2\n", max_bytes=-5), r"max_bytes must be a positive number.*got -5"),
    ("tiny max_bytes", lambda tmp: ds.load_csv(b"a,b\n1,2\n", max_bytes=3), r"is 8 bytes, over the size limit of 3 bytes"),
    ("upload zero max_bytes", lambda tmp: ds.save_upload(tmp, "a.csv", b"a,b\n1,2\n", max_bytes=0), r"max_bytes must be a positive"),
    ("upload wrong type", lambda tmp: ds.save_upload(tmp, "a.xlsx", b"x"), r"Unsupported upload 'a\.xlsx'"),
    ("upload no name", lambda tmp: ds.save_upload(tmp, "", b"x"), r"Unsupported upload ''"),
    ("upload parquet named csv", lambda tmp: ds.save_upload(tmp, "p.csv", (BAD / "parquet_named.csv").read_bytes()),
     r"'p\.csv' is not a CSV file: it is a Parquet file"),
    ("unknown bundled", lambda tmp: ds.bundled_path("irises"), r"Unknown bundled dataset name: 'irises'"),
    ("bundled path traversal", lambda tmp: ds.bundled_path("../iris"), r"Unknown bundled dataset name: '\.\./iris'"),
    ("bundled empty", lambda tmp: ds.bundled_path(""), r"Unknown bundled dataset name: ''"),
    ("eval_fraction 1", lambda tmp: _spec(eval_fraction=1.0), r"eval_fraction must be a number in \[0, 1\), given: 1\.0"),
    ("eval_fraction negative", lambda tmp: _spec(eval_fraction=-0.1), r"eval_fraction must be .* given: -0\.1"),
    ("eval_fraction huge", lambda tmp: _spec(eval_fraction=1e9), r"eval_fraction must be .* given: 1000000000\.0"),
    ("eval_fraction nan", lambda tmp: _spec(eval_fraction=float("nan")), r"eval_fraction must be .* given: nan"),
    ("eval_fraction text", lambda tmp: _spec(eval_fraction="0.2"), r"eval_fraction must be .* given: '0\.2'"),
    ("seed float", lambda tmp: _spec(seed=1.5), r"seed must be an int, given: 1\.5"),
    ("seed bool", lambda tmp: _spec(seed=True), r"seed must be an int, given: True"),
    ("bad ref", lambda tmp: _spec(ref={"kind": "url", "path": "x"}), r"DatasetSpec ref must be"),
    ("bad label_missing", lambda tmp: _spec(label_missing="ignore"), r"label_missing must be one of \('error', 'drop'\)"),
    ("bad numeric_missing", lambda tmp: _spec(numeric_missing="median"), r"numeric_missing must be one of"),
    ("wrong label name", lambda tmp: _validate_wrong_label(), r"Schema columns \['species'\] are not in the data"),
]


@pytest.mark.parametrize("case, call, pattern", ARGUMENTS, ids=[a[0] for a in ARGUMENTS])
def test_bad_argument_gets_its_pinned_message(tmp_path, case, call, pattern):
    with pytest.raises(ValueError, match=pattern):
        call(tmp_path)


def test_argument_and_file_cases_add_up_to_at_least_47():
    assert len(REFUSED_BY_LOADER) + len(REFUSED_BY_VALIDATE) + len(ARGUMENTS) >= 47


def test_parquet_row_bomb_is_refused_from_the_footer(tmp_path, monkeypatch):
    path = tmp_path / "bomb.parquet"
    pd.DataFrame({"a": [0.0] * 2001, "b": [1] * 2001}).to_parquet(path)
    monkeypatch.setattr(sources, "MAX_ROWS", 2000)
    monkeypatch.setattr(pd, "read_parquet", lambda *a, **k: pytest.fail("read the table"))
    with pytest.raises(ValueError, match=r"has 2,001 rows, over the limit of 2,000\. Load a sample of the rows"):
        ds.load_table(path)


def test_arrow_memory_error_becomes_a_clear_message(tmp_path, monkeypatch):
    import pyarrow as pa

    path = tmp_path / "ok.parquet"
    pd.DataFrame({"a": [1.0, 2.0], "b": ["x", "y"]}).to_parquet(path)

    def out_of_memory(*a, **k):
        raise pa.ArrowMemoryError("realloc of size 4294967296 failed")

    monkeypatch.setattr(pd, "read_parquet", out_of_memory)
    with pytest.raises(ValueError, match=r"is too large to load in memory\. Load a sample of the rows"):
        ds.load_table(path)


def test_save_upload_on_a_full_disk_says_so_and_leaves_no_file(tmp_path, monkeypatch):
    def full(self, data):
        with open(self, "wb") as f:
            f.write(data[:3])  # a partial write, then the disk fills up
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Path, "write_bytes", full)
    with pytest.raises(ValueError, match=r"Upload 'a\.csv' was not saved: the disk is full .* Free some space"):
        ds.save_upload(tmp_path, "a.csv", b"a,b\n1,2\n3,4\n")
    assert [p.name for p in (tmp_path / "datasets").iterdir()] == []


def test_bad_files_are_refused_fast():
    started = time.monotonic()
    for filename, _ in REFUSED_BY_LOADER:
        with pytest.raises(ValueError):
            ds.load_table(BAD / filename)
    assert time.monotonic() - started < 2.0
