"""Understanding a dataset before training: per-column distributions and missing values, date
columns (detected, expanded into year / month / day-of-week features), high-cardinality text
columns, and a label that does not fit the chosen template's task. Plain pandas/numpy, no torch.

Example:
    >>> df = pd.DataFrame({"date": ["2012-01-01", "2012-01-02"], "t": [1.5, 2.0]})
    >>> is_date_column(df["date"]), is_date_column(df["t"])
    (True, False)
    >>> expand_date(df["date"], "date").columns.tolist()
    ['date_year', 'date_month', 'date_dayofweek']
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

from estimator_workbench.data.choices import DATE_ENCODINGS, TEXT_ENCODINGS

__all__ = ["DATE_ENCODINGS", "DATE_PARTS", "HIGH_CARDINALITY", "TEXT_ENCODINGS", "column_profile",
           "date_feature_names", "date_granularity", "distribution_table", "encoding_note", "expand_date", "high_cardinality",
           "is_date_column", "label_identifier_warning", "label_task_warning", "parse_dates",
           "source_format_note", "template_task"]


#: The features a date column expands into (suffixes of ``<column>_``).
DATE_PARTS = ("year", "month", "dayofweek")

#: A categorical feature with more distinct values than this is flagged (a one-hot input of
#: hundreds of columns, most values seen once: an identifier more than a category).
HIGH_CARDINALITY = 50

# ISO dates (2012-01-01, 2012/1/1, with an optional time) and day-first/month-first ones
# (01/31/2012, 31.01.2012). Plain numbers ("2012") are never dates.
_DATE_TEXT = re.compile(r"^\s*(\d{4}[-/.]\d{1,2}[-/.]\d{1,2}|\d{1,2}[-/.]\d{1,2}[-/.]\d{2,4})"
                        r"([ T]\d{1,2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?)?\s*$")
_DATE_SHARE = 0.95  # of the non-missing values that must parse


def source_format_note(df: pd.DataFrame) -> str | None:
    """How the data file was read, for the Data page: the detected (or given) encoding, delimiter
    and decimal mark of a CSV file (``sources.load_csv`` records them); None for other data.

    Example:
        >>> source_format_note(pd.DataFrame({"a": [1]})) is None  # not from a CSV file
        True
        >>> frame = pd.DataFrame({"a": [1]})
        >>> frame.attrs["csv_format"] = {"encoding": "cp1252", "delimiter": ";", "decimal": ","}
        >>> source_format_note(frame)
        "Read as cp1252 text, ';' between fields, ',' as the decimal mark."
    """
    from estimator_workbench.data.sources import csv_format

    found = csv_format(df)
    return None if found is None else f"Read as {found.describe()}."


def parse_dates(values: pd.Series) -> pd.Series:
    """``values`` as datetime64 (naive; NaT where a value does not parse)."""
    if pd.api.types.is_datetime64_any_dtype(values):
        out = values
    else:
        text = values.astype("string")
        iso = bool(text.str.match(r"^\s*\d{4}").fillna(True).all())
        # ISO dates parse in one vectorised pass; others value by value (month first unless the
        # day cannot be a month: 31/01/2012)
        out = pd.to_datetime(text, errors="coerce", format="ISO8601" if iso else "mixed")
    if getattr(out.dt, "tz", None) is not None:
        out = out.dt.tz_localize(None)
    return out


def is_date_column(values: pd.Series) -> bool:
    """A datetime column, or text of which at least 95 % of the values are dates."""
    if pd.api.types.is_datetime64_any_dtype(values):
        return True
    if pd.api.types.is_numeric_dtype(values) or pd.api.types.is_bool_dtype(values):
        return False
    present = values.dropna()
    if not len(present):
        return False
    sample = present.iloc[:2000].astype(str)
    if sample.str.match(_DATE_TEXT).mean() < _DATE_SHARE:
        return False
    return bool(parse_dates(sample).notna().mean() >= _DATE_SHARE)


#: How finely a date column's values vary: only the year (every value a 1 January at midnight),
#: the month (every value a first of the month), or the day (or finer).
DATE_GRANULARITIES = ("year", "month", "day")


def date_granularity(values: pd.Series) -> str:
    """``'year'``, ``'month'`` or ``'day'``: the finest part in which the dates of ``values`` vary
    (issue 28 item 11: a year-only column was binned per month and expanded into a constant month
    and a meaningless day of week).

    Example:
        >>> date_granularity(pd.Series(["2010-01-01", "2011-01-01"])), date_granularity(pd.Series(["2010-03-01"]))
        ('year', 'month')
        >>> date_granularity(pd.Series(["2010-03-02", None]))
        'day'
    """
    dates = parse_dates(values).dropna()
    if not len(dates) or bool((dates != dates.dt.normalize()).any()) or bool((dates.dt.day != 1).any()):
        return "day"
    return "year" if bool((dates.dt.month == 1).all()) else "month"


def date_feature_names(name: str, granularity: str = "day") -> list[str]:
    """The numeric features a date column ``name`` expands into: year, month and day of week, less
    those its ``granularity`` keeps constant or meaningless (a year-only column: its year alone;
    a month-level one: year and month).

    Example:
        >>> date_feature_names("d"), date_feature_names("d", "year")
        (['d_year', 'd_month', 'd_dayofweek'], ['d_year'])
    """
    if granularity not in DATE_GRANULARITIES:
        raise ValueError(f"granularity must be one of {DATE_GRANULARITIES}, given: {granularity!r}.")
    parts = DATE_PARTS[:DATE_GRANULARITIES.index(granularity) + 1]
    return [f"{name}_{part}" for part in parts]


def expand_date(values: pd.Series, name: str) -> pd.DataFrame:
    """Year, month (1-12) and day of week (0 = Monday) of each value, as float64 (NaN where the
    value is missing or no date); keeps the index."""
    dates = parse_dates(values)
    parts = (dates.dt.year, dates.dt.month, dates.dt.day_of_week)
    return pd.DataFrame({col: part.astype("float64") for col, part in zip(date_feature_names(name), parts)},
                        index=values.index)


def high_cardinality(df: pd.DataFrame, columns: list[str], limit: int = HIGH_CARDINALITY) -> dict[str, int]:
    """The categorical ``columns`` of ``df`` with more than ``limit`` distinct values: name -> count."""
    counts = {c: int(df[c].nunique(dropna=True)) for c in columns if c in df.columns}
    return {c: n for c, n in counts.items() if n > limit}


def column_profile(values: pd.Series, kind: str, bins: int = 20, top: int = 10) -> dict[str, Any]:
    """What the Data page draws for one column: ``{'kind', 'missing', 'count', ...}`` plus
    ``'counts'`` and ``'edges'`` (a histogram, numeric columns and dates by month) or
    ``'categories'`` and ``'counts'`` (the ``top`` most frequent values, the rest summed as
    ``'(other)'``).

    Example:
        >>> column_profile(pd.Series([1.0, 2.0, None]), "numeric", bins=2)["missing"]
        1
    """
    missing = int(values.isna().sum())
    out: dict[str, Any] = {"kind": kind, "missing": missing, "count": int(len(values) - missing),
                           "distinct": int(values.nunique(dropna=True))}
    if kind == "numeric":
        numbers = pd.to_numeric(values, errors="coerce").to_numpy(dtype=float)
        numbers = numbers[np.isfinite(numbers)]
        counts, edges = np.histogram(numbers, bins=bins) if len(numbers) else (np.array([]), np.array([]))
        out.update(counts=counts.tolist(), edges=edges.tolist())
    elif kind == "date":
        dates = parse_dates(values).dropna()
        granularity = date_granularity(dates)
        # a year-only column per year: per month, it showed 11 empty months between its bars
        periods = dates.dt.to_period("Y" if granularity == "year" else "M").value_counts().sort_index()
        shown = "%Y" if granularity == "year" else "%Y-%m" if granularity == "month" else "%Y-%m-%d"
        out.update(categories=[str(p) for p in periods.index], counts=periods.tolist(), granularity=granularity,
                   min=dates.min().strftime(shown) if len(dates) else None,
                   max=dates.max().strftime(shown) if len(dates) else None)
    else:
        freq = values.dropna().astype(str).value_counts()
        shown = freq.iloc[:top]
        categories, counts = [str(c) for c in shown.index], shown.tolist()
        if len(freq) > top:
            categories.append(f"(other {len(freq) - top} values)")
            counts.append(int(freq.iloc[top:].sum()))
        out.update(categories=categories, counts=counts)
    return out


def distribution_table(df: pd.DataFrame, schema: Any, max_rows: int = 100_000) -> pd.DataFrame:
    """One row per column for the Data page: type, missing count and share, distinct values, the
    distribution's bar heights (``distribution``: a list, drawn as a small bar chart) and what the
    bars are (range, or the top values). Profiles at most ``max_rows`` rows (a seeded sample).

    Example:
        >>> from estimator_workbench.data.schema import infer_schema
        >>> t = distribution_table(pd.DataFrame({"x": [1.0, None, 3.0], "y": ["a", "b", "a"]}),
        ...                        infer_schema(pd.DataFrame({"x": [1.0, None, 3.0], "y": ["a", "b", "a"]})))
        >>> t[["column", "missing"]].values.tolist()
        [['x', 1], ['y', 0]]
    """
    sample = df.sample(n=max_rows, random_state=0) if len(df) > max_rows else df
    kinds = {c.name: c.dtype for c in schema.columns}
    rows = []
    for column in df.columns:
        name = str(column)
        kind = kinds.get(name, "categorical")
        profile = column_profile(sample[column], kind)
        if kind == "numeric" and profile["edges"]:
            what = f"{profile['edges'][0]:.4g} to {profile['edges'][-1]:.4g}"
        elif kind == "date" and profile["categories"]:
            per = "per year" if profile["granularity"] == "year" else "per month"
            what = f"{profile['min']} to {profile['max']}, {per}"
        else:
            what = ", ".join(profile.get("categories", [])[:5])
        rows.append({"column": name, "type": kind, "missing": int(df[column].isna().sum()),
                     "missing %": round(100 * float(df[column].isna().mean()), 1) if len(df) else 0.0,
                     "distinct": int(df[column].nunique(dropna=True)),
                     "distribution": [int(c) for c in profile["counts"]], "values": what})
    return pd.DataFrame(rows, columns=["column", "type", "missing", "missing %", "distinct", "distribution",
                                       "values"])


_TASK_CALL = re.compile(r"require_task\([^)]*[\"'](classification|regression)[\"']")


def template_task(name: str, code: str) -> str | None:
    """The task a template is written for: ``'classification'``, ``'regression'`` or None (either,
    or unknown). Read from the code's ``require_task(..., 'classification', ...)`` call (the canned
    templates), else from the name (``mlp_classifier``, ``DNNRegressor``, ...)."""
    found = set(_TASK_CALL.findall(code or ""))
    if len(found) == 1:
        return found.pop()
    lname = (name or "").lower()
    if "classifier" in lname:
        return "classification"
    if "regressor" in lname or "regression" in lname:
        return "regression"
    return None


def label_task_warning(template_name: str, template_code: str, label: str | None, label_dtype: str | None,
                       values: pd.Series | None) -> str | None:
    """Why the template does not fit the label, or None: a regression template on a class label (a
    categorical label, or a numeric one with a few integer values), a classification template on
    a continuous label.

    Example:
        >>> label_task_warning("mlp_regressor", "", "species", "categorical", pd.Series(["a", "b"]))[:40]
        "Template 'mlp_regressor' is a regression"
    """
    wanted = template_task(template_name, template_code)
    if wanted is None or label is None or label_dtype is None:
        return None
    present = values.dropna() if values is not None else pd.Series(dtype=float)
    numeric = pd.api.types.is_numeric_dtype(present) and not pd.api.types.is_bool_dtype(present)
    n_distinct = int(present.nunique())
    integral = numeric and len(present) and bool(np.all(np.mod(present.to_numpy(dtype=float), 1) == 0))
    if wanted == "regression":
        if label_dtype == "categorical":
            return (f"Template {template_name!r} is a regression model, but the label {label!r} is "
                    f"categorical ({n_distinct} classes): it would fit the class numbers as if they were "
                    "quantities. Choose a classifier template, or type the label 'numeric' on the Data "
                    "page if it really is a quantity.")
        if integral and n_distinct <= 10:
            return (f"Template {template_name!r} is a regression model, but the label {label!r} has only "
                    f"{n_distinct} distinct integer values: they look like classes. Type the label "
                    "'categorical' on the Data page and choose a classifier template, or keep going if "
                    "these are counts.")
    elif wanted == "classification":
        if label_dtype == "numeric":
            what = "continuous values" if not integral else f"{n_distinct} distinct numbers"
            return (f"Template {template_name!r} is a classification model, but the label {label!r} is "
                    f"numeric ({what}): a regression task. Choose a regressor template, or type the "
                    "label 'categorical' on the Data page if its values are classes.")
        if numeric and not integral:
            return (f"Template {template_name!r} is a classification model, but the label {label!r} holds "
                    f"continuous numbers ({n_distinct} distinct values), each of which would become a "
                    "class. Type the label 'numeric' and choose a regressor template.")
    return None


def label_identifier_warning(label: str | None, values: pd.Series | None) -> str | None:
    """Why a categorical label looks like an identifier rather than a class, or None.

    A label whose classes are more than half its rows and over 20 (a customer id, an order number)
    cannot be learnt: most classes have one row, so the model never sees them twice.

    Example:
        >>> label_identifier_warning("customer", pd.Series([f"c{i}" for i in range(100)]))[:45]
        "The label 'customer' has 100 distinct values "
    """
    if label is None or values is None:
        return None
    present = values.dropna()
    n_distinct = int(present.nunique())
    if n_distinct <= 20 or n_distinct * 2 <= len(present):
        return None
    return (f"The label {label!r} has {n_distinct:,} distinct values in {len(present):,} rows: it looks like "
            "an identifier, not a class (most classes would have a single row, which a model cannot "
            "learn). Choose another label column, or type it 'numeric' if it is a quantity.")


def encoding_note(name: str, encoding: str, kind: str, values: pd.Series | None = None) -> str:
    """A sentence for the Data page on what becomes of column ``name`` (``values``: the column, for
    a date column's granularity)."""
    if kind == "date":
        if encoding == "ignore":
            return f"{name!r} is a date: left out of the features (dates are not numbers a model can read)."
        granularity = "day" if values is None else date_granularity(values)
        only = {"year": " (its values are years only)", "month": " (its values are months only)"}.get(granularity, "")
        return f"{name!r} is a date: expanded into {', '.join(date_feature_names(name, granularity))}{only}."
    return {"hash": f"{name!r}: hashed into buckets (unseen values still get a bucket).",
            "embedding": f"{name!r}: looked up in its vocabulary and embedded (a dense vector per value).",
            "ignore": f"{name!r}: left out of the features.",
            }.get(encoding, f"{name!r}: one id per value in its vocabulary.")

