"""What the registry stores about a run: ``RunRecord``, actions, statuses and their allowed
transitions, parent relations, run ids, and the ``run.json`` a runner reads."""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import secrets
import sqlite3
import time
from typing import Any

from estimator_workbench.store import paths

__all__ = ['ACTIONS', 'ALLOWED_TRANSITIONS', 'DEFAULT_STALL_TIMEOUT_S', 'FINISHED_STATUSES', 'IMPORT_ACTION', 'MODEL_ACTIONS', 'OWNED_STATUSES', 'PARENT_RELATIONS', 'RUN_ACTIONS', 'RUN_JSON_SCHEMA_VERSION', 'STALL_ACTIONS', 'STATUSES', 'SUMMARISED_ON_STATUS', 'TRAINING_ACTIONS', 'InvalidTransitionError', 'OwnershipLostError', 'RegistryError', 'RunNotFoundError', 'RunRecord', 'is_lower_better', 'new_run_id', 'run_spec']


# What `estimator-workbench run` (and the Train page) can start.
RUN_ACTIONS = ("train", "evaluate", "predict", "train_and_evaluate")


# A TensorFlow Estimator's checkpoint registered as a run (``estimator-workbench import-tf``; its
# ``checkpoint_path`` is the TF checkpoint it came from): ``execution.tf_import``.
IMPORT_ACTION = "import_tf"


ACTIONS = (*RUN_ACTIONS, IMPORT_ACTION)


TRAINING_ACTIONS = ("train", "train_and_evaluate")  # the ones that write checkpoints


# Runs whose model_dir holds a trained model: what evaluate, predict, compare and warm start use.
MODEL_ACTIONS = (*TRAINING_ACTIONS, IMPORT_ACTION)


STATUSES = ("queued", "running", "succeeded", "failed", "stopped", "cancelled", "lost")


FINISHED_STATUSES = ("succeeded", "failed", "stopped", "cancelled", "lost")


# Outcomes a launcher may record for a runner that was killed or died: ``set_status`` then builds
# the summary from the metrics file, as the runner could not (it does so for the other outcomes).
SUMMARISED_ON_STATUS = ("lost", "cancelled")


PARENT_RELATIONS = ("resume", "warm_start", "evaluate_from", "predict_from")


ALLOWED_TRANSITIONS: dict[str, tuple[str, ...]] = {
    "queued": ("running", "cancelled"),
    "running": ("succeeded", "failed", "stopped", "cancelled", "lost"),
    "lost": ("succeeded", "failed", "stopped", "cancelled", "queued"),
    "succeeded": ("queued",),
    "failed": ("queued",),
    "stopped": ("queued",),
    "cancelled": ("queued",),
}


RUN_JSON_SCHEMA_VERSION = 2  # 2: RunConfig precision as the engine names it (store.run_spec.migrate)


# Statuses in which the attempt named by ``RunRecord.attempt`` owns the run and may write to it:
# a runner marked ``lost`` that turns out alive still owns it until a resume queues a new attempt.
OWNED_STATUSES = ("running", "lost")


# Stalls (issue 14.6): a running run with no completed step for ``schedule['stall_timeout_s']``
# seconds is shown ``stalled`` (``stall_action`` 'warn') or failed by the launcher ('fail').
DEFAULT_STALL_TIMEOUT_S = 600.0
STALL_ACTIONS = ("warn", "fail")


class RunNotFoundError(LookupError):
    """No run with this id in the workspace."""


class InvalidTransitionError(ValueError):
    """A status change the state machine does not allow."""


class RegistryError(sqlite3.OperationalError):
    """The registry cannot do what was asked for a reason the user must act on (a full disk).

    A subclass of ``sqlite3.OperationalError`` so that callers that already tolerate an unreadable
    registry keep doing so; the message says what happened and how to fix it.
    """


class OwnershipLostError(RegistryError):
    """A runner's attempt no longer owns its run (it was resumed, cancelled or finished by another
    process): the runner must stop without writing anything more to the run."""


def new_run_id(now: float | None = None) -> str:
    """A fresh run id ``r-<yyyymmdd>-<6 hex>`` (ids are never taken from user text).

    Example:
        >>> new_run_id(0.0)[:11]
        'r-19700101-'
    """
    moment = _dt.datetime.fromtimestamp(time.time() if now is None else now, tz=_dt.timezone.utc)
    return f"r-{moment:%Y%m%d}-{secrets.token_hex(3)}"


def is_lower_better(name: str) -> bool:
    """Whether the best value of a metric is its minimum (names holding 'loss' or 'error')."""
    lowered = name.lower()
    return "loss" in lowered or "error" in lowered


@dataclasses.dataclass(frozen=True)
class RunRecord:
    """One run as the registry holds it (times are Unix seconds).

    ``summary`` maps ``'<split>/<name>'`` (e.g. ``'eval/accuracy'``) to
    ``{'last', 'last_step', 'best', 'best_step'}``.

    Example:
        >>> reg = RunRegistry(tmp_workspace)                                     # doctest: +SKIP
        >>> rec = reg.create_run(name="iris mlp", action="train", dataset={"name": "iris"},
        ...                      template={"name": "mlp", "code": "..."}, params={},
        ...                      run_config={})                                  # doctest: +SKIP
        >>> rec.status                                                           # doctest: +SKIP
        'queued'
    """

    run_id: str
    name: str
    action: str
    status: str
    dataset: dict[str, Any]
    dataset_fingerprint: str | None
    template_name: str | None
    template_code: str | None
    params: dict[str, Any]
    run_config: dict[str, Any]
    schedule: dict[str, Any]
    parent_run_id: str | None
    parent_relation: str | None
    checkpoint_path: str | None
    num_processes: int
    pid: int | None
    heartbeat_at: float | None
    created_at: float
    started_at: float | None
    finished_at: float | None
    error: str | None
    traceback: str | None
    summary: dict[str, dict[str, Any]]
    tags: tuple[str, ...]
    note: str
    attempt: int = 0  # the fencing token of the attempt that owns the run (1 for the first start)
    pid_started: float | None = None  # start of ``pid`` (guards.process_start_time), to tell a reused pid apart
    last_step: int | None = None  # the last completed step the runner reported, and when
    last_step_at: float | None = None
    heartbeat_uptime: float | None = None  # the heartbeat's ``guards.uptime`` (clock-step proof)
    owner: str | None = None  # who submitted it (``store.users``); None: registered before owners existed

    @property
    def stall_timeout_s(self) -> float:
        """Seconds without a completed step after which the running run counts as stalled."""
        value = self.schedule.get("stall_timeout_s")
        return DEFAULT_STALL_TIMEOUT_S if value is None else float(value)

    @property
    def stall_action(self) -> str:
        return str(self.schedule.get("stall_action") or "warn")

    def stalled_for(self, now: float | None = None) -> float | None:
        """Seconds since the last completed step (or the start, before the first one) when the
        run is running and that exceeds its ``stall_timeout_s``; None otherwise.

        Predict runs report no steps and are never judged stalled.

        Example:
            >>> rec.replace(status="running", last_step_at=0.0).stalled_for(now=601.0)  # doctest: +SKIP
            601.0
        """
        if self.status != "running" or self.action == "predict":
            return None
        since = self.last_step_at if self.last_step_at is not None else self.started_at
        if since is None:
            return None
        idle = (time.time() if now is None else now) - since
        return idle if idle > self.stall_timeout_s else None

    @property
    def display_status(self) -> str:
        """The status to show: ``stalled`` for a running run past its stall timeout, else ``status``."""
        return "stalled" if self.stalled_for() is not None else self.status

    @property
    def is_finished(self) -> bool:
        return self.status in FINISHED_STATUSES

    @property
    def is_active(self) -> bool:
        return self.status in ("queued", "running")

    @property
    def template(self) -> dict[str, Any]:
        return {"name": self.template_name, "code": self.template_code}

    def replace(self, **changes: Any) -> RunRecord:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["tags"] = list(self.tags)
        return out

    @classmethod
    def from_row(cls, row: Any) -> RunRecord:  # sqlite3.Row or registry_db.Row
        # A database of an older schema is migrated at its first write; reads before that (a
        # read-only workspace, a full disk) see the columns added since at their defaults.
        keys = row.keys()
        return cls(
            run_id=row["run_id"],
            name=row["name"],
            action=row["action"],
            status=row["status"],
            dataset=json.loads(row["dataset_json"]),
            dataset_fingerprint=row["dataset_fingerprint"],
            template_name=row["template_name"],
            template_code=row["template_code"],
            params=json.loads(row["params_json"]),
            run_config=json.loads(row["run_config_json"]),
            schedule=json.loads(row["schedule_json"]),
            parent_run_id=row["parent_run_id"],
            parent_relation=row["parent_relation"],
            checkpoint_path=row["checkpoint_path"],
            num_processes=row["num_processes"],
            pid=row["pid"],
            heartbeat_at=row["heartbeat_at"],
            created_at=row["created_at"],
            started_at=row["started_at"],
            finished_at=row["finished_at"],
            error=row["error"],
            traceback=row["traceback"],
            summary=json.loads(row["summary_json"]),
            tags=tuple(json.loads(row["tags_json"])),
            note=row["note"],
            attempt=row["attempt"] if "attempt" in keys else 0,
            pid_started=row["pid_started"] if "pid_started" in keys else None,
            last_step=row["last_step"] if "last_step" in keys else None,
            last_step_at=row["last_step_at"] if "last_step_at" in keys else None,
            heartbeat_uptime=row["heartbeat_uptime"] if "heartbeat_uptime" in keys else None,
            owner=row["owner"] if "owner" in keys else None,
        )


def run_spec(record: RunRecord) -> dict[str, Any]:
    """The content of ``run.json``: everything a runner needs to rebuild and execute the run (the
    registry writes it through ``store.run_spec.RunSpec``, which reads it back)."""
    return {
        "schema_version": RUN_JSON_SCHEMA_VERSION,
        "run_id": record.run_id,
        "name": record.name,
        "action": record.action,
        "dataset": record.dataset,
        "template": {"name": record.template_name, "code": record.template_code},
        "params": record.params,
        "run_config": record.run_config,
        "schedule": record.schedule,
        "parent_run_id": record.parent_run_id,
        "parent_relation": record.parent_relation,
        "checkpoint_path": record.checkpoint_path,
        "num_processes": record.num_processes,
        "created_at": record.created_at,
        "model_dir": paths.MODEL_DIR,
    }
