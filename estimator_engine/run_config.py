"""``RunConfig``: how an Estimator runs (TF's ``run_config.py``, the fields that mean something on PyTorch).

Where a process stands in a cluster comes from one of two places:

* ``TF_CONFIG`` (the JSON a TFJob / Kubernetes or a TF launcher sets), read when the config is
  built, with TF's rules, messages and ordering (``ClusterSpec`` below, ``_parse_tf_config``);
* otherwise torchrun's ``WORLD_SIZE`` / ``RANK``, read when asked (rank 0 is the chief, rank r the
  worker r - 1, as TF's global ids order them).

``ee.distribute`` turns either into a ``torch.distributed`` process group.
"""

from __future__ import annotations

import contextvars
import dataclasses
import json
import logging
import numbers
import os
from collections.abc import Mapping
from typing import Any

import torch

from estimator_engine._fn_args import fn_args

__all__ = [
    "ClusterSpec",
    "RunConfig",
    "TaskType",
    "apply_thread_settings",
    "available_cores",
    "tf_config_process_group",
    "thread_settings",
    "usable_cores",
]


class TaskType:
    """TF's task type names, as ``RunConfig.task_type`` reports them."""

    MASTER = "master"
    PS = "ps"
    WORKER = "worker"
    CHIEF = "chief"
    EVALUATOR = "evaluator"


class ClusterSpec(dict):
    """TF's ``tf.train.ClusterSpec`` as a plain ``{job: [address, ...]}`` dict with its read methods.

    Example:
        >>> spec = ClusterSpec({"chief": ["host0:2222"], "worker": ["host1:2222", "host2:2222"]})
        >>> spec.jobs, spec.num_tasks("worker"), spec.task_address("worker", 1)
        (['chief', 'worker'], 2, 'host2:2222')
        >>> spec == {"chief": ["host0:2222"], "worker": ["host1:2222", "host2:2222"]}
        True
    """

    def __init__(self, cluster: Mapping[str, Any] | None = None) -> None:
        cluster = cluster or {}
        if not isinstance(cluster, Mapping):
            raise TypeError(f'The "cluster" in TF_CONFIG must be a dict of job name -> list of addresses, '
                            f"given: {cluster!r}")
        jobs = {}
        for job, tasks in cluster.items():
            if isinstance(tasks, Mapping):  # TF's sparse form {index: address}
                tasks = [tasks[i] for i in sorted(tasks, key=int)]
            if isinstance(tasks, str) or not all(isinstance(t, str) for t in tasks):
                raise TypeError(f'The "cluster" in TF_CONFIG must map job {job!r} to a list of '
                                f'"host:port" addresses, given: {tasks!r}')
            jobs[str(job)] = list(tasks)
        super().__init__(jobs)

    @property
    def jobs(self) -> list[str]:
        return list(self)

    def job_tasks(self, job_name: str) -> list[str]:
        return list(self[job_name])

    def num_tasks(self, job_name: str) -> int:
        return len(self[job_name])

    def task_address(self, job_name: str, task_index: int) -> str:
        return self[job_name][task_index]

    def as_dict(self) -> dict[str, list[str]]:
        return {job: list(tasks) for job, tasks in self.items()}

    def __repr__(self) -> str:
        return f"ClusterSpec({self.as_dict()!r})"

    def __hash__(self) -> int:  # type: ignore[override]  # a RunConfig holding one stays hashable
        return hash(tuple((job, tuple(tasks)) for job, tasks in self.items()))


_log = logging.getLogger("estimator_engine")

_DEFAULT = object()  # "not passed", as distinct from an explicit None
_DEFAULT_SAVE_CHECKPOINTS_SECS = 600

# TF's arguments that configure its sessions and graphs: accepted so that TF code constructs its
# RunConfig unchanged and validated with TF's rules. Only session_config's thread settings act on
# PyTorch; a warning names the others when one differs from TF's default.
TF_SESSION_ARGUMENTS = {
    "session_config": None, "session_creation_timeout_secs": 7200, "device_fn": None,
    "protocol": None, "experimental_max_worker_delay_secs": None, "checkpoint_save_graph_def": True,
}
THREAD_KEYS = ("intra_op_parallelism_threads", "inter_op_parallelism_threads")
_REPLACEABLE = (
    "model_dir", "tf_random_seed", "save_summary_steps", "save_checkpoints_steps",
    "save_checkpoints_secs", "keep_checkpoint_max", "keep_checkpoint_every_n_hours",
    "log_step_count_steps", "train_distribute", "eval_distribute", "device", "precision",
    "compile", "num_threads", "progress_bar", *TF_SESSION_ARGUMENTS,
)
_PRECISIONS = ("32", "16-mixed", "bf16-mixed")
_PROTOCOLS = (None, "grpc", "grpc+verbs")
_TRAINING_TASKS = (TaskType.CHIEF, TaskType.MASTER, TaskType.WORKER)


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


# -- TF_CONFIG ----------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _ClusterSettings:
    """What TF_CONFIG says about this process (TF's ``_init_distributed_setting_from_environment_var``)."""

    from_cluster: bool = False  # TF_CONFIG named a cluster (an evaluator's cluster_spec is still {})
    cluster_spec: ClusterSpec = dataclasses.field(default_factory=ClusterSpec)
    task_type: str = TaskType.WORKER
    task_id: int = 0
    master: str = ""
    evaluation_master: str = ""
    is_chief: bool = True
    num_worker_replicas: int = 1
    num_ps_replicas: int = 0
    global_id_in_cluster: int | None = 0
    service: dict[str, Any] | None = None
    model_dir: str | None = None

    def process_group_environment(self) -> dict[str, str] | None:
        """torch.distributed's variables for this task, or None when it does not train data-parallel.

        The chief (or legacy master) is rank 0 and worker ``i`` is rank ``i + 1``: TF's global id
        order over the tasks that train. The chief's address is the rendezvous (MASTER_ADDR/PORT);
        LOCAL_RANK counts the training tasks before this one on the same host.
        """
        if not self.from_cluster or self.task_type not in _TRAINING_TASKS:
            return None
        spec = self.cluster_spec
        chief_type = TaskType.MASTER if TaskType.MASTER in spec else TaskType.CHIEF
        members = [spec[chief_type][0], *spec.get(TaskType.WORKER, [])]
        rank = 0 if self.task_type == chief_type else 1 + self.task_id
        host, port = _split_address(members[0])
        my_host = _split_address(members[rank])[0]
        same_host = [i for i, address in enumerate(members) if _split_address(address)[0] == my_host]
        return {"MASTER_ADDR": host, "MASTER_PORT": port, "RANK": str(rank),
                "WORLD_SIZE": str(len(members)), "LOCAL_RANK": str(same_host.index(rank)),
                "LOCAL_WORLD_SIZE": str(len(same_host))}


def _split_address(address: str) -> tuple[str, str]:
    """``'host:port'`` (or ``'[v6]:port'``) -> (host, port), with a message naming TF_CONFIG when malformed."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f'Address {address!r} in the "cluster" of TF_CONFIG must be "host:port"; '
                         "data-parallel training uses the chief's address as its rendezvous.")
    return host.strip("[]"), port


def _validate_task(cluster: ClusterSpec, task_env: Mapping[str, Any], chief_type: str) -> tuple[str, int]:
    """TF's ``_validate_task_type_and_task_id``, with its messages."""
    if chief_type not in cluster:
        raise ValueError(f'If "cluster" is set in TF_CONFIG, it must have one "{chief_type}" node.')
    if len(cluster[chief_type]) > 1:
        raise ValueError(f'The "cluster" in TF_CONFIG must have only one "{chief_type}" node.')
    task_type, task_id = task_env.get("type"), task_env.get("index")
    if not task_type:
        raise ValueError('If "cluster" is set in TF_CONFIG, task type must be set.')
    if task_id is None:
        raise ValueError('If "cluster" is set in TF_CONFIG, task index must be set.')
    task_id = int(task_id)
    if task_id < 0:
        raise ValueError("Task index must be non-negative number.")
    if task_type == TaskType.EVALUATOR:  # not part of the training cluster: no upper bound
        return task_type, task_id
    if task_type not in cluster:
        raise ValueError(f"{task_type} is not a valid task_type in the cluster_spec:\n{cluster}\n\n"
                         "Note that these values may be coming from the TF_CONFIG environment variable.")
    if not 0 <= task_id < len(cluster[task_type]):
        raise ValueError(f"{task_id} is not a valid task_id for task_type {task_type} in the cluster_spec:\n"
                         f"{cluster}\n\nNote that these values may be coming from the TF_CONFIG "
                         "environment variable.")
    return task_type, task_id


def _global_id(cluster: ClusterSpec, task_type: str, task_id: int, chief_type: str) -> int:
    """TF's ordering: the chief first, the other jobs alphabetically, ``ps`` last."""
    ordered = [chief_type, *(t for t in sorted(cluster) if t not in (chief_type, TaskType.PS))]
    if TaskType.PS in cluster:
        ordered.append(TaskType.PS)
    next_id = 0
    for job in ordered:
        if job == task_type:
            return next_id + task_id
        next_id += len(cluster[job])
    raise RuntimeError(f"Internal Error: `task_type` ({task_type}) is not in cluster_spec ({cluster}).")


def _session_master(cluster: ClusterSpec, task_type: str, task_id: int, tf_config: Mapping[str, Any]) -> str:
    if "session_master" in tf_config:
        return tf_config["session_master"]
    if len(cluster) == 1 and len(next(iter(cluster.values()))) == 1:
        return ""  # a single node runs locally
    return "grpc://" + cluster[task_type][task_id]


def _parse_tf_config(text: str | None) -> _ClusterSettings:
    """The cluster settings of the TF_CONFIG JSON ``text`` (None or empty: a local run), as TF reads them."""
    try:
        tf_config = json.loads(text or "{}")
    except json.JSONDecodeError as error:
        raise ValueError(f"TF_CONFIG must be a JSON object, given {text!r:.200}: {error}") from None
    if not isinstance(tf_config, dict):
        raise ValueError(f"TF_CONFIG must be a JSON object, given: {text!r:.200}")
    service = tf_config.get("service")
    if service is not None and not isinstance(service, dict):
        raise TypeError(f'If "service" is set in TF_CONFIG, it must be a dict. Given {type(service)}')
    model_dir = tf_config.get("model_dir")
    if model_dir == "":
        raise ValueError("model_dir in TF_CONFIG should be non-empty.")
    cluster = ClusterSpec(tf_config.get("cluster") or {})
    task_env = tf_config.get("task") or {}
    if not cluster:  # local mode
        task_type, task_id = task_env.get("type", TaskType.WORKER), int(task_env.get("index", 0))
        if task_type != TaskType.WORKER:
            raise ValueError('If "cluster" is not set in TF_CONFIG, task type must be WORKER.')
        if task_id != 0:
            raise ValueError('If "cluster" is not set in TF_CONFIG, task index must be 0.')
        return _ClusterSettings(master=tf_config.get("session_master", ""),
                                evaluation_master=tf_config.get("eval_session_master", ""),
                                service=service, model_dir=model_dir)
    if TaskType.MASTER in cluster:  # TF's legacy cluster with a "master" job instead of "chief"
        if TaskType.CHIEF in cluster:
            raise ValueError("If `master` node exists in `cluster`, job `chief` is not supported.")
        task_type, task_id = _validate_task(cluster, task_env, TaskType.MASTER)
        if task_type == TaskType.EVALUATOR:
            raise ValueError("If `master` node exists in `cluster`, task_type `evaluator` is not supported.")
        chief_type = TaskType.MASTER
    else:
        task_type, task_id = _validate_task(cluster, task_env, TaskType.CHIEF)
        chief_type = TaskType.CHIEF
    evaluation_master = tf_config.get("eval_session_master", "") if task_type == TaskType.EVALUATOR else ""
    if task_type == TaskType.EVALUATOR:  # not part of the training cluster
        return _ClusterSettings(from_cluster=True, task_type=task_type, task_id=task_id,
                                evaluation_master=evaluation_master, is_chief=False,
                                num_worker_replicas=0, global_id_in_cluster=None,
                                service=service, model_dir=model_dir)
    return _ClusterSettings(
        from_cluster=True, cluster_spec=cluster, task_type=task_type, task_id=task_id,
        master=_session_master(cluster, task_type, task_id, tf_config), evaluation_master=evaluation_master,
        is_chief=task_type == chief_type,
        num_worker_replicas=len(cluster.get(TaskType.WORKER, [])) + len(cluster[chief_type]),
        num_ps_replicas=len(cluster.get(TaskType.PS, [])),
        global_id_in_cluster=_global_id(cluster, task_type, task_id, chief_type),
        service=service, model_dir=model_dir)


def tf_config_process_group() -> dict[str, str] | None:
    """torch.distributed's variables for this process from ``TF_CONFIG``; None when it names no cluster
    or this task does not train (evaluator, ps)."""
    return _parse_tf_config(os.environ.get("TF_CONFIG")).process_group_environment()


# -- threads ------------------------------------------------------------------------------------


def available_cores() -> int:
    """The CPU cores this process may run on (its affinity mask; ``os.cpu_count()`` where there is none)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def _session_value(session_config: Any, key: str) -> Any:
    if session_config is None:
        return None
    if isinstance(session_config, Mapping):
        return session_config.get(key)
    return getattr(session_config, key, None)


def _session_fields(session_config: Any) -> set[str] | None:
    """The names a session_config sets, where they can be listed (dict, protobuf message, plain object)."""
    if isinstance(session_config, Mapping):
        return set(session_config)
    if hasattr(session_config, "ListFields"):  # a tf.compat.v1.ConfigProto
        return {field.name for field, _ in session_config.ListFields()}
    if hasattr(session_config, "__dict__"):
        return set(vars(session_config))
    return None


def thread_settings(config: RunConfig) -> tuple[int | None, int | None]:
    """(intra-op, inter-op) thread counts ``config`` asks for; None where it leaves the choice to us.

    ``num_threads`` wins over session_config's ``intra_op_parallelism_threads``; TF's 0 means "not set".
    """
    intra = config.num_threads or _session_value(config.session_config, THREAD_KEYS[0]) or None
    inter = _session_value(config.session_config, THREAD_KEYS[1]) or None
    return intra, inter


def usable_cores(local_processes: int = 1) -> int:
    """Cores each of ``local_processes`` processes of this host can use now: the affinity mask's cores,
    less the share of them other work keeps busy (the 1-minute load average beyond these processes,
    scaled from the whole host to the mask), divided among the processes; at least 1.

    On an idle 2-core machine that is 2; with 6 other runnable processes it is 1, where a second
    intra-op thread only waits for a core (a tiny canned model ran 7-20x slower with 2 threads).
    """
    cores = available_cores()
    try:
        busy = max(0.0, os.getloadavg()[0] - local_processes) * cores / max(cores, os.cpu_count() or cores)
    except (AttributeError, OSError):  # no load average on this platform
        busy = 0.0
    return max(1, round(cores - busy) // max(1, local_processes))


_TORCH_DEFAULT_THREADS = torch.get_num_threads()  # before anything here changed it
_chosen_threads: list[int] = []  # the intra-op count apply_thread_settings chose last (none yet)
_interop_warned: set[int] = set()


def apply_thread_settings(config: RunConfig) -> int:
    """Sets torch's process-wide thread counts for a train/evaluate/predict call; returns the intra-op count.

    What the config asks for (``num_threads``, session_config's thread settings) is applied.
    Otherwise, unless ``OMP_NUM_THREADS`` (the user's, or torchrun's) or a direct
    ``torch.set_num_threads`` call already chose, the intra-op count is torch's default capped at
    ``usable_cores()`` for the processes of a data-parallel run on this host.
    """
    intra, inter = thread_settings(config)
    current = torch.get_num_threads()
    chosen_by_us = current == _TORCH_DEFAULT_THREADS or current in _chosen_threads[-1:]
    if intra is None and "OMP_NUM_THREADS" not in os.environ and chosen_by_us:
        local_processes = int(os.environ.get("LOCAL_WORLD_SIZE") or config._local_world_size())
        intra = min(_TORCH_DEFAULT_THREADS, usable_cores(local_processes))
    if intra is not None and current != intra:
        _log.info("torch intra-op threads: %d (were %d).", intra, current)
        torch.set_num_threads(intra)
        _chosen_threads[:] = [intra]
    if inter is not None and torch.get_num_interop_threads() != inter:
        try:
            torch.set_num_interop_threads(inter)
        except RuntimeError:  # torch takes it once, before any inter-op parallel work
            if inter not in _interop_warned:
                _interop_warned.add(inter)
                _log.warning("session_config asks for inter_op_parallelism_threads=%d, but torch already "
                             "runs %d inter-op threads and allows the number to be set only once, before "
                             "any parallel work: call torch.set_num_interop_threads(%d) at the start of "
                             "the process.", inter, torch.get_num_interop_threads(), inter)
    return torch.get_num_threads()


class ThreadScope:
    """Applies a config's thread counts for the span of a call, then puts the caller's count back.

    torch's intra-op thread count is process-wide: a ``train()`` that lowered it for a busy machine
    must not leave the notebook kernel or script that called it running on fewer threads. Reusable:
    ``predict`` enters it once per batch, since its caller's code runs between two batches.

    Example:
        >>> with ThreadScope(RunConfig(num_threads=1)):
        ...     torch.get_num_threads()
        1
    """

    __slots__ = ("_callers", "_config")

    def __init__(self, config: RunConfig) -> None:
        self._config = config
        self._callers: list[int] = []

    def __enter__(self) -> int:
        self._callers.append(torch.get_num_threads())
        return apply_thread_settings(self._config)

    def __exit__(self, *exc_info: Any) -> None:
        caller = self._callers.pop()
        if torch.get_num_threads() != caller:
            torch.set_num_threads(caller)


# -- RunConfig ----------------------------------------------------------------------------------

_INHERITED_CLUSTER: contextvars.ContextVar[_ClusterSettings | None] = contextvars.ContextVar(
    "estimator_engine_inherited_cluster", default=None)


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """Run-time settings of an Estimator; every field accepts ``None`` (TF's rule).

    Args:
        model_dir: where checkpoints and summaries go (the Estimator fills it when ``None``);
            TF_CONFIG's ``model_dir`` supplies it when not given (both set must agree).
        tf_random_seed: seed set before every train/evaluate/predict call (``torch.manual_seed``);
            it also seeds the shuffle of ``numpy_input_fn`` / ``pandas_input_fn`` / ``BatchIterator``.
        save_summary_steps: write the train loss and ``global_step/sec`` summaries every N steps.
        save_checkpoints_steps: checkpoint every N steps; excludes ``save_checkpoints_secs``.
        save_checkpoints_secs: checkpoint every N seconds (default 600 when neither is given).
        keep_checkpoint_max: newest checkpoints kept (``None`` or 0 keeps all).
        keep_checkpoint_every_n_hours: additionally keep one checkpoint per N hours.
        log_step_count_steps: log loss and steps/s every N steps.
        train_distribute / eval_distribute: a distribution strategy (see ``ee.distribute``).
        device: ``'auto'`` (CUDA when available), ``'cpu'``, ``'cuda'`` or ``'cuda:N'``.
        precision: ``'32'``, ``'bf16-mixed'`` or ``'16-mixed'`` (autocast in the model_fn).
        compile: ``torch.compile`` registered modules.
        num_threads: torch's intra-op threads (``torch.set_num_threads``, process-wide, set when
            train/evaluate/predict start). ``None``: session_config's
            ``intra_op_parallelism_threads`` if set, else torch's default capped at the cores this
            process can use now (``usable_cores``: its affinity mask less what a busy machine
            takes, shared among the local processes of a data-parallel run).
        progress_bar: show a progress bar in train/evaluate/predict (``ee.hooks.ProgressBarHook``):
            ``True``/``False``, or ``None`` (auto): on in a Jupyter kernel or a terminal, off in CI,
            in scripts whose stderr is not a terminal and in the workbench's runner processes.
            ``train(progress_bar=...)`` (and evaluate/predict) override it per call.
        session_config: TF's ``ConfigProto`` (or a dict / object with the same attributes): its
            ``intra_op_parallelism_threads`` / ``inter_op_parallelism_threads`` set torch's thread
            counts (0 leaves them alone, as in TF); its other settings have no effect here.
        session_creation_timeout_secs, device_fn, protocol, experimental_max_worker_delay_secs,
            checkpoint_save_graph_def: TF's session and graph settings, validated as TF does so TF
            code runs unchanged; they have no effect on PyTorch (a warning is logged when one
            differs from TF's default).

    The cluster properties (``cluster_spec``, ``task_type``, ``task_id``, ``is_chief``, ``master``,
    ``evaluation_master``, ``num_worker_replicas``, ``num_ps_replicas``, ``global_id_in_cluster``,
    ``service``) come from ``TF_CONFIG`` exactly as in TF when it is set, else from torchrun's
    ``WORLD_SIZE`` / ``RANK``.

    Example:
        >>> config = RunConfig(save_checkpoints_steps=100)
        >>> config.save_checkpoints_secs is None
        True
        >>> config.replace(save_checkpoints_secs=60).save_checkpoints_steps is None
        True
    """

    model_dir: str | None = None
    tf_random_seed: int | None = None
    save_summary_steps: int | None = 100
    save_checkpoints_steps: Any = _DEFAULT
    save_checkpoints_secs: Any = _DEFAULT
    keep_checkpoint_max: int | None = 5
    keep_checkpoint_every_n_hours: float | None = 10000
    log_step_count_steps: int | None = 100
    train_distribute: Any = None
    eval_distribute: Any = None
    device: str | None = "auto"
    precision: str | None = "32"
    compile: bool | None = False
    num_threads: int | None = None
    session_config: Any = None
    session_creation_timeout_secs: Any = 7200
    device_fn: Any = None
    protocol: Any = None
    experimental_max_worker_delay_secs: Any = None
    checkpoint_save_graph_def: Any = True
    progress_bar: bool | None = None

    def __post_init__(self) -> None:
        steps, secs = self.save_checkpoints_steps, self.save_checkpoints_secs
        if steps is _DEFAULT and secs is _DEFAULT:
            steps, secs = None, _DEFAULT_SAVE_CHECKPOINTS_SECS
        elif steps is _DEFAULT:
            steps = None
        elif secs is _DEFAULT:
            secs = None
        object.__setattr__(self, "save_checkpoints_steps", steps)
        object.__setattr__(self, "save_checkpoints_secs", secs)
        if self.model_dir is not None:
            object.__setattr__(self, "model_dir", os.fspath(self.model_dir))
        cluster = _INHERITED_CLUSTER.get()
        if cluster is None:  # construction reads TF_CONFIG (as TF does); replace keeps what was read
            cluster = _parse_tf_config(os.environ.get("TF_CONFIG"))
            if cluster != _ClusterSettings():
                _log.info("TF_CONFIG environment variable: %s", os.environ["TF_CONFIG"])
            if self.model_dir != "":  # '' is reported by _validate
                object.__setattr__(self, "model_dir", _model_dir_with_tf_config(self.model_dir, cluster.model_dir))
        object.__setattr__(self, "_tf_cluster", cluster)
        self._validate()
        ignored = [name for name, default in TF_SESSION_ARGUMENTS.items() if getattr(self, name) != default]
        if "session_config" in ignored and (_session_fields(self.session_config) or {"?"}) <= set(THREAD_KEYS):
            ignored.remove("session_config")  # it only sets threads, which act on torch
        if ignored:
            _log.warning("RunConfig: %s configure TF sessions and graphs and have no effect on PyTorch.",
                         ", ".join(ignored))

    def _validate(self) -> None:
        problems = []

        def at_least(name: str, bound: int, strict: bool = False) -> None:
            value = getattr(self, name)
            if value is None:
                return
            if not isinstance(value, (int, float)) or isinstance(value, bool) or (
                    value <= bound if strict else value < bound):
                problems.append(f"{name} should be {'>' if strict else '>='} {bound}, given: {value!r}")

        if self.model_dir is not None and self.model_dir == "":
            problems.append("model_dir should be non-empty, given: ''")
        if self.tf_random_seed is not None and not _is_int(self.tf_random_seed):
            problems.append(f"tf_random_seed must be integer, given: {self.tf_random_seed!r}")
        at_least("save_summary_steps", 0)
        at_least("save_checkpoints_steps", 0)
        at_least("save_checkpoints_secs", 0)
        at_least("keep_checkpoint_max", 0)
        at_least("keep_checkpoint_every_n_hours", 0, strict=True)
        at_least("log_step_count_steps", 0, strict=True)
        at_least("session_creation_timeout_secs", 0, strict=True)
        if self.save_checkpoints_steps is not None and self.save_checkpoints_secs is not None:
            problems.append(
                "`save_checkpoints_steps` and `save_checkpoints_secs` cannot be both set; "
                f"given {self.save_checkpoints_steps!r} and {self.save_checkpoints_secs!r}")
        if self.device is not None and not _valid_device(self.device):
            problems.append(
                f"device must be 'auto', 'cpu', 'cuda', 'cuda:N' or 'mps', given: {self.device!r}")
        if self.precision is not None and self.precision not in _PRECISIONS:
            problems.append(f"precision must be one of {list(_PRECISIONS)}, given: {self.precision!r}")
        if self.num_threads is not None and (not _is_int(self.num_threads) or self.num_threads < 1):
            problems.append(f"num_threads should be an int >= 1 (None picks from the cores this process "
                            f"may use), given: {self.num_threads!r}")
        if self.progress_bar is not None and not isinstance(self.progress_bar, bool):
            problems.append(f"progress_bar must be True, False or None (auto: on in Jupyter and terminals), "
                            f"given: {self.progress_bar!r}")
        for key in THREAD_KEYS:
            value = _session_value(self.session_config, key)
            if value is not None and (not _is_int(value) or value < 0):
                problems.append(f"session_config.{key} should be an int >= 0 (0 lets torch choose), "
                                f"given: {value!r}")
        if self.experimental_max_worker_delay_secs is not None and not _is_int(
                self.experimental_max_worker_delay_secs):
            problems.append("experimental_max_worker_delay_secs must be an integer if set, given: "
                            f"{self.experimental_max_worker_delay_secs!r}")
        if self.device_fn is not None and not _takes_only_op(self.device_fn):
            problems.append(f'device_fn must be callable with exactly one argument "op", given: {self.device_fn!r}')
        if self.protocol not in _PROTOCOLS:
            problems.append(f"protocol should be grpc or grpc+verbs, given: {self.protocol!r}")
        if problems:
            raise ValueError("Invalid RunConfig: " + "; ".join(problems) + ".")

    def replace(self, **kwargs: Any) -> RunConfig:
        """Returns a copy with the given fields changed, validated again (TF's ``replace``).

        Setting one checkpoint frequency clears the other, as in TF. TF_CONFIG is not read again:
        the copy keeps this config's cluster settings.
        """
        for key in kwargs:
            if key not in _REPLACEABLE:
                raise ValueError(
                    f"Replacing {key} is not supported. Allowed properties are {sorted(_REPLACEABLE)}.")
        if kwargs.get("save_checkpoints_steps") is not None and "save_checkpoints_secs" not in kwargs:
            kwargs["save_checkpoints_secs"] = None
        if kwargs.get("save_checkpoints_secs") is not None and "save_checkpoints_steps" not in kwargs:
            kwargs["save_checkpoints_steps"] = None
        token = _INHERITED_CLUSTER.set(self._cluster)
        try:
            return dataclasses.replace(self, **kwargs)
        finally:
            _INHERITED_CLUSTER.reset(token)

    def apply_threads(self) -> int:
        """Applies the thread settings to torch (see ``apply_thread_settings``); returns the intra-op count."""
        return apply_thread_settings(self)

    def thread_scope(self) -> ThreadScope:
        """A context that applies the thread settings for a call and restores the caller's after."""
        return ThreadScope(self)

    # -- derived, read-only properties: TF_CONFIG's cluster, else torchrun's environment

    @property
    def _cluster(self) -> _ClusterSettings:
        return self.__dict__.get("_tf_cluster") or _ClusterSettings()

    @property
    def _torchrun(self) -> bool:
        return not self._cluster.from_cluster

    @property
    def _torchrun_rank(self) -> int:
        return int(os.environ.get("RANK", "0"))

    @property
    def world_size(self) -> int:
        """Processes training data-parallel together (1 for an evaluator or ps task)."""
        if not self._torchrun:
            cluster = self._cluster
            return cluster.num_worker_replicas if cluster.task_type in _TRAINING_TASKS else 1
        return int(os.environ.get("WORLD_SIZE", "1"))

    @property
    def global_id_in_cluster(self) -> int | None:
        if not self._torchrun:
            return self._cluster.global_id_in_cluster
        return self._torchrun_rank

    @property
    def is_chief(self) -> bool:
        if not self._torchrun:
            return self._cluster.is_chief
        return self.global_id_in_cluster == 0

    @property
    def task_type(self) -> str:
        if not self._torchrun:
            return self._cluster.task_type
        return TaskType.CHIEF if self.world_size > 1 and self.is_chief else TaskType.WORKER

    @property
    def task_id(self) -> int:
        if not self._torchrun:
            return self._cluster.task_id
        rank = self._torchrun_rank
        return rank - 1 if self.world_size > 1 and rank > 0 else 0

    @property
    def num_worker_replicas(self) -> int:
        if not self._torchrun:
            return self._cluster.num_worker_replicas
        return self.world_size

    @property
    def num_ps_replicas(self) -> int:
        return self._cluster.num_ps_replicas

    @property
    def cluster_spec(self) -> ClusterSpec:
        return ClusterSpec(self._cluster.cluster_spec)

    @property
    def master(self) -> str:
        return self._cluster.master

    @property
    def evaluation_master(self) -> str:
        return self._cluster.evaluation_master

    @property
    def service(self) -> dict[str, Any] | None:
        """TF_CONFIG's ``service`` dict (platform-defined), or None."""
        return self._cluster.service

    def _local_rank(self) -> int:
        group = self._cluster.process_group_environment()
        return int(group["LOCAL_RANK"]) if group else int(os.environ.get("LOCAL_RANK", "0"))

    def _local_world_size(self) -> int:
        group = self._cluster.process_group_environment()
        return int(group["LOCAL_WORLD_SIZE"]) if group else 1

    def resolved_device(self) -> torch.device:
        """The device this config runs on; ``'auto'`` picks CUDA when available (one per local rank)."""
        device = self.device or "auto"
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        if device == "cuda" and self.world_size > 1:
            device = f"cuda:{self._local_rank()}"
        return torch.device(device)


def _model_dir_with_tf_config(model_dir: str | None, from_tf_config: str | None) -> str | None:
    """TF's ``_get_model_dir``: TF_CONFIG's model_dir fills an unset one; both set must agree."""
    if from_tf_config:
        if model_dir and model_dir != from_tf_config:
            raise ValueError("`model_dir` provided in RunConfig construct, if set, must have the same value "
                             f"as the model_dir in TF_CONFIG. model_dir: {model_dir}\n"
                             f'TF_CONFIG["model_dir"]: {from_tf_config}.\n')
        _log.info("Using model_dir in TF_CONFIG: %s", from_tf_config)
    return model_dir or from_tf_config


def _takes_only_op(device_fn: Any) -> bool:
    """TF's device_fn rule: callable, and its arguments are exactly ``op``."""
    if not callable(device_fn):
        return False
    try:
        return set(fn_args(device_fn)) == {"op"}
    except (TypeError, ValueError):  # no signature to read (some builtins)
        return False


def _valid_device(device: Any) -> bool:
    if not isinstance(device, str):
        return False
    if device in ("auto", "cpu", "cuda", "mps"):
        return True
    return device.startswith("cuda:") and device[5:].isdigit()
