"""Feature columns: TF's constructors, validation, OOV/default rules, hashing and the two modules."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import numpy as np
import pytest
import torch

import estimator_engine as ee
from estimator_engine import feature_column as fc
from estimator_engine.checkpoints import create_checkpoint, module_variables

VOCAB = ["doctor", "lawyer", "consultant"]


def _ids(column, value, key=None, **extra):
    """The [B, K] ids of a categorical column for one feature value, as a list."""
    features = {key or column.key: value, **extra}
    cache = fc._Cache(features, torch.device("cpu"))
    return column._ids(cache).ids.tolist()


def _dense(column, features):
    return fc.DenseFeatures([column])(features)


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


# ------------------------------------------------------------------------------------------------
# Hashing
# ------------------------------------------------------------------------------------------------


class TestFingerprint:
    @pytest.mark.parametrize("text, expected", [
        ("", 11160318154034397263),
        ("Q", 13816109650407654260),
        (",=", 1326014594494455617),
        ("WW5", 6316074107149058620),
        ("test", 8581389452482819506),
        ("e#p8", 252499459662674074),
        ("K6Pjv<>ad", 16506019169567922731),
        ("/dWQW6&i7h$1@", 11452602314494946942),
        ("bF&d$MYIhB.Ac=qC", 17582099205024456557),
        ("dXB@tDQ-v5<H]rq2Pcc*s>nC-[Mdy", 8365906589669344754),
        ("test" * 8, -4196240717365766262 + (1 << 64)),
        ("ECCD828C-5D7A-4C8B-9A1B-F244747E96C3", 9693850515132481856),
        ("F7479877-4690-4A44-AFC9-8FE987EA512F:some_other_id", 6862335115798125349),
        ("test" * 64, 3500507768004279527),
    ])
    def test_farmhash_fingerprint64_vectors(self, text, expected):
        # Published FarmHash Fingerprint64 test vectors, every length branch (0-3, 4-7, 8-16,
        # 17-32, 33-64, > 64 bytes).
        assert fc.fingerprint64(text) == expected
        assert fc.fingerprint64(text.encode()) == expected

    def test_tf_string_to_hash_bucket_fast_doc_example(self):
        assert [fc.fingerprint64(s) % 3 for s in ["Hello", "TensorFlow", "2.x"]] == [0, 2, 2]

    def test_rejects_other_types(self):
        with pytest.raises(TypeError, match=re.escape("fingerprint64 takes str or bytes, got int")):
            fc.fingerprint64(3)

    def test_fingerprint_cat64_matches_tf_sparse_cross_hashed(self):
        # TF sparse_cross_op_test: the hashed cross of three one-value features.
        values = ["batch1-FC1-F1", "batch1-FC2-F1", "batch1-FC3-F1"]

        def cross(key):
            hashed = key
            for value in values:
                hashed = fc.fingerprint_cat64(hashed, fc.fingerprint64(value))
            return hashed

        assert cross(0xDECAFCAFFE) % 100 == 83
        assert cross(0xDECAFCAFFE) % (2**63 - 1) == 1971693436396284976
        assert cross(0xDECAFCAFFE + 1) == 4847552627144134031
        assert cross(0xDECAFCAFFE + 1) % 100 == 31

    def test_fingerprint_cat64_vectorised_equals_scalar(self):
        a = np.array([1, 2**63 + 5, 123456789], dtype=np.uint64)
        b = np.array([7, 0, 2**64 - 1], dtype=np.uint64)
        vector = fc.fingerprint_cat64(a, b)
        assert vector.tolist() == [fc.fingerprint_cat64(int(x), int(y)) for x, y in zip(a, b)]

    def test_hash_ids_stable_across_processes(self, tmp_path):
        code = (
            "import numpy as np, torch\nfrom estimator_engine import feature_column as fc\n"
            "col = fc.categorical_column_with_hash_bucket('city', 1000)\n"
            "cross = fc.crossed_column(['city', 'zip'], 997)\n"
            "f = {'city': np.array(['paris', 'rome', 'oslo'], dtype=object),"
            " 'zip': torch.tensor([75001, 100, 150])}\n"
            "c = fc._Cache(f, torch.device('cpu'))\n"
            "print(col._ids(c).ids.flatten().tolist(), cross._ids(c).ids.flatten().tolist())\n"
        )
        env = {**os.environ, "PYTHONHASHSEED": "12345"}
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                env=env, check=True, cwd=os.getcwd(), timeout=120)
        col = fc.categorical_column_with_hash_bucket("city", 1000)
        cross = fc.crossed_column(["city", "zip"], 997)
        features = {"city": np.array(["paris", "rome", "oslo"], dtype=object),
                    "zip": torch.tensor([75001, 100, 150])}
        cache = fc._Cache(features, torch.device("cpu"))
        here = f"{col._ids(cache).ids.flatten().tolist()} {cross._ids(cache).ids.flatten().tolist()}"
        assert result.stdout.strip() == here


# ------------------------------------------------------------------------------------------------
# numeric_column
# ------------------------------------------------------------------------------------------------


class TestNumericColumn:
    def test_defaults_and_name(self):
        column = fc.numeric_column("age")
        assert column == fc.NumericColumn("age", (1,), None, torch.float32, None)
        assert column.name == "age" and column.dense_dimension == 1
        assert hash(column) == hash(fc.numeric_column("age"))
        assert fc.numeric_column("x", shape=3).shape == (3,)

    def test_output_shapes(self):
        assert _dense(fc.numeric_column("a"), {"a": torch.tensor([1, 2])}).tolist() == [[1.0], [2.0]]
        out = _dense(fc.numeric_column("p", shape=(2, 2)), {"p": np.arange(8).reshape(2, 2, 2)})
        assert out.dtype == torch.float32
        assert out.tolist() == [[0, 1, 2, 3], [4, 5, 6, 7]]
        assert _dense(fc.numeric_column("l"), {"l": [1.5, 2.5]}).tolist() == [[1.5], [2.5]]

    def test_normalizer_and_default_for_nan(self):
        column = fc.numeric_column("a", default_value=4.0, normalizer_fn=lambda x: (x - 2) / 2)
        assert _dense(column, {"a": np.array([2.0, np.nan])}).tolist() == [[0.0], [1.0]]

    def test_shape_mismatch(self):
        with pytest.raises(ValueError, match=r"Feature 'p' has shape \[2, 3\], which does not match "
                                             r"the numeric_column shape \(2,\)"):
            _dense(fc.numeric_column("p", shape=2), {"p": torch.zeros(2, 3)})

    def test_missing_feature(self):
        with pytest.raises(ValueError, match=r"The feature 'age' is not in features dictionary\. "
                                             r"Available features: \['agee'\]"):
            _dense(fc.numeric_column("age"), {"agee": torch.zeros(2)})

    @pytest.mark.parametrize("kwargs, match", [
        ({"key": 1}, r"key must be a string\. Got: type <class 'int'>\. Given key: 1"),
        ({"key": "a", "shape": (2, 0)}, r"shape dimensions must be greater than 0\. shape: \(2, 0\)"),
        ({"key": "a", "shape": (2.5,)}, r"shape dimensions must be integer"),
        ({"key": "a", "shape": 2, "default_value": [1.0, 2.0, 3.0]},
         r"The shape of default_value must be equal to given shape"),
        ({"key": "a", "default_value": "x"}, r"default_value must be compatible with dtype"),
        ({"key": "a", "dtype": torch.bool}, r"dtype must be convertible to float"),
    ])
    def test_validation(self, kwargs, match):
        with pytest.raises(ValueError, match=match):
            fc.numeric_column(**kwargs)

    def test_normalizer_not_callable(self):
        with pytest.raises(TypeError, match=r"normalizer_fn must be a callable\. Given: 3"):
            fc.numeric_column("a", normalizer_fn=3)


# ------------------------------------------------------------------------------------------------
# bucketized_column
# ------------------------------------------------------------------------------------------------


class TestBucketizedColumn:
    def test_boundary_edges(self):
        column = fc.bucketized_column(fc.numeric_column("age"), [18, 25, 30])
        assert column.name == "age_bucketized" and column.num_buckets == 4
        ages = torch.tensor([-5.0, 17.99, 18.0, 24.0, 25.0, 30.0, 99.0])
        assert _ids(column, ages, key="age") == [[0], [0], [1], [1], [2], [3], [3]]
        out = _dense(column, {"age": torch.tensor([18.0, 30.0])})
        assert out.tolist() == [[0, 1, 0, 0], [0, 0, 0, 1]]

    def test_multi_element_source(self):
        column = fc.bucketized_column(fc.numeric_column("p", shape=2), [0.0])
        assert column.num_buckets == 4 and column.dense_dimension == 4
        features = {"p": torch.tensor([[-1.0, 1.0]])}
        assert _ids(column, features["p"], key="p") == [[0, 3]]  # offsets per element, as TF
        assert _dense(column, features).tolist() == [[1, 0, 0, 1]]

    @pytest.mark.parametrize("boundaries, match", [
        ([], "boundaries must not be empty."),
        ([1, 0], "boundaries must be a sorted list."),
        ([0, 1, 1], "boundaries must be a sorted list."),
        ({0, 1}, "boundaries must be a sorted list."),
        (["a", "b"], "boundaries must be a sorted list of numbers."),
    ])
    def test_boundaries_validation(self, boundaries, match):
        with pytest.raises(ValueError, match=match):
            fc.bucketized_column(fc.numeric_column("a"), boundaries)

    def test_array_boundaries(self):
        column = fc.bucketized_column(fc.numeric_column("a"), np.array([0, 1]))
        assert column.boundaries == (0.0, 1.0)

    def test_source_validation(self):
        with pytest.raises(ValueError, match=r"source_column must be a column generated with "
                                             r"numeric_column\(\)"):
            fc.bucketized_column(fc.categorical_column_with_identity("a", 3), [1])
        with pytest.raises(ValueError, match=re.escape("source_column must be one-dimensional column")):
            fc.bucketized_column(fc.numeric_column("a", shape=(2, 2)), [1])


# ------------------------------------------------------------------------------------------------
# categorical_column_with_vocabulary_list / _file
# ------------------------------------------------------------------------------------------------


class TestVocabularyList:
    def test_ints_fed_to_a_text_vocabulary_are_refused_unless_it_holds_int_words(self):
        """TF refuses int input to a string column; ints read as text can only match words like '7'."""
        with pytest.raises(ValueError, match=re.escape(
                "Column dtype and SparseTensors dtype must be compatible. key: job, column dtype: string, "
                "tensor dtype: int64 (ints such as ['0', '1'] cannot match the vocabulary")):
            _ids(fc.categorical_column_with_vocabulary_list("job", VOCAB), np.array([0, 1, 1]))
        codes = fc.categorical_column_with_vocabulary_list("code", ["10", "20"])
        assert _ids(codes, np.array([20, 10, 30])) == [[1], [0], [-1]]

    def test_ids_oov_and_missing_dropped(self):
        column = fc.categorical_column_with_vocabulary_list("job", VOCAB)
        assert column.name == "job" and column.num_buckets == 3 and column.dtype is str
        values = np.array(["lawyer", "pilot", "", "doctor", None], dtype=object)
        assert _ids(column, values) == [[1], [-1], [-1], [0], [-1]]

    def test_default_value(self):
        column = fc.categorical_column_with_vocabulary_list("job", VOCAB, default_value=2)
        assert _ids(column, ["pilot", "", "lawyer"]) == [[2], [-1], [1]]

    def test_num_oov_buckets_hash_like_tf(self):
        column = fc.categorical_column_with_vocabulary_list("job", VOCAB, num_oov_buckets=4)
        assert column.num_buckets == 7
        got = _ids(column, ["pilot", "chef", "consultant"])
        assert got == [[3 + fc.fingerprint64("pilot") % 4], [3 + fc.fingerprint64("chef") % 4], [2]]

    def test_int_vocabulary(self):
        column = fc.categorical_column_with_vocabulary_list("code", [10, 20, 30], num_oov_buckets=1)
        assert column.dtype is int
        assert _ids(column, torch.tensor([20, -1, 99, 10])) == [[1], [-1], [3], [0]]

    def test_multivalent_inputs(self):
        column = fc.categorical_column_with_vocabulary_list("job", VOCAB)
        assert _ids(column, [["doctor", "lawyer"], [], ["consultant"]]) == [[0, 1], [-1, -1], [2, -1]]
        assert _ids(column, np.array([["doctor", ""], ["lawyer", "x"]], dtype=object)) == \
            [[0, -1], [1, -1]]

    def test_bytes_and_unicode_arrays(self):
        column = fc.categorical_column_with_vocabulary_list("job", VOCAB)
        assert _ids(column, np.array(["lawyer", "doctor"])) == [[1], [0]]
        assert _ids(column, [b"consultant"]) == [[2]]

    def test_lookup_is_per_unique_value(self, monkeypatch):
        calls = []
        real = fc.fingerprint64
        monkeypatch.setattr(fc, "fingerprint64", lambda v: calls.append(v) or real(v))
        column = fc.categorical_column_with_vocabulary_list("job", VOCAB, num_oov_buckets=2)
        values = np.array(["pilot", "chef", "doctor"] * 10_000, dtype=object)
        ids = _ids(column, values)
        assert len(ids) == 30_000 and sorted(calls) == ["chef", "pilot"]

    @pytest.mark.parametrize("kwargs, match", [
        ({"vocabulary_list": []}, r"vocabulary_list \[\] must be non-empty, column_name: job"),
        ({"vocabulary_list": ["a", "b", "a"]},
         r"Duplicate keys in vocabulary_list \['a', 'b', 'a'\], column_name: job"),
        ({"vocabulary_list": VOCAB, "default_value": 1, "num_oov_buckets": 2},
         "Can't specify both num_oov_buckets and default_value in job."),
        ({"vocabulary_list": VOCAB, "num_oov_buckets": -1}, "Invalid num_oov_buckets -1 in job."),
        ({"vocabulary_list": VOCAB, "dtype": int},
         "dtype int and vocabulary dtype str do not match, column_name: job"),
        ({"vocabulary_list": [1.5, 2.5]},
         r"column_name: job vocabulary dtype must be string or integer"),
    ])
    def test_validation(self, kwargs, match):
        with pytest.raises(ValueError, match=match):
            fc.categorical_column_with_vocabulary_list("job", **kwargs)

    def test_string_input_for_int_vocabulary(self):
        column = fc.categorical_column_with_vocabulary_list("code", [1, 2])
        with pytest.raises(ValueError, match=re.escape("Column dtype and SparseTensors dtype must be "
                                             "compatible. key: code, column dtype: int64")):
            _ids(column, ["1"])


class TestVocabularyFile:
    @pytest.fixture
    def vocab_file(self, tmp_path):
        path = tmp_path / "vocab.txt"
        path.write_text("doctor\nlawyer\nconsultant\nengineer\n", encoding="utf-8")
        return path

    def test_ids_from_lines(self, vocab_file):
        column = fc.categorical_column_with_vocabulary_file("job", vocab_file)
        assert column.vocabulary_size == 4 and column.num_buckets == 4
        assert column.default_value is None
        assert _ids(column, ["engineer", "pilot", "", "doctor"]) == [[3], [-1], [-1], [0]]

    def test_vocabulary_size_keeps_first_lines(self, vocab_file):
        column = fc.categorical_column_with_vocabulary_file("job", vocab_file, vocabulary_size=2,
                                                            num_oov_buckets=1)
        assert column.num_buckets == 3
        assert _ids(column, ["engineer", "lawyer"]) == [[2], [1]]
        column = fc.categorical_column_with_vocabulary_file("job", vocab_file, vocabulary_size=2,
                                                            default_value=0)
        assert _ids(column, ["engineer"]) == [[0]]

    def test_validation(self, vocab_file, tmp_path):
        with pytest.raises(ValueError, match=re.escape("Missing vocabulary_file in job.")):
            fc.categorical_column_with_vocabulary_file("job", None)
        with pytest.raises(ValueError, match=re.escape("vocabulary_file in job does not exist.")):
            fc.categorical_column_with_vocabulary_file("job", tmp_path / "nope.txt")
        with pytest.raises(ValueError, match=re.escape("Invalid vocabulary_size in job.")):
            fc.categorical_column_with_vocabulary_file("job", vocab_file, vocabulary_size=0)
        with pytest.raises(ValueError, match=re.escape("Can't specify both num_oov_buckets and default_value")):
            fc.categorical_column_with_vocabulary_file("job", vocab_file, num_oov_buckets=1,
                                                       default_value=0)
        with pytest.raises(ValueError, match=re.escape("column_name: job dtype must be string or integer")):
            fc.categorical_column_with_vocabulary_file("job", vocab_file, dtype=float)

    def test_errors_found_when_read(self, tmp_path):
        path = tmp_path / "dup.txt"
        path.write_text("a\nb\na\n", encoding="utf-8")
        column = fc.categorical_column_with_vocabulary_file("job", path)
        with pytest.raises(ValueError, match=r"Duplicate keys in vocabulary_file .*job: \['a'\]"):
            _ids(column, ["a"])
        column = fc.categorical_column_with_vocabulary_file("job", path, vocabulary_size=5)
        with pytest.raises(ValueError, match=re.escape("Invalid vocab_size 5 in job: the vocabulary_file")):
            _ids(column, ["a"])


# ------------------------------------------------------------------------------------------------
# identity, hash bucket, weighted
# ------------------------------------------------------------------------------------------------


class TestIdentity:
    def test_ids_and_missing(self):
        column = fc.categorical_column_with_identity("video", 5)
        assert column.num_buckets == 5 and column.name == "video"
        assert _ids(column, torch.tensor([0, 4, -1])) == [[0], [4], [-1]]
        assert _ids(column, [[1, 2], [3]]) == [[1, 2], [3, -1]]

    def test_out_of_range_without_default(self):
        column = fc.categorical_column_with_identity("video", 5)
        with pytest.raises(ValueError, match=r"Bucket index for categorical column exceeds number "
                                             r"of buckets: column 'video' got ids \[5, 7\]"):
            _ids(column, torch.tensor([1, 5, 7]))
        with pytest.raises(ValueError, match=r"Negative bucket index for categorical column: "
                                             r"column 'video' got ids \[-3\]"):
            _ids(column, np.array([-3, 1]))

    def test_out_of_range_with_default(self):
        column = fc.categorical_column_with_identity("video", 5, default_value=0)
        assert _ids(column, torch.tensor([7, -3, -1, 2])) == [[0], [0], [-1], [2]]

    def test_validation(self):
        with pytest.raises(ValueError, match=re.escape("num_buckets 0 < 1, column_name video")):
            fc.categorical_column_with_identity("video", 0)
        with pytest.raises(ValueError, match=r"default_value 5 not in range \[0, 5\), column_name video"):
            fc.categorical_column_with_identity("video", 5, default_value=5)
        column = fc.categorical_column_with_identity("video", 5)
        with pytest.raises(ValueError, match=re.escape("Column dtype and SparseTensors dtype must be compatible")):
            _ids(column, ["1"])


class TestHashBucket:
    def test_tf_known_ids(self):
        # TF feature_column_v2_test HashedCategoricalColumnTest: strings and int64 values.
        column = fc.categorical_column_with_hash_bucket("aaa", 10)
        assert column.name == "aaa" and column.num_buckets == 10 and column.dtype is str
        assert _ids(column, ["omar", "stringer", "marlo"]) == [[6], [4], [1]]
        int_column = fc.categorical_column_with_hash_bucket("aaa", 10, dtype=torch.int64)
        assert int_column.dtype is int
        assert _ids(int_column, torch.tensor([101, 201, 301])) == [[3], [7], [5]]

    def test_missing_dropped(self):
        column = fc.categorical_column_with_hash_bucket("aaa", 10)
        assert _ids(column, ["", "omar", None]) == [[-1], [6], [-1]]

    def test_validation(self):
        with pytest.raises(ValueError, match=re.escape("hash_bucket_size must be set. key: aaa")):
            fc.categorical_column_with_hash_bucket("aaa", None)
        with pytest.raises(ValueError, match=re.escape("hash_bucket_size must be at least 1. "
                                             "hash_bucket_size: 0, key: aaa")):
            fc.categorical_column_with_hash_bucket("aaa", 0)
        with pytest.raises(ValueError, match=re.escape("column_name: aaa dtype must be string or integer")):
            fc.categorical_column_with_hash_bucket("aaa", 10, dtype=torch.float32)


class TestWeightedCategorical:
    def test_linear_uses_weights(self):
        words = fc.categorical_column_with_identity("words", 3)
        column = fc.weighted_categorical_column(words, "counts")
        assert column.name == "words_weighted_by_counts" and column.num_buckets == 3
        model = fc.LinearModel([column])
        with torch.no_grad():
            model.column_weights(column).weights.copy_(torch.tensor([[1.0], [10.0], [100.0]]))
        features = {"words": torch.tensor([[0, 2], [1, -1]]),
                    "counts": torch.tensor([[2.0, 0.5], [3.0, 9.0]])}
        assert model(features).tolist() == [[52.0], [30.0]]

    def test_validation(self):
        with pytest.raises(ValueError, match=re.escape("categorical_column must be a CategoricalColumn")):
            fc.weighted_categorical_column(fc.numeric_column("a"), "w")


# ------------------------------------------------------------------------------------------------
# crossed_column
# ------------------------------------------------------------------------------------------------


class TestCrossed:
    def test_name_and_known_ids(self):
        column = fc.crossed_column(["b", "a"], 100)
        assert column.name == "a_X_b" and column.num_buckets == 100
        features = {"b": ["x", "y", ""], "a": np.array([3, 4, 5])}
        # Two dense raw keys: crossed in the given order, fingerprint of strings, integers as they
        # are; a dense string's '' is a value like any other (TF's SparseCrossOp).
        seed = 0xDECAFCAFFE
        expected = [fc.fingerprint_cat64(fc.fingerprint_cat64(seed, fc.fingerprint64(b)), a) % 100
                    for b, a in [("x", 3), ("y", 4), ("", 5)]]
        cache = fc._Cache(features, torch.device("cpu"))
        assert column._ids(cache).ids.tolist() == [[expected[0]], [expected[1]], [expected[2]]]
        ragged = fc._Cache({"b": [["x"], ["y"], []], "a": np.array([3, 4, 5])}, torch.device("cpu"))
        assert column._ids(ragged).ids.tolist() == [[expected[0]], [expected[1]], [-1]]  # sparse: no value

    def test_cross_with_categorical_column_uses_ids(self):
        job = fc.categorical_column_with_vocabulary_list("job", VOCAB)
        column = fc.crossed_column([job, "city"], 50, hash_key=7)
        assert column.name == "city_X_job"
        cache = fc._Cache({"job": ["lawyer"], "city": ["rome"]}, torch.device("cpu"))
        expected = fc.fingerprint_cat64(fc.fingerprint_cat64(7, 1), fc.fingerprint64("rome")) % 50
        assert column._ids(cache).ids.tolist() == [[expected]]

    def test_multivalent_cross_product(self):
        column = fc.crossed_column(["a", "b"], 1000)
        cache = fc._Cache({"a": [["x", "y"]], "b": [["p", "q", "r"]]}, torch.device("cpu"))
        ids = column._ids(cache).ids
        assert ids.shape == (1, 6) and bool((ids >= 0).all())

    def test_nested_cross_flattens_leaves(self):
        inner = fc.crossed_column(["a", "b"], 10)
        outer = fc.crossed_column([inner, "c"], 10)
        assert outer.name == "a_X_b_X_c"

    def test_validation(self):
        with pytest.raises(ValueError, match=r"keys must be a list with length > 1\. Given: \['a'\]"):
            fc.crossed_column(["a"], 10)
        with pytest.raises(ValueError, match=re.escape("hash_bucket_size must be > 1. hash_bucket_size: 0")):
            fc.crossed_column(["a", "b"], 0)
        with pytest.raises(ValueError, match=re.escape("Unsupported key type. All keys must be either string")):
            fc.crossed_column(["a", fc.numeric_column("b")], 10)
        with pytest.raises(ValueError, match=re.escape("categorical_column_with_hash_bucket is not supported "
                                             "for crossing")):
            fc.crossed_column(["a", fc.categorical_column_with_hash_bucket("b", 5)], 10)


# ------------------------------------------------------------------------------------------------
# embedding_column, indicator_column
# ------------------------------------------------------------------------------------------------


def _job_embedding(**kwargs):
    job = fc.categorical_column_with_vocabulary_list("job", VOCAB)
    table = torch.tensor([[1.0, 2.0], [3.0, 4.0], [10.0, 20.0]])
    return fc.embedding_column(job, 2, initializer=lambda shape: table, **kwargs)


class TestEmbedding:
    def test_defaults(self):
        job = fc.categorical_column_with_vocabulary_list("job", VOCAB)
        column = fc.embedding_column(job, 16)
        assert column.name == "job_embedding" and column.combiner == "mean"
        assert column.trainable and column.max_norm is None
        torch.manual_seed(0)
        table = column.initial_value()
        assert table.shape == (3, 16)
        assert float(table.abs().max()) <= 2 / 4 + 1e-6  # truncated at 2 stddev = 2/sqrt(16)
        big = fc.embedding_column(fc.categorical_column_with_identity("i", 4000), 16).initial_value()
        assert abs(float(big.std()) - 0.25 * 0.88) < 0.01  # std of N(0, .25) cut at 2 sigma

    @pytest.mark.parametrize("combiner, expected", [
        ("mean", [[2.0, 3.0], [10.0, 20.0], [0.0, 0.0]]),
        ("sum", [[4.0, 6.0], [10.0, 20.0], [0.0, 0.0]]),
        ("sqrtn", [[4 / 2**0.5, 6 / 2**0.5], [10.0, 20.0], [0.0, 0.0]]),
    ])
    def test_combiners_and_missing_rows(self, combiner, expected):
        column = _job_embedding(combiner=combiner)
        out = _dense(column, {"job": [["doctor", "lawyer"], ["consultant", "pilot"], [""]]})
        assert torch.allclose(out, torch.tensor(expected))

    def test_max_norm(self):
        out = _dense(_job_embedding(max_norm=5.0), {"job": ["consultant", "doctor"]})
        assert torch.allclose(out, torch.tensor([[5 / 500**0.5 * 10, 5 / 500**0.5 * 20], [1.0, 2.0]]))

    def test_not_trainable(self):
        layer = fc.DenseFeatures([_job_embedding(trainable=False)])
        assert not layer.job_embedding.embedding_weights.requires_grad

    def test_ckpt_to_load_from(self, tmp_path):
        create_checkpoint(tmp_path, {"old/emb": [[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]]}, global_step=1)
        job = fc.categorical_column_with_vocabulary_list("job", VOCAB)
        column = fc.embedding_column(job, 2, ckpt_to_load_from=tmp_path, tensor_name_in_ckpt="old/emb")
        assert column.initial_value().tolist() == [[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]]
        wrong = fc.embedding_column(job, 3, ckpt_to_load_from=tmp_path, tensor_name_in_ckpt="old/emb")
        with pytest.raises(ValueError, match=r"has shape \[3, 2\], but embedding column "
                                             r"job_embedding needs \[3, 3\]"):
            wrong.initial_value()

    @pytest.mark.parametrize("kwargs, match", [
        ({"dimension": 0}, "Invalid dimension 0."),
        ({"dimension": 2, "combiner": "max"}, r"combiner must be one of \['mean', 'sqrtn', 'sum'\]"),
        ({"dimension": 2, "initializer": 3}, "initializer must be callable if specified. Embedding "
                                             "of column_name: job"),
        ({"dimension": 2, "ckpt_to_load_from": "/x"},
         "Must specify both `ckpt_to_load_from` and `tensor_name_in_ckpt` or none of them."),
    ])
    def test_validation(self, kwargs, match):
        job = fc.categorical_column_with_vocabulary_list("job", VOCAB)
        with pytest.raises(ValueError, match=match):
            fc.embedding_column(job, **kwargs)
        with pytest.raises(ValueError, match=re.escape("categorical_column must be a CategoricalColumn")):
            fc.embedding_column(fc.numeric_column("a"), 2)


class TestIndicator:
    def test_multi_hot_counts(self):
        job = fc.categorical_column_with_vocabulary_list("job", VOCAB, num_oov_buckets=1)
        column = fc.indicator_column(job)
        assert column.name == "job_indicator" and column.dense_dimension == 4
        out = _dense(column, {"job": [["doctor", "doctor", "lawyer"], [""], ["pilot"]]})
        assert out.tolist() == [[2, 1, 0, 0], [0, 0, 0, 0], [0, 0, 0, 1]]

    def test_validation(self):
        with pytest.raises(ValueError, match=re.escape("Unsupported input type. Input must be a "
                                             "CategoricalColumn")):
            fc.indicator_column(fc.numeric_column("a"))


# ------------------------------------------------------------------------------------------------
# DenseFeatures
# ------------------------------------------------------------------------------------------------


class TestDenseFeatures:
    def test_order_dims_and_variable_names(self):
        job = fc.categorical_column_with_vocabulary_list("occupation", VOCAB)
        columns = [fc.numeric_column("z_income"), fc.embedding_column(job, 2),
                   fc.indicator_column(job), fc.numeric_column("age", shape=2),
                   fc.bucketized_column(fc.numeric_column("age", shape=2), [0.0])]
        layer = fc.DenseFeatures(columns)
        assert [c.name for c in layer.feature_columns] == [
            "age", "age_bucketized", "occupation_embedding", "occupation_indicator", "z_income"]
        assert layer.output_dim == 2 + 4 + 2 + 3 + 1
        names = module_variables("dnn/input_from_feature_columns/input_layer", layer)
        assert list(names) == [
            "dnn/input_from_feature_columns/input_layer/occupation_embedding/embedding_weights"]
        with torch.no_grad():
            layer.occupation_embedding.embedding_weights.copy_(torch.tensor(
                [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]))
        out = layer({"age": torch.tensor([[-1.0, 2.0]]), "occupation": ["lawyer"],
                     "z_income": torch.tensor([7.0])})
        assert out.tolist() == [[-1, 2, 1, 0, 0, 1, 3, 4, 0, 1, 0, 7]]

    def test_backprop_reaches_embedding(self):
        layer = fc.DenseFeatures([_job_embedding()])
        layer({"job": ["lawyer"]}).sum().backward()
        grad = layer.job_embedding.embedding_weights.grad
        assert grad.tolist() == [[0, 0], [1, 1], [0, 0]]

    def test_dotted_column_name(self):
        job = fc.categorical_column_with_vocabulary_list("user.job", VOCAB)
        layer = fc.DenseFeatures([fc.embedding_column(job, 2)])
        assert list(module_variables("in", layer)) == ["in/user_DOT_job_embedding/embedding_weights"]
        assert layer({"user.job": ["doctor"]}).shape == (1, 2)
        assert fc.variable_scope_name("user.job") == "user_DOT_job"

    def test_errors(self):
        job = fc.categorical_column_with_vocabulary_list("job", VOCAB)
        with pytest.raises(ValueError, match=re.escape("Items of feature_columns must be a DenseColumn. You "
                                             "can wrap a categorical column with an "
                                             "embedding_column or indicator_column")):
            fc.DenseFeatures([job])
        with pytest.raises(ValueError, match=re.escape("feature_columns must not be empty.")):
            fc.DenseFeatures([])
        with pytest.raises(ValueError, match=re.escape("Duplicate feature column name found for columns: "
                                             "age and age")):
            fc.DenseFeatures([fc.numeric_column("age"), fc.numeric_column("age", shape=2)])
        layer = fc.DenseFeatures([fc.numeric_column("age")])
        with pytest.raises(ValueError, match=re.escape("features should be a dictionary of `Tensor`s. Given "
                                             "type: <class 'torch.Tensor'>")):
            layer(torch.zeros(2))

    def test_input_layer_function(self):
        out = fc.input_layer({"b": [1.0], "a": [2.0]}, [fc.numeric_column("b"), fc.numeric_column("a")])
        assert out.tolist() == [[2.0, 1.0]]


# ------------------------------------------------------------------------------------------------
# LinearModel
# ------------------------------------------------------------------------------------------------


class TestLinearModel:
    def test_variable_names_shapes_and_zero_init(self):
        job = fc.categorical_column_with_vocabulary_list("job", VOCAB, num_oov_buckets=1)
        columns = [fc.numeric_column("age"), job, fc.crossed_column(["job", "city"], 10),
                   fc.bucketized_column(fc.numeric_column("height"), [1.0, 2.0]),
                   fc.numeric_column("pixels", shape=(2, 2))]
        model = fc.LinearModel(columns, units=3)
        variables = module_variables("linear/linear_model", model)
        shapes = {name: list(value.shape) for name, value in variables.items()}
        assert shapes == {
            "linear/linear_model/age/weights": [1, 3],
            "linear/linear_model/city_X_job/weights": [10, 3],
            "linear/linear_model/height_bucketized/weights": [3, 3],
            "linear/linear_model/job/weights": [4, 3],
            "linear/linear_model/pixels/weights": [4, 3],
            "linear/linear_model/bias_weights": [3],
        }
        assert all(float(v.abs().sum()) == 0 for v in variables.values())

    def test_tf_linear_regressor_known_logits(self):
        # TF linear_testing_utils: weight 11, bias 2, age 1 -> prediction 13.
        model = fc.LinearModel([fc.numeric_column("age")])
        with torch.no_grad():
            model.column_weights(fc.numeric_column("age")).weights.fill_(11.0)
            model.bias_weights.fill_(2.0)
        assert model({"age": torch.tensor([[1.0], [2.0]])}).tolist() == [[13.0], [24.0]]

    @pytest.mark.parametrize("combiner, expected", [
        ("sum", [[3.0 + 1], [10.0 + 1], [0.0 + 1]]),
        ("mean", [[1.5 + 1], [10.0 + 1], [0.0 + 1]]),
        ("sqrtn", [[3 / 2**0.5 + 1], [10.0 + 1], [0.0 + 1]]),
    ])
    def test_sparse_combiner(self, combiner, expected):
        job = fc.categorical_column_with_vocabulary_list("job", VOCAB)
        model = fc.LinearModel([job], sparse_combiner=combiner)
        with torch.no_grad():
            model.column_weights(job).weights.copy_(torch.tensor([[1.0], [2.0], [10.0]]))
            model.bias_weights.fill_(1.0)
        out = model({"job": [["doctor", "lawyer"], ["consultant"], ["pilot"]]})
        assert torch.allclose(out, torch.tensor(expected))

    def test_dense_columns_in_linear_model(self):
        job = fc.categorical_column_with_vocabulary_list("job", VOCAB)
        emb = fc.embedding_column(job, 2, initializer=lambda s: torch.ones(s))
        model = fc.LinearModel([fc.indicator_column(job), emb])
        names = sorted(module_variables("lm", model))
        assert names == ["lm/bias_weights", "lm/job_embedding/embedding_weights",
                         "lm/job_embedding/weights", "lm/job_indicator/weights"]
        with torch.no_grad():
            model.column_weights(emb).weights.fill_(1.0)
            model.column_weights(fc.indicator_column(job)).weights.copy_(torch.tensor(
                [[5.0], [6.0], [7.0]]))
        assert model({"job": ["lawyer"]}).tolist() == [[2.0 + 6.0]]

    def test_column_named_like_module_attribute(self):
        model = fc.LinearModel([fc.numeric_column("training"), fc.numeric_column("forward")])
        assert sorted(module_variables("m", model)) == [
            "m/bias_weights", "m/forward/weights", "m/training/weights"]
        assert model.training is True
        model.eval()
        assert model.training is False
        assert model({"training": [1.0], "forward": [2.0]}).tolist() == [[0.0]]
        model = fc.LinearModel([fc.numeric_column("bias_weights")])
        assert sorted(module_variables("m", model)) == ["m/bias_weights", "m/bias_weights/weights"]

    def test_errors(self):
        with pytest.raises(ValueError, match=re.escape("Items of feature_columns must be either a DenseColumn "
                                             "or CategoricalColumn")):
            fc.LinearModel(["age"])
        with pytest.raises(ValueError, match=r"sparse_combiner must be one of \['mean', 'sqrtn', "
                                             r"'sum'\], got 'max'"):
            fc.LinearModel([fc.numeric_column("a")], sparse_combiner="max")
        with pytest.raises(ValueError, match=re.escape("units must be a positive int, got 0")):
            fc.LinearModel([fc.numeric_column("a")], units=0)

    def test_linear_model_function(self):
        assert fc.linear_model({"x": [1.0, 2.0]}, [fc.numeric_column("x")], units=2).shape == (2, 2)


# ------------------------------------------------------------------------------------------------
# Estimator integration: warm start with vocabulary remapping
# ------------------------------------------------------------------------------------------------

EMBEDDING_VAR = "dnn/input_from_feature_columns/input_layer/occupation_embedding/embedding_weights"


def _make_model_fn(vocabulary, learning_rate):
    occupation = fc.categorical_column_with_vocabulary_list("occupation", vocabulary)
    columns = [fc.embedding_column(occupation, dimension=2)]

    def model_fn(features, labels, mode):
        layer = ee.get_module("dnn/input_from_feature_columns/input_layer",
                              lambda: fc.DenseFeatures(columns))
        output = layer(features)
        loss = ((output.sum(dim=1) - labels) ** 2).mean()
        optimizer = ee.get_optimizer("sgd", lambda: torch.optim.SGD(layer.parameters(),
                                                                    lr=learning_rate))
        return ee.EstimatorSpec(mode, loss=loss, predictions={"out": output},
                                train_op=ee.minimize(optimizer, loss))

    return model_fn


def test_warm_start_remaps_embedding_rows_by_vocabulary(tmp_path):
    old_vocab = ["doctor", "lawyer", "consultant"]
    new_vocab = ["doctor", "consultant", "engineer"]

    def input_fn():
        features = {"occupation": np.array(["doctor", "lawyer", "consultant"], dtype=object)}
        return features, torch.tensor([1.0, 2.0, 3.0])

    source = ee.Estimator(_make_model_fn(old_vocab, 0.1), model_dir=str(tmp_path / "src"))
    source.train(input_fn, steps=2)
    old_rows = torch.as_tensor(source.get_variable_value(EMBEDDING_VAR))
    assert old_rows.shape == (3, 2)

    settings = ee.WarmStartSettings(
        str(tmp_path / "src"), vars_to_warm_start=".*",
        var_name_to_vocab_info={EMBEDDING_VAR: ee.VocabInfo(
            new_vocab=new_vocab, new_vocab_size=3, num_oov_buckets=0, old_vocab=old_vocab)})
    target = ee.Estimator(_make_model_fn(new_vocab, 0.0), model_dir=str(tmp_path / "dst"),
                          warm_start_from=settings)
    target.train(input_fn, steps=1)  # learning rate 0: the table stays as warm-started
    new_rows = torch.as_tensor(target.get_variable_value(EMBEDDING_VAR))
    assert torch.equal(new_rows[0], old_rows[0])  # doctor: in both vocabularies
    assert torch.equal(new_rows[1], old_rows[2])  # consultant: old row 2 -> new row 1
    assert new_rows[2].tolist() == [0.0, 0.0]  # engineer: new token -> zeros (no backup)


def test_pandas_input_fn_batches_feed_both_modules():
    import pandas as pd

    frame = pd.DataFrame({
        "age": [30.0, np.nan, 50.0],
        "job": ["lawyer", None, "pilot"],
        "grade": pd.Series(["b", "a", "b"], dtype="category"),
        "zip": [75001, 100, 150],
    })
    features = next(iter(ee.inputs.pandas_input_fn(frame, batch_size=3, shuffle=False)()))
    job = fc.categorical_column_with_vocabulary_list("job", VOCAB)
    grade = fc.categorical_column_with_vocabulary_list("grade", ["a", "b"])
    zip_code = fc.categorical_column_with_hash_bucket("zip", 100)
    layer = fc.DenseFeatures([fc.numeric_column("age", default_value=0.0),
                              fc.indicator_column(job), fc.indicator_column(grade)])
    # Sorted by name: age, grade_indicator, job_indicator; NaN age -> 0, None job -> no id.
    assert layer(features).tolist() == [[30, 0, 1, 0, 1, 0],
                                        [0, 1, 0, 0, 0, 0],
                                        [50, 0, 1, 0, 0, 0]]
    model = fc.LinearModel([job, zip_code, fc.crossed_column(["job", "zip"], 10)])
    assert model(features).shape == (3, 1)
    # An int feature hashed with a str column hashes the decimal text, as a dtype=int column does.
    cache = fc._Cache(features, torch.device("cpu"))
    assert zip_code._ids(cache).ids.flatten().tolist() == [
        fc.fingerprint64(str(z)) % 100 for z in (75001, 100, 150)]


# ------------------------------------------------------------------------------------------------
# input_layer / linear_model / DenseFeatures / LinearModel inside a model_fn: tracked weights
# ------------------------------------------------------------------------------------------------

IRIS_CSV = os.path.join(os.path.dirname(__file__), "..", "..", "sample_data", "iris.csv")


def _iris_species():
    import pandas as pd

    frame = pd.read_csv(IRIS_CSV)
    species = sorted(frame["species"].unique())
    labels = np.array([species.index(s) for s in frame["species"]], dtype=np.int64)
    return {"species": frame["species"].to_numpy(dtype=object)}, labels, species


def _embedding_model_fn(species, layer_kind):
    """Class = the species feature itself, seen only through an embedding: learnable exactly
    when the embedding table is trained and kept between batches."""
    column = fc.embedding_column(fc.categorical_column_with_vocabulary_list("species", species), 2)

    def model_fn(features, labels, mode):
        variables = {}
        if layer_kind == "input_layer":
            net = fc.input_layer(features, [column], cols_to_vars=variables)
            table = variables[column]
        else:  # a DenseFeatures object built anew for every batch, as a TF model_fn would
            layer = fc.DenseFeatures([column])
            net = layer(features)
            table = None
        logits_layer = ee.get_module("logits", lambda: torch.nn.Linear(2, 3))
        logits = logits_layer(net)
        predictions = {"class_ids": logits.argmax(dim=1)}
        if mode == ee.ModeKeys.PREDICT:
            return ee.EstimatorSpec(mode, predictions=predictions)
        loss = torch.nn.functional.cross_entropy(logits, labels.reshape(-1))
        if mode == ee.ModeKeys.EVAL:
            return ee.EstimatorSpec(mode, loss=loss, eval_metric_ops={
                "accuracy": ee.metrics.accuracy(labels.reshape(-1), predictions["class_ids"])})
        if table is None:
            tracked = ee.get_module("dense_features", lambda: None)  # registered by the layer
            table = list(tracked.parameters())
        params = list(logits_layer.parameters()) + list(table)
        optimizer = ee.get_optimizer("adam", lambda: torch.optim.Adam(params, lr=0.05))
        return ee.EstimatorSpec(mode, loss=loss, train_op=ee.minimize(optimizer, loss))

    return model_fn


@pytest.mark.parametrize(("layer_kind", "variable"), [
    ("input_layer", "input_layer/species_embedding/embedding_weights"),
    ("DenseFeatures", "dense_features/species_embedding/embedding_weights"),
])
def test_embedding_in_custom_model_fn_is_trained_and_checkpointed(tmp_path, layer_kind, variable):
    x, y, species = _iris_species()
    est = ee.Estimator(_embedding_model_fn(species, layer_kind), model_dir=str(tmp_path),
                       config=ee.RunConfig(tf_random_seed=1))
    est.train(ee.inputs.numpy_input_fn(x, y, batch_size=30, num_epochs=None, shuffle=True), steps=150)
    assert variable in est.get_variable_names()
    assert est.get_variable_value(variable).shape == (3, 2)
    # evaluate restores the checkpoint in a fresh state: the trained table must come back.
    result = est.evaluate(ee.inputs.numpy_input_fn(x, y, batch_size=150, shuffle=False))
    assert result["accuracy"] == 1.0
    again = est.evaluate(ee.inputs.numpy_input_fn(x, y, batch_size=150, shuffle=False))
    assert again["loss"] == pytest.approx(result["loss"], rel=1e-6)


def test_linear_model_learns_a_known_linear_function(tmp_path):
    rng = np.random.default_rng(0)
    x = {"a": rng.normal(size=200).astype(np.float32), "b": rng.normal(size=200).astype(np.float32)}
    y = (2.0 * x["a"] - 3.0 * x["b"] + 0.5).astype(np.float32)
    columns = [fc.numeric_column("a"), fc.numeric_column("b")]

    def model_fn(features, labels, mode):
        variables = {}
        output = fc.linear_model(features, columns, cols_to_vars=variables)
        if mode == ee.ModeKeys.PREDICT:
            return ee.EstimatorSpec(mode, predictions={"y": output})
        loss = ((output.reshape(-1) - labels.reshape(-1)) ** 2).mean()
        params = [v for vs in variables.values() for v in vs]
        optimizer = ee.get_optimizer("sgd", lambda: torch.optim.SGD(params, lr=0.1))
        return ee.EstimatorSpec(mode, loss=loss, predictions={"y": output},
                                train_op=ee.minimize(optimizer, loss))

    est = ee.Estimator(model_fn, model_dir=str(tmp_path))
    est.train(ee.inputs.numpy_input_fn(x, y, batch_size=50, num_epochs=None, shuffle=False), steps=300)
    assert sorted(est.get_variable_names()) == [
        "global_step", "linear_model/a/weights", "linear_model/b/weights", "linear_model/bias_weights"]
    np.testing.assert_allclose(est.get_variable_value("linear_model/a/weights"), [[2.0]], atol=1e-3)
    np.testing.assert_allclose(est.get_variable_value("linear_model/b/weights"), [[-3.0]], atol=1e-3)
    np.testing.assert_allclose(est.get_variable_value("linear_model/bias_weights"), [0.5], atol=1e-3)
    first = next(est.predict(ee.inputs.numpy_input_fn({k: v[:1] for k, v in x.items()}, shuffle=False)))
    assert first["y"][0] == pytest.approx(y[0], abs=1e-2)


def test_layers_of_different_configurations_take_the_next_scope_name(tmp_path):
    job = fc.categorical_column_with_vocabulary_list("job", ["a", "b"])
    first = [fc.embedding_column(job, 2)]
    second = [fc.embedding_column(job, 3)]

    def model_fn(features, labels, mode):
        out = torch.cat([fc.input_layer(features, first), fc.input_layer(features, second),
                         fc.LinearModel([job])(features), fc.LinearModel([job], units=2)(features)], dim=1)
        loss = out.sum() * 0
        return ee.EstimatorSpec(mode, loss=loss, predictions={"out": out},
                                train_op=lambda: None)

    est = ee.Estimator(model_fn, model_dir=str(tmp_path))
    est.train(lambda: ({"job": np.array(["a", "b"], dtype=object)}, torch.zeros(2)), steps=2)
    assert sorted(est.get_variable_names()) == [
        "global_step",
        "input_layer/job_embedding/embedding_weights",
        "input_layer_1/job_embedding/embedding_weights",
        "linear_model/bias_weights", "linear_model/job/weights",
        "linear_model_1/bias_weights", "linear_model_1/job/weights"]
    assert est.get_variable_value("input_layer_1/job_embedding/embedding_weights").shape == (2, 3)
    assert est.get_variable_value("linear_model_1/job/weights").shape == (2, 2)


def test_layer_object_outside_an_estimator_keeps_its_own_weights():
    job = fc.categorical_column_with_vocabulary_list("job", ["a", "b"])
    layer = fc.DenseFeatures([fc.embedding_column(job, 2)])
    features = {"job": np.array(["a", "b"], dtype=object)}
    torch.testing.assert_close(layer(features), layer(features))
    table = layer._modules["job_embedding"].embedding_weights
    torch.testing.assert_close(layer(features), table)
    frozen = fc.DenseFeatures([fc.embedding_column(job, 2)], trainable=False)
    assert not any(p.requires_grad for p in frozen.parameters())
    import copy

    assert torch.equal(copy.deepcopy(layer)(features), layer(features))


# ------------------------------------------------------------------------------------------------
# shared_embedding_columns
# ------------------------------------------------------------------------------------------------


def test_shared_embedding_columns_share_one_table():
    watched = fc.categorical_column_with_identity("watched", 4)
    to_watch = fc.categorical_column_with_identity("to_watch", 4)
    columns = fc.shared_embedding_columns([watched, to_watch], dimension=2)
    assert [c.name for c in columns] == ["watched_shared_embedding", "to_watch_shared_embedding"]
    assert fc.shared_embeddings is fc.shared_embedding_columns
    layer = fc.DenseFeatures(columns)
    assert [name for name, _ in layer.named_parameters()] == [
        "to_watch_watched_shared_embedding.embedding_weights"]
    table = layer._modules["to_watch_watched_shared_embedding"].embedding_weights
    out = layer({"watched": torch.tensor([1, 3]), "to_watch": torch.tensor([1, 0])})
    # Sorted by column name: to_watch first, then watched; both read the same table.
    torch.testing.assert_close(out, torch.cat([table[[1, 0]], table[[1, 3]]], dim=1))
    variables = {}
    fc.input_layer({"watched": torch.tensor([1]), "to_watch": torch.tensor([2])}, columns,
                   cols_to_vars=variables)
    assert all(len(v) == 1 for v in variables.values())


def test_shared_embedding_columns_in_a_canned_dnn(tmp_path):
    a = fc.categorical_column_with_vocabulary_list("a", ["x", "y", "z"])
    b = fc.categorical_column_with_vocabulary_list("b", ["x", "y", "z"])
    est = ee.DNNClassifier(hidden_units=[2], feature_columns=fc.shared_embedding_columns([a, b], 3),
                           model_dir=str(tmp_path))
    est.train(lambda: ({"a": np.array(["x", "y"], dtype=object), "b": np.array(["z", "x"], dtype=object)},
                       torch.tensor([[0], [1]])), steps=1)
    names = [n for n in est.get_variable_names() if "embedding" in n]
    assert names == ["dnn/input_from_feature_columns/input_layer/a_b_shared_embedding/embedding_weights"]
    assert est.get_variable_value(names[0]).shape == (3, 3)


def test_shared_embedding_columns_errors():
    a = fc.categorical_column_with_identity("a", 3)
    with pytest.raises(ValueError, match="all categorical_columns must have the same number of buckets"):
        fc.shared_embedding_columns([a, fc.categorical_column_with_identity("b", 4)], 2)
    with pytest.raises(ValueError, match="All categorical_columns must be subclasses of _CategoricalColumn"):
        fc.shared_embedding_columns([a, fc.numeric_column("n")], 2)
    with pytest.raises(ValueError, match="Invalid dimension 0"):
        fc.shared_embedding_columns([a], 0)
    with pytest.raises(ValueError, match="LinearModel does not support shared embedding columns"):
        fc.LinearModel(fc.shared_embedding_columns([a], 2))


# -- columns built directly (not through the constructors that check them) ------------------------


def test_an_embedding_column_with_a_checkpoint_but_no_tensor_name_says_so(tmp_path):
    job = fc.categorical_column_with_vocabulary_list("job", ["a", "b"])
    column = fc.EmbeddingColumn(job, 2, ckpt_to_load_from=str(tmp_path))  # embedding_column refuses this
    with pytest.raises(ValueError, match=r"Must specify both `ckpt_to_load_from` and `tensor_name_in_ckpt` "
                                         r"or none of them \(embedding column job_embedding\)"):
        column.initial_value()


def test_a_crossed_column_without_keys_says_so():
    column = fc.CrossedColumn((), hash_bucket_size=5)  # crossed_column asks for two keys or more
    with pytest.raises(ValueError, match="crosses no features: give it two keys or more"):
        column._ids(fc._Cache({"a": ["x"]}, torch.device("cpu")))
