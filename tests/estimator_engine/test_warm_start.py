"""Warm start: TF's WarmStartSettings rules, applied module by module, with known answers."""

from __future__ import annotations

import dataclasses
import pathlib

import pytest
import torch

from estimator_engine import warm_start as ws
from estimator_engine.checkpoints import create_checkpoint, module_variables, save_checkpoint
from estimator_engine.errors import CheckpointNotFoundError
from estimator_engine.warm_start import (
    VocabInfo,
    WarmStarter,
    WarmStartReport,
    WarmStartSettings,
    compare_variables,
    warm_start_settings_from,
)

OLD_VOCAB = ["doctor", "lawyer", "consultant"]
NEW_VOCAB = ["doctor", "consultant", "engineer"]
OLD_ROWS = [[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]]


def _mlp() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.BatchNorm1d(3),
                               torch.nn.Linear(3, 1))


@pytest.fixture
def source(tmp_path):
    """A model_dir at step 10 holding a trained-looking 'mlp' (BN statistics set) and 'emb'."""
    mlp = _mlp()
    with torch.no_grad():
        for index, param in enumerate(mlp.parameters()):
            param.fill_(index + 1.0)
        mlp[1].running_mean.fill_(7.0)
    variables = module_variables("mlp", mlp)
    variables["emb/weight"] = torch.tensor(OLD_ROWS)
    save_checkpoint(tmp_path / "src", {"variables": variables}, 10)
    return tmp_path / "src"


def _fresh_mlp() -> torch.nn.Module:
    mlp = _mlp()
    with torch.no_grad():
        for param in mlp.parameters():
            param.fill_(-1.0)
    return mlp


class TestSettings:
    def test_defaults(self):
        settings = WarmStartSettings("/m")
        assert settings.vars_to_warm_start == ".*"
        assert settings.var_name_to_vocab_info == {}
        assert settings.var_name_to_prev_var_name == {}
        assert WarmStartSettings(pathlib.Path("/m")).ckpt_to_initialize_from == "/m"

    @pytest.mark.parametrize("value", ["", None])
    def test_checkpoint_must_be_set(self, value):
        with pytest.raises(ValueError,
                           match=r"^`ckpt_to_initialize_from` MUST be set in WarmStartSettings$"):
            WarmStartSettings(value)

    def test_frozen_and_replace(self):
        settings = WarmStartSettings("/m")
        with pytest.raises(dataclasses.FrozenInstanceError):
            settings.vars_to_warm_start = "x"
        assert settings.replace(vars_to_warm_start=["a", "b"]).vars_to_warm_start == ("a", "b")
        with pytest.raises(ValueError, match="MUST be set"):
            settings.replace(ckpt_to_initialize_from="")

    @pytest.mark.parametrize(("value", "message"), [
        (["a", 3], r"If `vars_to_warm_start` is a list, it must be all `str`.*\['int', 'str'\]"),
        ([torch.nn.Parameter(torch.ones(1))], "it must be all `str`"),
        (3, "`vars_to_warm_start` must be a regex str"),
        ({"a": 1}, "`vars_to_warm_start` must be a regex str"),
        ("[", r"invalid regex '\['"),
    ])
    def test_bad_vars_to_warm_start(self, value, message):
        with pytest.raises(ValueError, match=message):
            WarmStartSettings("/m", vars_to_warm_start=value)

    def test_bad_dicts(self):
        with pytest.raises(ValueError, match="`var_name_to_vocab_info` must map"):
            WarmStartSettings("/m", var_name_to_vocab_info={"emb": ["a"]})
        with pytest.raises(ValueError, match="`var_name_to_prev_var_name` must map"):
            WarmStartSettings("/m", var_name_to_prev_var_name={"a": 3})

    def test_warm_start_settings_from(self, tmp_path):
        settings = WarmStartSettings("/m", vars_to_warm_start=None)
        assert warm_start_settings_from(None) is None
        assert warm_start_settings_from(settings) is settings
        assert warm_start_settings_from("/m") == WarmStartSettings("/m")
        assert warm_start_settings_from(tmp_path).ckpt_to_initialize_from == str(tmp_path)
        with pytest.raises(ValueError, match=r"^warm_start_from must be a string or a "
                                             r"WarmStartSettings, given: 3$"):
            warm_start_settings_from(3)


class TestSelection:
    def test_default_copies_trainable_parameters_only(self, source):
        starter = WarmStarter(WarmStartSettings(source))
        mlp = _fresh_mlp()
        mlp[2].weight.requires_grad_(False)
        starter.apply("mlp", mlp)
        report = starter.finish()
        assert torch.equal(mlp[0].weight, torch.full((3, 2), 1.0))
        assert torch.equal(mlp[2].bias, torch.full((1,), 6.0))
        assert torch.equal(mlp[2].weight, torch.full((1, 3), -1.0))  # frozen: not selected
        assert torch.equal(mlp[1].running_mean, torch.zeros(3))  # buffers: not selected
        assert report.warm_started == ("mlp/0/weight", "mlp/0/bias", "mlp/1/weight",
                                       "mlp/1/bias", "mlp/2/bias")
        assert report.skipped == ("mlp/1/running_mean", "mlp/1/running_var",
                                  "mlp/1/num_batches_tracked", "mlp/2/weight")
        assert report.source_global_step == 10
        assert report.checkpoint_path == str(source / "model.ckpt-10")
        assert "global_step" not in report.warm_started

    def test_a_path_means_all_trainables(self, source):
        starter = WarmStarter(source)
        mlp = _fresh_mlp()
        starter.apply("mlp", mlp)
        assert len(starter.finish().warm_started) == 6

    def test_str_regex_is_anchored_at_the_start(self, source):
        mlp = _fresh_mlp()
        starter = WarmStarter(WarmStartSettings(source, vars_to_warm_start="0/weight"))
        starter.apply("mlp", mlp)
        assert starter.finish().warm_started == ()
        starter = WarmStarter(WarmStartSettings(source, vars_to_warm_start=".*0/weight"))
        starter.apply("mlp", mlp)
        assert starter.finish().warm_started == ("mlp/0/weight",)
        assert torch.equal(mlp[0].weight, torch.full((3, 2), 1.0))
        assert torch.equal(mlp[0].bias, torch.full((3,), -1.0))

    def test_list_of_regexes_includes_buffers(self, source):
        mlp = _fresh_mlp()
        starter = WarmStarter(WarmStartSettings(source, vars_to_warm_start=[".*"]))
        starter.apply("mlp", mlp)
        report = starter.finish()
        assert torch.equal(mlp[1].running_mean, torch.full((3,), 7.0))
        assert report.skipped == ()
        assert len(report.warm_started) == 9

    def test_list_selects_by_any_regex(self, source):
        mlp = _fresh_mlp()
        starter = WarmStarter(WarmStartSettings(
            source, vars_to_warm_start=["mlp/1/running_.*", "mlp/2/"]))
        starter.apply("mlp", mlp)
        assert starter.finish().warm_started == (
            "mlp/1/running_mean", "mlp/1/running_var", "mlp/2/weight", "mlp/2/bias")

    def test_none_selects_only_vocab_variables(self, source):
        info = VocabInfo(NEW_VOCAB, 3, 0, OLD_VOCAB)
        starter = WarmStarter(WarmStartSettings(source, vars_to_warm_start=None,
                                                var_name_to_vocab_info={"emb/weight": info}))
        mlp, emb = _fresh_mlp(), torch.nn.Embedding(3, 2)
        starter.apply("mlp", mlp)
        starter.apply("emb", emb)
        report = starter.finish()
        assert report.warm_started == ("emb/weight",)
        assert report.vocab_remapped == ("emb/weight",)
        assert torch.equal(mlp[0].weight, torch.full((3, 2), -1.0))

    def test_prev_var_name_renames(self, tmp_path):
        create_checkpoint(tmp_path, {"old/weight": [[5.0]], "lin/bias": [6.0]}, 3)
        lin = torch.nn.Linear(1, 1)
        starter = WarmStarter(WarmStartSettings(
            tmp_path, var_name_to_prev_var_name={"lin/weight": "old/weight"}))
        starter.apply("lin", lin)
        report = starter.finish()
        assert (lin.weight.item(), lin.bias.item()) == (5.0, 6.0)
        assert report.renamed == {"lin/weight": "old/weight"}

    def test_checkpoint_is_resolved_and_loaded_once(self, source, monkeypatch):
        calls = []
        real = ws._load
        monkeypatch.setattr(ws, "_load", lambda *a, **k: calls.append(a) or real(*a, **k))
        starter = WarmStarter(WarmStartSettings(source, vars_to_warm_start=[".*"]))
        starter.apply("mlp", _fresh_mlp())
        starter.apply("emb", torch.nn.Embedding(3, 2))
        starter.finish()
        assert len(calls) == 1

    def test_nothing_selected_needs_no_checkpoint(self, tmp_path):
        starter = WarmStarter(WarmStartSettings(tmp_path / "nothing-here", vars_to_warm_start=[]))
        starter.apply("mlp", _fresh_mlp())
        assert starter.finish().warm_started == ()

    def test_missing_source_checkpoint(self, tmp_path):
        starter = WarmStarter(WarmStartSettings(tmp_path))
        with pytest.raises(CheckpointNotFoundError, match="Could not find trained model"):
            starter.apply("mlp", _fresh_mlp())


class TestErrors:
    def test_selected_variable_missing_from_checkpoint(self, source):
        extra = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Linear(2, 2))
        starter = WarmStarter(WarmStartSettings(source))
        with pytest.raises(ValueError, match=(
                r"Warm-starting module 'extra' failed: Tensor 'extra/0/weight' \(for variable "
                r"'extra/0/weight'\) is not found in checkpoint .*model.ckpt-10.*"
                r"vars_to_warm_start")):
            starter.apply("extra", extra)

    def test_shape_mismatch_copies_nothing(self, source):
        wide = torch.nn.Sequential(torch.nn.Linear(2, 4), torch.nn.BatchNorm1d(3),
                                   torch.nn.Linear(3, 1))
        before = wide[2].weight.clone()
        starter = WarmStarter(WarmStartSettings(source))
        with pytest.raises(ValueError, match=(
                r"Shape of variable 'mlp/0/weight' \(\[4, 2\]\) doesn't match with shape of "
                r"tensor 'mlp/0/weight' \(\[3, 2\]\) from checkpoint")):
            starter.apply("mlp", wide)
        assert torch.equal(wide[2].weight, before)

    def test_unused_prev_var_names(self, source):
        starter = WarmStarter(WarmStartSettings(
            source, var_name_to_prev_var_name={"mlp/0/wieght": "mlp/0/weight"}))
        starter.apply("mlp", _fresh_mlp())
        with pytest.raises(ValueError, match=(
                r"^You provided the following variables in var_name_to_prev_var_name that were "
                r"not used: \['mlp/0/wieght'\]\..*viable variable names: \['mlp/0/bias'")):
            starter.finish()

    def test_unused_vocab_info(self, source):
        info = VocabInfo(NEW_VOCAB, 3, 0, OLD_VOCAB)
        starter = WarmStarter(WarmStartSettings(source, var_name_to_vocab_info={"emb/w": info}))
        starter.apply("mlp", _fresh_mlp())
        with pytest.raises(ValueError, match=(
                r"^You provided the following variables in var_name_to_vocab_info that were not "
                r"used: \['emb/w'\]")):
            starter.finish()

    def test_vocab_info_on_an_unselected_variable_is_unused(self, source):
        info = VocabInfo(NEW_VOCAB, 3, 0, OLD_VOCAB)
        starter = WarmStarter(WarmStartSettings(source, vars_to_warm_start=["mlp/.*"],
                                                var_name_to_vocab_info={"emb/weight": info}))
        starter.apply("emb", torch.nn.Embedding(3, 2))
        with pytest.raises(ValueError, match="var_name_to_vocab_info that were not used"):
            starter.finish()


class TestVocab:
    def _warm(self, source, info, rows=3, cols=2, axis=0):
        shape = (rows, cols)
        emb = torch.nn.Embedding(*shape) if axis == 0 else None
        starter = WarmStarter(WarmStartSettings(source, vars_to_warm_start=None,
                                                var_name_to_vocab_info={"emb/weight": info}))
        starter.apply("emb", emb)
        starter.finish()
        return emb.weight.detach()

    def test_known_answer_rows(self, source):
        info = VocabInfo(NEW_VOCAB, 3, 0, OLD_VOCAB)
        # new row 0 = old row 0 (doctor), row 1 = old row 2 (consultant), row 2 = backup (zeros)
        assert torch.equal(self._warm(source, info), torch.tensor([[1.0, 1.0], [3.0, 3.0],
                                                                   [0.0, 0.0]]))

    def test_backup_initializer_and_oov_rows(self, source):
        shapes = []

        def backup(shape):
            shapes.append(shape)
            return torch.full(shape, 9.0)

        info = VocabInfo(NEW_VOCAB, 3, 1, OLD_VOCAB, backup_initializer=backup)
        assert torch.equal(self._warm(source, info, rows=4), torch.tensor(
            [[1.0, 1.0], [3.0, 3.0], [9.0, 9.0], [9.0, 9.0]]))
        assert shapes == [(4, 2)]

    def test_vocabulary_files_and_sizes(self, source, tmp_path):
        new_file, old_file = tmp_path / "new.txt", tmp_path / "old.txt"
        new_file.write_text("\n".join([*NEW_VOCAB, "unused"]) + "\n")
        old_file.write_text("\n".join(OLD_VOCAB) + "\n")
        # old_vocab_size=2 leaves 'consultant' out of the old vocabulary
        info = VocabInfo(str(new_file), 3, 0, old_file, old_vocab_size=2)
        assert torch.equal(self._warm(source, info), torch.tensor([[1.0, 1.0], [0.0, 0.0],
                                                                   [0.0, 0.0]]))

    def test_axis_1_remaps_columns(self, tmp_path):
        create_checkpoint(tmp_path, {"out/weight": [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]}, 1)
        layer = torch.nn.Linear(4, 2, bias=False)  # weight [2, 4]: 3 classes + 1 OOV column
        info = VocabInfo(NEW_VOCAB, 3, 1, OLD_VOCAB, axis=1)
        starter = WarmStarter(WarmStartSettings(tmp_path, var_name_to_vocab_info={
            "out/weight": info}))
        starter.apply("out", layer)
        assert starter.finish().vocab_remapped == ("out/weight",)
        assert torch.equal(layer.weight.detach(), torch.tensor([[1.0, 3.0, 0.0, 0.0],
                                                                [4.0, 6.0, 0.0, 0.0]]))

    def test_rows_must_fit_the_vocabulary(self, source):
        info = VocabInfo(NEW_VOCAB, 3, 0, OLD_VOCAB)
        with pytest.raises(ValueError, match=r"has shape \[5, 2\], but its VocabInfo needs 3"):
            self._warm(source, info, rows=5)

    def test_vocabulary_shorter_than_its_size(self, source):
        info = VocabInfo(NEW_VOCAB, 4, 0, OLD_VOCAB)
        with pytest.raises(ValueError, match="`new_vocab` has 3 tokens, fewer than the size 4"):
            self._warm(source, info, rows=4)

    @pytest.mark.parametrize(("kwargs", "message"), [
        ({"axis": 2}, "The only valid values for `axis` are 0 and 1"),
        ({"new_vocab_size": 0}, "`new_vocab_size` must be an int > 0"),
        ({"num_oov_buckets": -1}, "`num_oov_buckets` must be an int >= 0"),
        ({"old_vocab_size": 0}, "`old_vocab_size` must be -1"),
        ({"backup_initializer": 0.5}, "`backup_initializer` must be None"),
        ({"new_vocab": [1, 2]}, "`new_vocab` must be a vocabulary file path"),
    ])
    def test_vocab_info_validation(self, kwargs, message):
        args = {"new_vocab": NEW_VOCAB, "new_vocab_size": 3, "num_oov_buckets": 0,
                "old_vocab": OLD_VOCAB, **kwargs}
        with pytest.raises(ValueError, match=message):
            VocabInfo(**args)


def test_compare_variables_known_answer(tmp_path):
    create_checkpoint(tmp_path, {"lin/weight": [[1.0, 2.0]], "lin/bias": [0.0],
                                 "old/w": [1.0]}, 4)
    result = compare_variables(tmp_path, {"lin/weight": torch.zeros(1, 3), "lin/bias": (1,),
                                          "lin/scale": [1]})
    assert result == {"matching": ["lin/bias"], "missing": ["lin/scale"],
                      "unexpected": ["old/w"],
                      "shape_mismatch": {"lin/weight": ((1, 2), (1, 3))}}
    with_step = compare_variables(tmp_path / "model.ckpt-4", {"global_step": ()})
    assert with_step["matching"] == ["global_step"]


def test_report_is_a_frozen_value():
    report = WarmStartReport("/m/model.ckpt-1", 1, ("a",), (), {}, ())
    with pytest.raises(dataclasses.FrozenInstanceError):
        report.warm_started = ()
