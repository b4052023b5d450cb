"""Turning the workbench's ``features`` dict into tensors, for templates (plain torch).

A dataset's ``input_fn`` yields ``features`` as a dict of column -> batch: numeric columns as
float32 tensors, categorical ones as numpy arrays of ``str``. ``params['task']`` (see
``estimator_workbench.data.datasets.task_info``) holds the column names, the train means/stds and the
categorical vocabularies. ``InputLayer`` combines both into one dense ``[batch, out_dim]`` tensor:
numeric columns standardised, categorical columns looked up in their vocabulary (unknown values
go to one out-of-vocabulary id) and embedded (``nn.Embedding``) or one-hot encoded.

The statistics are buffers of the module, so they are saved in checkpoints with the weights.
``feature_columns`` builds the engine's TF-style feature columns from the same task info, for
the canned-estimator templates (``estimator_workbench/templates/canned/``), and ``require_task`` gives them
a clear error when a classifier is chosen for a regression label or the other way round.

This module is imported by template code, in runner and pre-flight processes only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

__all__ = ["CATEGORICAL_ENCODINGS", "FORCED_EMBEDDING_DIM", "InputLayer", "feature_columns", "hash_ids", "lookup_ids",
           "numeric_matrix", "optimizer_arg", "require_task"]

CATEGORICAL_ENCODINGS = ("embedding", "indicator", "categorical")

# The size of the embedding of a column the Data page set to 'embedding' in a model that one-hot
# encodes its other categorical columns (embedding_dim=0).
FORCED_EMBEDDING_DIM = 8


def numeric_matrix(features: Mapping[str, Any], names: Sequence[str],
                   device: torch.device | None = None) -> torch.Tensor:
    """The numeric columns ``names`` stacked as a float32 ``[batch, len(names)]`` tensor.

    Example:
        >>> numeric_matrix({"a": torch.ones(2), "b": torch.zeros(2)}, ["a", "b"]).shape
        torch.Size([2, 2])
    """
    missing = [n for n in names if n not in features]
    if missing:
        raise ValueError(f"features has no column(s) {missing}; it has {sorted(features)}. "
                         "The model was built for another dataset.")
    columns = [torch.as_tensor(features[n], dtype=torch.float32, device=device).reshape(-1)
               for n in names]
    return torch.stack(columns, dim=1)


def lookup_ids(values: Any, vocabulary: np.ndarray) -> np.ndarray:
    """Ids of ``values`` in the sorted ``vocabulary`` (vectorised); unknown -> ``len(vocabulary)``.

    Example:
        >>> lookup_ids(np.array(["b", "z", "a"]), np.array(["a", "b"])).tolist()
        [1, 2, 0]
    """
    values = np.asarray(values).astype(str).reshape(-1)
    n = len(vocabulary)
    if n == 0:
        return np.zeros(len(values), dtype=np.int64)
    idx = np.searchsorted(vocabulary, values)
    found = vocabulary[np.minimum(idx, n - 1)] == values
    return np.where(found, idx, n).astype(np.int64)


def hash_ids(values: Any, buckets: int) -> np.ndarray:
    """Bucket ids of ``values`` (as str): TF's ``categorical_column_with_hash_bucket`` hash
    (FarmHash Fingerprint64) modulo ``buckets``, the same ids the engine's hashed column gives.

    Example:
        >>> hash_ids(np.array(["Hello", "TensorFlow", "2.x"]), 3).tolist()
        [0, 2, 2]
    """
    from estimator_engine.feature_column import fingerprint64

    codes, uniques = _factorize(np.asarray(values).astype(str).reshape(-1))
    table = np.array([fingerprint64(str(u)) % buckets for u in uniques], dtype=np.int64)
    return table[codes] if len(table) else np.zeros(len(codes), dtype=np.int64)


def _factorize(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(codes, uniques) of a str array, vectorised (``np.unique`` with ``return_inverse``)."""
    uniques, codes = np.unique(values, return_inverse=True)
    return codes.reshape(-1), uniques


class InputLayer(nn.Module):
    """The ``features`` dict -> a dense float tensor, built from ``params['task']``.

    Columns the Data page hashes (``task['hashed_features']``: name -> buckets) are hashed into
    their buckets, then embedded or one-hot encoded like the others; columns it set to
    'embedding' (``task['embedded_features']``) are embedded even when ``embedding_dim`` is 0
    (with ``FORCED_EMBEDDING_DIM``).

    Args:
        task: ``params['task']`` (numeric_features, numeric_stats, categorical_features,
            categorical_vocabularies, optionally hashed_features and embedded_features).
        embedding_dim: size of each categorical embedding; ``0`` one-hot encodes instead.
        include_categorical: False drops the categorical columns (numeric-only models).

    Example:
        >>> task = {"numeric_features": ["x"], "numeric_stats": {"x": {"mean": 1.0, "std": 2.0}},
        ...         "categorical_features": ["c"], "categorical_vocabularies": {"c": ["a", "b"]}}
        >>> layer = InputLayer(task, embedding_dim=0)
        >>> layer({"x": torch.tensor([3.0]), "c": np.array(["b"])}).tolist()
        [[1.0, 0.0, 1.0, 0.0]]
    """

    def __init__(self, task: Mapping[str, Any], embedding_dim: int = 8,
                 include_categorical: bool = True) -> None:
        super().__init__()
        self.numeric = list(task.get("numeric_features", []))
        stats = task.get("numeric_stats", {})
        self.register_buffer("mean", torch.tensor([stats[n]["mean"] for n in self.numeric], dtype=torch.float32))
        self.register_buffer("std", torch.tensor([stats[n]["std"] for n in self.numeric], dtype=torch.float32))
        self.categorical = list(task.get("categorical_features", [])) if include_categorical else []
        vocabs = task.get("categorical_vocabularies", {})
        self._vocabs = [np.asarray(sorted(vocabs[n]), dtype=str) for n in self.categorical]
        self.embedding_dim = int(embedding_dim)
        forced = set(task.get("embedded_features", [])) if self.embedding_dim == 0 else set()
        # the embedding size of each categorical column: 0 is one-hot
        self._dims = [self.embedding_dim or (FORCED_EMBEDDING_DIM if n in forced else 0) for n in self.categorical]
        # one id per vocabulary entry plus one out-of-vocabulary id (placeholders keep the indices)
        self.embeddings = nn.ModuleList(
            nn.Embedding(len(v) + 1, d) if d else nn.Identity() for v, d in zip(self._vocabs, self._dims)
        ) if any(self._dims) else nn.ModuleList()
        hashed = dict(task.get("hashed_features", {})) if include_categorical else {}
        self.hashed = list(hashed)
        self._buckets = [int(hashed[n]) for n in self.hashed]
        if self.hashed and self.embedding_dim > 0:  # (created only when used: other checkpoints unchanged)
            self.hashed_embeddings = nn.ModuleList(nn.Embedding(b, self.embedding_dim) for b in self._buckets)
        cat_width = sum(d or len(v) + 1 for v, d in zip(self._vocabs, self._dims))
        cat_width += sum(self.embedding_dim or b for b in self._buckets)
        self.out_dim = len(self.numeric) + cat_width
        if self.out_dim == 0:
            raise ValueError("InputLayer: the task has no feature columns; set at least one column's "
                             "role to 'feature'.")

    def forward(self, features: Mapping[str, Any]) -> torch.Tensor:
        device = self.mean.device
        parts = []
        if self.numeric:
            parts.append((numeric_matrix(features, self.numeric, device) - self.mean) / self.std)
        for i, (name, vocab) in enumerate(zip(self.categorical, self._vocabs)):
            if name not in features:
                raise ValueError(f"features has no column {name!r}; it has {sorted(features)}.")
            ids = torch.from_numpy(lookup_ids(features[name], vocab)).to(device)
            if self._dims[i]:
                parts.append(self.embeddings[i](ids))
            else:
                parts.append(nn.functional.one_hot(ids, len(vocab) + 1).to(torch.float32))
        for i, (name, buckets) in enumerate(zip(self.hashed, self._buckets)):
            if name not in features:
                raise ValueError(f"features has no column {name!r}; it has {sorted(features)}.")
            ids = torch.from_numpy(hash_ids(features[name], buckets)).to(device)
            if self.embedding_dim > 0:
                parts.append(self.hashed_embeddings[i](ids))
            else:
                parts.append(nn.functional.one_hot(ids, buckets).to(torch.float32))
        return torch.cat(parts, dim=1)


def require_task(task: Mapping[str, Any], kind: str, estimator: str) -> Mapping[str, Any]:
    """``task`` when the dataset's label is of ``kind`` ('classification' or 'regression'), else a
    ValueError that names the estimator to choose instead.

    Example:
        >>> require_task({"task": "regression", "label": "y"}, "regression", "DNNRegressor")["label"]
        'y'
    """
    found = task.get("task")
    if found == kind:
        return task
    label = task.get("label")
    if found == "none" or label is None:
        raise ValueError(f"{estimator} needs a label column: the dataset has none. Set one column's "
                         "role to 'label' on the Data page.")
    other = estimator.replace("Classifier", "Regressor") if kind == "classification" else \
        estimator.replace("Regressor", "Classifier")
    raise ValueError(f"{estimator} is for {kind}, but the dataset's label {label!r} makes this a "
                     f"{found} task. Choose {other} instead, or change the label's type on the Data page.")


def _standardise(mean: float, std: float) -> Any:
    def normalizer(x: torch.Tensor) -> torch.Tensor:
        return (x - mean) / std
    return normalizer


def feature_columns(task: Mapping[str, Any], categorical: str = "embedding", embedding_dim: int = 8,
                    numeric: bool = True, standardize: bool = True) -> list[Any]:
    """The engine's feature columns for ``params['task']``, in the dataset's column order.

    Numeric columns become ``numeric_column`` standardised with the train statistics. Categorical
    columns become ``categorical_column_with_vocabulary_list`` over the train vocabulary with one
    out-of-vocabulary bucket, then, per ``categorical``:

    * ``'embedding'``: ``embedding_column(dimension=embedding_dim)`` (DNN models);
    * ``'indicator'``: ``indicator_column`` (one-hot; DNN models);
    * ``'categorical'``: the categorical column itself (linear models learn one weight per value).

    Columns the Data page hashes (``task['hashed_features']``) become
    ``categorical_column_with_hash_bucket`` instead, wrapped the same way; columns it set to
    'embedding' (``task['embedded_features']``) are embedded also under ``'indicator'`` (a linear
    model, ``'categorical'``, reads every categorical column as is).

    ``numeric=False`` leaves the numeric columns out (e.g. the wide part of a wide & deep model);
    ``standardize=False`` reads them raw, as TF's ``numeric_column(name)`` does (a TF model trained
    so is imported with ``import-tf`` and the template param ``standardize_numeric`` off).

    Example:
        >>> task = {"feature_names": ["x", "c"], "numeric_features": ["x"],
        ...         "numeric_stats": {"x": {"mean": 1.0, "std": 2.0}},
        ...         "categorical_features": ["c"], "categorical_vocabularies": {"c": ["a", "b"]}}
        >>> [type(c).__name__ for c in feature_columns(task, "indicator")]
        ['NumericColumn', 'IndicatorColumn']
    """
    from estimator_engine import feature_column as fc

    if categorical not in CATEGORICAL_ENCODINGS:
        raise ValueError(f"categorical must be one of {CATEGORICAL_ENCODINGS}, given: {categorical!r}.")
    if categorical == "embedding" and (isinstance(embedding_dim, bool) or int(embedding_dim) < 1):
        raise ValueError(f"embedding_dim must be a positive int, given: {embedding_dim!r}.")
    numeric_names = set(task.get("numeric_features", []))
    categorical_names = set(task.get("categorical_features", []))
    stats = task.get("numeric_stats", {})
    vocabs = task.get("categorical_vocabularies", {})
    hashed = dict(task.get("hashed_features", {}))
    forced = set(task.get("embedded_features", []))
    order = task.get("feature_names") or [*task.get("numeric_features", []), *task.get("categorical_features", []),
                                          *hashed]
    columns: list[Any] = []
    for name in order:
        if name in numeric_names and numeric:
            columns.append(fc.numeric_column(name, normalizer_fn=_standardise(
                float(stats[name]["mean"]), float(stats[name]["std"])) if standardize else None))
        elif name in categorical_names or name in hashed:
            column: Any = fc.categorical_column_with_hash_bucket(name, int(hashed[name])) if name in hashed else \
                fc.categorical_column_with_vocabulary_list(name, sorted(vocabs[name]), num_oov_buckets=1)
            if categorical == "embedding" or (categorical == "indicator" and name in forced):
                column = fc.embedding_column(column, dimension=int(embedding_dim) if categorical == "embedding"
                                             else FORCED_EMBEDDING_DIM)
            elif categorical == "indicator":
                column = fc.indicator_column(column)
            columns.append(column)
    if not columns:
        raise ValueError("The dataset has no feature column for this model; set at least one column's "
                         "role to 'feature' on the Data page.")
    return columns


def optimizer_arg(name: str, learning_rate: float) -> Any:
    """A canned estimator's ``optimizer`` argument from a name and a learning rate; ``0`` keeps the
    name alone, so the estimator applies TF's default learning rate for it.

    Example:
        >>> optimizer_arg("Adagrad", 0.0)
        'Adagrad'
        >>> optimizer_arg("SGD", 0.1)([torch.nn.Parameter(torch.zeros(1))]).param_groups[0]["lr"]
        0.1
    """
    from estimator_engine.canned.optimizers import get_optimizer_factory

    if not learning_rate:
        return name
    return get_optimizer_factory(name, float(learning_rate))
