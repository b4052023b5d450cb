"""Where a run's MLflow mirror stands: ``runs/<id>/mlflow.json`` and the workspace's queue of mirrors
still to do (``<workspace>/.mlflow-pending/<run id>``).

A run is mirrored to an MLflow tracking server (``$WORKBENCH_MLFLOW_URI``, or the run's
``schedule['mlflow']`` switch) *after* it has finished, by ``estimator_workbench.tracking.mlflow_mirror``
in a process of its own: the run never waits for MLflow and never fails because of it. This module
only records where that stands, for the run page, the CLI and the launchers that start the sync:

* ``pending``: not mirrored yet (the run has not finished, or the server could not be reached:
  ``reason`` says why and ``next_attempt_at`` when it is tried again);
* ``synced``: the MLflow run ``mlflow_run_id`` holds it (``model_uri``: the logged pyfunc model,
  or ``model_note`` saying why there is none);
* ``failed``: the server refused it (``reason``); ``estimator-workbench mlflow sync`` tries again.

The file holds no secret: the tracking URI is kept without its password (``redact_uri``); the
credentials (``MLFLOW_TRACKING_TOKEN``, ``MLFLOW_TRACKING_PASSWORD``, a password in
``$WORKBENCH_MLFLOW_URI``) stay in the environment of the process that syncs, and the launchers
keep them from runner processes (``execution.processes.without_secrets``).

Example:
    >>> import tempfile
    >>> root = Path(tempfile.mkdtemp())
    >>> (root / "runs" / "r-1").mkdir(parents=True)
    >>> state = mark_pending(root, "r-1", tracking_uri="http://bob:pw@mlflow:5000", reason="the run is queued")
    >>> state.tracking_uri, pending_run_ids(root)
    ('http://bob@mlflow:5000', ['r-1'])
    >>> describe(state)
    'MLflow: pending (the run is queued); mirrors to http://bob@mlflow:5000'
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
import time
import urllib.parse
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from estimator_workbench.store import paths

__all__ = ["MIRROR_FILE", "PENDING_DIR", "STATES", "TARGET_ENV_VAR", "URI_ENV_VAR", "MirrorState", "clear_pending",
           "describe", "is_due", "mark_pending", "mirror_target", "mirror_uri", "pending_run_ids", "read_state",
           "redact_uri", "write_state"]

URI_ENV_VAR = "WORKBENCH_MLFLOW_URI"
# The server, without its password, that runs submitted by a process started without secrets (a
# sweep's driver) are mirrored to; that process queues their mirrors, and a process holding
# $WORKBENCH_MLFLOW_URI (the UI, the CLI) syncs them.
TARGET_ENV_VAR = "WORKBENCH_MLFLOW_MIRROR_TO"
MIRROR_FILE = "mlflow.json"
PENDING_DIR = ".mlflow-pending"
STATES = ("pending", "synced", "failed")


@dataclasses.dataclass(frozen=True)
class MirrorState:
    """One run's mirror to MLflow (the content of ``runs/<id>/mlflow.json``).

    Example:
        >>> MirrorState("pending", "http://127.0.0.1:5000", reason="the run is running").state
        'pending'
    """

    state: str
    tracking_uri: str
    reason: str = ""
    attempts: int = 0  # failed attempts since the last success
    next_attempt_at: float | None = None  # a pending mirror is not tried before this (Unix seconds)
    mlflow_run_id: str | None = None
    experiment_id: str | None = None
    run_url: str | None = None  # the run in MLflow's UI (http(s) servers only)
    model_uri: str | None = None  # mlflow.pyfunc.load_model(model_uri)
    model_note: str = ""  # why no model was logged (no checkpoint, an export the engine refused...)
    synced_finished_at: float | None = None  # the run's finished_at that was mirrored
    updated_at: float = 0.0

    def replace(self, **changes: Any) -> MirrorState:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MirrorState:
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def mirror_uri(environ: Mapping[str, str] | None = None) -> str | None:
    """``$WORKBENCH_MLFLOW_URI`` (stripped), or None when it is unset or blank."""
    value = (os.environ if environ is None else environ).get(URI_ENV_VAR, "").strip()
    return value or None


def mirror_target(environ: Mapping[str, str] | None = None) -> str | None:
    """Where runs submitted by this process are mirrored: ``$WORKBENCH_MLFLOW_URI``, else the
    redacted URI a process without secrets was given (``$WORKBENCH_MLFLOW_MIRROR_TO``), else None."""
    env = os.environ if environ is None else environ
    return mirror_uri(env) or env.get(TARGET_ENV_VAR, "").strip() or None


def redact_uri(uri: str) -> str:
    """``uri`` without the password of its user info (what may be written to disk and shown).

    Example:
        >>> redact_uri("https://bob:s3cret@mlflow.example.com/path")
        'https://bob@mlflow.example.com/path'
        >>> redact_uri("sqlite:////tmp/mlflow.db")
        'sqlite:////tmp/mlflow.db'
    """
    parts = urllib.parse.urlsplit(uri)
    if parts.password is None:
        return uri
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{parts.username}@{host}" if parts.username else host
    if parts.port is not None:
        netloc += f":{parts.port}"
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


def _state_path(run_dir: Path) -> Path:
    return run_dir / MIRROR_FILE


def read_state(run_dir: str | os.PathLike[str]) -> MirrorState | None:
    """The run's mirror state, or None when the run is not mirrored (or the file is unreadable)."""
    try:
        data = json.loads(_state_path(Path(run_dir)).read_text("utf-8"))
    except (OSError, ValueError):
        return None
    return MirrorState.from_dict(data) if isinstance(data, dict) and data.get("state") in STATES else None


def write_state(run_dir: str | os.PathLike[str], state: MirrorState) -> MirrorState:
    """Writes ``runs/<id>/mlflow.json`` atomically (readers never see half a file); returns the
    state with ``updated_at`` set."""
    if state.state not in STATES:
        raise ValueError(f"state must be one of {list(STATES)}, given: {state.state!r}")
    state = state.replace(tracking_uri=redact_uri(state.tracking_uri), updated_at=time.time())
    folder = Path(run_dir)
    fd, tmp = tempfile.mkstemp(prefix=".mlflow-", suffix=".json", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(state.to_dict(), f, indent=1)
        os.replace(tmp, _state_path(folder))
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return state


def _pending_dir(root: str | os.PathLike[str]) -> Path:
    return Path(root) / PENDING_DIR


def mark_pending(root: str | os.PathLike[str], run_id: str, *, reason: str,
                 tracking_uri: str | None = None) -> MirrorState | None:
    """Records that the run waits for its mirror (``reason``) and queues it for the next sync.

    ``tracking_uri``: the server to mirror to (given at submit); None keeps the one recorded
    before, and does nothing for a run that is not mirrored (None is returned).
    """
    run_dir = paths.run_dir(root, run_id)
    previous = read_state(run_dir)
    if tracking_uri is None and previous is None:
        return None
    uri = tracking_uri if tracking_uri is not None else previous.tracking_uri  # type: ignore[union-attr]
    base = previous if previous is not None and tracking_uri is None else MirrorState("pending", uri)
    state = write_state(run_dir, base.replace(state="pending", tracking_uri=uri, reason=reason,
                                              attempts=0, next_attempt_at=None))
    queue = _pending_dir(root)
    queue.mkdir(mode=0o700, exist_ok=True)
    (queue / run_id).touch()
    return state


def pending_run_ids(root: str | os.PathLike[str]) -> list[str]:
    """The runs queued for a sync (oldest mark first); cheap: one folder listing."""
    try:
        entries = list(os.scandir(_pending_dir(root)))
    except FileNotFoundError:
        return []
    entries.sort(key=lambda e: (e.stat().st_mtime if e.is_file() else 0.0, e.name))
    return [e.name for e in entries if e.is_file() and not e.name.startswith(".")]


def clear_pending(root: str | os.PathLike[str], run_id: str) -> None:
    """Takes the run off the sync queue (it is synced, failed, or gone)."""
    (_pending_dir(root) / run_id).unlink(missing_ok=True)


def is_due(record: Any, state: MirrorState | None, now: float | None = None) -> bool:
    """Whether a sync should mirror the run (a ``RunRecord``) now: finished, pending, and past its
    back-off."""
    if state is None or state.state != "pending" or not record.is_finished:
        return False
    return state.next_attempt_at is None or state.next_attempt_at <= (time.time() if now is None else now)


def describe(state: MirrorState | None, now: float | None = None) -> str:
    """One line for the run page and the CLI: where the run's mirror stands."""
    if state is None:
        return "MLflow: not mirrored"
    if state.state == "synced":
        where = state.run_url or f"{state.tracking_uri} (run {state.mlflow_run_id})"
        model = f"; model {state.model_uri}" if state.model_uri else (
            f"; no model logged: {state.model_note}" if state.model_note else "")
        return f"MLflow: synced to {where}{model}"
    if state.state == "failed":
        return (f"MLflow: failed at {state.tracking_uri}: {state.reason}. "
                "Retry with `estimator-workbench mlflow sync`.")
    if state.attempts:
        wait = ""
        if state.next_attempt_at is not None:
            seconds = max(0, round(state.next_attempt_at - (time.time() if now is None else now)))
            wait = f" in {seconds} s" if seconds else ""
        return f"MLflow: {state.reason}; will retry{wait} (attempt {state.attempts + 1})"
    return f"MLflow: pending ({state.reason}); mirrors to {state.tracking_uri}"
