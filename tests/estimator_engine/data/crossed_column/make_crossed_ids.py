"""Writes crossed_ids.json: TF 2.15's crossed_column bucket ids for every mix of key kinds.

Run with TensorFlow 2.15 in its own venv (never the project's):
    python3 -m venv /tmp/tfvenv && /tmp/tfvenv/bin/pip install tensorflow-cpu==2.15.1 "numpy<2"
    /tmp/tfvenv/bin/python tests/estimator_engine/data/crossed_column/make_crossed_ids.py

Each case lists its columns as a small spec the test rebuilds with the engine's feature columns,
the features (JSON lists; a "sparse" feature is a ragged list fed to TF as a SparseTensor, as
tf.io.VarLenFeature gives it), and TF's ids per row, in the order TF's SparseCrossOp emits them.
"""
import json
import pathlib

import numpy as np
import tensorflow as tf
from tensorflow.python.feature_column import feature_column_v2 as fc2

HERE = pathlib.Path(__file__).resolve().parent
VOCAB_FILE = HERE / "vocab.txt"
VOCAB_FILE.write_text("red\ngreen\nblue\n")


def build(spec):
    """A column from a JSON-able spec: str = raw key, dict = a categorical column or a cross."""
    if isinstance(spec, str):
        return spec
    kind = spec["kind"]
    if kind == "bucketized":
        source = tf.feature_column.numeric_column(spec["key"], shape=spec.get("shape", 1))
        return tf.feature_column.bucketized_column(source, spec["boundaries"])
    if kind == "vocabulary_list":
        return tf.feature_column.categorical_column_with_vocabulary_list(
            spec["key"], spec["vocabulary"], default_value=spec.get("default_value", -1),
            num_oov_buckets=spec.get("num_oov_buckets", 0))
    if kind == "vocabulary_file":
        return tf.feature_column.categorical_column_with_vocabulary_file(
            spec["key"], str(VOCAB_FILE), num_oov_buckets=spec.get("num_oov_buckets", 0))
    if kind == "identity":
        return tf.feature_column.categorical_column_with_identity(
            spec["key"], spec["num_buckets"], default_value=spec.get("default_value"))
    if kind == "crossed":
        return tf.feature_column.crossed_column([build(k) for k in spec["keys"]], spec["hash_bucket_size"],
                                                hash_key=spec.get("hash_key"))
    raise ValueError(kind)


def to_tf(value, sparse):
    if not sparse:
        return tf.constant(value)
    rows = value
    is_text = any(isinstance(v, str) for r in rows for v in r)
    ragged = tf.ragged.constant(rows, dtype=tf.string if is_text else tf.int64)
    return ragged.to_sparse()


def ids_per_row(sparse_tensor, batch):
    rows = [[] for _ in range(batch)]
    for (row, _), value in zip(sparse_tensor.indices.numpy().tolist(), sparse_tensor.values.numpy().tolist()):
        rows[row].append(int(value))
    return rows


B = ["x", "y", "z", "x", "w", "y"]
CASES = [
    # The program: a raw string key listed before a bucketized column.
    ("raw_then_bucketized", {"kind": "crossed", "keys": ["origin", {"kind": "bucketized", "key": "hp",
                                                                      "boundaries": [50.0, 100.0, 150.0]}],
                             "hash_bucket_size": 20},
     {"origin": ["USA", "Europe", "Japan", "USA", "Japan", "Europe"],
      "hp": [[40.0], [75.0], [120.0], [160.0], [99.0], [150.0]]}, []),
    ("bucketized_then_raw", {"kind": "crossed", "keys": [{"kind": "bucketized", "key": "hp",
                                                          "boundaries": [50.0, 100.0, 150.0]}, "origin"],
                             "hash_bucket_size": 20},
     {"origin": ["USA", "Europe", "Japan", "USA", "Japan", "Europe"],
      "hp": [[40.0], [75.0], [120.0], [160.0], [99.0], [150.0]]}, []),
    ("raw_vocab_raw", {"kind": "crossed", "keys": ["a", {"kind": "vocabulary_list", "key": "c",
                                                          "vocabulary": ["red", "green", "blue"],
                                                          "num_oov_buckets": 2}, "b"],
                       "hash_bucket_size": 1000, "hash_key": 12345},
     {"a": ["p", "q", "p", "r", "q", "p"], "b": B, "c": ["red", "blue", "pink", "green", "teal", "red"]}, []),
    ("raw_int_raw_str_dense_order", {"kind": "crossed", "keys": ["n", "a"], "hash_bucket_size": 97},
     {"n": [3, 4, 5, 3, 9, 0], "a": ["p", "q", "p", "r", "q", "p"]}, []),
    ("raw_str_raw_int_dense_order", {"kind": "crossed", "keys": ["a", "n"], "hash_bucket_size": 97},
     {"n": [3, 4, 5, 3, 9, 0], "a": ["p", "q", "p", "r", "q", "p"]}, []),
    ("raw_identity_vocabfile_bucketized2d", {"kind": "crossed", "keys": [
        "a", {"kind": "identity", "key": "i", "num_buckets": 10},
        {"kind": "vocabulary_file", "key": "f", "num_oov_buckets": 1},
        {"kind": "bucketized", "key": "v", "shape": 2, "boundaries": [0.0, 1.0]}], "hash_bucket_size": 500},
     {"a": ["p", "q", "p", "r", "q", "p"], "i": [1, 2, 3, 9, 0, 5],
      "f": ["red", "green", "blue", "black", "red", "blue"],
      "v": [[-1.0, 0.5], [2.0, 2.0], [0.5, -3.0], [0.0, 1.0], [1.5, 0.2], [0.9, 0.9]]}, []),
    ("sparse_raw_keeps_its_place", {"kind": "crossed", "keys": ["a", "s", {"kind": "bucketized", "key": "hp",
                                                                        "boundaries": [100.0]}],
                                    "hash_bucket_size": 1000},
     {"a": ["p", "q", "p", "r", "q", "p"], "s": [["u"], ["u", "v"], [], ["w"], ["v", "u", "w"], ["v"]],
      "hp": [[40.0], [175.0], [120.0], [60.0], [99.0], [150.0]]}, ["s"]),
    ("multivalent_dense_raw", {"kind": "crossed", "keys": ["m", {"kind": "identity", "key": "i",
                                                                   "num_buckets": 10}],
                               "hash_bucket_size": 1000},
     {"m": [["a", "b"], ["c", "d"], ["a", "a"], ["b", "c"], ["d", "a"], ["c", "c"]],
      "i": [[1, 2], [3, 4], [5, 6], [7, 8], [9, 0], [1, 1]]}, []),
    ("dense_empty_string_and_minus_one", {"kind": "crossed", "keys": ["a", "n"], "hash_bucket_size": 1000},
     {"a": ["p", "", "p", "r", "", "p"], "n": [3, 4, -1, 3, 9, -1]}, []),
    ("vocab_oov_default_minus_one", {"kind": "crossed", "keys": [
        {"kind": "vocabulary_list", "key": "c", "vocabulary": ["red", "green", "blue"]}, "a"],
        "hash_bucket_size": 1000},
     {"a": ["p", "q", "p", "r", "q", "p"], "c": ["red", "blue", "pink", "green", "", "red"]}, []),
    ("nested_cross", {"kind": "crossed", "keys": [
        {"kind": "crossed", "keys": ["a", {"kind": "bucketized", "key": "hp", "boundaries": [100.0]}],
         "hash_bucket_size": 10}, "b"], "hash_bucket_size": 1000},
     {"a": ["p", "q", "p", "r", "q", "p"], "b": B, "hp": [[40.0], [175.0], [120.0], [60.0], [99.0], [150.0]]},
     []),
    ("two_categorical_then_raw_listed_last_first", {"kind": "crossed", "keys": [
        "b", {"kind": "identity", "key": "i", "num_buckets": 10},
        {"kind": "vocabulary_list", "key": "c", "vocabulary": ["red", "green", "blue"], "num_oov_buckets": 1},
        "a"], "hash_bucket_size": 10000},
     {"a": ["p", "q", "p", "r", "q", "p"], "b": B, "i": [1, 2, 3, 9, 0, 5],
      "c": ["red", "blue", "pink", "green", "teal", "red"]}, []),
]


def main():
    out = []
    for name, spec, features, sparse_keys in CASES:
        column = build(spec)
        tf_features = {k: to_tf(v, k in sparse_keys) for k, v in features.items()}
        cache = fc2.FeatureTransformationCache(tf_features)
        sparse = cache.get(column, None)
        batch = len(next(iter(features.values())))
        out.append({"name": name, "column": spec, "features": features, "sparse_keys": sparse_keys,
                    "tf_ids": ids_per_row(sparse, batch)})
    meta = {"tensorflow": tf.__version__, "generator": "make_crossed_ids.py", "cases": out}
    (HERE / "crossed_ids.json").write_text(json.dumps(meta, indent=1) + "\n")
    print(f"wrote {len(out)} cases with TF {tf.__version__}")


if __name__ == "__main__":
    np.set_printoptions(linewidth=200)
    main()
