"""Datasets for the workbench: load, infer and edit a schema, validate, split, and make input_fns.

Everything here is plain pandas/numpy (no streamlit, no torch at import time), so the UI process can
preview and validate a dataset without touching model code. ``make_input_fns`` imports the engine
lazily; it is the one place where a dataset turns into ``input_fn``s, used identically by the
pre-flight check and the runner.

The flow is::

    df = load_table(path)                      # clear ValueError for every bad file
    schema = infer_schema(df)                  # roles and types, editable
    schema = schema.replace_column("island", role="ignore")
    validate(df, schema, raise_errors=True)    # no feature, one-class label, NaN labels, ...
    spec = DatasetSpec(ref={"kind": "file", "path": path}, schema=schema)
    fns = make_input_fns(spec, df, batch_size=32)
    estimator.train(fns.train, steps=100)
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import io
import json
import math
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple

import numpy as np
import pandas as pd

__all__ = [
    "CATEGORICAL",
    "DEFAULT_MAX_BYTES",
    "DTYPES",
    "MAX_COLUMNS",
    "MISSING_TOKEN",
    "NUMERIC",
    "ROLES",
    "SAMPLE_DATA_DIR",
    "SUPERVISED_ACTIONS",
    "ColumnSchema",
    "DatasetInfo",
    "DatasetSpec",
    "InputFns",
    "Schema",
    "bundled_path",
    "encode_labels",
    "infer_schema",
    "list_bundled",
    "load_csv",
    "load_table",
    "make_input_fns",
    "make_predict_input_fn",
    "prediction_spec",
    "prepare_features",
    "save_upload",
    "split",
    "summary",
    "task_info",
    "training_rows",
    "validate",
]

SAMPLE_DATA_DIR = Path(__file__).resolve().parent.parent / "sample_data"
DEFAULT_MAX_BYTES = 200 * 1024 * 1024  # Streamlit's default upload limit
# A wide header is a CSV bomb: 32 MB of "c0,c1,..." with one row took 107 s and 4 GB of memory
# in pandas. 10,000 columns is far beyond what the forms and the input pipeline are built for.
MAX_COLUMNS = 10_000
MISSING_TOKEN = "<missing>"
_TARGET = "__label__"

FEATURE, LABEL, IGNORE, WEIGHT = "feature", "label", "ignore", "weight"
ROLES = (FEATURE, LABEL, IGNORE, WEIGHT)
NUMERIC, CATEGORICAL = "numeric", "categorical"
DTYPES = (NUMERIC, CATEGORICAL)
SUPERVISED_ACTIONS = ("train", "evaluate", "train_and_evaluate")
NUMERIC_MISSING = ("mean", "zero", "drop")
CATEGORICAL_MISSING = ("missing-token",)
LABEL_MISSING = ("error", "drop")

_LABEL_NAMES = ("label", "labels", "target", "targets", "species", "class", "y", "outcome")
_WEIGHT_NAMES = ("sample_weight", "example_weight", "weight_column")
_ID_NAMES = ("id", "index", "row_id", "rowid", "uuid", "key", "unnamed: 0")
# A numeric label with at most this many distinct integer values is taken as class ids.
_MAX_INT_CLASSES = 20

_BUNDLED: dict[str, tuple[str, str]] = {
    # name: (task, description)
    "iris": ("classification", "Fisher's iris flowers: 4 measurements, 3 species (150 rows)."),
    "wine": ("classification", "Wine chemistry: 13 measurements, 3 cultivars (178 rows)."),
    "breast_cancer": ("classification", "Breast cancer Wisconsin: 30 cell features, malignant/benign (569 rows)."),
    "diabetes": ("regression", "Diabetes progression: 10 baseline variables, numeric target (442 rows)."),
    "digits": ("classification", "Handwritten digits: 8x8 images as 64 pixel columns, labels 0-9 (1797 rows)."),
    "penguins": ("classification", "Palmer penguins: numeric and categorical columns with missing values, 3 species (344 rows)."),
}


# ---------------------------------------------------------------------------------------------
# Bundled datasets


@dataclasses.dataclass(frozen=True)
class DatasetInfo:
    """A bundled dataset, as listed in the UI.

    Example:
        >>> [d.name for d in list_bundled()][:2]
        ['breast_cancer', 'diabetes']
    """

    name: str
    path: Path
    task: str
    description: str
    size_bytes: int
    n_rows: int
    columns: tuple[str, ...]


def list_bundled() -> list[DatasetInfo]:
    """The CSVs in ``sample_data/``, sorted by name (header and row count read, not the data)."""
    infos = []
    for path in sorted(SAMPLE_DATA_DIR.glob("*.csv")):
        with open(path, encoding="utf-8") as f:
            header = next(csv.reader(f), [])
            n_rows = sum(1 for line in f if line.strip())
        task, description = _BUNDLED.get(path.stem, ("unknown", ""))
        infos.append(DatasetInfo(path.stem, path, task, description, path.stat().st_size,
                                 n_rows, tuple(header)))
    return infos


def bundled_path(name: str) -> Path:
    """Path of the bundled dataset ``name``; ValueError listing the known names otherwise."""
    path = SAMPLE_DATA_DIR / f"{name}.csv"
    if not re.fullmatch(r"[A-Za-z0-9_\-]+", str(name)) or not path.is_file():
        known = sorted(p.stem for p in SAMPLE_DATA_DIR.glob("*.csv"))
        raise ValueError(f"Unknown bundled dataset name: {name!r}. Choose one of {known}.")
    return path


# ---------------------------------------------------------------------------------------------
# Loading


def _describe_source(source: Any) -> str:
    if isinstance(source, (str, os.PathLike)):
        return repr(os.fspath(source))
    name = getattr(source, "name", None)
    return repr(name) if isinstance(name, str) else "(uploaded data)"


def _source_size(source: Any) -> int:
    """Size in bytes without reading the content."""
    if isinstance(source, (str, os.PathLike)):
        return os.path.getsize(source)
    if isinstance(source, (bytes, bytearray, memoryview)):
        return len(source)
    size = getattr(source, "size", None)  # Streamlit's UploadedFile
    if isinstance(size, int):
        return size
    if hasattr(source, "getbuffer"):
        return source.getbuffer().nbytes
    pos = source.tell()
    end = source.seek(0, io.SEEK_END)
    source.seek(pos)
    return end - pos


def _read_bytes(source: Any) -> bytes:
    if isinstance(source, (str, os.PathLike)):
        return Path(source).read_bytes()
    if isinstance(source, (bytes, bytearray, memoryview)):
        return bytes(source)
    data = source.read()
    return data.encode("utf-8") if isinstance(data, str) else bytes(data)


def _fmt_size(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 100_000 else f"{n} bytes"


def _check_size(source: Any, where: str, max_bytes: int | None) -> int:
    try:
        size = _source_size(source)
    except FileNotFoundError:
        raise ValueError(f"Data file {where} does not exist. Check the path.") from None
    if max_bytes is not None and size > max_bytes:
        raise ValueError(
            f"Data file {where} is {_fmt_size(size)}, over the size limit of {_fmt_size(max_bytes)} "
            f"(max_bytes={max_bytes}). Upload a smaller sample of the rows, or raise the limit."
        )
    return size


def load_csv(path_or_buffer: str | os.PathLike | bytes | BinaryIO, max_bytes: int | None = DEFAULT_MAX_BYTES) -> pd.DataFrame:
    """Reads a UTF-8 CSV with a header row, with a clear ValueError for every malformed file.

    The size is checked before anything is read. Rejected: empty files, non-UTF-8 bytes, a header
    without rows, ragged rows (the line is named), a single column, duplicate or blank column names.
    Missing values (empty cells, ``NA``, ``NaN``, ...) become NaN.

    Args:
        path_or_buffer: a path, the raw bytes, or a binary file-like object (an upload).
        max_bytes: the size limit in bytes (None: no limit).

    Returns:
        The DataFrame (text columns as strings, numeric columns as int64/float64).

    Example:
        >>> load_csv(b"a,b\\n1,x\\n2,y\\n").shape
        (2, 2)
    """
    where = _describe_source(path_or_buffer)
    _check_size(path_or_buffer, where, max_bytes)
    raw = _read_bytes(path_or_buffer)
    if not raw.strip():
        raise ValueError(
            f"CSV file {where} is empty ({len(raw)} bytes). Provide a file with a header row and "
            "at least one data row."
        )
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        column = e.start - (raw.rfind(b"\n", 0, e.start) + 1) + 1
        raise ValueError(
            f"CSV file {where} is not valid UTF-8: byte 0x{raw[e.start]:02x} at line {line}, "
            f"column {column}. Save the file as UTF-8 (e.g. 'CSV UTF-8' in Excel, or "
            "`iconv -f latin1 -t utf-8 in.csv > out.csv`) and load it again."
        ) from None
    try:
        # The header first, alone: a bomb (a huge header) is refused before the rows are parsed.
        header = next(csv.reader(io.StringIO(text)))
        if len(header) > MAX_COLUMNS:
            raise ValueError(
                f"CSV file {where} has {len(header):,} columns, over the limit of {MAX_COLUMNS:,}. "
                "Keep the columns the model needs (or transpose the file if rows and columns are "
                "swapped).")
        # csv.reader runs in C; map(len, ...) counts the fields of every row without a Python loop.
        lengths = np.fromiter(map(len, csv.reader(io.StringIO(text))), dtype=np.int64)
    except csv.Error as e:
        raise ValueError(f"CSV file {where} could not be parsed: {e}. Check the quoting (a field "
                         "over the limit is usually an unclosed quote).") from None
    n_cols = len(header)
    if n_cols == 1:
        sep = next((s for s in (";", "\t", "|") if s in header[0]), None)
        hint = (f" The header contains {sep!r}: save the file with ',' as the separator."
                if sep else " A dataset needs at least one feature column and a label column.")
        raise ValueError(f"CSV file {where} has only one column ({header[0]!r}).{hint}")
    blank = [i + 1 for i, name in enumerate(header) if not name.strip()]
    if blank:
        raise ValueError(
            f"CSV file {where} has a blank column name at column {blank[0]} of the header "
            f"{header!r}. Give every column a name in the first row."
        )
    seen: dict[str, int] = {}
    for i, name in enumerate(header):
        if name in seen:
            raise ValueError(
                f"CSV file {where} has a duplicate column name: {name!r} (columns {seen[name] + 1} "
                f"and {i + 1}). Rename them so that every column name is unique."
            )
        seen[name] = i
    body = lengths[1:]
    if not (body > 0).any():
        raise ValueError(f"CSV file {where} has a header but no data rows. Add at least one row.")
    bad = np.flatnonzero((body != n_cols) & (body != 0))  # blank lines (0 fields) are skipped
    if bad.size:
        reader = csv.reader(io.StringIO(text))
        for row_index, row in enumerate(reader):  # noqa: B007  (error path only): find the physical line
            if row_index == bad[0] + 1:
                break
        raise ValueError(
            f"CSV file {where} has a ragged row: line {reader.line_num} has {len(row)} fields but "
            f"the header has {n_cols} ({int(bad.size)} such rows). Fix that line (a stray or "
            f"missing separator, or an unclosed quote) so that every row has {n_cols} fields."
        )
    return pd.read_csv(io.StringIO(text))


def load_table(path: str | os.PathLike, max_bytes: int | None = DEFAULT_MAX_BYTES) -> pd.DataFrame:
    """Loads a ``.csv`` (see ``load_csv``) or ``.parquet`` file, checked the same way.

    Parquet needs ``pyarrow``; without it the error says so and how to install it.
    """
    suffix = Path(path).suffix.lower()
    if suffix in (".csv", ".txt"):
        return load_csv(path, max_bytes=max_bytes)
    if suffix in (".parquet", ".pq"):
        where = _describe_source(path)
        _check_size(path, where, max_bytes)
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise ValueError(
                f"Reading Parquet file {where} needs the 'pyarrow' package, which is not installed. "
                "Install it with `pip install pyarrow`, or save the data as CSV."
            ) from None
        try:
            import pyarrow.parquet as pq

            width = len(pq.read_schema(path).names)  # the footer only: a bomb is refused unread
            if width > MAX_COLUMNS:
                raise ValueError(f"Parquet file {where} has {width:,} columns, over the limit of "
                                 f"{MAX_COLUMNS:,}. Keep the columns the model needs.")
            df = pd.read_parquet(path)
        except (OSError, ValueError) as e:  # pyarrow's ArrowInvalid is a ValueError
            if "over the limit" in str(e):
                raise
            raise ValueError(f"Parquet file {where} could not be read ({e}). Check that it is a "
                             "Parquet file, or save the data as CSV.") from None
        names = [str(c) for c in df.columns]
        if len(df) == 0 or df.shape[1] == 0:
            raise ValueError(f"Parquet file {where} is empty. Provide at least one row and two columns.")
        if df.shape[1] == 1:
            raise ValueError(f"Parquet file {where} has only one column ({names[0]!r}). A dataset "
                             "needs at least one feature column and a label column.")
        if len(set(names)) != len(names) or any(not n.strip() for n in names):
            raise ValueError(f"Parquet file {where} has duplicate or blank column names: {names!r}. "
                             "Rename them so that every column has a unique name.")
        df.columns = names
        return df
    raise ValueError(
        f"Unsupported data file type {suffix or '(no extension)'!r} for {os.fspath(path)!r}: "
        "expected a .csv or .parquet file."
    )


def save_upload(workspace: str | os.PathLike, filename: str, data: bytes,
                max_bytes: int | None = DEFAULT_MAX_BYTES) -> Path:
    """Checks an uploaded file and stores it as ``<workspace>/datasets/<name>``; returns the path.

    The file is parsed first (so a bad upload leaves the workspace untouched), then written to a
    temporary name and renamed. The name keeps only ``[A-Za-z0-9_.-]``; an existing file with
    different content gets a numbered name instead of being overwritten.
    """
    base = Path(str(filename)).name
    stem, suffix = os.path.splitext(base)
    stem = re.sub(r"[^A-Za-z0-9_\-]+", "_", stem).strip("._") or "dataset"
    suffix = suffix.lower()
    if suffix not in (".csv", ".parquet", ".pq"):
        raise ValueError(f"Unsupported upload {filename!r}: expected a .csv or .parquet file.")
    _check_size(data, repr(filename), max_bytes)
    folder = Path(workspace) / "datasets"
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".upload-{os.getpid()}{suffix}"  # keeps the suffix so load_table picks the reader
    tmp.write_bytes(data)
    try:
        try:
            load_table(tmp, max_bytes=max_bytes)
        except ValueError as e:
            raise ValueError(str(e).replace(repr(str(tmp)), repr(filename))) from None
        target, n = folder / f"{stem}{suffix}", 1
        while target.exists() and target.read_bytes() != data:
            n += 1
            target = folder / f"{stem}_{n}{suffix}"
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return target


# ---------------------------------------------------------------------------------------------
# Schema


@dataclasses.dataclass(frozen=True)
class ColumnSchema:
    """One column: its role (feature/label/ignore/weight), type (numeric/categorical), missing count."""

    name: str
    role: str
    dtype: str
    n_missing: int = 0

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"Column {self.name!r}: role must be one of {ROLES}, given: {self.role!r}.")
        if self.dtype not in DTYPES:
            raise ValueError(f"Column {self.name!r}: dtype must be one of {DTYPES}, given: {self.dtype!r}.")


@dataclasses.dataclass(frozen=True)
class Schema:
    """Column roles and types of a dataset; immutable, edited with ``replace_column``.

    At most one column is the label and at most one the weight: giving a column one of those roles
    moves the previous holder to ``ignore`` (never silently to ``feature``, which could leak the
    old label into the inputs).

    Example:
        >>> s = infer_schema(pd.DataFrame({"x": [1.0, 2.0, 3.0], "species": ["a", "b", "a"]}))
        >>> s.label, s.features
        ('species', ('x',))
        >>> s.replace_column("x", role="ignore").features
        ()
    """

    columns: tuple[ColumnSchema, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    def _with_role(self, role: str) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns if c.role == role)

    @property
    def label(self) -> str | None:
        found = self._with_role(LABEL)
        return found[0] if found else None

    @property
    def weight(self) -> str | None:
        found = self._with_role(WEIGHT)
        return found[0] if found else None

    @property
    def features(self) -> tuple[str, ...]:
        return self._with_role(FEATURE)

    def column(self, name: str) -> ColumnSchema:
        for c in self.columns:
            if c.name == name:
                return c
        raise ValueError(f"Unknown column name: {name!r}. The schema has columns {list(self.names)}.")

    def replace_column(self, name: str, *, role: str | None = None, dtype: str | None = None) -> Schema:
        """A copy with column ``name`` given a new ``role`` and/or ``dtype``."""
        target = self.column(name)
        changed = dataclasses.replace(target, role=role or target.role, dtype=dtype or target.dtype)
        columns = []
        for c in self.columns:
            if c.name == name:
                columns.append(changed)
            elif role in (LABEL, WEIGHT) and c.role == role:
                columns.append(dataclasses.replace(c, role=IGNORE))
            else:
                columns.append(c)
        return Schema(tuple(columns))

    def to_dict(self) -> dict[str, Any]:
        return {"columns": [dataclasses.asdict(c) for c in self.columns]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Schema:
        try:
            return cls(tuple(ColumnSchema(**c) for c in data["columns"]))
        except (KeyError, TypeError) as e:
            raise ValueError(f"Schema.from_dict: malformed schema {data!r} ({e}). Expected "
                             "{'columns': [{'name', 'role', 'dtype', 'n_missing'}, ...]}.") from None


def _is_id_like(name: str, s: pd.Series, n: int) -> bool:
    if n < 2 or s.isna().any() or s.nunique() != n:
        return False
    lname = name.strip().lower()
    if lname in _ID_NAMES or lname.endswith("_id") or lname.endswith(" id"):
        return True
    if pd.api.types.is_integer_dtype(s):
        # unique consecutive integers (0..n-1, 1..n) are a row number
        return int(s.max()) - int(s.min()) == n - 1
    return not pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s)


def _label_dtype(s: pd.Series) -> str:
    if not pd.api.types.is_numeric_dtype(s) or pd.api.types.is_bool_dtype(s):
        return CATEGORICAL
    values = s.dropna()
    if len(values) and np.all(np.mod(values.to_numpy(dtype=float), 1) == 0) \
            and values.nunique() <= min(_MAX_INT_CLASSES, max(2, len(values) // 2)):
        return CATEGORICAL
    return NUMERIC


def infer_schema(df: pd.DataFrame) -> Schema:
    """Guesses each column's role and type.

    * label: the first column named like ``label``/``target``/``species``/``class``/``y``/
      ``outcome`` (any case), else the last column not named like a weight. A label with text
      values, or with at most 20 distinct integer values, is categorical (classification);
      otherwise numeric (regression).
    * weight: a numeric column named ``sample_weight``/``example_weight``/``weight_column``.
    * ignore: id-like columns (all values unique strings, unique consecutive integers, or a name
      like ``id``/``*_id``) and columns with no value at all.
    * feature: the rest; numeric if the values are numbers, otherwise categorical (text too).
    """
    n = len(df)
    names = [str(c) for c in df.columns]
    # The last column as a fallback, skipping a trailing weight column (…, label, sample_weight).
    fallback = next((c for c in reversed(names) if c.strip().lower() not in _WEIGHT_NAMES), None)
    label = next((c for c in names if c.strip().lower() in _LABEL_NAMES), fallback)
    columns = []
    for name, col in zip(names, df.columns):
        s = df[col]
        n_missing = int(s.isna().sum())
        numeric = pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s)
        if name == label:
            columns.append(ColumnSchema(name, LABEL, _label_dtype(s), n_missing))
            continue
        dtype = NUMERIC if numeric else CATEGORICAL
        if numeric and name.strip().lower() in _WEIGHT_NAMES:
            role = WEIGHT
        elif n_missing == n or _is_id_like(name, s, n):
            role = IGNORE
        else:
            role = FEATURE
        columns.append(ColumnSchema(name, role, dtype, n_missing))
    return Schema(tuple(columns))


def _check_numeric(df: pd.DataFrame, name: str) -> bool:
    return pd.api.types.is_numeric_dtype(df[name]) and not pd.api.types.is_bool_dtype(df[name])


def validate(df: pd.DataFrame, schema: Schema, *, action: str = "train",
             raise_errors: bool = False, label_missing: str = "error") -> list[str]:
    """The problems that stop ``df`` with ``schema`` from being used for ``action``.

    Checked: schema columns missing from the data, no usable feature, no label for a supervised
    action (train/evaluate/train_and_evaluate), a label with one class or with missing values, a
    numeric-typed column that holds text, a weight column that is not numeric or has missing values.

    Args:
        df: the data.
        schema: its roles and types.
        action: the run's action; ``predict`` needs no label.
        label_missing: ``'drop'`` accepts missing label values (those rows are left out).
        raise_errors: raise one ValueError listing every problem instead of returning them.

    Returns:
        The list of problems (empty when the data can be used).
    """
    errors: list[str] = []
    if action == "predict":
        # New data to predict on has no label (nor weight) as a rule; the model reads features only.
        absent = [c for c in schema.features if c not in df.columns]
        if absent:
            errors.append(f"The data lacks the feature column(s) {absent} the model reads (columns: "
                          f"{list(map(str, df.columns))}). Predict on a file that has them.")
    else:
        absent = [c for c in schema.names if c not in df.columns]
        if absent:
            errors.append(f"Schema columns {absent} are not in the data (columns: {list(map(str, df.columns))}). "
                          "Infer the schema again for this dataset.")
    present = [c for c in schema.columns if c.name in df.columns]
    usable = [c.name for c in present if c.role == FEATURE and df[c.name].notna().any()]
    if not usable:
        errors.append("No usable feature: no column has the role 'feature' with at least one value. "
                      "Set the role of one or more columns to 'feature'.")
    for c in present:
        if c.role == FEATURE and c.dtype == NUMERIC and not _check_numeric(df, c.name):
            errors.append(f"Column {c.name!r} is typed numeric but holds non-numeric values "
                          f"(e.g. {df[c.name].dropna().iloc[0]!r}). Set its type to 'categorical'.")
    label = schema.label if schema.label in df.columns else None
    if action in SUPERVISED_ACTIONS:
        if label is None:
            errors.append(f"No label: the action {action!r} needs a column with the role 'label'. "
                          "Set the role of the column to predict to 'label'.")
        else:
            s = df[label]
            n_nan = int(s.isna().sum())
            if n_nan and label_missing != "drop":
                rows = np.flatnonzero(s.isna().to_numpy())[:5].tolist()
                errors.append(
                    f"Label column {label!r} has missing values in {n_nan} of {len(s)} rows "
                    f"(e.g. rows {rows}). Leave those rows out (set 'Rows without a label' to "
                    f"'drop', or df.dropna(subset=[{label!r}])) or choose another label."
                )
            classes = s.dropna().unique()
            if len(classes) < 2:
                what = f"only one class ({classes[0]!r})" if len(classes) else "no values"
                errors.append(f"Label column {label!r} has {what}; a model needs at least two "
                              "distinct label values. Choose another label or add rows.")
            if schema.column(label).dtype == NUMERIC and not _check_numeric(df, label):
                errors.append(f"Label column {label!r} is typed numeric (regression) but holds text. "
                              "Set its type to 'categorical'.")
    weight = schema.weight if schema.weight in df.columns else None
    if weight is not None:
        if not _check_numeric(df, weight):
            errors.append(f"Weight column {weight!r} is not numeric (dtype {df[weight].dtype}). "
                          "Choose a numeric column as weight or set its role to 'ignore'.")
        elif df[weight].isna().any() or (df[weight] < 0).any():
            errors.append(f"Weight column {weight!r} has missing or negative values. "
                          "Weights must be numbers >= 0.")
    if errors and raise_errors:
        raise ValueError("The dataset cannot be used:\n- " + "\n- ".join(errors))
    return errors


def summary(df: pd.DataFrame) -> pd.DataFrame:
    """Per-column statistics, one row per column: dtype, count, missing, unique, mean, std, min,
    max, top value and its frequency."""
    out = pd.DataFrame(index=pd.Index([str(c) for c in df.columns], name="column"))
    out["dtype"] = [str(t) for t in df.dtypes]
    out["count"] = df.notna().sum().to_numpy()
    out["missing"] = df.isna().sum().to_numpy()
    out["unique"] = df.nunique().to_numpy()
    num = df.select_dtypes(include="number").select_dtypes(exclude="bool")
    for stat in ("mean", "std", "min", "max"):
        values = getattr(num, stat)() if num.shape[1] else pd.Series(dtype=float)
        out[stat] = [float(values[c]) if c in values.index else np.nan for c in df.columns]
    tops, freqs = [], []
    for c in df.columns:
        counts = df[c].value_counts(dropna=True)
        tops.append(str(counts.index[0]) if len(counts) else None)
        freqs.append(int(counts.iloc[0]) if len(counts) else 0)
    out["top"] = tops
    out["top_freq"] = freqs
    return out


# ---------------------------------------------------------------------------------------------
# DatasetSpec, split, task info


_HASH_CACHE: dict[tuple[str, int, int], str] = {}


def _file_sha256(path: Path) -> str:
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if key not in _HASH_CACHE:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        _HASH_CACHE[key] = h.hexdigest()
    return _HASH_CACHE[key]


@dataclasses.dataclass(frozen=True)
class DatasetSpec:
    """Which data, which roles, which split and which missing-value handling a run uses.

    Args:
        ref: ``{'kind': 'bundled', 'name': 'iris'}`` or ``{'kind': 'file', 'path': '/abs/x.csv'}``.
        schema: the column roles and types.
        eval_fraction: share of rows held out for evaluation, in [0, 1).
        seed: seed of the split (and of nothing else).
        stratify: keep the class proportions in both parts (classification only).
        numeric_missing: ``'mean'`` (train mean), ``'zero'`` or ``'drop'`` (drop the rows for
            training and evaluation; prediction fills the train mean so no input row is lost).
        categorical_missing: ``'missing-token'`` (NaN becomes the category ``'<missing>'``).
        label_missing: ``'error'`` (a label with missing values stops the run, naming the rows)
            or ``'drop'`` (training and evaluation leave those rows out; prediction keeps them).

    Example:
        >>> spec = DatasetSpec({"kind": "bundled", "name": "iris"}, infer_schema(load_csv(bundled_path("iris"))))
        >>> spec.task
        'classification'
        >>> DatasetSpec.from_dict(spec.to_dict()) == spec
        True
    """

    ref: Mapping[str, Any]
    schema: Schema
    eval_fraction: float = 0.2
    seed: int = 42
    stratify: bool = True
    numeric_missing: str = "mean"
    categorical_missing: str = "missing-token"
    label_missing: str = "error"

    def __post_init__(self) -> None:
        kind = self.ref.get("kind") if isinstance(self.ref, Mapping) else None
        if kind == "bundled" and isinstance(self.ref.get("name"), str):
            pass
        elif kind == "file" and isinstance(self.ref.get("path"), str):
            pass
        else:
            raise ValueError(f"DatasetSpec ref must be {{'kind': 'bundled', 'name': str}} or "
                             f"{{'kind': 'file', 'path': str}}, given: {self.ref!r}.")
        object.__setattr__(self, "ref", dict(self.ref))
        if not (isinstance(self.eval_fraction, (int, float)) and 0 <= self.eval_fraction < 1):
            raise ValueError(f"eval_fraction must be a number in [0, 1), given: {self.eval_fraction!r}.")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise ValueError(f"seed must be an int, given: {self.seed!r}.")
        if self.numeric_missing not in NUMERIC_MISSING:
            raise ValueError(f"numeric_missing must be one of {NUMERIC_MISSING}, given: {self.numeric_missing!r}.")
        if self.categorical_missing not in CATEGORICAL_MISSING:
            raise ValueError(f"categorical_missing must be one of {CATEGORICAL_MISSING}, "
                             f"given: {self.categorical_missing!r}.")
        if self.label_missing not in LABEL_MISSING:
            raise ValueError(f"label_missing must be one of {LABEL_MISSING}, given: {self.label_missing!r}.")

    @property
    def path(self) -> Path:
        if self.ref["kind"] == "bundled":
            return bundled_path(self.ref["name"])
        return Path(self.ref["path"])

    @property
    def task(self) -> str:
        label = self.schema.label
        if label is None:
            return "none"
        return "classification" if self.schema.column(label).dtype == CATEGORICAL else "regression"

    def load(self, max_bytes: int | None = DEFAULT_MAX_BYTES) -> pd.DataFrame:
        """Reads the referenced file (``load_table``)."""
        return load_table(self.path, max_bytes=max_bytes)

    def fingerprint(self) -> str:
        """sha256 of the file content, the column roles and types, the split and the missing-value
        handling: two runs with the same fingerprint saw the same examples."""
        h = hashlib.sha256()
        h.update(_file_sha256(self.path).encode())
        h.update(json.dumps({
            "columns": [[c.name, c.role, c.dtype] for c in self.schema.columns],
            "split": [float(self.eval_fraction), self.seed, bool(self.stratify)],
            # (the label rule only when it is not the default, so earlier fingerprints still hold)
            "missing": [self.numeric_missing, self.categorical_missing]
            + ([self.label_missing] if self.label_missing != "error" else []),
        }, sort_keys=True).encode())
        return h.hexdigest()

    def to_dict(self) -> dict[str, Any]:
        return {
            "ref": dict(self.ref),
            "schema": self.schema.to_dict(),
            "split": {"eval_fraction": self.eval_fraction, "seed": self.seed, "stratify": self.stratify},
            "missing": {"numeric": self.numeric_missing, "categorical": self.categorical_missing,
                        "label": self.label_missing},
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DatasetSpec:
        if not isinstance(data, Mapping) or "ref" not in data or "schema" not in data:
            raise ValueError(f"DatasetSpec.from_dict: expected a dict with 'ref' and 'schema', given: {data!r}.")
        split_ = data.get("split", {})
        missing = data.get("missing", {})
        return cls(
            ref=data["ref"],
            schema=data["schema"] if isinstance(data["schema"], Schema) else Schema.from_dict(data["schema"]),
            eval_fraction=split_.get("eval_fraction", 0.2),
            seed=split_.get("seed", 42),
            stratify=split_.get("stratify", True),
            numeric_missing=missing.get("numeric", "mean"),
            categorical_missing=missing.get("categorical", "missing-token"),
            label_missing=missing.get("label", "error"),
        )


def split(df: pd.DataFrame, spec: DatasetSpec) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Seeded train/eval split; stratified by the label for classification when ``spec.stratify``.

    Each class with n rows puts ``round(n * eval_fraction)`` of them in eval (at most n - 1, so a
    class with two or more rows stays in train); when that rounds to no eval row at all (a tiny
    dataset), one row of the largest class goes to eval. Both parts keep the original row order
    and index.
    """
    n = len(df)
    if spec.eval_fraction == 0 or n == 0:
        return df, df.iloc[:0]
    rng = np.random.default_rng(spec.seed)
    label = spec.schema.label
    in_eval = np.zeros(n, dtype=bool)
    if spec.stratify and spec.task == "classification" and label in df.columns:
        codes, _ = pd.factorize(df[label], use_na_sentinel=True)
        classes = np.unique(codes)
        for code in classes:  # a loop over classes, not rows
            members = np.flatnonzero(codes == code)
            k = round(len(members) * spec.eval_fraction)
            k = min(k, len(members) - 1) if len(members) > 1 else k
            in_eval[rng.permutation(members)[:k]] = True
        if not in_eval.any() and n > 1:
            largest = np.flatnonzero(codes == classes[np.argmax([(codes == c).sum() for c in classes])])
            in_eval[rng.choice(largest)] = True
    else:
        k = max(1, round(n * spec.eval_fraction)) if n > 1 else 0
        in_eval[rng.permutation(n)[:k]] = True
    return df.iloc[np.flatnonzero(~in_eval)], df.iloc[np.flatnonzero(in_eval)]


def _sorted_classes(values: pd.Series) -> list[str]:
    uniq = values.dropna().unique()
    try:
        uniq = sorted(uniq)  # natural order: 2 before 10
    except TypeError:
        uniq = sorted(uniq, key=str)
    out = []
    for v in uniq:
        if isinstance(v, (float, np.floating)) and float(v).is_integer():
            v = int(v)
        out.append(str(v))
    return list(dict.fromkeys(out))


def _as_str(s: pd.Series) -> pd.Series:
    """Values as str, integral floats without '.0' (so 3.0 and '3' name the same class)."""
    if pd.api.types.is_float_dtype(s):
        arr = s.to_numpy()
        out = pd.Series(arr.astype(object), index=s.index)
        integral = np.isfinite(arr) & (np.mod(arr, 1) == 0)
        out[integral] = arr[integral].astype(np.int64).astype(str)
        out[~integral] = arr[~integral].astype(str)
        out[np.isnan(arr)] = np.nan
        return out
    return s.astype(object).where(s.isna(), s.astype(str))


def training_rows(df: pd.DataFrame, spec: DatasetSpec) -> pd.DataFrame:
    """The rows training and evaluation use: without those whose label is missing when
    ``spec.label_missing`` is ``'drop'``."""
    label = spec.schema.label
    if spec.label_missing == "drop" and label in df.columns:
        return df[df[label].notna()]
    return df


def task_info(df: pd.DataFrame, spec: DatasetSpec) -> dict[str, Any]:
    """What a model_fn needs to build its input layer and head; passed as ``params['task']``.

    Statistics (numeric mean/std, categorical vocabularies) come from the train part of the split,
    so no evaluation row leaks into the model; the label vocabulary comes from all rows.

    Returns:
        ``{'task': 'classification'|'regression'|'none', 'label', 'n_classes',
        'label_vocabulary' (class names as str, natural order), 'weight', 'feature_names',
        'numeric_features', 'categorical_features', 'numeric_stats': {name: {'mean', 'std'}},
        'categorical_vocabularies': {name: [str, ...]}, 'n_train', 'n_eval'}``. JSON-serialisable.
    """
    schema = spec.schema
    df = training_rows(df, spec)
    train_df, eval_df = split(df, spec)
    label = schema.label if schema.label in df.columns else None
    task = spec.task if label is not None else "none"
    vocab = _sorted_classes(_as_str(df[label])) if task == "classification" else None
    numeric = [c.name for c in schema.columns if c.role == FEATURE and c.dtype == NUMERIC]
    categorical = [c.name for c in schema.columns if c.role == FEATURE and c.dtype == CATEGORICAL]
    stats = {}
    for name in numeric:
        values = pd.to_numeric(train_df[name], errors="coerce").astype(float)
        mean = float(values.mean()) if values.notna().any() else 0.0
        std = float(values.std(ddof=0)) if values.notna().sum() > 1 else 0.0
        stats[name] = {"mean": mean, "std": std if math.isfinite(std) and std > 0 else 1.0}
    vocabs = {}
    for name in categorical:
        values = _as_str(train_df[name]).fillna(MISSING_TOKEN)
        vocabs[name] = sorted(set(values.tolist()))
    return {
        "task": task,
        "label": label,
        "n_classes": len(vocab) if vocab is not None else None,
        "label_vocabulary": vocab,
        "weight": schema.weight,
        "feature_names": [c.name for c in schema.columns if c.role == FEATURE],
        "numeric_features": numeric,
        "categorical_features": categorical,
        "numeric_stats": stats,
        "categorical_vocabularies": vocabs,
        "n_train": len(train_df),
        "n_eval": len(eval_df),
    }


# ---------------------------------------------------------------------------------------------
# input_fns


class InputFns(NamedTuple):
    """The three input_fns of a dataset (``eval`` is None when there is no eval part) and the
    ``task_info`` they were built with."""

    train: Callable[..., Any]
    eval: Callable[..., Any] | None
    predict: Callable[..., Any]
    info: dict[str, Any]


def prepare_features(df: pd.DataFrame, spec: DatasetSpec, info: Mapping[str, Any], *,
                     for_predict: bool = False) -> pd.DataFrame:
    """The feature (and weight) columns as the model sees them: numeric float32 with missing values
    filled (train mean or zero; ``'drop'`` drops those rows except for prediction, which fills the
    mean), categorical as str with NaN -> ``'<missing>'``. Vectorised; keeps the index."""
    numeric = list(info["numeric_features"])
    categorical = list(info["categorical_features"])
    missing = [c for c in numeric + categorical if c not in df.columns]
    if missing:
        raise ValueError(f"The data has no column(s) {missing} that the model was built with "
                         f"(columns: {list(map(str, df.columns))}). Use data with the same columns.")
    out = pd.DataFrame(index=df.index)
    if numeric:
        num = df[numeric].apply(pd.to_numeric, errors="coerce").astype(np.float64)
        if spec.numeric_missing == "drop" and not for_predict:
            num = num.dropna()
        fill = {c: (0.0 if spec.numeric_missing == "zero" else info["numeric_stats"][c]["mean"]) for c in numeric}
        out = num.fillna(fill).astype(np.float32)
    for c in categorical:
        out[c] = _as_str(df.loc[out.index, c]).fillna(MISSING_TOKEN).astype(str).to_numpy()
    weight = info.get("weight")
    if weight is not None and weight in df.columns:
        out[weight] = df.loc[out.index, weight].astype(np.float32).to_numpy()
    return out


def encode_labels(labels: pd.Series, info: Mapping[str, Any]) -> np.ndarray:
    """Labels as the model sees them: int64 class ids (index in ``label_vocabulary``) for
    classification, float32 for regression. ValueError naming unknown classes."""
    if info["task"] == "classification":
        vocab = list(info["label_vocabulary"])
        codes = pd.Index(vocab).get_indexer(_as_str(labels)).astype(np.int64)
        if (codes < 0).any():
            unknown = sorted({str(v) for v in _as_str(labels)[codes < 0]})[:5]  # NaN too
            raise ValueError(f"Label column {info['label']!r} has values {unknown} that are not in the "
                             f"label vocabulary {vocab}. Use data with the same classes.")
        return codes
    return pd.to_numeric(labels, errors="coerce").to_numpy(dtype=np.float32)


class _SeedOnly:
    """Stands in for a RunConfig whose only job is to seed the engine's shuffle."""

    def __init__(self, seed: int) -> None:
        self.tf_random_seed = seed


def _pandas_input_fn(x: pd.DataFrame, y: Any, batch_size: int, num_epochs: int | None,
                     shuffle: bool, seed: int | None) -> Callable[..., Any]:
    from estimator_engine import inputs

    x = x.reset_index(drop=True)
    if y is not None:
        y = pd.Series(y, name=_TARGET)
    # target_column only needs to differ from the feature names: a feature may be called "target".
    fn = inputs.pandas_input_fn(x, y, batch_size=batch_size, num_epochs=num_epochs,
                                shuffle=shuffle, target_column=_TARGET)
    if seed is None:
        return fn

    def seeded_input_fn(config: Any = None, input_context: Any = None) -> Any:
        # the engine seeds the shuffle from config.tf_random_seed; shuffle_seed wins over it
        return fn(config=_SeedOnly(seed), input_context=input_context)

    return seeded_input_fn


def make_input_fns(spec: DatasetSpec, df: pd.DataFrame, batch_size: int = 128,
                   num_epochs: int | None = None, shuffle_seed: int | None = None,
                   info: Mapping[str, Any] | None = None, with_labels: bool = True) -> InputFns:
    """Splits ``df`` per ``spec`` and builds the train / eval / predict ``input_fn``s.

    Used identically by the pre-flight check and the runner. Features are a dict of column ->
    batch (numeric float32 tensors, categorical numpy arrays of str); labels are int64 class ids
    (classification, via ``label_vocabulary``) or float32 (regression).

    Args:
        spec: the dataset spec.
        df: the whole dataset (``spec.load()``).
        batch_size: rows per batch.
        num_epochs: passes over the train part (None: repeat until the Estimator stops).
        shuffle_seed: seed of the train shuffling, when the engine's pandas_input_fn takes one.
        info: a ``task_info`` to reuse (e.g. the training run's, to predict on new data).
        with_labels: False for a predict run: labels are neither read nor encoded, so a label
            column with missing values or classes the model never saw does not stop it.

    Returns:
        ``InputFns(train, eval, predict, info)``; ``predict`` covers every row of ``df`` in order.
    """
    info = dict(info) if info is not None else task_info(df, spec)
    train_df, eval_df = split(training_rows(df, spec) if with_labels else df, spec)
    # predicting on new data with a training run's info: the label column may be absent
    label = info["label"] if with_labels and info["label"] in df.columns else None

    def xy(part: pd.DataFrame) -> tuple[pd.DataFrame, Any]:
        x = prepare_features(part, spec, info)
        y = encode_labels(part.loc[x.index, label], info) if label is not None else None
        return x, y

    x_train, y_train = xy(train_df)
    train = _pandas_input_fn(x_train, y_train, batch_size, num_epochs, True, shuffle_seed)
    ev = None
    if len(eval_df):
        x_eval, y_eval = xy(eval_df)
        ev = _pandas_input_fn(x_eval, y_eval, batch_size, 1, False, None)
    predict = make_predict_input_fn(spec, df, info, batch_size)
    return InputFns(train, ev, predict, info)


def prediction_spec(base: DatasetSpec, ref: Mapping[str, Any], df: pd.DataFrame) -> DatasetSpec:
    """The spec of new data ``df`` (stored at ``ref``) to predict on with a model trained on ``base``.

    The columns keep their training roles and types; those the data lacks and the model does not
    read (the label, the weight, ignored ones) are dropped. Raises ValueError naming the feature
    columns the data lacks.

    Example:
        >>> spec = prediction_spec(training_spec, {"kind": "file", "path": "new.csv"}, new_df)  # doctest: +SKIP
    """
    missing = [c for c in base.schema.features if c not in df.columns]
    if missing:
        raise ValueError(f"The data lacks the feature column(s) {missing} the model was trained on "
                         f"(its columns: {list(map(str, df.columns))}). Predict on a file that has them.")
    kept = tuple(c for c in base.schema.columns if c.name in df.columns)
    return dataclasses.replace(base, ref=dict(ref), schema=Schema(kept))


def make_predict_input_fn(spec: DatasetSpec, df: pd.DataFrame, info: Mapping[str, Any],
                          batch_size: int = 128) -> Callable[..., Any]:
    """A predict ``input_fn`` over every row of ``df`` in order (no row dropped), features only,
    encoded with a training run's ``info``."""
    x = prepare_features(df, spec, info, for_predict=True)
    return _pandas_input_fn(x, None, batch_size, 1, False, None)
