"""Turning the workbench's ``features`` dict into tensors, for templates (plain torch).

A dataset's ``input_fn`` yields ``features`` as a dict of column -> batch: numeric columns as
float32 tensors, categorical ones as numpy arrays of ``str``. ``params['task']`` (see
``workbench.datasets.task_info``) holds the column names, the train means/stds and the
categorical vocabularies. ``InputLayer`` combines both into one dense ``[batch, out_dim]`` tensor:
numeric columns standardised, categorical columns looked up in their vocabulary (unknown values
go to one out-of-vocabulary id) and embedded (``nn.Embedding``) or one-hot encoded.

The statistics are buffers of the module, so they are saved in checkpoints with the weights.
This module is imported by template code, in runner and pre-flight processes only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

__all__ = ["InputLayer", "lookup_ids", "numeric_matrix"]


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


class InputLayer(nn.Module):
    """The ``features`` dict -> a dense float tensor, built from ``params['task']``.

    Args:
        task: ``params['task']`` (numeric_features, numeric_stats, categorical_features,
            categorical_vocabularies).
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
        # one id per vocabulary entry plus one out-of-vocabulary id
        self.embeddings = nn.ModuleList(
            nn.Embedding(len(v) + 1, self.embedding_dim) for v in self._vocabs
        ) if self.embedding_dim > 0 else nn.ModuleList()
        cat_width = sum(self.embedding_dim if self.embedding_dim > 0 else len(v) + 1 for v in self._vocabs)
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
            if self.embedding_dim > 0:
                parts.append(self.embeddings[i](ids))
            else:
                parts.append(nn.functional.one_hot(ids, len(vocab) + 1).to(torch.float32))
        return torch.cat(parts, dim=1)
