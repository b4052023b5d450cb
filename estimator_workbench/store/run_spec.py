"""The run contract: every field a run may set, with its bounds, in one place (pydantic v2).

``RunSpec`` is the whole contract: ``submit_run`` builds one, validated, and the registry writes it
as ``runs/<id>/run.json``; the runner reads it back with ``RunSpec.read`` (``model_validate_json``)
and uses its attributes. A ``run.json`` written by an older workbench is brought to the current
``schema_version`` in one place, ``migrate``. To add a setting, add a documented field to
``Schedule`` (how the run is driven), ``RunConfigSettings`` (the engine's ``RunConfig``) or
``RunSpec`` (what the run is); the front ends read its bounds with ``field_bounds``.

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

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from estimator_workbench.store import paths
from estimator_workbench.store.records import ACTIONS, PARENT_RELATIONS, RUN_JSON_SCHEMA_VERSION

__all__ = ["DEFAULT_PREFLIGHT_TIMEOUT_S", "ENGINE_ONLY_RUN_CONFIG", "MAX_BATCH_SIZE", "MAX_PROCESSES", "MAX_STEPS", "PRECISION_ALIASES",
           "RUNNER_MEMORY_BYTES", "RUN_JSON_SCHEMA_VERSION", "EarlyStoppingSettings", "MachineLimit",
           "RunConfigSettings", "RunSpec", "RunSpecError", "Schedule", "SessionConfigSettings",
           "TemplateSnapshot", "check_num_processes", "check_parallel_runs", "check_request",
           "check_run_config", "check_schedule", "field_bounds", "machine_limit", "migrate",
           "split_schedule_keys"]

MAX_STEPS = 10_000_000
MAX_BATCH_SIZE = 65_536
MAX_PROCESSES = 64
MAX_PREFLIGHT_TIMEOUT_S = 3600.0
DEFAULT_PREFLIGHT_TIMEOUT_S = 60.0  # a run's pre-flight check, unless its schedule says otherwise
MAX_STALL_TIMEOUT_S = 7 * 24 * 3600.0
# What one runner process takes, at least: four CPU runners of the bundled MLP measured 1.6 GB
# together (issue 24 item 9). The machine's memory divided by this caps processes at once.
RUNNER_MEMORY_BYTES = 400 * 2**20


class RunSpecError(ValueError):
    """A run request that breaks the contract; the message names field, value and allowed range."""


class _Strict(BaseModel):
    # RunSpec.model_dir is the run's field, not pydantic's: pydantic 2.0 (the declared minimum)
    # refuses fields named model_* unless the protected namespaces are cleared; later ones warn.
    model_config = ConfigDict(extra="forbid", strict=False, protected_namespaces=())


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

    @property
    def train_until(self) -> int | None:
        """The global step training ends at: ``max_steps``, else ``steps`` read as the same
        target (so a resumed run finishes the original budget instead of adding to it)."""
        return self.max_steps if self.max_steps is not None else self.steps


class SessionConfigSettings(_Strict):
    """TF's ``ConfigProto`` thread settings, the part of ``session_config`` that acts on torch
    (0 lets torch choose, as in TF)."""

    intra_op_parallelism_threads: int | None = Field(None, ge=0, le=4096)
    inter_op_parallelism_threads: int | None = Field(None, ge=0, le=4096)


# ``ee.RunConfig`` arguments a run does not set: model_dir is the run's own folder, the run's
# process count (not a strategy) makes it distributed, and a device_fn is code, not JSON.
ENGINE_ONLY_RUN_CONFIG = ("model_dir", "train_distribute", "eval_distribute", "device_fn")


class RunConfigSettings(_Strict):
    """The ``ee.RunConfig`` arguments a run may set: every one of the engine's but
    ``ENGINE_ONLY_RUN_CONFIG``, with the values the engine accepts (a test holds both directions).
    ``to_engine`` gives the keyword arguments, only those the run set.

    Example:
        >>> RunConfigSettings(save_checkpoints_steps=100, num_threads=2).to_engine()
        {'save_checkpoints_steps': 100, 'num_threads': 2}
    """

    tf_random_seed: int | None = Field(None, ge=0, le=2**31 - 1)
    save_summary_steps: int | None = Field(None, ge=0, le=MAX_STEPS)
    save_checkpoints_steps: int | None = Field(None, ge=1, le=MAX_STEPS)
    save_checkpoints_secs: float | None = Field(None, gt=0)
    keep_checkpoint_max: int | None = Field(None, ge=0, le=100_000)
    keep_checkpoint_every_n_hours: float | None = Field(None, gt=0)
    log_step_count_steps: int | None = Field(None, ge=1, le=MAX_STEPS)
    # 'auto' (CUDA when there is one), 'cpu', 'cuda', 'cuda:N' or 'mps'.
    device: str | None = Field(None, max_length=50, pattern=r"^(auto|cpu|cuda|mps|cuda:[0-9]{1,4})$")
    # Autocast in the model_fn; older run.json files' 'fp32'/'bf16'/'fp16' are migrated (``migrate``).
    precision: Literal["32", "16-mixed", "bf16-mixed"] | None = None
    compile: bool | None = None
    # torch's intra-op threads; None: picked from the cores this process may use.
    num_threads: int | None = Field(None, ge=1, le=4096)
    progress_bar: bool | None = None
    session_config: SessionConfigSettings | None = None
    # TF's session and graph settings: accepted so TF code carries over; no effect on PyTorch.
    session_creation_timeout_secs: float | None = Field(None, gt=0)
    protocol: Literal["grpc", "grpc+verbs"] | None = None
    experimental_max_worker_delay_secs: int | None = Field(None, ge=0)
    checkpoint_save_graph_def: bool | None = None

    @model_validator(mode="after")
    def _one_checkpoint_trigger(self) -> RunConfigSettings:
        if self.save_checkpoints_steps is not None and self.save_checkpoints_secs is not None:
            raise ValueError("save_checkpoints_steps and save_checkpoints_secs cannot both be set "
                             f"(given {self.save_checkpoints_steps!r} and {self.save_checkpoints_secs!r}); "
                             "keep one")
        return self

    def to_engine(self) -> dict[str, Any]:
        """The ``ee.RunConfig`` keyword arguments the run set (an explicit None is kept: TF's
        ``save_checkpoints_secs=None`` turns time-based checkpoints off)."""
        return self.model_dump(exclude_unset=True)


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


def _field_model(model: type[BaseModel], loc: tuple[Any, ...]) -> tuple[type[BaseModel], tuple[Any, ...]]:
    """The (sub-)model holding the field at ``loc`` and the field's place in it."""
    while len(loc) > 1:
        field = model.model_fields.get(str(loc[0]))
        inner = next((t for t in getattr(field.annotation, "__args__", (field.annotation,))
                      if isinstance(t, type) and issubclass(t, BaseModel)), None) if field else None
        if inner is None:
            break
        model, loc = inner, loc[1:]
    return model, loc


def _describe(model: type[BaseModel], loc: tuple[Any, ...]) -> str:
    """'an integer from 1 to 65536' for a field's type and bounds."""
    model, loc = _field_model(model, loc)
    field = model.model_fields.get(str(loc[0])) if loc else None
    if field is None:
        return ""
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


def _problem(prefix: str, model: type[BaseModel], err: Mapping[str, Any], given: Any,
             control: Mapping[str, str]) -> str:
    """One validation error as a sentence: where (the front end's control), the value, what is allowed."""
    loc = tuple(err["loc"])
    field = ".".join(str(p) for p in loc)
    value: Any = given
    for part in loc:
        value = value.get(part) if isinstance(value, Mapping) else None
    if not loc:
        where = prefix
    else:
        where = control.get(field) or (f"{prefix} key {field!r}" if prefix.startswith("--") else f"{prefix}.{field}")
    if err["type"] == "extra_forbidden":
        inner, _ = _field_model(model, loc)
        container = ".".join(str(p) for p in loc[:-1])
        owner = f"{prefix}.{container}" if container else prefix
        return f"{where} is not a known setting; {owner} takes {list(inner.model_fields)}."
    if err["type"] == "literal_error":
        return f"{where} = {value!r} is not allowed: {err['msg'].replace('Input should be', 'it must be')}."
    if err["type"] == "string_pattern_mismatch" and loc[-1:] == ("device",):
        return f"{where} = {value!r} is not allowed: it must be 'auto', 'cpu', 'cuda', 'cuda:N' or 'mps'."
    if err["type"] == "value_error":  # a model's own check (its message says what is wrong)
        message = str(err["msg"]).removeprefix("Value error, ").rstrip(".")
        return f"{where}: {message}." if loc or not prefix.endswith(".json") else f"{message}."
    described = _describe(model, loc)
    if described:
        return f"{where} = {value!r} is out of range: it must be {described}."
    return f"{where} = {value!r} is not valid: {err['msg']}."


def _refusal(prefix: str, model: type[BaseModel], exc: ValidationError, given: Mapping[str, Any],
             control: Mapping[str, str]) -> RunSpecError:
    """Every problem of ``exc`` in one ``RunSpecError``, one line each (skorch's collect-all rule)."""
    return RunSpecError("\n".join(dict.fromkeys(_problem(prefix, model, err, given, control)
                                                  for err in exc.errors())))


def split_schedule_keys(run_config: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(run_config, schedule)``: schedule keys given among RunConfig settings (the CLI's
    ``--config '{"batch_size": 64}'``) move to the schedule."""
    config = {k: v for k, v in run_config.items() if k not in SCHEDULE_KEYS}
    moved = {k: v for k, v in run_config.items() if k in SCHEDULE_KEYS}
    return config, moved


def check_schedule(schedule: Mapping[str, Any], control: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The schedule, validated; raises ``RunSpecError`` naming field, value and allowed range."""
    try:
        model = Schedule.model_validate(dict(schedule))
    except ValidationError as exc:
        raise _refusal(control.get("schedule", "schedule") if control else "schedule", Schedule, exc,
                       schedule, control or {}) from None
    return model.model_dump(exclude_unset=True)


def check_run_config(run_config: Mapping[str, Any], control: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The RunConfig settings, validated (unknown keys and bad values refused before a run exists)."""
    try:
        model = RunConfigSettings.model_validate(dict(run_config))
    except ValidationError as exc:
        raise _refusal(control.get("run_config", "run_config") if control else "run_config",
                       RunConfigSettings, exc, run_config, control or {}) from None
    return model.model_dump(exclude_unset=True)


class TemplateSnapshot(_Strict):
    """The template a run runs: its name and a snapshot of its source (never re-read from disk)."""

    name: str | None = None
    code: str | None = None


# Precision names the contract took before schema_version 2, as ``ee.RunConfig`` names them
# (Lightning's 'bf16' -> 'bf16-mixed' rule; 'fp16' was autocast to float16, '16-mixed').
PRECISION_ALIASES = {"fp32": "32", "bf16": "bf16-mixed", "fp16": "16-mixed"}
# Schedule keys that run.json files written before schema_version 1 kept inside run_config.
_LEGACY_SCHEDULE_KEYS = ("max_steps", "steps", "eval_steps", "eval_every_steps", "metrics_every_n_steps",
                         "batch_size", "shuffle_seed", "preflight", "preflight_timeout")


def migrate(data: Mapping[str, Any], source: str = "run.json") -> dict[str, Any]:
    """A ``run.json`` dict of any ``schema_version`` brought to ``RUN_JSON_SCHEMA_VERSION``; the one
    place older files are read. A newer version than this workbench knows is refused.

    - version 0 (no ``schema_version``): schedule keys kept in ``run_config`` move to ``schedule``
      (a value already in ``schedule`` wins) and ``steps`` becomes ``max_steps``;
    - version 1: ``run_config.precision`` 'fp32'/'bf16'/'fp16' becomes the engine's '32'/'bf16-mixed'/'16-mixed'.

    Example:
        >>> migrate({"run_config": {"steps": 5, "precision": "bf16"}})["schedule"]
        {'max_steps': 5}
    """
    out = dict(data)
    version = out.get("schema_version", 0)
    if not isinstance(version, int) or isinstance(version, bool) or version < 0:
        raise ValueError(f"{source}: schema_version must be a whole number >= 0, given {version!r}.")
    if version > RUN_JSON_SCHEMA_VERSION:
        raise ValueError(f"{source} has schema_version {version}, newer than this workbench reads "
                         f"({RUN_JSON_SCHEMA_VERSION}): upgrade estimator-workbench to run it.")
    if version < 1:
        config = dict(out.get("run_config") or {})
        schedule = {k: config.pop(k) for k in _LEGACY_SCHEDULE_KEYS if k in config}
        schedule.update(out.get("schedule") or {})
        if schedule.get("max_steps") is None and schedule.get("steps") is not None:
            schedule["max_steps"] = schedule.pop("steps")
        out["run_config"], out["schedule"] = config, schedule
    if version < 2 and isinstance(out.get("run_config"), Mapping):
        config = dict(out["run_config"])
        if config.get("precision") in PRECISION_ALIASES:
            config["precision"] = PRECISION_ALIASES[config["precision"]]
        out["run_config"] = config
    out["schema_version"] = RUN_JSON_SCHEMA_VERSION
    return out


class RunSpec(_Strict):
    """A run, as ``submit_run`` validated it and the runner executes it (``runs/<id>/run.json``).

    Attributes:
        schema_version: the run.json format (``RUN_JSON_SCHEMA_VERSION``; older ones: ``migrate``).
        run_id: given by the registry (None before the run is registered).
        name: a display name (free text, never used in paths).
        action: one of ``ACTIONS``.
        dataset: a ``DatasetSpec.to_dict()`` plus its ``fingerprint``.
        template: the template's name and a snapshot of its code.
        params: the model_fn's params, checked against the template's PARAMS by ``submit_run``.
        run_config: the engine's ``RunConfig`` settings (``RunConfigSettings``).
        schedule: how the run is driven (``Schedule``).
        parent_run_id / parent_relation: the run this one comes from, and how (``PARENT_RELATIONS``).
        checkpoint_path: the checkpoint to evaluate/predict/warm-start from, or the TF checkpoint
            an ``import_tf`` run imports.
        num_processes: processes to launch (``> 1`` runs under ``torch.distributed.run``).
        created_at: Unix seconds, given by the registry.
        model_dir: the Estimator's model_dir, relative to the run folder.

    Example:
        >>> spec = RunSpec(action="train", template={"name": "t", "code": "def model_fn(features): ..."},
        ...                schedule={"max_steps": 5})
        >>> spec.schedule.max_steps, spec.run_config.to_engine()
        (5, {})
        >>> RunSpec.model_validate_json(spec.to_json()) == spec
        True
    """

    schema_version: int = RUN_JSON_SCHEMA_VERSION
    run_id: str | None = None
    name: str = ""
    action: Literal[ACTIONS] = "train"  # type: ignore[valid-type]
    dataset: dict[str, Any] = Field(default_factory=dict)
    template: TemplateSnapshot = Field(default_factory=lambda: TemplateSnapshot())
    params: dict[str, Any] = Field(default_factory=dict)
    run_config: RunConfigSettings = Field(default_factory=lambda: RunConfigSettings.model_validate({}))
    schedule: Schedule = Field(default_factory=lambda: Schedule.model_validate({}))
    parent_run_id: str | None = None
    parent_relation: Literal[PARENT_RELATIONS] | None = None  # type: ignore[valid-type]
    checkpoint_path: str | None = None
    num_processes: int = Field(1, ge=1, le=MAX_PROCESSES)
    created_at: float | None = None
    model_dir: str = paths.MODEL_DIR

    @model_validator(mode="before")
    @classmethod
    def _migrate(cls, data: Any) -> Any:
        return migrate(data) if isinstance(data, Mapping) else data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: str = "run.json") -> RunSpec:
        """``data`` (a run.json dict of any version) validated; ``RunSpecError`` names every problem."""
        try:
            return cls.model_validate(dict(data))
        except ValidationError as exc:
            raise _refusal(source, cls, exc, data, {}) from None

    @classmethod
    def read(cls, path: str | os.PathLike[str]) -> RunSpec:
        """The ``run.json`` at ``path``, migrated and validated (ValueError naming the file)."""
        text = Path(path).read_text(encoding="utf-8")
        try:
            return cls.model_validate_json(text)
        except ValidationError as exc:
            try:
                given = json.loads(text)
            except ValueError:
                given = {}
            raise RunSpecError(f"{path} is not a valid run.json:\n{_refusal('run.json', cls, exc, given, {})}") from None

    def to_json(self) -> str:
        """The ``run.json`` text: the settings the run set (an unset RunConfig setting keeps the
        engine's default), indented, keys sorted."""
        return json.dumps(self.model_dump(mode="json", exclude_unset=True) | {"schema_version": self.schema_version},
                          indent=2, sort_keys=True)


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
    problems: list[str] = []

    def checked(check: Any, *args: Any) -> Any:
        try:
            return check(*args)
        except RunSpecError as exc:
            problems.append(str(exc))  # every part is checked: one message names every problem
            return None

    checked_schedule = checked(check_schedule, {**moved, **schedule}, control)
    checked_config = checked(check_run_config, config, control)
    processes = checked(check_num_processes, num_processes, control.get("num_processes", "num_processes"))
    if problems:
        raise RunSpecError("\n".join(problems))
    return checked_config, checked_schedule, processes
