"""``DatasetSpec`` (what a run stores about its data: reference, schema, split, fingerprint),
the train/eval split, and ``task_info`` (task, classes, vocabularies) handed to a template."""

from __future__ import annotations

import codecs
import dataclasses
import hashlib
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from estimator_workbench.data.profile import (
    DATE_ENCODINGS,
    TEXT_ENCODINGS,
    date_feature_names,
    date_granularity,
    expand_date,
)
from estimator_workbench.data.schema import (
    CATEGORICAL,
    CATEGORICAL_MISSING,
    DATE,
    FEATURE,
    LABEL_MISSING,
    MISSING_TOKEN,
    NUMERIC,
    NUMERIC_MISSING,
    Schema,
)
from estimator_workbench.data.sources import DEFAULT_MAX_BYTES, bundled_path, load_table

__all__ = ['DEFAULT_HASH_BUCKETS', 'DatasetSpec', 'split', 'split_note', 'task_info', 'training_rows', 'with_date_features']


TARGET_COLUMN = "__label__"


DEFAULT_HASH_BUCKETS = 64


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
        ref: ``{'kind': 'bundled', 'name': 'iris'}`` or ``{'kind': 'file', 'path': '/abs/x.csv'}``;
            a CSV file's ref may add how to read it, ``'delimiter'`` (one character) and/or
            ``'encoding'`` (a codec name), where the analyst chose them (``read_options``);
            without them both are detected, as for refs written before they existed.
        schema: the column roles and types.
        eval_fraction: share of rows held out for evaluation, in [0, 1).
        seed: seed of the split (and of nothing else).
        stratify: keep the class proportions in both parts (classification only).
        numeric_missing: ``'mean'`` (train mean), ``'zero'`` or ``'drop'`` (drop the rows for
            training and evaluation; prediction fills the train mean so no input row is lost).
        categorical_missing: ``'missing-token'`` (NaN becomes the category ``'<missing>'``).
        label_missing: ``'error'`` (a label with missing values stops the run, naming the rows)
            or ``'drop'`` (training and evaluation leave those rows out; prediction keeps them).
        encodings: column -> how the model reads it, where not the default. A date column:
            ``'expand'`` (default: year, month, day of week as numeric features) or ``'ignore'``.
            A categorical feature: ``'vocabulary'`` (default), ``'hash'`` (``hash_buckets``
            buckets), ``'embedding'`` (vocabulary, always embedded) or ``'ignore'``.
        hash_buckets: the number of buckets of the hashed columns.

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
    encodings: Mapping[str, str] = dataclasses.field(default_factory=dict)
    hash_buckets: int = DEFAULT_HASH_BUCKETS

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
        delimiter, encoding = self.ref.get("delimiter"), self.ref.get("encoding")
        if delimiter is not None and not (isinstance(delimiter, str) and len(delimiter) == 1
                                          and delimiter not in "\r\n\"'"):
            raise ValueError(f"DatasetSpec ref's delimiter must be one character such as ',' or ';', "
                             f"given: {delimiter!r}.")
        if encoding is not None:
            try:
                codecs.lookup(encoding)
            except (LookupError, TypeError):
                raise ValueError(f"DatasetSpec ref's encoding {encoding!r} is not a known text encoding; "
                                 "use e.g. 'utf-8', 'cp1252' or 'latin-1'.") from None
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
        if not isinstance(self.encodings, Mapping):
            raise ValueError(f"encodings must be a dict of column -> encoding, given: {self.encodings!r}.")
        object.__setattr__(self, "encodings", {str(k): v for k, v in self.encodings.items()})
        for column, encoding in self.encodings.items():
            kind = self.schema.column(column).dtype if column in self.schema.names else None
            allowed = DATE_ENCODINGS if kind == DATE else TEXT_ENCODINGS if kind == CATEGORICAL else ()
            if encoding not in allowed:
                what = {DATE: "a date column", CATEGORICAL: "a categorical column"}.get(kind or "", "")
                raise ValueError(f"encodings[{column!r}] = {encoding!r} is not allowed"
                                 + (f": {what} takes one of {allowed}." if allowed else
                                    f": only date and categorical columns take an encoding, and {column!r} is "
                                    + ("numeric." if kind else "not a column of the schema.")))
        if isinstance(self.hash_buckets, bool) or not isinstance(self.hash_buckets, int) \
                or not 2 <= self.hash_buckets <= 1_000_000:
            raise ValueError(f"hash_buckets must be an integer from 2 to 1000000, given: {self.hash_buckets!r}.")

    def model_features(self, df: pd.DataFrame | None = None) -> list[str]:
        """The features the model reads, in column order: an expanded date column gives its
        derived features (three without ``df``; with it, as many as its granularity gives, as
        ``task_info`` does), a column encoded 'ignore' none (``task_info``'s ``feature_names``)."""
        out: list[str] = []
        for c in self.schema.columns:
            encoding = self.encoding(c.name) if c.role == FEATURE else "ignore"
            if encoding == "ignore":
                continue
            if c.dtype == DATE:
                known = df is not None and c.name in df.columns
                out += date_feature_names(c.name, date_granularity(df[c.name]) if known else "day")
            else:
                out.append(c.name)
        return out

    def encoding(self, column: str) -> str | None:
        """How the model reads ``column``: its entry in ``encodings``, else ``'expand'`` for a date
        column, ``'vocabulary'`` for a categorical one and None for a numeric one."""
        if column in self.encodings:
            return self.encodings[column]
        kind = self.schema.column(column).dtype
        return "expand" if kind == DATE else "vocabulary" if kind == CATEGORICAL else None

    @property
    def path(self) -> Path:
        if self.ref["kind"] == "bundled":
            return bundled_path(self.ref["name"])
        return Path(self.ref["path"])

    @property
    def read_options(self) -> dict[str, str]:
        """How the file is read where the ref says (``load_table``'s ``delimiter`` and
        ``encoding``); empty: detected.

        Example:
            >>> DatasetSpec({"kind": "file", "path": "x.csv", "delimiter": ";"}, Schema(())).read_options
            {'delimiter': ';'}
        """
        return {k: self.ref[k] for k in ("delimiter", "encoding") if self.ref.get(k) is not None}

    @property
    def task(self) -> str:
        label = self.schema.label
        if label is None:
            return "none"
        return "classification" if self.schema.column(label).dtype == CATEGORICAL else "regression"

    def load(self, max_bytes: int | None = DEFAULT_MAX_BYTES) -> pd.DataFrame:
        """Reads the referenced file (``load_table``, with the ref's ``read_options``)."""
        return load_table(self.path, max_bytes=max_bytes, **self.read_options)

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
            # (encodings only when chosen, so earlier fingerprints still hold)
            **({"encodings": self.encodings, "hash_buckets": self.hash_buckets} if self.encodings else {}),
            # (how the file is read only when chosen: another delimiter gives other examples)
            **({"read": self.read_options} if self.read_options else {}),
        }, sort_keys=True).encode())
        return h.hexdigest()

    def to_dict(self) -> dict[str, Any]:
        return {
            "ref": dict(self.ref),
            "schema": self.schema.to_dict(),
            "split": {"eval_fraction": self.eval_fraction, "seed": self.seed, "stratify": self.stratify},
            "missing": {"numeric": self.numeric_missing, "categorical": self.categorical_missing,
                        "label": self.label_missing},
            **({"encodings": dict(self.encodings), "hash_buckets": self.hash_buckets} if self.encodings else {}),
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
            encodings=data.get("encodings") or {},
            hash_buckets=data.get("hash_buckets", DEFAULT_HASH_BUCKETS),
        )


def split(df: pd.DataFrame, spec: DatasetSpec) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Seeded train/eval split; stratified by the label for classification when ``spec.stratify``.

    Each class with n rows puts ``round(n * eval_fraction)`` of them in eval (at most n - 1, so a
    class with two or more rows stays in train); when that rounds to no eval row at all (a tiny
    dataset), one row of the largest class goes to eval. Stratification never shrinks the hold-out
    silently: when it would keep fewer than half the rows a plain split holds out (many classes of
    one row each, such as an identifier taken as the label), the split is a plain seeded one, and
    ``split_note`` says so. Both parts keep the original row order and index.
    """
    in_eval, _ = _eval_rows(df, spec)
    return df.iloc[np.flatnonzero(~in_eval)], df.iloc[np.flatnonzero(in_eval)]


def split_note(df: pd.DataFrame, spec: DatasetSpec) -> str | None:
    """Why ``split`` did not stratify as asked (a sentence for the analyst), or None.

    Example:
        >>> from estimator_workbench.data.schema import infer_schema
        >>> ids = pd.DataFrame({"x": range(20), "id": [f"c{i}" for i in range(20)]})
        >>> spec = DatasetSpec({"kind": "file", "path": "ids.csv"}, infer_schema(ids), eval_fraction=0.2)
        >>> split_note(ids, spec)[:60]
        "Stratifying by 'id' would hold out 1 of 4 rows (20 of its 20"
    """
    return _eval_rows(df, spec)[1]


def _eval_rows(df: pd.DataFrame, spec: DatasetSpec) -> tuple[np.ndarray, str | None]:
    """The evaluation rows as a mask over ``df``, and the note when stratification was dropped."""
    n = len(df)
    in_eval = np.zeros(n, dtype=bool)
    if spec.eval_fraction == 0 or n == 0:
        return in_eval, None
    rng = np.random.default_rng(spec.seed)
    label = spec.schema.label
    target = max(1, round(n * spec.eval_fraction)) if n > 1 else 0
    note = None
    if spec.stratify and spec.task == "classification" and label in df.columns:
        codes, _ = pd.factorize(df[label], use_na_sentinel=True)
        classes, sizes = np.unique(codes, return_counts=True)
        for code in classes:  # a loop over classes, not rows
            members = np.flatnonzero(codes == code)
            k = round(len(members) * spec.eval_fraction)
            k = min(k, len(members) - 1) if len(members) > 1 else k
            in_eval[rng.permutation(members)[:k]] = True
        if not in_eval.any() and n > 1:
            largest = np.flatnonzero(codes == classes[np.argmax(sizes)])
            in_eval[rng.choice(largest)] = True
        held = int(in_eval.sum())
        if held * 2 >= target:
            return in_eval, None
        single = int((sizes == 1).sum())
        note = (f"Stratifying by {label!r} would hold out {held} of {target} rows ({single} of its "
                f"{len(classes)} classes have a single row, which stays in training): the split is a "
                "plain random one instead. Classes seen only in the evaluation part are new to the model.")
        in_eval[:] = False
        rng = np.random.default_rng(spec.seed)
    in_eval[rng.permutation(n)[:target]] = True
    return in_eval, note


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


def as_str(s: pd.Series) -> pd.Series:
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


def with_date_features(df: pd.DataFrame, date_features: Mapping[str, Any]) -> pd.DataFrame:
    """``df`` with the features of each expanded date column (``{column: [derived names]}``, as in
    ``task_info``'s ``date_features``) added; a copy only when something is added.

    Example:
        >>> with_date_features(pd.DataFrame({"d": ["2024-02-29"]}), {"d": ["d_year", "d_month", "d_dayofweek"]}
        ...                    ).iloc[0].tolist()
        ['2024-02-29', 2024.0, 2.0, 3.0]
    """
    todo = {name: derived for name, derived in date_features.items()
            if name in df.columns and any(d not in df.columns for d in derived)}
    if not todo:
        return df
    out = df.copy()
    for name, derived in todo.items():
        parts = expand_date(df[name], name)
        for column in derived:
            out[column] = parts[column]
    return out


def task_info(df: pd.DataFrame, spec: DatasetSpec) -> dict[str, Any]:
    """What a model_fn needs to build its input layer and head; passed as ``params['task']``.

    Statistics (numeric mean/std, categorical vocabularies) come from the train part of the split,
    so no evaluation row leaks into the model; the label vocabulary comes from all rows. A date
    column expanded per ``spec.encodings`` gives numeric features ``<name>_year``, ``<name>_month``
    and ``<name>_dayofweek`` in its place; a hashed categorical column is listed under
    ``hashed_features`` (not in the vocabularies); ignored ones are left out.

    Returns:
        ``{'task': 'classification'|'regression'|'none', 'label', 'n_classes',
        'label_vocabulary' (class names as str, natural order), 'weight', 'feature_names',
        'numeric_features', 'categorical_features', 'numeric_stats': {name: {'mean', 'std'}},
        'categorical_vocabularies': {name: [str, ...]}, 'date_features': {name: [derived, ...]},
        'hashed_features': {name: buckets}, 'embedded_features': [name, ...], 'n_train', 'n_eval'}``.
        JSON-serialisable.
    """
    schema = spec.schema
    df = training_rows(df, spec)
    label = schema.label if schema.label in df.columns else None
    task = spec.task if label is not None else "none"
    vocab = _sorted_classes(as_str(df[label])) if task == "classification" else None
    feature_names: list[str] = []
    numeric: list[str] = []
    categorical: list[str] = []
    dates: dict[str, list[str]] = {}
    hashed: dict[str, int] = {}
    embedded: list[str] = []
    for c in schema.columns:
        encoding = spec.encoding(c.name)
        if c.role != FEATURE or encoding == "ignore":
            continue
        if c.dtype == NUMERIC:
            numeric.append(c.name)
            feature_names.append(c.name)
        elif c.dtype == DATE:
            derived = date_feature_names(c.name, date_granularity(df[c.name]) if c.name in df.columns else "day")
            taken = [d for d in derived if d in df.columns]
            if taken:
                raise ValueError(f"Date column {c.name!r} expands into {derived}, but the data already has a "
                                 f"column {taken[0]!r}. Rename that column, or leave the date out.")
            dates[c.name] = derived
            numeric += derived
            feature_names += derived
        elif encoding == "hash":
            hashed[c.name] = spec.hash_buckets
            feature_names.append(c.name)
        else:
            categorical.append(c.name)
            feature_names.append(c.name)
            if encoding == "embedding":
                embedded.append(c.name)
    train_df, eval_df = split(with_date_features(df, dates), spec)
    stats = {}
    for name in numeric:
        values = pd.to_numeric(train_df[name], errors="coerce").astype(float)
        mean = float(values.mean()) if values.notna().any() else 0.0
        std = float(values.std(ddof=0)) if values.notna().sum() > 1 else 0.0
        stats[name] = {"mean": mean, "std": std if math.isfinite(std) and std > 0 else 1.0}
    vocabs = {}
    for name in categorical:
        values = as_str(train_df[name]).fillna(MISSING_TOKEN)
        vocabs[name] = sorted(set(values.tolist()))
    info: dict[str, Any] = {
        "task": task,
        "label": label,
        "n_classes": len(vocab) if vocab is not None else None,
        "label_vocabulary": vocab,
        "weight": schema.weight,
        "feature_names": feature_names,
        "numeric_features": numeric,
        "categorical_features": categorical,
        "numeric_stats": stats,
        "categorical_vocabularies": vocabs,
        "n_train": len(train_df),
        "n_eval": len(eval_df),
    }
    # (only when used, so the task info of a dataset without them reads as before)
    for key, value in (("date_features", dates), ("hashed_features", hashed), ("embedded_features", embedded)):
        if value:
            info[key] = value
    return info
