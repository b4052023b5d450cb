"""TensorFlow Serving's REST API as plain functions: JSON request bodies -> model inputs, model
outputs -> JSON response bodies (the HTTP layer is ``estimator_workbench.serve.app``).

Follows TF Serving's ``api_rest`` document:

* status (``GetModelStatusResponse``): ``{"model_version_status": [{"version": "N", "state":
  "AVAILABLE", "status": {"error_code": "OK", "error_message": ""}}]}``;
* metadata (``GetModelMetadataResponse``): ``{"model_spec": ..., "metadata": {"signature_def":
  {"signature_def": {key: {"inputs", "outputs", "method_name"}}}}}`` with TF's dtype names
  (``DT_FLOAT``) and shapes as ``{"dim": [{"size": "-1", "name": ""}], "unknown_rank": false}``;
* predict: ``instances`` (row format) answers ``predictions`` (a list of values when the signature
  has one output, else a list of objects); ``inputs`` (columnar) answers ``outputs`` (a value or an
  object of named values);
* classify / regress: ``examples`` (plus an optional ``context`` shared by all) answer ``results``:
  ``[[label, score], ...]`` per example, or one number per example;
* values: strings as JSON strings (bytes decoded as UTF-8; an input or output whose name ends in
  ``_bytes``, or any value given as ``{"b64": ...}``, is base64); ``NaN`` and ``Infinity`` allowed;
* errors: ``RequestError(status, message)`` -> ``{"error": message}`` (400 bad request, 404 not found).

An export made with ``build_parsing_serving_input_receiver_fn`` (every workbench run's export) takes
records: each instance or example is a dict of feature -> value(s), parsed with the export's parse
spec as TF parses ``tf.Example`` protos. Other exports take tensors named as their inputs.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from estimator_workbench.serve.repository import ModelRepository, ModelVersion

__all__ = ["METHOD_NAMES", "RequestError", "classify", "model_metadata", "model_status", "predict", "regress"]

# The export's method -> TF's SignatureDef method_name.
METHOD_NAMES = {"predict": "tensorflow/serving/predict", "classify": "tensorflow/serving/classify",
                "regress": "tensorflow/serving/regress"}
_DT_NAMES = {"float32": "DT_FLOAT", "float64": "DT_DOUBLE", "float16": "DT_HALF", "bfloat16": "DT_BFLOAT16",
             "int64": "DT_INT64", "int32": "DT_INT32", "int16": "DT_INT16", "int8": "DT_INT8",
             "uint8": "DT_UINT8", "bool": "DT_BOOL", "string": "DT_STRING"}


class RequestError(ValueError):
    """A request TF Serving would refuse: ``status`` is the HTTP status, the message goes to ``error``.

    Example:
        >>> RequestError(400, "Missing 'inputs' or 'instances' key").status
        400
    """

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


# -- status and metadata -----------------------------------------------------------------------


def model_status(repository: ModelRepository, name: str, version: int | None) -> dict[str, Any]:
    """TF Serving's model status: every loaded version (or the one asked for), newest first."""
    versions = [repository.get(name, version)] if version is not None else \
        sorted(repository.versions(name).values(), key=lambda v: -v.version)
    return {"model_version_status": [
        {"version": str(v.version), "state": "AVAILABLE", "status": {"error_code": "OK", "error_message": ""}}
        for v in versions]}


def _tensor_info(name: str, info: Mapping[str, Any]) -> dict[str, Any]:
    shape = info.get("shape")
    return {"dtype": _DT_NAMES.get(str(info.get("dtype")), "DT_INVALID"),
            "tensor_shape": {"dim": [{"size": str(size), "name": ""} for size in shape or []],
                             "unknown_rank": shape is None},
            "name": name}


def model_metadata(repository: ModelRepository, name: str, version: int | None) -> dict[str, Any]:
    """TF Serving's model metadata: the signature defs with their inputs, outputs and method names."""
    served = repository.get(name, version)
    definitions = {}
    for key, signature in served.meta["signatures"].items():
        definitions[key] = {
            "inputs": {n: _tensor_info(n, info) for n, info in served.meta["inputs"].items()},
            "outputs": {n: _tensor_info(n, info) for n, info in signature["outputs"].items()},
            "method_name": METHOD_NAMES.get(signature.get("method"), METHOD_NAMES["predict"]),
            "defaults": {},
        }
    return {"model_spec": {"name": name, "signature_name": "", "version": str(served.version)},
            "metadata": {"signature_def": {"signature_def": definitions}}}


# -- requests ----------------------------------------------------------------------------------


def _signature(served: ModelVersion, body: Mapping[str, Any]) -> tuple[str, Any]:
    key = body.get("signature_name") or served.default_signature
    if not isinstance(key, str) or key not in served.signatures:
        raise RequestError(400, f'Serving signature name: "{key}" not found in signature def')
    return key, served.signatures[key]


def _decode_value(value: Any, named: bool = False) -> Any:
    """``{"b64": ...}`` -> bytes, recursively through lists; ``named``: ``value`` may be an object of
    named values (an instance, an example, the columnar inputs), whose values are decoded."""
    if isinstance(value, Mapping):
        if named and not _is_b64(value):
            return {key: _decode_value(v) for key, v in value.items()}
        if _is_b64(value):
            try:
                return base64.b64decode(value["b64"], validate=True)
            except ValueError as exc:
                raise RequestError(400, f"Unable to base64 decode: {exc}") from None
        raise RequestError(400, f"A tensor value must be a number, a string, a list or {{\"b64\": ...}}, "
                                f"given an object with keys {sorted(value)}")
    if isinstance(value, list):
        return [_decode_value(v) for v in value]
    return value


def _is_b64(value: Mapping[str, Any]) -> bool:
    return set(value) == {"b64"} and isinstance(value["b64"], str)


def _has_parse_spec(model: Any) -> bool:
    return model.preprocessing is not None and model.preprocessing.parse_spec is not None


def _records_from_columns(columns: Mapping[str, Any]) -> list[dict[str, Any]]:
    lengths = {name: len(value) if isinstance(value, list) else None for name, value in columns.items()}
    if any(n is None for n in lengths.values()) or len(set(lengths.values())) > 1:
        raise RequestError(400, f"The 'inputs' of this model are records: every input must be a list with "
                                f"one entry per example, all of the same length; given lengths {lengths}")
    rows = next(iter(lengths.values()), 0) or 0
    return [{name: value[i] for name, value in columns.items()} for i in range(rows)]


def _check_known(names: Sequence[str], model: Any, where: str) -> None:
    unknown = [n for n in names if n not in model.inputs]
    if unknown:
        raise RequestError(400, f"input tensor alias not found in signature: {', '.join(unknown)} (in {where}). "
                                f"Inputs expected to be in the set {{{', '.join(sorted(model.inputs))}}}.")


def _tensor(name: str, value: Any, info: Mapping[str, Any]) -> Any:
    dtype = str(info["dtype"])
    try:
        if dtype == "string":
            array = np.asarray(value, dtype=object)
        else:
            array = np.asarray(value, dtype=getattr(np, dtype) if dtype != "bfloat16" else np.float32)
    except (TypeError, ValueError) as exc:
        raise RequestError(400, f"Input {name!r}: cannot read the value as a {dtype} tensor ({exc}); "
                                "nested lists must be rectangular") from None
    shape = info.get("shape") or []
    if array.ndim != len(shape) or any(s not in (-1, d) for s, d in zip(shape, array.shape)):
        raise RequestError(400, f"Input {name!r} has shape {list(array.shape)}; the signature expects "
                                f"{shape} (-1: any size)")
    if dtype == "string":
        return array
    tensor = torch.from_numpy(np.ascontiguousarray(array))
    return tensor.to(torch.bfloat16) if dtype == "bfloat16" else tensor


def _model_inputs(model: Any, columns: Mapping[str, Any] | None, records: list[dict[str, Any]] | None) -> Any:
    """What the loaded model is called with: records for a parsing export, else named tensors."""
    if _has_parse_spec(model):
        if records is None:
            records = _records_from_columns(columns or {})
        return records
    if columns is None:
        columns = {}
        for index, record in enumerate(records or []):
            missing = [n for n in model.inputs if n not in record]
            if missing:
                raise RequestError(400, f"Failed to process element: {index} of 'instances' list: missing "
                                        f"input(s) {missing}; each instance needs {sorted(model.inputs)}")
            for name in model.inputs:
                columns.setdefault(name, []).append(record[name])
    _check_known(list(columns), model, "the request")
    missing = [n for n in model.inputs if n not in columns]
    if missing:
        raise RequestError(400, f"Missing input(s) {missing}; this signature takes {sorted(model.inputs)}")
    return {name: _tensor(name, columns[name], model.inputs[name]) for name in model.inputs}


def _run(model: Any, inputs: Any) -> dict[str, Any]:
    try:
        return model(inputs)
    except RequestError:
        raise
    except (ValueError, TypeError, KeyError, IndexError, RuntimeError) as exc:
        # Bad values or shapes (TF Serving's INVALID_ARGUMENT): the first line says what.
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise RequestError(400, message) from None


def _json_values(name: str, value: Any) -> Any:
    """An output as JSON values: numbers, strings (bytes decoded), ``{"b64": ...}`` for ``*_bytes``."""
    array = value.detach().cpu().numpy() if isinstance(value, torch.Tensor) else np.asarray(value)
    if array.dtype == object or array.dtype.kind in "SU":
        binary = name.endswith("_bytes")

        def text(v: Any) -> Any:
            if isinstance(v, bytes):
                return {"b64": base64.b64encode(v).decode("ascii")} if binary else v.decode("utf-8", "replace")
            return str(v)

        return np.vectorize(text, otypes=[object])(array).tolist() if array.size else array.tolist()
    return array.tolist()


def _rows(outputs: Mapping[str, Any], rows: int) -> dict[str, list[Any]]:
    out = {}
    for name, value in outputs.items():
        values = _json_values(name, value)
        if not isinstance(values, list) or len(values) != rows:
            size = len(values) if isinstance(values, list) else "a scalar"
            raise RequestError(400, f"Tensor name: {name} has inconsistent batch size: {size} expecting: {rows}; "
                                    "use the columnar 'inputs' format for this signature")
        out[name] = values
    return out


def predict(repository: ModelRepository, name: str, version: int | None, body: Any) -> dict[str, Any]:
    """``POST /v1/models/NAME[/versions/N]:predict``."""
    body = _body(body)
    served = repository.get(name, version)
    _, model = _signature(served, body)
    if "instances" in body and "inputs" in body:
        raise RequestError(400, "Not both of 'instances' and 'inputs' can be specified")
    if "instances" not in body and "inputs" not in body:
        raise RequestError(400, "Missing 'inputs' or 'instances' key")
    single = next(iter(model.inputs)) if len(model.inputs) == 1 else None
    if "instances" in body:
        instances = body["instances"]
        if isinstance(instances, list):
            instances = [_decode_value(i, named=True) for i in instances]
        if not isinstance(instances, list):
            raise RequestError(400, "'instances' must be a list (one entry per example)")
        if instances and all(isinstance(i, Mapping) for i in instances):
            records: list[dict[str, Any]] | None = [dict(i) for i in instances]
            columns = None
            if not _has_parse_spec(model):
                _check_known([k for r in records for k in r], model, "'instances'")
        elif single is not None:
            records, columns = None, {single: instances}
        else:
            raise RequestError(400, f"This signature has {len(model.inputs)} inputs "
                                    f"{sorted(model.inputs)}: each instance must be an object naming them")
        outputs = _run(model, _model_inputs(model, columns, records))
        named = _rows(outputs, len(instances))
        if len(named) == 1:
            return {"predictions": next(iter(named.values()))}
        return {"predictions": [{n: values[i] for n, values in named.items()} for i in range(len(instances))]}
    given = _decode_value(body["inputs"], named=True)
    if isinstance(given, Mapping):
        columns = dict(given)
    elif single is not None:
        columns = {single: given}
    else:
        raise RequestError(400, f"This signature has {len(model.inputs)} inputs {sorted(model.inputs)}: "
                                "'inputs' must be an object naming them")
    if _has_parse_spec(model):
        _check_known(list(columns), model, "'inputs'")
    outputs = _run(model, _model_inputs(model, columns, None))
    encoded = {n: _json_values(n, v) for n, v in outputs.items()}
    return {"outputs": next(iter(encoded.values())) if len(encoded) == 1 else encoded}


def _body(body: Any) -> Mapping[str, Any]:
    if not isinstance(body, Mapping):
        raise RequestError(400, "The request body must be a JSON object")
    return body


def _examples(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    examples = body.get("examples")
    if not isinstance(examples, list) or not all(isinstance(e, Mapping) for e in examples):
        raise RequestError(400, "'examples' must be a list of objects (feature name -> value or list)")
    examples = [_decode_value(e, named=True) for e in examples]
    context = _decode_value(body.get("context") or {}, named=True)
    if not isinstance(context, Mapping):
        raise RequestError(400, "'context' must be an object (feature name -> value or list)")
    records = []
    for index, example in enumerate(examples):
        clash = sorted(set(context) & set(example))
        if clash:
            raise RequestError(400, f"Example {index}: feature(s) {clash} appear both in 'context' and in the "
                                    "example; a context feature must not appear in examples")
        records.append({**context, **example})
    return records


def _method_model(served: ModelVersion, body: Mapping[str, Any], method: str) -> Any:
    key, model = _signature(served, body)
    found = served.meta["signatures"][key].get("method", "predict")
    if found != method:
        raise RequestError(400, f"Expected {'classification' if method == 'classify' else 'regression'} signature "
                                f"method_name to be {METHOD_NAMES[method]}. Was: {METHOD_NAMES.get(found, found)}")
    return model


def _example_inputs(model: Any, records: list[dict[str, Any]]) -> Any:
    if not _has_parse_spec(model):
        _check_known([k for r in records for k in r], model, "'examples'")
    return _model_inputs(model, None, records)


def classify(repository: ModelRepository, name: str, version: int | None, body: Any) -> dict[str, Any]:
    """``POST /v1/models/NAME[/versions/N]:classify``: ``[[label, score], ...]`` per example."""
    body = _body(body)
    model = _method_model(repository.get(name, version), body, "classify")
    records = _examples(body)
    outputs = _rows(_run(model, _example_inputs(model, records)), len(records))
    scores, classes = outputs.get("scores"), outputs.get("classes")
    results = []
    for i in range(len(records)):
        row_scores = scores[i] if scores is not None else None
        row_classes = classes[i] if classes is not None else None
        width = len(row_scores if row_scores is not None else row_classes)  # type: ignore[arg-type]
        results.append([[row_classes[j] if row_classes is not None else "",
                         row_scores[j] if row_scores is not None else 0.0] for j in range(width)])
    return {"results": results}


def regress(repository: ModelRepository, name: str, version: int | None, body: Any) -> dict[str, Any]:
    """``POST /v1/models/NAME[/versions/N]:regress``: one number per example."""
    body = _body(body)
    model = _method_model(repository.get(name, version), body, "regress")
    records = _examples(body)
    outputs = _rows(_run(model, _example_inputs(model, records)), len(records))
    results = []
    for value in outputs["outputs"]:
        flat = value if not isinstance(value, list) else (value[0] if len(value) == 1 else None)
        if flat is None or isinstance(flat, list):
            raise RequestError(400, "Expected output Tensor shape to be either [batch_size] or [batch_size, 1] "
                                    f"but got {len(value)} values per example")
        results.append(flat)
    return {"results": results}

