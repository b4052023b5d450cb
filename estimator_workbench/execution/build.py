"""Build an Estimator and its input_fns from a run's contract (``RunSpec``, its ``run.json``), for the runner.

This module RUNS template code (through ``templates.load_model_fn``): import it only in runner and
pre-flight processes. The pre-flight check uses the same ``prepare`` so that what it checks is what
the runner will run.

What comes from the ``RunSpec``: the template snapshot, the params (defaults of the template's
PARAMS filled), the dataset, the action, ``run_config`` (``ee.RunConfig``'s arguments; ``model_dir``
is set here) and the schedule's ``batch_size`` (default 32) and ``shuffle_seed`` (default: the
dataset's split seed). What the run's lineage adds (``execution.lineage``): ``task_info``, a parent
run's ``InputFns.info`` (evaluate/predict/resume reuse the statistics and vocabularies the model was
trained with), and ``warm_start_from``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from estimator_workbench import templates
from estimator_workbench.data import datasets
from estimator_workbench.store.run_spec import RunSpec

__all__ = ["DEFAULT_BATCH_SIZE", "Prepared", "build_estimator", "prepare"]

DEFAULT_BATCH_SIZE = 32


class Prepared(NamedTuple):
    """Everything a run needs except the Estimator itself."""

    model_fn: Callable[..., Any]
    params: dict[str, Any]
    spec: datasets.DatasetSpec
    df: Any
    input_fns: datasets.InputFns


def _as_spec(run_spec: RunSpec | Mapping[str, Any]) -> RunSpec:
    """A ``RunSpec``; a run.json-shaped dict is validated (and migrated) into one."""
    return run_spec if isinstance(run_spec, RunSpec) else RunSpec.model_validate(dict(run_spec))


def prepare(run_spec: RunSpec | Mapping[str, Any], *, df: Any = None, batch_size: int | None = None,
            task_info: Mapping[str, Any] | None = None) -> Prepared:
    """Loads the template and the dataset, validates both, and builds the input_fns.

    Args:
        run_spec: the run's contract (a run.json-shaped dict is validated into one).
        df: the loaded dataset, to skip reading it again (the pre-flight passes a few rows).
        batch_size: overrides the schedule's ``batch_size``.
        task_info: a parent run's ``InputFns.info`` to reuse (see the module docstring).
    """
    spec = _as_spec(run_spec)
    name, code = spec.template.name or "template", spec.template.code
    if not isinstance(code, str):
        raise ValueError(f"The run's template has no code (template.code = {code!r}); a run needs the "
                         "template's source.")
    _, schema = templates.parse_template(code, name)
    params = templates.validate_params(schema, spec.params)  # the template's defaults filled
    dataset = datasets.DatasetSpec.from_dict(spec.dataset)
    if df is None:
        df = dataset.load()
    datasets.validate(df, dataset.schema, action=spec.action, raise_errors=True,
                      label_missing=dataset.label_missing)
    shuffle_seed = spec.schedule.shuffle_seed if spec.schedule.shuffle_seed is not None else dataset.seed
    fns = datasets.make_input_fns(
        dataset, df, batch_size=batch_size or spec.schedule.batch_size or DEFAULT_BATCH_SIZE,
        num_epochs=None, shuffle_seed=shuffle_seed, info=task_info,
        with_labels=spec.action != "predict",
    )
    params["task"] = fns.info
    model_fn = templates.load_model_fn(code, templates.template_filename(name))
    return Prepared(model_fn, params, dataset, df, fns)


def build_estimator(run_spec: RunSpec | Mapping[str, Any], model_dir: str | os.PathLike, *,
                    task_info: Mapping[str, Any] | None = None,
                    warm_start_from: str | None = None) -> tuple[Any, datasets.InputFns]:
    """``(estimator, input_fns)`` for a run: ``ee.Estimator(model_fn, model_dir,
    RunConfig(**run_config), params (+ params['task']), warm_start_from)``. Runs the template's code."""
    import estimator_engine as ee

    spec = _as_spec(run_spec)
    prepared = prepare(spec, task_info=task_info)
    config = ee.RunConfig(**spec.run_config.to_engine(), model_dir=os.fspath(model_dir))
    estimator = ee.Estimator(prepared.model_fn, model_dir=os.fspath(model_dir), config=config,
                             params=prepared.params, warm_start_from=warm_start_from)
    return estimator, prepared.input_fns
