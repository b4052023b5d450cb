"""Build an Estimator and its input_fns from a run's snapshot (``run.json``), for the runner.

This module RUNS template code (through ``templates.load_model_fn``): import it only in runner and
pre-flight processes. The pre-flight check uses the same ``prepare`` so that what it checks is what
the runner will run.

``run_spec`` keys (the run.json dict):

* ``template``: ``{'name': str, 'code': str}`` (the code snapshot; required);
* ``params``: the user params (validated against the template's PARAMS, defaults filled);
* ``run_config``: keyword arguments of ``ee.RunConfig`` (``model_dir`` is set here);
* ``dataset``: a ``DatasetSpec.to_dict()``;
* ``action``: ``'train'`` (default), ``'evaluate'``, ``'predict'`` or ``'train_and_evaluate'``;
* ``warm_start_from``: optional checkpoint path or directory;
* ``batch_size`` (default 32), ``shuffle_seed`` (default: the dataset split seed);
* ``task_info``: optional; a parent run's ``InputFns.info`` (evaluate/predict/resume reuse the
  statistics and vocabularies the model was trained with). Save ``input_fns.info`` with a run.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from estimator_workbench import templates
from estimator_workbench.data import datasets

__all__ = ["DEFAULT_BATCH_SIZE", "RUN_CONFIG_KEYS", "Prepared", "build_estimator", "check_run_config", "prepare"]

DEFAULT_BATCH_SIZE = 32
# The RunConfig arguments a run may set (JSON values). model_dir is the run's own folder, and the
# run's process count, not train_distribute, makes it distributed.
RUN_CONFIG_KEYS = ("tf_random_seed", "save_summary_steps", "save_checkpoints_steps", "save_checkpoints_secs",
                   "keep_checkpoint_max", "keep_checkpoint_every_n_hours", "log_step_count_steps",
                   "device", "precision", "compile", "num_threads")


def check_run_config(run_config: Mapping[str, Any], also_allowed: tuple[str, ...] = ()) -> None:
    """Raises ValueError naming the keys of ``run_config`` that are not RunConfig arguments."""
    unknown = [key for key in run_config if key not in RUN_CONFIG_KEYS and key not in also_allowed]
    if unknown:
        raise ValueError(f"run_config has unknown key(s) {unknown}; a run's RunConfig takes "
                         f"{list(RUN_CONFIG_KEYS)}.")


class Prepared(NamedTuple):
    """Everything a run needs except the Estimator itself."""

    model_fn: Callable[..., Any]
    params: dict[str, Any]
    spec: datasets.DatasetSpec
    df: Any
    input_fns: datasets.InputFns


def _require(run_spec: Mapping[str, Any], key: str, kind: type) -> Any:
    value = run_spec.get(key)
    if not isinstance(value, kind):
        raise ValueError(f"run_spec[{key!r}] must be a {kind.__name__}, given: {value!r}.")
    return value


def prepare(run_spec: Mapping[str, Any], *, df: Any = None, batch_size: int | None = None) -> Prepared:
    """Loads the template and the dataset, validates both, and builds the input_fns.

    Args:
        run_spec: the run.json dict (see the module docstring).
        df: the loaded dataset, to skip reading it again (the pre-flight passes a few rows).
        batch_size: overrides ``run_spec['batch_size']``.
    """
    template = _require(run_spec, "template", Mapping)
    name, code = template.get("name", "template"), template.get("code")
    if not isinstance(code, str):
        raise ValueError(f"run_spec['template']['code'] must be the template source, given: {code!r}.")
    _, schema = templates.parse_template(code, name)
    params = templates.validate_params(schema, run_spec.get("params") or {})
    spec = datasets.DatasetSpec.from_dict(_require(run_spec, "dataset", Mapping))
    if df is None:
        df = spec.load()
    action = run_spec.get("action", "train")
    datasets.validate(df, spec.schema, action=action, raise_errors=True, label_missing=spec.label_missing)
    shuffle_seed = run_spec.get("shuffle_seed", spec.seed)
    fns = datasets.make_input_fns(
        spec, df, batch_size=batch_size or int(run_spec.get("batch_size") or DEFAULT_BATCH_SIZE),
        num_epochs=None, shuffle_seed=shuffle_seed, info=run_spec.get("task_info"),
        with_labels=action != "predict",
    )
    params["task"] = fns.info
    model_fn = templates.load_model_fn(code, templates.template_filename(name))
    return Prepared(model_fn, params, spec, df, fns)


def build_estimator(run_spec: Mapping[str, Any], model_dir: str | os.PathLike) -> tuple[Any, datasets.InputFns]:
    """``(estimator, input_fns)`` for a run: ``ee.Estimator(model_fn, model_dir, RunConfig(**run_config),
    params (+ params['task']), warm_start_from)``. Runs the template's code."""
    import estimator_engine as ee

    prepared = prepare(run_spec)
    config_kwargs = dict(run_spec.get("run_config") or {})
    check_run_config(config_kwargs)
    config_kwargs["model_dir"] = os.fspath(model_dir)
    config = ee.RunConfig(**config_kwargs)
    estimator = ee.Estimator(prepared.model_fn, model_dir=os.fspath(model_dir), config=config,
                             params=prepared.params, warm_start_from=run_spec.get("warm_start_from"))
    return estimator, prepared.input_fns
