"""Turning a dataset into ``input_fn``s: the one place, used identically by the pre-flight check
and the runner. The engine is imported lazily."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from estimator_workbench.data.schema import MISSING_TOKEN, Schema
from estimator_workbench.data.spec import (
    TARGET_COLUMN,
    DatasetSpec,
    as_str,
    split,
    task_info,
    training_rows,
    with_date_features,
)

__all__ = ['InputFns', 'encode_labels', 'make_input_fns', 'make_predict_input_fn', 'prediction_spec', 'prepare_features']


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
    mean), categorical (and hashed) as str with NaN -> ``'<missing>'``; the features of expanded
    date columns are derived from them first. Vectorised; keeps the index."""
    df = with_date_features(df, info.get("date_features") or {})
    numeric = list(info["numeric_features"])
    categorical = list(info["categorical_features"]) + list(info.get("hashed_features") or {})
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
        out[c] = as_str(df.loc[out.index, c]).fillna(MISSING_TOKEN).astype(str).to_numpy()
    weight = info.get("weight")
    if weight is not None and weight in df.columns:
        out[weight] = df.loc[out.index, weight].astype(np.float32).to_numpy()
    return out


def encode_labels(labels: pd.Series, info: Mapping[str, Any]) -> np.ndarray:
    """Labels as the model sees them: int64 class ids (index in ``label_vocabulary``) for
    classification, float32 for regression. ValueError naming unknown classes."""
    if info["task"] == "classification":
        vocab = list(info["label_vocabulary"])
        codes = pd.Index(vocab).get_indexer(as_str(labels)).astype(np.int64)
        if (codes < 0).any():
            unknown = sorted({str(v) for v in as_str(labels)[codes < 0]})[:5]  # NaN too
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
        y = pd.Series(y, name=TARGET_COLUMN)
    # target_column only needs to differ from the feature names: a feature may be called "target".
    fn = inputs.pandas_input_fn(x, y, batch_size=batch_size, num_epochs=num_epochs,
                                shuffle=shuffle, target_column=TARGET_COLUMN)
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
    missing = [c for c in base.schema.features if c not in df.columns and base.encoding(c) != "ignore"]
    if missing:
        raise ValueError(f"The data lacks the feature column(s) {missing} the model was trained on "
                         f"(its columns: {list(map(str, df.columns))}). Predict on a file that has them.")
    kept = tuple(c for c in base.schema.columns if c.name in df.columns)
    names = {c.name for c in kept}
    encodings = {c: e for c, e in base.encodings.items() if c in names}  # (of the columns it keeps)
    return dataclasses.replace(base, ref=dict(ref), schema=Schema(kept), encodings=encodings)


def make_predict_input_fn(spec: DatasetSpec, df: pd.DataFrame, info: Mapping[str, Any],
                          batch_size: int = 128) -> Callable[..., Any]:
    """A predict ``input_fn`` over every row of ``df`` in order (no row dropped), features only,
    encoded with a training run's ``info``."""
    x = prepare_features(df, spec, info, for_predict=True)
    return _pandas_input_fn(x, None, batch_size, 1, False, None)
