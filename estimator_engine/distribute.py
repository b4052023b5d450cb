"""Data-parallel training through ``torch.distributed`` (TF's distribution strategies, for PyTorch).

A run started by ``torchrun --nproc-per-node N`` (``WORLD_SIZE > 1``) is distributed automatically,
and so is a process whose ``TF_CONFIG`` names a cluster with more than one training task (a chief,
or TF's legacy master, and workers), as TFJob / Kubernetes start Estimators: its rank and world
size follow TF's global ids over the chief and the workers (chief 0, worker ``i`` -> ``i + 1``), and
the chief's ``host:port`` is the rendezvous (``MASTER_ADDR`` / ``MASTER_PORT``), so no torchrun
variables are needed. ``ps`` tasks do not take part: TF's ParameterServerStrategy has no torch
equivalent, the chief and workers train data-parallel without them, and an Estimator on a ``ps``
task refuses to train (as TF's does outside ``train_and_evaluate``). An ``evaluator`` task runs on
its own. ``RunConfig(train_distribute=DDPStrategy(...))`` sets the options explicitly. The
Estimator then:

* initialises the process group (gloo on CPU, nccl on CUDA) and gives each rank its device
  (``cuda:LOCAL_RANK``);
* wraps every module created by ``get_module`` in ``DistributedDataParallel`` for TRAIN (which
  broadcasts rank 0's initial state), and uses the plain module for EVAL and PREDICT;
* passes ``input_context`` to an ``input_fn`` that declares it, so ``numpy_input_fn`` and
  ``pandas_input_fn`` shard by rank;
* writes checkpoints, summaries and evaluation results on the chief (rank 0) only, and sums the
  metric states of all ranks, so ``evaluate`` equals the single-process result on the same data.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import datetime
import os
import time
from typing import Any

import torch
import torch.distributed as dist

from estimator_engine.run_config import tf_config_process_group

__all__ = ["DDPStrategy", "InputContext", "strategy_for"]


@dataclasses.dataclass(frozen=True)
class InputContext:
    """Which share of the input this ``input_fn`` call should produce (TF's ``tf.distribute.InputContext``).

    Example:
        >>> ctx = InputContext(num_input_pipelines=2, input_pipeline_id=1, num_replicas_in_sync=2)
        >>> ctx.get_per_replica_batch_size(64)
        32
    """

    num_input_pipelines: int = 1
    input_pipeline_id: int = 0
    num_replicas_in_sync: int = 1

    def __post_init__(self) -> None:
        if not 0 <= self.input_pipeline_id < self.num_input_pipelines:
            raise ValueError(f"input_pipeline_id must be in [0, {self.num_input_pipelines}), "
                             f"given: {self.input_pipeline_id!r}")

    def get_per_replica_batch_size(self, global_batch_size: int) -> int:
        """The batch size each replica should use so that the replicas together make ``global_batch_size``."""
        if global_batch_size % self.num_replicas_in_sync:
            raise ValueError(f"The `global_batch_size` {global_batch_size!r} is not divisible by "
                             f"`num_replicas_in_sync` {self.num_replicas_in_sync!r}")
        return global_batch_size // self.num_replicas_in_sync


class DDPStrategy:
    """``DistributedDataParallel`` over the processes ``torchrun`` started, or those ``TF_CONFIG`` names.

    Args:
        backend: ``'gloo'``, ``'nccl'``, or ``None`` (nccl for CUDA devices, gloo otherwise).
        find_unused_parameters / broadcast_buffers / gradient_as_bucket_view: passed to
            ``DistributedDataParallel``.
        timeout_secs: the process group's collective timeout.

    Example:
        >>> config = RunConfig(train_distribute=DDPStrategy(backend='gloo'))  # doctest: +SKIP
    """

    def __init__(self, backend: str | None = None, find_unused_parameters: bool = False,
                 broadcast_buffers: bool = True, gradient_as_bucket_view: bool = True,
                 timeout_secs: float = 1800.0) -> None:
        if backend not in (None, "gloo", "nccl", "mpi"):
            raise ValueError(f"DDPStrategy backend must be 'gloo', 'nccl', 'mpi' or None, given: {backend!r}")
        self.backend = backend
        self.find_unused_parameters = find_unused_parameters
        self.broadcast_buffers = broadcast_buffers
        self.gradient_as_bucket_view = gradient_as_bucket_view
        self.timeout_secs = timeout_secs

    def __repr__(self) -> str:
        return f"DDPStrategy(backend={self.backend!r})"

    @property
    def world_size(self) -> int:
        if dist.is_initialized():
            return dist.get_world_size()
        return int(_launch_environment().get("WORLD_SIZE", "1"))

    @property
    def rank(self) -> int:
        return dist.get_rank() if dist.is_initialized() else int(_launch_environment().get("RANK", "0"))

    def setup(self, device: torch.device) -> None:
        """Initialises the default process group (once per process) from torchrun's environment, or
        from TF_CONFIG's cluster when torchrun's variables are absent (they are then set from it)."""
        if dist.is_initialized():
            return
        missing = [name for name in _PROCESS_GROUP_VARIABLES if name not in os.environ]
        if missing:
            from_tf_config = tf_config_process_group()
            if from_tf_config is None:
                raise RuntimeError(
                    f"Distributed training needs the environment torchrun sets; missing {missing}. Start "
                    "the script with `torchrun --nproc-per-node N script.py`, set a TF_CONFIG naming this "
                    "task's chief and workers, or remove train_distribute. (A TF_CONFIG task of type "
                    "'ps' or 'evaluator' does not train data-parallel.)")
            for name, value in from_tf_config.items():  # the same path as torchrun's from here on
                os.environ.setdefault(name, value)
        backend = self.backend or ("nccl" if device.type == "cuda" else "gloo")
        if device.type == "cuda":
            torch.cuda.set_device(device)
        dist.init_process_group(backend=backend, timeout=datetime.timedelta(seconds=self.timeout_secs))
        # Tearing the group down before the interpreter exits: gloo's threads otherwise abort the
        # process at exit now and then ("terminate called without an active exception").
        atexit.register(_destroy_process_group)

    def wrap(self, name: str, module: torch.nn.Module) -> torch.nn.Module:
        """The module as TRAIN mode uses it: DDP-wrapped when it has trainable parameters."""
        if not any(p.requires_grad for p in module.parameters()):
            return module
        device = next(module.parameters()).device
        options: dict[str, Any] = {}
        if not self.broadcast_buffers:  # the argument is deprecated; pass it only to turn it off
            options["broadcast_buffers"] = False
        return torch.nn.parallel.DistributedDataParallel(
            module, device_ids=[device.index] if device.type == "cuda" else None,
            find_unused_parameters=self.find_unused_parameters,
            gradient_as_bucket_view=self.gradient_as_bucket_view, **options)

    def join(self, modules: list[torch.nn.Module]) -> contextlib.AbstractContextManager:
        """Lets ranks whose input ends early keep the others' collectives going (uneven inputs)."""
        ddp = [m for m in modules if isinstance(m, torch.nn.parallel.DistributedDataParallel)]
        if not ddp:
            return contextlib.nullcontext()
        from torch.distributed.algorithms.join import Join, Joinable
        joinables: list[Joinable] = list(ddp)  # Join's parameter is an (invariant) list of Joinable
        return Join(joinables)

    def all_reduce_sum(self, tensors: list[torch.Tensor]) -> list[torch.Tensor]:
        """Sums each tensor over all ranks (in place on a copy; float64 stays float64)."""
        if not tensors:
            return tensors
        flat = torch.cat([t.reshape(-1).to(torch.float64) for t in tensors])
        if self.backend == "nccl" or (self.backend is None and flat.device.type == "cuda"):
            flat = flat.cuda()
        dist.all_reduce(flat)
        out, offset = [], 0
        for t in tensors:
            n = t.numel()
            out.append(flat[offset:offset + n].reshape(t.shape).to(device=t.device, dtype=t.dtype))
            offset += n
        return out

    def barrier(self) -> None:
        if dist.is_initialized():
            dist.barrier()

    def input_context(self) -> InputContext:
        return InputContext(num_input_pipelines=self.world_size, input_pipeline_id=self.rank,
                            num_replicas_in_sync=self.world_size)


def _destroy_process_group() -> None:
    if not dist.is_initialized():
        return
    # Leave together: a rank that closes its connections while a peer still finishes a collective
    # makes gloo abort that peer.
    with contextlib.suppress(Exception):
        dist.barrier()
    _wait_for_idle_gloo_workers()
    dist.destroy_process_group()


_GLOO_WORKER_THREAD = "pt_gloo_runloop"  # the name torch gives ProcessGroupGloo's worker threads


def _wait_for_idle_gloo_workers(timeout_s: float = 2.0, idle_samples: int = 3) -> None:
    """Returns once every gloo worker thread sleeps (or after ``timeout_s``), the GIL released meanwhile.

    A worker drops its reference to a finished collective only after ``wait()`` has returned to
    Python. When that collective's tensor was created in Python (DDP's join signal, the metric
    reduction), dropping it needs the GIL; a worker that a loaded machine deschedules until the
    interpreter is finalising cannot get it, exits its thread mid-destructor and the process
    aborts ("terminate called without an active exception", SIGABRT) after all its work is done.
    Sleeping here lets such a worker take the GIL and finish while the interpreter is still whole.
    """
    task_dir = "/proc/self/task"
    if not os.path.isdir(task_dir):  # not Linux: no thread states to read, give workers a moment
        time.sleep(0.05)
        return
    deadline = time.monotonic() + timeout_s
    idle_in_a_row = 0
    while idle_in_a_row < idle_samples and time.monotonic() < deadline:
        time.sleep(0.002)
        idle_in_a_row = idle_in_a_row + 1 if _gloo_workers_sleeping(task_dir) else 0


def _gloo_workers_sleeping(task_dir: str) -> bool:
    for tid in os.listdir(task_dir):
        try:
            with open(f"{task_dir}/{tid}/comm") as comm:
                if comm.read().strip() != _GLOO_WORKER_THREAD:
                    continue
            with open(f"{task_dir}/{tid}/stat") as stat:
                state = stat.read().rpartition(")")[2].split()[0]
        except (OSError, IndexError):  # the thread ended between listing and reading
            continue
        if state != "S":
            return False
    return True


_PROCESS_GROUP_VARIABLES = ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE")


def _launch_environment() -> dict[str, str]:
    """torchrun's variables when set, else those TF_CONFIG's cluster gives this task (else none)."""
    if "WORLD_SIZE" in os.environ:
        return dict(os.environ)
    return tf_config_process_group() or {}


def strategy_for(distribute: Any) -> DDPStrategy | None:
    """The strategy a call runs under: the configured one, or DDP when torchrun started N > 1
    processes or TF_CONFIG names more than one training task (chief + workers)."""
    if distribute is not None:
        if not isinstance(distribute, DDPStrategy):
            raise TypeError(f"train_distribute / eval_distribute must be an ee.distribute.DDPStrategy, given: {distribute!r}")
        return distribute
    if int(_launch_environment().get("WORLD_SIZE", "1")) > 1:
        return DDPStrategy()
    return None
