"""The one submit path of every front end: validate, pre-flight policy, register, hand to the
launcher. ``estimator-workbench run`` / ``predict``, the Train page (and the run page's
evaluate/predict buttons), the Python API and the sweep driver call ``submit_run``; none repeats
its policy. ``submit_run`` builds the run's one ``RunSpec`` (params checked against the template's
PARAMS here, every problem of the request in one ``RunSpecError``); the registry writes it as
``run.json`` and the runner reads it back.

Example:
    >>> record = submit_run(registry, launcher, name="mlp on iris", action="train",  # doctest: +SKIP
    ...                     dataset=dataset, template=template, params={}, run_config={},
    ...                     schedule={"max_steps": 200})
    >>> record.status                                                             # doctest: +SKIP
    'queued'
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable, Mapping
from typing import Any

from estimator_workbench.store import mlflow_state
from estimator_workbench.store.records import (
    ACTIONS,
    IMPORT_ACTION,
    RUN_JSON_SCHEMA_VERSION,
    TRAINING_ACTIONS,
    RunRecord,
)
from estimator_workbench.store.registry import RunRegistry
from estimator_workbench.store.run_spec import (
    DEFAULT_PREFLIGHT_TIMEOUT_S,
    RunSpec,
    RunSpecError,
    check_request,
)
from estimator_workbench.store.users import current_user

__all__ = ["DEFAULT_MAX_STEPS", "DEFAULT_PREFLIGHT_TIMEOUT_S", "PARENT_RELATION", "build_spec", "check_dataset",
           "check_params", "parent_relation", "submit_run", "validate_run"]

DEFAULT_MAX_STEPS = 1000
# What a run started from another run is to it, by the new run's action.
PARENT_RELATION = {"evaluate": "evaluate_from", "predict": "predict_from", "train": "warm_start",
                   "train_and_evaluate": "warm_start"}


def parent_relation(action: str) -> str:
    """The relation of a run with ``action`` to the run it starts from."""
    return PARENT_RELATION[action]


def validate_run(*, action: str, run_config: Mapping[str, Any], schedule: Mapping[str, Any],
                 num_processes: Any = 1, control: Mapping[str, str] | None = None,
                 ) -> tuple[dict[str, Any], dict[str, Any], int]:
    """Checks a run request against the run contract (``estimator_workbench.store.run_spec``) and applies
    the defaults a run gets (``max_steps`` for training, pre-flight on); returns
    ``(run_config, schedule, num_processes)``. Raises ``RunSpecError`` before anything exists."""
    if action not in ACTIONS:
        raise RunSpecError(f"{(control or {}).get('action', 'action')} = {action!r} is not allowed: "
                           f"it must be one of {list(ACTIONS)}.")
    config, checked, processes = check_request(run_config=run_config, schedule=schedule,
                                               num_processes=num_processes, control=control)
    early = checked.get("early_stopping") or {}
    if early.get("patience", 1) and early and action != "train_and_evaluate":
        control = control or {}
        raise RunSpecError(
            f"Early stopping watches the evaluations of train_and_evaluate; the action {action!r} has "
            f"none. Choose train_and_evaluate ({control.get('action', 'action')}) or turn early stopping "
            f"off ({control.get('early_stopping', 'schedule.early_stopping')}).")
    if action in TRAINING_ACTIONS and not checked.get("max_steps") and not checked.get("steps"):
        checked["max_steps"] = DEFAULT_MAX_STEPS
    # A seed is always recorded, so that the run's exported bundle reproduces it.
    config.setdefault("tf_random_seed", secrets.randbelow(2**31))
    checked.setdefault("preflight", action in TRAINING_ACTIONS)
    if checked["preflight"]:
        checked.setdefault("preflight_timeout", DEFAULT_PREFLIGHT_TIMEOUT_S)
    _check_mlflow(checked)
    return config, checked, processes


def _check_mlflow(schedule: dict[str, Any]) -> None:
    """The run's MLflow switch: on by default when ``$WORKBENCH_MLFLOW_URI`` is set. Without it the
    run is not mirrored, whatever its schedule says (a rerun of a mirrored run on a workbench
    started without MLflow); the front ends refuse an explicit ask (``run --mlflow``) themselves."""
    uri = mlflow_state.mirror_target()
    if schedule.get("mlflow") is None:
        schedule.pop("mlflow", None)
        if uri is not None:
            schedule["mlflow"] = True
    elif uri is None:
        schedule["mlflow"] = False


def check_params(template: Mapping[str, Any], params: Mapping[str, Any]) -> dict[str, Any]:
    """``params`` checked against the template's PARAMS (types coerced, defaults filled); raises
    ``ValueError`` listing every problem (``templates.validate_params``)."""
    from estimator_workbench import templates

    name = str(template.get("name") or "template")
    _, schema = templates.parse_template(str(template.get("code") or ""), name)
    return templates.validate_params(schema, params)


def build_spec(*, name: str, action: str, dataset: Mapping[str, Any], template: Mapping[str, Any],
               params: Mapping[str, Any], run_config: Mapping[str, Any], schedule: Mapping[str, Any],
               num_processes: Any = 1, parent_run_id: str | None = None, relation: str | None = None,
               checkpoint_path: str | None = None, control: Mapping[str, str] | None = None) -> RunSpec:
    """The run's ``RunSpec`` (before the registry gives it an id): the request checked against the
    contract with the defaults a run gets (``validate_run``) and its params against the template's
    PARAMS, every problem in one ``RunSpecError``."""
    problems: list[str] = []
    config: dict[str, Any] = {}
    checked: dict[str, Any] = {}
    processes: Any = num_processes
    try:
        config, checked, processes = validate_run(action=action, run_config=run_config, schedule=schedule,
                                                  num_processes=num_processes, control=control)
    except RunSpecError as exc:
        problems.append(str(exc))
    try:
        params = check_params(template, params)
    except ValueError as exc:
        where = (control or {}).get("params", "params")
        problems.append(f"{where}: {exc}" if where != "params" else str(exc))
    if problems:
        raise RunSpecError("\n".join(problems))
    return RunSpec.model_validate({
        "name": name, "action": action, "dataset": dict(dataset),
        "template": {"name": template.get("name"), "code": template.get("code")}, "params": params,
        "run_config": config, "schedule": checked, "num_processes": processes, "parent_run_id": parent_run_id,
        "parent_relation": relation, "checkpoint_path": checkpoint_path,
        "schema_version": RUN_JSON_SCHEMA_VERSION})  # (validated above: the current version, no migration)


def submit_run(registry: RunRegistry, launcher: Any, *, name: str, action: str, dataset: Mapping[str, Any],
               template: Mapping[str, Any], params: Mapping[str, Any], run_config: Mapping[str, Any],
               schedule: Mapping[str, Any], num_processes: Any = 1, parent_run_id: str | None = None,
               relation: str | None = None, checkpoint_path: str | None = None,
               control: Mapping[str, str] | None = None,
               preflight_runner: Callable[..., Any] | None = None,
               import_checker: Callable[..., Any] | None = None, owner: str | None = None) -> RunRecord:
    """Validates, applies the pre-flight policy, registers the run ``queued`` and submits it.

    The run's ``owner`` is the signed-in user the UI passes, else ``store.users.current_user()``
    (``$WORKBENCH_USER`` or the OS account: the CLI, the Python API, a sweep's driver).

    The pre-flight check runs in the runner's own process for a one-process training run
    (``schedule['preflight']``); ranks under torchrun cannot check, so a multi-process training
    run is checked here first in a child process (``preflight_runner``, default
    ``run_preflight``) and a failed check raises ``RunSpecError`` with its report, registering
    nothing. ``launcher=None`` registers without submitting.

    An ``import_tf`` run (``checkpoint_path``: a TensorFlow model_dir, checkpoint prefix or
    SavedModel) is checked here before it exists: the checkpoint is read with the engine's reader,
    and the model the template builds for the dataset is compared with it in a child process
    (``import_checker``, default ``tf_import.check_fit``); a variable that does not fit refuses it
    with ``RunSpecError`` naming the variables on both sides. The run records the checkpoint's
    prefix as its ``checkpoint_path``.
    """
    if parent_run_id is not None and relation is None and action in PARENT_RELATION:
        relation = parent_relation(action)
    spec = build_spec(name=name, action=action, dataset=dataset, template=template, params=params,
                      run_config=run_config, schedule=schedule, num_processes=num_processes,
                      parent_run_id=parent_run_id, relation=relation, checkpoint_path=checkpoint_path,
                      control=control)
    plan = spec.schedule
    watched = plan.early_stopping.metric if plan.early_stopping is not None else "loss"
    report = None
    # Checked here, before anything exists, when the ranks cannot check (torchrun) or when early
    # stopping watches a metric only the template's EVAL spec can name.
    if plan.preflight and action in TRAINING_ACTIONS and (spec.num_processes > 1 or watched != "loss"):
        if preflight_runner is None:
            from estimator_workbench.execution.preflight import run_preflight as preflight_runner
        template_name = spec.template.name or "template"
        report = preflight_runner(spec.template.code or "", dict(spec.dataset), dict(spec.params),
                                  timeout=plan.preflight_timeout, template_name=template_name, action=action)
        if not report.ok:
            raise RunSpecError(report.summary())
        _check_watched_metric(watched, report, template_name, control or {})
        # checked already: the runner does not check again
        spec = spec.model_copy(update={"schedule": plan.model_copy(update={"preflight": False})})
    if action == IMPORT_ACTION:
        checkpoint_path = _check_import(checkpoint_path, dataset=spec.dataset, template=template, params=spec.params,
                                        run_config=spec.run_config.to_engine(), checker=import_checker,
                                        control=control or {})
        spec = spec.model_copy(update={"checkpoint_path": checkpoint_path})
    else:
        check_dataset(spec.dataset, action)
    record = registry.create_run(
        name=spec.name, action=spec.action, dataset=spec.dataset, template=spec.template.model_dump(),
        params=spec.params, run_config=spec.run_config.to_engine(),
        schedule=spec.schedule.model_dump(exclude_unset=True), num_processes=spec.num_processes,
        parent_run_id=spec.parent_run_id, parent_relation=spec.parent_relation,
        checkpoint_path=spec.checkpoint_path, owner=owner or current_user())
    if spec.schedule.mlflow:  # mirrored once it has finished (estimator_workbench.tracking)
        mlflow_state.mark_pending(registry.root, record.run_id, tracking_uri=mlflow_state.mirror_target(),
                                  reason="waiting for the run to finish")
    if report is not None and hasattr(report, "to_dict"):
        from estimator_workbench.execution.engine_run import PREFLIGHT_FILE

        (registry.run_dir(record.run_id) / PREFLIGHT_FILE).write_text(
            json.dumps(report.to_dict(), indent=2, default=str), encoding="utf-8")
    return record if launcher is None else launcher.submit(record.run_id)


_CHECKED_DATASETS: set[str] = set()  # datasets (fingerprint, schema, action) checked by this process


def check_dataset(dataset: Mapping[str, Any], action: str) -> None:
    """Refuses (``RunSpecError``) a dataset the run could not use, before the run is registered:
    a data file that cannot be read, or data that cannot serve ``action`` (one row, infinite
    values, an empty label...), with the message the runner would give (issue 24 item 15: such
    runs were registered, then failed). A dict that is not a whole DatasetSpec (``ref`` and
    ``schema``) is left to the runner; a dataset already checked by this process (same
    fingerprint, schema and action: a sweep's trials) is not read again."""
    if not isinstance(dataset, Mapping) or not {"ref", "schema"} <= set(dataset):
        return
    from estimator_workbench.data import datasets

    key = json.dumps([dict(dataset), action], sort_keys=True, default=str)
    if dataset.get("fingerprint") and key in _CHECKED_DATASETS:
        return
    try:
        spec = datasets.DatasetSpec.from_dict(dataset)
        df = spec.load()
        datasets.validate(df, spec.schema, action=action, raise_errors=True, label_missing=spec.label_missing)
    except (ValueError, TypeError, OSError) as exc:
        raise RunSpecError(f"The dataset cannot be used for {action!r}: {exc}") from None
    _CHECKED_DATASETS.add(key)


def _check_import(source: str | None, *, dataset: Mapping[str, Any], template: Mapping[str, Any],
                  params: Mapping[str, Any], run_config: Mapping[str, Any], checker: Callable[..., Any] | None,
                  control: Mapping[str, str]) -> str:
    """The TF checkpoint prefix an ``import_tf`` run imports, once it fits the run's model."""
    from estimator_workbench.execution import tf_import

    if not source:
        raise RunSpecError(f"An import needs the TensorFlow model to import ({control.get('checkpoint_path', 'checkpoint_path')}): "
                           "a model_dir, a checkpoint prefix or a SavedModel folder.")
    try:
        prefix, _ = tf_import.source_checkpoint(source)
    except ValueError as exc:
        raise RunSpecError(str(exc)) from None
    check_dataset(dataset, "train")  # the model's statistics come from the train split
    spec = {"template": {"name": template.get("name"), "code": template.get("code")}, "params": dict(params),
            "dataset": dict(dataset), "run_config": dict(run_config)}
    fit = (checker or tf_import.check_fit)(spec, prefix)
    if not fit.ok:
        from estimator_workbench.execution.run_request import dataset_name

        raise RunSpecError(fit.refusal(source, str(template.get("name") or "template"), dataset_name(dataset)))
    return prefix


def _check_watched_metric(metric: str, report: Any, template_name: str, control: Mapping[str, str]) -> None:
    """Refuses an early-stopping metric the template's evaluation does not report (TF's
    evaluate returns the EVAL spec's ``eval_metric_ops`` keys plus ``loss``)."""
    evaluation = getattr(report, "modes", {}).get("eval") or {}
    if metric == "loss" or not evaluation.get("ok"):
        return
    known = sorted({"loss", *evaluation.get("metric_keys", ())})
    if metric not in known:
        where = control.get("early_stopping.metric", "schedule.early_stopping.metric")
        raise RunSpecError(f"{where} = {metric!r} is not an evaluation metric of template {template_name!r}; "
                           f"its evaluation reports {known}. Watch one of these.")
