"""Tests of estimator_workbench.execution.reproduce.reproduce_commands (known-answer strings, no processes)."""

from __future__ import annotations

import shlex

import pytest

from estimator_workbench.execution.reproduce import reproduce_commands
from estimator_workbench.store.registry import RunRegistry


def test_known_answers_for_a_dict_record():
    cmds = reproduce_commands({"run_id": "r-20260101-abcdef", "num_processes": 4},
                              run_dir="/shared/ws/runs/r-20260101-abcdef", nnodes=3,
                              rdzv_host="10.0.0.1")
    folder = "/shared/ws/runs/r-20260101-abcdef"
    assert cmds["single"] == f"python -m estimator_workbench.execution.runner {folder}"
    assert cmds["torchrun"] == f"torchrun --standalone --nproc-per-node 4 -m estimator_workbench.execution.runner {folder}"
    assert cmds["multi_node"] == (
        "torchrun --nnodes 3 --nproc-per-node 4 --rdzv-backend c10d --rdzv-endpoint 10.0.0.1:29400 "
        f"--rdzv-id r-20260101-abcdef -m estimator_workbench.execution.runner {folder}")
    assert "#SBATCH --nodes=3" in cmds["slurm"] and "srun torchrun --nnodes 3" in cmds["slurm"]
    assert '--rdzv-endpoint "$head:29400"' in cmds["slurm"]
    assert "kind: PyTorchJob" in cmds["kubernetes"] and "replicas: 2" in cmds["kubernetes"]
    assert 'nprocPerNode: "4"' in cmds["kubernetes"]
    assert "same path on every node" in cmds["notes"]


def test_from_a_registry_record(workspace):
    reg = RunRegistry(workspace)
    rec = reg.create_run(name="x", action="train", dataset={}, template={}, params={},
                         run_config={}, num_processes=2)
    cmds = reproduce_commands(rec, workspace=workspace, python="/venv/bin/python")
    folder = str(reg.run_dir(rec.run_id))
    assert cmds["single"] == f"/venv/bin/python -m estimator_workbench.execution.runner {shlex.quote(folder)}"
    assert "--nproc-per-node 2" in cmds["torchrun"]
    assert f"--rdzv-id {rec.run_id}" in cmds["multi_node"] and "HOST:29400" in cmds["multi_node"]
    # Default run_dir comes from $WORKBENCH_HOME (the fixture sets it to the workspace).
    assert reproduce_commands(rec)["single"] == cmds["single"].replace("/venv/bin/python", "python")


def test_paths_with_spaces_are_quoted_and_overrides_apply():
    cmds = reproduce_commands({"run_id": "r-1"}, run_dir="/my ws/runs/r-1", nproc_per_node=8,
                              rdzv_port=1234)
    assert cmds["single"] == "python -m estimator_workbench.execution.runner '/my ws/runs/r-1'"
    assert shlex.split(cmds["multi_node"])[-1] == "/my ws/runs/r-1"
    assert "--nproc-per-node 8" in cmds["torchrun"] and "HOST:1234" in cmds["multi_node"]


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"record": {"name": "no id"}}, r"record must have a non-empty run_id, given: \{'name': 'no id'\}"),
    ({"record": {"run_id": "r"}, "nnodes": 0}, "nnodes must be an int >= 1, given: 0"),
    ({"record": {"run_id": "r"}, "rdzv_port": True}, "rdzv_port must be an int >= 1, given: True"),
    ({"record": {"run_id": "r"}, "nproc_per_node": 0}, "nproc_per_node must be an int >= 1, given: 0"),
])
def test_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        reproduce_commands(**kwargs, run_dir="/x")
