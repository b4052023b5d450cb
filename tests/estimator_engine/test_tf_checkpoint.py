"""Reading TensorFlow checkpoints without TensorFlow: ``ee.checkpoints.list_variables`` /
``load_variable`` against TF 2.15's own answers, and clear errors for damaged or foreign files.

The checkpoints and TF's answers (``format/<name>.json``) were written by
``fixtures/tf_checkpoints/make_fixtures.py`` with TF 2.15.1.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import estimator_engine as ee
from estimator_engine import tf_checkpoint
from estimator_engine.checkpoints import list_variables, load_variable

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "tf_checkpoints"
FORMAT = FIXTURES / "format"
MODELS = FIXTURES / "models"
REPO = Path(__file__).resolve().parents[2]


def _expected(value: dict) -> np.ndarray:
    if value["dtype"] == "string":
        array = np.array([base64.b64decode(v) for v in value["base64"]], dtype=object)
        return array.reshape(value["shape"])
    dtype = "float32" if value["dtype"] == "bfloat16" else value["dtype"]
    return np.array(value["values"], dtype=dtype).reshape(value["shape"])


class TestAgainstTensorFlow:
    @pytest.mark.parametrize("case, prefix", [("dtypes", "dtypes/model.ckpt-42"),
                                              ("sharded", "sharded/model.ckpt-7")])
    def test_list_and_load_equal_tf(self, case, prefix):
        reference = json.loads((FORMAT / f"{case}.json").read_text())
        for path in (FORMAT / prefix, FORMAT / case):  # a prefix, and a model_dir (latest)
            assert list_variables(path) == [tuple(v) for v in reference["variables"]]
        for name, value in reference["values"].items():
            got = load_variable(FORMAT / prefix, name)
            expected = _expected(value)
            assert got.dtype == expected.dtype, name
            assert got.shape == expected.shape, name
            assert np.array_equal(got, expected), name

    def test_every_dtype_is_covered(self):
        reference = json.loads((FORMAT / "dtypes.json").read_text())
        dtypes = {value["dtype"] for value in reference["values"].values()}
        assert dtypes >= {"float16", "float32", "float64", "bfloat16", "int8", "int16", "int32",
                          "int64", "uint8", "bool", "string"}

    def test_partitioned_variable_is_reassembled(self):
        # part/embedding was saved as 2 slices of [65, 2] (slice starts >= 64 need the multi-byte
        # OrderedCode key); TF's load_variable returns the full [130, 2] tensor.
        shapes = dict(list_variables(FORMAT / "dtypes"))
        assert shapes["part/embedding"] == [130, 2] and shapes["part/weights"] == [7, 3]
        assert not any("part_" in name for name in shapes)

    def test_two_data_shards(self):
        assert sorted(p.name for p in (FORMAT / "sharded").glob("*.data-*")) == [
            "model.ckpt-7.data-00000-of-00002", "model.ckpt-7.data-00001-of-00002"]

    def test_scalars(self):
        assert load_variable(FORMAT / "dtypes", "global_step").shape == ()
        assert load_variable(FORMAT / "dtypes", "global_step") == 42
        assert load_variable(FORMAT / "dtypes", "scalars/string") == b"hello"

    def test_saved_model_dir_and_variables_folder(self):
        saved = FIXTURES / "saved_model" / "dnn_classifier_3"
        model_dir = MODELS / "dnn_classifier_3"
        expected = load_variable(model_dir, "dnn/logits/kernel")
        for path in (saved, saved / "variables"):
            names = dict(list_variables(path))
            assert names["dnn/logits/kernel"] == [6, 3]
            assert np.array_equal(load_variable(path, "dnn/logits/kernel"), expected)

    def test_a_file_of_the_checkpoint_stands_for_its_prefix(self):
        for name in ("model.ckpt-7.index", "model.ckpt-7.data-00001-of-00002"):
            assert dict(list_variables(FORMAT / "sharded" / name))["shard1/b"] == [3]

    def test_model_dir_reads_latest_of_two(self):
        # TF saved model.ckpt-0 and model.ckpt-5; the `checkpoint` file names -5 the latest.
        assert ee.checkpoints.read_global_step(MODELS / "dnn_classifier_2") == 5
        assert load_variable(MODELS / "dnn_classifier_2", "global_step") == 5
        assert load_variable(MODELS / "dnn_classifier_2" / "model.ckpt-0", "global_step") == 0

    def test_unknown_variable_lists_close_names(self):
        with pytest.raises(ValueError, match=r"'dnn/logits/kernal' not found in checkpoint .*"
                                             r"model\.ckpt-5\. Close names: \['dnn/logits/kernel'"):
            load_variable(MODELS / "dnn_classifier_2", "dnn/logits/kernal")


def test_same_calls_serve_engine_checkpoints(tmp_path):
    path = ee.checkpoints.create_checkpoint(tmp_path, {"lin/weight": [[2.0]], "lin/bias": [3.0]}, 10)
    assert list_variables(tmp_path) == [("global_step", []), ("lin/bias", [1]),
                                        ("lin/weight", [1, 1])]
    assert load_variable(path, "lin/weight").tolist() == [[2.0]]


# ---------------------------------------------------------------------------------------------
# Damaged and foreign files


def _copy_dtypes(tmp_path: Path) -> Path:
    target = tmp_path / "dtypes"
    shutil.copytree(FORMAT / "dtypes", target)
    return target


def _flip(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x55
    path.write_bytes(bytes(data))


def test_corrupt_data_shard_names_file_and_variable(tmp_path):
    directory = _copy_dtypes(tmp_path)
    shard = directory / "model.ckpt-42.data-00000-of-00001"
    offset = tf_checkpoint.TFCheckpoint(str(directory / "model.ckpt-42"))._full["types/float64"].offset
    _flip(shard, int(offset) + 3)
    with pytest.raises(ee.CheckpointError, match=rf"Checksum mismatch in data shard "
                                                 rf"{shard}.* variable 'types/float64'.*corrupt"):
        load_variable(directory, "types/float64")
    assert load_variable(directory, "types/int8").tolist() == [-128, 0, 127]  # the rest reads


def test_corrupt_string_tensor(tmp_path):
    directory = _copy_dtypes(tmp_path)
    shard = directory / "model.ckpt-42.data-00000-of-00001"
    entry = tf_checkpoint.TFCheckpoint(str(directory / "model.ckpt-42"))._full["types/string"]
    _flip(shard, int(entry.offset) + int(entry.size) - 1)  # a byte of the last string
    with pytest.raises(ee.CheckpointError, match=r"Checksum mismatch .* string variable "
                                                 r"'types/string'"):
        load_variable(directory, "types/string")


def test_corrupt_index_block(tmp_path):
    directory = _copy_dtypes(tmp_path)
    index = directory / "model.ckpt-42.index"
    _flip(index, 20)
    with pytest.raises(ee.CheckpointError, match=rf"TF checkpoint index {index} cannot be read: "
                                                 r"checksum mismatch in a data block"):
        list_variables(directory)


def test_truncated_index(tmp_path):
    directory = _copy_dtypes(tmp_path)
    index = directory / "model.ckpt-42.index"
    index.write_bytes(index.read_bytes()[:-10])
    with pytest.raises(ee.CheckpointError, match=rf"{index} cannot be read: it does not end in "
                                                 r"the SSTable magic number: the file is truncated"):
        list_variables(directory)


def test_truncated_data_shard(tmp_path):
    directory = _copy_dtypes(tmp_path)
    shard = directory / "model.ckpt-42.data-00000-of-00001"
    shard.write_bytes(shard.read_bytes()[:100])
    with pytest.raises(ee.CheckpointError, match=rf"Data shard {shard} is truncated: variable "):
        ee.checkpoints.load_checkpoint(directory)


def test_missing_data_shard(tmp_path):
    directory = tmp_path / "sharded"
    shutil.copytree(FORMAT / "sharded", directory)
    (directory / "model.ckpt-7.data-00001-of-00002").unlink()
    with pytest.raises(ee.CheckpointError, match=r"Cannot read data shard .*model\.ckpt-7\.data-"
                                                 r"00001-of-00002 of TF checkpoint .* 'shard1/"):
        load_variable(directory, "shard1/b")


def test_v1_checkpoint_is_refused_by_name(tmp_path):
    path = FORMAT / "v1" / "model.ckpt"
    with pytest.raises(ee.CheckpointError, match=rf"{path} is a TensorFlow V1 checkpoint .* only "
                                                 r"TF's V2 format"):
        list_variables(FORMAT / "v1")


def test_non_checkpoint_index(tmp_path):
    (tmp_path / "model.ckpt-3.index").write_bytes(b"not a table" * 10)
    with pytest.raises(ee.CheckpointError, match=r"model\.ckpt-3\.index cannot be read: it does "
                                                 r"not end in the SSTable magic number"):
        list_variables(tmp_path / "model.ckpt-3")


def test_crc32c_known_answer_and_fallback_agree():
    assert tf_checkpoint.crc32c(b"123456789") == 0xE3069283  # RFC 3720's check value
    data = bytes(range(256)) * 40
    assert tf_checkpoint._python_extend(0, data) == tf_checkpoint.crc32c(data)
    assert tf_checkpoint.masked_crc32c(0) == 0xA282EAD8


def test_reader_imports_no_tensorflow():
    # tensorflow / tensorflow_estimator blocked: importing either would raise ImportError.
    code = textwrap.dedent(f"""
        import sys
        sys.modules["tensorflow"] = None
        sys.modules["tensorflow_estimator"] = None
        import estimator_engine as ee
        names = dict(ee.checkpoints.list_variables({str(MODELS / "dnn_classifier_3")!r}))
        assert names["dnn/logits/kernel"] == [6, 3], names
        ee.checkpoints.load_checkpoint({str(FORMAT / "sharded")!r})
        loaded = [m for m in sys.modules if m.split(".")[0] in ("tensorflow", "tensorflow_estimator")
                  and sys.modules[m] is not None]
        assert not loaded, loaded
        print("ok")
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
