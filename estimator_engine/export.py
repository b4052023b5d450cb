"""Exporting a trained model as a self-contained program, and loading it back (TF's ``tf.estimator.export``).

A TF SavedModel cannot be reproduced on PyTorch, so an export is a directory with the same contract:
``<export_dir_base>/<10-digit unix timestamp>/`` (written to a temporary folder, then renamed)::

    program.pt2            torch.export program: receiver tensors (a dict) -> tuple of outputs,
                           with a dynamic batch dimension. Runs without the model_fn's source.
    program.torchscript.pt only when torch.export failed: a torch.jit.trace of the same function
                           (signature.json says why).
    model.onnx             only with ``format="onnx"``: the torch.export program as ONNX, checked
                           with onnxruntime (``estimator_engine.onnx_export``; ``signature.json``
                           names its inputs and outputs under ``onnx``).
    signature.json         inputs (names, dtypes, shapes with -1 for the batch), and per signature
                           key (default ``serving_default``) its method and named outputs with
                           dtypes; a string output (``classes``) has dtype ``string`` and a
                           ``lookup``: the program returns ids, ``load`` maps them through the
                           recorded vocabulary to numpy ``bytes`` arrays, as predict() returns them.
    variables.pt           the restored variables {name: tensor} (``torch.load(weights_only=True)``).
    preprocessing.json     only for a model with vocabulary / hash-bucket / identity / crossed feature
                           columns (format version 2): their lookups as plain data, run by ``load``
                           on the raw strings and ints before the program, which takes the ids
                           (``ids/<column name>``); plus the parse spec of a parsing receiver.
    assets/                vocabulary files of those columns (copies).
    assets.extra/          copies of ``assets_extra`` ({destination: source}).

``load(path)`` returns a callable ``features dict -> outputs dict`` (raw values; an export made with
``build_parsing_serving_input_receiver_fn`` also takes records: dicts or JSON lines). It loads nothing that can run
arbitrary Python: ``torch.export.load`` unpickles tensor subclasses, custom objects and sample
inputs with a ``weights_only=False`` fallback, so the archive is checked first and refused if it
holds any such entry; TorchScript archives hold TorchScript code and tensors only.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import io
import json
import logging
import os
import shutil
import tempfile
import time
import warnings
import weakref
import zipfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import numpy as np
import torch

from estimator_engine import checkpoints, gfile, serving
from estimator_engine import feature_column as fc
from estimator_engine import spec as spec_lib
from estimator_engine.export_output import (
    ClassificationOutput,
    ExportOutput,
    PredictOutput,
    RegressionOutput,
    StringLookup,
)
from estimator_engine.mode_keys import ModeKeys
from estimator_engine.model_state import ModelState
from estimator_engine.serving import (
    CsvServingInputReceiver,
    FixedLenFeature,
    ParsingServingInputReceiver,
    VarLenFeature,
    build_csv_serving_input_receiver_fn,
    build_parsing_serving_input_receiver_fn,
    decode_csv,
    make_parse_example_spec,
    parse_records,
)

__all__ = [
    "DEFAULT_SERVING_SIGNATURE_DEF_KEY",
    "ClassificationOutput",
    "CsvServingInputReceiver",
    "ExportOutput",
    "FixedLenFeature",
    "LoadedModel",
    "ParsingServingInputReceiver",
    "PredictOutput",
    "RegressionOutput",
    "ServingInputReceiver",
    "TensorServingInputReceiver",
    "VarLenFeature",
    "build_csv_serving_input_receiver_fn",
    "build_parsing_serving_input_receiver_fn",
    "build_raw_serving_input_receiver_fn",
    "decode_csv",
    "export_saved_model",
    "load",
    "make_parse_example_spec",
    "parse_records",
    "placeholder",
]

_log = logging.getLogger("estimator_engine")

DEFAULT_SERVING_SIGNATURE_DEF_KEY = "serving_default"
EXPORT_FORMAT = "estimator_engine.export"
EXPORT_FORMAT_VERSION = 2  # 2: a preprocessing stage computes categorical ids before the program
SIGNATURE_FILENAME = "signature.json"
VARIABLES_FILENAME = "variables.pt"
EXPORT_PROGRAM_FILENAME = "program.pt2"
TORCHSCRIPT_PROGRAM_FILENAME = "program.torchscript.pt"
ASSETS_EXTRA_DIRNAME = "assets.extra"
_SINGLE_FEATURE_DEFAULT_NAME = "feature"
_SINGLE_RECEIVER_DEFAULT_NAME = "input"
EXPORT_FORMATS = ("torch.export", "onnx")
_METHODS = {ClassificationOutput: "classify", RegressionOutput: "regress", PredictOutput: "predict"}


# -- serving input receivers -----------------------------------------------------------------


def _is_strings(value: Any) -> bool:
    """A numpy array of strings: what ``placeholder('string', ...)`` gives (TF's ``tf.string`` tensor)."""
    return isinstance(value, np.ndarray) and value.dtype.kind in "OUS"


def _wrap_and_check(tensors: Any, field_name: str, default_name: str,
                    allow_int_keys: bool = False) -> dict[Any, Any]:
    """TF's ``wrap_and_check_input_tensors``: a dict of named tensors (one tensor gets a default name)."""
    if tensors is None:
        raise ValueError(f"{field_name}s must be defined.")
    if not isinstance(tensors, Mapping):
        tensors = {default_name: tensors}
    for name, tensor in tensors.items():
        if not (isinstance(name, str) or (allow_int_keys and isinstance(name, int) and not isinstance(name, bool))):
            raise ValueError(f"{field_name} keys must be strings: {name!r}.")
        if not isinstance(tensor, torch.Tensor) and not _is_strings(tensor):
            raise ValueError(f"{field_name} {name} must be a Tensor or SparseTensor. Given: {tensor!r:.100}. "
                             "Serving inputs must be torch tensors or string placeholders (convert numpy "
                             "numbers with torch.as_tensor; make inputs with ee.export.placeholder(dtype, "
                             "[None, ...]), strings included).")
        if _is_strings(tensor) and tensor.ndim == 0:
            raise ValueError(f"{field_name} {name} is a string scalar; a serving input needs a batch dimension "
                             "(placeholder('string', [None])).")
    return dict(tensors)


_PLACEHOLDER_EXAMPLE_ROWS = 2  # torch.export specialises a dimension of size 0 or 1


def placeholder(dtype: Any, shape: Any = None, name: str | None = None) -> Any:
    """A serving input of ``dtype`` and ``shape`` (TF's ``tf.compat.v1.placeholder``), for a
    hand-written ``serving_input_receiver_fn``.

    ``shape`` is a list whose first entry is the batch dimension (``None``), e.g. ``[None]`` or
    ``[None, 3]``; later entries must be known. A number dtype (``torch.float32``, ``'float32'``,
    ``'tf.int64'``, ``float``, ...) gives an example tensor of zeros; ``'string'`` (``str``,
    ``'tf.string'``) gives a numpy object array of ``''``. Use the results in a
    ``ServingInputReceiver`` as TF's placeholders: as the features themselves, or reshaped views
    of them (``x.unsqueeze(-1)`` for ``tf.expand_dims``, ``np.expand_dims(s, -1)`` for strings).
    String inputs may feed categorical feature columns (vocabulary, hash bucket, crossed): the
    export maps them to ids before the program, and the loaded export takes ``str``/``bytes``.
    ``name`` is accepted as TF's; inputs are named by the ``receiver_tensors`` dict keys.

    Example:
        >>> placeholder(torch.float32, [None, 3]).shape
        torch.Size([2, 3])
        >>> placeholder('string', [None]).tolist()
        ['', '']
    """
    if shape is None:
        raise ValueError("placeholder needs a shape with the batch dimension first, e.g. [None] or [None, 3]; "
                         "an unknown rank cannot be exported.")
    dims = [shape] if isinstance(shape, int) else list(shape)
    if not dims:
        raise ValueError("placeholder shape [] is a scalar; a serving input needs a batch dimension: [None].")
    for index, dim in enumerate(dims):
        if index == 0 and dim is None:
            continue
        if not isinstance(dim, int) or isinstance(dim, bool) or dim < 1:
            raise ValueError(f"placeholder shape {shape!r}: dimension {index} must be a positive int"
                             + (" (only dimension 0, the batch, may be None)." if dim is None else "."))
    if name is not None and not isinstance(name, str):
        raise TypeError(f"placeholder name must be a str, given {name!r}.")
    static_batch = dims[0] is not None
    rows = dims[0] if static_batch else _PLACEHOLDER_EXAMPLE_ROWS
    size = (rows, *dims[1:])
    kind = serving._dtype_name(dtype, "placeholder")
    if kind == "string":
        example: Any = np.full(size, "", dtype=object)
    else:
        example = torch.zeros(size, dtype=getattr(torch, kind))
    return example


# Named as TF's class so that both receivers' reprs read "ServingInputReceiver(features=...)".
_ReceiverBase = collections.namedtuple(  # type: ignore[name-match]
    "ServingInputReceiver", ["features", "receiver_tensors", "receiver_tensors_alternatives"])


class ServingInputReceiver(_ReceiverBase):
    """What a ``serving_input_receiver_fn`` returns: the model's features and the serving inputs.

    ``receiver_tensors`` are the inputs of the exported program (example values: their dtypes and
    trailing shapes define the signature; dimension 0 is the batch). Each feature must be one of the
    receiver tensors (the same object), or ``features`` may be a callable
    ``fn(receiver_tensors) -> features`` made of torch operations, which is exported with the model
    (the eager counterpart of TF's parsing ops between placeholders and features).

    Args:
        features: a tensor or a dict of feature name -> tensor, or a callable (see above).
        receiver_tensors: a tensor or a dict of input name -> example tensor.
        receiver_tensors_alternatives: accepted for TF compatibility and validated, not exported.

    Example:
        >>> x = torch.zeros(2, 3)
        >>> receiver = ServingInputReceiver({'x': x}, {'x': x})
        >>> sorted(receiver.receiver_tensors)
        ['x']
    """

    def __new__(cls, features: Any, receiver_tensors: Any,
                receiver_tensors_alternatives: Mapping[str, Any] | None = None) -> ServingInputReceiver:
        if not callable(features):
            features = _wrap_and_check(features, "feature", _SINGLE_FEATURE_DEFAULT_NAME, allow_int_keys=True)
        receiver_tensors = _wrap_and_check(receiver_tensors, "receiver_tensor", _SINGLE_RECEIVER_DEFAULT_NAME)
        alternatives = None
        if receiver_tensors_alternatives is not None:
            if not isinstance(receiver_tensors_alternatives, Mapping):
                raise ValueError("receiver_tensors_alternatives must be a dict of name -> tensors, given: "
                                 f"{receiver_tensors_alternatives!r}.")
            alternatives = {name: _wrap_and_check(value, "receiver_tensors_alternative",
                                                  _SINGLE_RECEIVER_DEFAULT_NAME)
                            for name, value in receiver_tensors_alternatives.items()}
        return super().__new__(cls, features, receiver_tensors, alternatives)


class TensorServingInputReceiver(_ReceiverBase):
    """Like ``ServingInputReceiver``, but ``features`` is one tensor passed to model_fn as is.

    Example:
        >>> x = torch.zeros(2, 3)
        >>> TensorServingInputReceiver(x, {'x': x}).features is x
        True
    """

    def __new__(cls, features: torch.Tensor, receiver_tensors: Any,
                receiver_tensors_alternatives: Mapping[str, Any] | None = None) -> TensorServingInputReceiver:
        if features is None:
            raise ValueError("features must be defined.")
        if not isinstance(features, torch.Tensor):
            hint = (" A string placeholder must go through a ServingInputReceiver's features dict, where "
                    "categorical feature columns map it to ids." if _is_strings(features) else "")
            raise ValueError(f"feature must be a Tensor or SparseTensor. Given: {features!r:.100}.{hint}")
        receiver = ServingInputReceiver({_SINGLE_FEATURE_DEFAULT_NAME: features}, receiver_tensors,
                                        receiver_tensors_alternatives)
        return super().__new__(cls, features, receiver.receiver_tensors, receiver.receiver_tensors_alternatives)


# What a serving_input_receiver_fn may return (export_saved_model checks it).
_AnyReceiver = (ServingInputReceiver | TensorServingInputReceiver | serving.ParsingServingInputReceiver
                | serving.CsvServingInputReceiver)


def build_raw_serving_input_receiver_fn(features: Mapping[str, Any],
                                        default_batch_size: int | None = None) -> Callable[[], ServingInputReceiver]:
    """A receiver fn whose inputs are the raw features (TF's function of the same name).

    ``features`` maps each feature name to an example tensor (or array): its dtype and shape after
    dimension 0 define the input. The batch dimension is dynamic unless ``default_batch_size`` is set.

    Example:
        >>> fn = build_raw_serving_input_receiver_fn({'x': torch.zeros(8, 3)})
        >>> fn().receiver_tensors['x'].shape
        torch.Size([2, 3])
    """
    if not isinstance(features, Mapping) or not features:
        raise ValueError(f"features must be a non-empty dict of name -> example tensor, given: {features!r:.200}.")
    if default_batch_size is not None and (not isinstance(default_batch_size, int) or default_batch_size <= 0):
        raise ValueError(f"default_batch_size must be a positive int or None, given: {default_batch_size!r}.")
    examples: dict[str, torch.Tensor] = {}
    for name, value in features.items():
        if not isinstance(name, str):
            raise ValueError(f"feature keys must be strings: {name!r}.")
        if not isinstance(value, torch.Tensor) and np.asarray(value).dtype.kind in "OUS":
            raise ValueError(f"feature {name!r} holds strings, which cannot be a raw serving tensor. Serve "
                             "string features with build_parsing_serving_input_receiver_fn("
                             "make_parse_example_spec(feature_columns)): the export then maps them to ids.")
        tensor = value if isinstance(value, torch.Tensor) else torch.as_tensor(np.asarray(value))
        if tensor.dim() == 0:
            raise ValueError(f"feature {name!r} must have a batch dimension, given a scalar {value!r}.")
        examples[name] = tensor.detach().cpu()
    # Two rows by default: torch.export specialises a dimension of size 0 or 1.
    rows = default_batch_size or 2

    def serving_input_receiver_fn() -> ServingInputReceiver:
        receiver_tensors = {name: _resize_batch(tensor, rows) for name, tensor in examples.items()}
        return ServingInputReceiver(receiver_tensors, receiver_tensors.copy())

    serving_input_receiver_fn.default_batch_size = default_batch_size  # type: ignore[attr-defined]
    return serving_input_receiver_fn


def _resize_batch(tensor: torch.Tensor, rows: int) -> torch.Tensor:
    if tensor.shape[0] == 0:
        return torch.zeros((rows, *tensor.shape[1:]), dtype=tensor.dtype)
    repeats = -(-rows // tensor.shape[0])
    return tensor.repeat(repeats, *([1] * (tensor.dim() - 1)))[:rows].clone()


# -- export ------------------------------------------------------------------------------------


@contextlib.contextmanager
def _full_validation() -> Iterator[None]:
    """Exporting from inside a training loop (an exporter) still needs the full PREDICT spec checks."""
    validation = spec_lib._validation
    previous = getattr(validation, "cheap", False)
    validation.cheap = False
    try:
        yield
    finally:
        validation.cheap = previous


class _ServingProgram(torch.nn.Module):
    """receiver tensors (a dict) -> the flattened signature outputs (a tuple), for tracing."""

    def __init__(self, state: ModelState, call: Callable[[Any], Any], features: Any,
                 receiver_tensors: Mapping[str, torch.Tensor],
                 features_from: Callable[[Mapping[str, torch.Tensor]], Any] | None = None) -> None:
        super().__init__()
        # Registering the modules makes their parameters the program's parameters, not constants.
        self.modules_by_name = torch.nn.ModuleDict(
            {f"m{i}": state.unwrapped(name) for i, name in enumerate(state.modules)})
        self._call = call
        self._features = features
        self._features_from = features_from
        self._source = None if callable(features) or features_from else _feature_sources(features, receiver_tensors)
        self._view_shapes = {} if self._source is None else _view_shapes(features, receiver_tensors, self._source)

    def features_from(self, inputs: Mapping[str, torch.Tensor]) -> Any:
        if self._features_from is not None:
            return self._features_from(inputs)
        if self._source is None:
            return self._features(dict(inputs))
        return {key: (inputs[name] if key not in self._view_shapes else
                      inputs[name].reshape(inputs[name].shape[0], *self._view_shapes[key]))
                for key, name in self._source.items()}

    def forward(self, inputs: dict[str, torch.Tensor]) -> tuple[torch.Tensor, ...]:
        features = self.features_from(inputs)
        if isinstance(self._features, torch.Tensor):  # TensorServingInputReceiver
            features = features[_SINGLE_FEATURE_DEFAULT_NAME]
        export_outputs = self._call(features)
        _, tensors, _ = _flatten_outputs(export_outputs)
        return tuple(tensors)


def _view_root(value: Any) -> Any:
    """The array or tensor ``value`` is a view of (``tf.expand_dims`` / ``reshape`` ported), or ``value``."""
    if isinstance(value, torch.Tensor):
        return value._base if value._base is not None else value
    while isinstance(value, np.ndarray) and isinstance(value.base, np.ndarray):
        value = value.base
    return value


def _is_reshape_of(view: Any, root: Any) -> bool:
    """Whether ``view`` holds all of ``root``'s elements in the same order (a reshape, unsqueeze,
    ``np.expand_dims``), so that the program may take ``root`` and reshape it."""
    if isinstance(view, torch.Tensor) and isinstance(root, torch.Tensor):
        return (view.numel() == root.numel() and view.is_contiguous() and root.is_contiguous()
                and view.data_ptr() == root.data_ptr())
    if isinstance(view, np.ndarray) and isinstance(root, np.ndarray):
        return (view.size == root.size and view.flags.c_contiguous and root.flags.c_contiguous
                and view.__array_interface__["data"][0] == root.__array_interface__["data"][0])
    return False


def _feature_sources(features: Any, receiver_tensors: Mapping[str, Any]) -> dict[Any, str]:
    """Feature key -> the receiver input it is (the same object, or a reshaped view of all of it)."""
    if isinstance(features, torch.Tensor):
        features = {_SINGLE_FEATURE_DEFAULT_NAME: features}
    by_id = {id(tensor): name for name, tensor in receiver_tensors.items()}
    sources = {}
    for key, tensor in features.items():
        name = by_id.get(id(tensor))
        if name is None:
            root = _view_root(tensor)
            name = by_id.get(id(root))
            if name is not None and not _is_reshape_of(tensor, root):
                name = None  # a slice or transpose is a computation, not the input
        if name is None:
            raise ValueError(
                f"ServingInputReceiver feature {key!r} is not one of the receiver_tensors "
                f"{sorted(receiver_tensors)}. Each feature must be a receiver tensor itself (the same "
                "object, or a reshaped view of it such as x.unsqueeze(-1)), or pass features=fn(receiver_tensors) -> features to compute them with torch ops.")
        sources[key] = name
    return sources


def _view_shapes(features: Any, receiver_tensors: Mapping[str, Any], sources: Mapping[Any, str]
                 ) -> dict[Any, tuple[int, ...]]:
    """Feature key -> its shape after the batch, for features that are reshaped views of an input."""
    if isinstance(features, torch.Tensor):
        features = {_SINGLE_FEATURE_DEFAULT_NAME: features}
    return {key: tuple(features[key].shape[1:]) for key, name in sources.items()
            if features[key] is not receiver_tensors[name]}


_OutputLayout = tuple[str, str, int, "tuple[str, ...] | None"]


def _flatten_outputs(export_outputs: Mapping[str, ExportOutput]) -> tuple[list[_OutputLayout], list[torch.Tensor], list[dict[str, str]]]:
    """(signature key, output name, index, vocabulary) per output, the distinct tensors, and skipped outputs.

    A ``StringLookup`` output exports its id tensor at ``index``; its vocabulary goes to signature.json.
    """
    layout: list[_OutputLayout] = []
    tensors: list[torch.Tensor] = []
    index_of: dict[int, int] = {}
    skipped: list[dict[str, str]] = []
    for key in sorted(export_outputs):
        for name, value in export_outputs[key].as_signature_outputs().items():
            vocabulary = None
            if isinstance(value, StringLookup):
                vocabulary = value.vocabulary
                value = value.ids
            if not isinstance(value, torch.Tensor):
                skipped.append({"signature": key, "output": name,
                                "reason": f"not a tensor ({type(value).__name__}); only tensors can be exported"})
                continue
            index = index_of.get(id(value))
            if index is None:
                index = index_of[id(value)] = len(tensors)
                tensors.append(value)
            layout.append((key, name, index, vocabulary))
    return layout, tensors, skipped


def _method(output: ExportOutput) -> str:
    for cls, method in _METHODS.items():
        if isinstance(output, cls):
            return method
    return "predict"


def _resolve_export_checkpoint(estimator: Any, checkpoint_path: str | os.PathLike | None) -> str:
    if checkpoint_path:
        return checkpoints.resolve_checkpoint(checkpoint_path)
    path = estimator.latest_checkpoint()
    if path:
        return path
    settings = getattr(estimator, "_warm_start_settings", None)
    source = getattr(settings, "ckpt_to_initialize_from", None)
    if source:
        source = gfile.normalize(source)
        path = checkpoints.latest_checkpoint(source) if gfile.isdir(source) else checkpoints.resolve_checkpoint(source)
        if path:
            return path
    raise ValueError(f"Couldn't find trained model at {estimator.model_dir}. Train first (or pass "
                     "checkpoint_path, or configure warm_start_from) before exporting.")


def _new_export_dir(export_dir_base: str) -> str:
    """``<base>/<10-digit unix seconds>`` that does not exist yet (later seconds on a collision)."""
    stamp = int(time.time())
    while gfile.exists(gfile.join(export_dir_base, str(stamp))):
        stamp += 1
    return gfile.join(export_dir_base, str(stamp))


def _tensor_info(tensor: torch.Tensor, batch_dynamic: bool) -> dict[str, Any]:
    shape = list(tensor.shape)
    if batch_dynamic and shape:
        shape[0] = -1
    return {"dtype": str(tensor.dtype).removeprefix("torch."), "shape": shape}


def _spec_info(spec: FixedLenFeature | VarLenFeature, static_batch: bool, rows: int) -> dict[str, Any]:
    batch = rows if static_batch else -1
    if isinstance(spec, FixedLenFeature):
        return {"dtype": spec.dtype, "shape": [batch, *spec.shape], "parse": "FixedLenFeature"}
    return {"dtype": spec.dtype, "shape": [batch, -1], "parse": "VarLenFeature"}


@dataclasses.dataclass
class _IdsPlan:
    """How the program gets categorical ids: which columns, which dense inputs, example inputs."""

    export_outputs: Mapping[str, ExportOutput]
    example_inputs: dict[str, torch.Tensor]
    columns: dict[str, Any]  # program input name -> column
    dense_inputs: list[str]  # program input names of dense features (= raw input names)
    source_keys: list[str]  # feature keys the preprocessing stage reads (dense and categorical)
    raw_input_names: set[str]
    features_from: Callable[[Mapping[str, torch.Tensor]], Any]

    @property
    def ids_inputs(self) -> frozenset[str]:
        return frozenset(self.columns)


def _at_least_two_wide(ids: torch.Tensor) -> torch.Tensor:
    """Pads ids [B, K] with -1 (no id) to K >= 2, so that torch.export keeps K dynamic (not 1)."""
    if ids.shape[1] >= 2:
        return ids
    return torch.cat([ids, torch.full((ids.shape[0], 2 - ids.shape[1]), -1, dtype=ids.dtype)], dim=1)


def _plan_precomputed_ids(call: Callable[[Any], Mapping[str, ExportOutput]], raw_values: Mapping[str, Any],
                          feature_sources: Mapping[str, str], parsing: bool) -> _IdsPlan | None:
    """Finds the categorical columns the model_fn maps in numpy; ``None`` when there are none.

    The model_fn runs on the raw example (recording the columns asked for ids), then on the ids
    computed by those columns (recording what it reads); both runs must give the same outputs.
    """
    text_keys = [key for key, value in raw_values.items() if not isinstance(value, torch.Tensor)]
    first = serving.ServingFeatures(raw_values, supply=lambda column: None)
    export_outputs = call(first)
    if not first.asked_columns and not text_keys and not parsing:
        return None
    by_name: dict[str, Any] = {}
    for column in first.asked_columns:
        other = by_name.setdefault(column.name, column)
        if other != column:
            raise ValueError(f"Two different feature columns are named {column.name!r} ({other!r:.150} and "
                             f"{column!r:.150}); an export needs unique names. Use one column for both uses.")
    cache = fc._Cache(dict(raw_values), torch.device("cpu"))
    ids = {name: _at_least_two_wide(column._ids(cache).ids.cpu().to(torch.int64)) for name, column in by_name.items()}

    def supplier(table: Mapping[str, torch.Tensor]) -> Callable[[Any], torch.Tensor | None]:
        def supply(column: Any) -> torch.Tensor | None:
            known = by_name.get(column.name)
            if known is None or not (known is column or known == column):
                return None
            return table.get(serving.ids_input_name(known))
        return supply

    dense_values = {key: value for key, value in raw_values.items() if key not in text_keys}
    second = serving.ServingFeatures(dense_values, text_keys, supplier(
        {serving.ids_input_name(by_name[name]): value for name, value in ids.items()}))
    second_outputs = call(second)
    _check_same_outputs(export_outputs, second_outputs)
    columns = {serving.ids_input_name(column): column for column in second.asked_columns}
    dense_keys = list(second.read_keys)
    example: dict[str, torch.Tensor] = {}
    for key in dense_keys:
        name = feature_sources[key]
        if name.startswith(serving.IDS_INPUT_PREFIX):
            raise ValueError(f"Serving input {name!r} starts with {serving.IDS_INPUT_PREFIX!r}, which names "
                             "the categorical id inputs of an export; rename it.")
        example[name] = dense_values[key]
    example.update({name: ids[column.name] for name, column in columns.items()})
    if not example:
        raise ValueError("The model_fn reads no serving input (no dense feature, no categorical column); "
                         "there is nothing to export.")
    column_keys = {key for column in columns.values() for key in serving._raw_keys(column)}
    source_keys = sorted(set(dense_keys) | (column_keys & set(feature_sources)))
    other_keys = [key for key in raw_values if key not in dense_keys]

    def features_from(inputs: Mapping[str, torch.Tensor]) -> serving.ServingFeatures:
        return serving.ServingFeatures({key: inputs[feature_sources[key]] for key in dense_keys}, other_keys,
                                       supplier({name: inputs[name] for name in columns}))

    return _IdsPlan(export_outputs, example, columns, [feature_sources[k] for k in dense_keys], source_keys,
                    {feature_sources[k] for k in source_keys}, features_from)


def _check_same_outputs(expected: Mapping[str, ExportOutput], got: Mapping[str, ExportOutput]) -> None:
    layout_e, tensors_e, _ = _flatten_outputs(expected)
    layout_g, tensors_g, _ = _flatten_outputs(got)
    same = layout_e == layout_g and all(
        e.shape == g.shape and (torch.allclose(e, g, rtol=1e-5, atol=1e-6, equal_nan=True)
                                if e.is_floating_point() else torch.equal(e, g))
        for e, g in zip(tensors_e, tensors_g))
    if not same:
        raise ValueError("The model's outputs differ when its categorical ids are computed before the program "
                         "(as an export serves them) from when it computes them itself; the model_fn must read "
                         "categorical features only through feature columns to be exported.")


def export_saved_model(estimator: Any, export_dir_base: str | bytes | os.PathLike,
                       serving_input_receiver_fn: Callable[[], _AnyReceiver] | None,
                       assets_extra: Mapping[str, str] | None = None,
                       checkpoint_path: str | os.PathLike | None = None,
                       experimental_mode: ModeKeys = ModeKeys.PREDICT, format: str = "torch.export") -> str:
    """Exports ``estimator``'s model for serving; returns the new ``<export_dir_base>/<timestamp>`` (a str).

    The checkpoint is ``checkpoint_path``, else the latest in ``model_dir``, else the warm-start
    source. ``serving_input_receiver_fn()`` gives the inputs; ``model_fn`` is called in PREDICT mode
    on its features and every entry of ``spec.export_outputs`` becomes a signature. The program is
    traced on CPU, so it loads on machines without the training device.

    ``format="onnx"`` also writes ``model.onnx``, converted from the torch.export program and
    checked with onnxruntime against it (``estimator_engine.onnx_export``; needs the ``onnx``
    extra); a model that torch.export or ONNX cannot express is refused with the reason.

    Example:
        >>> # path = export_saved_model(est, '/tmp/export', build_raw_serving_input_receiver_fn({'x': x}))
        >>> # load(path)({'x': x})['y']
    """
    if format not in EXPORT_FORMATS:
        raise ValueError(f"format must be one of {list(EXPORT_FORMATS)}, given: {format!r}.")
    if format == "onnx":
        from estimator_engine.onnx_export import check_onnx_available

        check_onnx_available()
    if not serving_input_receiver_fn:
        raise ValueError("An input_receiver_fn must be defined.")
    if not callable(serving_input_receiver_fn):
        raise TypeError(f"serving_input_receiver_fn must be callable, given: {serving_input_receiver_fn!r}")
    if experimental_mode != ModeKeys.PREDICT:
        raise ValueError(f"experimental_mode={experimental_mode!r} is not supported: only ModeKeys.PREDICT "
                         "models can be exported (train and evaluate from the checkpoints instead).")
    if assets_extra is not None and not isinstance(assets_extra, Mapping):
        raise TypeError(f"assets_extra must be a dict of destination -> source path, given: {assets_extra!r}")
    path = _resolve_export_checkpoint(estimator, checkpoint_path)
    checkpoint = checkpoints.load_checkpoint(path)

    receiver = serving_input_receiver_fn()
    parsing_receiver = receiver if isinstance(receiver, serving.ParsingServingInputReceiver) else None
    csv_receiver = receiver if isinstance(receiver, serving.CsvServingInputReceiver) else None
    parsing = parsing_receiver is not None
    records = parsing or csv_receiver is not None  # served as records (dicts, CSV lines), not as tensors
    if not records and not isinstance(receiver, (ServingInputReceiver, TensorServingInputReceiver)):
        raise TypeError("serving_input_receiver_fn must return a ServingInputReceiver (or "
                        "TensorServingInputReceiver, or the ParsingServingInputReceiver of "
                        "build_parsing_serving_input_receiver_fn, or the CsvServingInputReceiver of "
                        f"build_csv_serving_input_receiver_fn), returned: {receiver!r:.200}")
    static_batch = getattr(serving_input_receiver_fn, "default_batch_size", None) is not None
    if isinstance(receiver, (serving.ParsingServingInputReceiver, serving.CsvServingInputReceiver)):
        receiver_tensors = {}
        features: Any = dict(receiver.features)
        raw_values: dict[str, Any] | None = features
        feature_sources = {key: key for key in features}
        rows = len(next(iter(features.values())))
        if isinstance(receiver, serving.CsvServingInputReceiver):
            raw_inputs = {receiver.input_name: {"dtype": "string", "shape": [rows if static_batch else -1]}}
        else:
            raw_inputs = {name: _spec_info(spec, static_batch, rows) for name, spec in receiver.feature_spec.items()}
    else:
        receiver_tensors = {name: t.detach().cpu() if isinstance(t, torch.Tensor) else t
                            for name, t in receiver.receiver_tensors.items()}
        # Features that are receiver tensors (or views of them) must stay the same objects as (views
        # of) the moved inputs.
        moved = {id(t): receiver_tensors[name] for name, t in receiver.receiver_tensors.items()}

        def move(value: Any) -> Any:
            if id(value) in moved:
                return moved[id(value)]
            root = _view_root(value)
            if isinstance(value, torch.Tensor) and id(root) in moved and _is_reshape_of(value, root):
                return moved[id(root)].reshape(value.shape)
            return value

        features = receiver.features
        strings = sorted(name for name, t in receiver_tensors.items() if _is_strings(t))
        if strings and not isinstance(features, Mapping):
            raise ValueError(f"The string serving inputs {strings} can feed the model only as entries of the "
                             "ServingInputReceiver's features dict (the inputs themselves or reshaped views), "
                             "where categorical feature columns map them to ids; a features function of "
                             "torch operations cannot take strings.")
        if isinstance(features, torch.Tensor):
            features = move(features)
        elif isinstance(features, Mapping):
            features = {k: move(v) for k, v in features.items()}
        raw_values, feature_sources = None, {}
        if isinstance(features, Mapping) and isinstance(receiver, ServingInputReceiver):
            # Plain receiver tensors as features: categorical columns over them can be served.
            sources = _feature_sources(features, receiver_tensors)
            if all(isinstance(k, str) for k in sources):
                raw_values, feature_sources = dict(features), sources
            elif strings:
                raise ValueError(f"Feature keys must be strings to serve the string inputs {strings}, given "
                                 f"{sorted(map(repr, sources))}.")
        records = records or bool(strings)  # string inputs need the preprocessing stage
        raw_inputs = {name: (_tensor_info(t, not static_batch) if isinstance(t, torch.Tensor) else
                             {"dtype": "string", "shape": [t.shape[0] if static_batch else -1, *t.shape[1:]]})
                      for name, t in receiver_tensors.items()}

    state = ModelState(torch.device("cpu"), checkpoint_path=path, checkpoint=checkpoint)
    # Traced on CPU, without moving the export's features to the training device (a move would
    # also copy the features mapping into a dict).
    call_model_fn = estimator.model_fn_caller(ModeKeys.PREDICT, device="cpu")

    layouts: list[list[_OutputLayout]] = []  # of every call, to check tracing saw the same outputs

    def call(model_features: Any) -> Mapping[str, ExportOutput]:
        spec = call_model_fn(model_features, None)
        if not spec.export_outputs:
            raise ValueError("model_fn returned no export_outputs and no tensor predictions to export. "
                             "Return EstimatorSpec(mode, predictions=..., export_outputs={...}).")
        layouts.append(_flatten_outputs(spec.export_outputs)[0])
        return spec.export_outputs

    base = gfile.normalize(export_dir_base)  # TF code may pass bytes
    remote = gfile.is_remote(base)
    if remote:  # built locally, then uploaded with the signature file last (the commit marker)
        gfile.filesystem(base)
        temp_dir = gfile.local_staging_dir("estimator-export-")
    else:
        os.makedirs(base, exist_ok=True)
        temp_dir = tempfile.mkdtemp(prefix="temp-", dir=base)
    try:
        plan = None
        with state.activated(ModeKeys.PREDICT), torch.no_grad(), _full_validation():
            if raw_values is not None:
                # One eager call creates and restores the modules and finds the categorical columns.
                try:
                    plan = _plan_precomputed_ids(call, raw_values, feature_sources, records)
                except (AttributeError, TypeError) as exc:
                    if records:
                        raise
                    # e.g. a model_fn using dict-only methods (features.pop): export it as before
                    _log.info("Exporting without a preprocessing stage: the model_fn needs a dict of "
                              "features (%s: %s).", type(exc).__name__, exc)
                    plan = None
            if plan is not None:
                export_outputs, program_inputs = plan.export_outputs, plan.example_inputs
            else:
                program = _ServingProgram(state, call, features, receiver_tensors)
                program_inputs = receiver_tensors
                # One eager call creates and restores the modules and tells the signatures.
                eager_features = program.features_from(receiver_tensors)
                if isinstance(features, torch.Tensor):
                    eager_features = eager_features[_SINGLE_FEATURE_DEFAULT_NAME]
                export_outputs = call(eager_features)
            layout, tensors, skipped = _flatten_outputs(export_outputs)
            if not tensors:
                raise ValueError("export_outputs hold no tensors to export; skipped: "
                                 f"{[s['output'] for s in skipped]}.")
            program = _ServingProgram(state, call, features, program_inputs,  # modules now exist
                                      features_from=plan.features_from if plan else None)
            program.eval()
            program_file, fallback_reason, dynamic_outputs, onnx_info = _trace(
                program, program_inputs, static_batch, temp_dir, plan.ids_inputs if plan else (),
                onnx_output_names=_onnx_output_names(layout, len(tensors)) if format == "onnx" else None)
            if layouts[-1] != layout:
                raise RuntimeError("model_fn returned different export_outputs while tracing than when called "
                                   f"eagerly ({layouts[-1]} vs {layout}); it must be deterministic in PREDICT mode.")
        variables = {k: v.detach().cpu().contiguous() for k, v in state.variables().items()}
        torch.save(variables, os.path.join(temp_dir, VARIABLES_FILENAME))
        if plan is not None:
            serving.write_preprocessing(
                temp_dir, {key: feature_sources[key] for key in plan.source_keys},
                {name: name for name in plan.dense_inputs}, plan.columns,
                parsing_receiver.feature_spec if parsing_receiver is not None else None,
                csv=csv_receiver.config if csv_receiver is not None else None)
        signatures: dict[str, Any] = {}
        for key in sorted(export_outputs):
            signatures[key] = {"method": _method(export_outputs[key]), "outputs": {}}
        batch_rows = next(iter(program_inputs.values())).shape[0]
        for key, name, index, vocabulary in layout:
            dynamic = dynamic_outputs[index] if dynamic_outputs is not None else (
                not static_batch and tensors[index].dim() > 0 and tensors[index].shape[0] == batch_rows)
            info = {"index": index, **_tensor_info(tensors[index], dynamic)}
            if vocabulary is not None:
                # A string output: the program returns ids, load() returns vocabulary[ids] as bytes.
                info = {**info, "dtype": "string", "lookup": {"ids_dtype": info["dtype"],
                                                              "vocabulary": list(vocabulary)}}
            signatures[key]["outputs"][name] = info
        signature = {
            "format": EXPORT_FORMAT,
            "format_version": EXPORT_FORMAT_VERSION if plan is not None else 1,
            "program": program_file,
            "program_format": "torch.export" if program_file == EXPORT_PROGRAM_FILENAME else "torchscript",
            "fallback_reason": fallback_reason,
            "inputs": (raw_inputs if plan is None else
                       {name: info for name, info in raw_inputs.items()
                        if parsing or csv_receiver is not None or name in plan.raw_input_names}),
            "default_signature": DEFAULT_SERVING_SIGNATURE_DEF_KEY,
            "signatures": signatures,
            "skipped_outputs": skipped,
            "num_outputs": len(tensors),
            "global_step": int(checkpoint.get("global_step", 0)),
            "checkpoint_path": path,
            "torch_version": torch.__version__,
        }
        if onnx_info is not None:
            signature["onnx"] = onnx_info
        if plan is not None:
            signature["preprocessing"] = serving.PREPROCESSING_FILENAME
            signature["program_inputs"] = {
                name: {**_tensor_info(t, not static_batch),
                       **({"shape": [-1 if not static_batch else t.shape[0], -1]} if name in plan.ids_inputs else {})}
                for name, t in program_inputs.items()}
        with open(os.path.join(temp_dir, SIGNATURE_FILENAME), "w", encoding="utf-8") as f:
            json.dump(signature, f, indent=2)
        for dest, source in (assets_extra or {}).items():
            target = os.path.join(temp_dir, ASSETS_EXTRA_DIRNAME, dest)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.copyfile(os.fspath(source), target)
        while not remote:
            final = _new_export_dir(base)
            try:
                os.rename(temp_dir, final)
                break
            except OSError:
                if not os.path.exists(final):
                    raise
        if remote:
            # An object store has no rename: every file goes to the final prefix and the signature
            # file, which load() requires, goes last, so an interrupted upload is no export.
            final = _new_export_dir(base)
            gfile.upload_tree(temp_dir, final, last=SIGNATURE_FILENAME)
            shutil.rmtree(temp_dir, ignore_errors=True)
    except BaseException:
        shutil.rmtree(temp_dir, ignore_errors=True)
        raise
    _log.info("Exported model (step %d, %s) to %s.", signature["global_step"], signature["program_format"], final)
    return final


def _onnx_output_names(layout: list[_OutputLayout], count: int) -> list[str]:
    """A readable, unique name per program output: its name in the ``predict`` signature (else the
    first signature naming it), with ``_<index>`` added on a clash."""
    names: dict[int, str] = {}
    for _key, name, index, _ in sorted(layout, key=lambda entry: entry[0] != "predict"):
        names.setdefault(index, name)
    out: list[str] = []
    for index in range(count):
        name = names.get(index, f"output_{index}")
        out.append(name if name not in out else f"{name}_{index}")
    return out


def _trace(program: _ServingProgram, inputs: dict[str, torch.Tensor], static_batch: bool,
           directory: str, ids_inputs: Iterable[str] = (), onnx_output_names: list[str] | None = None
           ) -> tuple[str, str | None, list[bool] | None, dict[str, Any] | None]:
    """Writes the program; returns (file name, why torch.export failed or None, dynamic batch per
    output, the ONNX model's description or None).

    The batch dimension is dynamic unless ``static_batch``; so is the width (values per row) of the
    categorical id inputs ``ids_inputs``. With ``onnx_output_names`` the program is also written as
    ONNX (``onnx_export.write_onnx``), which needs torch.export to succeed.
    """
    ids_inputs = set(ids_inputs)
    batch = None if static_batch else torch.export.Dim("batch", min=1)
    shapes: dict[str, dict[int, Any] | None] = {}
    for number, (name, tensor) in enumerate(inputs.items()):
        dims: dict[int, Any] = {}
        if batch is not None and tensor.dim() > 0:
            dims[0] = batch
        if name in ids_inputs:
            dims[1] = torch.export.Dim(f"ids_width_{number}", min=1)
        shapes[name] = dims or None
    dynamic_shapes = (shapes,) if any(shapes.values()) else None
    try:
        exported = torch.export.export(program, (inputs,), dynamic_shapes=dynamic_shapes, strict=False)
        exported._example_inputs = None  # sample inputs would be unpickled on load; not needed
        torch.export.save(exported, os.path.join(directory, EXPORT_PROGRAM_FILENAME))
        output_node = exported.graph.find_nodes(op="output")[0]
        dynamic = []
        for node in output_node.args[0]:
            value = getattr(node, "meta", {}).get("val")
            dynamic.append(bool(value is not None and value.dim() > 0 and isinstance(value.shape[0], torch.SymInt)))
    except Exception as exc:
        reason = f"torch.export failed: {type(exc).__name__}: {str(exc).strip()[:2000]}"
        if onnx_output_names is not None:
            raise ValueError(f"Cannot export this model to ONNX: the ONNX model is converted from the "
                             f"torch.export program, and {reason.splitlines()[0]}") from exc
        _log.warning("%s; falling back to torch.jit.trace.", reason.splitlines()[0])
    else:
        onnx_info = None
        if onnx_output_names is not None:
            from estimator_engine.onnx_export import write_onnx

            onnx_info = write_onnx(exported, inputs, onnx_output_names, directory, static_batch)
        return EXPORT_PROGRAM_FILENAME, None, dynamic, onnx_info
    with warnings.catch_warnings():  # TorchScript is deprecated, but it is the fallback we have
        warnings.simplefilter("ignore")  # deprecation, and "treated as a constant": checked below
        traced = torch.jit.trace(program, (inputs,), strict=False, check_trace=False)
    _check_trace_generalises(program, traced, inputs, static_batch, reason)
    traced.save(os.path.join(directory, TORCHSCRIPT_PROGRAM_FILENAME))
    return TORCHSCRIPT_PROGRAM_FILENAME, reason, None, None


def _check_trace_generalises(program: _ServingProgram, traced: Any, inputs: dict[str, torch.Tensor],
                             static_batch: bool, reason: str) -> None:
    """Raises ValueError when the traced program disagrees with the model on other inputs.

    A trace records one run: values the model_fn took out of tensors (``.numpy()``, ``.tolist()``,
    ``if tensor...``), e.g. the ids of a categorical feature column, become constants, and the
    program then serves the example batch's answer for every input. Comparing with the eager
    model on other values (rows reversed, floats shifted) and, with a dynamic batch, another
    batch size catches that before a wrong model is written.
    """
    variants = [{name: (t.flip(0) if t.dim() > 0 else t) + (0.5 if t.is_floating_point() else 0)
                 for name, t in inputs.items()}]
    if not static_batch:
        rows = next((t.shape[0] for t in inputs.values() if t.dim() > 0), 1)
        variants.append({name: _resize_batch(t, rows + 1) if t.dim() > 0 else t for name, t in inputs.items()})
    for variant in variants:
        expected = program(variant)
        try:
            got = traced(variant)
            same = len(got) == len(expected) and all(
                g.shape == e.shape and (torch.allclose(g, e, rtol=1e-4, atol=1e-5, equal_nan=True)
                                        if e.is_floating_point() else torch.equal(g, e))
                for g, e in zip(got, expected))
            detail = "its outputs differ from the model's"
        except Exception as exc:  # e.g. a shape baked into the trace
            same, detail = False, f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:300]}"
        if not same:
            raise ValueError(
                f"Cannot export this model: {reason.splitlines()[0]}, and the TorchScript fallback "
                f"does not reproduce the model on inputs other than the example batch ({detail}). "
                "The trace recorded values the model_fn took out of tensors (.numpy(), .tolist(), "
                "Python branches on tensor values) as constants. Export a model_fn whose PREDICT path "
                "uses torch operations only; categorical ids are best mapped by feature columns, "
                "whose lookups the export runs before the program.")


# -- load -------------------------------------------------------------------------------------


def _check_export_archive(path: str) -> None:
    """Refuses a torch.export archive holding anything ``torch.export.load`` would unpickle unsafely."""
    try:
        archive = zipfile.ZipFile(path)
    except zipfile.BadZipFile as exc:
        raise ValueError(f"{path} is not a torch.export archive: {exc}") from exc
    with archive:
        names = archive.namelist()
        if not any(name.endswith("archive_format") for name in names):
            raise ValueError(f"{path} is in a legacy torch.export format, which loads with pickle; re-export it.")
        for name in names:
            if name.endswith(".json") and "/data/" in name:
                config = json.loads(archive.read(name) or b"{}")
                for entry, meta in (config.get("config") or {}).items():
                    if isinstance(meta, Mapping) and meta.get("use_pickle"):
                        raise ValueError(f"{path} holds a pickled value ({entry!r} in {name}); refusing to "
                                         "load it, as unpickling can run arbitrary code.")
            elif "/data/sample_inputs/" in name:
                data = archive.read(name)
                if data:
                    try:
                        torch.load(io.BytesIO(data), weights_only=True)
                    except Exception as exc:
                        raise ValueError(f"{path}: sample inputs {name} need unsafe unpickling; refusing to load.") from exc


class LoadedModel:
    """A loaded export: call it with a features dict (numpy arrays, lists or tensors) to get the outputs.

    An export with a preprocessing stage (a model with vocabulary, hash-bucket, identity or crossed
    columns) takes the raw values (strings, ints), maps them to ids as the feature columns did in
    training, and runs the program on them. One made with ``build_parsing_serving_input_receiver_fn``
    also takes records: a list of dicts, one dict of scalars (one record), or JSON lines text.

    Attributes:
        signature_key: the signature this callable returns.
        signature: the parsed ``signature.json``.
        inputs: raw input name -> {'dtype', 'shape'} (-1 is the batch dimension; dtype 'string' for text).
        output_names: the names of the returned outputs.
        preprocessing: the preprocessing stage (``serving.Preprocessor``) or ``None``.

    Example:
        >>> # model = load('/tmp/export/1764660000'); model({'x': np.zeros((4, 1), np.float32)})['y']
        >>> # model([{'age': 39, 'occupation': 'Sales'}])['scores']     # a parsing export
    """

    def __init__(self, path: str, signature: Mapping[str, Any], signature_key: str, program: Callable[..., Any],
                 preprocessing: serving.Preprocessor | None = None) -> None:
        self.path = path
        self.signature = dict(signature)
        self.signature_key = signature_key
        self.inputs: dict[str, Any] = dict(signature["inputs"])
        self._outputs = dict(signature["signatures"][signature_key]["outputs"])
        # String outputs (TF's classes): the program's ids mapped through the recorded vocabulary.
        self._lookups = {name: StringLookup(torch.zeros(0, dtype=torch.int64), info["lookup"]["vocabulary"])
                         for name, info in self._outputs.items() if info.get("lookup")}
        self.output_names = list(self._outputs)
        self._program = program
        self.preprocessing = preprocessing
        self._program_inputs: dict[str, Any] = dict(signature.get("program_inputs") or signature["inputs"])
        self._dtypes = {name: getattr(torch, info["dtype"]) for name, info in self._program_inputs.items()}

    def __repr__(self) -> str:
        return f"LoadedModel(path={self.path!r}, signature={self.signature_key!r}, outputs={self.output_names})"

    def __call__(self, features: Any) -> dict[str, torch.Tensor | np.ndarray]:
        csv_layout = self.preprocessing.csv if self.preprocessing is not None else None
        if csv_layout is not None:
            features = self._decode_csv_lines(features, csv_layout)
        if isinstance(features, (str, bytes)) or serving._sequence_of_records(features) or (
                isinstance(features, Mapping) and self.preprocessing is not None
                and self.preprocessing.parse_spec is not None and features
                and all(isinstance(v, (str, bytes, int, float)) or v is None for v in features.values())):
            features = self.parse(features)  # records; a dict of scalars is one record
        if not isinstance(features, Mapping):
            raise TypeError("features must be a dict of input name -> array or tensor (or, for an export made "
                            "with build_parsing_serving_input_receiver_fn, records: a list of dicts or JSON "
                            f"lines), given: {features!r:.200}")
        needed = self.preprocessing.raw_inputs if self.preprocessing else list(self._program_inputs)
        missing = [name for name in needed if name not in features]
        if missing:
            raise ValueError(f"Missing inputs {missing}; this export expects {sorted(self.inputs)}, given {sorted(features)}.")
        if self.preprocessing is not None:
            features = self.preprocessing(features)
        inputs = {}
        for name, dtype in self._dtypes.items():
            value = features[name]
            # np.array copies read-only arrays (pandas 3 hands those out), which torch cannot wrap.
            tensor = value if isinstance(value, torch.Tensor) else torch.from_numpy(np.array(value))
            shape = self._program_inputs[name]["shape"]
            if self.preprocessing is not None and tensor.dim() != len(shape) and -1 not in shape[1:] and tensor.dim() > 0:
                # a column of scalars for a [batch, 1] input, as predict() accepts it
                tensor = tensor.reshape(tensor.shape[0], *shape[1:])
            inputs[name] = tensor.to(device="cpu", dtype=dtype)
        with torch.no_grad():
            results = self._program(inputs)
        return {name: (self._lookups[name].lookup(results[info["index"]]) if name in self._lookups
                       else results[info["index"]])
                for name, info in self._outputs.items()}

    def _decode_csv_lines(self, features: Any, layout: Mapping[str, Any]) -> dict[str, Any]:
        """The features of a CSV-line export's input: ``{input_name: lines}``, or the lines alone."""
        name = layout["input_name"]
        if isinstance(features, Mapping):
            if name not in features:
                raise ValueError(f"Missing input {name!r}: this export takes CSV lines of "
                                 f"{layout['column_names']}, given {sorted(features)}.")
            lines = features[name]
        else:
            lines = features
        if isinstance(lines, (str, bytes)):
            lines = [lines]
        if isinstance(lines, torch.Tensor) or np.asarray(lines, dtype=object).ndim != 1:
            raise ValueError(f"Input {name!r} must be a list (or 1-D array) of CSV lines, given {lines!r:.200}.")
        return serving.csv_features(layout, lines)

    def parse(self, records: Any) -> dict[str, np.ndarray]:
        """Raw features from records (dicts or JSON lines) with the export's parse spec.

        Example:
            >>> # model.parse('{"age": 39, "occupation": "Sales"}')['occupation']
        """
        spec = self.preprocessing.parse_spec if self.preprocessing is not None else None
        if spec is None:
            raise ValueError(f"The export {self.path} was not made with build_parsing_serving_input_receiver_fn, "
                             f"so it has no parse spec for records; pass a dict of inputs {sorted(self.inputs)}.")
        return parse_records(records, spec)


def _load_remote(url: str, signature: str, runtime: str) -> LoadedModel:
    """load() of an export on an object store: its files are downloaded to a local folder first
    (removed when the loaded model is collected)."""
    if not gfile.isfile(gfile.join(url, SIGNATURE_FILENAME)):
        raise ValueError(f"{url} is not an export directory: {SIGNATURE_FILENAME} is missing (or its "
                         "upload did not finish). Pass the <export_dir_base>/<timestamp> URL "
                         "export_saved_model returned.")
    local = gfile.local_staging_dir("estimator-export-")
    try:
        fs, inner = gfile.filesystem(url)
        with gfile.reporting("download", url):
            fs.get(inner.rstrip("/") + "/", local + os.sep, recursive=True)
        model = load(local, signature, runtime)
    except BaseException:
        shutil.rmtree(local, ignore_errors=True)
        raise
    weakref.finalize(model, shutil.rmtree, local, True)
    return model


def load(path: str | os.PathLike, signature: str = DEFAULT_SERVING_SIGNATURE_DEF_KEY,
         runtime: str = "torch") -> LoadedModel:
    """Loads an export written by ``export_saved_model`` and returns a callable for ``signature``.

    Needs neither the model_fn's source nor this package's Estimator; the program is loaded with
    ``torch.export.load`` (after checking the archive has nothing to unpickle) or ``torch.jit.load``.
    ``runtime="onnxruntime"`` runs the export's ``model.onnx`` instead (``format="onnx"`` exports);
    the preprocessing stage and the string lookups are the same.

    Example:
        >>> # outputs = load(path)({'x': np.ones((3, 1), np.float32)})
    """
    path = gfile.normalize(path)
    if gfile.is_remote(path):
        return _load_remote(path, signature, runtime)
    signature_file = os.path.join(path, SIGNATURE_FILENAME)
    if not os.path.isfile(signature_file):
        raise ValueError(f"{path} is not an export directory: {SIGNATURE_FILENAME} is missing. "
                         "Pass the <export_dir_base>/<timestamp> path export_saved_model returned.")
    with open(signature_file, encoding="utf-8") as f:
        meta = json.load(f)
    if meta.get("format") != EXPORT_FORMAT or meta.get("format_version", 0) > EXPORT_FORMAT_VERSION:
        raise ValueError(f"{signature_file} has format {meta.get('format')!r} version {meta.get('format_version')!r}; "
                         f"this version reads {EXPORT_FORMAT!r} up to version {EXPORT_FORMAT_VERSION}.")
    if signature not in meta["signatures"]:
        raise ValueError(f"Unknown signature {signature!r}; this export has {sorted(meta['signatures'])}.")
    if runtime not in ("torch", "onnxruntime"):
        raise ValueError(f"runtime must be 'torch' or 'onnxruntime', given: {runtime!r}.")
    program_file = os.path.join(path, meta["program"])
    module: Any
    if runtime == "onnxruntime":
        if not meta.get("onnx"):
            raise ValueError(f"{path} has no ONNX model; export it with export_saved_model(..., format='onnx') "
                             "or load it with runtime='torch'.")
        from estimator_engine.onnx_export import onnxruntime_program

        module = onnxruntime_program(path, meta["onnx"])
    elif meta["program"] == EXPORT_PROGRAM_FILENAME:
        _check_export_archive(program_file)
        module = torch.export.load(program_file).module()
    elif meta["program"] == TORCHSCRIPT_PROGRAM_FILENAME:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            module = torch.jit.load(program_file, map_location="cpu")
    else:
        raise ValueError(f"Unknown program file {meta['program']!r} in {signature_file}.")
    preprocessing = None
    if meta.get("preprocessing"):
        preprocessing = serving.read_preprocessing(path)
        if preprocessing is None:
            raise ValueError(f"{path} names a preprocessing stage, but {meta['preprocessing']} is missing.")
    return LoadedModel(path, meta, signature, module, preprocessing)
