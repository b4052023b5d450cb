"""Mirrors finished runs to an MLflow tracking server (issue 27 §3): params, RunConfig, metrics with
their steps, tags, notes, and the exported model as a pyfunc model.

::

    python -m estimator_workbench.tracking.mlflow_mirror --workspace WS [RUN ...]   what launchers start
    estimator-workbench mlflow sync [RUN ...]                                      the same, in the foreground

Outside the training path: a run is mirrored after it has finished, in a process of its own that
runs no user code (the launchers start it from ``poll`` when a mirror is due:
``estimator_workbench.execution.mirror_trigger``). Its model is exported by the serving code's
``export_run_in_child`` (the template is user code: it runs in a child without the secrets), and
logged as ``tracking.pyfunc.ExportedModel`` with the export as its artifact.

What an MLflow run holds (``mirror_run``):

* params: the template's params as given, the RunConfig as ``run_config.<field>``, the schedule as
  ``schedule.<field>`` (nested values as JSON); the whole run contract and the template's code as
  artifacts ``workbench/run.json`` and ``workbench/model_fn.py``;
* metrics: every line of the run's ``metrics.jsonl`` (the stream the UI reads, through
  ``store.metrics_store``) as ``<split>/<name>`` at its step and wall time;
* tags: ``workbench_run_id``, ``dataset``, ``dataset_fingerprint``, ``template``, ``seed``,
  ``action``, ``workbench_status``, ``workbench_tags``, ``parent_run_id``, the error of a failed
  run, and the run's notes as MLflow's description (``mlflow.note.content``);
* status and times: FINISHED (succeeded, stopped), FAILED (failed, lost) or KILLED (cancelled);
* the model (a training run that succeeded or stopped): ``name="model"``, signature from the
  export's ``signature.json`` and the dataset's column types.

MLflow down never fails a run: the mirror stays ``pending`` with the reason ("not reachable at
..."), and is tried again by the next sync after a back-off (``RETRY_DELAYS_S``); a refusal
by the server (bad credentials, a rejected value) is ``failed`` and retried by ``mlflow sync``.
A retry (or a resumed run that finished again) replaces the MLflow run it made before: the
previous one is deleted, so MLflow never holds a half-mirrored or duplicated run.

Example:
    >>> sync(workspace_root)                      # every mirror that is due      # doctest: +SKIP
    [('r-20261204-ab12cd', MirrorState(state='synced', ...))]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import sys
import tempfile
import time
import urllib.error
import urllib.request
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from estimator_workbench.store import mlflow_state, paths
from estimator_workbench.store.mlflow_state import MirrorState
from estimator_workbench.store.records import MODEL_ACTIONS, RunNotFoundError, RunRecord
from estimator_workbench.store.registry import RunRegistry

__all__ = ["DEFAULT_EXPERIMENT", "EXPERIMENT_ENV_VAR", "RETRY_DELAYS_S", "main", "mirror_run", "sync",
           "tracking_uri_for"]

EXPERIMENT_ENV_VAR = "WORKBENCH_MLFLOW_EXPERIMENT"
DEFAULT_EXPERIMENT = "estimator-workbench"
# Seconds before the 1st, 2nd, ... retry of a mirror whose server could not be reached (then the last).
RETRY_DELAYS_S = (30.0, 60.0, 120.0, 300.0, 600.0)
_MLFLOW_STATUS = {"succeeded": "FINISHED", "stopped": "FINISHED", "failed": "FAILED", "lost": "FAILED",
                  "cancelled": "KILLED"}
# MLflow's HTTP client retries a refused connection 7 times with a doubling back-off (minutes);
# a sync that finds the server down says so within seconds and leaves the retry to the next sync.
_HTTP_DEFAULTS = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2", "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
                  "MLFLOW_HTTP_REQUEST_TIMEOUT": "60", "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false"}
_MAX_PARAM_LENGTH = 6000  # MLflow's limit on a param value
_TRANSIENT_STATUS = (408, 429, 500, 502, 503, 504)


class _Unreachable(Exception):
    """The tracking server did not answer (or answered 5xx/429): the mirror stays pending."""


def tracking_uri_for(state: MirrorState, environ: Mapping[str, str] | None = None) -> str:
    """The URI to mirror to: the one recorded for the run; ``$WORKBENCH_MLFLOW_URI`` instead when
    it names the same server with credentials (the recorded one has its password removed)."""
    current = mlflow_state.mirror_uri(environ)
    if current is not None and mlflow_state.redact_uri(current) == state.tracking_uri:
        return current
    return state.tracking_uri


# -- one run ---------------------------------------------------------------------------------------


def _probe(uri: str) -> None:
    """Raises ``_Unreachable`` when an http(s) tracking server does not answer ``/health``."""
    if not uri.startswith(("http://", "https://")):
        return
    url = uri.rstrip("/") + "/health"
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            response.read(64)
    except urllib.error.HTTPError as exc:
        if exc.code in _TRANSIENT_STATUS:
            raise _Unreachable(f"the server answered HTTP {exc.code}") from None
        # Any other answer (e.g. 401 from a proxy in front of it) is a server that is up.
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise _Unreachable(f"{type(reason).__name__}: {reason}") from None


def _short(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 300 else text[:297] + "..."


def _is_transient(exc: BaseException) -> bool:
    """A network failure or an overloaded server (retry later), as opposed to a refusal."""
    if isinstance(exc, (_Unreachable, OSError, TimeoutError)):
        return True
    name = type(exc).__name__
    if name == "RestException":
        status = getattr(exc, "get_http_status_code", lambda: 500)()
        return status in _TRANSIENT_STATUS
    if name == "MlflowException":  # the HTTP client's own failures ("API request to ... failed")
        return str(exc).startswith("API request to")
    return type(exc).__module__.startswith(("requests", "urllib3"))


def _param_items(prefix: str, values: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    for key, value in values.items():
        text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
        if len(text) > _MAX_PARAM_LENGTH:
            text = text[:_MAX_PARAM_LENGTH - 15] + "...(truncated)"
        yield _key(f"{prefix}{key}"), text


def _key(name: str) -> str:
    """A valid MLflow param/metric key: letters, digits and ``_ - . space / :``, others as ``_``."""
    return "".join(c if c.isalnum() or c in "_-. /:" else "_" for c in str(name))[:250] or "_"


def _tags(record: RunRecord, run_dir: Path) -> dict[str, str]:
    from estimator_workbench.execution.run_request import dataset_name

    seed = (record.run_config or {}).get("tf_random_seed")
    tags = {
        "workbench_run_id": record.run_id,
        "workbench_run_dir": str(run_dir),
        "dataset": dataset_name(record.dataset or {}),
        "dataset_fingerprint": record.dataset_fingerprint or str((record.dataset or {}).get("fingerprint") or ""),
        "template": record.template_name or "",
        "seed": "" if seed is None else str(seed),
        "action": record.action,
        "workbench_status": record.status,
        "workbench_tags": ",".join(record.tags),
        "parent_run_id": record.parent_run_id or "",
        "mlflow.source.name": "estimator-workbench",
        "mlflow.note.content": record.note or "",
    }
    if record.error:
        tags["workbench_error"] = record.error[:5000]
    return {k: v for k, v in tags.items() if v != "" or k == "mlflow.note.content"}


def _metrics(run_dir: Path) -> list[Any]:
    """The run's metrics stream as MLflow ``Metric``s: ``<split>/<name>`` at each step."""
    import pandas as pd
    from mlflow.entities import Metric

    from estimator_workbench.store.metrics_store import read_all

    frame = read_all(run_dir / paths.METRICS_FILE)
    metrics = []
    now_ms = int(time.time() * 1000)
    for step, wall_time, split, name, value in frame.itertuples(index=False, name=None):
        stamp = now_ms if pd.isna(wall_time) or not math.isfinite(wall_time) else int(wall_time * 1000)
        metrics.append(Metric(_key(f"{split}/{name}"), float(value), stamp, 0 if pd.isna(step) else int(step)))
    return metrics


def _column_types(record: RunRecord) -> dict[str, str]:
    """MLflow column types of the run's dataset (the pyfunc's inputs are its feature columns)."""
    from estimator_workbench.data import datasets
    from estimator_workbench.tracking.pyfunc import column_type

    try:
        frame = datasets.DatasetSpec.from_dict(record.dataset).load()
    except Exception:  # the file moved, a dataset dict of an older version: the export's dtypes
        return {}
    return {str(name): column_type(dtype) for name, dtype in frame.dtypes.items()}


def _log_model(run_id: str, record: RunRecord, run_dir: Path, uri: str) -> tuple[str | None, str]:
    """Exports the run (in a child process) and logs it as the pyfunc model ``model`` of the MLflow
    run; returns ``(model uri, note)``: the note says why no model was logged."""
    if record.action not in MODEL_ACTIONS:
        return None, f"a {record.action} run has no model of its own"
    if record.status not in ("succeeded", "stopped"):
        return None, f"the run {record.status}"
    from estimator_workbench.serve.run_export import export_run_in_child

    try:
        export = export_run_in_child(run_dir)
    except ValueError as exc:
        return None, _short(exc)
    import mlflow

    from estimator_workbench.tracking import pyfunc

    meta = json.loads((export / "signature.json").read_text("utf-8"))
    signature = pyfunc.model_signature(meta, _column_types(record))
    version = _installed_version()
    requirements = [f"estimator-workbench=={version}" if version else "estimator-workbench", "pandas",
                    f"torch=={str(meta.get('torch_version', '')).split('+')[0]}" if meta.get("torch_version") else "torch"]
    mlflow.set_tracking_uri(uri)
    with tempfile.TemporaryDirectory(prefix="workbench-pyfunc-") as tmp:
        code = Path(tmp) / "estimator_workbench_model.py"
        code.write_text(pyfunc.MODEL_CODE, encoding="utf-8")
        # MLflow prints "View run ..." on stdout when the run's context ends: keep stdout clean
        # for the callers that print JSON there.
        with contextlib.redirect_stdout(sys.stderr), warnings.catch_warnings(), mlflow.start_run(run_id=run_id):
            # No input example (it would run the model at logging time): the signature is given.
            warnings.filterwarnings("ignore", message=".*input example was not provided.*")
            warnings.filterwarnings("ignore", message=".*[Tt]ype hint.*")  # predict has none on purpose
            info = mlflow.pyfunc.log_model(
                name="model", python_model=str(code), artifacts={pyfunc.EXPORT_ARTIFACT: str(export)},
                signature=signature, pip_requirements=requirements,
                metadata={"workbench_run_id": record.run_id, "export_global_step": meta.get("global_step")})
    return str(info.model_uri), ""


def _installed_version() -> str | None:
    from importlib import metadata

    try:
        return metadata.version("estimator-workbench")
    except metadata.PackageNotFoundError:
        return None


def _run_url(uri: str, experiment_id: str, run_id: str) -> str | None:
    if not uri.startswith(("http://", "https://")):
        return None
    return f"{mlflow_state.redact_uri(uri).rstrip('/')}/#/experiments/{experiment_id}/runs/{run_id}"


def mirror_run(registry: RunRegistry, record: RunRecord, state: MirrorState,
               environ: Mapping[str, str] | None = None) -> MirrorState:
    """Mirrors one finished run and returns its new state (written to ``runs/<id>/mlflow.json``):
    ``synced``; ``pending`` with the reason when the server could not be reached; ``failed``
    with the reason when it refused."""
    run_dir = registry.run_dir(record.run_id)
    uri = tracking_uri_for(state, environ)
    shown = mlflow_state.redact_uri(uri)
    try:
        import mlflow  # noqa: F401
        from mlflow.entities import Param
        from mlflow.tracking import MlflowClient
    except ImportError as exc:
        return _record_failure(run_dir, state, f"the mlflow extra is not installed ({exc.name} is missing): "
                                                "pip install 'estimator-workbench[mlflow]'", transient=False)
    try:
        _probe(uri)
        client = MlflowClient(tracking_uri=uri)
        name = (environ if environ is not None else os.environ).get(EXPERIMENT_ENV_VAR) or DEFAULT_EXPERIMENT
        experiment = client.get_experiment_by_name(name)
        experiment_id = experiment.experiment_id if experiment is not None else client.create_experiment(name)
        if state.mlflow_run_id:  # a partial mirror, or the mirror of an earlier attempt of the run
            with contextlib.suppress(Exception):
                client.delete_run(state.mlflow_run_id)
        started = record.started_at or record.created_at
        run = client.create_run(experiment_id, start_time=int(started * 1000), tags=_tags(record, run_dir),
                                run_name=record.name)
        run_id = run.info.run_id
        state = mlflow_state.write_state(run_dir, state.replace(mlflow_run_id=run_id, experiment_id=experiment_id))
        params = [*_param_items("", record.params or {}), *_param_items("run_config.", record.run_config or {}),
                  *_param_items("schedule.", record.schedule or {}), ("num_processes", str(record.num_processes))]
        for start in range(0, len(params), 100):  # MLflow takes at most 100 params per batch
            client.log_batch(run_id, params=[Param(k, v) for k, v in params[start:start + 100]])
        metrics = _metrics(run_dir)
        for start in range(0, len(metrics), 1000):  # and at most 1000 metrics
            client.log_batch(run_id, metrics=metrics[start:start + 1000])
        client.log_dict(run_id, {"run_id": record.run_id, "name": record.name, "action": record.action,
                                 "dataset": record.dataset, "params": record.params, "run_config": record.run_config,
                                 "schedule": record.schedule, "parent_run_id": record.parent_run_id,
                                 "parent_relation": record.parent_relation}, "workbench/run.json")
        if record.template_code:
            client.log_text(run_id, record.template_code, "workbench/model_fn.py")
        model_uri, note = _log_model(run_id, record, run_dir, uri)
        end = record.finished_at or time.time()
        client.set_terminated(run_id, status=_MLFLOW_STATUS.get(record.status, "FINISHED"), end_time=int(end * 1000))
    except Exception as exc:
        if _is_transient(exc):
            return _record_failure(run_dir, state, f"not reachable at {shown}: {_short(exc)}", transient=True)
        return _record_failure(run_dir, state, f"{type(exc).__name__}: {_short(exc)}", transient=False)
    return mlflow_state.write_state(run_dir, state.replace(
        state="synced", reason="", attempts=0, next_attempt_at=None, run_url=_run_url(uri, experiment_id, run_id),
        model_uri=model_uri, model_note=note, synced_finished_at=record.finished_at))


def _record_failure(run_dir: Path, state: MirrorState, reason: str, *, transient: bool) -> MirrorState:
    if not transient:
        return mlflow_state.write_state(run_dir, state.replace(state="failed", reason=reason, next_attempt_at=None))
    attempts = state.attempts + 1
    delay = RETRY_DELAYS_S[min(attempts, len(RETRY_DELAYS_S)) - 1]
    return mlflow_state.write_state(run_dir, state.replace(state="pending", reason=reason, attempts=attempts,
                                                           next_attempt_at=time.time() + delay))


# -- the workspace ---------------------------------------------------------------------------------


@contextlib.contextmanager
def _run_lock(run_dir: Path) -> Iterator[bool]:
    """An exclusive lock on the run's mirror (False when another sync holds it): two syncs never
    mirror one run at once. Released when the process ends, however it ends."""
    import fcntl

    with open(run_dir / ".mlflow.lock", "a+b") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def sync(root: str | os.PathLike[str], run_ids: Iterable[str] | None = None, *, force: bool = False,
         environ: Mapping[str, str] | None = None,
         report: Callable[[str, MirrorState], None] | None = None) -> list[tuple[str, MirrorState]]:
    """Mirrors the runs that are due (queued for a sync, finished, past their back-off), or
    ``run_ids``; returns ``(run id, new state)`` of each run it mirrored.

    Args:
        root: the workspace.
        run_ids: these runs only (a run that is not mirrored is skipped).
        force: also the runs whose back-off has not passed, and ``failed`` ones (``mlflow sync``).
        environ: where ``$WORKBENCH_MLFLOW_URI`` and the experiment name are read (default
            ``os.environ``).
        report: called with each result as it is known (the CLI prints it).
    """
    with _http_defaults():
        return _sync(root, run_ids, force=force, environ=environ, report=report)


@contextlib.contextmanager
def _http_defaults() -> Iterator[None]:
    """MLflow's HTTP settings for a sync (``_HTTP_DEFAULTS``, where the user set none), for its
    duration only: MLflow reads them at each request."""
    added = [name for name in _HTTP_DEFAULTS if name not in os.environ]
    os.environ.update({name: _HTTP_DEFAULTS[name] for name in added})
    try:
        yield
    finally:
        for name in added:
            os.environ.pop(name, None)


def _sync(root: str | os.PathLike[str], run_ids: Iterable[str] | None, *, force: bool,
          environ: Mapping[str, str] | None,
          report: Callable[[str, MirrorState], None] | None) -> list[tuple[str, MirrorState]]:
    registry = RunRegistry(root)
    ids = list(run_ids) if run_ids is not None else mlflow_state.pending_run_ids(root)
    done = []
    for run_id in ids:
        run_dir = paths.run_dir(root, run_id)
        state = mlflow_state.read_state(run_dir)
        try:
            record = registry.get(run_id)
        except RunNotFoundError:
            mlflow_state.clear_pending(root, run_id)
            continue
        if state is None:
            mlflow_state.clear_pending(root, run_id)
            continue
        if force and record.is_finished and state.state in ("failed", "pending"):
            state = state.replace(state="pending", next_attempt_at=None)
        elif force and record.is_finished and state.state == "synced" and state.synced_finished_at != record.finished_at:
            state = state.replace(state="pending", next_attempt_at=None)  # finished again since
        if not mlflow_state.is_due(record, state):
            if state.state == "synced":
                mlflow_state.clear_pending(root, run_id)
            continue
        with _run_lock(run_dir) as locked:
            if not locked:
                continue
            fresh = mlflow_state.read_state(run_dir)  # another sync may have mirrored it meanwhile
            if fresh is not None and fresh.state == "synced" and fresh.synced_finished_at == record.finished_at:
                continue
            new = mirror_run(registry, record, state, environ)
        if new.state == "synced":  # a failed mirror stays queued for `mlflow sync`
            mlflow_state.clear_pending(root, run_id)
        done.append((run_id, new))
        if report is not None:
            report(run_id, new)
    return done


def main(argv: list[str] | None = None) -> int:
    """``python -m estimator_workbench.tracking.mlflow_mirror --workspace WS [RUN ...]`` (what the
    launchers start in the background): one sync of the due mirrors, a line per run."""
    parser = argparse.ArgumentParser(description="Mirrors finished runs to MLflow (one sync).")
    parser.add_argument("--workspace", required=True)
    parser.add_argument("run_ids", nargs="*")
    args = parser.parse_args(argv)
    paths.owner_only_umask()
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    print(f"=== {stamp} mlflow sync (pid {os.getpid()})", flush=True)
    results = sync(args.workspace, args.run_ids or None,
                   report=lambda run_id, state: print(f"{run_id}: {mlflow_state.describe(state)}", flush=True))
    return 0 if all(state.state != "failed" for _, state in results) else 1


if __name__ == "__main__":
    sys.exit(main())
