"""Datasets for the workbench: load, infer and edit a schema, validate, split, and make input_fns.

The public API of the data stage in one import; the code lives in ``sources`` (bundled data,
loading), ``schema`` (roles, types, validation), ``spec`` (``DatasetSpec``, split, task info) and
``input_fns``.

Everything here is plain pandas/numpy (no streamlit, no torch at import time), so the UI process can
preview and validate a dataset without touching model code. ``make_input_fns`` imports the engine
lazily; it is the one place where a dataset turns into ``input_fn``s, used identically by the
pre-flight check and the runner.

The flow is::

    df = load_table(path)                      # clear ValueError for every bad file
    schema = infer_schema(df)                  # roles and types, editable
    schema = schema.replace_column("island", role="ignore")
    validate(df, schema, raise_errors=True)    # no feature, one-class label, NaN labels, ...
    spec = DatasetSpec(ref={"kind": "file", "path": path}, schema=schema)
    fns = make_input_fns(spec, df, batch_size=32)
    estimator.train(fns.train, steps=100)
"""

from __future__ import annotations

from estimator_workbench.data.input_fns import (
    InputFns,
    encode_labels,
    make_input_fns,
    make_predict_input_fn,
    prediction_spec,
    prepare_features,
)
from estimator_workbench.data.profile import (
    DATE_ENCODINGS,
    HIGH_CARDINALITY,
    TEXT_ENCODINGS,
    column_profile,
    distribution_table,
    encoding_note,
    high_cardinality,
    label_identifier_warning,
    label_task_warning,
)
from estimator_workbench.data.schema import (
    CATEGORICAL,
    CATEGORICAL_MISSING,
    DATE,
    DTYPES,
    FEATURE,
    IGNORE,
    LABEL,
    LABEL_MISSING,
    MISSING_TOKEN,
    NUMERIC,
    NUMERIC_MISSING,
    ROLES,
    SUPERVISED_ACTIONS,
    WEIGHT,
    ColumnSchema,
    Schema,
    infer_schema,
    summary,
    validate,
)
from estimator_workbench.data.sources import (
    DEFAULT_MAX_BYTES,
    MAX_COLUMNS,
    SAMPLE_DATA_DIR,
    DatasetInfo,
    bundled_path,
    delete_upload,
    list_bundled,
    list_uploads,
    load_csv,
    load_table,
    save_upload,
    upload_owner,
    upload_path,
)
from estimator_workbench.data.spec import (
    DEFAULT_HASH_BUCKETS,
    DatasetSpec,
    split,
    split_note,
    task_info,
    training_rows,
)

__all__ = [
    "CATEGORICAL",
    "CATEGORICAL_MISSING",
    "DATE",
    "DATE_ENCODINGS",
    "DEFAULT_HASH_BUCKETS",
    "DEFAULT_MAX_BYTES",
    "DTYPES",
    "FEATURE",
    "HIGH_CARDINALITY",
    "IGNORE",
    "LABEL",
    "LABEL_MISSING",
    "MAX_COLUMNS",
    "MISSING_TOKEN",
    "NUMERIC",
    "NUMERIC_MISSING",
    "ROLES",
    "SAMPLE_DATA_DIR",
    "SUPERVISED_ACTIONS",
    "TEXT_ENCODINGS",
    "WEIGHT",
    "ColumnSchema",
    "DatasetInfo",
    "DatasetSpec",
    "InputFns",
    "Schema",
    "bundled_path",
    "column_profile",
    "delete_upload",
    "distribution_table",
    "encode_labels",
    "encoding_note",
    "high_cardinality",
    "infer_schema",
    "label_identifier_warning",
    "label_task_warning",
    "list_bundled",
    "list_uploads",
    "load_csv",
    "load_table",
    "make_input_fns",
    "make_predict_input_fn",
    "prediction_spec",
    "prepare_features",
    "save_upload",
    "split",
    "split_note",
    "summary",
    "task_info",
    "training_rows",
    "upload_owner",
    "upload_path",
    "validate",
]
