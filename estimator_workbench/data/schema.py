"""Column roles and types of a dataset: ``Schema`` (inferred, editable), ``validate`` (no feature,
one-class label, NaN labels, ...) and ``summary``. Plain pandas, no torch."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from estimator_workbench.data.choices import (
    CATEGORICAL,
    CATEGORICAL_MISSING,
    DATE,
    DTYPES,
    FEATURE,
    IGNORE,
    LABEL,
    LABEL_MISSING,
    NUMERIC,
    NUMERIC_MISSING,
    ROLES,
    WEIGHT,
)
from estimator_workbench.data.profile import is_date_column, parse_dates

__all__ = ['CATEGORICAL', 'CATEGORICAL_MISSING', 'DATE', 'DTYPES', 'FEATURE', 'IGNORE', 'LABEL', 'LABEL_MISSING', 'MISSING_TOKEN', 'NUMERIC', 'NUMERIC_MISSING', 'RESERVED_COLUMN_NAMES', 'ROLES', 'SUPERVISED_ACTIONS', 'WEIGHT', 'ColumnSchema', 'Schema', 'infer_schema', 'summary', 'validate']


MISSING_TOKEN = "<missing>"


# Column names the workbench uses for its own keys (the label key fed to the model).
RESERVED_COLUMN_NAMES = ("__label__",)


SUPERVISED_ACTIONS = ("train", "evaluate", "train_and_evaluate")


_LABEL_NAMES = ("label", "labels", "target", "targets", "species", "class", "y", "outcome")


_WEIGHT_NAMES = ("sample_weight", "example_weight", "weight_column")


_ID_NAMES = ("id", "index", "row_id", "rowid", "uuid", "key", "unnamed: 0")


# A numeric label with at most this many distinct integer values is taken as class ids.
_MAX_INT_CLASSES = 20


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
    values = values[np.isfinite(values.to_numpy(dtype=float))]  # inf is refused by validate, not here
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
    * feature: the rest; numeric if the values are numbers, a date if they are datetimes or
      date strings (``2012-01-01``; even when every value is unique), otherwise categorical.
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
        if not numeric and n_missing < n and is_date_column(s):
            columns.append(ColumnSchema(name, FEATURE, DATE, n_missing))
            continue
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
    reserved = [str(c) for c in df.columns if str(c) in RESERVED_COLUMN_NAMES]
    if reserved:
        errors.append(f"Column {reserved[0]!r} has a name the workbench reserves for the label it "
                      "feeds the model. Rename that column in the data file (e.g. to "
                      f"{reserved[0].strip('_') or 'label'!r}) and load it again.")
    if action in SUPERVISED_ACTIONS and len(df) < 2:
        errors.append(f"The dataset has {len(df)} row(s); the action {action!r} needs at least 2 "
                      "rows (and more to learn anything). Add rows.")
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
        if c.role in (FEATURE, LABEL, WEIGHT) and _check_numeric(df, c.name):
            n_inf = int(np.isinf(df[c.name].to_numpy(dtype=float)).sum())
            if n_inf:
                row = int(np.flatnonzero(np.isinf(df[c.name].to_numpy(dtype=float)))[0])
                errors.append(f"Column {c.name!r} ({c.role}) has {n_inf} infinite value(s) (e.g. "
                              f"row {row}: {float(df[c.name].iloc[row])}). Replace them with numbers or "
                              "leave those rows out; infinities make the loss NaN.")
        if c.role == FEATURE and c.dtype == DATE and df[c.name].notna().any():
            bad = df[c.name].notna() & parse_dates(df[c.name]).isna()
            if bad.any():
                errors.append(f"Column {c.name!r} is typed date but {int(bad.sum())} value(s) are not dates "
                              f"(e.g. {df[c.name][bad].iloc[0]!r}). Set its type to 'categorical', or fix "
                              "those values.")
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
            if len(s) and n_nan == len(s):
                errors.append(f"Label column {label!r} has no values: all {len(s)} rows are "
                              "missing. Choose the column that holds the label.")
            elif n_nan and label_missing != "drop":
                rows = np.flatnonzero(s.isna().to_numpy())[:5].tolist()
                errors.append(
                    f"Label column {label!r} has missing values in {n_nan} of {len(s)} rows "
                    f"(e.g. rows {rows}). Leave those rows out (set 'Rows without a label' to "
                    f"'drop' on the Data page, or --label-missing drop on the command line, or "
                    f"df.dropna(subset=[{label!r}])) or choose another label."
                )
            classes = s.dropna().unique()
            n_rows = int(s.notna().sum())
            if n_rows < 2 or n_nan == len(s):
                pass  # the row count / empty label is the reason, said above
            elif len(classes) < 2:
                what = f"only one class ({classes[0]!r})" if len(classes) else "no values"
                errors.append(f"Label column {label!r} has {what}; a model needs at least two "
                              "distinct label values. Choose another label or add rows.")
            elif schema.column(label).dtype == CATEGORICAL and len(classes) == n_rows:
                errors.append(f"Label column {label!r} has one row per class ({n_rows} rows, "
                              f"{len(classes)} classes): nothing to learn per class, it looks like an "
                              "identifier. Choose the column to predict as label, or type it "
                              "'numeric' for regression.")
            if schema.column(label).dtype == DATE:
                errors.append(f"Label column {label!r} is typed date; a label is a class ('categorical') "
                              "or a quantity ('numeric'). Change its type, or choose another label.")
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
