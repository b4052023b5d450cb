"""``plan_sweep``: every check of a sweep request, before any run or study exists — the one path
of the CLI (``estimator-workbench sweep``) and the Train page's Sweep section.

Checks, in order: the param specs against the template's ``PARAMS`` (unknown names, bounds,
types); the settings (sampler, grid without continuous ranges, counts, direction); a trial's run
against the run contract (``validate_run``); then one pre-flight check of the template on the
dataset (in a child process), whose evaluation metric keys decide whether ``metric`` exists.

Example:
    >>> spec = plan_sweep(root, name="lr", dataset=dataset, template=template,      # doctest: +SKIP
    ...                   params=["learning_rate=0.0001:0.1:log"], steps=200, trials=8,
    ...                   parallel=2, metric="accuracy")
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Mapping, Sequence
from typing import Any

from estimator_workbench.sweeps.spec import (
    ParamSpec,
    SweepSpec,
    SweepSpecError,
    check_metric,
    parse_param,
    resolve_params,
)

__all__ = ["check_sweep_parallel", "default_name", "eval_metric_keys", "plan_sweep"]


def default_name(template: str, dataset: str) -> str:
    """``<template>-<dataset>-<yyyymmdd-hhmmss>`` made safe for a folder name."""
    import re

    stem = re.sub(r"[^A-Za-z0-9_.-]+", "-", f"{template}-{dataset}").strip("-.") or "sweep"
    return f"{stem[:40]}-{time.strftime('%Y%m%d-%H%M%S')}"


def eval_metric_keys(report: Any) -> list[str]:
    """The evaluation metrics a pre-flight report shows the template producing (``loss`` always)."""
    keys = list((report.modes.get("eval") or {}).get("metric_keys") or [])
    return sorted({"loss", *keys})


def check_sweep_parallel(parallel: int) -> None:
    """Refuses (``SweepSpecError``) more trials at once than this machine can run
    (``store.run_spec.check_parallel_runs``: its cores and memory)."""
    from estimator_workbench.store.run_spec import RunSpecError, check_parallel_runs

    try:
        check_parallel_runs(parallel, "--parallel")
    except RunSpecError as exc:
        raise SweepSpecError(str(exc)) from None


def plan_sweep(root: Any, *, name: str, dataset: Mapping[str, Any], template: Mapping[str, Any],
               params: Sequence[str | ParamSpec], steps: int, trials: int, parallel: int, metric: str,
               direction: str = "", sampler: str = "tpe", base_params: Mapping[str, Any] | None = None,
               eval_every: int = 0, pruner: str = "median", prune_after: int = 5, seed: int | None = None,
               run_config: Mapping[str, Any] | None = None, schedule: Mapping[str, Any] | None = None,
               preflight: Any = None, preflight_timeout: float = 120.0) -> SweepSpec:
    """Checks a sweep request and returns its ``SweepSpec``; raises ``SweepSpecError`` (nothing
    created) when it cannot run.

    ``template`` is ``{'name', 'code'}``; ``params`` are ``--param`` strings or ``ParamSpec``s;
    ``preflight`` replaces ``estimator_workbench.execution.preflight.run_preflight`` (tests).
    """
    from estimator_workbench import templates
    from estimator_workbench.execution.submit import check_params, validate_run
    from estimator_workbench.store.run_spec import RunSpecError

    template_name = str(template.get("name") or "template")
    try:
        _, schema = templates.parse_template(str(template.get("code") or ""), template_name)
    except ValueError as exc:
        raise SweepSpecError(f"Template {template_name!r} cannot be read: {exc}") from None
    specs = [p if isinstance(p, ParamSpec) else parse_param(p) for p in params]
    space = tuple(resolve_params(specs, schema))
    try:
        base = templates.validate_params(schema, dict(base_params or {}))
    except ValueError as exc:
        raise SweepSpecError(f"Base params: {exc}") from None
    metric = str(metric or "").removeprefix("eval/")
    spec = SweepSpec(name=name, dataset=dict(dataset), template={"name": template_name, "code": template.get("code")},
                     base_params=base, space=space, steps=steps, trials=trials, parallel=parallel,
                     metric=metric, direction=direction, sampler=sampler, pruner=pruner,
                     prune_after=prune_after, eval_every=eval_every,
                     seed=secrets.randbelow(2**31) if seed is None else int(seed),
                     run_config=dict(run_config or {}), schedule=dict(schedule or {}))
    try:
        validate_run(action="train_and_evaluate", run_config={**spec.run_config, "tf_random_seed": spec.seed},
                     schedule={**spec.schedule, "max_steps": spec.steps, "eval_every_steps": spec.eval_every})
    except RunSpecError as exc:
        raise SweepSpecError(f"A trial's run would be refused: {exc}") from None
    check_sweep_parallel(spec.parallel)
    first = {p.name: (p.choices[0] if p.kind == "categorical" else p.low) for p in space}
    try:
        first_params = check_params(spec.template, {**spec.base_params, **first})
    except ValueError as exc:
        raise SweepSpecError(f"Invalid sweep: {exc}") from None
    if preflight is None:
        from estimator_workbench.execution.preflight import run_preflight as preflight
    report = preflight(str(template.get("code") or ""), dict(dataset), first_params, timeout=preflight_timeout,
                       template_name=template_name, action="train_and_evaluate")
    if not report.ok:
        raise SweepSpecError(f"The template does not run on this dataset, so no trial could: {report.summary()}")
    check_metric(spec.metric, eval_metric_keys(report), template_name)
    return spec
