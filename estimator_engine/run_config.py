"""``RunConfig``: how an Estimator runs (TF's ``run_config.py``, the fields that mean something on PyTorch)."""

from __future__ import annotations

import dataclasses
import logging
import os
from typing import Any

import torch

__all__ = ["RunConfig", "TaskType"]


class TaskType:
    """TF's task type names, as ``RunConfig.task_type`` reports them."""

    CHIEF = "chief"
    WORKER = "worker"
    EVALUATOR = "evaluator"
    PS = "ps"


_log = logging.getLogger("estimator_engine")

_DEFAULT = object()  # "not passed", as distinct from an explicit None
_DEFAULT_SAVE_CHECKPOINTS_SECS = 600

# TF's arguments that configure its sessions and graphs: accepted so that TF code constructs its
# RunConfig unchanged, kept as given, and without effect here (a warning says so when one is set).
TF_SESSION_ARGUMENTS = {
    "session_config": None, "session_creation_timeout_secs": 7200, "device_fn": None,
    "protocol": None, "experimental_max_worker_delay_secs": None, "checkpoint_save_graph_def": True,
}
_REPLACEABLE = (
    "model_dir", "tf_random_seed", "save_summary_steps", "save_checkpoints_steps",
    "save_checkpoints_secs", "keep_checkpoint_max", "keep_checkpoint_every_n_hours",
    "log_step_count_steps", "train_distribute", "eval_distribute", "device", "precision",
    "compile", *TF_SESSION_ARGUMENTS,
)
_PRECISIONS = ("32", "16-mixed", "bf16-mixed")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """Run-time settings of an Estimator; every field accepts ``None`` (TF's rule).

    Args:
        model_dir: where checkpoints and summaries go (the Estimator fills it when ``None``).
        tf_random_seed: seed set before every train/evaluate/predict call (``torch.manual_seed``).
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
        session_config, session_creation_timeout_secs, device_fn, protocol,
            experimental_max_worker_delay_secs, checkpoint_save_graph_def: TF's session and graph
            settings, accepted so TF code runs unchanged; they have no effect on PyTorch (a
            warning is logged when one differs from TF's default).

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
    session_config: Any = None
    session_creation_timeout_secs: Any = 7200
    device_fn: Any = None
    protocol: Any = None
    experimental_max_worker_delay_secs: Any = None
    checkpoint_save_graph_def: Any = True

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
        self._validate()
        ignored = [name for name, default in TF_SESSION_ARGUMENTS.items() if getattr(self, name) != default]
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
        if self.save_checkpoints_steps is not None and self.save_checkpoints_secs is not None:
            problems.append(
                "`save_checkpoints_steps` and `save_checkpoints_secs` cannot be both set; "
                f"given {self.save_checkpoints_steps!r} and {self.save_checkpoints_secs!r}")
        if self.device is not None and not _valid_device(self.device):
            problems.append(
                f"device must be 'auto', 'cpu', 'cuda', 'cuda:N' or 'mps', given: {self.device!r}")
        if self.precision is not None and self.precision not in _PRECISIONS:
            problems.append(f"precision must be one of {list(_PRECISIONS)}, given: {self.precision!r}")
        if problems:
            raise ValueError("Invalid RunConfig: " + "; ".join(problems) + ".")

    def replace(self, **kwargs: Any) -> RunConfig:
        """Returns a copy with the given fields changed, validated again (TF's ``replace``).

        Setting one checkpoint frequency clears the other, as in TF.
        """
        for key in kwargs:
            if key not in _REPLACEABLE:
                raise ValueError(
                    f"Replacing {key} is not supported. Allowed properties are {sorted(_REPLACEABLE)}.")
        if kwargs.get("save_checkpoints_steps") is not None and "save_checkpoints_secs" not in kwargs:
            kwargs["save_checkpoints_secs"] = None
        if kwargs.get("save_checkpoints_secs") is not None and "save_checkpoints_steps" not in kwargs:
            kwargs["save_checkpoints_steps"] = None
        return dataclasses.replace(self, **kwargs)

    # -- derived, read-only properties (the torch.distributed environment when launched by torchrun)

    @property
    def world_size(self) -> int:
        return int(os.environ.get("WORLD_SIZE", "1"))

    @property
    def global_id_in_cluster(self) -> int:
        return int(os.environ.get("RANK", "0"))

    @property
    def is_chief(self) -> bool:
        return self.global_id_in_cluster == 0

    @property
    def task_type(self) -> str:
        return TaskType.CHIEF if self.world_size > 1 and self.is_chief else TaskType.WORKER

    @property
    def task_id(self) -> int:
        rank = self.global_id_in_cluster
        return rank - 1 if self.world_size > 1 and rank > 0 else 0

    @property
    def num_worker_replicas(self) -> int:
        return self.world_size

    @property
    def num_ps_replicas(self) -> int:
        return 0

    @property
    def cluster_spec(self) -> dict[str, Any]:
        return {}

    @property
    def master(self) -> str:
        return ""

    @property
    def evaluation_master(self) -> str:
        return ""

    def resolved_device(self) -> torch.device:
        """The device this config runs on; ``'auto'`` picks CUDA when available (one per local rank)."""
        device = self.device or "auto"
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        if device == "cuda" and self.world_size > 1:
            device = f"cuda:{int(os.environ.get('LOCAL_RANK', '0'))}"
        return torch.device(device)


def _valid_device(device: Any) -> bool:
    if not isinstance(device, str):
        return False
    if device in ("auto", "cpu", "cuda", "mps"):
        return True
    return device.startswith("cuda:") and device[5:].isdigit()
