"""Serving raw records: parse specs, the parsing receiver, and the preprocessing stage saved with an export.

TF exports the feature columns' lookups (vocabularies, hash buckets, crosses) inside the SavedModel
graph and serves ``tf.Example`` protos through ``build_parsing_serving_input_receiver_fn``. Here the
columns map strings to ids in numpy (FarmHash ``Fingerprint64`` and ``FingerprintCat64``, as TF), which
``torch.export`` cannot record. So an export of a model with such columns has two stages:

* a **preprocessing stage**, saved as plain data in ``preprocessing.json`` (each categorical
  column's kind, key, vocabulary list or a copy of its vocabulary file under ``assets/``,
  ``num_oov_buckets``, ``default_value``, ``hash_bucket_size``, boundaries, crossed keys, dtype),
  which ``export.load`` rebuilds into the same feature columns and runs on the raw values
  (strings and ints), with the very functions used in training;
* the **exported torch program**, which takes the resulting int64 id tensors (one per column, named
  ``ids/<column name>``, shape ``[batch, values per row]``, ``-1`` = no id) plus the dense inputs.

Records are served as dicts or JSON lines, parsed with the spec of ``make_parse_example_spec``
(the counterpart of serialized ``tf.Example`` protos).

Example:
    >>> from estimator_engine import feature_column as fc
    >>> job = fc.categorical_column_with_vocabulary_list('job', ['doctor', 'lawyer'])
    >>> spec = make_parse_example_spec([fc.numeric_column('age'), fc.indicator_column(job)])
    >>> spec['age'], spec['job']
    (FixedLenFeature(shape=(1,), dtype='float32', default_value=None), VarLenFeature(dtype='string'))
    >>> parsed = parse_records([{'age': 30, 'job': 'lawyer'}, {'age': 41.5}], spec)
    >>> parsed['age'].tolist(), parsed['job'].tolist()
    ([[30.0], [41.5]], [['lawyer'], ['']])
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import os
import shutil
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import torch

from estimator_engine import feature_column as fc

__all__ = [
    "IDS_INPUT_PREFIX",
    "CsvServingInputReceiver",
    "FixedLenFeature",
    "ParsingServingInputReceiver",
    "VarLenFeature",
    "build_csv_serving_input_receiver_fn",
    "build_parsing_serving_input_receiver_fn",
    "column_from_config",
    "column_to_config",
    "csv_features",
    "decode_csv",
    "ids_input_name",
    "make_parse_example_spec",
    "parse_records",
]

IDS_INPUT_PREFIX = "ids/"
PREPROCESSING_FILENAME = "preprocessing.json"
ASSETS_DIRNAME = "assets"

_DTYPE_NAMES = {"string": "string", "str": "string", "bytes": "string", "object": "string",
                "float32": "float32", "float": "float32", "float64": "float64", "double": "float64",
                "int64": "int64", "int": "int64", "int32": "int32", "bool": "bool"}
_NUMPY_DTYPES = {"float32": np.float32, "float64": np.float64, "int64": np.int64, "int32": np.int32,
                 "bool": np.bool_}


def _dtype_name(dtype: Any, where: str) -> str:
    """'string', 'float32', 'int64', ... from a torch/numpy dtype, a Python type or a name."""
    if dtype in (str, bytes):
        return "string"
    if dtype is int:
        return "int64"
    if dtype is float:
        return "float32"
    if isinstance(dtype, torch.dtype):
        name = str(dtype).removeprefix("torch.")
    elif isinstance(dtype, str):
        name = dtype.removeprefix("tf.").removeprefix("torch.")
    else:
        try:
            kind = np.dtype(dtype)
        except TypeError:
            kind = None
        name = "string" if kind is not None and kind.kind in "OUS" else str(kind)
    if name not in _DTYPE_NAMES:
        raise ValueError(f"{where}: unsupported dtype {dtype!r}; use a string, float32/float64, int64/int32 "
                         "or bool dtype (e.g. torch.float32, 'string').")
    return _DTYPE_NAMES[name]


# -- parse specs (TF's tf.io.FixedLenFeature / VarLenFeature) --------------------------------


# What a parse spec's dtype may be given as: a name ('string', 'float32', 'tf.int64'), a torch or
# numpy dtype, or a Python type (str, int, float); stored as its name.
_DTypeLike = str | type | torch.dtype | np.dtype


@dataclasses.dataclass(frozen=True, init=False)
class FixedLenFeature:
    """A feature with ``shape`` values per record (TF's ``tf.io.FixedLenFeature``).

    A record without it gets ``default_value``; with no default it is an error.

    Example:
        >>> FixedLenFeature([1], torch.float32, default_value=0.0)
        FixedLenFeature(shape=(1,), dtype='float32', default_value=0.0)
    """

    shape: tuple[int, ...]
    dtype: str
    default_value: Any = None

    def __init__(self, shape: int | Sequence[int], dtype: _DTypeLike, default_value: Any = None) -> None:
        dims = (shape,) if isinstance(shape, int) else tuple(shape)
        if not all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in dims):
            raise ValueError(f"FixedLenFeature shape must be positive ints, given {shape!r}.")
        object.__setattr__(self, "shape", dims)
        object.__setattr__(self, "dtype", _dtype_name(dtype, "FixedLenFeature"))
        object.__setattr__(self, "default_value", default_value)

    def to_config(self) -> dict[str, Any]:
        default = self.default_value
        if isinstance(default, np.ndarray):
            default = default.tolist()
        return {"kind": "FixedLenFeature", "shape": list(self.shape), "dtype": self.dtype, "default_value": default}


@dataclasses.dataclass(frozen=True, init=False)
class VarLenFeature:
    """A feature with any number of values per record, possibly none (TF's ``tf.io.VarLenFeature``).

    Example:
        >>> VarLenFeature(str)
        VarLenFeature(dtype='string')
    """

    dtype: str

    def __init__(self, dtype: _DTypeLike) -> None:
        object.__setattr__(self, "dtype", _dtype_name(dtype, "VarLenFeature"))

    def to_config(self) -> dict[str, Any]:
        return {"kind": "VarLenFeature", "dtype": self.dtype}


def _spec_from_config(config: Mapping[str, Any]) -> FixedLenFeature | VarLenFeature:
    if config.get("kind") == "FixedLenFeature":
        return FixedLenFeature(tuple(config["shape"]), config["dtype"], config.get("default_value"))
    if config.get("kind") == "VarLenFeature":
        return VarLenFeature(config["dtype"])
    raise ValueError(f"Unknown parse spec entry {config!r}.")


def _column_parse_spec(column: Any) -> dict[str, FixedLenFeature | VarLenFeature]:
    if isinstance(column, fc.NumericColumn):
        return {column.key: FixedLenFeature(column.shape, column.dtype, column.default_value)}
    if isinstance(column, fc.BucketizedColumn):
        return _column_parse_spec(column.source_column)
    if isinstance(column, (fc.VocabularyListCategoricalColumn, fc.VocabularyFileCategoricalColumn,
                           fc.HashedCategoricalColumn)):
        return {column.key: VarLenFeature(column.dtype)}
    if isinstance(column, fc.IdentityCategoricalColumn):
        return {column.key: VarLenFeature("int64")}
    if isinstance(column, fc.WeightedCategoricalColumn):
        return {**_column_parse_spec(column.categorical_column),
                column.weight_feature_key: VarLenFeature(column.dtype)}
    if isinstance(column, fc.CrossedColumn):
        spec: dict[str, Any] = {}
        for key in column.keys:
            part = {key: VarLenFeature("string")} if isinstance(key, str) else _column_parse_spec(key)
            _merge_spec(spec, part)
        return spec
    if isinstance(column, (fc.IndicatorColumn, fc.EmbeddingColumn)):
        return _column_parse_spec(column.categorical_column)
    raise ValueError(f"make_parse_example_spec does not know the feature column {column!r:.200}.")


def _merge_spec(spec: dict[str, Any], part: Mapping[str, Any]) -> None:
    for key, value in part.items():
        if key in spec and spec[key] != value:
            raise ValueError(f"feature_columns contain different parse_spec for key {key}. "
                             f"Given {spec[key]} and {value}")
        spec[key] = value


def make_parse_example_spec(feature_columns: Iterable[Any]) -> dict[str, FixedLenFeature | VarLenFeature]:
    """The parse spec of ``feature_columns``: raw feature name -> ``FixedLenFeature``/``VarLenFeature``.

    TF's ``tf.feature_column.make_parse_example_spec``: numeric (and bucketized) columns give
    ``FixedLenFeature(shape, dtype, default_value)``; vocabulary and hash columns
    ``VarLenFeature(dtype)``, identity ``VarLenFeature(int64)``, a crossed column its keys' specs
    (a raw key is ``VarLenFeature(string)``), indicator/embedding their categorical column's spec.

    Example:
        >>> make_parse_example_spec([fc.categorical_column_with_identity('n', 3)])
        {'n': VarLenFeature(dtype='int64')}
    """
    if isinstance(feature_columns, fc.FeatureColumn):
        feature_columns = [feature_columns]
    spec: dict[str, Any] = {}
    for column in feature_columns:
        if not isinstance(column, fc.FeatureColumn):
            raise ValueError(f"All feature_columns must be FeatureColumn instances. Given: {column!r:.200}")
        _merge_spec(spec, _column_parse_spec(column))
    return spec


def _check_feature_spec(feature_spec: Any) -> dict[str, FixedLenFeature | VarLenFeature]:
    if not isinstance(feature_spec, Mapping) or not feature_spec:
        raise ValueError("feature_spec must be a non-empty dict of feature name -> FixedLenFeature/"
                         f"VarLenFeature (see make_parse_example_spec), given: {feature_spec!r:.200}")
    for name, value in feature_spec.items():
        if not isinstance(name, str):
            raise ValueError(f"feature_spec keys must be strings: {name!r}.")
        if not isinstance(value, (FixedLenFeature, VarLenFeature)):
            raise ValueError(f"feature_spec[{name!r}] must be a FixedLenFeature or VarLenFeature, given: {value!r:.200}")
    return dict(feature_spec)


# -- records -> raw features -------------------------------------------------------------------


def _records(records: Any) -> list[Mapping[str, Any]]:
    if isinstance(records, (str, bytes)):
        text = records.decode("utf-8") if isinstance(records, bytes) else records
        rows = []
        for number, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise ValueError(f"JSON lines: line {number} is not JSON ({exc}): {line[:100]!r}") from None
        records = rows
    elif isinstance(records, Mapping):
        records = [records]
    records = list(records)
    for index, record in enumerate(records):
        if not isinstance(record, Mapping):
            raise ValueError(f"Record {index} must be a dict of feature name -> value(s), given: {record!r:.200}")
    return records


def _check_value(value: Any, dtype: str, name: str, index: int) -> Any:
    if dtype == "string":
        if isinstance(value, bytes):
            return value.decode("utf-8")
        if not isinstance(value, str):
            raise ValueError(f"Feature {name!r} of record {index} must hold strings, given {value!r:.80} "
                             f"({type(value).__name__}).")
        return value
    if isinstance(value, (str, bytes)) or value is None:
        raise ValueError(f"Feature {name!r} of record {index} must hold {dtype} numbers, given {value!r:.80}.")
    if dtype in ("int64", "int32") and not (isinstance(value, (int, np.integer)) and not isinstance(value, bool)):
        raise ValueError(f"Feature {name!r} of record {index} must hold integers, given {value!r:.80}.")
    return value


def parse_records(records: Any, feature_spec: Mapping[str, FixedLenFeature | VarLenFeature]) -> dict[str, np.ndarray]:
    """Raw features (numpy arrays) from records: a list of dicts, one dict, or JSON lines text.

    The counterpart of TF's ``tf.io.parse_example``: each spec entry becomes one array with a first
    dimension of ``len(records)``. ``FixedLenFeature``: ``[B, *shape]`` (a missing value takes the
    default); ``VarLenFeature``: ``[B, K]`` padded to the longest record with the feature columns'
    missing markers (``''`` for strings, ``-1`` for ints, ``0`` for floats). Keys not in the spec are
    ignored, as TF ignores features it was not asked for.

    Example:
        >>> parse_records('{"n": [1, 2]}\\n{"n": 3}', {'n': VarLenFeature('int64')})['n'].tolist()
        [[1, 2], [3, -1]]
    """
    feature_spec = _check_feature_spec(feature_spec)
    rows = _records(records)
    out: dict[str, np.ndarray] = {}
    for name, spec in feature_spec.items():
        text = spec.dtype == "string"
        if isinstance(spec, FixedLenFeature):
            size = math.prod(spec.shape)
            array: np.ndarray = np.empty((len(rows), size), dtype=object if text else _NUMPY_DTYPES[spec.dtype])
            for index, record in enumerate(rows):
                value = record.get(name)
                if value is None:
                    if spec.default_value is None:
                        raise ValueError(f"Feature {name!r} is required but record {index} has no value for it; "
                                         "give it, or set default_value in its FixedLenFeature (numeric_column"
                                         "(default_value=...)).")
                    value = spec.default_value
                values = np.asarray(value, dtype=object).reshape(-1)
                if values.size == 1 and size > 1:
                    values = np.repeat(values, size)
                if values.size != size:
                    raise ValueError(f"Feature {name!r} of record {index} has {values.size} values; its "
                                     f"FixedLenFeature shape {list(spec.shape)} needs {size}.")
                array[index] = [_check_value(v, spec.dtype, name, index) for v in values]
            out[name] = array.reshape((len(rows), *spec.shape))
        else:
            lists: list[list[Any]] = []
            for index, record in enumerate(rows):
                value = record.get(name)
                given = [] if value is None else list(value) if isinstance(value, (list, tuple)) else [value]
                lists.append([_check_value(v, spec.dtype, name, index) for v in given if v is not None])
            width = max([1, *map(len, lists)])
            missing = "" if text else (-1 if spec.dtype in ("int64", "int32") else 0)
            padded: np.ndarray = np.full((len(rows), width), missing, dtype=object if text else _NUMPY_DTYPES[spec.dtype])
            for index, checked in enumerate(lists):
                padded[index, :len(checked)] = checked
            out[name] = padded
    return out


# -- the parsing receiver -----------------------------------------------------------------------


class ParsingServingInputReceiver:
    """What ``build_parsing_serving_input_receiver_fn``'s function returns: a spec and example features.

    ``export_saved_model`` calls the model_fn on ``features`` (raw example values: strings as numpy
    object arrays, numbers as tensors), finds the categorical columns it uses and saves their
    lookups as the export's preprocessing stage; the exported model then serves records parsed
    with ``feature_spec``.

    Example:
        >>> receiver = build_parsing_serving_input_receiver_fn({'job': VarLenFeature(str)})()
        >>> receiver.features['job'].tolist()
        [[''], ['']]
    """

    def __init__(self, feature_spec: Mapping[str, FixedLenFeature | VarLenFeature], rows: int = 2) -> None:
        self.feature_spec = _check_feature_spec(feature_spec)
        example = parse_records([{} for _ in range(rows)], {
            name: (FixedLenFeature(spec.shape, spec.dtype, "" if spec.dtype == "string" else 0)
                   if isinstance(spec, FixedLenFeature) else spec)
            for name, spec in self.feature_spec.items()})
        self.features: dict[str, Any] = {
            name: value if value.dtype == object else torch.from_numpy(value) for name, value in example.items()}

    def __repr__(self) -> str:
        return f"ParsingServingInputReceiver({self.feature_spec})"


def build_parsing_serving_input_receiver_fn(feature_spec: Mapping[str, FixedLenFeature | VarLenFeature],
                                            default_batch_size: int | None = None
                                            ) -> Callable[[], ParsingServingInputReceiver]:
    """A receiver fn for exports that serve raw records parsed with ``feature_spec`` (TF's function).

    TF's version takes serialized ``tf.Example`` protos; the loaded export here takes records as
    dicts or JSON lines (``export.load(path)(records)``), parsed with the spec saved in the export.

    Example:
        >>> fn = build_parsing_serving_input_receiver_fn({'age': FixedLenFeature([1], torch.float32)})
        >>> fn().features['age'].shape
        torch.Size([2, 1])
    """
    spec = _check_feature_spec(feature_spec)
    if default_batch_size is not None and (not isinstance(default_batch_size, int) or default_batch_size <= 0):
        raise ValueError(f"default_batch_size must be a positive int or None, given: {default_batch_size!r}.")

    def serving_input_receiver_fn() -> ParsingServingInputReceiver:
        # Two rows by default: torch.export specialises a dimension of size 0 or 1.
        return ParsingServingInputReceiver(spec, rows=default_batch_size or 2)

    serving_input_receiver_fn.default_batch_size = default_batch_size  # type: ignore[attr-defined]
    return serving_input_receiver_fn


# -- CSV lines (TF's tf.io.decode_csv on a string placeholder) ------------------------------------


def _csv_default(default: Any, index: int) -> tuple[str, Any]:
    """(dtype name, default or None) of one ``record_defaults`` entry: a value, ``[value]``, or ``[]`` /
    a dtype for a required field (TF's ``tf.constant([], tf.float32)``)."""
    if isinstance(default, (list, tuple)) or (isinstance(default, np.ndarray) and default.ndim == 1):
        if len(default) > 1:
            raise ValueError(f"record_defaults[{index}] must hold at most one value, given {default!r:.100}.")
        if len(default) == 0:
            raise ValueError(f"record_defaults[{index}] is empty, which gives no dtype; for a required field "
                             "give its dtype instead (e.g. torch.float32, 'string' or str).")
        default = default[0]
    if isinstance(default, torch.Tensor):
        default = default.item() if default.numel() == 1 else default
    if isinstance(default, (str, bytes)) and not (isinstance(default, str) and (default in _DTYPE_NAMES or
                                                                                default.startswith("tf."))):
        return "string", default.decode("utf-8") if isinstance(default, bytes) else default
    if isinstance(default, (bool, np.bool_)):
        raise ValueError(f"record_defaults[{index}]: bool fields are not supported by decode_csv (TF neither); "
                         "use 0/1 ints.")
    if isinstance(default, (int, np.integer)):
        return "int64", int(default)
    if isinstance(default, (float, np.floating)):
        return "float32", float(default)
    return _dtype_name(default, f"record_defaults[{index}]"), None  # a dtype: the field is required


def decode_csv(records: Any, record_defaults: Sequence[Any], field_delim: str = ",", use_quote_delim: bool = True,
               na_value: str = "", select_cols: Sequence[int] | None = None) -> list[Any]:
    """CSV lines -> one column per field (TF's ``tf.io.decode_csv``).

    ``records`` is a string or a list / array of strings (CSV lines, ``str`` or UTF-8 ``bytes``);
    ``record_defaults[i]`` gives field i's type and the value of an empty field (``0.0`` or
    ``[0.0]``: float32, ``0``: int64, ``''``: string), or only its type for a required field
    (``torch.float32``, ``'string'``). Columns have the shape of ``records``: numbers as torch
    tensors, strings as numpy object arrays of ``str``. ``select_cols`` keeps those fields only
    (``record_defaults`` then describes them). A field equal to ``na_value`` counts as empty.

    Example:
        >>> age, city = decode_csv(['39,Paris', ',"New York, NY"'], [[0.0], ['?']])
        >>> age.tolist(), city.tolist()
        ([39.0, 0.0], ['Paris', 'New York, NY'])
    """
    fields = [_csv_default(default, index) for index, default in enumerate(record_defaults)]
    return _decode_csv(records, fields, field_delim, use_quote_delim, na_value, select_cols)


def _decode_csv(records: Any, fields: Sequence[tuple[str, Any]], field_delim: str, use_quote_delim: bool,
                na_value: str, select_cols: Sequence[int] | None = None) -> list[Any]:
    if not isinstance(field_delim, str) or len(field_delim) != 1:
        raise ValueError(f"field_delim must be one character, given {field_delim!r}.")
    if not fields:
        raise ValueError("record_defaults must name at least one field.")
    if select_cols is not None:
        select_cols = [int(c) for c in select_cols]
        if sorted(set(select_cols)) != select_cols or (select_cols and select_cols[0] < 0):
            raise ValueError(f"select_cols must be non-negative and strictly increasing, given {select_cols}.")
        if len(select_cols) != len(fields):
            raise ValueError(f"Length of select_cols ({len(select_cols)}) and record_defaults ({len(fields)}) "
                             "should match.")
    lines = np.asarray(records, dtype=object)
    flat = lines.reshape(-1)
    columns: list[list[Any]] = [[] for _ in fields]
    for number, line in enumerate(flat):
        if isinstance(line, bytes):
            line = line.decode("utf-8")
        if not isinstance(line, str):
            raise ValueError(f"decode_csv: record {number} must be a string (a CSV line), given {line!r:.80}.")
        values = next(csv.reader([line], delimiter=field_delim,
                                 quoting=csv.QUOTE_MINIMAL if use_quote_delim else csv.QUOTE_NONE), [])
        if select_cols is not None:
            if len(values) <= select_cols[-1]:
                raise ValueError(f"decode_csv: record {number} has {len(values)} fields; select_cols needs "
                                 f"{select_cols[-1] + 1}: {line[:100]!r}")
            values = [values[c] for c in select_cols]
        elif len(values) != len(fields):
            raise ValueError(f"decode_csv: expect {len(fields)} fields but have {len(values)} in record {number}: "
                             f"{line[:100]!r}")
        for index, ((dtype, default), text) in enumerate(zip(fields, values)):
            if text == "" or text == na_value:
                if default is None:
                    raise ValueError(f"decode_csv: field {index} is required but missing in record {number}: "
                                     f"{line[:100]!r}")
                value = default
            elif dtype == "string":
                value = text
            else:
                try:
                    value = float(text) if dtype.startswith("float") else int(text)
                except ValueError:
                    raise ValueError(f"decode_csv: field {index} of record {number} is not a valid "
                                     f"{dtype}: {text!r}") from None
            columns[index].append(value)
    out: list[Any] = []
    for (dtype, _), values in zip(fields, columns):
        if dtype == "string":
            array = np.empty(len(values), dtype=object)
            array[:] = values
            out.append(array.reshape(lines.shape))
        else:
            out.append(torch.from_numpy(np.asarray(values, dtype=_NUMPY_DTYPES[dtype]).reshape(lines.shape)))
    return out


class CsvServingInputReceiver:
    """What ``build_csv_serving_input_receiver_fn``'s function returns: the CSV layout and example features.

    ``features`` are the decoded columns of example lines (numbers as tensors, strings as numpy
    object arrays, shape ``[rows]``) less ``exclude``; ``config`` is the layout saved with the export.

    Example:
        >>> receiver = build_csv_serving_input_receiver_fn(['x', 'city'], [[0.0], ['']])()
        >>> receiver.features['x'].tolist(), receiver.input_name
        ([0.0, 0.0], 'csv_row')
    """

    def __init__(self, config: Mapping[str, Any], rows: int = 2) -> None:
        self.config = dict(config)
        self.input_name: str = config["input_name"]
        self.features = csv_features(self.config, [_example_line(config)] * rows)

    def __repr__(self) -> str:
        return f"CsvServingInputReceiver({self.config})"


def _example_line(config: Mapping[str, Any]) -> str:
    # "0" reads as any dtype, and fills required fields; a default containing the delimiter is left to decoding
    parts = ["0" if entry["default"] in (None, "") or config["field_delim"] in str(entry["default"])
             else str(entry["default"]) for entry in config["record_defaults"]]
    return str(config["field_delim"]).join(parts)


def csv_features(config: Mapping[str, Any], lines: Any) -> dict[str, Any]:
    """The features of CSV ``lines`` under a saved CSV layout (``CsvServingInputReceiver.config``).

    Example:
        >>> config = build_csv_serving_input_receiver_fn(['x', 'y'], [0.0, 0], exclude=['y'])().config
        >>> csv_features(config, ['1.5,2'])['x'].tolist()
        [1.5]
    """
    fields = [(entry["dtype"], entry["default"]) for entry in config["record_defaults"]]
    columns = _decode_csv(lines, fields, config["field_delim"], config["use_quote_delim"], config["na_value"])
    exclude = set(config["exclude"])
    return {name: column for name, column in zip(config["column_names"], columns) if name not in exclude}


def build_csv_serving_input_receiver_fn(column_names: Sequence[str], record_defaults: Sequence[Any],
                                        exclude: Sequence[str] = (), field_delim: str = ",",
                                        use_quote_delim: bool = True, na_value: str = "",
                                        input_name: str = "csv_row", default_batch_size: int | None = None
                                        ) -> Callable[[], CsvServingInputReceiver]:
    """A receiver fn for exports that serve CSV lines: TF's ``serving_input_fn`` of a string
    placeholder decoded with ``tf.io.decode_csv``.

    The TF program::

        def serving_input_fn():
            csv_row = tf.compat.v1.placeholder(tf.string, [None])
            features = dict(zip(CSV_COLUMNS, tf.io.decode_csv(csv_row, record_defaults=DEFAULTS)))
            features.pop(LABEL)
            return tf.estimator.export.ServingInputReceiver(features, {'csv_row': csv_row})

    ports as ``build_csv_serving_input_receiver_fn(CSV_COLUMNS, DEFAULTS, exclude=[LABEL])``. The
    export's one input ``input_name`` takes a batch of CSV lines (``load(path)({'csv_row': lines})``,
    or just the list of lines; TF Serving's ``{"instances": ["5.1,3.5,..."]}`` on the workbench's
    server); each line is decoded as ``decode_csv`` does and the fields not excluded are the features.

    Example:
        >>> fn = build_csv_serving_input_receiver_fn(['x', 'label'], [[0.0], [0]], exclude=['label'])
        >>> sorted(fn().features)
        ['x']
    """
    names = list(column_names) if not isinstance(column_names, str) else None
    if not names or not all(isinstance(n, str) and n for n in names) or len(set(names)) != len(names):
        raise ValueError(f"column_names must be a list of distinct non-empty names, given {column_names!r:.200}.")
    if len(record_defaults) != len(names):
        raise ValueError(f"record_defaults has {len(record_defaults)} entries for {len(names)} column_names; "
                         "give one per CSV field.")
    unknown = [name for name in exclude if name not in names]
    if unknown or isinstance(exclude, str):
        raise ValueError(f"exclude must list column names (e.g. the label), given {exclude!r}; unknown: {unknown}.")
    if len(exclude) == len(names):
        raise ValueError("exclude leaves no feature: every column is excluded.")
    if not isinstance(input_name, str) or not input_name or input_name.startswith(IDS_INPUT_PREFIX):
        raise ValueError(f"input_name must be a non-empty name not starting with {IDS_INPUT_PREFIX!r}, "
                         f"given {input_name!r}.")
    if default_batch_size is not None and (not isinstance(default_batch_size, int) or default_batch_size <= 0):
        raise ValueError(f"default_batch_size must be a positive int or None, given: {default_batch_size!r}.")
    fields = [_csv_default(default, index) for index, default in enumerate(record_defaults)]
    config = {"input_name": input_name, "column_names": names,
              "record_defaults": [{"dtype": dtype, "default": default} for dtype, default in fields],
              "exclude": list(exclude), "field_delim": field_delim, "use_quote_delim": bool(use_quote_delim),
              "na_value": na_value}
    _decode_csv([_example_line(config)], fields, field_delim, use_quote_delim, na_value)  # checks the layout

    def serving_input_receiver_fn() -> CsvServingInputReceiver:
        # Two rows by default: torch.export specialises a dimension of size 0 or 1.
        return CsvServingInputReceiver(config, rows=default_batch_size or 2)

    serving_input_receiver_fn.default_batch_size = default_batch_size  # type: ignore[attr-defined]
    return serving_input_receiver_fn


# -- feature columns <-> plain data ------------------------------------------------------------


def _int_or_none(value: Any) -> int | None:
    return None if value is None else int(value)


def column_to_config(column: Any, copy_asset: Callable[[str], str] | None = None) -> dict[str, Any]:
    """A categorical (or bucketized/numeric) column as JSON-able data; ``column_from_config`` rebuilds it.

    ``copy_asset(path) -> relative path`` stores a vocabulary file with the export (default: the
    file's contents are inlined as a vocabulary list of the file's column kind).

    Example:
        >>> column_to_config(fc.categorical_column_with_hash_bucket('city', 100))
        {'kind': 'hash_bucket', 'key': 'city', 'hash_bucket_size': 100, 'dtype': 'string'}
    """
    if isinstance(column, fc.NumericColumn):
        if column.normalizer_fn is not None:
            raise ValueError(f"numeric_column {column.key!r} has a normalizer_fn, which cannot be saved as data; "
                             "it can be served only where the exported program reads it (not inside a "
                             "crossed column). Normalise the input before serving instead.")
        default = column.default_value
        return {"kind": "numeric", "key": column.key, "shape": list(column.shape),
                "default_value": np.asarray(default).tolist() if default is not None else None,
                "dtype": _dtype_name(column.dtype, column.key)}
    if isinstance(column, fc.BucketizedColumn):
        return {"kind": "bucketized", "source_column": column_to_config(column.source_column),
                "boundaries": [float(b) for b in column.boundaries]}
    if isinstance(column, fc.VocabularyListCategoricalColumn):
        return {"kind": "vocabulary_list", "key": column.key,
                "vocabulary_list": [v if isinstance(v, str) else int(v) for v in column.vocabulary_list],
                "dtype": _dtype_name(column.dtype, column.key), "default_value": _int_or_none(column.default_value),
                "num_oov_buckets": int(column.num_oov_buckets)}
    if isinstance(column, fc.VocabularyFileCategoricalColumn):
        config = {"kind": "vocabulary_file", "key": column.key, "vocabulary_size": int(column.vocabulary_size),
                  "dtype": _dtype_name(column.dtype, column.key), "default_value": _int_or_none(column.default_value),
                  "num_oov_buckets": int(column.num_oov_buckets)}
        if copy_asset is None:
            config["vocabulary_list"] = [v if isinstance(v, str) else int(v) for v in column._vocabulary()]
        else:
            config["vocabulary_file"] = copy_asset(column.vocabulary_file)
        return config
    if isinstance(column, fc.IdentityCategoricalColumn):
        return {"kind": "identity", "key": column.key, "num_buckets": int(column.num_buckets),
                "default_value": _int_or_none(column.default_value)}
    if isinstance(column, fc.HashedCategoricalColumn):
        return {"kind": "hash_bucket", "key": column.key, "hash_bucket_size": int(column.hash_bucket_size),
                "dtype": _dtype_name(column.dtype, column.key)}
    if isinstance(column, fc.CrossedColumn):
        return {"kind": "crossed", "hash_bucket_size": int(column.hash_bucket_size),
                "hash_key": _int_or_none(column.hash_key),
                "keys": [{"key": key} if isinstance(key, str) else column_to_config(key, copy_asset)
                         for key in column.keys]}
    raise ValueError(f"Cannot save the feature column {column!r:.200} for serving: supported are numeric, "
                     "bucketized, vocabulary list/file, identity, hash bucket and crossed columns.")


def _python_dtype(name: str) -> type:
    return str if name == "string" else int


def column_from_config(config: Mapping[str, Any], base_dir: str | None = None) -> Any:
    """The feature column ``column_to_config`` described (vocabulary files relative to ``base_dir``).

    Example:
        >>> column = fc.categorical_column_with_identity('n', 3, default_value=0)
        >>> column_from_config(column_to_config(column)) == column
        True
    """
    kind = config.get("kind")
    if kind == "numeric":
        return fc.numeric_column(config["key"], tuple(config["shape"]), config["default_value"],
                                 getattr(torch, config["dtype"]))
    if kind == "bucketized":
        return fc.bucketized_column(column_from_config(config["source_column"], base_dir), config["boundaries"])
    if kind == "vocabulary_list" or (kind == "vocabulary_file" and "vocabulary_list" in config):
        default = config["default_value"]
        return fc.categorical_column_with_vocabulary_list(
            config["key"], config["vocabulary_list"], dtype=_python_dtype(config["dtype"]),
            default_value=-1 if default is None else default, num_oov_buckets=config["num_oov_buckets"])
    if kind == "vocabulary_file":
        path = config["vocabulary_file"]
        if base_dir is not None and not os.path.isabs(path):
            path = os.path.join(base_dir, path)
        return fc.categorical_column_with_vocabulary_file(
            config["key"], path, config["vocabulary_size"], config["num_oov_buckets"], config["default_value"],
            _python_dtype(config["dtype"]))
    if kind == "identity":
        return fc.categorical_column_with_identity(config["key"], config["num_buckets"], config["default_value"])
    if kind == "hash_bucket":
        return fc.categorical_column_with_hash_bucket(config["key"], config["hash_bucket_size"],
                                                      _python_dtype(config["dtype"]))
    if kind == "crossed":
        keys = [key["key"] if set(key) == {"key"} else column_from_config(key, base_dir) for key in config["keys"]]
        return fc.crossed_column(keys, config["hash_bucket_size"], config["hash_key"])
    raise ValueError(f"Unknown feature column kind {kind!r} in a preprocessing stage: {config!r:.200}")


# -- export side: which columns the program gets as ids ------------------------------------------

# Columns whose ids are computed in numpy (not traceable); bucketized ids are torch ops and stay in the program.
_PRECOMPUTED_KINDS = (fc.VocabularyListCategoricalColumn, fc.VocabularyFileCategoricalColumn,
                      fc.IdentityCategoricalColumn, fc.HashedCategoricalColumn, fc.CrossedColumn)


def ids_input_name(column: Any) -> str:
    """The exported program's input holding ``column``'s ids.

    Example:
        >>> ids_input_name(fc.categorical_column_with_identity('n', 3))
        'ids/n'
    """
    return IDS_INPUT_PREFIX + column.name


class ServingFeatures(Mapping):
    """The features mapping the model_fn sees while an export is made (not public API).

    ``values`` are the features it may read; ``text_keys`` name features that exist only before the
    program (strings); ``supply(column)`` gives a column's ids or ``None`` (compute from the values).
    Records the keys read and the columns asked for.
    """

    def __init__(self, values: Mapping[str, Any], text_keys: Iterable[str] = (),
                 supply: Callable[[Any], torch.Tensor | None] | None = None) -> None:
        self._values = dict(values)
        self._text_keys = frozenset(text_keys)
        self._supply = supply
        self.read_keys: list[str] = []
        self.asked_columns: list[Any] = []

    def __getitem__(self, key: str) -> Any:
        if key in self._text_keys and key not in self._values:
            raise ValueError(
                f"The model_fn reads the string feature {key!r} directly, which an exported program cannot "
                "take as input: strings are served through categorical feature columns (vocabulary, hash "
                "bucket, crossed), whose ids the export computes before the program.")
        value = self._values[key]
        if key not in self.read_keys:
            self.read_keys.append(key)
        return value

    def __contains__(self, key: object) -> bool:
        return key in self._values or key in self._text_keys

    def __iter__(self) -> Iterator[str]:
        return iter(dict.fromkeys([*self._values, *self._text_keys]))

    def __len__(self) -> int:
        return len(set(self._values) | self._text_keys)

    def precomputed_ids(self, column: Any) -> torch.Tensor | None:
        if isinstance(column, fc.WeightedCategoricalColumn):
            raise ValueError(f"weighted_categorical_column {column.name!r} cannot be exported for serving yet: "
                             "its weights must stay aligned with its ids. Serve without it, or export a "
                             "model whose weighted column is replaced by an unweighted one.")
        if not isinstance(column, _PRECOMPUTED_KINDS) or self._supply is None:
            return None
        if not any(column is c for c in self.asked_columns):
            self.asked_columns.append(column)
        return self._supply(column)


class Preprocessor:
    """The preprocessing stage of an export: raw features -> the program's dense and id inputs.

    Built from ``preprocessing.json``: ``feature_sources`` (feature key -> raw input name),
    ``dense_inputs`` (program input -> raw input name), ``categorical_ids`` (program input -> the
    column's config). Ids come from the rebuilt column's own lookup (``column._ids``).

    Example:
        >>> column = fc.categorical_column_with_vocabulary_list('job', ['a', 'b'], num_oov_buckets=1)
        >>> stage = Preprocessor({'feature_sources': {'job': 'job'}, 'dense_inputs': {},
        ...                       'categorical_ids': {'ids/job': column_to_config(column)}})
        >>> stage({'job': ['b', 'zzz']})['ids/job'].tolist()
        [[1], [2]]
    """

    def __init__(self, config: Mapping[str, Any], base_dir: str | None = None) -> None:
        self.config = dict(config)
        self.feature_sources: dict[str, str] = dict(config["feature_sources"])
        self.dense_inputs: dict[str, str] = dict(config["dense_inputs"])
        self.columns = {name: column_from_config(column, base_dir)
                        for name, column in config["categorical_ids"].items()}
        spec = config.get("parse_spec")
        self.parse_spec = None if spec is None else {name: _spec_from_config(s) for name, s in spec.items()}
        self.csv: dict[str, Any] | None = config.get("csv")  # the CSV layout of a CSV-line export

    @property
    def raw_inputs(self) -> list[str]:
        """The raw inputs this stage reads."""
        used = set(self.dense_inputs.values())
        keys = {key for column in self.columns.values() for key in _raw_keys(column)}
        used |= {self.feature_sources[key] for key in keys if key in self.feature_sources}
        return sorted(used)

    def __call__(self, raw: Mapping[str, Any]) -> dict[str, Any]:
        features = {key: raw[name] for key, name in self.feature_sources.items() if name in raw}
        cache = fc._Cache(features, torch.device("cpu"))
        out: dict[str, Any] = {name: raw[source] for name, source in self.dense_inputs.items()}
        for name, column in self.columns.items():
            out[name] = column._ids(cache).ids.to(torch.int64)
        return out


def _raw_keys(column: Any) -> list[str]:
    if isinstance(column, fc.CrossedColumn):
        return [k for key in column.keys for k in ([key] if isinstance(key, str) else _raw_keys(key))]
    if isinstance(column, fc.BucketizedColumn):
        return [column.source_column.key]
    return [column.key]


def write_preprocessing(directory: str, feature_sources: Mapping[str, str], dense_inputs: Mapping[str, str],
                        columns: Mapping[str, Any], parse_spec: Mapping[str, Any] | None,
                        csv: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Saves the stage as ``preprocessing.json`` (+ vocabulary files under ``assets/``); returns its config."""
    copied: dict[str, str] = {}

    def copy_asset(path: str) -> str:
        source = os.path.abspath(os.fspath(path))
        if source not in copied:
            name = f"{len(copied)}_{os.path.basename(source)}"
            os.makedirs(os.path.join(directory, ASSETS_DIRNAME), exist_ok=True)
            shutil.copyfile(source, os.path.join(directory, ASSETS_DIRNAME, name))
            copied[source] = f"{ASSETS_DIRNAME}/{name}"
        return copied[source]

    config: dict[str, Any] = {
        "feature_sources": dict(feature_sources),
        "dense_inputs": dict(dense_inputs),
        "categorical_ids": {name: column_to_config(column, copy_asset) for name, column in columns.items()},
        "parse_spec": None if parse_spec is None else {name: s.to_config() for name, s in parse_spec.items()},
    }
    if csv is not None:
        config["csv"] = dict(csv)
    # The stage must rebuild the very columns the model was trained with (same ids).
    check = Preprocessor(config, directory)
    for name, column in columns.items():
        rebuilt = check.columns[name]
        same = rebuilt == column if not _has_vocabulary_file(column) else column_to_config(rebuilt) == column_to_config(column)
        if not same:
            raise ValueError(f"The preprocessing stage cannot reproduce column {column.name!r}: saved as "
                             f"{config['categorical_ids'][name]!r:.300}.")
    with open(os.path.join(directory, PREPROCESSING_FILENAME), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2)
    return config


def _has_vocabulary_file(column: Any) -> bool:
    if isinstance(column, fc.VocabularyFileCategoricalColumn):
        return True
    return isinstance(column, fc.CrossedColumn) and any(
        not isinstance(key, str) and _has_vocabulary_file(key) for key in column.keys)


def read_preprocessing(directory: str) -> Preprocessor | None:
    """The stage saved in an export directory, or ``None`` when it has none."""
    path = os.path.join(directory, PREPROCESSING_FILENAME)
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        return Preprocessor(json.load(f), directory)


def _sequence_of_records(value: Any) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, (str, bytes)) and bool(value) and all(
        isinstance(v, Mapping) for v in value)
