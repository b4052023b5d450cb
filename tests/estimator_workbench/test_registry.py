"""Tests of estimator_workbench.store.registry and estimator_workbench.store.paths: state machine, concurrency, summary, delete."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from estimator_workbench.store import paths
from estimator_workbench.store.records import (
    ALLOWED_TRANSITIONS,
    STATUSES,
    InvalidTransitionError,
    RunNotFoundError,
    new_run_id,
)
from estimator_workbench.store.registry import SCHEMA_VERSION, RunRegistry

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


def make_run(reg: RunRegistry, **overrides):
    kwargs = dict(name="demo", action="train",
                  dataset={"name": "iris", "fingerprint": "sha256:abc", "label": "species"},
                  template={"name": "mlp_classifier", "code": "def model_fn(features): ...\n"},
                  params={"hidden_units": [8]}, run_config={"tf_random_seed": 1},
                  schedule={"max_steps": 10})
    kwargs.update(overrides)
    return reg.create_run(**kwargs)


class TestPaths:
    def test_workspace_root_precedence(self, workspace, tmp_path, monkeypatch):
        assert paths.workspace_root() == workspace.resolve()
        assert paths.workspace_root(tmp_path / "other") == (tmp_path / "other").resolve()
        monkeypatch.delenv("WORKBENCH_HOME")
        monkeypatch.chdir(tmp_path)
        assert paths.workspace_root() == (tmp_path / "workspace").resolve()

    @pytest.mark.parametrize("name", ["../x", "..", ".", "", "a/b", "/etc", "a\\b", "x\x00"])
    def test_safe_child_refuses(self, name, tmp_path):
        with pytest.raises(ValueError, match=r"Unsafe name .*single file or folder name"):
            paths.safe_child(tmp_path, name)

    def test_run_dir(self, tmp_path):
        assert paths.run_dir(tmp_path, "r-1") == tmp_path / "runs" / "r-1"
        with pytest.raises(ValueError, match="Unsafe name"):
            paths.run_dir(tmp_path, "../../etc")


class TestCreateAndRead:
    def test_missing_database_reads_empty(self, workspace):
        reg = RunRegistry(workspace)
        assert reg.list_runs() == []
        assert not reg.exists("r-x")
        assert not workspace.exists()  # readers never create the workspace
        with pytest.raises(RunNotFoundError, match="No run 'r-x' in this workspace"):
            reg.get("r-x")

    def test_missing_tables_read_empty(self, workspace):
        workspace.mkdir()
        sqlite3.connect(workspace / "registry.sqlite").close()
        assert RunRegistry(workspace).list_runs() == []

    @pytest.mark.usefixtures("db_backend")
    def test_create_run_writes_record_and_run_json(self, workspace):
        reg = RunRegistry(workspace)
        rec = make_run(reg)
        assert re.fullmatch(r"r-\d{8}-[0-9a-f]{6}", rec.run_id)
        assert rec.status == "queued"
        assert rec.dataset_fingerprint == "sha256:abc"
        assert rec.template_name == "mlp_classifier"
        assert rec.params == {"hidden_units": [8]}
        assert rec.schedule == {"max_steps": 10}
        assert rec.num_processes == 1 and rec.tags == () and rec.note == ""
        spec = json.loads((workspace / "runs" / rec.run_id / "run.json").read_text())
        assert spec["run_id"] == rec.run_id
        assert spec["template"]["code"].startswith("def model_fn")
        assert spec["model_dir"] == "model"
        assert reg.get(rec.run_id) == rec

    def test_wal_and_schema_version(self, workspace):
        make_run(RunRegistry(workspace))
        conn = sqlite3.connect(workspace / "registry.sqlite")
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("SELECT MAX(version) FROM schema_version").fetchone()[0] == SCHEMA_VERSION
        conn.close()
        make_run(RunRegistry(workspace))  # re-opening does not re-run migrations
        conn = sqlite3.connect(workspace / "registry.sqlite")
        assert conn.execute("SELECT COUNT(*) FROM schema_version").fetchone()[0] == SCHEMA_VERSION
        conn.close()

    def test_a_workspace_of_the_first_schema_is_read_then_migrated(self, workspace):
        """Issue 14 added columns (attempt, pid_started, last_step, last_step_at): an older
        registry is readable before its first write, which migrates it in place."""
        reg = RunRegistry(workspace)
        rec = make_run(reg)
        with sqlite3.connect(workspace / "registry.sqlite") as conn:  # back to schema 1
            conn.execute("DROP TABLE IF EXISTS registry_alembic_version")  # as a workbench before alembic made it
            conn.execute("DROP INDEX runs_owner")
            for column in ("attempt", "pid_started", "last_step", "last_step_at", "trashed_at",
                           "heartbeat_uptime", "owner"):
                conn.execute(f"ALTER TABLE runs DROP COLUMN {column}")
            conn.execute("DROP TABLE audit_log")
            conn.execute("DELETE FROM schema_version WHERE version > 1")
        old = RunRegistry(workspace)
        assert old.get(rec.run_id).attempt == 0 and old.get(rec.run_id).last_step is None
        assert old.set_status(rec.run_id, "running", pid=os.getpid()).attempt == 1
        with sqlite3.connect(workspace / "registry.sqlite") as conn:
            assert conn.execute("SELECT MAX(version) FROM schema_version").fetchone()[0] == SCHEMA_VERSION == 5

    @pytest.mark.usefixtures("db_backend")
    def test_invalid_create_collects_problems(self, workspace):
        reg = RunRegistry(workspace)
        with pytest.raises(ValueError, match=r"action must be one of .* given: 'fit'.*"
                                             r"num_processes must be an int >= 1, given: 0"):
            make_run(reg, action="fit", num_processes=0)
        with pytest.raises(ValueError, match="parent_relation must be one of"):
            make_run(reg, parent_run_id="r-x", parent_relation="clone")
        with pytest.raises(TypeError, match="params must be JSON-serialisable"):
            make_run(reg, params={"f": object()})
        assert reg.list_runs() == []

    @pytest.mark.usefixtures("db_backend")
    def test_parent_must_exist(self, workspace):
        reg = RunRegistry(workspace)
        with pytest.raises(RunNotFoundError):
            make_run(reg, parent_run_id="r-nope", parent_relation="warm_start")
        parent = make_run(reg)
        child = make_run(reg, parent_run_id=parent.run_id, parent_relation="warm_start",
                         checkpoint_path="model/ckpt-10.pt")
        assert (child.parent_run_id, child.parent_relation) == (parent.run_id, "warm_start")

    @pytest.mark.usefixtures("db_backend")
    def test_list_filters(self, workspace):
        reg = RunRegistry(workspace)
        a, b = make_run(reg, name="a"), make_run(reg, name="b", action="evaluate")
        reg.set_status(a.run_id, "running", pid=1)
        assert [r.name for r in reg.list_runs()] == ["b", "a"]
        assert [r.name for r in reg.list_runs(newest_first=False)] == ["a", "b"]
        assert [r.name for r in reg.list_runs("running")] == ["a"]
        assert [r.name for r in reg.list_runs(["running", "queued"], action="evaluate")] == ["b"]
        reg.set_tags(b.run_id, ["best", " best ", "x"])
        assert [r.name for r in reg.list_runs(tag="best")] == ["b"]
        with pytest.raises(ValueError, match="status must be one of"):
            reg.list_runs("done")

    def test_run_ids_unique(self):
        assert len({new_run_id() for _ in range(200)}) > 190


@pytest.mark.usefixtures("db_backend")
class TestStateMachine:
    def test_happy_path_sets_timestamps(self, workspace):
        reg = RunRegistry(workspace)
        rec = make_run(reg)
        running = reg.set_status(rec.run_id, "running", pid=4242)
        assert running.pid == 4242 and running.started_at and running.heartbeat_at
        done = reg.set_status(rec.run_id, "succeeded")
        assert done.finished_at >= done.started_at and done.is_finished

    def test_failed_keeps_error_and_traceback(self, workspace):
        reg = RunRegistry(workspace)
        rec = make_run(reg)
        reg.set_status(rec.run_id, "running")
        failed = reg.set_status(rec.run_id, "failed", error="ValueError: x", traceback="Traceback...")
        assert (failed.error, failed.traceback) == ("ValueError: x", "Traceback...")
        again = reg.set_status(rec.run_id, "queued")  # resume clears the error
        assert again.error is None and again.traceback is None and again.finished_at is None

    @pytest.mark.parametrize("start,target", [
        ("queued", "succeeded"), ("queued", "lost"), ("queued", "queued"),
        ("running", "queued"), ("running", "running"), ("succeeded", "running"),
        ("cancelled", "succeeded"),
    ])
    def test_invalid_transitions(self, workspace, start, target):
        reg = RunRegistry(workspace)
        rec = make_run(reg)
        route = {"queued": [], "running": ["running"], "succeeded": ["running", "succeeded"],
                 "cancelled": ["cancelled"]}[start]
        for status in route:
            reg.set_status(rec.run_id, status)
        allowed = list(ALLOWED_TRANSITIONS[start])
        with pytest.raises(InvalidTransitionError, match=re.escape(
                f"Cannot move run {rec.run_id!r} from {start!r} to {target!r}; "
                f"from {start!r} a run can go to {allowed}.")):
            reg.set_status(rec.run_id, target)
        assert reg.get(rec.run_id).status == start

    def test_every_finished_status_can_resume(self, workspace):
        reg = RunRegistry(workspace)
        for status in ("succeeded", "failed", "stopped", "cancelled", "lost"):
            rec = make_run(reg)
            reg.set_status(rec.run_id, "running")
            reg.set_status(rec.run_id, status)
            assert reg.set_status(rec.run_id, "queued").status == "queued"

    def test_queued_can_be_cancelled(self, workspace):
        reg = RunRegistry(workspace)
        rec = make_run(reg)
        assert reg.set_status(rec.run_id, "cancelled").status == "cancelled"

    def test_expected_guard_and_unknown_status(self, workspace):
        reg = RunRegistry(workspace)
        rec = make_run(reg)
        with pytest.raises(InvalidTransitionError, match=r"is 'queued', expected \['running'\]"):
            reg.set_status(rec.run_id, "lost", expected="running")
        with pytest.raises(ValueError, match="status must be one of"):
            reg.set_status(rec.run_id, "done")
        assert set(ALLOWED_TRANSITIONS) <= set(STATUSES)

    def test_heartbeat_only_while_running(self, workspace):
        reg = RunRegistry(workspace)
        rec = make_run(reg)
        reg.heartbeat(rec.run_id)
        assert reg.get(rec.run_id).heartbeat_at is None
        first = reg.set_status(rec.run_id, "running").heartbeat_at
        reg.heartbeat(rec.run_id, pid=7)
        rec2 = reg.get(rec.run_id)
        assert rec2.heartbeat_at >= first and rec2.pid == 7


@pytest.mark.usefixtures("db_backend")
class TestSummaryAndEdits:
    def test_summary_last_best_step(self, workspace):
        reg = RunRegistry(workspace)
        rec = make_run(reg)
        reg.update_summary(rec.run_id, [
            {"step": 1, "split": "train", "name": "loss", "value": 2.0},
            {"step": 2, "split": "train", "name": "loss", "value": 0.5},
            {"step": 3, "split": "train", "name": "loss", "value": 0.7},
            {"step": 2, "split": "eval", "name": "accuracy", "value": 0.8},
            {"step": 3, "split": "eval", "name": "accuracy", "value": 0.6},
            {"step": 3, "split": "eval", "name": "error_rate", "value": 0.4},
        ])
        summary = reg.update_summary(rec.run_id, {"accuracy": 0.9, "loss": float("nan")},
                                     step=4, split="eval").summary
        assert summary["train/loss"] == {"last": 0.7, "last_step": 3, "best": 0.5, "best_step": 2}
        assert summary["eval/accuracy"] == {"last": 0.9, "last_step": 4, "best": 0.9, "best_step": 4}
        assert summary["eval/error_rate"]["best"] == 0.4
        nan_loss = summary["eval/loss"]
        assert nan_loss["best"] is None and nan_loss["last"] != nan_loss["last"]

    def test_refresh_summary_is_made_afresh_from_the_metrics_file(self, workspace):
        """After a resume dropped a dead attempt's rows, its loss must not linger in the summary."""
        reg = RunRegistry(workspace)
        rec = make_run(reg)
        reg.update_summary(rec.run_id, [{"step": 340, "split": "train", "name": "loss", "value": 0.01}])
        (reg.run_dir(rec.run_id) / paths.METRICS_FILE).write_text("".join(
            json.dumps({"step": s, "wall_time": 1.0, "split": "train", "name": "loss", "value": v}) + "\n"
            for s, v in ((100, 0.9), (200, 0.5))))
        assert reg.refresh_summary(rec.run_id).summary == {
            "train/loss": {"last": 0.5, "last_step": 200, "best": 0.5, "best_step": 200}}

    def test_rename_tags_note(self, workspace):
        reg = RunRegistry(workspace)
        rec = make_run(reg)
        assert reg.rename(rec.run_id, "  new name ").name == "new name"
        assert reg.set_tags(rec.run_id, ["a", "b", "a", ""]).tags == ("a", "b")
        assert reg.set_note(rec.run_id, "looks good").note == "looks good"
        with pytest.raises(ValueError, match="name must be a non-empty str, given: ''"):
            reg.rename(rec.run_id, "")
        with pytest.raises(TypeError, match="tags must be a list of str, given: 'abc'"):
            reg.set_tags(rec.run_id, "abc")
        with pytest.raises(RunNotFoundError):
            reg.set_note("r-missing", "x")

    def test_delete_removes_row_and_folder(self, workspace):
        reg = RunRegistry(workspace)
        rec = make_run(reg)
        folder = reg.run_dir(rec.run_id)
        (folder / "model").mkdir()
        (folder / "metrics.jsonl").write_text("{}\n")
        reg.set_status(rec.run_id, "running")
        with pytest.raises(ValueError, match="is running; cancel it before deleting it"):
            reg.delete(rec.run_id)
        reg.set_status(rec.run_id, "cancelled")
        reg.delete(rec.run_id)
        assert not folder.exists() and not reg.exists(rec.run_id)
        with pytest.raises(RunNotFoundError):
            reg.delete(rec.run_id)


@pytest.mark.usefixtures("db_backend")
class TestChangeStamp:
    """``change_stamp``: what the Runs page polls to redraw only when the runs changed."""

    def test_lifecycle_changes_it_and_progress_does_not(self, workspace):
        from estimator_workbench.store import trash

        reg = RunRegistry(workspace)
        seen = [reg.change_stamp()]
        assert seen[0] == ()  # no database yet: nothing to fingerprint, and nothing created

        def changed(what: str) -> None:
            stamp = reg.change_stamp()
            assert stamp != seen[-1], f"{what} left the stamp as it was"
            seen.append(stamp)

        def same(what: str) -> None:
            assert reg.change_stamp() == seen[-1], f"{what} changed the stamp"

        rec = make_run(reg)
        changed("a new queued run")
        attempt = reg.set_status(rec.run_id, "running", pid=os.getpid()).attempt
        changed("queued -> running")
        reg.heartbeat(rec.run_id, pid=os.getpid(), attempt=attempt, last_step=5, last_step_at=1.0)
        same("a heartbeat with progress")
        reg.update_summary(rec.run_id, {"loss": 0.5}, step=5, attempt=attempt)
        same("a metric summary")
        reg.set_status(rec.run_id, "succeeded", attempt=attempt)
        changed("running -> succeeded")
        reg.set_tags(rec.run_id, ["baseline"])
        changed("a tag")
        reg.rename(rec.run_id, "a longer name")
        changed("a rename")
        trash.trash_run(reg, rec.run_id)
        changed("moving it to the trash")
        trash.restore_run(reg, rec.run_id)
        changed("restoring it")
        reg.set_status(rec.run_id, "queued")
        changed("a resume (succeeded -> queued)")
        other = make_run(reg, name="other")
        changed("a second run")
        reg.delete(other.run_id)
        changed("deleting it")
        assert RunRegistry(workspace).change_stamp() == seen[-1]  # another connection reads the same


def _hammer(root: str, run_id: str, n: int) -> None:
    reg = RunRegistry(root)
    for i in range(n):
        reg.heartbeat(run_id)
        reg.update_summary(run_id, {"loss": 1.0 / (i + 1)}, step=i)
        reg.list_runs()


@pytest.mark.usefixtures("db_backend")
class TestConcurrency:
    def test_threads_write_without_lock_errors(self, workspace):
        reg = RunRegistry(workspace)
        recs = [make_run(reg) for _ in range(4)]
        for rec in recs:
            reg.set_status(rec.run_id, "running")
        errors = []

        def work(run_id):
            try:
                _hammer(str(workspace), run_id, 30)
                make_run(RunRegistry(workspace))
            except Exception as exc:  # pragma: no cover - the failure we test against
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(r.run_id,)) for r in recs]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert len(reg.list_runs()) == 8
        assert all(reg.get(r.run_id).summary["train/loss"]["best_step"] == 29 for r in recs)

    @pytest.mark.slow
    def test_processes_write_without_lock_errors(self, workspace):
        # Plain subprocesses, not multiprocessing: its resource tracker would outlive the test.
        reg = RunRegistry(workspace)
        recs = [make_run(reg) for _ in range(3)]
        for rec in recs:
            reg.set_status(rec.run_id, "running")
        script = ("import sys; sys.path[:0] = [sys.argv[3], sys.argv[4]]; "
                  "from test_registry import _hammer; _hammer(sys.argv[1], sys.argv[2], 40)")
        env = dict(os.environ, PYTHONPATH="")
        procs = [subprocess.Popen([sys.executable, "-c", script, str(workspace), r.run_id,
                                   str(REPO), str(HERE)], env=env, stderr=subprocess.PIPE)
                 for r in recs]
        try:
            _hammer(str(workspace), recs[0].run_id, 40)  # and this process too
            results = [(p.wait(120), p.stderr.read().decode()) for p in procs]
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
                p.stderr.close()
        assert results == [(0, ""), (0, ""), (0, "")]
        assert all("train/loss" in reg.get(r.run_id).summary for r in recs)
