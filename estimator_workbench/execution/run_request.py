"""What a front end hands to ``submit_run``: the dataset and template of a run request, built one way.

The CLI (``estimator-workbench run``) and the Python API (``estimator_workbench.api``) both turn a
user's dataset (a bundled name, a CSV/Parquet path, or a ``DatasetSpec`` dict) and template (a
name, or ``{'name', 'code'}``) into the dicts the run contract takes, here. Errors are
``RunSpecError`` (a ``ValueError``) naming the front end's own control (``--dataset`` on the
command line, ``dataset`` in Python), raised before anything is registered.

Example:
    >>> ref = dataset_ref("iris")
    >>> ref
    {'kind': 'bundled', 'name': 'iris'}
    >>> dataset_ref("", field="dataset")
    Traceback (most recent call last):
    ...
    estimator_workbench.store.run_spec.RunSpecError: dataset must be a bundled dataset name or a CSV/Parquet path, given: ''.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def _refusal(message: str) -> ValueError:
    """A ``RunSpecError`` (imported when needed: the run contract's pydantic models take ~60 ms to
    import, which ``estimator-workbench run`` overlaps with its runner's start)."""
    from estimator_workbench.store.run_spec import RunSpecError

    return RunSpecError(message)

__all__ = ["dataset_dict", "dataset_for_parent", "dataset_name", "dataset_ref", "default_run_name", "load_ref", "template_dict"]


def dataset_ref(dataset: Any, *, field: str = "--dataset") -> dict[str, Any]:
    """A bundled dataset name or a CSV/Parquet path -> a ``DatasetSpec`` ``ref``."""
    from estimator_workbench.data import datasets

    if isinstance(dataset, os.PathLike):
        dataset = os.fspath(dataset)
    if not isinstance(dataset, str) or not dataset:
        raise _refusal(f"{field} must be a bundled dataset name or a CSV/Parquet path, given: {dataset!r}.")
    path = Path(dataset).expanduser()
    if path.suffix.lower() in (".csv", ".parquet", ".pq") or path.exists():
        if path.is_dir():
            raise _refusal(f"{field} {dataset!r} is a folder, not a data file. Give the path of a .csv or "
                           ".parquet file (e.g. data/train.csv), or a bundled dataset name.")
        if not path.is_file():
            raise _refusal(f"{field} file {dataset!r} does not exist.")
        return {"kind": "file", "path": str(path.resolve())}
    try:
        datasets.bundled_path(dataset)  # ValueError listing the bundled names
    except ValueError as exc:
        raise _refusal(f"{field}: {exc}") from None
    return {"kind": "bundled", "name": dataset}


def load_ref(ref: Mapping[str, Any]) -> Any:
    """The data at ``ref`` (a DataFrame), read as any ``DatasetSpec`` reads it."""
    from estimator_workbench.data import datasets

    return datasets.DatasetSpec(dict(ref), datasets.Schema(())).load()


def _with_fingerprint(spec: Any) -> dict[str, Any]:
    return spec.to_dict() | {"fingerprint": spec.fingerprint()}


def dataset_dict(dataset: Any, label: str | None = None, label_missing: str | None = None, *,
                 field: str = "--dataset", adjust: Any = None) -> dict[str, Any]:
    """A dataset (bundled name, file path, or a ``DatasetSpec`` dict) -> a ``DatasetSpec`` dict with
    its ``fingerprint``; column roles inferred, ``label`` made the label; ``adjust(spec) -> spec``
    applies a front end's further choices (the CLI's Data-page flags)."""
    from estimator_workbench.data import datasets

    if isinstance(dataset, Mapping):
        spec = datasets.DatasetSpec.from_dict(dataset)
    else:
        ref = dataset_ref(dataset, field=field)
        spec = datasets.DatasetSpec(ref, datasets.infer_schema(load_ref(ref)))
    if label:
        spec = dataclasses.replace(spec, schema=spec.schema.replace_column(label, role="label"))
    if label_missing:
        spec = dataclasses.replace(spec, label_missing=label_missing)
    if adjust is not None:
        spec = adjust(spec)
    return _with_fingerprint(spec)


def template_dict(template: Any, root: str | os.PathLike[str], *,
                  field: str = "--template") -> tuple[dict[str, Any], dict[str, Any]]:
    """``({'name', 'code'}, params schema)`` of a template name or a ``{'name', 'code'}`` dict."""
    from estimator_workbench import templates

    if isinstance(template, Mapping) and isinstance(template.get("code"), str):
        name = str(template.get("name") or "custom")
        _, schema = templates.parse_template(template["code"], name)
        return {"name": name, "code": template["code"]}, schema
    if not isinstance(template, str) or not template:
        raise _refusal(f"{field} must be a template name, given: {template!r}.")
    try:
        info = templates.get_template(template, root)
    except ValueError as exc:
        raise _refusal(f"{field}: {exc}") from None
    if info.error:
        raise _refusal(f"Template {template!r} cannot be read: {info.error}")
    return {"name": info.name, "code": info.code}, info.params


def dataset_for_parent(parent: Any, dataset: Any, action: str, *, field: str = "--dataset") -> dict[str, Any]:
    """The dataset of an evaluate/predict run from ``parent`` (a ``RunRecord``): the parent's own
    (``dataset`` None), or a file read with the roles and types the model was trained with."""
    from estimator_workbench.data import datasets

    if dataset is None:
        return dict(parent.dataset)
    base = datasets.DatasetSpec.from_dict(parent.dataset)
    ref = dataset_ref(dataset, field=field)
    df = load_ref(ref)
    if action == "predict":
        spec = datasets.prediction_spec(base, ref, df)
    else:
        spec = dataclasses.replace(base, ref=ref)
        datasets.validate(df, spec.schema, action=action, raise_errors=True, label_missing=spec.label_missing)
    return _with_fingerprint(spec)


def dataset_name(dataset: Mapping[str, Any]) -> str:
    """A short name of a dataset dict: the bundled name or the file's name."""
    ref = dataset.get("ref") or {}
    return str(ref.get("name") or Path(str(ref.get("path", "data"))).name)


def default_run_name(template_name: str, dataset: Mapping[str, Any]) -> str:
    """The name a run gets when none is given: what it trains on what, e.g.
    ``mlp_classifier on seattle-weather`` (an upload by its file name without the extension).

    Example:
        >>> default_run_name("mlp_classifier", {"ref": {"kind": "file", "path": "/w/uploads/seattle-weather.csv"}})
        'mlp_classifier on seattle-weather'
    """
    ref = dataset.get("ref") or {}
    data = ref.get("name") or Path(str(ref.get("path") or "data")).stem
    return f"{template_name} on {data}"
