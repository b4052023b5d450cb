"""The run contract: every field a run may set, with its bounds, in one place (pydantic v2).

The CLI (``run`` flags and ``--file``), the UI's Train form and the submit service all validate
a request with ``check_request`` before anything is registered, so a bad value is refused once,
with the same message everywhere: the field, the value given, and what is allowed. The message
names the front-end control through ``control`` (``--batch-size`` on the command line, "Batch
size" in the UI) when the caller passes its own names.

Example:
    >>> schedule = check_schedule({"max_steps": 200, "batch_size": 64})
    >>> schedule["batch_size"]
    64
    >>> check_schedule({"batch_size": 0})
    Traceback (most recent call last):
    ...
    estimator_workbench.store.run_spec.RunSpecError: schedule.batch_size = 0 is out of range: it must be an integer from 1 to 65536.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, ValidationError

__all__ = ["MAX_BATCH_SIZE", "MAX_PROCESSES", "MAX_STEPS", "RUNNER_MEMORY_BYTES", "EarlyStoppingSettings",
           "MachineLimit", "RunConfigSettings", "RunSpecError", "Schedule", "check_num_processes",
           "check_parallel_runs", "check_request", "check_run_config", "check_schedule", "field_bounds",
           "machine_limit", "split_schedule_keys"]

MAX_STEPS = 10_000_000
MAX_BATCH_SIZE = 65_536
MAX_PROCESSES = 64
MAX_PREFLIGHT_TIMEOUT_S = 3600.0
MAX_STALL_TIMEOUT_S = 7 * 24 * 3600.0
# What one runner process takes, at least: four CPU runners of the bundled MLP measured 1.6 GB
# together (issue 24 item 9). The machine's memory divided by this caps processes at once.
RUNNER_MEMORY_BYTES = 400 * 2**20


class RunSpecError(ValueError):
    """A run request that breaks the contract; the message names field, value and allowed range."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=False)


class EarlyStoppingSettings(_Strict):
    """Stop training when ``metric`` has not improved by more than ``min_delta`` for ``patience``
    evaluations (the engine's ``stop_if_no_{decrease,increase}_hook``)."""

    metric: str = Field("loss", min_length=1, max_length=200)
    mode: Literal["min", "max"] | None = None
    patience: int = Field(3, ge=0, le=1_000_000)
    min_delta: float = Field(0.0, ge=0.0)


class Schedule(_Strict):
    """How a run is driven: steps, evaluation interval, early stopping, metrics, NaN policy."""

    max_steps: int | None = Field(None, ge=1, le=MAX_STEPS)
    steps: int | None = Field(None, ge=1, le=MAX_STEPS)
    eval_steps: int | None = Field(None, ge=1, le=MAX_STEPS)
    eval_every_steps: int | None = Field(None, ge=1, le=MAX_STEPS)
    metrics_every_n_steps: int | None = Field(None, ge=1, le=MAX_STEPS)
    batch_size: int | None = Field(None, ge=1, le=MAX_BATCH_SIZE)
    shuffle_seed: int | None = Field(None, ge=0, le=2**32 - 1)
    preflight: bool | None = None
    preflight_timeout: float | None = Field(None, gt=0, le=MAX_PREFLIGHT_TIMEOUT_S)
    early_stopping: EarlyStoppingSettings | None = None
    nan_policy: Literal["fail", "stop"] | None = None
    # A running run with no completed step for this long is shown 'stalled' ('warn', the default)
    # or failed by the launcher ('fail'); default 600 s (records.DEFAULT_STALL_TIMEOUT_S).
    stall_timeout_s: float | None = Field(None, gt=0, le=MAX_STALL_TIMEOUT_S)
    stall_action: Literal["warn", "fail"] | None = None
    # Mirror the finished run to MLflow ($WORKBENCH_MLFLOW_URI; on by default when that is set).
    mlflow: bool | None = None


class RunConfigSettings(_Strict):
    """The RunConfig arguments a run may set (model_dir is the run's own folder)."""

    tf_random_seed: int | None = Field(None, ge=0, le=2**31 - 1)
    save_summary_steps: int | None = Field(None, ge=0, le=MAX_STEPS)
    save_checkpoints_steps: int | None = Field(None, ge=1, le=MAX_STEPS)
    save_checkpoints_secs: float | None = Field(None, gt=0)
    keep_checkpoint_max: int | None = Field(None, ge=0, le=100_000)
    keep_checkpoint_every_n_hours: float | None = Field(None, gt=0)
    log_step_count_steps: int | None = Field(None, ge=1, le=MAX_STEPS)
    device: str | None = Field(None, max_length=50)
    precision: Literal["fp32", "bf16", "fp16", "32", "16-mixed", "bf16-mixed"] | None = None
    compile: bool | None = None


SCHEDULE_KEYS = tuple(Schedule.model_fields)


def field_bounds(model: type[BaseModel], name: str) -> tuple[Any, Any]:
    """``(low, high)`` of a field's ``ge``/``gt`` and ``le`` constraints (None where unbounded):
    the front ends read their input limits from here, so they cannot disagree with the contract.

    Example:
        >>> field_bounds(Schedule, "batch_size")
        (1, 65536)
    """
    field = model.model_fields[name]
    lo = hi = None
    for meta in field.metadata:
        lo = getattr(meta, "ge", None) if getattr(meta, "ge", None) is not None else lo
        lo = getattr(meta, "gt", None) if getattr(meta, "gt", None) is not None else lo
        hi = getattr(meta, "le", None) if getattr(meta, "le", None) is not None else hi
    return lo, hi


def _describe(model: type[BaseModel], loc: tuple[Any, ...]) -> str:
    """'an integer from 1 to 65536' for a field's type and bounds."""
    field = model.model_fields.get(str(loc[0])) if loc else None
    if field is None:
        return ""
    if len(loc) > 1 and loc[0] == "early_stopping":
        return _describe(EarlyStoppingSettings, loc[1:])
    lo = hi = None
    strict_lo = False
    for meta in field.metadata:
        lo = getattr(meta, "ge", lo)
        if getattr(meta, "gt", None) is not None:
            lo, strict_lo = meta.gt, True
        hi = getattr(meta, "le", hi)
    kind = "an integer" if "int" in str(field.annotation) else "a number"
    if lo is not None and hi is not None and not strict_lo:
        return f"{kind} from {lo} to {hi}"
    if lo is not None and hi is not None:
        return f"{kind} over {lo} and at most {hi}"
    if lo is not None:
        return f"{kind} {'over' if strict_lo else '>='} {lo}"
    return ""


def _refusal(prefix: str, model: type[BaseModel], exc: ValidationError, given: Mapping[str, Any],
             control: Mapping[str, str]) -> RunSpecError:
    err = exc.errors()[0]
    loc = tuple(err["loc"])
    field = ".".join(str(p) for p in loc)
    value: Any = given
    for part in loc:
        value = value.get(part) if isinstance(value, Mapping) else None
    where = control.get(field) or (f"{prefix} key {field!r}" if prefix.startswith("--") else f"{prefix}.{field}")
    if err["type"] == "extra_forbidden":
        allowed = list(model.model_fields) if len(loc) == 1 else list(EarlyStoppingSettings.model_fields)
        return RunSpecError(f"{where} is not a known setting; {prefix} takes {allowed}.")
    if err["type"] == "literal_error":
        return RunSpecError(f"{where} = {value!r} is not allowed: {err['msg'].replace('Input should be', 'it must be')}.")
    described = _describe(model, loc)
    if described:
        return RunSpecError(f"{where} = {value!r} is out of range: it must be {described}.")
    return RunSpecError(f"{where} = {value!r} is not valid: {err['msg']}.")


def split_schedule_keys(run_config: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(run_config, schedule)``: schedule keys given among RunConfig settings (the CLI's
    ``--config '{"batch_size": 64}'``) move to the schedule."""
    config = {k: v for k, v in run_config.items() if k not in SCHEDULE_KEYS}
    moved = {k: v for k, v in run_config.items() if k in SCHEDULE_KEYS}
    return config, moved


# Test hook: schedule keys a stub runner reads (comma-separated), passed through unchecked.
STUB_SCHEDULE_KEYS_ENV = "WORKBENCH_STUB_SCHEDULE_KEYS"


def check_schedule(schedule: Mapping[str, Any], control: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The schedule, validated; raises ``RunSpecError`` naming field, value and allowed range."""
    stub_keys = {k for k in os.environ.get(STUB_SCHEDULE_KEYS_ENV, "").split(",") if k}
    stub = {k: v for k, v in schedule.items() if k in stub_keys and k not in SCHEDULE_KEYS}
    try:
        model = Schedule.model_validate({k: v for k, v in schedule.items() if k not in stub})
    except ValidationError as exc:
        raise _refusal(control.get("schedule", "schedule") if control else "schedule", Schedule, exc,
                       schedule, control or {}) from None
    return model.model_dump(exclude_unset=True) | stub


def check_run_config(run_config: Mapping[str, Any], control: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The RunConfig settings, validated (unknown keys and bad values refused before a run exists)."""
    try:
        model = RunConfigSettings.model_validate(dict(run_config))
    except ValidationError as exc:
        raise _refusal(control.get("run_config", "run_config") if control else "run_config",
                       RunConfigSettings, exc, run_config, control or {}) from None
    return model.model_dump(exclude_unset=True)


class MachineLimit(NamedTuple):
    """How many runner processes this machine can hold at once, and why (``machine_limit``)."""

    processes: int
    reason: str


def machine_limit() -> MachineLimit:
    """The runner processes this machine can run at once: its CPU cores (those this process may
    use), and its memory over ``RUNNER_MEMORY_BYTES`` a runner; the smaller, with the reason.
    Runs on a Ray cluster (``WORKBENCH_RAY_ADDRESS``) are sized by the cluster: only
    ``MAX_PROCESSES`` applies.

    Example:
        >>> machine_limit().processes >= 1
        True
    """
    if os.environ.get("WORKBENCH_RAY_ADDRESS", "").strip():
        return MachineLimit(MAX_PROCESSES, "the Ray cluster places the processes")
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    import psutil

    memory = int(psutil.virtual_memory().total)
    by_memory = max(1, memory // RUNNER_MEMORY_BYTES)
    limit = max(1, min(cores, by_memory, MAX_PROCESSES))
    reason = (f"this machine has {cores} CPU core{'s' if cores != 1 else ''} and {memory / 2**30:.1f} GiB "
              f"of memory, room for {by_memory} runner{'s' if by_memory != 1 else ''} of about "
              f"{RUNNER_MEMORY_BYTES // 2**20} MiB")
    return MachineLimit(limit, reason)


def check_num_processes(value: Any, control: str = "num_processes") -> int:
    """A run's process count: an integer from 1 to ``MAX_PROCESSES``, and no more than the
    machine holds (``machine_limit``)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_PROCESSES:
        raise RunSpecError(f"{control} = {value!r} is out of range: it must be an integer from 1 to "
                           f"{MAX_PROCESSES}.")
    limit = machine_limit()
    if value > limit.processes:
        raise RunSpecError(f"{control} = {value} is more processes than this machine can run at once: at most "
                           f"{limit.processes} ({limit.reason}). Use {limit.processes} or fewer.")
    return value


def check_parallel_runs(value: Any, control: str = "parallel", processes_per_run: int = 1) -> int:
    """How many runs (of ``processes_per_run`` processes each) run at once: an integer >= 1 whose
    processes the machine holds (``machine_limit``); the rest wait in the queue.

    Example:
        >>> check_parallel_runs(1)
        1
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise RunSpecError(f"{control} = {value!r} is out of range: it must be an integer >= 1.")
    limit = machine_limit()
    most = max(1, limit.processes // max(1, processes_per_run))
    if value > most:
        each = f" of {processes_per_run} processes each" if processes_per_run > 1 else ""
        raise RunSpecError(f"{control} = {value} is more runs{each} than this machine can run at once: at most "
                           f"{most} ({limit.reason}). Use {most} or fewer; the other trials wait in the queue.")
    return value


def check_request(*, run_config: Mapping[str, Any], schedule: Mapping[str, Any], num_processes: Any = 1,
                  control: Mapping[str, str] | None = None) -> tuple[dict[str, Any], dict[str, Any], int]:
    """Validates the RunConfig, schedule and process count of a run request (schedule keys given
    in the RunConfig move to the schedule); returns them normalised."""
    control = control or {}
    config, moved = split_schedule_keys(run_config)
    checked_schedule = check_schedule({**moved, **schedule}, control)
    checked_config = check_run_config(config, control)
    processes = check_num_processes(num_processes, control.get("num_processes", "num_processes"))
    return checked_config, checked_schedule, processes
