"""Shell commands that reproduce a workbench run outside the workbench (one machine or a cluster).

Every run is a folder (``runs/<id>/run.json`` holds everything the runner needs), so reproducing
it is running the same entry point on that folder: ``python -m estimator_workbench.execution.runner RUN_DIR`` for one
process, ``torchrun`` for several on one machine, and ``torchrun --nnodes`` with a c10d rendezvous
for several machines (each node runs the same command; the folder must be on storage every node
sees). The SLURM and Kubernetes entries are templates: ``srun`` starts the same ``torchrun`` on
every node of an allocation, a Kubeflow ``PyTorchJob`` does it in pods.

The run page shows these strings; nothing here starts a process.
"""

from __future__ import annotations

import os
import shlex
from typing import Any

from estimator_workbench.store import paths

__all__ = ["DEFAULT_RDZV_PORT", "reproduce_commands"]

DEFAULT_RDZV_PORT = 29400


def _field(record: Any, name: str, default: Any = None) -> Any:
    if isinstance(record, dict):
        return record.get(name, default)
    return getattr(record, name, default)


def reproduce_commands(record: Any, *, run_dir: str | os.PathLike[str] | None = None,
                       workspace: str | os.PathLike[str] | None = None,
                       nnodes: int = 2, nproc_per_node: int | None = None,
                       rdzv_host: str = "HOST", rdzv_port: int = DEFAULT_RDZV_PORT,
                       python: str = "python") -> dict[str, str]:
    """The commands that reproduce ``record`` (a ``RunRecord`` or a ``run.json`` dict).

    Args:
        record: the run (needs ``run_id``; ``num_processes`` sets the processes per node).
        run_dir: the run folder (default: ``runs/<run_id>`` under ``workspace``, or under
            ``$WORKBENCH_HOME`` when no workspace is given).
        workspace: the workspace folder used to build ``run_dir``.
        nnodes: machines in the multi-node commands (>= 1).
        nproc_per_node: processes per machine (default: the run's ``num_processes``).
        rdzv_host / rdzv_port: the c10d rendezvous endpoint (the first node's address).
        python: the interpreter to call.

    Returns:
        ``{'single', 'torchrun', 'multi_node', 'slurm', 'kubernetes', 'notes'}``: ``single`` is
        one process; ``torchrun`` is ``--standalone`` on this machine; ``multi_node`` runs on every
        node; ``slurm`` is an ``sbatch`` script body; ``kubernetes`` is a ``PyTorchJob`` manifest;
        ``notes`` says what the commands assume.

    Example:
        >>> cmds = reproduce_commands({"run_id": "r-1", "num_processes": 2}, run_dir="/ws/runs/r-1")
        >>> cmds["torchrun"]
        'torchrun --standalone --nproc-per-node 2 -m estimator_workbench.execution.runner /ws/runs/r-1'
    """
    run_id = _field(record, "run_id")
    if not isinstance(run_id, str) or not run_id:
        raise ValueError(f"record must have a non-empty run_id, given: {record!r}")
    for arg, value in (("nnodes", nnodes), ("rdzv_port", rdzv_port)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{arg} must be an int >= 1, given: {value!r}")
    if nproc_per_node is None:
        nproc_per_node = int(_field(record, "num_processes", 1) or 1)
    if not isinstance(nproc_per_node, int) or isinstance(nproc_per_node, bool) or nproc_per_node < 1:
        raise ValueError(f"nproc_per_node must be an int >= 1, given: {nproc_per_node!r}")
    if run_dir is None:
        root = paths.workspace_root(workspace)
        run_dir = paths.run_dir(root, run_id)
    folder = shlex.quote(os.fspath(run_dir))
    endpoint = f"{rdzv_host}:{rdzv_port}"
    multi = (f"torchrun --nnodes {nnodes} --nproc-per-node {nproc_per_node} "
             f"--rdzv-backend c10d --rdzv-endpoint {endpoint} --rdzv-id {run_id} "
             f"-m estimator_workbench.execution.runner {folder}")
    slurm = "\n".join([
        "#!/bin/bash",
        f"#SBATCH --job-name={run_id}",
        f"#SBATCH --nodes={nnodes}",
        "#SBATCH --ntasks-per-node=1            # one torchrun per node; it starts the ranks",
        f"#SBATCH --gpus-per-node={nproc_per_node}",
        "# The workspace must be on storage every node mounts at the same path.",
        "head=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n 1)",
        f"srun torchrun --nnodes {nnodes} --nproc-per-node {nproc_per_node} "
        f"--rdzv-backend c10d --rdzv-endpoint \"$head:{rdzv_port}\" --rdzv-id {run_id} "
        f"-m estimator_workbench.execution.runner {folder}",
    ])
    kubernetes = "\n".join([
        "# Kubeflow training operator; the workspace volume must be shared (ReadWriteMany).",
        "# The operator sets the rendezvous (PET_* variables), so torchrun needs no endpoint.",
        "apiVersion: kubeflow.org/v1",
        "kind: PyTorchJob",
        "metadata:",
        f"  name: {run_id}",
        "spec:",
        "  elasticPolicy:",
        "    rdzvBackend: c10d",
        f"  nprocPerNode: \"{nproc_per_node}\"",
        "  pytorchReplicaSpecs:",
        "    Master:",
        "      replicas: 1",
        "      template: &pod",
        "        spec:",
        "          containers:",
        "            - name: pytorch",
        "              image: IMAGE_WITH_THIS_PROJECT",
        f"              command: [\"torchrun\", \"--nproc-per-node\", \"{nproc_per_node}\", "
        f"\"-m\", \"estimator_workbench.execution.runner\", \"{os.fspath(run_dir)}\"]",
        "              volumeMounts: [{name: workspace, mountPath: WORKSPACE_MOUNT}]",
        "          volumes: [{name: workspace, persistentVolumeClaim: {claimName: WORKSPACE_PVC}}]",
        "    Worker:",
        f"      replicas: {max(0, nnodes - 1)}",
        "      template: *pod",
    ])
    return {
        "single": f"{python} -m estimator_workbench.execution.runner {folder}",
        "torchrun": f"torchrun --standalone --nproc-per-node {nproc_per_node} "
                    f"-m estimator_workbench.execution.runner {folder}",
        "multi_node": multi,
        "slurm": slurm,
        "kubernetes": kubernetes,
        "notes": _NOTES,
    }


_NOTES = (
    "The runner executes a run that is queued (a new run, or one put back with "
    "`estimator-workbench resume RUN --detach` or the Resume button) and continues from the last "
    "checkpoint in RUN_DIR/model. Run the commands from an environment with this project "
    "installed (or PYTHONPATH at its checkout). Multi-node: RUN_DIR must be the same path on "
    "every node (shared storage); replace HOST with the first node's address and run the "
    "multi_node command on every node; the rendezvous id keeps the nodes of this run together.")
