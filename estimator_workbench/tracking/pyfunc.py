"""An exported run as an MLflow pyfunc model: ``mlflow.pyfunc.load_model(uri).predict(DataFrame)``.

The model is the engine's own export (``estimator_engine.export``, the folder ``estimator-workbench
serve`` serves), logged as the pyfunc model's artifact ``export`` and loaded with the serving
code's ``ModelVersion.load`` (no model_fn source, nothing unpickled). It is logged "from code"
(MLflow's ``set_model`` in a three-line file, ``MODEL_CODE``), so the MLflow model holds no
pickled Python object either; loading it needs this package installed (``pip_requirements``).

``predict(DataFrame)`` takes one column per input of the export (the run's feature columns: numbers,
and strings for categorical columns) and returns ``{output name: numpy array}`` of the export's
``predict`` signature (every prediction key ``Estimator.predict()`` yields, same numbers; strings
as ``str`` where ``predict()`` yields ``bytes``), or of the signature named by the
``signature_name`` param. The MLflow model signature is made from the export's ``signature.json``
(``model_signature``).

Importable without mlflow (the class then derives from ``object``): only a process that logs or
loads the model imports mlflow.

Example:
    >>> import mlflow                                                               # doctest: +SKIP
    >>> model = mlflow.pyfunc.load_model("models:/m-0123abcd")                      # doctest: +SKIP
    >>> model.predict(pd.DataFrame({"size": [1.5], "color": ["red"]}))["probabilities"]  # doctest: +SKIP
    array([[0.31, 0.69]], dtype=float32)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

try:
    from mlflow.pyfunc import PythonModel
except ImportError:  # the mlflow extra is not installed: nothing logs or loads a pyfunc model here
    PythonModel = object  # type: ignore[assignment,misc]

__all__ = ["EXPORT_ARTIFACT", "MODEL_CODE", "SIGNATURE_PARAM", "ExportedModel", "column_type", "model_signature",
           "pyfunc_signature_key"]

EXPORT_ARTIFACT = "export"  # the artifact key (and folder) of the engine's export in the MLflow model

# MLflow's "models from code": the file ``mlflow.pyfunc.log_model(python_model=...)`` copies into
# the model and runs when the model is loaded.
MODEL_CODE = ("from mlflow.models import set_model\n\n"
              "from estimator_workbench.tracking.pyfunc import ExportedModel\n\n"
              "set_model(ExportedModel())\n")

SIGNATURE_PARAM = "signature_name"

# The export's dtypes -> MLflow's column types. Floats are declared double: a DataFrame's numbers
# are float64, which MLflow would refuse for a float column; the export parses them to its own dtype.
_COLUMN_TYPES = {"float32": "double", "float64": "double", "float16": "double", "bfloat16": "double",
                 "int64": "long", "int32": "long", "int16": "integer", "int8": "integer", "uint8": "integer",
                 "bool": "boolean", "string": "string"}


def pyfunc_signature_key(meta: Mapping[str, Any]) -> str:
    """The signature the pyfunc model answers by default: ``predict`` (every prediction key, as
    ``Estimator.predict()`` yields them) when the export has it, else its default signature."""
    signatures = meta.get("signatures") or {}
    return "predict" if "predict" in signatures else str(meta.get("default_signature") or "serving_default")


def column_type(dtype: Any) -> str:
    """The MLflow column type of a pandas/numpy dtype: ``long`` for integers, ``double`` for
    floats, ``boolean``, else ``string``.

    Example:
        >>> column_type(np.dtype("int64")), column_type(np.dtype("float32")), column_type(np.dtype(object))
        ('long', 'double', 'string')
    """
    kind = np.dtype(dtype).kind if not hasattr(dtype, "kind") else dtype.kind
    return {"i": "long", "u": "long", "f": "double", "b": "boolean"}.get(kind, "string")


def model_signature(meta: Mapping[str, Any], column_types: Mapping[str, str] | None = None) -> Any:
    """The MLflow ``ModelSignature`` of an export's ``signature.json``: one column per input (a
    value per row; an array column where a row holds several numbers), one tensor per output of
    the pyfunc's signature, and the ``signature_name`` param.

    ``column_types``: input name -> MLflow type (``column_type`` of the run's dataset columns), so
    that the DataFrames of that dataset pass MLflow's input check (it refuses int64 data for a
    double column); an input not named there takes the export's dtype (floats as double)."""
    from mlflow.models.signature import ModelSignature
    from mlflow.types.schema import (
        Array,
        ColSpec,
        DataType,
        ParamSchema,
        ParamSpec,
        Schema,
        TensorSpec,
    )

    columns = []
    for name, info in (meta.get("inputs") or {}).items():
        kind = DataType[(column_types or {}).get(name) or _COLUMN_TYPES.get(str(info.get("dtype")), "string")]
        shape = list(info.get("shape") or [])
        per_row = shape[1:]
        several = kind != DataType.string and (any(size != 1 for size in per_row) and per_row != [])
        columns.append(ColSpec(Array(kind) if several else kind, name))
    key = pyfunc_signature_key(meta)
    outputs = []
    for name, info in meta["signatures"][key]["outputs"].items():
        dtype = np.dtype(object) if info.get("dtype") == "string" else np.dtype(str(info.get("dtype")).replace(
            "bfloat16", "float32"))
        outputs.append(TensorSpec(dtype, tuple(info.get("shape") or [-1]), name))
    params = ParamSchema([ParamSpec(SIGNATURE_PARAM, "string", key)])
    return ModelSignature(inputs=Schema(columns), outputs=Schema(outputs), params=params)


def _numpy(value: Any) -> np.ndarray:
    """An output as numpy: tensors moved to the CPU, bytes decoded to ``str``."""
    if hasattr(value, "detach"):
        value = value.detach().cpu().numpy()
    array = np.asarray(value)
    if array.dtype == object or array.dtype.kind == "S":
        return np.vectorize(lambda v: v.decode("utf-8", "replace") if isinstance(v, bytes) else v,
                            otypes=[object])(array) if array.size else array.astype(object)
    return array


def _records(model_input: Any, text_features: set[str]) -> list[dict[str, Any]]:
    """Records (a list of dicts) from a DataFrame, a dict of columns or a list of dicts; a missing
    value (NaN or None) of a string feature is left out of its record, as the engine's parser
    treats an absent feature (the categorical column's missing marker)."""
    import pandas as pd

    if isinstance(model_input, pd.DataFrame):
        rows = model_input.to_dict(orient="records")
    elif isinstance(model_input, Mapping):
        rows = pd.DataFrame(dict(model_input)).to_dict(orient="records")
    else:
        rows = [dict(row) for row in model_input]

    def missing(value: Any) -> bool:
        return value is None or (isinstance(value, float) and np.isnan(value))

    return [{k: v for k, v in row.items() if not (k in text_features and missing(v))} for row in rows]


class ExportedModel(PythonModel):  # type: ignore[misc,valid-type]
    """The pyfunc model over an engine export (see the module docstring).

    Example:
        >>> model = ExportedModel()                        # MLflow calls load_context  # doctest: +SKIP
        >>> model.predict(None, frame)["class_ids"]                                     # doctest: +SKIP
    """

    def load_context(self, context: Any) -> None:
        from pathlib import Path

        from estimator_workbench.serve.repository import ModelVersion

        self.version = ModelVersion.load(1, Path(context.artifacts[EXPORT_ARTIFACT]))
        self.default_key = pyfunc_signature_key(self.version.meta)

    # No type hints here: MLflow reads predict's hints as an input schema (and warns that Any is not
    # one); the schema is the signature logged with the model (model_signature).
    def predict(self, context, model_input, params=None):  # type: ignore[no-untyped-def]
        """``{output name: numpy array}`` for the rows of ``model_input`` (a DataFrame)."""
        key = str((params or {}).get(SIGNATURE_PARAM) or self.default_key)
        if key not in self.version.signatures:
            raise ValueError(f"{SIGNATURE_PARAM}={key!r} is not a signature of this model; it has "
                             f"{sorted(self.version.signatures)}.")
        model = self.version.signatures[key]
        if model.preprocessing is not None and model.preprocessing.parse_spec is not None:
            spec = model.preprocessing.parse_spec
            text = {name for name, feature in spec.items() if feature.dtype == "string"}
            inputs: Any = _records(model_input, text)  # records, parsed with the export's parse spec
        else:
            inputs = {name: np.stack([np.asarray(v) for v in model_input[name]]) for name in model.inputs}
        return {name: _numpy(value) for name, value in model(inputs).items()}
