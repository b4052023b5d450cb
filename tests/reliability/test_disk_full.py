"""A full disk (issue 14, item 7, registry and runner side), simulated portably.

SQLite on a full disk says "disk I/O error" when a connection cannot grow the WAL index (-shm),
which every normal connection needs, and "database or disk is full" when a write cannot grow the
database or WAL; file writes fail with ENOSPC. Measured on a real 2 MB tmpfs filled to 100 %:
before the fix ``runs`` died with ``sqlite3.OperationalError: disk I/O error``; after it, every
run is listed and a write says "disk full: ... Free space on <workspace> (0.0 MB free)".
"""

from __future__ import annotations

import errno
import os
import re
import sqlite3
from pathlib import Path

import pytest
from stub_runs import STUB_TEMPLATE

from estimator_engine import checkpoints
from estimator_workbench.cli import commands as cli
from estimator_workbench.execution import run_process, runner
from estimator_workbench.store import guards, registry_db
from estimator_workbench.store.records import RegistryError
from estimator_workbench.store.registry import RunRegistry


def new_run(workspace, **schedule):
    return RunRegistry(workspace).create_run(
        name="t", action="train", dataset={"name": "none"}, template=STUB_TEMPLATE,
        params={}, run_config={}, schedule=schedule)  # a template with a model_fn: predict checks it


def shm_cannot_grow(monkeypatch):
    """Every normal connection fails as on a full disk; read-only URI connections still open."""
    real_connect = sqlite3.connect

    def connect(target, *args, **kwargs):
        if not kwargs.get("uri"):
            raise sqlite3.OperationalError("disk I/O error")
        return real_connect(target, *args, **kwargs)

    monkeypatch.setattr(registry_db.sqlite3, "connect", connect)
    monkeypatch.setattr(guards, "_free_bytes", lambda path: 0)


def test_reads_work_on_a_full_disk(workspace, capsys, monkeypatch):
    registry = RunRegistry(workspace)
    runs = [new_run(workspace).run_id for _ in range(3)]
    registry.set_status(runs[0], "running", pid=os.getpid())
    registry.set_status(runs[0], "succeeded")
    shm_cannot_grow(monkeypatch)
    assert sorted(r.run_id for r in registry.list_runs()) == sorted(runs)
    assert registry.get(runs[0]).status == "succeeded"
    assert cli.main(["runs"]) == 0
    out = capsys.readouterr()
    assert len(out.out.splitlines()) == 4 and "Traceback" not in out.err, out


def test_writes_raise_a_clear_disk_full_error(workspace, monkeypatch, capsys):
    registry = RunRegistry(workspace)
    run_id = new_run(workspace).run_id
    registry.set_status(run_id, "running", pid=os.getpid())
    registry.set_status(run_id, "failed", error="x")

    def full(self, fn):
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(RunRegistry, "_write_once", full)
    message = (r"disk full: the run registry .*registry\.sqlite could not be written \(database or disk is "
               r"full\)\. Free space on .*workspace \(\d+\.\d MB free\), then retry")
    with pytest.raises(RegistryError, match=message):
        registry.set_status(run_id, "queued")
    assert cli.main(["resume", run_id, "--detach"]) == 2
    err = capsys.readouterr().err
    assert re.search("estimator-workbench: error: " + message, err) and "Traceback" not in err, err


def test_a_disk_io_error_counts_as_disk_full_only_when_space_is_short(workspace, monkeypatch):
    registry = RunRegistry(workspace)
    run_id = new_run(workspace).run_id

    def io_error(self, fn):
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(RunRegistry, "_write_once", io_error)
    with pytest.raises(sqlite3.OperationalError, match=r"^disk I/O error$"):  # plenty of space: as it is
        registry.set_status(run_id, "cancelled")
    monkeypatch.setattr(guards, "_free_bytes", lambda path: 4096)
    with pytest.raises(RegistryError, match=r"^disk full: .*\(disk I/O error\)\. Free space on .* \(0\.0 MB free\)"):
        registry.set_status(run_id, "cancelled")


def test_creating_a_run_on_a_full_disk_leaves_nothing_behind(workspace, monkeypatch):
    new_run(workspace)  # the schema exists
    real_write_text = Path.write_text

    def full(self, *args, **kwargs):
        if self.name.startswith("run.json"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self))
        return real_write_text(self, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", full)
    with pytest.raises(RegistryError, match=r"^disk full: .*No space left on device"):
        new_run(workspace)
    monkeypatch.undo()
    assert len(RunRegistry(workspace).list_runs()) == 1
    assert len(list((workspace / "runs").iterdir())) == 1


def _registry_full_while(monkeypatch, still_full):
    """Registry writes fail as on a full disk while ``still_full()`` holds."""
    real = RunRegistry._write_once

    def write_once(self, fn):
        if still_full():
            raise sqlite3.OperationalError("database or disk is full")
        return real(self, fn)

    monkeypatch.setattr(RunRegistry, "_write_once", write_once)


def test_the_runner_frees_its_reserve_says_disk_full_and_records_the_failure(workspace, monkeypatch, capsys):
    """The disk fills during training: the metrics write fails with ENOSPC and the registry cannot
    be written either, until the runner deletes its 512 KB reserve."""
    run_id = new_run(workspace).run_id
    reserve = RunRegistry(workspace).run_dir(run_id) / run_process.DISK_RESERVE_FILE
    seen = {}

    def execute(ctx):
        seen["reserve"] = reserve.stat().st_size
        _registry_full_while(monkeypatch, reserve.exists)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(ctx.metrics_path))

    code = runner.run(RunRegistry(workspace).run_dir(run_id), execute=execute, install_signal_handlers=False)
    monkeypatch.undo()
    record = RunRegistry(workspace).get(run_id)
    assert code == 1 and record.status == "failed"
    assert record.error.startswith("OSError: [Errno 28] No space left on device: ")
    assert seen["reserve"] == 512 * 1024 and not reserve.exists()
    err = capsys.readouterr().err
    assert "estimator_workbench.execution.runner: disk full: [Errno 28] No space left on device" in err
    assert "then resume the run: its last checkpoint is kept." in err


def test_the_runner_records_the_failure_once_the_disk_frees(workspace, monkeypatch, capsys):
    run_id = new_run(workspace).run_id
    calls = {"n": 0}

    def execute(ctx):
        def still_full():
            calls["n"] += 1
            return calls["n"] <= 2  # the reserve is not enough; space comes back a moment later

        _registry_full_while(monkeypatch, still_full)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    code = runner.run(RunRegistry(workspace).run_dir(run_id), execute=execute, install_signal_handlers=False)
    monkeypatch.undo()
    assert code == 1 and RunRegistry(workspace).get(run_id).status == "failed"
    err = capsys.readouterr().err
    assert err.count("could not be written (database or disk is full)") == 1  # said once, then retried
    assert "recorded as soon as there is space (retrying for up to 300 s)" in err


def test_a_runner_that_never_gets_space_gives_up_with_the_reason(workspace, monkeypatch, capsys):
    run_id = new_run(workspace).run_id
    monkeypatch.setattr(runner, "OUTCOME_RETRY_S", 0.5)

    def execute(ctx):
        _registry_full_while(monkeypatch, lambda: True)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    code = runner.run(RunRegistry(workspace).run_dir(run_id), execute=execute, install_signal_handlers=False)
    monkeypatch.undo()
    assert code == 1
    assert RunRegistry(workspace).get(run_id).status == "running"  # the launcher marks it lost later
    assert "disk full: gave up recording the outcome of run" in capsys.readouterr().err


@pytest.mark.slow
def test_a_full_disk_at_a_checkpoint_keeps_the_previous_one_and_says_why(workspace, monkeypatch, capsys):
    """The real engine: the save of step 10 hits ENOSPC and the registry is full as well."""
    registry = RunRegistry(workspace)
    rec = registry.create_run(
        name="full", action="train", dataset=cli._dataset_dict("iris", None),
        template={"name": "mlp_classifier", "code": _template()}, params={"hidden_units": "8"},
        run_config={"tf_random_seed": 0, "save_checkpoints_steps": 5}, schedule={"max_steps": 20})
    full = {"now": False}
    real_replace = os.replace

    def full_disk_replace(src, dst, *args, **kwargs):
        if os.path.basename(str(dst)) == "model.ckpt-10":
            full["now"] = True
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(dst))
        return real_replace(src, dst, *args, **kwargs)

    monkeypatch.setattr(checkpoints.os, "replace", full_disk_replace)
    reserve = registry.run_dir(rec.run_id) / run_process.DISK_RESERVE_FILE
    _registry_full_while(monkeypatch, lambda: full["now"] and reserve.exists())
    code = runner.run(registry.run_dir(rec.run_id), install_signal_handlers=False)
    monkeypatch.undo()
    done = registry.get(rec.run_id)
    assert code == 1 and done.status == "failed"
    assert "No space left on device" in done.error and "model.ckpt-10" in done.error, done.error
    folder = registry.run_dir(rec.run_id) / "model"
    assert checkpoints.load_checkpoint(folder)["global_step"] == 5  # the previous one, intact
    assert not (folder / "model.ckpt-10").exists()
    assert not [p for p in os.listdir(folder) if p.endswith(".tmp")]
    assert "estimator_workbench.execution.runner: disk full:" in capsys.readouterr().err


def _template() -> str:
    from estimator_workbench import templates

    return templates.get_template("mlp_classifier").code


def test_a_run_whose_log_cannot_be_opened_on_a_full_disk_stays_queued(workspace, monkeypatch):
    from estimator_workbench.execution import launcher as launcher_module
    from estimator_workbench.store import paths

    record = new_run(workspace)
    launcher = launcher_module.LocalLauncher(workspace, gpus=[])
    real_open = open

    def full(path, *args, **kwargs):
        if str(path).endswith(paths.WORKER_LOG):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_open(path, *args, **kwargs)

    with monkeypatch.context() as patched:
        patched.setattr(launcher_module, "open", full, raising=False)
        with pytest.raises(RegistryError, match=rf"^disk full: run '{record.run_id}' cannot start, its worker\.log "
                                                r"cannot be written in .* \(No space left on device\)\. Free space "
                                                r"there; the run stays queued and starts at the next poll\.$"):
            launcher.start(record.run_id)
        assert launcher.poll() == []  # the UI's poll does not fail: nothing starts until space is freed
        assert RunRegistry(workspace).get(record.run_id).status == "queued"
    assert launcher.poll() == [record.run_id]  # space again: the queued run starts
    launcher.cancel(record.run_id, grace=0.5)


class _FillsUp(sqlite3.Connection):
    """A connection whose statements starting with one of ``FULL_AT`` fail as on a full disk:
    SQLite rolls the transaction back itself (SQLITE_FULL), so a later ROLLBACK fails with
    "cannot rollback - no transaction is active", the traceback the attack saw. SQLAlchemy runs
    statements through cursors: theirs fail the same way."""

    FULL_AT: tuple[str, ...] = ()

    def execute(self, sql, *args):
        if sql.lstrip().upper().startswith(self.FULL_AT):
            super().execute("ROLLBACK")
            raise sqlite3.OperationalError("database or disk is full")
        return super().execute(sql, *args)

    def cursor(self, *args, **kwargs):
        return super().cursor(_FillsUpCursor)


class _FillsUpCursor(sqlite3.Cursor):
    def execute(self, sql, *args):
        if sql.lstrip().upper().startswith(_FillsUp.FULL_AT):
            self.connection.execute("ROLLBACK")
            raise sqlite3.OperationalError("database or disk is full")
        return super().execute(sql, *args)


def disk_fills_at(monkeypatch, *statements: str) -> None:
    real_connect = sqlite3.connect
    monkeypatch.setattr(_FillsUp, "FULL_AT", tuple(statements))
    monkeypatch.setattr(registry_db.sqlite3, "connect",
                        lambda *args, **kwargs: real_connect(*args, factory=_FillsUp, **kwargs))


def one_line_disk_full(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err and "cannot rollback" not in err, err
    assert err.startswith("estimator-workbench: error: disk full: ") and err.count("\n") == 1, err
    return err


class TestEveryCommandSaysDiskFull:
    """Issue 24 item 13: ``export`` and ``trash empty`` crashed with ``sqlite3.OperationalError:
    cannot rollback`` tracebacks, ``predict`` printed one; now each says "disk full" in one line."""

    def test_trash_empty(self, workspace, capsys, monkeypatch):
        registry = RunRegistry(workspace)
        run_id = new_run(workspace).run_id
        registry.set_status(run_id, "cancelled")
        assert cli.main(["delete", run_id]) == 0
        capsys.readouterr()
        with monkeypatch.context() as patch:
            disk_fills_at(patch, "DELETE")
            assert cli.main(["trash", "empty", "--yes"]) == 2
            assert "could not be written (database or disk is full)" in one_line_disk_full(capsys)
        assert cli.main(["trash", "empty", "--yes"]) == 0  # space again: it finishes
        assert not registry.exists(run_id)

    def test_predict_registering_its_run(self, workspace, capsys, monkeypatch, tmp_path):
        registry = RunRegistry(workspace)
        parent = new_run(workspace).run_id
        (registry.run_dir(parent) / "model").mkdir()
        data = tmp_path / "new.csv"
        data.write_text("a,b\n1,2\n")
        monkeypatch.setattr(cli, "_dataset_of", lambda *args: {"name": "new"})
        disk_fills_at(monkeypatch, "INSERT")
        assert cli.main(["predict", parent, "--data", str(data), "--out", str(tmp_path / "p.csv")]) == 2
        one_line_disk_full(capsys)

    def test_export_writing_its_zip(self, workspace, capsys, monkeypatch):
        import zipfile

        run_id = new_run(workspace).run_id

        def no_space(self, *args, **kwargs):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        monkeypatch.setattr(zipfile.ZipFile, "writestr", no_space)
        assert cli.main(["export", run_id]) == 2
        assert one_line_disk_full(capsys).endswith(f"No space left on device. Free space on {workspace}, then retry\n")

    def test_one_rule_for_the_registry_and_the_runner(self, workspace, monkeypatch):
        """There were two is_disk_full with different rules; the registry's missed a full disk
        behind "cannot rollback", the runner's an I/O error on a nearly full disk."""
        masked = sqlite3.OperationalError("cannot rollback - no transaction is active")
        masked.__context__ = sqlite3.OperationalError("database or disk is full")
        assert guards.is_disk_full(masked, workspace)
        assert not guards.is_disk_full(sqlite3.OperationalError("disk I/O error"), workspace)
        monkeypatch.setattr(guards, "_free_bytes", lambda path: 4096)
        assert guards.is_disk_full(sqlite3.OperationalError("disk I/O error"), workspace)
        assert not hasattr(run_process, "is_disk_full") or run_process.is_disk_full is guards.is_disk_full
