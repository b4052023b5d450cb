"""Feature columns: TF's ``tf.feature_column`` on PyTorch (numeric, bucketized, categorical,
embedding, indicator, crossed), with ``DenseFeatures`` and ``LinearModel`` as ``nn.Module``\\ s.

A column describes how one feature of the ``features`` dict becomes model input; it holds no
state. Columns are frozen, hashable dataclasses with TF's constructor arguments, defaults,
validation and error messages. The modules own the variables, named as TF names them::

    occupation = categorical_column_with_vocabulary_list("occupation", ["doctor", "lawyer"])
    columns = [numeric_column("age"), embedding_column(occupation, dimension=8)]
    # in a model_fn:
    net = ee.get_module("dnn/input_from_feature_columns/input_layer",
                        lambda: DenseFeatures(columns))
    # variables: dnn/input_from_feature_columns/input_layer/occupation_embedding/embedding_weights

Inputs (``features[key]`` for one batch of ``B`` rows):

* numeric: a tensor / array / list of shape ``[B]`` or ``[B, *shape]`` (cast to float32);
  ``NaN`` counts as missing and becomes ``default_value`` when one is given.
* categorical: a numpy array or list of ``str`` (what ``ee.inputs.pandas_input_fn`` yields for
  text columns; ``None``/``NaN`` also count as missing), or an int tensor / array. ``[B]`` is one
  value per row; ``[B, K]`` or a list of lists gives several values per row (multivalent).
  Missing values (``''`` for strings, ``-1`` for ints) are dropped, as in TF: a row without ids
  contributes nothing (zeros) to embeddings, indicators and linear models.

String-to-id mapping is vectorised: each batch is factorised (``pandas.factorize``) and only its
*unique* values go through the Python-level lookup or hash.

Hashing: ``categorical_column_with_hash_bucket``, the OOV buckets of vocabulary columns and
``crossed_column`` use a pure-Python port of FarmHash ``Fingerprint64`` and TF's
``FingerprintCat64``, the functions TF uses, so bucket ids are meant to equal TF's
(``fingerprint64`` is pinned to published FarmHash test vectors; crossed ids equal TF 2.15's
``SparseCrossOp`` ids for every mix of key kinds, tested against ids TF computed: strings are
fingerprinted, integer ids used as they are, mixed starting from ``hash_key`` (default
``0xDECAFCAFFE``), sparse inputs before dense ones). Ids are stable across processes and
platforms (no use of Python's salted ``hash``).

Variable names: a column's ``name`` is a path component of its variables (``<name>/weights``,
``<name>/embedding_weights``). PyTorch module names cannot contain ``'.'``, so a ``'.'`` in a
column name is written as ``DOT_REPLACEMENT`` (``'_DOT_'``) in variable names: the column
``'a.b'`` has the linear weights ``linear/linear_model/a_DOT_b/weights``.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import itertools
import math
import os
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, cast

import numpy as np
import torch
from torch import nn

from estimator_engine._lazy_import import pandas as pd  # imported on first use

__all__ = [
    "DOT_REPLACEMENT",
    "PRECOMPUTED_IDS_METHOD",
    "BucketizedColumn",
    "CategoricalColumn",
    "CrossedColumn",
    "DenseColumn",
    "DenseFeatures",
    "EmbeddingColumn",
    "FeatureColumn",
    "HashedCategoricalColumn",
    "IdentityCategoricalColumn",
    "IndicatorColumn",
    "LinearModel",
    "NumericColumn",
    "SharedEmbeddingColumn",
    "VocabularyFileCategoricalColumn",
    "VocabularyListCategoricalColumn",
    "WeightedCategoricalColumn",
    "bucketized_column",
    "categorical_column_with_hash_bucket",
    "categorical_column_with_identity",
    "categorical_column_with_vocabulary_file",
    "categorical_column_with_vocabulary_list",
    "crossed_column",
    "embedding_column",
    "fingerprint64",
    "fingerprint_cat64",
    "indicator_column",
    "input_layer",
    "linear_model",
    "numeric_column",
    "shared_embedding_columns",
    "shared_embeddings",
    "variable_scope_name",
    "weighted_categorical_column",
]

DOT_REPLACEMENT = "_DOT_"
# A features mapping with this method (``column -> int64 ids [B, K] or None``) supplies categorical ids.
PRECOMPUTED_IDS_METHOD = "precomputed_ids"
_DEFAULT_HASH_KEY = 0xDECAFCAFFE  # TF's default crossed_column hash_key (sparse_ops._DEFAULT_HASH_KEY)
_COMBINERS = ("mean", "sqrtn", "sum")


# --------------------------------------------------------------------------------------------
# FarmHash Fingerprint64 (farmhashna::Hash64) and TF's FingerprintCat64, in pure Python.
# --------------------------------------------------------------------------------------------

_M64 = (1 << 64) - 1
_K0 = 0xC3A5C85C97CB3127
_K1 = 0xB492B66FBE98F273
_K2 = 0x9AE16A3B2F90404F
_CAT_MUL = 0xC6A4A7935BD1E995


def _rot(value: int, shift: int) -> int:
    return value if shift == 0 else ((value >> shift) | (value << (64 - shift))) & _M64


def _shift_mix(value: int) -> int:
    return value ^ (value >> 47)


def _len16(u: int, v: int, mul: int) -> int:
    a = ((u ^ v) * mul) & _M64
    a ^= a >> 47
    b = ((v ^ a) * mul) & _M64
    b ^= b >> 47
    return (b * mul) & _M64


def _f64(data: bytes, at: int) -> int:
    return int.from_bytes(data[at:at + 8], "little")


def _f32(data: bytes, at: int) -> int:
    return int.from_bytes(data[at:at + 4], "little")


def _weak32(data: bytes, at: int, a: int, b: int) -> tuple[int, int]:
    w, x, y, z = _f64(data, at), _f64(data, at + 8), _f64(data, at + 16), _f64(data, at + 24)
    a = (a + w) & _M64
    b = _rot((b + a + z) & _M64, 21)
    c = a
    a = (a + x + y) & _M64
    b = (b + _rot(a, 44)) & _M64
    return (a + z) & _M64, (b + c) & _M64


def _fingerprint_bytes(s: bytes) -> int:
    n = len(s)
    if n <= 16:
        if n >= 8:
            mul = (_K2 + n * 2) & _M64
            a = (_f64(s, 0) + _K2) & _M64
            b = _f64(s, n - 8)
            c = (_rot(b, 37) * mul + a) & _M64
            d = ((_rot(a, 25) + b) * mul) & _M64
            return _len16(c, d, mul)
        if n >= 4:
            mul = (_K2 + n * 2) & _M64
            return _len16((n + (_f32(s, 0) << 3)) & _M64, _f32(s, n - 4), mul)
        if n > 0:
            y = s[0] + (s[n >> 1] << 8)
            z = n + (s[n - 1] << 2)
            return (_shift_mix(((y * _K2) ^ (z * _K0)) & _M64) * _K2) & _M64
        return _K2
    if n <= 32:
        mul = (_K2 + n * 2) & _M64
        a = (_f64(s, 0) * _K1) & _M64
        b = _f64(s, 8)
        c = (_f64(s, n - 8) * mul) & _M64
        d = (_f64(s, n - 16) * _K2) & _M64
        return _len16((_rot((a + b) & _M64, 43) + _rot(c, 30) + d) & _M64,
                      (a + _rot((b + _K2) & _M64, 18) + c) & _M64, mul)
    if n <= 64:
        mul = (_K2 + n * 2) & _M64
        a = (_f64(s, 0) * _K2) & _M64
        b = _f64(s, 8)
        c = (_f64(s, n - 8) * mul) & _M64
        d = (_f64(s, n - 16) * _K2) & _M64
        y = (_rot((a + b) & _M64, 43) + _rot(c, 30) + d) & _M64
        z = _len16(y, (a + _rot((b + _K2) & _M64, 18) + c) & _M64, mul)
        e = (_f64(s, 16) * mul) & _M64
        f = _f64(s, 24)
        g = ((y + _f64(s, n - 32)) * mul) & _M64
        h = ((z + _f64(s, n - 24)) * mul) & _M64
        return _len16((_rot((e + f) & _M64, 43) + _rot(g, 30) + h) & _M64,
                      (e + _rot((f + a) & _M64, 18) + g) & _M64, mul)
    seed = 81
    x = seed
    y = (seed * _K1 + 113) & _M64
    z = (_shift_mix((y * _K2 + 113) & _M64) * _K2) & _M64
    v0 = v1 = w0 = w1 = 0
    x = (x * _K2 + _f64(s, 0)) & _M64
    end = ((n - 1) // 64) * 64
    last64 = n - 64
    at = 0
    while True:
        x = (_rot((x + y + v0 + _f64(s, at + 8)) & _M64, 37) * _K1) & _M64
        y = (_rot((y + v1 + _f64(s, at + 48)) & _M64, 42) * _K1) & _M64
        x ^= w1
        y = (y + v0 + _f64(s, at + 40)) & _M64
        z = (_rot((z + w0) & _M64, 33) * _K1) & _M64
        v0, v1 = _weak32(s, at, (v1 * _K1) & _M64, (x + w0) & _M64)
        w0, w1 = _weak32(s, at + 32, (z + w1) & _M64, (y + _f64(s, at + 16)) & _M64)
        z, x = x, z
        at += 64
        if at == end:
            break
    mul = (_K1 + ((z & 0xFF) << 1)) & _M64
    at = last64
    w0 = (w0 + ((n - 1) & 63)) & _M64
    v0 = (v0 + w0) & _M64
    w0 = (w0 + v0) & _M64
    x = (_rot((x + y + v0 + _f64(s, at + 8)) & _M64, 37) * mul) & _M64
    y = (_rot((y + v1 + _f64(s, at + 48)) & _M64, 42) * mul) & _M64
    x ^= (w1 * 9) & _M64
    y = (y + v0 * 9 + _f64(s, at + 40)) & _M64
    z = (_rot((z + w0) & _M64, 33) * mul) & _M64
    v0, v1 = _weak32(s, at, (v1 * mul) & _M64, (x + w0) & _M64)
    w0, w1 = _weak32(s, at + 32, (z + w1) & _M64, (y + _f64(s, at + 16)) & _M64)
    z, x = x, z
    return _len16((_len16(v0, w0, mul) + _shift_mix(y) * _K0 + z) & _M64,
                  (_len16(v1, w1, mul) + x) & _M64, mul)


@functools.lru_cache(maxsize=1 << 18)
def fingerprint64(value: str | bytes) -> int:
    """FarmHash ``Fingerprint64`` of a str (UTF-8 encoded) or bytes, as an unsigned 64-bit int.

    The hash TF's ``string_to_hash_bucket_fast`` and ``categorical_column_with_hash_bucket`` use.

    Example:
        >>> fingerprint64("test")
        8581389452482819506
        >>> [fingerprint64(s) % 3 for s in ["Hello", "TensorFlow", "2.x"]]  # TF's doc example
        [0, 2, 2]
    """
    if isinstance(value, str):
        value = value.encode("utf-8")
    elif not isinstance(value, bytes):
        raise TypeError(f"fingerprint64 takes str or bytes, got {type(value).__name__}: {value!r:.80}.")
    return _fingerprint_bytes(value)


def fingerprint_cat64(fp1: Any, fp2: Any) -> Any:
    """TF's ``FingerprintCat64``: combines two 64-bit fingerprints (ints or uint64 numpy arrays).

    Example:
        >>> fingerprint_cat64(1, 2) == fingerprint_cat64(1, 2) != fingerprint_cat64(2, 1)
        True
    """
    if isinstance(fp1, np.ndarray) or isinstance(fp2, np.ndarray):
        mul = np.uint64(_CAT_MUL)
        a = np.asarray(fp1, dtype=np.uint64)
        b = np.asarray(fp2, dtype=np.uint64)
        with np.errstate(over="ignore"):
            result = a ^ mul
            mixed = b * mul
            result = result ^ ((mixed ^ (mixed >> np.uint64(47))) * mul)
            result = result * mul
            result = (result ^ (result >> np.uint64(47))) * mul
            return result ^ (result >> np.uint64(47))
    result = (int(fp1) & _M64) ^ _CAT_MUL
    result ^= (_shift_mix((int(fp2) * _CAT_MUL) & _M64) * _CAT_MUL) & _M64
    result = (result * _CAT_MUL) & _M64
    result = (_shift_mix(result) * _CAT_MUL) & _M64
    return _shift_mix(result)


# --------------------------------------------------------------------------------------------
# Validation helpers (TF's messages).
# --------------------------------------------------------------------------------------------


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _check_key(key: Any) -> None:
    if not isinstance(key, str):
        raise ValueError(f"key must be a string. Got: type {type(key)}. Given key: {key!r}")
    if not key:
        raise ValueError("key must be a non-empty string, got ''.")


def _categorical_dtype(dtype: Any, prefix: str) -> type:
    """Normalises a categorical dtype to ``str`` or ``int`` (TF: tf.string / an integer dtype)."""
    if dtype in (str, bytes, "string", "str", object, np.str_, np.object_):
        return str
    if dtype in (int, "int64", "int32", "int"):
        return int
    if isinstance(dtype, torch.dtype):
        if not dtype.is_floating_point and not dtype.is_complex and dtype != torch.bool:
            return int
    else:
        try:
            kind = np.dtype(dtype).kind
        except TypeError:
            kind = ""
        if kind in "iu" and kind:
            return int
        if kind in "USO" and kind:
            return str
    raise ValueError(f"{prefix} dtype must be string or integer. dtype: {dtype!r}.")


def _check_num_oov(num_oov_buckets: Any, key: str) -> None:
    if not _is_int(num_oov_buckets) or num_oov_buckets < 0:
        raise ValueError(f"Invalid num_oov_buckets {num_oov_buckets!r} in {key}.")


def variable_scope_name(name: str) -> str:
    """A column name as it appears in variable names: ``'.'`` replaced by ``DOT_REPLACEMENT``.

    Example:
        >>> variable_scope_name("user.age")
        'user_DOT_age'
    """
    return name.replace(".", DOT_REPLACEMENT)


# --------------------------------------------------------------------------------------------
# Raw feature handling.
# --------------------------------------------------------------------------------------------


def _feature(features: Mapping[str, Any], key: str) -> Any:
    try:
        return features[key]
    except KeyError:
        available = sorted(str(k) for k in features)
        raise ValueError(f"The feature {key!r} is not in features dictionary. Available "
                         f"features: {available}. Check the column's key or the input_fn.") from None


def _pad_ragged(rows: Sequence[Any], key: str) -> np.ndarray:
    """A list of per-row value lists -> a [B, max_len] array padded with the missing marker."""
    rows = [r if isinstance(r, (list, tuple, np.ndarray)) else [r] for r in rows]
    lengths = np.fromiter((len(r) for r in rows), dtype=np.int64, count=len(rows))
    flat = [v for r in rows for v in r]
    is_text = any(isinstance(v, (str, bytes)) for v in flat)
    width = max(int(lengths.max()) if len(rows) else 0, 1)
    out = np.full((len(rows), width), "" if is_text else -1, dtype=object if is_text else np.int64)
    if flat:
        row_ids = np.repeat(np.arange(len(rows)), lengths)
        offsets = np.cumsum(lengths) - lengths
        col_ids = np.arange(len(flat)) - np.repeat(offsets, lengths)
        values = np.empty(len(flat), dtype=object) if is_text else np.asarray(flat, dtype=np.int64)
        if is_text:
            values[:] = flat
        out[row_ids, col_ids] = values
    return out


def _categorical_input(value: Any, key: str) -> np.ndarray:
    """A categorical feature as a 2-D numpy array [B, K]: object (text) or int64 (-1 = missing)."""
    if isinstance(value, torch.Tensor):
        if value.is_floating_point() or value.is_complex():
            array = value.detach().cpu().numpy()
        else:
            array = value.detach().cpu().to(torch.int64).numpy()
    elif isinstance(value, np.ndarray):
        array = value
    elif isinstance(value, pd.Series):
        array = value.to_numpy()
    elif isinstance(value, (list, tuple)):
        if any(isinstance(v, (list, tuple, np.ndarray)) for v in value):
            array = _pad_ragged(value, key)
        else:
            array = np.empty(len(value), dtype=object)
            array[:] = list(value)
            if len(value) and all(_is_int(v) for v in value):
                array = array.astype(np.int64)
    else:
        raise ValueError(f"Feature {key!r} of a categorical column must be a tensor, a numpy "
                         f"array or a list of str/int, got {type(value).__name__}: {value!r:.100}.")
    if array.ndim == 0:
        raise ValueError(f"Feature {key!r} must have a batch dimension, got a scalar: {array!r}.")
    if array.ndim == 1:
        array = array[:, None]
    elif array.ndim > 2:
        array = array.reshape(array.shape[0], -1)
    kind = array.dtype.kind
    if kind == "f":
        missing = np.isnan(array)
        if np.any(array[~missing] != np.round(array[~missing])):
            raise ValueError(f"Feature {key!r} of a categorical column holds non-integer floats; "
                             "give ids as ints or values as str.")
        array = np.where(missing, -1, array).astype(np.int64)
    elif kind == "b":
        array = array.astype(np.int64)
    elif kind in "iu":
        array = array.astype(np.int64, copy=False)
    elif kind not in "OUS":
        raise ValueError(f"Feature {key!r} of a categorical column has unsupported dtype "
                         f"{array.dtype}; expected str or int values.")
    return array


def _is_text(array: np.ndarray) -> bool:
    return array.dtype.kind in "OUS"


def _is_ragged(value: Any) -> bool:
    """A list of per-row value lists (what ``_categorical_input`` pads): TF's sparse input."""
    return isinstance(value, (list, tuple)) and any(isinstance(v, (list, tuple, np.ndarray)) for v in value)


def _present(array: np.ndarray, key: str) -> np.ndarray:
    """Which elements of a categorical input hold a value (not ``''``, ``None``/``NaN`` or ``-1``)."""
    if not _is_text(array):
        return array != -1
    codes, uniques = _factorize(array)
    table = np.array([t is not None for t in _text_uniques(uniques, key)] + [False])
    return table[codes].reshape(array.shape)


def _factorize(array: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(codes of each element, unique values); None/NaN get code -1."""
    codes, uniques = pd.factorize(array.ravel(), use_na_sentinel=True)
    return codes, np.asarray(uniques, dtype=object)


def _gather(codes: np.ndarray, table: Sequence[int] | np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Ids per element from a per-unique table; code -1 (None/NaN) -> -1."""
    extended = np.append(np.asarray(table, dtype=np.int64), -1)
    return extended[codes].reshape(shape)


def _text_uniques(uniques: np.ndarray, column_name: str) -> list[str | None]:
    """Unique values as str (bytes decoded; ints as their decimal text); '' -> None (missing)."""
    out: list[str | None] = []
    for value in uniques:
        if isinstance(value, str):
            out.append(value or None)
        elif isinstance(value, bytes):
            out.append(value.decode("utf-8") or None)
        elif _is_int(value):
            out.append(None if value == -1 else str(int(value)))
        else:
            raise ValueError(f"Column dtype and SparseTensors dtype must be compatible. key: "
                             f"{column_name}, column dtype: string, value: {value!r:.80} of type "
                             f"{type(value).__name__}.")
    return out


class _Ids:
    """Sparse ids of one batch as a padded [B, K] long tensor (-1 = no id) and optional weights."""

    __slots__ = ("ids", "weights")

    def __init__(self, ids: torch.Tensor, weights: torch.Tensor | None = None) -> None:
        self.ids = ids
        self.weights = weights

    def combine(self, table: torch.Tensor, combiner: str, max_norm: float | None = None) -> torch.Tensor:
        """TF's ``safe_embedding_lookup_sparse``: [B, D]; rows without ids give zeros."""
        ids = self.ids.to(table.device)
        valid = ids >= 0
        weights = valid.to(table.dtype)
        if self.weights is not None:
            given = self.weights.to(table.device, table.dtype)
            valid = valid & (given > 0)  # TF prunes ids with weight <= 0
            weights = torch.where(valid, given, torch.zeros_like(given))
        rows = table[ids.clamp(min=0)]  # [B, K, D]
        if max_norm is not None:
            norms = rows.norm(dim=-1, keepdim=True)
            rows = rows * (max_norm / torch.clamp(norms, min=max_norm))
        total = (rows * weights.unsqueeze(-1)).sum(dim=1)
        if combiner == "sum":
            return total
        if combiner == "mean":
            denominator = weights.sum(dim=1, keepdim=True)
        else:  # sqrtn
            denominator = weights.pow(2).sum(dim=1, keepdim=True).sqrt()
        return total / torch.clamp(denominator, min=torch.finfo(table.dtype).tiny)

    def multi_hot(self, num_buckets: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        """Counts (or summed weights) per bucket: [B, num_buckets]."""
        ids = self.ids.to(device)
        valid = ids >= 0
        values = valid.to(dtype)
        if self.weights is not None:
            values = values * self.weights.to(device, dtype)
        out = torch.zeros(ids.shape[0], num_buckets, dtype=dtype, device=device)
        return out.scatter_add_(1, ids.clamp(min=0), values)


class _Cache:
    """Per-call transformation cache (TF's FeatureTransformationCache), keyed by column identity."""

    __slots__ = ("device", "features", "values")

    def __init__(self, features: Mapping[str, Any], device: torch.device) -> None:
        if not isinstance(features, Mapping):
            raise ValueError("features should be a dictionary of `Tensor`s. Given type: "
                             f"{type(features)}")
        self.features = features
        self.device = device
        self.values: dict[int, Any] = {}

    def get(self, column: FeatureColumn, build: Callable[[_Cache], Any]) -> Any:
        # Keyed by id(): hashing a column hashes its whole vocabulary. The columns outlive the
        # call (the module holds them), so ids stay unique while the cache exists.
        found = self.values.get(id(column))
        if found is None:
            found = self.values[id(column)] = build(self)
        return found


# --------------------------------------------------------------------------------------------
# Column classes.
# --------------------------------------------------------------------------------------------


class FeatureColumn:
    """Base of all feature columns. ``name`` is unique within a model and names its variables."""

    @property
    def name(self) -> str:
        raise NotImplementedError

    @property
    def parents(self) -> list[Any]:
        """The columns or feature keys this column is built on."""
        raise NotImplementedError


class DenseColumn(FeatureColumn):
    """A column with a dense representation of ``dense_dimension`` floats per row."""

    @property
    def dense_dimension(self) -> int:
        raise NotImplementedError

    def _dense(self, cache: _Cache, table: torch.Tensor | None) -> torch.Tensor:
        raise NotImplementedError


class CategoricalColumn(FeatureColumn):
    """A column mapping each row to ids in ``[0, num_buckets)`` (-1: no id)."""

    @property
    def num_buckets(self) -> int:
        raise NotImplementedError

    def _ids(self, cache: _Cache) -> _Ids:
        # An exported program takes the ids of numpy-mapped columns as inputs (estimator_engine.serving):
        # its features mapping supplies them through this method instead of the raw values.
        supply = getattr(cache.features, PRECOMPUTED_IDS_METHOD, None)
        if supply is not None:
            ids = supply(self)
            if ids is not None:
                return _Ids(ids)
        return cache.get(self, self._build_ids)

    def _build_ids(self, cache: _Cache) -> _Ids:
        raise NotImplementedError


class _KeyedCategoricalColumn(CategoricalColumn):
    """A categorical column that maps the values of one feature, ``key``, to ids with numpy."""

    key: str  # a dataclass field of each subclass

    def _build_ids(self, cache: _Cache) -> _Ids:
        array = self._id_array(_categorical_input(_feature(cache.features, self.key), self.key))
        return _Ids(torch.from_numpy(array).to(cache.device))

    def _id_array(self, array: np.ndarray) -> np.ndarray:
        raise NotImplementedError


def _private_cache(column: Any, attribute: str, build: Callable[[], Any]) -> Any:
    """A value computed once per (frozen) column object, stored outside its dataclass fields."""
    value = column.__dict__.get(attribute)
    if value is None:
        value = build()
        object.__setattr__(column, attribute, value)
    return value


@dataclasses.dataclass(frozen=True)
class NumericColumn(DenseColumn):
    """Real-valued feature (``numeric_column``). See ``numeric_column`` for the arguments."""

    key: str
    shape: tuple[int, ...] = (1,)
    default_value: Any = None
    dtype: torch.dtype = torch.float32
    normalizer_fn: Callable[[torch.Tensor], torch.Tensor] | None = None

    @property
    def name(self) -> str:
        return self.key

    @property
    def parents(self) -> list[Any]:
        return [self.key]

    @property
    def dense_dimension(self) -> int:
        return math.prod(self.shape)

    def _tensor(self, cache: _Cache) -> torch.Tensor:
        return cache.get(self, self._build)

    def _build(self, cache: _Cache) -> torch.Tensor:
        value = _feature(cache.features, self.key)
        if (type(value) is torch.Tensor and value.dtype == torch.float32 and value.dim() > 0
                and self.default_value is None and self.normalizer_fn is None
                and value.device == cache.device and value.numel() == value.shape[0] * self.dense_dimension):
            # The common case (what the input_fns yield), same result as the general path below.
            return value.reshape(value.shape[0], self.dense_dimension)
        if isinstance(value, torch.Tensor):
            tensor = value
        else:
            try:
                tensor = torch.as_tensor(np.asarray(value, dtype=np.float64))
            except (TypeError, ValueError) as exc:
                raise ValueError(f"Feature {self.key!r} of a numeric_column must hold numbers, "
                                 f"got {value!r:.100}: {exc}") from exc
        tensor = tensor.to(cache.device, torch.float32)
        if tensor.dim() == 0:
            raise ValueError(f"Feature {self.key!r} must have a batch dimension, got a scalar.")
        batch = tensor.shape[0]
        if tensor.numel() != batch * self.dense_dimension:
            raise ValueError(f"Feature {self.key!r} has shape {list(tensor.shape)}, which does not "
                             f"match the numeric_column shape {self.shape}: expected [batch] + "
                             f"{list(self.shape)} ({self.dense_dimension} values per row).")
        tensor = tensor.reshape((batch, *self.shape))
        if self.default_value is not None:
            default = torch.as_tensor(self.default_value, dtype=torch.float32, device=cache.device)
            tensor = torch.where(torch.isnan(tensor), default, tensor)
        if self.normalizer_fn is not None:
            tensor = self.normalizer_fn(tensor)
        return tensor.reshape(batch, self.dense_dimension).to(torch.float32)

    def _dense(self, cache: _Cache, table: torch.Tensor | None) -> torch.Tensor:
        return self._tensor(cache)


_INT_DTYPES = (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8)


@dataclasses.dataclass(frozen=True)
class BucketizedColumn(DenseColumn, CategoricalColumn):
    """Discretised numeric column (``bucketized_column``): one-hot for DNNs, ids for linear models."""

    source_column: NumericColumn
    boundaries: tuple[float, ...]

    @property
    def name(self) -> str:
        return f"{self.source_column.name}_bucketized"

    @property
    def key(self) -> str:
        return self.source_column.key

    @property
    def parents(self) -> list[Any]:
        return [self.source_column]

    @property
    def num_buckets(self) -> int:
        return (len(self.boundaries) + 1) * self.source_column.dense_dimension

    @property
    def dense_dimension(self) -> int:
        return self.num_buckets

    def _buckets(self, cache: _Cache) -> torch.Tensor:
        source = self.source_column._tensor(cache)
        boundaries = torch.tensor(self.boundaries, dtype=source.dtype, device=source.device)
        # right=True: a value equal to a boundary goes to the bucket above it, [b_i, b_i+1).
        return torch.bucketize(source.contiguous(), boundaries, right=True)

    def _build_ids(self, cache: _Cache) -> _Ids:
        buckets = self._buckets(cache)
        per_element = len(self.boundaries) + 1
        offsets = torch.arange(buckets.shape[1], device=buckets.device) * per_element
        return _Ids(buckets + offsets)

    def _dense(self, cache: _Cache, table: torch.Tensor | None) -> torch.Tensor:
        buckets = self._buckets(cache)
        one_hot = nn.functional.one_hot(buckets, len(self.boundaries) + 1)
        return one_hot.reshape(buckets.shape[0], -1).to(torch.float32)


class _VocabularyLookup(_KeyedCategoricalColumn):
    """Id lookup shared by the vocabulary list and file columns."""

    key: str
    dtype: type
    default_value: int | None
    num_oov_buckets: int

    @property
    def name(self) -> str:
        return self.key

    @property
    def parents(self) -> list[Any]:
        return [self.key]

    def _vocabulary(self) -> list[Any]:
        raise NotImplementedError

    def _index(self) -> dict[Any, int]:
        return _private_cache(self, "_index_cache",
                              lambda: {token: i for i, token in enumerate(self._vocabulary())})

    def _has_int_words(self) -> bool:
        return _private_cache(self, "_int_words_cache", lambda: any(
            isinstance(token, str) and token.lstrip("-").isdigit() for token in self._vocabulary()))

    def _id_array(self, array: np.ndarray) -> np.ndarray:
        codes, uniques = _factorize(array)
        index = self._index()
        size = len(index)
        default = -1 if self.default_value is None else int(self.default_value)
        if self.dtype is str:
            values: list[Any] = _text_uniques(uniques, self.key)
            given = [v for v in values if v is not None]
            if array.dtype.kind in "iu" and given and not self._has_int_words():
                # Ints are read as their decimal text ('7' for 7), which can only match a
                # vocabulary of such words; TF refuses int input to a string column outright.
                raise ValueError(
                    f"Column dtype and SparseTensors dtype must be compatible. key: {self.key}, "
                    f"column dtype: string, tensor dtype: int64 (ints such as {given[:3]} cannot match the "
                    f"vocabulary {list(index)[:5]}). Feed the column's text values, or use "
                    "categorical_column_with_identity / a vocabulary of ints (dtype=int) for ids.")
        else:
            if any(isinstance(v, (str, bytes)) and v for v in uniques):
                raise ValueError(f"Column dtype and SparseTensors dtype must be compatible. key: "
                                 f"{self.key}, column dtype: int64, tensor dtype: string.")
            values = [None if isinstance(v, (str, bytes)) or int(v) == -1 else int(v)
                      for v in uniques]
        table: list[int] = []
        for value in values:
            if value is None:
                table.append(-1)
                continue
            found = index.get(value)
            if found is not None:
                table.append(found)
            elif self.num_oov_buckets:
                # TF hashes OOV values (ints as their decimal text) into the OOV buckets.
                table.append(size + fingerprint64(str(value)) % self.num_oov_buckets)
            else:
                table.append(default)
        return _gather(codes, table, array.shape)


@dataclasses.dataclass(frozen=True)
class VocabularyListCategoricalColumn(_VocabularyLookup):
    """Categorical column with an in-memory vocabulary (``categorical_column_with_vocabulary_list``)."""

    key: str
    vocabulary_list: tuple[Any, ...]
    dtype: type = str
    default_value: int = -1
    num_oov_buckets: int = 0

    @property
    def num_buckets(self) -> int:
        return len(self.vocabulary_list) + self.num_oov_buckets

    def _vocabulary(self) -> list[Any]:
        return list(self.vocabulary_list)


@dataclasses.dataclass(frozen=True)
class VocabularyFileCategoricalColumn(_VocabularyLookup):
    """Categorical column with a vocabulary file, line number = id
    (``categorical_column_with_vocabulary_file``)."""

    key: str
    vocabulary_file: str
    vocabulary_size: int
    num_oov_buckets: int = 0
    default_value: int | None = None
    dtype: type = str

    @property
    def num_buckets(self) -> int:
        return self.vocabulary_size + self.num_oov_buckets

    def _vocabulary(self) -> list[Any]:
        try:
            with open(self.vocabulary_file, encoding="utf-8") as handle:
                lines = [line.rstrip("\r\n") for line in handle]
        except OSError as exc:
            raise ValueError(f"vocabulary_file in {self.key} cannot be read: {exc}.") from exc
        if len(lines) < self.vocabulary_size:
            raise ValueError(f"Invalid vocab_size {self.vocabulary_size} in {self.key}: the "
                             f"vocabulary_file {self.vocabulary_file!r} has only {len(lines)} lines.")
        tokens: list[Any] = lines[:self.vocabulary_size]
        if self.dtype is int:
            try:
                tokens = [int(t) for t in tokens]
            except ValueError as exc:
                raise ValueError(f"vocabulary_file {self.vocabulary_file!r} of integer column "
                                 f"{self.key} holds a non-integer line: {exc}.") from exc
        if len(set(tokens)) != len(tokens):
            duplicates = sorted({str(t) for t, count in collections.Counter(tokens).items() if count > 1})[:10]
            raise ValueError(f"Duplicate keys in vocabulary_file {self.vocabulary_file!r}, "
                             f"column_name: {self.key}: {duplicates}.")
        return tokens


@dataclasses.dataclass(frozen=True)
class IdentityCategoricalColumn(_KeyedCategoricalColumn):
    """Integer ids used as they are (``categorical_column_with_identity``)."""

    key: str
    number_buckets: int
    default_value: int | None = None

    @property
    def name(self) -> str:
        return self.key

    @property
    def parents(self) -> list[Any]:
        return [self.key]

    @property
    def num_buckets(self) -> int:
        return self.number_buckets

    def _id_array(self, array: np.ndarray) -> np.ndarray:
        if _is_text(array):
            raise ValueError(f"Column dtype and SparseTensors dtype must be compatible. key: "
                             f"{self.key}, column dtype: int64, tensor dtype: string. "
                             "categorical_column_with_identity needs integer ids; map strings "
                             "with a vocabulary or hash column.")
        missing = array == -1
        out_of_range = ~missing & ((array < 0) | (array >= self.number_buckets))
        if out_of_range.any():
            if self.default_value is None:
                bad = sorted(set(array[out_of_range].tolist()))
                what = ("Negative bucket index for categorical column" if bad[0] < 0 else
                        "Bucket index for categorical column exceeds number of buckets")
                raise ValueError(f"{what}: column {self.key!r} got ids {bad[:10]!r}, expected "
                                 f"values in [0, {self.number_buckets}) or -1 (missing). Set "
                                 "default_value to map out-of-range ids to one bucket.")
            array = np.where(out_of_range, self.default_value, array)
        return array


@dataclasses.dataclass(frozen=True)
class HashedCategoricalColumn(_KeyedCategoricalColumn):
    """Values hashed into buckets (``categorical_column_with_hash_bucket``)."""

    key: str
    hash_bucket_size: int
    dtype: type = str

    @property
    def name(self) -> str:
        return self.key

    @property
    def parents(self) -> list[Any]:
        return [self.key]

    @property
    def num_buckets(self) -> int:
        return self.hash_bucket_size

    def _id_array(self, array: np.ndarray) -> np.ndarray:
        codes, uniques = _factorize(array)
        size = self.hash_bucket_size
        # Integers are hashed as their decimal text, as TF does (as_string before hashing).
        table = [-1 if v is None else fingerprint64(v) % size
                 for v in _text_uniques(uniques, self.key)]
        return _gather(codes, table, array.shape)


@dataclasses.dataclass(frozen=True)
class WeightedCategoricalColumn(CategoricalColumn):
    """A categorical column whose ids carry weights from another feature
    (``weighted_categorical_column``)."""

    categorical_column: CategoricalColumn
    weight_feature_key: str
    dtype: torch.dtype = torch.float32

    @property
    def name(self) -> str:
        return f"{self.categorical_column.name}_weighted_by_{self.weight_feature_key}"

    @property
    def parents(self) -> list[Any]:
        return [self.categorical_column, self.weight_feature_key]

    @property
    def num_buckets(self) -> int:
        return self.categorical_column.num_buckets

    def _build_ids(self, cache: _Cache) -> _Ids:
        ids = self.categorical_column._ids(cache).ids
        raw = _feature(cache.features, self.weight_feature_key)
        if not isinstance(raw, torch.Tensor):
            raw = torch.as_tensor(np.asarray(raw, dtype=np.float32))
        weights = raw.to(cache.device, torch.float32)
        weights = weights[:, None] if weights.dim() == 1 else weights.reshape(weights.shape[0], -1)
        if tuple(weights.shape) != tuple(ids.shape):
            raise ValueError(f"Weight feature {self.weight_feature_key!r} has shape "
                             f"{list(weights.shape)}, but the ids of {self.categorical_column.name}"
                             f" have shape {list(ids.shape)}; they must match.")
        return _Ids(ids, weights)


@dataclasses.dataclass(frozen=True)
class CrossedColumn(CategoricalColumn):
    """Hashed cross of categorical features (``crossed_column``)."""

    keys: tuple[Any, ...]
    hash_bucket_size: int
    hash_key: int | None = None

    def _leaf_keys(self) -> list[Any]:
        leaves: list[Any] = []
        for key in self.keys:
            leaves.extend(key._leaf_keys() if isinstance(key, CrossedColumn) else [key])
        return leaves

    @property
    def name(self) -> str:
        names = [k if isinstance(k, str) else k.name for k in self._leaf_keys()]
        return "_X_".join(sorted(names))

    @property
    def parents(self) -> list[Any]:
        return list(self.keys)

    @property
    def num_buckets(self) -> int:
        return self.hash_bucket_size

    def _leaf_order(self, cache: _Cache) -> list[tuple[Any, bool]]:
        """(leaf, is_dense) in TF's crossing order.

        TF's ``sparse_cross_hashed`` passes its sparse inputs first and its dense ones after,
        each in the order listed: categorical columns give sparse ids, and a raw feature key is
        sparse only when its input is (in the engine, a list of per-row lists, the counterpart
        of a ``tf.io.VarLenFeature``); a tensor, array or flat list is dense, so
        ``['origin', bucketized]`` crosses the bucket ids before ``origin``.
        """
        sparse: list[tuple[Any, bool]] = []
        dense: list[tuple[Any, bool]] = []
        for key in self._leaf_keys():
            if isinstance(key, str) and not _is_ragged(_feature(cache.features, key)):
                dense.append((key, True))
            else:
                sparse.append((key, False))
        return sparse + dense

    def _hashes(self, key: Any, cache: _Cache, dense: bool) -> tuple[np.ndarray, np.ndarray]:
        """(uint64 values to cross [B, K], valid mask [B, K]) of one leaf of the cross.

        As TF's ``SparseCrossOp``: strings are fingerprinted, ints used as they are (``-1`` as the
        uint64 ``2**64 - 1``). Every value of a dense raw feature is crossed, ``''`` and ``-1``
        included; a sparse one drops its padding; a vocabulary column's out-of-vocabulary id
        ``-1`` (its ``default_value``) is crossed, only missing inputs are dropped.
        """
        if isinstance(key, str):
            array = _categorical_input(_feature(cache.features, key), key)
            if _is_text(array):
                codes, uniques = _factorize(array)
                texts = _text_uniques(uniques, key)  # '' -> None
                if dense:  # a dense string tensor's '' is a value like any other
                    texts = ["" if t is None and isinstance(u, (str, bytes)) else t
                             for t, u in zip(texts, uniques)]
                table = np.array([0 if t is None else fingerprint64(t) for t in texts] + [0],
                                 dtype=np.uint64)
                valid_table = np.array([t is not None for t in texts] + [False])
                return (table[codes].reshape(array.shape),
                        valid_table[codes].reshape(array.shape))
            return array.astype(np.uint64), np.ones(array.shape, bool) if dense else array != -1
        ids = key._ids(cache).ids.cpu().numpy()
        if isinstance(key, _VocabularyLookup):
            present = _present(_categorical_input(_feature(cache.features, key.key), key.key), key.key)
            return ids.astype(np.uint64), present
        return np.where(ids >= 0, ids, 0).astype(np.uint64), ids >= 0

    def _build_ids(self, cache: _Cache) -> _Ids:
        hashed: np.ndarray | None = None
        valid: np.ndarray | None = None
        for key, dense in self._leaf_order(cache):
            values, mask = self._hashes(key, cache, dense)
            if hashed is None or valid is None:
                seed = _DEFAULT_HASH_KEY if self.hash_key is None else self.hash_key
                hashed = np.full((values.shape[0], 1), seed & _M64, dtype=np.uint64)
                valid = np.ones((values.shape[0], 1), dtype=bool)
            batch = hashed.shape[0]
            if values.shape[0] != batch:
                raise ValueError(f"Features crossed in {self.name} have different batch sizes: "
                                 f"{batch} and {values.shape[0]} ({key!r:.80}).")
            hashed = fingerprint_cat64(hashed[:, :, None], values[:, None, :]).reshape(batch, -1)
            valid = (valid[:, :, None] & mask[:, None, :]).reshape(batch, -1)
        if hashed is None or valid is None:  # crossed_column asks for two keys or more
            raise ValueError(f"Crossed column {self.name!r} crosses no features: give it two keys or more.")
        ids = (hashed % np.uint64(self.hash_bucket_size)).astype(np.int64)
        ids[~valid] = -1
        return _Ids(torch.from_numpy(ids).to(cache.device))


@dataclasses.dataclass(frozen=True)
class IndicatorColumn(DenseColumn):
    """Multi-hot (count) representation of a categorical column (``indicator_column``)."""

    categorical_column: CategoricalColumn

    @property
    def name(self) -> str:
        return f"{self.categorical_column.name}_indicator"

    @property
    def parents(self) -> list[Any]:
        return [self.categorical_column]

    @property
    def dense_dimension(self) -> int:
        return self.categorical_column.num_buckets

    def _dense(self, cache: _Cache, table: torch.Tensor | None) -> torch.Tensor:
        ids = self.categorical_column._ids(cache)
        return ids.multi_hot(self.dense_dimension, torch.float32, cache.device)


@dataclasses.dataclass(frozen=True)
class EmbeddingColumn(DenseColumn):
    """Dense embedding of a categorical column (``embedding_column``)."""

    categorical_column: CategoricalColumn
    dimension: int
    combiner: str = "mean"
    initializer: Callable[..., Any] | None = None
    ckpt_to_load_from: str | None = None
    tensor_name_in_ckpt: str | None = None
    max_norm: float | None = None
    trainable: bool = True

    @property
    def name(self) -> str:
        return f"{self.categorical_column.name}_embedding"

    @property
    def parents(self) -> list[Any]:
        return [self.categorical_column]

    @property
    def dense_dimension(self) -> int:
        return self.dimension

    def initial_value(self) -> torch.Tensor:
        """The table's initial value [num_buckets, dimension] (checkpoint, initializer or TF's
        default: truncated normal, stddev 1/sqrt(dimension), cut at 2 stddev)."""
        shape = (self.categorical_column.num_buckets, self.dimension)
        if self.ckpt_to_load_from is not None:
            from estimator_engine.checkpoints import load_variable

            if self.tensor_name_in_ckpt is None:  # embedding_column checks this; a direct construction may not
                raise ValueError("Must specify both `ckpt_to_load_from` and `tensor_name_in_ckpt` or none "
                                 f"of them (embedding column {self.name}).")

            value = torch.as_tensor(load_variable(self.ckpt_to_load_from, self.tensor_name_in_ckpt),
                                    dtype=torch.float32)
            if tuple(value.shape) != shape:
                raise ValueError(f"Tensor {self.tensor_name_in_ckpt!r} in {self.ckpt_to_load_from} "
                                 f"has shape {list(value.shape)}, but embedding column {self.name} "
                                 f"needs {list(shape)} (num_buckets, dimension).")
            return value.clone()
        if self.initializer is not None:
            value = torch.as_tensor(self.initializer(shape), dtype=torch.float32)
            if tuple(value.shape) != shape:
                raise ValueError(f"initializer of embedding column {self.name} returned shape "
                                 f"{list(value.shape)}, expected {list(shape)}.")
            return value.clone()
        stddev = 1.0 / math.sqrt(self.dimension)
        return nn.init.trunc_normal_(torch.empty(shape), 0.0, stddev, -2 * stddev, 2 * stddev)

    def _dense(self, cache: _Cache, table: torch.Tensor | None) -> torch.Tensor:
        if table is None:
            raise ValueError(f"Embedding column {self.name} needs its table; use it through "
                             "DenseFeatures or LinearModel.")
        return self.categorical_column._ids(cache).combine(table, self.combiner, self.max_norm)


@dataclasses.dataclass(frozen=True)
class SharedEmbeddingColumn(EmbeddingColumn):
    """An embedding whose table is shared by several categorical columns (``shared_embedding_columns``).

    The table is named after ``shared_embedding_collection_name``
    (``<layer>/<collection>/embedding_weights``) and owned once by the ``DenseFeatures`` that
    uses the columns.
    """

    shared_embedding_collection_name: str = ""

    @property
    def name(self) -> str:
        return f"{self.categorical_column.name}_shared_embedding"


# --------------------------------------------------------------------------------------------
# Constructors (TF's signatures and validation).
# --------------------------------------------------------------------------------------------


def _check_shape(shape: Any, key: str) -> tuple[int, ...]:
    if _is_int(shape):
        shape = (shape,)
    if not isinstance(shape, (list, tuple, torch.Size)):
        raise ValueError(f"shape must be an int or a list/tuple of ints, got {shape!r}. key: {key}")
    shape = tuple(shape)
    if not all(_is_int(d) for d in shape):
        raise ValueError(f"shape dimensions must be integer. shape: {shape}, key: {key}")
    if not all(d > 0 for d in shape):
        raise ValueError(f"shape dimensions must be greater than 0. shape: {shape}, key: {key}")
    return tuple(int(d) for d in shape)


def numeric_column(key: str, shape: int | Sequence[int] = (1,), default_value: Any = None,
                   dtype: torch.dtype = torch.float32,
                   normalizer_fn: Callable[[torch.Tensor], torch.Tensor] | None = None
                   ) -> NumericColumn:
    """Real-valued feature ``features[key]`` of ``shape`` per row (TF's ``numeric_column``).

    Args:
        key: the feature's key in the features dict; also the column's name.
        shape: the per-row shape; the dense output has ``prod(shape)`` values per row.
        default_value: a number (or nested list of ``shape``) replacing ``NaN`` (missing) values.
        dtype: the feature's dtype (int or float); the output is float32.
        normalizer_fn: applied to the ``[B, *shape]`` float tensor, e.g. ``lambda x: (x - 3) / 2``.

    Example:
        >>> numeric_column("age").name, numeric_column("pixels", shape=(2, 2)).dense_dimension
        ('age', 4)
    """
    _check_key(key)
    shape = _check_shape(shape, key)
    if isinstance(dtype, torch.dtype):
        ok = dtype.is_floating_point or dtype in _INT_DTYPES
    else:
        try:
            ok = np.dtype(dtype).kind in "iuf"
        except TypeError:
            ok = False
    if not ok:
        raise ValueError(f"dtype must be convertible to float. dtype: {dtype!r}, key: {key}")
    if default_value is not None:
        try:
            array = np.asarray(default_value, dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError(f"default_value must be compatible with dtype. default_value: "
                             f"{default_value!r}, dtype: {dtype}, key: {key}") from None
        if array.ndim and array.shape != shape:
            raise ValueError(f"The shape of default_value must be equal to given shape. "
                             f"default_value: {default_value!r}, shape: {shape}, key: {key}")
        default_value = float(array) if array.ndim == 0 else _freeze(array.tolist())
    if normalizer_fn is not None and not callable(normalizer_fn):
        raise TypeError(f"normalizer_fn must be a callable. Given: {normalizer_fn!r}")
    return NumericColumn(key, shape, default_value, dtype, normalizer_fn)


def _freeze(value: Any) -> Any:
    return tuple(_freeze(v) for v in value) if isinstance(value, list) else value


def bucketized_column(source_column: NumericColumn, boundaries: Sequence[float]) -> BucketizedColumn:
    """Buckets of a numeric column by ``boundaries`` (TF's ``bucketized_column``).

    Boundaries ``[b0, ..., bn]`` give ``n + 2`` buckets ``(-inf, b0), [b0, b1), ..., [bn, inf)``
    per element of the source; a value equal to a boundary goes to the bucket above it.

    Example:
        >>> age = bucketized_column(numeric_column("age"), [18, 25, 30])
        >>> age.name, age.num_buckets
        ('age_bucketized', 4)
    """
    if not isinstance(source_column, NumericColumn):
        raise ValueError("source_column must be a column generated with numeric_column(). "
                         f"Given: {source_column!r}")
    if len(source_column.shape) > 1:
        raise ValueError(f"source_column must be one-dimensional column. Given: {source_column!r}")
    if isinstance(boundaries, (np.ndarray, torch.Tensor)) and boundaries.ndim == 1:
        boundaries = boundaries.tolist()  # friendlier than TF, which takes lists and tuples only
    if not isinstance(boundaries, (list, tuple)):
        raise ValueError(f"boundaries must be a sorted list. Given: {boundaries!r}")
    if not boundaries:
        raise ValueError("boundaries must not be empty.")
    if not all(isinstance(b, (int, float, np.integer, np.floating)) and not isinstance(b, bool)
               for b in boundaries):
        raise ValueError(f"boundaries must be a sorted list of numbers. Given: {boundaries!r}")
    for low, high in itertools.pairwise(boundaries):
        if low >= high:
            raise ValueError("boundaries must be a sorted list. They must be strictly increasing; "
                             f"given: {list(boundaries)!r}")
    return BucketizedColumn(source_column, tuple(float(b) for b in boundaries))


def categorical_column_with_vocabulary_list(key: str, vocabulary_list: Sequence[Any],
                                            dtype: Any = None, default_value: int = -1,
                                            num_oov_buckets: int = 0
                                            ) -> VocabularyListCategoricalColumn:
    """Ids by position in ``vocabulary_list`` (TF's ``categorical_column_with_vocabulary_list``).

    Out-of-vocabulary values are hashed into ``num_oov_buckets`` extra buckets
    ``[len(vocabulary_list), len(vocabulary_list) + num_oov_buckets)`` when it is > 0, else get
    ``default_value`` (-1: dropped). Missing values (``''``, ``-1``) are dropped.

    Example:
        >>> col = categorical_column_with_vocabulary_list("color", ["R", "G", "B"], num_oov_buckets=2)
        >>> col.num_buckets
        5
    """
    _check_key(key)
    if vocabulary_list is None or isinstance(vocabulary_list, (str, bytes)) or len(vocabulary_list) < 1:
        raise ValueError(f"vocabulary_list {vocabulary_list!r} must be non-empty, column_name: {key}")
    vocabulary = list(vocabulary_list.tolist() if isinstance(vocabulary_list, np.ndarray)
                      else vocabulary_list)
    vocabulary = [v.decode("utf-8") if isinstance(v, bytes) else v for v in vocabulary]
    if len(set(vocabulary)) != len(vocabulary):
        raise ValueError(f"Duplicate keys in vocabulary_list {vocabulary_list!r}, column_name: {key}")
    if all(isinstance(v, str) for v in vocabulary):
        vocabulary_dtype: type = str
    elif all(_is_int(v) for v in vocabulary):
        vocabulary_dtype = int
        vocabulary = [int(v) for v in vocabulary]
    else:
        types = sorted({type(v).__name__ for v in vocabulary})
        raise ValueError(f"column_name: {key} vocabulary dtype must be string or integer. "
                         f"dtype: {types}.")
    if num_oov_buckets:
        if default_value != -1:
            raise ValueError(f"Can't specify both num_oov_buckets and default_value in {key}.")
        _check_num_oov(num_oov_buckets, key)
    if dtype is None:
        dtype = vocabulary_dtype
    else:
        dtype = _categorical_dtype(dtype, f"column_name: {key}")
        if dtype is not vocabulary_dtype:
            raise ValueError(f"dtype {dtype.__name__} and vocabulary dtype "
                             f"{vocabulary_dtype.__name__} do not match, column_name: {key}")
    if not _is_int(default_value):
        raise ValueError(f"default_value must be an int (-1: drop OOV values), got "
                         f"{default_value!r}, column_name: {key}")
    return VocabularyListCategoricalColumn(key, tuple(vocabulary), dtype, int(default_value),
                                           int(num_oov_buckets))


def categorical_column_with_vocabulary_file(key: str, vocabulary_file: str | os.PathLike,
                                            vocabulary_size: int | None = None,
                                            num_oov_buckets: int = 0,
                                            default_value: int | None = None, dtype: Any = str
                                            ) -> VocabularyFileCategoricalColumn:
    """Ids by line number in a vocabulary file (TF's ``categorical_column_with_vocabulary_file``).

    ``vocabulary_size`` (default: the number of lines) keeps the first N lines. The file is read
    (and checked for duplicates) the first time a batch is transformed. OOV and missing values
    as for ``categorical_column_with_vocabulary_list``; ``default_value=None`` means -1 (dropped).

    Example:
        >>> import tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "vocab.txt")
        >>> _ = open(path, "w").write("doctor\\nlawyer\\n")
        >>> categorical_column_with_vocabulary_file("job", path, num_oov_buckets=1).num_buckets
        3
    """
    _check_key(key)
    if vocabulary_file is None or vocabulary_file == "":
        raise ValueError(f"Missing vocabulary_file in {key}.")
    vocabulary_file = os.fspath(vocabulary_file)
    if vocabulary_size is None:
        if not os.path.isfile(vocabulary_file):
            raise ValueError(f"vocabulary_file in {key} does not exist.")
        with open(vocabulary_file, "rb") as handle:
            vocabulary_size = sum(1 for _ in handle)
    if not _is_int(vocabulary_size) or vocabulary_size < 1:
        raise ValueError(f"Invalid vocabulary_size in {key}.")
    if num_oov_buckets:
        if default_value is not None:
            raise ValueError(f"Can't specify both num_oov_buckets and default_value in {key}.")
        _check_num_oov(num_oov_buckets, key)
    if default_value is not None and not _is_int(default_value):
        raise ValueError(f"default_value must be an int or None, got {default_value!r}, "
                         f"column_name: {key}")
    dtype = _categorical_dtype(dtype, f"column_name: {key}")
    return VocabularyFileCategoricalColumn(key, vocabulary_file, int(vocabulary_size),
                                           int(num_oov_buckets), default_value, dtype)


def categorical_column_with_identity(key: str, num_buckets: int,
                                     default_value: int | None = None) -> IdentityCategoricalColumn:
    """Integer inputs used as ids in ``[0, num_buckets)`` (TF's ``categorical_column_with_identity``).

    ``-1`` is missing (dropped). Other values outside the range become ``default_value``, or raise
    ``ValueError`` when it is ``None``.

    Example:
        >>> categorical_column_with_identity("video_id", num_buckets=1000).num_buckets
        1000
    """
    _check_key(key)
    if not _is_int(num_buckets) or num_buckets < 1:
        raise ValueError(f"num_buckets {num_buckets!r} < 1, column_name {key}")
    if default_value is not None and (not _is_int(default_value) or default_value < 0
                                      or default_value >= num_buckets):
        raise ValueError(f"default_value {default_value!r} not in range [0, {num_buckets}), "
                         f"column_name {key}")
    return IdentityCategoricalColumn(key, int(num_buckets),
                                     None if default_value is None else int(default_value))


def categorical_column_with_hash_bucket(key: str, hash_bucket_size: int,
                                        dtype: Any = str) -> HashedCategoricalColumn:
    """Ids = ``Fingerprint64(value) % hash_bucket_size`` (TF's
    ``categorical_column_with_hash_bucket``); integers are hashed as their decimal text.

    Example:
        >>> categorical_column_with_hash_bucket("city", 100).num_buckets
        100
    """
    _check_key(key)
    if hash_bucket_size is None:
        raise ValueError(f"hash_bucket_size must be set. key: {key}")
    if not _is_int(hash_bucket_size) or hash_bucket_size < 1:
        raise ValueError(f"hash_bucket_size must be at least 1. hash_bucket_size: "
                         f"{hash_bucket_size!r}, key: {key}")
    dtype = _categorical_dtype(dtype, f"column_name: {key}")
    return HashedCategoricalColumn(key, int(hash_bucket_size), dtype)


def weighted_categorical_column(categorical_column: CategoricalColumn, weight_feature_key: str,
                                dtype: torch.dtype = torch.float32) -> WeightedCategoricalColumn:
    """Gives each id of ``categorical_column`` the weight in ``features[weight_feature_key]``
    (same shape as the ids); ids with weight <= 0 are dropped (TF's ``weighted_categorical_column``).

    Example:
        >>> words = categorical_column_with_identity("words", 10)
        >>> weighted_categorical_column(words, "counts").name
        'words_weighted_by_counts'
    """
    if not isinstance(categorical_column, CategoricalColumn):
        raise ValueError("categorical_column must be a CategoricalColumn. Given: "
                         f"{categorical_column!r}")
    _check_key(weight_feature_key)
    if not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
        raise ValueError(f"dtype {dtype!r} is not convertible to float.")
    return WeightedCategoricalColumn(categorical_column, weight_feature_key, dtype)


def embedding_column(categorical_column: CategoricalColumn, dimension: int, combiner: str = "mean",
                     initializer: Callable[..., Any] | None = None,
                     ckpt_to_load_from: str | os.PathLike | None = None,
                     tensor_name_in_ckpt: str | None = None, max_norm: float | None = None,
                     trainable: bool = True) -> EmbeddingColumn:
    """Dense, trainable embedding of a categorical column (TF's ``embedding_column``).

    Args:
        categorical_column: the ids to embed.
        dimension: the embedding size.
        combiner: how several ids of one row combine: 'mean' (default), 'sqrtn' or 'sum'.
        initializer: a callable ``(shape) -> tensor/array`` giving the table's initial value;
            default: truncated normal, mean 0, stddev ``1/sqrt(dimension)``.
        ckpt_to_load_from, tensor_name_in_ckpt: initialise the table from this variable of this
            checkpoint (an ``ee`` model_dir or checkpoint file); both or neither.
        max_norm: rows with a larger L2 norm are scaled down to it before combining.
        trainable: whether the table is trained.

    Example:
        >>> job = categorical_column_with_vocabulary_list("job", ["doctor", "lawyer"])
        >>> embedding_column(job, dimension=4).name
        'job_embedding'
    """
    if not isinstance(categorical_column, CategoricalColumn):
        raise ValueError("categorical_column must be a CategoricalColumn (wrap numeric features "
                         f"with bucketized_column). Given: {categorical_column!r}")
    if not _is_int(dimension) or dimension < 1:
        raise ValueError(f"Invalid dimension {dimension!r}.")
    if combiner not in _COMBINERS:
        raise ValueError(f"combiner must be one of {list(_COMBINERS)}, got {combiner!r}.")
    if initializer is not None and not callable(initializer):
        raise ValueError("initializer must be callable if specified. Embedding of column_name: "
                         f"{categorical_column.name}")
    if (ckpt_to_load_from is None) != (tensor_name_in_ckpt is None):
        raise ValueError("Must specify both `ckpt_to_load_from` and `tensor_name_in_ckpt` or none "
                         "of them.")
    if max_norm is not None and not (isinstance(max_norm, (int, float)) and max_norm > 0):
        raise ValueError(f"max_norm must be a positive number or None, got {max_norm!r}.")
    return EmbeddingColumn(categorical_column, int(dimension), combiner, initializer,
                           None if ckpt_to_load_from is None else os.fspath(ckpt_to_load_from),
                           tensor_name_in_ckpt, None if max_norm is None else float(max_norm),
                           bool(trainable))


def shared_embedding_columns(categorical_columns: Sequence[CategoricalColumn], dimension: int,
                             combiner: str = "mean", initializer: Callable[..., Any] | None = None,
                             shared_embedding_collection_name: str | None = None,
                             ckpt_to_load_from: str | os.PathLike | None = None,
                             tensor_name_in_ckpt: str | None = None, max_norm: float | None = None,
                             trainable: bool = True) -> list[SharedEmbeddingColumn]:
    """Embeddings of several categorical columns through one shared table (TF's
    ``shared_embedding_columns`` / ``shared_embeddings``).

    Each returned column embeds its own ids; all look rows up in the same ``[num_buckets,
    dimension]`` table, named ``<collection>/embedding_weights`` inside the ``DenseFeatures`` /
    ``input_layer`` that uses them. The default collection name is the sorted column names
    joined by ``_`` plus ``_shared_embedding``.

    Args:
        categorical_columns: columns with the same ``num_buckets`` (e.g. watched and
            to-watch video ids over one vocabulary).
        dimension, combiner, initializer, ckpt_to_load_from, tensor_name_in_ckpt, max_norm,
        trainable: as in ``embedding_column``.
        shared_embedding_collection_name: the table's name.

    Example:
        >>> a = categorical_column_with_identity("a", 3)
        >>> b = categorical_column_with_identity("b", 3)
        >>> [c.name for c in shared_embedding_columns([b, a], 2)]
        ['b_shared_embedding', 'a_shared_embedding']
        >>> shared_embedding_columns([a, b], 2)[0].shared_embedding_collection_name
        'a_b_shared_embedding'
    """
    if isinstance(categorical_columns, (CategoricalColumn, str)) or not isinstance(categorical_columns, Iterable):
        raise ValueError(f"categorical_columns must be a list of categorical columns, given: "
                         f"{categorical_columns!r:.200}.")
    columns = list(categorical_columns)
    if not columns:
        raise ValueError("categorical_columns must not be empty.")
    for column in columns:
        if not isinstance(column, CategoricalColumn):
            raise ValueError(f"All categorical_columns must be subclasses of _CategoricalColumn. "
                             f"Given: {column!r:.200}, of type: {type(column).__name__}")
    first = columns[0]
    for column in columns[1:]:
        if column.num_buckets != first.num_buckets:
            raise ValueError(f"To use shared_embedding_column, all categorical_columns must have the "
                             f"same number of buckets. Given column: {first.name} with buckets: "
                             f"{first.num_buckets} does not match column: {column.name} with "
                             f"buckets: {column.num_buckets}")
    if shared_embedding_collection_name is None:
        shared_embedding_collection_name = "_".join(sorted(c.name for c in columns)) + "_shared_embedding"
    elif not isinstance(shared_embedding_collection_name, str) or not shared_embedding_collection_name:
        raise ValueError(f"shared_embedding_collection_name must be a non-empty string, given: "
                         f"{shared_embedding_collection_name!r}.")
    # embedding_column's checks, once per column (same messages).
    base = [embedding_column(c, dimension, combiner, initializer, ckpt_to_load_from,
                             tensor_name_in_ckpt, max_norm, trainable) for c in columns]
    return [SharedEmbeddingColumn(**{f.name: getattr(e, f.name) for f in dataclasses.fields(EmbeddingColumn)},
                                  shared_embedding_collection_name=shared_embedding_collection_name)
            for e in base]


shared_embeddings = shared_embedding_columns


def indicator_column(categorical_column: CategoricalColumn) -> IndicatorColumn:
    """Multi-hot representation of a categorical column (TF's ``indicator_column``): for each row
    a ``num_buckets`` vector of id counts.

    Example:
        >>> color = categorical_column_with_vocabulary_list("color", ["R", "G"])
        >>> indicator_column(color).dense_dimension
        2
    """
    if not isinstance(categorical_column, CategoricalColumn):
        raise ValueError("Unsupported input type. Input must be a CategoricalColumn. Given: "
                         f"{categorical_column!r}")
    return IndicatorColumn(categorical_column)


def crossed_column(keys: Sequence[str | CategoricalColumn], hash_bucket_size: int,
                   hash_key: int | None = None) -> CrossedColumn:
    """Hashed cross of features (TF's ``crossed_column``), for linear models or via embeddings.

    ``keys`` are feature keys (raw str or int values) or categorical columns (their ids), not
    hash bucket columns. Each row gets one id per combination of its values:
    ``FingerprintCat64`` chain from ``hash_key`` over the values' fingerprints, modulo
    ``hash_bucket_size``. The name joins the sorted key names with ``'_X_'``.

    The values are chained in TF's order, not the listed one: categorical columns and raw
    features given as lists of per-row lists (TF's sparse inputs) first, then raw features given
    as a tensor, array or flat list (dense inputs), each group in the listed order. A dense raw
    feature crosses all its values (``''`` and ``-1`` too), as TF does.

    Example:
        >>> crossed_column(["b", "a"], 1000).name
        'a_X_b'
    """
    if not _is_int(hash_bucket_size) or hash_bucket_size < 1:
        raise ValueError(f"hash_bucket_size must be > 1. hash_bucket_size: {hash_bucket_size!r}")
    if not keys or isinstance(keys, (str, bytes)) or len(keys) < 2:
        raise ValueError(f"keys must be a list with length > 1. Given: {keys!r}")
    for key in keys:
        if not isinstance(key, (str, CategoricalColumn)):
            raise ValueError("Unsupported key type. All keys must be either string, or categorical "
                             f"column except HashedCategoricalColumn. Given: {key!r}")
        if isinstance(key, HashedCategoricalColumn):
            raise ValueError("categorical_column_with_hash_bucket is not supported for crossing. "
                             "Hashing before crossing will increase probability of collision. "
                             f"Instead, use the feature name as a string. Given: {key!r}")
        if isinstance(key, WeightedCategoricalColumn):  # TF raises this when the cross is built
            raise ValueError("crossed_column does not support weight_tensor, but the given column "
                             f"populates weight_tensor. Given column: {key.name}")
    if hash_key is not None and not _is_int(hash_key):
        raise ValueError(f"hash_key must be an int or None, got {hash_key!r}.")
    return CrossedColumn(tuple(keys), int(hash_bucket_size), hash_key)


# --------------------------------------------------------------------------------------------
# Modules.
# --------------------------------------------------------------------------------------------


def _sorted_columns(feature_columns: Any, accept: tuple[type, ...], message: str) -> list[Any]:
    if isinstance(feature_columns, FeatureColumn):
        feature_columns = [feature_columns]
    if isinstance(feature_columns, (str, bytes, Mapping)) or not isinstance(feature_columns, Iterable):
        raise ValueError(f"feature_columns must be a list of feature columns, got {feature_columns!r:.200}")
    columns = list(feature_columns)
    if not columns:
        raise ValueError("feature_columns must not be empty.")
    for column in columns:
        if not isinstance(column, accept):
            raise ValueError(message.format(column))
    columns = sorted(columns, key=lambda c: c.name)  # TF orders columns by name
    for first, second in itertools.pairwise(columns):
        if first.name == second.name:
            raise ValueError(
                f"Duplicate feature column name found for columns: {first.name} and "
                f"{second.name}. This usually means that these columns refer to same base "
                "feature. Either one must be discarded or a different transformation can be "
                "applied on the same base feature.")
    return columns


def _device_of(module: _Tracking) -> torch.device:
    return module._device_anchor.device


def _inner(module: nn.Module) -> nn.Module:
    """The module inside a DDP (``.module``) or ``torch.compile`` (``._orig_mod``) wrapper."""
    for attribute in ("module", "_orig_mod"):
        inner = getattr(module, attribute, None)
        if isinstance(inner, nn.Module):
            return _inner(inner)
    return module


def _tracked_module(default_name: str, config: tuple[Any, ...], factory: Callable[[], nn.Module]
                    ) -> nn.Module:
    """``ee.get_module`` under TF's layer scope name: ``<default_name>``, then ``_1``, ``_2``, ...

    The first registered module of that type whose ``_config`` equals ``config`` is reused (a
    ``model_fn`` runs once per batch, so the same call finds its own module again); a different
    configuration takes the next free name, as TF's ``variable_scope(default_name=...)`` does.
    """
    from estimator_engine.model_state import get_module  # sibling module, imported on use

    index = 0
    while True:
        name = default_name if index == 0 else f"{default_name}_{index}"
        module = get_module(name, factory)
        if getattr(_inner(module), "_config", None) == config:
            return module
        index += 1


class _Tracking(nn.Module):
    """Makes a DenseFeatures / LinearModel object own tracked weights inside a running Estimator.

    Outside an Estimator the object computes with its own parameters (a Keras layer owns its
    weights). Inside one (``model_fn``), weights must survive the per-batch ``model_fn`` calls and
    be checkpointed, restored, warm-started and DDP-wrapped: an object not registered through
    ``ee.get_module`` registers itself under TF's layer name (``dense_features``,
    ``linear_model``, then ``_1``, ...); an equal object created again on the next batch finds and
    uses that registered module instead of its own fresh weights. The decision is cached per
    Estimator state and mode, so the steady state costs one identity check.
    """

    _default_scope = ""
    # Set with object.__setattr__ (see _init_tracking / _forget_route / _delegate); the anchor is a
    # buffer the subclasses register.
    _config: tuple[Any, ...]
    _route_key: tuple[int, Any] | None
    _route_state: weakref.ReferenceType[Any] | None
    _route: nn.Module | None
    _routing: bool
    _device_anchor: torch.Tensor

    def _init_tracking(self, config: tuple[Any, ...]) -> None:
        # Plain attributes (object.__setattr__): a routed-to Module must not become a submodule.
        object.__setattr__(self, "_config", config)
        self._forget_route()

    def _forget_route(self) -> None:
        for attribute, value in (("_route_key", None), ("_route_state", None), ("_route", None),
                                 ("_routing", False)):
            object.__setattr__(self, attribute, value)

    def __getstate__(self) -> dict[str, Any]:
        # copy.deepcopy / pickle: the route belongs to one running Estimator, not to the copy.
        state = dict(self.__dict__)
        state.update(_route_key=None, _route_state=None, _route=None, _routing=False)
        return state

    def _delegate(self) -> nn.Module | None:
        """The module to call instead of computing here, or None to compute with own weights."""
        from estimator_engine import model_state as training  # sibling module, imported on use

        state = training._active  # the running Estimator's ModelState (None outside one)
        if state is None or self._routing:
            return None
        key = (id(state), state.mode)
        if self._route_key == key and self._route_state is not None and self._route_state() is state:
            return self._route
        if any(_inner(module) is self for module in state.modules.values()):
            route = None  # registered by a model_fn's get_module: its caller runs any wrapper
        else:
            route = _tracked_module(self._default_scope, self._config, lambda: self)
            if route is self:
                route = None
        object.__setattr__(self, "_route_state", weakref.ref(state))
        object.__setattr__(self, "_route_key", key)
        object.__setattr__(self, "_route", route)
        return route

    def _call_delegate(self, route: nn.Module, features: Mapping[str, Any]) -> torch.Tensor:
        # The route may wrap this very object (DDP): its forward comes back here and computes.
        object.__setattr__(self, "_routing", True)
        try:
            return route(features)
        finally:
            object.__setattr__(self, "_routing", False)


class _EmbeddingWeights(nn.Module):
    embedding_weights: nn.Parameter

    def __init__(self, column: EmbeddingColumn, trainable: bool = True) -> None:
        super().__init__()
        self.embedding_weights = nn.Parameter(column.initial_value(),
                                              requires_grad=column.trainable and trainable)


class DenseFeatures(_Tracking):
    """TF's ``input_layer`` / ``DenseFeatures``: dense columns -> one float tensor [B, output_dim].

    Columns are concatenated in the order of their sorted names (TF's order): numeric values,
    one-hot buckets, indicator counts and embeddings. The module owns the embedding tables, named
    ``<column name>/embedding_weights`` (``<cat>_embedding/embedding_weights``) under the name the
    module is registered with.

    Inside a running Estimator, an object that no ``ee.get_module`` call registered registers
    itself as ``name`` (TF's Keras layer name ``dense_features``, then ``dense_features_1``, ...),
    so its tables are trained, checkpointed and restored even when the ``model_fn`` builds the
    layer anew for every batch (see ``_Tracking``).

    Args:
        feature_columns: DenseColumns (numeric, bucketized, indicator, embedding).
        trainable: whether the embedding tables are trained (``False`` freezes all of them).
        name: the scope of the self-registered variables (default ``'dense_features'``).

    Example:
        >>> job = categorical_column_with_vocabulary_list("job", ["doctor", "lawyer"])
        >>> layer = DenseFeatures([numeric_column("age"), embedding_column(job, 3)])
        >>> layer({"age": torch.tensor([30.0]), "job": ["lawyer"]}).shape
        torch.Size([1, 4])
        >>> [name for name, _ in layer.named_parameters()]
        ['job_embedding.embedding_weights']
    """

    def __init__(self, feature_columns: Iterable[DenseColumn], trainable: bool = True,
                 name: str | None = None) -> None:
        super().__init__()
        self.feature_columns: tuple[DenseColumn, ...] = _dense_columns(feature_columns)
        self.register_buffer("_device_anchor", torch.empty(0), persistent=False)
        # (column, name of the module holding its table or None), resolved once, not per batch.
        self._plan: tuple[tuple[DenseColumn, str | None], ...] = tuple(
            (column, _table_name(column)) for column in self.feature_columns)
        for column, holder in self._plan:
            if holder is None or not isinstance(column, EmbeddingColumn):  # only embeddings own a table
                continue
            owner = self._modules.get(holder)
            if not isinstance(owner, _EmbeddingWeights):
                self._modules[holder] = _EmbeddingWeights(column, trainable)
            elif tuple(owner.embedding_weights.shape) != (column.categorical_column.num_buckets,
                                                          column.dimension):
                raise ValueError(f"Shared embedding {holder!r}: column {column.name} needs a table of "
                                 f"[{column.categorical_column.num_buckets}, {column.dimension}], "
                                 f"the collection's is {list(owner.embedding_weights.shape)}. Build "
                                 "the columns with one shared_embedding_columns call.")
        self._default_scope = name or "dense_features"
        self._init_tracking(_dense_config(self.feature_columns, trainable))

    @property
    def output_dim(self) -> int:
        """Number of output values per row (the sum of the columns' dense dimensions)."""
        return sum(column.dense_dimension for column in self.feature_columns)

    def forward(self, features: Mapping[str, Any]) -> torch.Tensor:
        route = self._delegate()
        if route is not None:
            return self._call_delegate(route, features)
        cache = _Cache(features, _device_of(self))
        tables = cast("dict[str, _EmbeddingWeights]", self._modules)  # the only children (__init__)
        outputs = [column._dense(cache, None if holder is None else tables[holder].embedding_weights)
                   for column, holder in self._plan]
        return outputs[0] if len(outputs) == 1 else torch.cat(outputs, dim=1)


def _table_name(column: FeatureColumn) -> str | None:
    """The submodule holding a column's embedding table: one per shared collection."""
    if isinstance(column, SharedEmbeddingColumn):
        return variable_scope_name(column.shared_embedding_collection_name)
    if isinstance(column, EmbeddingColumn):
        return variable_scope_name(column.name)
    return None


def _dense_columns(feature_columns: Any) -> tuple[DenseColumn, ...]:
    return tuple(_sorted_columns(
        feature_columns, (DenseColumn,),
        "Items of feature_columns must be a DenseColumn. You can wrap a categorical column "
        "with an embedding_column or indicator_column. Given: {!r}"))


def _dense_config(columns: tuple[DenseColumn, ...], trainable: bool) -> tuple[Any, ...]:
    return ("DenseFeatures", columns, bool(trainable))


class _LinearWeights(nn.Module):
    weights: nn.Parameter  # embedding_weights too, for an embedding column

    def __init__(self, rows: int, units: int, embedding: EmbeddingColumn | None,
                 trainable: bool = True) -> None:
        super().__init__()
        if embedding is not None:
            self.embedding_weights = nn.Parameter(embedding.initial_value(),
                                                  requires_grad=embedding.trainable and trainable)
        self.weights = nn.Parameter(torch.zeros(rows, units), requires_grad=trainable)


class LinearModel(_Tracking):
    """TF's ``linear_model``: logits = sum over columns of their weighted inputs + bias.

    Variables (under the name the module is registered with, ``linear/linear_model`` in the
    canned linear estimators): ``<column name>/weights`` and ``bias_weights``, all zeros at first.
    Categorical columns (including bucketized and crossed) have weights ``[num_buckets, units]``
    and combine a row's ids with ``sparse_combiner``; dense columns (numeric, indicator,
    embedding) have ``[dense dimension, units]`` and are multiplied in.

    Inside a running Estimator, an object that no ``ee.get_module`` call registered registers
    itself as ``name`` (default ``'linear_model'``, then ``linear_model_1``, ...), so its weights
    are trained and checkpointed even when the ``model_fn`` builds it anew for every batch.

    Args:
        feature_columns: DenseColumns and CategoricalColumns.
        units: output size (logits dimension).
        sparse_combiner: 'sum' (default), 'mean' or 'sqrtn' over a row's ids.
        trainable: whether the weights are trained.
        name: the scope of the self-registered variables (default ``'linear_model'``).

    Example:
        >>> model = LinearModel([numeric_column("age")])
        >>> sorted(name for name, _ in model.named_parameters())
        ['age.weights', 'bias_weights']
        >>> model({"age": torch.tensor([1.0, 2.0])}).shape
        torch.Size([2, 1])
    """

    _plan: tuple[tuple[DenseColumn | CategoricalColumn, str], ...]  # (column, its weights' module)

    def __init__(self, feature_columns: Iterable[FeatureColumn], units: int = 1,
                 sparse_combiner: str = "sum", trainable: bool = True, name: str | None = None) -> None:
        super().__init__()
        columns, units, sparse_combiner = _linear_arguments(feature_columns, units, sparse_combiner)
        self.feature_columns: tuple[DenseColumn | CategoricalColumn, ...] = columns
        self.units = units
        self.sparse_combiner = sparse_combiner
        self.register_buffer("_device_anchor", torch.empty(0), persistent=False)
        self.bias_weights = nn.Parameter(torch.zeros(self.units), requires_grad=trainable)
        plan: list[tuple[DenseColumn | CategoricalColumn, str]] = []
        for column in self.feature_columns:
            if isinstance(column, SharedEmbeddingColumn):
                raise ValueError(f"LinearModel does not support shared embedding columns "
                                 f"({column.name}); use them in DenseFeatures / input_layer, or give "
                                 "the linear model the categorical columns themselves.")
            if isinstance(column, CategoricalColumn):
                rows = column.num_buckets
            else:
                rows = column.dense_dimension
            embedding = column if isinstance(column, EmbeddingColumn) else None
            holder = variable_scope_name(column.name)
            # Registered through _modules directly: a column may be named like a Module
            # attribute ('training', 'forward'), which add_module refuses.
            self._modules[holder] = _LinearWeights(rows, self.units, embedding, trainable)
            plan.append((column, holder))
        # Resolved once, not per batch.
        object.__setattr__(self, "_plan", tuple(plan))
        object.__setattr__(self, "_default_scope", name or "linear_model")
        self._init_tracking(_linear_config(columns, units, sparse_combiner, trainable))

    def __setattr__(self, name: str, value: Any) -> None:
        # A column may be named like a plain attribute ('training'); such attributes are still
        # set as attributes, not checked against the child module of the same name.
        if name in self.__dict__ and not isinstance(value, (nn.Module, torch.Tensor)):
            object.__setattr__(self, name, value)
        else:
            super().__setattr__(name, value)

    def column_weights(self, column: FeatureColumn) -> nn.Module:
        """The module holding ``weights`` (and ``embedding_weights``) of one column."""
        return self._weights_of(variable_scope_name(column.name))

    def _weights_of(self, holder: str) -> _LinearWeights:
        return cast(_LinearWeights, self._modules[holder])  # every child but the bias (__init__)

    def forward(self, features: Mapping[str, Any]) -> torch.Tensor:
        route = self._delegate()
        if route is not None:
            return self._call_delegate(route, features)
        cache = _Cache(features, _device_of(self))
        parts = []
        for column, name in self._plan:
            holder = self._weights_of(name)
            if isinstance(column, CategoricalColumn):
                parts.append(column._ids(cache).combine(holder.weights, self.sparse_combiner))
            else:
                table = getattr(holder, "embedding_weights", None)
                parts.append(column._dense(cache, table) @ holder.weights)
        logits = parts[0]  # __init__ requires a column
        for part in parts[1:]:
            logits = logits + part
        return logits + self.bias_weights


def _linear_arguments(feature_columns: Any, units: Any, sparse_combiner: Any
                      ) -> tuple[tuple[DenseColumn | CategoricalColumn, ...], int, str]:
    if not _is_int(units) or units < 1:
        raise ValueError(f"units must be a positive int, got {units!r}.")
    if sparse_combiner not in _COMBINERS:
        raise ValueError(f"sparse_combiner must be one of {list(_COMBINERS)}, got "
                         f"{sparse_combiner!r}.")
    columns = tuple(_sorted_columns(
        feature_columns, (DenseColumn, CategoricalColumn),
        "Items of feature_columns must be either a DenseColumn or CategoricalColumn. "
        "Given: {!r}"))
    return columns, int(units), sparse_combiner


def _linear_config(columns: tuple[DenseColumn | CategoricalColumn, ...], units: int, sparse_combiner: str,
                   trainable: bool) -> tuple[Any, ...]:
    return ("LinearModel", columns, units, sparse_combiner, bool(trainable))


def _in_estimator() -> bool:
    from estimator_engine.model_state import get_global_step  # sibling module, imported on use

    return get_global_step() is not None


def _fill_cols_to_vars(cols_to_vars: dict[Any, list[torch.Tensor]] | None, module: nn.Module,
                       with_bias: bool) -> None:
    if cols_to_vars is None:
        return
    inner = _inner(module)
    if not isinstance(inner, (DenseFeatures, LinearModel)):
        raise TypeError(f"cols_to_vars: expected a DenseFeatures or LinearModel, found {type(inner).__name__}.")
    for column in inner.feature_columns:
        holder = inner._modules.get(_table_name(column) or variable_scope_name(column.name))
        cols_to_vars[column] = [] if holder is None else list(holder.parameters())
    if with_bias and isinstance(inner, LinearModel):
        cols_to_vars["bias"] = [inner.bias_weights]


def input_layer(features: Mapping[str, Any], feature_columns: Iterable[DenseColumn],
                trainable: bool = True, cols_to_vars: dict[Any, list[torch.Tensor]] | None = None
                ) -> torch.Tensor:
    """TF's ``input_layer``: dense columns -> one float tensor [B, output_dim].

    Inside a running Estimator's ``model_fn`` the embedding tables are tracked variables
    ``input_layer/<column>_embedding/embedding_weights`` (created on the first batch, then reused,
    checkpointed, restored and warm-started; another column set takes ``input_layer_1``, ...).
    Outside an Estimator each call builds fresh weights, like a one-off graph.

    Args:
        features: the features dict of one batch.
        feature_columns: DenseColumns.
        trainable: whether the tables are trained.
        cols_to_vars: if a dict, filled with ``column -> [variables]`` (TF's argument).

    Example:
        >>> input_layer({"x": [[1.0, 2.0]]}, [numeric_column("x", shape=2)]).tolist()
        [[1.0, 2.0]]
    """
    columns = _dense_columns(feature_columns)
    if _in_estimator():
        layer = _tracked_module("input_layer", _dense_config(columns, trainable),
                                lambda: DenseFeatures(columns, trainable, name="input_layer"))
    else:
        layer = DenseFeatures(columns, trainable)
    _fill_cols_to_vars(cols_to_vars, layer, with_bias=False)
    return layer(features)


def linear_model(features: Mapping[str, Any], feature_columns: Iterable[FeatureColumn],
                 units: int = 1, sparse_combiner: str = "sum", trainable: bool = True,
                 cols_to_vars: dict[Any, list[torch.Tensor]] | None = None) -> torch.Tensor:
    """TF's ``linear_model``: logits = weighted sum of the columns + bias, [B, units].

    Inside a running Estimator's ``model_fn`` the weights are tracked variables
    ``linear_model/<column>/weights`` and ``linear_model/bias_weights`` (zeros at first, then
    trained, checkpointed, restored; another configuration takes ``linear_model_1``, ...).
    Outside an Estimator each call builds fresh (zero) weights.

    Args:
        features: the features dict of one batch.
        feature_columns: DenseColumns and CategoricalColumns.
        units: output size.
        sparse_combiner: 'sum', 'mean' or 'sqrtn'.
        trainable: whether the weights are trained.
        cols_to_vars: if a dict, filled with ``column -> [variables]`` and ``'bias'``.

    Example:
        >>> linear_model({"x": [1.0]}, [numeric_column("x")]).tolist()
        [[0.0]]
    """
    columns, units, sparse_combiner = _linear_arguments(feature_columns, units, sparse_combiner)
    if _in_estimator():
        model = _tracked_module("linear_model", _linear_config(columns, units, sparse_combiner, trainable),
                                lambda: LinearModel(columns, units, sparse_combiner, trainable,
                                                    name="linear_model"))
    else:
        model = LinearModel(columns, units, sparse_combiner, trainable)
    _fill_cols_to_vars(cols_to_vars, model, with_bias=True)
    return model(features)
