"""Fixtures of the page tests: a temporary workspace whose runs use the stub runner."""

from __future__ import annotations

import contextlib
from pathlib import Path

import psutil
import pytest

from estimator_workbench.execution.launcher import LocalLauncher
from estimator_workbench.store.registry import RunRegistry

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def home(workspace, monkeypatch):
    """The workspace, with the UI's launcher running ``tests/estimator_workbench/stub_runner.py`` (no torch)."""
    monkeypatch.setenv("WORKBENCH_RUNNER_MODULE", "stub_runner")
    monkeypatch.setenv("WORKBENCH_RUNNER_PYTHONPATH", str(REPO / "tests" / "estimator_workbench"))
    yield workspace
    # no runner may outlive a test: cancel whatever is still active
    launcher = LocalLauncher(workspace)
    for record in RunRegistry(workspace).list_runs(["queued", "running"]):
        launcher.cancel(record.run_id, grace=2)
    # A run that has just ended may still be exiting: its outcome is recorded before its interpreter
    # exits. Wait for those runners (this process started them, so waiting also reaps them).
    runners = []
    for child in psutil.Process().children():
        with contextlib.suppress(psutil.Error):
            if "stub_runner" in " ".join(child.cmdline()):
                runners.append(child)
    psutil.wait_procs(runners, timeout=10)
