"""Checkpoint files, the state file, pruning, atomic writes, safe loading and strict restore."""

from __future__ import annotations

import enum
import logging
import os
import pickle
import shutil

import numpy as np
import pytest
import torch

from estimator_engine import checkpoints as ckpt
from estimator_engine.checkpoints import (
    CHECKPOINT_FORMAT,
    all_checkpoints,
    assign_module_variables,
    create_checkpoint,
    latest_checkpoint,
    list_checkpoint_files,
    list_variables,
    load_checkpoint,
    load_variable,
    module_variables,
    read_global_step,
    rebuild_checkpoint_state,
    resolve_checkpoint,
    save_checkpoint,
    trainable_variable_names,
)
from estimator_engine.errors import CheckpointError, CheckpointNotFoundError


def _state_lines(model_dir) -> list[str]:
    """The path lines of the state file (timestamps left out)."""
    text = (model_dir / "checkpoint").read_text()
    return [line for line in text.splitlines() if "_path" in line]


def _save(model_dir, step: int, value: float = 0.0, **kwargs) -> str:
    return save_checkpoint(model_dir, {"variables": {"m/w": torch.full((2,), value)}}, step,
                           **kwargs)


def _files(model_dir) -> list[str]:
    return sorted(os.listdir(model_dir))


def _mlp() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.BatchNorm1d(3),
                               torch.nn.Linear(3, 1))


class TestSave:
    def test_file_name_state_file_and_relative_paths(self, tmp_path):
        first = _save(tmp_path, 0)
        second = _save(tmp_path, 5)
        assert first == str(tmp_path / "model.ckpt-0")
        assert second == str(tmp_path / "model.ckpt-5")
        assert _state_lines(tmp_path) == [
            'model_checkpoint_path: "model.ckpt-5"',
            'all_model_checkpoint_paths: "model.ckpt-0"',
            'all_model_checkpoint_paths: "model.ckpt-5"',
        ]
        assert latest_checkpoint(tmp_path) == second
        assert all_checkpoints(tmp_path) == [first, second]
        assert _files(tmp_path) == ["checkpoint", "model.ckpt-0", "model.ckpt-5"]

    def test_payload_is_filled_and_caller_dict_untouched(self, tmp_path):
        state = {"variables": {"m/w": torch.ones(2)}, "global_step": 99, "hooks": {"h": {"n": 1}}}
        path = save_checkpoint(tmp_path / "new" / "dir", state, 7)
        data = load_checkpoint(path)
        assert data["format"] == CHECKPOINT_FORMAT
        assert data["format_version"] == 1
        assert data["global_step"] == 7
        assert data["optimizers"] == {} and data["rng"] == {} and data["input"] is None
        assert data["hooks"] == {"h": {"n": 1}}
        torch.testing.assert_close(data["variables"]["m/w"], torch.ones(2))
        assert state == {"variables": state["variables"], "global_step": 99,
                         "hooks": {"h": {"n": 1}}}

    def test_optimizer_and_rng_state_round_trip(self, tmp_path):
        model = torch.nn.Linear(2, 1)
        optimizer = torch.optim.Adam(model.parameters(), lr=0.1)
        model(torch.ones(4, 2)).sum().backward()
        optimizer.step()
        rng = torch.get_rng_state()
        state = {"variables": module_variables("lin", model),
                 "optimizers": {"adam": optimizer.state_dict()},
                 "rng": {"torch": rng},
                 "input": {"epoch": 1, "position": 12}}
        data = load_checkpoint(save_checkpoint(tmp_path, state, 1))
        fresh = torch.optim.Adam(torch.nn.Linear(2, 1).parameters(), lr=0.1)
        fresh.load_state_dict(data["optimizers"]["adam"])
        torch.testing.assert_close(fresh.state_dict()["state"][0]["exp_avg"],
                                   optimizer.state_dict()["state"][0]["exp_avg"])
        assert torch.equal(data["rng"]["torch"], rng)
        assert data["input"] == {"epoch": 1, "position": 12}

    def test_resaving_the_same_step_replaces_it_and_moves_it_to_newest(self, tmp_path):
        _save(tmp_path, 5, value=1.0)
        _save(tmp_path, 10)
        path = _save(tmp_path, 5, value=2.0)
        assert _state_lines(tmp_path) == [
            'model_checkpoint_path: "model.ckpt-5"',
            'all_model_checkpoint_paths: "model.ckpt-10"',
            'all_model_checkpoint_paths: "model.ckpt-5"',
        ]
        assert latest_checkpoint(tmp_path) == path
        torch.testing.assert_close(load_checkpoint(path)["variables"]["m/w"], torch.full((2,), 2.0))

    @pytest.mark.parametrize("step", [-1, True, 1.5, "3"])
    def test_bad_global_step(self, tmp_path, step):
        with pytest.raises(ValueError, match=r"`global_step` must be an int >= 0, got"):
            _save(tmp_path, step)

    @pytest.mark.parametrize(("kwargs", "message"), [
        ({"keep_checkpoint_max": -1}, "`keep_checkpoint_max` must be None or an int >= 0"),
        ({"keep_checkpoint_every_n_hours": 0}, "`keep_checkpoint_every_n_hours` must be None"),
        ({"basename": ""}, "`basename` must be a file-name prefix"),
    ])
    def test_bad_arguments(self, tmp_path, kwargs, message):
        with pytest.raises(ValueError, match=message):
            _save(tmp_path, 1, **kwargs)

    def test_global_step_is_not_a_variable(self, tmp_path):
        with pytest.raises(ValueError, match="must not hold 'global_step'"):
            save_checkpoint(tmp_path, {"variables": {"global_step": torch.tensor(3)}}, 3)

    def test_variables_must_be_tensors(self, tmp_path):
        with pytest.raises(TypeError, match="entry 'm/w' is a ndarray"):
            save_checkpoint(tmp_path, {"variables": {"m/w": np.ones(2)}}, 3)

    def test_state_that_would_not_load_back_is_refused_by_name(self, tmp_path):
        state = {"hooks": {"early_stopping": {"best": np.float64(0.5)}}}
        with pytest.raises(TypeError, match=r"Cannot checkpoint state\['hooks'\]\['early_stopping"
                                            r"'\]\['best'\]: a numpy.float64"):
            save_checkpoint(tmp_path, state, 1)

        class Color(str, enum.Enum):
            RED = "red"

        with pytest.raises(TypeError, match=r"state\['hooks'\]\[0\].*str\(x\) for an Enum"):
            save_checkpoint(tmp_path, {"hooks": [Color.RED]}, 1)
        assert not tmp_path.exists() or _files(tmp_path) == []


class TestPrune:
    def test_keeps_the_newest_n(self, tmp_path):
        for step in range(5):
            _save(tmp_path, step, keep_checkpoint_max=2)
        assert _files(tmp_path) == ["checkpoint", "model.ckpt-3", "model.ckpt-4"]
        assert _state_lines(tmp_path)[1:] == ['all_model_checkpoint_paths: "model.ckpt-3"',
                                              'all_model_checkpoint_paths: "model.ckpt-4"']

    def test_prunes_preexisting_checkpoints_all_at_once(self, tmp_path):
        for step in range(6):  # an earlier process that kept everything
            _save(tmp_path, step, keep_checkpoint_max=None)
        _save(tmp_path, 6, keep_checkpoint_max=3)
        assert _files(tmp_path) == ["checkpoint", "model.ckpt-4", "model.ckpt-5", "model.ckpt-6"]
        assert [os.path.basename(p) for p in all_checkpoints(tmp_path)] == [
            "model.ckpt-4", "model.ckpt-5", "model.ckpt-6"]

    @pytest.mark.parametrize("keep", [None, 0])
    def test_none_and_zero_keep_all(self, tmp_path, keep):
        for step in range(7):
            _save(tmp_path, step, keep_checkpoint_max=keep)
        assert len(list_checkpoint_files(tmp_path)) == 7
        assert len(all_checkpoints(tmp_path)) == 7

    def test_unlisted_files_are_left_alone(self, tmp_path):
        (tmp_path / "model.ckpt-100").write_bytes(b"not listed")
        for step in range(3):
            _save(tmp_path, step, keep_checkpoint_max=1)
        assert _files(tmp_path) == ["checkpoint", "model.ckpt-100", "model.ckpt-2"]

    def test_keep_one_checkpoint_every_n_hours(self, tmp_path, monkeypatch):
        start = 1_000_000.0
        hours = [0.0, 0.5, 1.1, 1.5, 2.5, 3.0]
        for step, hour in enumerate(hours):
            monkeypatch.setattr(ckpt.time, "time", lambda hour=hour: start + hour * 3600)
            _save(tmp_path, step, keep_checkpoint_max=1, keep_checkpoint_every_n_hours=1)
        # 2 (1.1 h >= 0 h + 1 h) and 4 (2.5 h >= 1.1 h + 1 h) are preserved on disk; TF drops
        # preserved checkpoints from the state file.
        assert _files(tmp_path) == ["checkpoint", "model.ckpt-2", "model.ckpt-4", "model.ckpt-5"]
        assert [os.path.basename(p) for p in all_checkpoints(tmp_path)] == ["model.ckpt-5"]
        assert "last_preserved_timestamp: 1009000.0" in (tmp_path / "checkpoint").read_text()


class TestAtomicWrites:
    def test_crash_in_os_replace_keeps_previous_checkpoint(self, tmp_path, monkeypatch):
        previous = _save(tmp_path, 1, value=1.0)
        state_before = (tmp_path / "checkpoint").read_bytes()

        def crash(src, dst):
            raise OSError("disk full")

        monkeypatch.setattr(ckpt.os, "replace", crash)
        with pytest.raises(OSError, match="disk full"):
            _save(tmp_path, 1, value=2.0)
        monkeypatch.undo()
        assert _files(tmp_path) == ["checkpoint", "model.ckpt-1"]  # no temp file left
        assert (tmp_path / "checkpoint").read_bytes() == state_before
        assert latest_checkpoint(tmp_path) == previous
        torch.testing.assert_close(load_checkpoint(previous)["variables"]["m/w"],
                                   torch.full((2,), 1.0))

    def test_crash_in_the_middle_of_torch_save(self, tmp_path, monkeypatch):
        previous = _save(tmp_path, 1)
        state_before = (tmp_path / "checkpoint").read_bytes()

        def torn_save(obj, handle):
            handle.write(b"PK\x03\x04 half a file")
            raise KeyboardInterrupt

        monkeypatch.setattr(ckpt.torch, "save", torn_save)
        with pytest.raises(KeyboardInterrupt):
            _save(tmp_path, 2)
        monkeypatch.undo()
        assert _files(tmp_path) == ["checkpoint", "model.ckpt-1"]
        assert (tmp_path / "checkpoint").read_bytes() == state_before
        assert latest_checkpoint(tmp_path) == previous

    def test_crash_while_writing_the_state_file(self, tmp_path, monkeypatch):
        previous = _save(tmp_path, 1)
        real_replace = os.replace

        def replace(src, dst):
            if os.path.basename(dst) == "checkpoint":
                raise OSError("crash")
            real_replace(src, dst)

        monkeypatch.setattr(ckpt.os, "replace", replace)
        with pytest.raises(OSError, match="crash"):
            _save(tmp_path, 2)
        monkeypatch.undo()
        assert latest_checkpoint(tmp_path) == previous  # the state file was not touched
        assert _files(tmp_path) == ["checkpoint", "model.ckpt-1", "model.ckpt-2"]

    def test_temp_files_left_by_a_killed_process_are_ignored(self, tmp_path):
        _save(tmp_path, 1)
        (tmp_path / ".model.ckpt-2.abc123.tmp").write_bytes(b"torn")
        (tmp_path / ".checkpoint.xyz.tmp").write_bytes(b"torn")
        assert [os.path.basename(p) for p in list_checkpoint_files(tmp_path)] == ["model.ckpt-1"]
        assert latest_checkpoint(tmp_path) == str(tmp_path / "model.ckpt-1")

    def test_next_save_removes_temp_files_of_dead_writers_only(self, tmp_path):
        import subprocess
        import sys

        dead = subprocess.Popen([sys.executable, "-c", "pass"])
        dead.wait()  # a writer killed mid-write: its pid is gone
        _save(tmp_path, 1)
        (tmp_path / f".model.ckpt-2.{dead.pid}.abc123.tmp").write_bytes(b"torn")
        (tmp_path / f".checkpoint.{dead.pid}.xyz.tmp").write_bytes(b"torn")
        live = tmp_path / f".model.ckpt-3.{os.getppid()}.def456.tmp"  # a live writer's file
        live.write_bytes(b"in flight")
        (tmp_path / "notes.tmp").write_bytes(b"not ours")
        _save(tmp_path, 4)
        assert _files(tmp_path) == [".model.ckpt-3." + str(os.getppid()) + ".def456.tmp", "checkpoint",
                                    "model.ckpt-1", "model.ckpt-4", "notes.tmp"]
        assert ckpt.remove_stale_temp_files(tmp_path / "missing") == []


class TestStateFile:
    def test_moved_model_dir_still_works(self, tmp_path):
        old = tmp_path / "old"
        _save(old, 1)
        _save(old, 2, value=3.0)
        new = tmp_path / "new"
        shutil.move(str(old), str(new))
        assert latest_checkpoint(new) == str(new / "model.ckpt-2")
        assert all_checkpoints(new) == [str(new / "model.ckpt-1"), str(new / "model.ckpt-2")]
        torch.testing.assert_close(load_checkpoint(new)["variables"]["m/w"], torch.full((2,), 3.0))
        _save(new, 3, keep_checkpoint_max=2)
        assert _files(new) == ["checkpoint", "model.ckpt-2", "model.ckpt-3"]

    def test_absolute_paths_are_accepted_and_rewritten_relative(self, tmp_path):
        create_checkpoint(tmp_path, {"w": [1.0]}, 3)
        (tmp_path / "checkpoint").write_text(
            f'model_checkpoint_path: "{tmp_path}/model.ckpt-3"\n'
            f'all_model_checkpoint_paths: "{tmp_path}/model.ckpt-3"\n'
            "all_model_checkpoint_timestamps: 1700000000.5\n"
            "last_preserved_timestamp: 1699999999.0\n")
        assert latest_checkpoint(tmp_path) == str(tmp_path / "model.ckpt-3")
        _save(tmp_path, 4)
        assert _state_lines(tmp_path) == [
            'model_checkpoint_path: "model.ckpt-4"',
            'all_model_checkpoint_paths: "model.ckpt-3"',
            'all_model_checkpoint_paths: "model.ckpt-4"',
        ]

    def test_absolute_paths_of_a_moved_dir_fall_back_to_the_dir(self, tmp_path):
        create_checkpoint(tmp_path / "here", {"w": [1.0]}, 3)
        (tmp_path / "here" / "checkpoint").write_text(
            'model_checkpoint_path: "/gone/elsewhere/model.ckpt-3"\n')
        assert latest_checkpoint(tmp_path / "here") == str(tmp_path / "here" / "model.ckpt-3")

    def test_missing_newest_falls_back_with_a_warning(self, tmp_path, caplog):
        _save(tmp_path, 1)
        _save(tmp_path, 2)
        os.remove(tmp_path / "model.ckpt-2")
        with caplog.at_level(logging.WARNING, logger="estimator_engine.checkpoints"):
            assert latest_checkpoint(tmp_path) == str(tmp_path / "model.ckpt-1")
        assert "model.ckpt-2, is missing; using" in caplog.text

    def test_no_state_file(self, tmp_path):
        assert latest_checkpoint(tmp_path) is None
        assert latest_checkpoint(tmp_path / "does-not-exist") is None
        assert all_checkpoints(tmp_path) == []
        (tmp_path / "checkpoint").write_text("")
        assert latest_checkpoint(tmp_path) is None

    def test_unparsable_state_file_says_how_to_fix(self, tmp_path):
        _save(tmp_path, 1)
        (tmp_path / "checkpoint").write_text("model_checkpoint_path: model.ckpt-1\n")
        with pytest.raises(CheckpointError, match=r"(?s)Cannot read the checkpoint state file "
                                                  r".*checkpoint'.*line 1.*Delete it.*"
                                                  r"list_checkpoint_files"):
            latest_checkpoint(tmp_path)
        (tmp_path / "checkpoint").write_bytes(b"\xff\xfe garbage")
        with pytest.raises(CheckpointError, match="Cannot read the checkpoint state file"):
            all_checkpoints(tmp_path)
        os.remove(tmp_path / "checkpoint")
        assert rebuild_checkpoint_state(tmp_path) == str(tmp_path / "model.ckpt-1")
        assert latest_checkpoint(tmp_path) == str(tmp_path / "model.ckpt-1")

    def test_save_with_a_bad_state_file_fails_before_writing(self, tmp_path):
        (tmp_path / "checkpoint").write_text("garbage\n")
        with pytest.raises(CheckpointError, match="Cannot read the checkpoint state file"):
            _save(tmp_path, 1)
        assert _files(tmp_path) == ["checkpoint"]

    def test_list_checkpoint_files_sorts_by_step(self, tmp_path):
        for step in (10, 9, 100):
            create_checkpoint(tmp_path, {"w": [1.0]}, step)
        (tmp_path / "model.ckpt-7.index").write_bytes(b"")
        (tmp_path / "model.ckpt-x").write_bytes(b"")
        assert [os.path.basename(p) for p in list_checkpoint_files(tmp_path)] == [
            "model.ckpt-9", "model.ckpt-10", "model.ckpt-100"]
        assert list_checkpoint_files(tmp_path / "nope") == []


class TestResolveAndLoad:
    def test_resolve(self, tmp_path):
        path = _save(tmp_path, 3)
        assert resolve_checkpoint(tmp_path) == path
        assert resolve_checkpoint(path) == path
        (tmp_path / "empty").mkdir()
        with pytest.raises(CheckpointNotFoundError,
                           match=r"Could not find trained model in model_dir: .*empty"):
            resolve_checkpoint(tmp_path / "empty")
        with pytest.raises(CheckpointNotFoundError, match=r"Checkpoint '.*model.ckpt-9' does not"):
            resolve_checkpoint(tmp_path / "model.ckpt-9")

    def test_corrupted_file_names_the_next_older_checkpoint(self, tmp_path):
        _save(tmp_path, 1)
        older = _save(tmp_path, 5)
        newest = _save(tmp_path, 10)
        with open(newest, "r+b") as handle:
            handle.truncate(40)
        with pytest.raises(CheckpointError, match=r"Checkpoint file .*model.ckpt-10 is not a valid "
                                                  r"estimator_engine checkpoint.*The next older "
                                                  r"checkpoint is " + older):
            load_checkpoint(tmp_path)

    def test_corrupted_oldest_has_no_fallback(self, tmp_path):
        (tmp_path / "model.ckpt-1").write_bytes(b"garbage")
        with pytest.raises(CheckpointError, match="There is no older checkpoint"):
            load_checkpoint(tmp_path / "model.ckpt-1")

    def test_crafted_pickle_is_refused_and_never_runs(self, tmp_path):
        marker = tmp_path / "pwned"

        class Exploit:
            def __reduce__(self):
                return (os.system, (f"touch {marker}",))

        raw = tmp_path / "model.ckpt-1"
        raw.write_bytes(pickle.dumps({"format": CHECKPOINT_FORMAT, "x": Exploit()}, protocol=2))
        zipped = tmp_path / "model.ckpt-2"
        torch.save({"format": CHECKPOINT_FORMAT, "x": Exploit()}, zipped)
        for path in (raw, zipped):
            with pytest.raises(CheckpointError, match="is not a valid estimator_engine checkpoint"):
                load_checkpoint(path)
        assert not marker.exists()

    def test_foreign_and_newer_files_are_refused(self, tmp_path):
        torch.save({"weight": torch.ones(1)}, tmp_path / "model.ckpt-1")
        with pytest.raises(CheckpointError, match="does not carry the format marker"):
            load_checkpoint(tmp_path / "model.ckpt-1")
        torch.save({"format": CHECKPOINT_FORMAT, "format_version": 2, "global_step": 1,
                    "variables": {}}, tmp_path / "model.ckpt-2")
        with pytest.raises(CheckpointError, match="format_version 2 is newer"):
            load_checkpoint(tmp_path / "model.ckpt-2")

    def test_read_global_step(self, tmp_path):
        assert read_global_step(tmp_path) == 0
        assert read_global_step(tmp_path / "missing") == 0
        _save(tmp_path, 42)
        assert read_global_step(tmp_path) == 42
        (tmp_path / "model.ckpt-42").write_bytes(b"broken")
        assert read_global_step(tmp_path) == 0
        (tmp_path / "checkpoint").write_text("nonsense")
        assert read_global_step(tmp_path) == 0


class TestVariables:
    def test_create_checkpoint_round_trip_and_dtypes(self, tmp_path):
        path = create_checkpoint(tmp_path, {
            "dense/kernel": [[1.0, 2.0], [3.0, 4.0]],
            "dense/bias": np.array([0.5, -0.5]),  # float64 -> float32
            "counts": [1, 2, 3],
            "mask": np.array([True, False]),
            "half": torch.ones(2, dtype=torch.float16),
        }, global_step=12)
        assert path == str(tmp_path / "model.ckpt-12")
        assert list_variables(tmp_path) == [
            ("counts", [3]), ("dense/bias", [2]), ("dense/kernel", [2, 2]),
            ("global_step", []), ("half", [2]), ("mask", [2])]
        kernel = load_variable(path, "dense/kernel")
        np.testing.assert_array_equal(kernel, np.array([[1, 2], [3, 4]], dtype=np.float32))
        assert kernel.dtype == np.float32
        assert load_variable(tmp_path, "dense/bias").dtype == np.float32
        assert load_variable(tmp_path, "counts").dtype == np.int64
        assert load_variable(tmp_path, "mask").dtype == np.bool_
        assert load_variable(tmp_path, "half").dtype == np.float16
        step = load_variable(tmp_path, "global_step")
        assert step.dtype == np.int64 and step.shape == () and int(step) == 12

    def test_load_variable_lists_close_names(self, tmp_path):
        create_checkpoint(tmp_path, {"dense/kernel": [1.0], "dense/bias": [1.0]}, 1)
        with pytest.raises(ValueError, match=r"Variable 'dense/kernal' not found in checkpoint "
                                             r".*Close names: \['dense/kernel'"):
            load_variable(tmp_path, "dense/kernal")

    def test_create_checkpoint_validation(self, tmp_path):
        with pytest.raises(ValueError, match="Pass the step as `global_step`"):
            create_checkpoint(tmp_path, {"global_step": 3}, 3)
        with pytest.raises(TypeError, match="must hold numbers"):
            create_checkpoint(tmp_path, {"w": ["a", "b"]}, 3)
        with pytest.raises(ValueError, match="non-empty strings"):
            create_checkpoint(tmp_path, {"": [1.0]}, 3)

    def test_module_variables_names_and_persistence(self):
        mlp = _mlp()
        mlp.register_buffer("scratch", torch.zeros(1), persistent=False)
        names = sorted(module_variables("mlp", mlp))
        assert names == ["mlp/0/bias", "mlp/0/weight", "mlp/1/bias", "mlp/1/num_batches_tracked",
                         "mlp/1/running_mean", "mlp/1/running_var", "mlp/1/weight",
                         "mlp/2/bias", "mlp/2/weight"]
        mlp[2].weight.requires_grad_(False)
        assert trainable_variable_names("mlp", mlp) == {
            "mlp/0/bias", "mlp/0/weight", "mlp/1/bias", "mlp/1/weight", "mlp/2/bias"}
        wrapped = torch.nn.DataParallel(mlp)
        assert sorted(module_variables("mlp", wrapped)) == names
        variables = module_variables("mlp", mlp)
        assert variables["mlp/0/weight"].data_ptr() == mlp[0].weight.data_ptr()  # no copy

    def test_module_name_validation(self):
        with pytest.raises(ValueError, match="Module name must be a non-empty string"):
            module_variables("", _mlp())
        with pytest.raises(TypeError, match=r"must be a torch\.nn\.Module"):
            module_variables("x", object())


class TestAssign:
    def test_restore_keeps_parameter_identity(self, tmp_path):
        source = _mlp()
        source[1].running_mean.fill_(0.25)
        path = save_checkpoint(tmp_path, {"variables": module_variables("mlp", source)}, 3)
        target = _mlp()
        weight = target[0].weight
        optimizer = torch.optim.SGD(target.parameters(), lr=0.1)
        assign_module_variables("mlp", target, load_checkpoint(path)["variables"], path)
        assert target[0].weight is weight
        for (name, a), b in zip(source.state_dict().items(), target.state_dict().values()):
            torch.testing.assert_close(a, b, msg=name)
        target(torch.randn(4, 2)).pow(2).sum().backward()
        optimizer.step()  # the optimizer still drives the restored parameters
        assert not torch.equal(target[0].weight, source[0].weight)

    def test_shape_mismatch_message(self):
        variables = module_variables("mlp", torch.nn.Sequential(torch.nn.Linear(20, 64)))
        model = torch.nn.Sequential(torch.nn.Linear(20, 32))
        before = model[0].weight.clone()
        with pytest.raises(CheckpointError) as info:
            assign_module_variables("mlp", model, variables, "/m/model.ckpt-5")
        message = str(info.value)
        assert message.startswith(
            "Restoring from checkpoint failed: variable 'mlp/0/weight' has shape [64, 20] in the "
            "checkpoint /m/model.ckpt-5 but [32, 20] in the model; variable 'mlp/0/bias' has "
            "shape [64] in the checkpoint /m/model.ckpt-5 but [32] in the model.")
        assert "use a new model_dir" in message
        assert torch.equal(model[0].weight, before)  # nothing copied

    def test_missing_and_unexpected_variables_are_listed(self):
        variables = module_variables("mlp", torch.nn.Sequential(torch.nn.Linear(2, 2),
                                                                torch.nn.Linear(2, 2)))
        variables.pop("mlp/0/bias")
        variables["other/w"] = torch.ones(1)  # another module's variable: not this one's concern
        model = torch.nn.Sequential(torch.nn.Linear(2, 2))
        with pytest.raises(CheckpointError, match=(
                r"Restoring from checkpoint failed: variables of the model missing from the "
                r"checkpoint: \['mlp/0/bias'\] \(1\); variables in the checkpoint that module "
                r"'mlp' does not have: \['mlp/1/bias', 'mlp/1/weight'\] \(2\)\.")):
            assign_module_variables("mlp", model, variables)
