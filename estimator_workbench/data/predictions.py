"""Writing an Estimator's predictions to CSV, streaming (memory flat in the number of rows).

``write_predictions_csv`` pulls batches from ``estimator.predict(..., yield_single_examples=False)``,
turns every ``chunk_rows`` rows into a small DataFrame (the input's id/feature columns for those
rows + the prediction columns) and appends it to ``<out>.tmp``; the finished file replaces ``out``
atomically, so a failed or interrupted predict never leaves a half-written ``predictions.csv``.

Prediction columns, per key:

* ``class_ids`` -> ``class_ids`` (int) and, with a ``label_vocabulary``, ``class`` (the name);
* ``probabilities`` ``[n, K]`` -> ``probability_<class>`` for every class (name or index);
* any other key: ``[n]`` or ``[n, 1]`` -> one column named after the key; ``[n, K]`` ->
  ``<key>_0 .. <key>_<K-1>`` (higher ranks are flattened).

The canned heads' ``all_class_ids`` / ``all_classes`` (the same class list on every row) and,
beside ``class_ids``, ``classes`` (the ids as text) are left out: they repeat what the columns
above already say.

Text cells (and header names) that a spreadsheet could run as a formula (CSV injection) get a
leading ``'``: those starting with ``=``, ``+``, ``-``, ``@``, tab or carriage return, also after
leading white space (``" =1+1"``), in their full-width forms (U+FF1D, U+FF0B, U+FF0D, U+FF20, which spreadsheets
read as the ASCII ones), and on any line of a multi-line cell (each such line gets its ``'``).
"""

from __future__ import annotations

import os
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["DEFAULT_CHUNK_ROWS", "escape_formulas", "prediction_columns", "write_predictions_csv"]

DEFAULT_CHUNK_ROWS = 10_000
_REDUNDANT_KEYS = ("all_class_ids", "all_classes")
_FORMULA_CHARS = frozenset("=+-@")
_CONTROL_START = ("\t", "\r", "\n")


def _formula_line(line: str) -> bool:
    """Whether a line starts a formula: its first character after white space (Unicode's, the
    full-width space included) is ``= + - @``, in ASCII or another form NFKC maps to them (full-width U+FF1D)."""
    stripped = line.lstrip()
    return bool(stripped) and unicodedata.normalize("NFKC", stripped[0])[:1] in _FORMULA_CHARS


def _risky(value: str) -> bool:
    return value.startswith(_CONTROL_START) or any(_formula_line(line) for line in value.splitlines())


def _escape_text(value: str) -> str:
    """``value`` with a ``'`` before it and before each further line that starts a formula."""
    if not _risky(value):
        return value
    lines = value.splitlines(keepends=True) or [value]
    return "".join("'" + line if i == 0 or _formula_line(line) else line for i, line in enumerate(lines))


def escape_formulas(df: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``df`` whose text cells could run as formulas get a leading ``'`` (module doc).

    Numeric columns are left alone (``-1.5`` is a number, not a formula).

    Example:
        >>> escape_formulas(pd.DataFrame({"a": ["=1+1", "ok"], "b": [-1, 2]}))["a"].tolist()
        ["'=1+1", 'ok']
    """
    out = df.copy()
    for column in out.columns:
        s = out[column]
        if pd.api.types.is_numeric_dtype(s) or pd.api.types.is_bool_dtype(s):
            continue
        text = s.astype(str)  # a string dtype keeps its missing values missing (not 'nan')
        risky = s.notna() & text.map(lambda v: isinstance(v, str) and _risky(v)).astype(bool)
        if risky.any():
            out[column] = s.astype(object).where(~risky, text.map(lambda v: _escape_text(v) if isinstance(v, str) else v))
    out.columns = [_escape_text(str(c)) for c in out.columns]
    return out


def prediction_columns(predictions: Mapping[str, Any], label_vocabulary: Sequence[str] | None = None
                       ) -> dict[str, np.ndarray]:
    """One batch of predictions (key -> array ``[n, ...]``) as named 1-D columns (see module doc)."""
    columns: dict[str, np.ndarray] = {}
    vocab = [str(v) for v in label_vocabulary] if label_vocabulary is not None else None
    for key, value in predictions.items():
        if key in _REDUNDANT_KEYS or (key == "classes" and "class_ids" in predictions):
            continue
        arr = np.asarray(value.detach().cpu() if hasattr(value, "detach") else value)
        if arr.ndim == 0:
            arr = arr.reshape(1)
        arr = arr.reshape(arr.shape[0], -1) if arr.ndim > 1 else arr
        if arr.ndim == 2 and arr.shape[1] == 1:
            arr = arr[:, 0]
        if key == "class_ids" and arr.ndim == 1:
            columns["class_ids"] = arr.astype(np.int64)
            if vocab is not None:
                names = np.asarray([*vocab, ""], dtype=object)
                ids = arr.astype(np.int64)
                columns["class"] = names[np.where((ids >= 0) & (ids < len(vocab)), ids, len(vocab))]
        elif key == "probabilities" and arr.ndim == 2:
            names = vocab if vocab is not None and len(vocab) == arr.shape[1] else [str(i) for i in range(arr.shape[1])]
            for i, name in enumerate(names):
                columns[f"probability_{name}"] = arr[:, i]
        elif arr.ndim == 1:
            columns[key] = arr
        else:
            for i in range(arr.shape[1]):
                columns[f"{key}_{i}"] = arr[:, i]
    return columns


def _batches(estimator: Any, input_fn: Any, checkpoint_path: str | None) -> Iterable[Mapping[str, Any]]:
    for batch in estimator.predict(input_fn, checkpoint_path=checkpoint_path, yield_single_examples=False):
        yield batch if isinstance(batch, Mapping) else {"predictions": batch}


def write_predictions_csv(estimator: Any, input_fn: Any, source_df: pd.DataFrame, out_path: str | os.PathLike,
                          id_columns: Sequence[str] | None = None, label_vocabulary: Sequence[str] | None = None,
                          checkpoint_path: str | None = None, chunk_rows: int = DEFAULT_CHUNK_ROWS) -> dict[str, Any]:
    """Writes ``estimator``'s predictions for ``input_fn`` next to ``source_df``'s columns.

    Args:
        estimator: an ``ee.Estimator``.
        input_fn: a predict input_fn over the rows of ``source_df``, in order
            (``datasets.make_predict_input_fn``).
        source_df: the input rows (their id/feature columns are copied into the output).
        out_path: the CSV to write (written as ``<out>.tmp`` then renamed).
        id_columns: the input columns to copy (None: all of them); a prediction column whose
            name clashes with one of them gets the suffix ``_pred``.
        label_vocabulary: class names, index = class id.
        checkpoint_path: the checkpoint to predict with (None: the latest).
        chunk_rows: rows per write (memory use grows with this, not with the number of rows).

    Returns:
        ``{'path', 'rows', 'columns'}``.

    Raises:
        ValueError: unknown id columns, a bad chunk_rows, or a row count different from
            ``len(source_df)`` (the input_fn does not match the rows); ``out`` is then untouched.
    """
    if isinstance(chunk_rows, bool) or not isinstance(chunk_rows, int) or chunk_rows < 1:
        raise ValueError(f"chunk_rows must be a positive int, given: {chunk_rows!r}.")
    ids = list(source_df.columns) if id_columns is None else list(id_columns)
    unknown = [c for c in ids if c not in source_df.columns]
    if unknown:
        raise ValueError(f"id_columns {unknown} are not columns of the input "
                         f"({list(map(str, source_df.columns))}). Choose existing columns.")
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    written, header_written, pending, n_pending = 0, False, [], 0
    columns: list[str] = []

    def flush() -> None:
        nonlocal written, header_written, pending, n_pending, columns
        if not n_pending:
            return
        merged: dict[str, list[np.ndarray]] = {}
        for cols in pending:
            for k, v in cols.items():
                merged.setdefault(k, []).append(v)
        preds = {k: np.concatenate(v) for k, v in merged.items()}
        if written + n_pending > len(source_df):
            raise ValueError(f"The input_fn yielded more rows than the input has ({len(source_df)}); "
                             "predict on an input_fn made from the same rows.")
        chunk = source_df.iloc[written:written + n_pending][ids].reset_index(drop=True)
        for k, v in preds.items():
            name = f"{k}_pred" if k in chunk.columns else k
            chunk[name] = v
        chunk = escape_formulas(chunk)
        chunk.to_csv(tmp, mode="a" if header_written else "w", header=not header_written, index=False)
        columns = list(chunk.columns)
        header_written = True
        written += n_pending
        pending, n_pending = [], 0

    try:
        for batch in _batches(estimator, input_fn, checkpoint_path):
            cols = prediction_columns(batch, label_vocabulary)
            pending.append(cols)
            n_pending += len(next(iter(cols.values()))) if cols else 0
            if n_pending >= chunk_rows:
                flush()
        flush()
        if written != len(source_df):
            raise ValueError(f"The input_fn yielded {written} rows but the input has {len(source_df)}; "
                             "predict on an input_fn made from the same rows, without dropping any.")
        if not header_written:  # no rows at all: still write the id header
            escape_formulas(source_df.iloc[:0][ids]).to_csv(tmp, index=False)
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return {"path": str(out), "rows": written, "columns": columns}
