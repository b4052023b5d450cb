"""The trash (issue 15 item 1): delete moves a run to the trash, which hides it from every list
until it is restored or the trash is emptied; the CLI's ``delete`` and ``trash`` commands; and the
pure helpers of the Runs hub (smoothed loss, ETA, queue places, "Start from" list)."""

from __future__ import annotations

import io
import json
import os
import sqlite3
import time
from pathlib import Path

import pytest

from estimator_workbench.cli import commands as cli
from estimator_workbench.store import paths, trash
from estimator_workbench.store.records import RunNotFoundError
from estimator_workbench.store.registry import SCHEMA_VERSION, RunRegistry
from estimator_workbench.ui import tables


def make_run(reg: RunRegistry, name: str = "demo", **overrides):
    kwargs = dict(name=name, action="train",
                  dataset={"ref": {"kind": "bundled", "name": "iris"}, "fingerprint": "sha256:abc"},
                  template={"name": "mlp_classifier", "code": "def model_fn(features): ...\n"},
                  params={}, run_config={}, schedule={"max_steps": 100})
    kwargs.update(overrides)
    return reg.create_run(**kwargs)


def finished(reg: RunRegistry, name: str = "done", **overrides):
    rec = make_run(reg, name, **overrides)
    reg.set_status(rec.run_id, "running")
    return reg.set_status(rec.run_id, "succeeded")


def ids(records):
    return [r.run_id for r in records]


class TestRegistryTrash:
    @pytest.mark.usefixtures("db_backend")
    def test_a_trashed_run_is_hidden_from_every_list_and_keeps_its_folder(self, workspace):
        reg = RunRegistry(workspace)
        keep, gone = finished(reg, "keep"), finished(reg, "gone")
        folder = reg.run_dir(gone.run_id)
        (folder / "model").mkdir()
        (folder / "model" / "model.ckpt-10").write_bytes(b"weights")
        before = time.time()
        assert trash.move_to_trash(reg, [gone.run_id]).done == [gone.run_id]
        assert ids(reg.list_runs()) == [keep.run_id]
        assert ids(reg.list_runs("succeeded")) == [keep.run_id]
        assert ids(reg.list_runs(trashed=True)) == [gone.run_id]
        assert set(ids(reg.list_runs(trashed=None))) == {keep.run_id, gone.run_id}
        # kept in place: paths into the folder (checkpoints of children, resume) stay valid
        assert (folder / "model" / "model.ckpt-10").read_bytes() == b"weights"
        assert reg.get(gone.run_id).name == "gone"
        [item] = trash.trashed_runs(reg)
        assert item.record.run_id == gone.run_id and before <= item.trashed_at <= time.time()

    @pytest.mark.usefixtures("db_backend")
    def test_restore_brings_it_back(self, workspace):
        reg = RunRegistry(workspace)
        rec = finished(reg)
        trash.trash_run(reg, rec.run_id)
        assert trash.restore(reg, [rec.run_id]).done == [rec.run_id]
        assert ids(reg.list_runs()) == [rec.run_id] and trash.trashed_runs(reg) == []

    @pytest.mark.parametrize("status", ["queued", "running"])
    @pytest.mark.usefixtures("db_backend")
    def test_an_active_run_cannot_be_trashed(self, workspace, status):
        reg = RunRegistry(workspace)
        rec = make_run(reg, "busy")
        if status == "running":
            reg.set_status(rec.run_id, "running")
        with pytest.raises(ValueError, match=rf"Run '{rec.run_id}' \('busy'\) is {status}; cancel it "
                                             "before moving it to the trash"):
            trash.trash_run(reg, rec.run_id)
        outcome = trash.move_to_trash(reg, [rec.run_id])
        assert outcome.done == [] and "cancel it" in outcome.refused[rec.run_id]
        assert ids(reg.list_runs()) == [rec.run_id]

    @pytest.mark.usefixtures("db_backend")
    def test_empty_trash_deletes_rows_and_folders_of_trashed_runs_only(self, workspace):
        reg = RunRegistry(workspace)
        keep, gone = finished(reg, "keep"), finished(reg, "gone")
        trash.trash_run(reg, gone.run_id)
        outcome = trash.empty_trash(reg)
        assert outcome.done == [gone.run_id] and outcome.refused == {}
        assert not reg.run_dir(gone.run_id).exists() and not reg.exists(gone.run_id)
        assert reg.run_dir(keep.run_id).exists() and ids(reg.list_runs()) == [keep.run_id]
        refused = trash.empty_trash(reg, [keep.run_id])
        assert refused.done == [] and "is not in the trash" in refused.refused[keep.run_id]
        assert reg.exists(keep.run_id)

    @pytest.mark.usefixtures("db_backend")
    def test_empty_trash_spares_a_run_whose_folder_an_active_run_reads(self, workspace):
        reg = RunRegistry(workspace)
        parent = finished(reg, "parent")
        child = make_run(reg, "eval", action="evaluate", parent_run_id=parent.run_id,
                         parent_relation="evaluate_from",
                         checkpoint_path=str(reg.run_dir(parent.run_id) / "model" / "model.ckpt-10"))
        trash.trash_run(reg, parent.run_id)
        outcome = trash.empty_trash(reg)
        assert outcome.done == [] and f"still read by active run(s) ['{child.run_id}']" in outcome.refused[parent.run_id]
        assert reg.run_dir(parent.run_id).exists()
        reg.set_status(child.run_id, "cancelled")
        assert trash.empty_trash(reg).done == [parent.run_id]

    def test_a_workspace_of_an_older_schema_is_listed_before_and_migrated_at_the_first_write(self, workspace):
        reg = RunRegistry(workspace)
        rec = finished(reg)
        # an older workbench's registry: no trashed_at column (version 3) nor what came after it
        with sqlite3.connect(reg.db_path) as conn:
            conn.execute("DROP TABLE IF EXISTS registry_alembic_version")  # as a workbench before alembic made it
            conn.execute("ALTER TABLE runs DROP COLUMN trashed_at")
            conn.execute("ALTER TABLE runs DROP COLUMN heartbeat_uptime")  # version 4 (issue 24)
            conn.execute("DROP INDEX runs_owner")  # version 5 (issue 26)
            conn.execute("ALTER TABLE runs DROP COLUMN owner")
            conn.execute("DROP TABLE audit_log")
            conn.execute("DELETE FROM schema_version WHERE version >= 3")
        old = RunRegistry(workspace)
        assert ids(old.list_runs()) == [rec.run_id]  # readers never write: no migration yet
        assert old.list_runs(trashed=True) == [] and trash.trashed_times(old) == {}
        trash.trash_run(old, rec.run_id)  # a write migrates
        assert old.list_runs() == [] and ids(old.list_runs(trashed=True)) == [rec.run_id]
        with sqlite3.connect(reg.db_path) as conn:
            assert conn.execute("SELECT MAX(version) FROM schema_version").fetchone()[0] == SCHEMA_VERSION

    @pytest.mark.usefixtures("db_backend")
    def test_an_unknown_run_is_reported(self, workspace):
        reg = RunRegistry(workspace)
        finished(reg)
        with pytest.raises(RunNotFoundError):
            trash.trash_run(reg, "r-20260101-000000")
        assert "No run 'r-x'" in trash.restore(reg, ["r-x"]).refused["r-x"]


class TestCommands:
    @pytest.mark.usefixtures("db_backend")
    def test_delete_list_restore_empty(self, workspace, capsys):
        reg = RunRegistry(workspace)
        keep, gone = finished(reg, "keep"), finished(reg, "gone")
        assert cli.main(["delete", gone.run_id]) == 0
        assert f"Run {gone.run_id} moved to the trash" in capsys.readouterr().out
        assert cli.main(["runs"]) == 0
        out = capsys.readouterr().out
        assert keep.run_id in out and gone.run_id not in out
        assert cli.main(["runs", "--include-trashed"]) == 0
        assert "succeeded (trashed)" in capsys.readouterr().out
        assert cli.main(["runs", "--json", "--include-trashed"]) == 0
        listed = {r["run_id"]: r["trashed_at"] for r in json.loads(capsys.readouterr().out)}
        assert listed[keep.run_id] is None and listed[gone.run_id] > 0
        assert cli.main(["trash", "list"]) == 0
        out = capsys.readouterr().out
        assert gone.run_id in out and keep.run_id not in out
        assert cli.main(["trash", "restore", gone.run_id]) == 0
        assert set(ids(reg.list_runs())) == {keep.run_id, gone.run_id}
        assert cli.main(["delete", gone.run_id]) == 0
        assert cli.main(["trash", "empty", "--yes"]) == 0
        assert "Deleted 1 runs for good." in capsys.readouterr().out
        assert not reg.exists(gone.run_id) and not reg.run_dir(gone.run_id).exists()

    def test_a_delete_killed_midway_leaves_nothing_unlisted(self, workspace, capsys, monkeypatch):
        """Issue 24 item 12: SIGKILL during ``trash empty`` right after the row was deleted left a
        folder that no command listed or removed. Now the folder goes first: killed there, the
        run is still in the trash and the next ``trash empty`` finishes it."""
        import shutil

        from estimator_workbench.store import registry as registry_module

        reg = RunRegistry(workspace)
        run = finished(reg, "killed")
        assert cli.main(["delete", run.run_id]) == 0

        def killed(*args, **kwargs):
            raise SystemExit("SIGKILL")  # the process dies at this point of the delete

        with monkeypatch.context() as patch:
            patch.setattr(registry_module.shutil, "rmtree", killed)
            with pytest.raises(SystemExit):
                trash.empty_trash(reg)
        assert [t.record.run_id for t in trash.trashed_runs(reg)] == [run.run_id]  # still listed
        assert cli.main(["trash", "empty", "--yes"]) == 0
        assert not reg.exists(run.run_id) and not reg.run_dir(run.run_id).exists()
        # A folder an older workbench left behind (row gone, folder kept) is listed and removed.
        orphan = reg.run_dir(run.run_id)
        shutil.copytree(reg.run_dir(finished(reg, "model").run_id), orphan)
        old = time.time() - 120
        os.utime(orphan, (old, old))
        capsys.readouterr()
        assert cli.main(["trash", "list"]) == 0
        assert f"1 run folder(s) without a registry row (an interrupted delete), removed by " \
               f"`estimator-workbench trash empty`: {orphan}" in capsys.readouterr().out
        assert cli.main(["trash", "empty", "--yes"]) == 0
        assert f"Removed 1 orphan folder(s) (an interrupted delete): {run.run_id}." in capsys.readouterr().out
        assert not orphan.exists() and len(list(paths.runs_root(workspace).iterdir())) == 1

    def test_clear_errors(self, workspace, capsys, monkeypatch):
        reg = RunRegistry(workspace)
        busy = make_run(reg, "busy")
        done = finished(reg)
        assert cli.main(["delete", busy.run_id]) == 2
        assert f"Run '{busy.run_id}' ('busy') is queued; cancel it before moving it" in capsys.readouterr().err
        assert cli.main(["trash", "restore", done.run_id]) == 2
        assert f"Not in the trash: {done.run_id}" in capsys.readouterr().err
        assert cli.main(["delete", done.run_id]) == 0
        # a trashed run is out of reach of the other commands until restored
        assert cli.main(["export", done.run_id]) == 2
        assert (f"Run '{done.run_id}' is in the trash; restore it first with "
                f"`estimator-workbench trash restore {done.run_id}`") in capsys.readouterr().err
        monkeypatch.setattr(cli.sys, "stdin", io.StringIO(""))  # not a terminal: nobody to ask
        assert cli.main(["trash", "empty"]) == 2
        assert "trash empty deletes 1 runs for good: confirm with --yes" in capsys.readouterr().err
        assert reg.exists(done.run_id)
        assert cli.main(["trash", "list", done.run_id]) == 2
        assert "trash list takes no run ids" in capsys.readouterr().err
        assert cli.main(["delete", "../x"]) == 2
        assert "Unsafe name '../x'" in capsys.readouterr().err


def write_metrics(folder: Path, rows) -> Path:
    path = folder / paths.METRICS_FILE
    with open(path, "a") as fh:
        for step, wall, split, name, value in rows:
            fh.write(json.dumps({"step": step, "wall_time": wall, "split": split, "name": name,
                                 "value": value}) + "\n")
    return path


class TestHubHelpers:
    def test_smoothed_loss_is_tensorboards_debiased_ema_of_the_train_loss(self, tmp_path):
        path = write_metrics(tmp_path, [(1, 0.0, "train", "loss", 4.0), (2, 1.0, "eval", "loss", 9.0),
                                        (3, 2.0, "train", "loss", 2.0), (4, 3.0, "train", "steps_per_sec", 5.0),
                                        (5, 4.0, "train", "loss", 1.0)])
        w = 0.5
        ema = ((1 - w) * 4.0 * w * w + (1 - w) * 2.0 * w + (1 - w) * 1.0) / (1 - w ** 3)
        assert tables.smoothed_train_loss(path, weight=w) == pytest.approx(ema)  # 1.571..., not the last 1.0
        assert tables.smoothed_train_loss(tmp_path / "missing.jsonl") is None
        write_metrics(tmp_path, [(6, 5.0, "train", "loss", 1.0)])  # the file changed: read again
        assert tables.smoothed_train_loss(path, weight=w) == pytest.approx(
            (ema * (1 - w ** 3) * w + (1 - w) * 1.0) / (1 - w ** 4))

    def test_any_json_layout_is_read_and_non_finite_losses_are_skipped(self, tmp_path):
        other = tmp_path / "other.jsonl"  # keys in another order (a file written by other code)
        other.write_text('{"value": 4.0, "name": "loss", "split": "train", "step": 1, "wall_time": 0.0}\n'
                         '{"value": NaN, "name": "loss", "split": "train", "step": 2, "wall_time": 1.0}\n'
                         '{"value": 9.0, "name": "loss", "split": "eval", "step": 2, "wall_time": 1.0}\n'
                         '{"value": 2.0, "name": "loss", "split": "train", "step": 3, "wall_time": 2.0}\n'
                         '{"value": 1.0, "name": "loss", "spl')  # a line being written
        expected = (0.25 * 4.0 + 0.5 * 2.0) / 0.75
        assert tables.smoothed_train_loss(other, weight=0.5) == pytest.approx(expected)
        ours = write_metrics(tmp_path, [(1, 0.0, "train", "loss", 4.0), (2, 1.0, "train", "loss", float("nan")),
                                        (2, 1.0, "eval", "loss", 9.0), (3, 2.0, "train", "loss", 2.0)])
        assert b'"value": NaN}' in ours.read_bytes()
        assert tables.smoothed_train_loss(ours, weight=0.5) == pytest.approx(expected)

    def test_only_the_end_of_a_long_metrics_file_is_read(self, tmp_path):
        path = write_metrics(tmp_path, [(s, float(s), "train", "loss", 100.0 if s < 5000 else 1.0)
                                        for s in range(1, 5201)])
        # ~200 lines of 1.0 at the end: the EMA there is 1.0 (the 100s lie outside the tail)
        assert tables.smoothed_train_loss(path) == pytest.approx(1.0)

    def test_eta_from_the_recent_step_rate_and_queue_places(self, workspace):
        reg = RunRegistry(workspace)
        running = make_run(reg, "running", schedule={"max_steps": 1000})
        reg.set_status(running.run_id, "running")
        now = time.time()
        # 10 steps/s during the last minute, after a slow start (1 step/s) two minutes earlier
        write_metrics(reg.run_dir(running.run_id),
                      [(s, now - 200 + s, "train", "loss", 1.0) for s in range(10, 60, 10)]
                      + [(400 + 10 * i, now - 50 + i, "train", "loss", 1.0) for i in range(0, 51)])
        first, second = make_run(reg, "q1"), make_run(reg, "q2")
        records = reg.list_runs()
        positions = tables.queue_positions(records)
        assert positions == {first.run_id: 1, second.run_id: 2}
        progress = tables.run_progress(reg.get(running.run_id), workspace, positions)
        assert progress.step == 900 and progress.steps_per_s == pytest.approx(10.0)
        assert progress.eta_s == pytest.approx(10.0) and progress.text() == "step 900 / 1000 · 10 steps/s · ETA 0:10"
        assert tables.run_progress(reg.get(second.run_id), workspace, positions).text() == \
            "queued: position 2 (1 = next)"
        frame = tables.hub_frame(records, workspace, None, positions).set_index("name")
        assert frame.loc["q1", "queue"] == 1 and frame.loc["running", "ETA"] == "0:10"
        assert frame.loc["running", "progress"] == pytest.approx(0.9)

    def test_hub_frame_columns_best_metric_and_filters(self, workspace):
        reg = RunRegistry(workspace)
        a = finished(reg, "alpha", template={"name": "linear", "code": "x"})
        b = finished(reg, "beta", dataset={"ref": {"kind": "file", "path": "/data/wine.csv"}})
        reg.update_summary(a.run_id, {"accuracy": 0.75, "loss": 0.6}, step=10, split="eval")
        reg.update_summary(a.run_id, {"accuracy": 0.70}, step=20, split="eval")
        reg.set_tags(b.run_id, ["baseline", "x"])
        records = reg.list_runs()
        assert tables.eval_metric_names(records) == ["accuracy", "loss"]
        assert tables.default_metric(tables.eval_metric_names(records)) == "accuracy"
        frame = tables.hub_frame(records, workspace, "accuracy").set_index("name")
        assert list(frame.columns)[:17] == ["status", "action", "progress", "ETA", "queue", "dataset",
                                            "template", "steps", "final eval accuracy", "best eval accuracy",
                                            "best at step", "smoothed loss", "created", "duration", "tags", "owner",
                                            "run"]
        # final: the last evaluation (0.70 at step 20); best: 0.75, reached at step 10
        assert (frame.loc["alpha", "final eval accuracy"], frame.loc["alpha", "best eval accuracy"],
                frame.loc["alpha", "best at step"]) == (0.70, 0.75, 10)
        assert frame.loc["beta", "dataset"] == "wine.csv"
        assert ids(tables.filter_runs(records, tags=["baseline"])) == [b.run_id]
        assert ids(tables.filter_runs(records, templates=["linear"])) == [a.run_id]
        assert ids(tables.filter_runs(records, datasets=["wine.csv"])) == [b.run_id]
        assert ids(tables.filter_runs(records, text="^alp")) == [a.run_id]

    def test_has_checkpoint(self, tmp_path):
        assert not tables.has_checkpoint(tmp_path)  # no model/ folder
        (tmp_path / "model").mkdir()
        (tmp_path / "model" / "checkpoint").write_text("model.ckpt-5")
        (tmp_path / "model" / "model.ckpt-5.tmp").write_bytes(b"")
        assert not tables.has_checkpoint(tmp_path)  # an index and a partial write only
        (tmp_path / "model" / "model.ckpt-5").write_bytes(b"weights")
        assert tables.has_checkpoint(tmp_path)
        assert tables.list_checkpoints(tmp_path)["file"].tolist() == ["model.ckpt-5"]

    def test_start_from_lists_finished_training_runs_by_name_with_status(self, workspace):
        reg = RunRegistry(workspace)
        done = finished(reg, "trained")
        reg.update_summary(done.run_id, {"loss": 0.5}, step=100)
        make_run(reg, "still queued")
        finished(reg, "an evaluation", action="evaluate")
        gone = finished(reg, "trashed")
        trash.trash_run(reg, gone.run_id)
        picks = tables.finished_runs_for_start(reg.list_runs())
        assert ids(picks) == [done.run_id]
        assert tables.start_from_label(picks[0]) == f"trained · succeeded · step 100 · {done.run_id}"
