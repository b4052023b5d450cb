"""Issue 14.3: a crafted checkpoint is refused without torch's advice to load it unsafely, and
`export --with-checkpoint` never bundles a checkpoint that fails the safe load."""

from __future__ import annotations

import os

import pytest
import torch

from estimator_engine import checkpoints
from estimator_engine.errors import CheckpointError
from estimator_workbench.execution.bundle import export_bundle
from estimator_workbench.store import paths
from estimator_workbench.store.registry import RunRegistry


class RunsCode:
    def __reduce__(self):
        return (os.getcwd, ())  # harmless stand-in for os.system


def craft(model_dir) -> str:
    """A real checkpoint whose file is then replaced by a pickle that would call a function."""
    checkpoints.save_checkpoint(model_dir, {"variables": {"w": torch.ones(2)}}, 5)
    latest = checkpoints.latest_checkpoint(model_dir)
    torch.save({"format": checkpoints.CHECKPOINT_FORMAT, "payload": RunsCode()},
               checkpoints.resolve_checkpoint(latest))
    return latest


def test_refusal_does_not_advise_weights_only_false(tmp_path):
    latest = craft(tmp_path / "model")
    with pytest.raises(CheckpointError, match=r"safe loader refused it.*crafted to run code") as info:
        checkpoints.load_checkpoint(latest)
    text = str(info.value)
    assert "(Unsupported global: posix.getcwd)" in text
    assert "weights_only=False" not in text and "can still be loaded" not in text
    assert "safe_globals" not in text


def test_export_refuses_to_bundle_a_crafted_checkpoint(workspace):
    reg = RunRegistry(workspace)
    record = reg.create_run(
        name="crafted", action="train", dataset={"ref": {"kind": "bundled", "name": "iris"}},
        template={"name": "t", "code": "x = 1\n"}, params={}, run_config={}, schedule={})
    craft(reg.run_dir(record.run_id) / paths.MODEL_DIR)
    out = workspace / "bundle.zip"
    with pytest.raises(CheckpointError, match="safe loader refused it"):
        export_bundle(workspace, record.run_id, out, with_checkpoint=True)
    assert not out.exists() and not out.with_suffix(".zip.tmp").exists()
