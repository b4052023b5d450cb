"""Shared fixtures: known-answer data, a temporary workspace, and hygiene checks."""

from __future__ import annotations

import os
import tempfile
import threading

import child_processes
import pytest
import torch

# postgres_server, postgres_url, db_backend: the run registry on PostgreSQL too;
# s3_server, s3_bucket: model_dirs and run artifacts on an S3-compatible server (moto)
pytest_plugins = ["postgres_server", "s3_server"]


@pytest.fixture(autouse=True)
def _deterministic_torch():
    """Each test starts from the same global RNG state and one intra-op thread."""
    torch.manual_seed(0)
    yield


@pytest.fixture(autouse=True)
def _environment_restored():
    """Restores os.environ after each test: ``cli.main()`` sets variables for the runners it
    starts (--database-url, --storage-url, --max-concurrent, --helper-slots), which an in-process
    test would otherwise leave to the tests after it (a leaked --max-concurrent 2 let queued runs
    start in a fresh-clone CI)."""
    saved = dict(os.environ)
    yield
    if os.environ != saved:
        os.environ.clear()
        os.environ.update(saved)


@pytest.fixture(autouse=True)
def _no_ui_warm_spare(monkeypatch):
    """The UI's shared launcher keeps no pre-started runner in tests (it would outlive the test);
    tests of the spare set WORKBENCH_WARM_SPARES=1 or build their own launcher."""
    monkeypatch.setenv("WORKBENCH_WARM_SPARES", "0")


@pytest.fixture(autouse=True)
def _no_system_samples(monkeypatch):
    """Runners sample no system metrics (issue 28 item 10) unless a test asks: rows every few
    seconds would land among the metric rows that tests count; test_system_metrics turns them on."""
    monkeypatch.setenv("WORKBENCH_SYSTEM_METRICS_S", "0")


@pytest.fixture(autouse=True)
def _no_leftovers():
    """Fails a test that leaves child processes or non-daemon threads running (Fabric-style hygiene)."""
    threads_before = {t.ident for t in threading.enumerate()}
    children_before = set(child_processes.child_pids(os.getpid()))
    yield
    leaked_children = set(child_processes.child_pids(os.getpid())) - children_before
    leaked_threads = [t for t in threading.enumerate()
                      if t.ident not in threads_before and t.is_alive() and not t.daemon]
    for pid in leaked_children:
        child_processes.kill(pid)
    assert not leaked_children, f"test left child processes running: {sorted(leaked_children)}"
    assert not leaked_threads, f"test left threads running: {leaked_threads}"


@pytest.fixture(autouse=True)
def _temp_files_in_tmp_path(tmp_path_factory, monkeypatch):
    """Temporary folders a test makes through ``tempfile`` (an Estimator without ``model_dir``
    gets one, as in TF) go under pytest's own temporary tree, which pytest prunes, instead of
    piling up in /tmp."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path_factory.mktemp("tempfile")))


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    """A fresh workbench workspace under tmp_path (WORKBENCH_HOME points at it)."""
    home = tmp_path / "workspace"
    monkeypatch.setenv("WORKBENCH_HOME", str(home))
    return home


@pytest.fixture
def source_runner_launcher(workspace, tmp_path):
    """``make(name, source)``: a CPU ``LocalLauncher`` whose runner module ``name`` is written from
    ``source`` (tests of what a runner process sees or leaves behind); shut down afterwards."""
    from estimator_workbench.execution.launcher import LocalLauncher

    made = []
    folder = tmp_path / "runner_modules"

    def make(name: str, source: str) -> LocalLauncher:
        folder.mkdir(exist_ok=True)
        (folder / f"{name}.py").write_text(source)
        launcher = LocalLauncher(workspace, gpus=[], runner_module=name, env={"PYTHONPATH": str(folder)})
        made.append(launcher)
        return launcher

    yield make
    for launcher in made:
        launcher.shutdown(grace=1.0)
