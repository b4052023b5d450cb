"""Faults inside a workbench run, end to end through ``estimator_workbench.execution.runner.run`` and the real engine
(in-process, iris, a few dozen steps): NaN loss, disk full while writing metrics or a checkpoint,
a corrupted checkpoint or state file.

ENOSPC inside the engine's background checkpoint writer is covered at the engine level by
tests/estimator_engine/test_estimator.py::TestBackgroundCheckpointWrites.
"""

from __future__ import annotations

import errno
import json
import os
import re
from pathlib import Path

import pytest

from estimator_engine import checkpoints
from estimator_workbench.execution import runner
from estimator_workbench.store.registry import RunRegistry
from estimator_workbench.store.run_spec import RunSpec

NAN_AFTER = "    train_op = ee.minimize("
NAN_CODE = ("    if ee.get_global_step() >= 7:  # diverges at step 8\n"
            "        loss = loss * float('nan')\n")


def template_code(inject: str | None = None) -> str:
    from estimator_workbench import templates

    code = templates.get_template("mlp_classifier").code
    if inject:
        assert NAN_AFTER in code
        code = code.replace(NAN_AFTER, inject + NAN_AFTER, 1)
    return code


def make_run(workspace: Path, action: str = "train", code: str | None = None,
             schedule: dict | None = None, run_config: dict | None = None, **kwargs):
    from estimator_workbench.cli import commands as cli

    return RunRegistry(workspace).create_run(
        name="fault", action=action, dataset=cli._dataset_dict("iris", None),
        template={"name": "mlp_classifier", "code": code or template_code()},
        params={"hidden_units": "8"}, run_config=run_config or {"tf_random_seed": 0},
        schedule=schedule or {"max_steps": 20, "metrics_every_n_steps": 1}, **kwargs)


def execute(workspace: Path, run_id: str):
    code = runner.run(RunRegistry(workspace).run_dir(run_id), install_signal_handlers=False)
    return code, RunRegistry(workspace).get(run_id)


def model_dir(workspace: Path, run_id: str) -> Path:
    return RunRegistry(workspace).run_dir(run_id) / "model"


def test_nan_loss_fails_the_run_with_step_and_last_finite_loss(workspace):
    rec = make_run(workspace, code=template_code(NAN_CODE),
                   run_config={"tf_random_seed": 0, "save_checkpoints_steps": 5})
    code, done = execute(workspace, rec.run_id)
    assert code == 1 and done.status == "failed"
    match = re.search(r"NaN loss during training\. \(at global step (\d+), last finite loss "
                      r"([0-9.e+-]+)\)", done.error)
    assert match, done.error
    assert int(match.group(1)) == 8
    last_finite = float(match.group(2))
    # The last finite loss is the one the metrics file recorded for the step before.
    from estimator_workbench.store.metrics_store import read_all

    frame = read_all(RunRegistry(workspace).run_dir(rec.run_id) / "metrics.jsonl")
    losses = frame[(frame["name"] == "loss") & (frame["step"] == 7)]["value"]
    assert last_finite == pytest.approx(float(losses.iloc[-1]), rel=1e-5)
    # What survives: the checkpoint written before the divergence, loadable and finite.
    latest = checkpoints.load_checkpoint(model_dir(workspace, rec.run_id))
    assert latest["global_step"] == 5
    assert all(bool(v.isfinite().all()) for v in latest["variables"].values())


def test_nan_policy_stop_ends_stopped_and_keeps_the_last_finite_checkpoint(workspace):
    rec = make_run(workspace, code=template_code(NAN_CODE),
                   run_config={"tf_random_seed": 0, "save_checkpoints_steps": 5},
                   schedule={"max_steps": 20, "metrics_every_n_steps": 1, "nan_policy": "stop"})
    code, done = execute(workspace, rec.run_id)
    assert code == 0 and done.status == "stopped"
    assert re.fullmatch(r"NaN loss at global step 8 \(last finite loss [0-9.]+\); stopped as the run asked "
                        r"\(nan_policy 'stop'\)\. The newest checkpoint, step 5, is from before the divergence: "
                        r"lower the learning rate and resume, or warm-start a new run from it\.", done.error), done.error
    latest = checkpoints.load_checkpoint(model_dir(workspace, rec.run_id))
    assert latest["global_step"] == 5  # the diverged step 8 was not checkpointed
    assert all(bool(v.isfinite().all()) for v in latest["variables"].values())


def test_unknown_nan_policy_is_refused_before_the_run_exists(workspace, capsys):
    """The contract refuses it when the run is registered (no run, no folder); a run.json edited
    afterwards is refused by the runner as it reads it, naming the field and the choices."""
    refusal = "run.json.schedule.nan_policy = 'ignore' is not allowed: it must be 'fail' or 'stop'."
    with pytest.raises(ValueError) as refused:
        make_run(workspace, schedule={"max_steps": 5, "nan_policy": "ignore"})
    assert str(refused.value) == refusal
    assert RunRegistry(workspace).list_runs() == [] and not any((Path(workspace) / "runs").iterdir())
    rec = make_run(workspace, schedule={"max_steps": 5})
    run_json = RunRegistry(workspace).run_dir(rec.run_id) / "run.json"
    spec = json.loads(run_json.read_text())
    run_json.write_text(json.dumps({**spec, "schedule": {**spec["schedule"], "nan_policy": "ignore"}}))
    assert runner.run(run_json.parent, install_signal_handlers=False) == 2
    assert refusal in capsys.readouterr().err


def test_disk_full_while_writing_metrics_fails_clearly_and_keeps_the_checkpoint(workspace,
                                                                              monkeypatch):
    from estimator_workbench.store import metrics_hook

    rec = make_run(workspace, run_config={"tf_random_seed": 0, "save_checkpoints_steps": 5})
    real_write = os.write
    metrics_fd: set[int] = set()
    real_open = os.open

    def tracking_open(path, flags, *args):
        fd = real_open(path, flags, *args)
        if str(path).endswith("metrics.jsonl"):
            metrics_fd.add(fd)
        return fd

    calls = {"n": 0}

    def full_disk_write(fd, data):
        if fd in metrics_fd:
            calls["n"] += 1
            if calls["n"] > 12:  # the disk fills up after 12 metric writes
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(fd, data)

    monkeypatch.setattr(metrics_hook.os, "open", tracking_open)
    monkeypatch.setattr(metrics_hook.os, "write", full_disk_write)
    code, done = execute(workspace, rec.run_id)
    monkeypatch.undo()
    assert code == 1 and done.status == "failed"
    assert "No space left on device" in done.error, done.error
    # The checkpoint before the failure is intact and the run resumes from it once space is back.
    folder = model_dir(workspace, rec.run_id)
    assert checkpoints.load_checkpoint(folder)["global_step"] == 10
    RunRegistry(workspace).set_status(rec.run_id, "queued")
    code, resumed = execute(workspace, rec.run_id)
    assert code == 0 and resumed.status == "succeeded", resumed.error
    assert checkpoints.read_global_step(folder) == 20


def test_disk_full_while_writing_a_checkpoint_keeps_the_previous_one(workspace, monkeypatch):
    rec = make_run(workspace, run_config={"tf_random_seed": 0, "save_checkpoints_steps": 5})
    real_replace = os.replace

    def full_disk_replace(src, dst, *args, **kwargs):
        if os.path.basename(str(dst)) == "model.ckpt-10":
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(dst))
        return real_replace(src, dst, *args, **kwargs)

    monkeypatch.setattr(checkpoints.os, "replace", full_disk_replace)
    code, done = execute(workspace, rec.run_id)
    monkeypatch.undo()
    assert code == 1 and done.status == "failed"
    assert "No space left on device" in done.error and "model.ckpt-10" in done.error, done.error
    folder = model_dir(workspace, rec.run_id)
    # The write runs on the engine's background thread, so the failure surfaces at the next save
    # or at the end: later checkpoints (15, 20) may have been written by then. Either way the
    # failed one is nowhere and everything listed loads.
    assert checkpoints.load_checkpoint(folder)["global_step"] in (5, 15, 20)
    assert not (folder / "model.ckpt-10").exists()
    for path in checkpoints.all_checkpoints(folder):
        checkpoints.load_checkpoint(path)
    assert not [p for p in os.listdir(folder) if p.endswith(".tmp")]  # temp file cleaned up


class TestCorruptedCheckpoint:
    @pytest.fixture
    def trained(self, workspace):
        rec = make_run(workspace, run_config={"tf_random_seed": 0, "save_checkpoints_steps": 5,
                                              "keep_checkpoint_max": 10})
        code, done = execute(workspace, rec.run_id)
        assert code == 0, done.error
        return rec

    def test_estimator_evaluate_names_the_file_and_the_next_older(self, workspace, trained):
        from estimator_workbench.execution import build

        folder = model_dir(workspace, trained.run_id)
        newest = folder / "model.ckpt-20"
        newest.write_bytes(newest.read_bytes()[:100])  # truncated by a crash or a bad copy
        spec = RunSpec.read(RunRegistry(workspace).run_dir(trained.run_id) / "run.json")
        estimator, fns = build.build_estimator(spec, str(folder))
        with pytest.raises(Exception, match=re.escape(str(newest)) + ".*next older checkpoint is "
                           + re.escape(str(folder / "model.ckpt-15"))):
            estimator.evaluate(fns.eval, steps=1)
        # Following the advice works: evaluate the next older one.
        results = estimator.evaluate(fns.eval, steps=1, checkpoint_path=str(folder / "model.ckpt-15"))
        assert results["global_step"] == 15

    def test_evaluate_run_from_a_corrupted_checkpoint_reports_it(self, workspace, trained):
        folder = model_dir(workspace, trained.run_id)
        (folder / "model.ckpt-20").write_bytes(b"\x80\x02garbage")
        ev = make_run(workspace, action="evaluate", parent_run_id=trained.run_id,
                      parent_relation="evaluate_from")
        code, done = execute(workspace, ev.run_id)
        assert code == 1 and done.status == "failed"
        assert "model.ckpt-20 is not a valid estimator_engine checkpoint" in done.error
        assert "model.ckpt-15" in done.error, done.error  # the fallback is offered

    def test_corrupted_state_file_is_named_with_the_fix(self, workspace, trained):
        folder = model_dir(workspace, trained.run_id)
        (folder / "checkpoint").write_text('model_checkpoint_path: "model.ckpt-20\n')  # torn quote
        RunRegistry(workspace).set_status(trained.run_id, "queued")
        code, done = execute(workspace, trained.run_id)
        assert code == 1 and done.status == "failed"
        assert f"checkpoint state file {str(folder / 'checkpoint')!r}" in done.error, done.error
        assert "rebuild_checkpoint_state" in (done.error + (done.traceback or ""))
        # The documented recovery: rebuild the state file from the files on disk.
        (folder / "checkpoint").unlink()
        assert checkpoints.rebuild_checkpoint_state(folder).endswith("model.ckpt-20")
        assert checkpoints.load_checkpoint(folder)["global_step"] == 20
