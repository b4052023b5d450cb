"""The workbench from Python: the same workspace, run contract and submit path as the CLI and the UI.

A run submitted here is an ordinary run (``runs/<id>/``, the registry, a runner process): the
browser UI open on the same workspace lists it, and runs started in the UI are listed here.
Tables are pandas DataFrames, in the shape of ``mlflow.search_runs()``.

Example:
    >>> import estimator_workbench as wb                                     # doctest: +SKIP
    >>> ws = wb.Workspace("workspace")                                       # doctest: +SKIP
    >>> run = ws.submit(dataset="iris", template="mlp_classifier", steps=200)  # doctest: +SKIP
    >>> run.wait().status                                                    # doctest: +SKIP
    'succeeded'
    >>> run.metrics(wide=True).tail()                                        # doctest: +SKIP
    >>> ws.runs()[["run_id", "status", "metrics.eval/accuracy"]]             # doctest: +SKIP

``run.estimator()``, ``run.evaluate(data)`` and ``run.predict(data)`` run the run's model_fn (the
template snapshot) in this Python process, as the exported notebook does: use them on runs whose
code you trust, like any code you run in your own kernel.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from estimator_workbench.execution import run_request
from estimator_workbench.store import paths

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Run", "Sweep", "Workspace"]

FINISHED = ("succeeded", "failed", "stopped", "cancelled", "lost")
_API_CONTROLS = {"max_steps": "steps", "run_config": "config", "schedule": "schedule",
                 "action": "action", "num_processes": "num_processes"}


def _frame(rows: list[dict[str, Any]], columns: Sequence[str] = ()) -> pd.DataFrame:
    import pandas as pd

    return pd.DataFrame(rows, columns=list(columns) or None)


class Workspace:
    """A workbench workspace (runs, uploads, templates), as the CLI and the UI see it.

    Args:
        path: the workspace folder; default: ``$WORKBENCH_HOME``, else ``./workspace`` (the CLI's).

    Example:
        >>> ws = Workspace("workspace")                                      # doctest: +SKIP
        >>> ws.datasets()[["name", "task", "rows"]].head(3)                  # doctest: +SKIP
    """

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.root = paths.workspace_root(path)
        if self.root.exists() and not self.root.is_dir():
            raise ValueError(f"Workspace path {str(self.root)!r} is a file, not a folder.")
        self._registry: Any = None
        self._launcher: Any = None

    def __repr__(self) -> str:
        return f"Workspace({str(self.root)!r})"

    @property
    def registry(self) -> Any:
        """The run registry (``estimator_workbench.store.registry.RunRegistry``)."""
        if self._registry is None:
            from estimator_workbench.store.registry import RunRegistry

            self._registry = RunRegistry(self.root)
        return self._registry

    @property
    def launcher(self) -> Any:
        """The workspace's launcher (local processes, or Ray Jobs when ``$WORKBENCH_RAY_ADDRESS``)."""
        if self._launcher is None:
            from estimator_workbench.execution.launcher import make_launcher

            self._launcher = make_launcher(self.root)
        return self._launcher

    # -- what there is ------------------------------------------------------------------------

    def datasets(self) -> pd.DataFrame:
        """Bundled datasets and this workspace's uploads: name, kind, task, rows, columns, description."""
        from estimator_workbench.data import datasets

        rows = [{"name": d.name, "kind": "bundled", "task": d.task, "rows": d.n_rows,
                 "columns": list(d.columns), "description": d.description, "path": str(d.path)}
                for d in datasets.list_bundled()]
        rows += [{"name": p.name, "kind": "upload", "task": None, "rows": None, "columns": None,
                  "description": "uploaded file", "path": str(p)} for p in datasets.list_uploads(self.root)]
        return _frame(rows, ("name", "kind", "task", "rows", "columns", "description", "path"))

    def templates(self) -> pd.DataFrame:
        """Templates (bundled, canned estimators, the workspace's own): name, kind, description, params."""
        from estimator_workbench import templates

        rows = [{"name": t.name, "kind": t.kind, "description": t.description, "params": sorted(t.params),
                 "error": t.error} for t in templates.list_templates(self.root)]
        return _frame(rows, ("name", "kind", "description", "params", "error"))

    # -- runs -----------------------------------------------------------------------------------

    def submit(self, dataset: Any, template: Any, *, steps: int | None = None,
               params: Mapping[str, Any] | None = None, config: Mapping[str, Any] | None = None,
               label: str | None = None, name: str | None = None, action: str = "train",
               schedule: Mapping[str, Any] | None = None, batch_size: int | None = None,
               from_run: Run | str | None = None, wait: bool = False) -> Run:
        """Validates and submits a run through the workbench's one submit path; returns the ``Run``.

        Args:
            dataset: a bundled dataset name (``'iris'``), a CSV/Parquet path, or a pandas
                DataFrame (stored in the workspace as an upload, as the UI's Data page stores one).
            template: a template name (``ws.templates()``) or ``{'name': ..., 'code': ...}``.
            steps: train until this global step (``max_steps``; default 1000 for training).
            params: the template's params (checked against its PARAMS; defaults filled).
            config: RunConfig settings (``tf_random_seed``, ``save_checkpoints_steps``, ...).
            label: the label column (default: inferred).
            name: the run's name (default ``'<template> on <dataset>'``).
            action: ``'train'``, ``'train_and_evaluate'``, ``'evaluate'`` or ``'predict'`` (the
                last two need ``from_run``).
            schedule: further schedule settings (``eval_every_steps``, ``early_stopping``, ...).
            batch_size: the input batch size (schedule).
            from_run: the trained run an evaluate/predict run uses, or a training run warm-starts from.
            wait: wait for the run to finish before returning.

        Raises:
            ValueError: (``RunSpecError``) a bad field, named, before anything is registered.
        """
        from estimator_workbench import templates
        from estimator_workbench.execution.submit import submit_run
        from estimator_workbench.store.run_spec import RunSpecError

        parent = self.run(from_run).record if isinstance(from_run, str) else (
            from_run.record if from_run is not None else None)
        if action in ("evaluate", "predict") and parent is None:
            raise RunSpecError(f"action={action!r} needs from_run: the trained run whose model to use.")
        schedule = dict(schedule or {})
        if steps is not None:
            schedule["max_steps"] = steps
        if batch_size is not None:
            schedule["batch_size"] = batch_size
        dataset = self._stored(dataset)
        if parent is not None and action in ("evaluate", "predict"):
            template = template if template is not None else dict(parent.template)
            params = {**parent.params, **(params or {})}
            config = {**parent.run_config, **(config or {})}
            dataset_dict = run_request.dataset_for_parent(parent, dataset, action, field="dataset")
        else:
            dataset_dict = run_request.dataset_dict(dataset, label, field="dataset")
        template_dict, schema = run_request.template_dict(template, self.root, field="template")
        try:
            checked_params = templates.validate_params(schema, dict(params or {}))
        except ValueError as exc:
            raise RunSpecError(f"params: {exc}") from None
        record = submit_run(
            self.registry, self.launcher,
            name=name or run_request.default_run_name(template_dict["name"], dataset_dict),
            action=action, dataset=dataset_dict, template=template_dict, params=checked_params,
            run_config=dict(config or {}), schedule=schedule,
            parent_run_id=parent.run_id if parent is not None else None, control=_API_CONTROLS)
        run = Run(self, record.run_id)
        return run.wait(progress=False) if wait else run

    def _stored(self, dataset: Any) -> Any:
        """A DataFrame becomes a stored upload (its path); anything else is returned as given."""
        if type(dataset).__name__ != "DataFrame" or not hasattr(dataset, "to_csv"):
            return dataset
        from estimator_workbench.data import datasets

        name = str(getattr(dataset, "attrs", {}).get("name") or "dataframe") + ".csv"
        return str(datasets.save_upload(self.root, name, dataset.to_csv(index=False).encode("utf-8")))

    def run(self, run_id: str) -> Run:
        """The run ``run_id`` (``RunNotFoundError``, a ``LookupError``, when there is none)."""
        self.registry.get(run_id)
        return Run(self, run_id)

    def runs(self, status: str | Sequence[str] | None = None, *, limit: int | None = None,
             best: bool = False) -> pd.DataFrame:
        """One row per run, newest first, like ``mlflow.search_runs()``: ``run_id``, ``name``,
        ``status``, ``action``, ``dataset``, ``template``, ``created``, ``params.*``, ``config.*``
        and the **final** value of each metric (at the last step the run logged it, as MLflow's
        ``metrics.*`` and the UI's "final eval accuracy") as ``metrics.<split>/<name>``; with
        ``best=True`` also its best value and the step of it as ``best.<split>/<name>`` and
        ``best_step.<split>/<name>`` (the UI's "best eval accuracy" and "best at step"). Both come
        from ``store.metric_values``, the one definition every page uses."""
        import pandas as pd

        from estimator_workbench.store.metric_values import BEST, FINAL, metric_value

        with contextlib.suppress(Exception):  # a read-only look must not fail on a busy launcher
            self.launcher.reap_lost()
        records = self.registry.list_runs(status, limit=limit, trashed=False)
        rows = []
        for r in records:
            row: dict[str, Any] = {
                "run_id": r.run_id, "name": r.name, "status": r.display_status, "action": r.action,
                "dataset": run_request.dataset_name(r.dataset), "template": r.template_name,
                "created": pd.Timestamp(r.created_at, unit="s"), "last_step": r.last_step}
            row.update({f"params.{k}": v for k, v in sorted(r.params.items())})
            row.update({f"config.{k}": v for k, v in sorted(r.run_config.items())})
            row.update({f"metrics.{tag}": metric_value(r.summary, tag, FINAL).value for tag in sorted(r.summary)})
            if best:
                for tag in sorted(r.summary):
                    value = metric_value(r.summary, tag, BEST)
                    row[f"best.{tag}"], row[f"best_step.{tag}"] = value.value, value.step
            rows.append(row)
        return _frame(rows, () if rows else ("run_id", "name", "status", "action", "dataset", "template",
                                             "created", "last_step"))

    def compare(self, run_ids: Sequence[str | Run], interval: float = 1.0, *, widget: bool | None = None,
                metric: str | None = None, direction: str | None = None, param: str | None = None,
                smoothing: float = 0.0) -> Any:
        """The Compare page's charts of these runs (overlaid curves; with differing params, parallel
        coordinates and a param scatter against ``metric``), live in Jupyter while a run trains (a
        background thread: the kernel stays free), static figures elsewhere. Returns a
        ``CompareChart``: ``.figures`` (dict of plotly figures), ``.table``, ``.best``."""
        from estimator_workbench.notebook_live import CompareChart

        ids = [r.id if isinstance(r, Run) else str(r) for r in run_ids]
        return CompareChart(self, ids, interval, widget=widget, metric=metric, direction=direction,
                            param=param, smoothing=smoothing)

    def sweep(self, dataset: Any, template: Any, *, space: Mapping[str, Any], steps: int, metric: str,
              trials: int = 10, parallel: int = 1, direction: str = "", sampler: str = "tpe",
              params: Mapping[str, Any] | None = None, label: str | None = None, eval_every: int = 0,
              pruner: str = "median", prune_after: int = 5, seed: int | None = None,
              name: str | None = None) -> Sweep:
        """Starts an Optuna sweep whose trials are ordinary runs (the CLI's ``sweep``); returns a ``Sweep``.

        ``space`` maps a param to the CLI's ``--param`` form: ``'0.0001:0.1:log'``, ``'1:4:int'``,
        or a list of choices. The sweep's driver runs in a background thread of this process.
        """
        from estimator_workbench.sweeps import store
        from estimator_workbench.sweeps.plan import default_name, plan_sweep

        specs = [f"{key}={','.join(map(str, value)) if isinstance(value, (list, tuple)) else value}"
                 for key, value in space.items()]
        dataset_dict = run_request.dataset_dict(self._stored(dataset), label, field="dataset")
        template_dict, _ = run_request.template_dict(template, self.root, field="template")
        sweep_name = name or default_name(template_dict["name"], run_request.dataset_name(dataset_dict).split(".")[0])
        spec = plan_sweep(self.root, name=sweep_name, dataset=dataset_dict, template=template_dict,
                          params=specs, steps=steps, trials=trials, parallel=parallel, metric=metric,
                          direction=direction, sampler=sampler, base_params=dict(params or {}),
                          eval_every=eval_every, pruner=pruner, prune_after=prune_after, seed=seed)
        store.create_study(self.root, spec)
        return Sweep(self, spec.name, start=True)


class Run:
    """One run of a workspace; attributes are read from the registry each time.

    Example:
        >>> run = ws.run("r-20261204-abc")                                   # doctest: +SKIP
        >>> run.status, run.summary["eval/accuracy"]["last"]                 # doctest: +SKIP
    """

    def __init__(self, workspace: Workspace, run_id: str) -> None:
        self.workspace = workspace
        self.id = run_id

    def __repr__(self) -> str:
        return f"Run({self.id!r}, status={self.status!r})"

    @property
    def record(self) -> Any:
        """The run's registry record (``RunRecord``), read now."""
        return self.workspace.registry.get(self.id)

    @property
    def status(self) -> str:
        return str(self.record.display_status)

    @property
    def params(self) -> dict[str, Any]:
        return dict(self.record.params)

    @property
    def config(self) -> dict[str, Any]:
        return dict(self.record.run_config)

    @property
    def summary(self) -> dict[str, dict[str, Any]]:
        """Per metric (``train/loss``, ``eval/accuracy``, ...): last, best and their steps."""
        return dict(self.record.summary)

    @property
    def folder(self) -> Path:
        return Path(self.workspace.registry.run_dir(self.id))

    def wait(self, timeout: float | None = None, progress: bool = True) -> Run:
        """Waits until the run has finished (or ``timeout`` seconds); ``progress`` shows a bar of its steps."""
        launcher = self.workspace.launcher
        deadline = None if timeout is None else time.monotonic() + timeout
        bar = None
        try:
            while True:
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                # The launcher's own wait (it reaps the runner), in short slices to move the bar.
                record = launcher.wait(self.id, timeout=0.5 if left is None else min(0.5, left), interval=0.1)
                if progress:
                    bar = _show_progress(bar, record)
                if record.is_finished:
                    launcher.wait(self.id, timeout=left, interval=0.05)  # until its process has ended
                    return self
                if deadline is not None and time.monotonic() >= deadline:
                    return self
        finally:
            if bar is not None:
                bar.set_postfix(status=self.status, refresh=False)
                bar.close()

    def stop(self) -> None:
        """Graceful stop: the run checkpoints and ends ``stopped``. Only the run's owner or an
        admin may (``$WORKBENCH_USER`` or the OS account acts; ``PermissionError`` otherwise)."""
        from estimator_workbench.execution import run_actions
        from estimator_workbench.store.users import cli_actor

        run_actions.stop(self.workspace.launcher, self.id, cli_actor(self.workspace.root))

    def cancel(self, grace: float = 10.0) -> None:
        """SIGTERM to the run's processes, SIGKILL after ``grace`` seconds; ends ``cancelled``
        (owner or admin only, as ``stop``)."""
        from estimator_workbench.execution import run_actions
        from estimator_workbench.store.users import cli_actor

        run_actions.cancel(self.workspace.launcher, self.id, cli_actor(self.workspace.root), grace=grace)

    def resume(self) -> Run:
        """Continues a finished run from its last checkpoint (the same run id; owner or admin
        only, as ``stop``)."""
        from estimator_workbench.execution import run_actions
        from estimator_workbench.store.users import cli_actor

        run_actions.resume(self.workspace.launcher, self.id, cli_actor(self.workspace.root))
        return self

    def metrics(self, wide: bool = False) -> pd.DataFrame:
        """The run's metric stream: columns ``step``, ``tag`` (``train/loss``, ``eval/accuracy``, ...),
        ``value``, ``wall_time``; ``wide=True``: one row per step, one column per tag."""
        from estimator_workbench.store.metrics_store import read_all

        path = self.folder / paths.METRICS_FILE
        frame = read_all(path) if path.exists() else None
        if frame is None or frame.empty:
            long = _frame([], ("step", "tag", "value", "wall_time"))
        else:
            long = frame.assign(tag=frame["split"].astype(str) + "/" + frame["name"].astype(str))[
                ["step", "tag", "value", "wall_time"]].reset_index(drop=True)
        if not wide:
            return long
        return long.pivot_table(index="step", columns="tag", values="value", aggfunc="last").reset_index() \
            .rename_axis(columns=None)

    # -- the trained model ----------------------------------------------------------------------

    def _engine_spec(self, data: Any, action: str) -> dict[str, Any]:
        """The run.json-shaped spec ``build_estimator`` takes, for ``data`` (None: the run's own);
        without a ``schema_version``, so a registry row of any age is migrated (``run_spec.migrate``)."""
        record = self.record
        dataset = run_request.dataset_for_parent(record, self.workspace._stored(data), action, field="data")
        spec: dict[str, Any] = {"template": dict(record.template),
                                "params": dict(record.params), "action": action,
                                "run_config": dict(record.run_config), "dataset": dataset}
        if record.schedule.get("batch_size"):
            spec["schedule"] = {"batch_size": record.schedule["batch_size"]}
        return spec

    def _task_info(self) -> dict[str, Any] | None:
        """The statistics and vocabularies the model was trained with (this run's or its parent's)."""
        from estimator_workbench.execution.lineage import TASK_INFO_FILE

        record = self.record
        for folder in (self.folder, *([] if not record.parent_run_id else
                                      [Path(self.workspace.registry.run_dir(record.parent_run_id))])):
            if (folder / TASK_INFO_FILE).exists():
                return dict(json.loads((folder / TASK_INFO_FILE).read_text("utf-8")))
        return None

    def _checkpoint(self) -> str:
        from estimator_engine import checkpoints

        latest = checkpoints.latest_checkpoint(self.folder / paths.MODEL_DIR)
        if latest is None:
            raise ValueError(f"Run {self.id!r} has no checkpoint in {self.folder / paths.MODEL_DIR}; "
                             "train it first (status: {self.status}).")
        return latest

    def estimator(self, model_dir: str | os.PathLike[str] | None = None) -> Any:
        """The trained ``ee.Estimator``: the template's model_fn, params and feature columns,
        restored from the run's newest checkpoint. ``model_dir`` default: the run's own model/
        (training it then continues the run's checkpoints; pass a folder to work on a copy)."""
        from estimator_workbench.execution.build import build_estimator

        self._checkpoint()  # a clear error for a run without one
        target = Path(model_dir) if model_dir is not None else self.folder / paths.MODEL_DIR
        if model_dir is not None:
            target.mkdir(parents=True, exist_ok=True)
            if not any(target.iterdir()):
                shutil.copytree(self.folder / paths.MODEL_DIR, target, dirs_exist_ok=True)
        estimator, _ = build_estimator(self._engine_spec(None, "evaluate"), str(target), task_info=self._task_info())
        return estimator

    def evaluate(self, data: Any = None, steps: int | None = None) -> dict[str, Any]:
        """Evaluates the trained model; returns the engine's metrics dict (``loss``, metrics,
        ``global_step``). ``data`` None: the run's own eval split; else a path, bundled name or
        DataFrame with the label column, all of whose rows are evaluated."""
        import dataclasses

        from estimator_workbench.data import datasets
        from estimator_workbench.execution.build import DEFAULT_BATCH_SIZE, build_estimator

        checkpoint = self._checkpoint()
        with tempfile.TemporaryDirectory(prefix="wb-evaluate-") as scratch:
            spec = self._engine_spec(data, "evaluate")
            estimator, fns = build_estimator(spec, scratch, task_info=self._task_info())
            input_fn = fns.eval
            if data is not None:  # every row: no split, one pass, in the training run's encoding
                whole = dataclasses.replace(datasets.DatasetSpec.from_dict(spec["dataset"]), eval_fraction=0.0)
                input_fn = datasets.make_input_fns(
                    whole, whole.load(), batch_size=int(spec.get("schedule", {}).get("batch_size") or DEFAULT_BATCH_SIZE),
                    num_epochs=1, shuffle_seed=0, info=fns.info).train
            if input_fn is None:
                raise ValueError(f"Run {self.id!r} has no evaluation rows (its split put none in eval); "
                                 "pass data= to evaluate on.")
            return estimator.evaluate(input_fn, steps=steps, checkpoint_path=checkpoint)

    def predict(self, data: Any = None) -> pd.DataFrame:
        """Predictions for ``data`` (path, bundled name or DataFrame; None: the run's dataset) as a
        DataFrame with exactly the columns of the UI's prediction CSV (the input rows, then the
        prediction columns)."""
        import pandas as pd

        from estimator_workbench.data import datasets
        from estimator_workbench.data.predictions import write_predictions_csv
        from estimator_workbench.execution.build import build_estimator

        checkpoint = self._checkpoint()
        with tempfile.TemporaryDirectory(prefix="wb-predict-") as scratch:
            spec = self._engine_spec(data, "predict")
            estimator, fns = build_estimator(spec, os.path.join(scratch, "model"), task_info=self._task_info())
            source = datasets.DatasetSpec.from_dict(spec["dataset"]).load()
            out = os.path.join(scratch, paths.PREDICTIONS_FILE)
            write_predictions_csv(estimator, fns.predict, source, out,
                                  label_vocabulary=(fns.info or {}).get("label_vocabulary"),
                                  checkpoint_path=checkpoint)
            return pd.read_csv(out)

    def live(self, interval: float = 1.0, *, widget: bool | None = None) -> Any:
        """The run page's curves, updated in the cell while the run trains (a background thread:
        the kernel stays free); a static figure outside Jupyter. Returns a ``LiveChart``."""
        from estimator_workbench.notebook_live import LiveChart

        chart = LiveChart(self, interval, widget=widget)
        if type(chart.figure).__name__ != "FigureWidget":  # static: say where the run stands
            record = self.record
            print(f"{self.id}: {record.display_status}, step {_reported_step(record)}"
                  f"/{record.schedule.get('max_steps') or '?'}")
        return chart

    def to_notebook(self, path: str | os.PathLike[str]) -> Path:
        """Writes a notebook that reproduces this run with the engine alone; returns its path."""
        from estimator_workbench.execution.notebook import write_run_notebook

        return write_run_notebook(self.workspace.root, self.id, path)


def _reported_step(record: Any) -> int:
    """The runner's reported step, else the newest step of its metric summary."""
    return int(record.last_step or max((int(s.get("last_step") or 0) for s in record.summary.values()), default=0))


def _show_progress(bar: Any, record: Any) -> Any:
    """A tqdm bar of the run's reported step against its max_steps (created on first use)."""
    total = record.schedule.get("max_steps") or record.schedule.get("steps")
    if bar is None:
        from tqdm.auto import tqdm

        bar = tqdm(total=total, desc=record.run_id, unit="step", dynamic_ncols=True)
    step = _reported_step(record)
    if step > bar.n:
        bar.update(step - bar.n)
    bar.set_postfix(status=record.display_status, refresh=True)
    return bar


class Sweep:
    """An Optuna sweep of a workspace whose trials are runs; its driver runs in a background thread.

    Example:
        >>> sweep = ws.sweep("iris", "mlp_classifier", space={"learning_rate": "0.001:0.1:log"},
        ...                  steps=100, metric="accuracy", trials=4)             # doctest: +SKIP
        >>> sweep.wait().best_run.summary["eval/accuracy"]                   # doctest: +SKIP
    """

    def __init__(self, workspace: Workspace, name: str, *, start: bool = False) -> None:
        self.workspace = workspace
        self.name = name
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        if start:
            self._thread = threading.Thread(target=self._drive, name=f"sweep-{name}", daemon=True)
            self._thread.start()

    def __repr__(self) -> str:
        return f"Sweep({self.name!r})"

    def _drive(self) -> None:
        from estimator_workbench.sweeps.driver import SweepDriver

        try:
            SweepDriver(self.workspace.root, self.name).run()
        except BaseException as exc:  # reported by wait()
            self._error = exc

    def _study(self) -> tuple[Any, Any]:
        from estimator_workbench.sweeps import store

        study = store.load_study(self.workspace.root, self.name, with_sampler=False)
        return study, store.load_spec(study)

    def wait(self, timeout: float | None = None) -> Sweep:
        """Waits for the sweep's driver to finish (or ``timeout`` seconds)."""
        if self._thread is not None:
            self._thread.join(timeout)
        if self._error is not None:
            raise self._error
        return self

    def stop(self) -> None:
        """Asks the driver to stop: running trials checkpoint, the sweep ends 'stopped'."""
        from estimator_workbench.sweeps import store

        store.request_stop(self.workspace.root, self.name)

    @property
    def best_run(self) -> Run | None:
        """The run of the best complete trial (None before one completed)."""
        from estimator_workbench.sweeps.report import best_trial

        best = best_trial(*self._study())
        return None if best is None or not best.get("run_id") else Run(self.workspace, best["run_id"])

    def trials(self) -> pd.DataFrame:
        """The trials table: trial, state, value, ``param <name>`` columns, run, run status, reason."""
        from estimator_workbench.sweeps.report import trials_frame

        study, _ = self._study()
        return trials_frame(study, self.workspace.registry)

    def parallel_coordinates(self) -> Any:
        """A plotly figure: each trial's params and value (None before a trial completed)."""
        from estimator_workbench.sweeps.report import parallel_figure

        return parallel_figure(*self._study())

    def importances(self) -> Any:
        """A plotly bar figure of the params' importances (None with too few trials)."""
        from estimator_workbench.sweeps.report import importance_figure, param_importances

        values, method = param_importances(self._study()[0])
        return None if values is None else importance_figure(values, method)
