"""``crossed_column`` bucket ids equal TF 2.15's for every mix of key kinds.

The ids in ``data/crossed_column/crossed_ids.json`` were computed by TF 2.15.1's feature columns
(``make_crossed_ids.py`` beside them). TF's sparse cross takes sparse inputs (categorical columns'
ids, raw features given as SparseTensors) before dense raw features, whatever order ``keys``
lists them in; a dense raw feature crosses every value, ``''`` and ``-1`` included.
"""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest
import torch

from estimator_engine import feature_column as fc

DATA = pathlib.Path(__file__).parent / "data" / "crossed_column"
CASES = json.loads((DATA / "crossed_ids.json").read_text())["cases"]


def _column(spec):
    if isinstance(spec, str):
        return spec
    kind = spec["kind"]
    if kind == "bucketized":
        source = fc.numeric_column(spec["key"], shape=spec.get("shape", 1))
        return fc.bucketized_column(source, spec["boundaries"])
    if kind == "vocabulary_list":
        return fc.categorical_column_with_vocabulary_list(
            spec["key"], spec["vocabulary"], default_value=spec.get("default_value", -1),
            num_oov_buckets=spec.get("num_oov_buckets", 0))
    if kind == "vocabulary_file":
        return fc.categorical_column_with_vocabulary_file(
            spec["key"], str(DATA / "vocab.txt"), num_oov_buckets=spec.get("num_oov_buckets", 0))
    if kind == "identity":
        return fc.categorical_column_with_identity(spec["key"], spec["num_buckets"],
                                                   default_value=spec.get("default_value"))
    assert kind == "crossed"
    return fc.crossed_column([_column(k) for k in spec["keys"]], spec["hash_bucket_size"],
                             hash_key=spec.get("hash_key"))


def _features(case):
    """TF's dense inputs as numpy arrays; its SparseTensor inputs as lists of per-row lists."""
    features = {}
    for key, value in case["features"].items():
        if key in case["sparse_keys"]:
            features[key] = value
        else:
            first = np.ravel(np.array(value, dtype=object))[0]
            if isinstance(first, float):
                features[key] = torch.tensor(value, dtype=torch.float32)
            else:
                features[key] = np.array(value, dtype=object if isinstance(first, str) else np.int64)
    return features


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_crossed_ids_equal_tf(case):
    column = _column(case["column"])
    ids = column._ids(fc._Cache(_features(case), torch.device("cpu"))).ids.tolist()
    assert [[i for i in row if i >= 0] for row in ids] == case["tf_ids"]


def test_the_issue_case_crosses_the_bucket_ids_first_whatever_the_listed_order():
    by_name = {c["name"]: c for c in CASES}
    assert by_name["raw_then_bucketized"]["tf_ids"] == by_name["bucketized_then_raw"]["tf_ids"]


def test_a_weighted_column_cannot_be_crossed():
    weighted = fc.weighted_categorical_column(fc.categorical_column_with_identity("i", 5), "w")
    with pytest.raises(ValueError, match="crossed_column does not support weight_tensor"):
        fc.crossed_column([weighted, "a"], 10)
