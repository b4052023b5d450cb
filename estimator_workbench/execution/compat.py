"""Warm-start and resume compatibility: which variables of a new model a checkpoint can fill.

Building the new model runs the template's code, so ``check_compatibility`` does it in a child
process (``python -m estimator_workbench.execution.compat IN.json OUT.json``), as the pre-flight check does; the UI
process only reads the JSON report. The child builds the model exactly as a run would and
compares its variables (names and shapes) with the checkpoint's.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from typing import Any

__all__ = ["CompatibilityReport", "check_compatibility"]


@dataclasses.dataclass(frozen=True)
class CompatibilityReport:
    """Variables of the new model that match the checkpoint, are missing from it, or differ in shape.

    Example:
        >>> report = CompatibilityReport(matching=['mlp/0/weight'], missing=[], unexpected=[],
        ...                              shape_mismatch={}, error=None)
        >>> report.ok
        True
    """

    matching: list[str]
    missing: list[str]
    unexpected: list[str]
    shape_mismatch: dict[str, list[list[int]]]
    error: str | None = None

    @property
    def ok(self) -> bool:
        """Every variable of the new model is in the checkpoint with the same shape."""
        return self.error is None and not self.missing and not self.shape_mismatch

    def summary(self) -> str:
        if self.error:
            return f"Compatibility check failed: {self.error}"
        parts = [f"{len(self.matching)} variables match"]
        if self.missing:
            parts.append(f"{len(self.missing)} missing from the checkpoint (start fresh): {', '.join(self.missing[:5])}")
        if self.shape_mismatch:
            shapes = ", ".join(f"{n} {c} -> {m}" for n, (c, m) in list(self.shape_mismatch.items())[:5])
            parts.append(f"{len(self.shape_mismatch)} differ in shape: {shapes}")
        if self.unexpected:
            parts.append(f"{len(self.unexpected)} in the checkpoint only (unused)")
        return "; ".join(parts) + "."


def check_compatibility(run_spec: Mapping[str, Any], checkpoint: str | os.PathLike,
                        timeout: float = 120) -> CompatibilityReport:
    """Builds the model of ``run_spec`` in a child process and compares it with ``checkpoint``.

    Args:
        run_spec: the new run's run.json dict (template, params, dataset, run_config).
        checkpoint: a checkpoint file or a model_dir (its newest checkpoint).
        timeout: seconds before the child is killed.
    """
    with tempfile.TemporaryDirectory(prefix="compat_") as tmp:
        request, result = os.path.join(tmp, "in.json"), os.path.join(tmp, "out.json")
        spec = {k: v for k, v in run_spec.items() if k != "warm_start_from"}
        with open(request, "w") as f:
            json.dump({"run_spec": spec, "checkpoint": os.fspath(checkpoint)}, f)
        from estimator_workbench.execution.processes import without_secrets

        try:  # the child runs user code (the template): no UI password in its environment
            done = subprocess.run([sys.executable, "-m", "estimator_workbench.execution.compat", request, result],
                                  cwd=tmp, env=without_secrets(os.environ), stdin=subprocess.DEVNULL,
                                  capture_output=True, text=True, timeout=timeout, start_new_session=True)
        except subprocess.TimeoutExpired:
            return CompatibilityReport([], [], [], {}, error=f"timed out after {timeout:g} s")
        if not os.path.exists(result):
            tail = (done.stderr or "").strip().splitlines()[-1:] or ["no output"]
            return CompatibilityReport([], [], [], {}, error=f"the check exited with code {done.returncode}: {tail[0]}")
        with open(result) as f:
            return CompatibilityReport(**json.load(f))


def _model_variables(run_spec: Mapping[str, Any], model_dir: str) -> dict[str, list[int]]:
    """Names and shapes of the variables the run's model_fn creates (one training step on CPU)."""
    from estimator_engine import checkpoints
    from estimator_workbench.execution.build import build_estimator
    from estimator_workbench.store.run_spec import RunConfigSettings, RunSpec

    spec = RunSpec.model_validate(dict(run_spec))
    run_config = RunConfigSettings.model_validate({**spec.run_config.to_engine(), "device": "cpu",
                                                   "save_checkpoints_steps": 1000, "save_checkpoints_secs": None})
    estimator, input_fns = build_estimator(spec.model_copy(update={"run_config": run_config}), model_dir)
    estimator.train(input_fns.train, steps=1)
    path = checkpoints.latest_checkpoint(model_dir)
    return {name: shape for name, shape in checkpoints.list_variables(path) if name != "global_step"}


def _main(request_path: str, result_path: str) -> int:
    from estimator_engine.warm_start import compare_variables

    with open(request_path) as f:
        request = json.load(f)
    try:
        with tempfile.TemporaryDirectory(prefix="compat_model_") as model_dir:
            variables = _model_variables(request["run_spec"], model_dir)
        report = compare_variables(request["checkpoint"], variables)
        out = {"matching": report["matching"], "missing": report["missing"],
               "unexpected": report["unexpected"],
               "shape_mismatch": {k: [list(c), list(m)] for k, (c, m) in report["shape_mismatch"].items()},
               "error": None}
    except Exception as exc:  # reported to the UI as text, never raised there
        out = {"matching": [], "missing": [], "unexpected": [], "shape_mismatch": {},
               "error": f"{type(exc).__name__}: {exc}"}
    with open(result_path, "w") as f:
        json.dump(out, f)
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1], sys.argv[2]))
