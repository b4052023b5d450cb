"""Serving data: parse specs of feature columns, records -> raw features, columns saved as plain data."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from estimator_engine import feature_column as fc
from estimator_engine import serving
from estimator_engine.serving import (
    FixedLenFeature,
    VarLenFeature,
    build_parsing_serving_input_receiver_fn,
    column_from_config,
    column_to_config,
    make_parse_example_spec,
    parse_records,
)


def _columns(vocab_file):
    age = fc.numeric_column("age", default_value=30.0)
    education = fc.categorical_column_with_vocabulary_list("education", ["Bachelors", "HS-grad"], num_oov_buckets=3)
    codes = fc.categorical_column_with_vocabulary_list("code", [10, 20, 30], dtype=int, default_value=0)
    relationship = fc.categorical_column_with_vocabulary_file("relationship", str(vocab_file), num_oov_buckets=1)
    occupation = fc.categorical_column_with_hash_bucket("occupation", 40)
    workclass = fc.categorical_column_with_identity("workclass", 4, default_value=3)
    age_buckets = fc.bucketized_column(age, [25.0, 40.0])
    crossed = fc.crossed_column([age_buckets, "occupation", education], 97, hash_key=12345)
    return age, education, codes, relationship, occupation, workclass, age_buckets, crossed


@pytest.fixture
def vocab_file(tmp_path):
    path = tmp_path / "relationship.txt"
    path.write_text("Husband\nWife\nOwn-child\n")
    return path


def test_make_parse_example_spec_like_tf(vocab_file):
    _age, education, codes, relationship, occupation, workclass, age_buckets, crossed = _columns(vocab_file)
    spec = make_parse_example_spec([fc.embedding_column(occupation, 3), fc.indicator_column(relationship),
                                    crossed, codes, workclass, age_buckets,
                                    fc.weighted_categorical_column(education, "education_weight")])
    assert spec == {
        "occupation": VarLenFeature("string"),
        "relationship": VarLenFeature("string"),
        "age": FixedLenFeature((1,), "float32", 30.0),
        "education": VarLenFeature("string"),
        "code": VarLenFeature("int64"),
        "workclass": VarLenFeature("int64"),
        "education_weight": VarLenFeature("float32"),
    }
    assert FixedLenFeature([2], torch.float64) == FixedLenFeature((2,), "float64")


def test_make_parse_example_spec_errors():
    with pytest.raises(ValueError, match=r"All feature_columns must be FeatureColumn instances\. Given: 'age'"):
        make_parse_example_spec(["age"])
    with pytest.raises(ValueError, match=r"feature_columns contain different parse_spec for key x\. Given "
                                         r"FixedLenFeature\(.*\) and VarLenFeature\(dtype='string'\)"):
        make_parse_example_spec([fc.numeric_column("x"), fc.categorical_column_with_hash_bucket("x", 3)])
    with pytest.raises(ValueError, match=r"FixedLenFeature: unsupported dtype 'complex64'"):
        FixedLenFeature([1], "complex64")


def test_parse_records_dicts_and_json_lines():
    spec = {"age": FixedLenFeature([1], torch.float32, default_value=-1.0), "job": VarLenFeature(str),
            "ids": VarLenFeature("int64"), "xy": FixedLenFeature([2], "float32")}
    lines = '{"age": 30, "job": "a", "ids": [1, 2, 3], "xy": [1, 2], "unknown": 1}\n\n{"job": ["b", "c"], "xy": [3, 4]}\n'
    parsed = parse_records(lines, spec)
    assert parsed["age"].dtype == np.float32 and parsed["age"].tolist() == [[30.0], [-1.0]]
    assert parsed["job"].dtype == object and parsed["job"].tolist() == [["a", ""], ["b", "c"]]
    assert parsed["ids"].dtype == np.int64 and parsed["ids"].tolist() == [[1, 2, 3], [-1, -1, -1]]
    assert parsed["xy"].shape == (2, 2)
    assert parse_records([json.loads(line) for line in lines.split("\n") if line], spec)["ids"].tolist() == \
        parsed["ids"].tolist()
    assert parse_records({"xy": [0, 0], "job": b"z"}, spec)["job"].tolist() == [["z"]]


def test_parse_records_errors():
    spec = {"age": FixedLenFeature([1], "float32"), "n": VarLenFeature("int64"), "s": VarLenFeature("string")}
    with pytest.raises(ValueError, match=r"Feature 'age' is required but record 1 has no value for it"):
        parse_records([{"age": 1}, {}], spec)
    with pytest.raises(ValueError, match=r"Feature 'n' of record 0 must hold integers, given 1\.5"):
        parse_records([{"age": 1, "n": 1.5}], spec)
    with pytest.raises(ValueError, match=r"Feature 's' of record 0 must hold strings, given 7 \(int\)"):
        parse_records([{"age": 1, "s": 7}], spec)
    with pytest.raises(ValueError, match=r"Feature 'age' of record 0 has 2 values; its FixedLenFeature shape \[1\] needs 1"):
        parse_records([{"age": [1, 2]}], spec)
    with pytest.raises(ValueError, match=r"JSON lines: line 2 is not JSON"):
        parse_records('{"age": 1}\n{age: 2}', spec)
    with pytest.raises(ValueError, match=r"Record 0 must be a dict"):
        parse_records([[1, 2]], spec)
    with pytest.raises(ValueError, match=r"feature_spec\['age'\] must be a FixedLenFeature or VarLenFeature"):
        parse_records([{}], {"age": "float32"})


def test_parsing_receiver_fn():
    fn = build_parsing_serving_input_receiver_fn({"age": FixedLenFeature([1], torch.float32),
                                                  "job": VarLenFeature(str)}, default_batch_size=3)
    receiver = fn()
    assert fn.default_batch_size == 3
    assert receiver.features["age"].dtype == torch.float32 and receiver.features["age"].shape == (3, 1)
    assert receiver.features["job"].tolist() == [[""]] * 3
    with pytest.raises(ValueError, match=r"default_batch_size must be a positive int or None, given: 0"):
        build_parsing_serving_input_receiver_fn({"job": VarLenFeature(str)}, default_batch_size=0)
    with pytest.raises(ValueError, match=r"feature_spec must be a non-empty dict"):
        build_parsing_serving_input_receiver_fn({})


def test_columns_round_trip_through_plain_data(vocab_file):
    for column in _columns(vocab_file):
        config = column_to_config(column)
        assert json.loads(json.dumps(config)) == config
        rebuilt = column_from_config(config)
        if isinstance(column, fc.VocabularyFileCategoricalColumn):  # inlined as a list without an asset copy
            assert rebuilt.vocabulary_list == ("Husband", "Wife", "Own-child") and rebuilt.num_buckets == 4
        else:
            assert rebuilt == column


def test_unsupported_columns_are_refused_by_name():
    with pytest.raises(ValueError, match=r"numeric_column 'x' has a normalizer_fn, which cannot be saved as data"):
        column_to_config(fc.bucketized_column(fc.numeric_column("x", normalizer_fn=lambda v: v * 2), [0.0]))
    with pytest.raises(ValueError, match=r"Cannot save the feature column .*EmbeddingColumn"):
        column_to_config(fc.embedding_column(fc.categorical_column_with_identity("n", 3), 2))
    with pytest.raises(ValueError, match=r"Unknown feature column kind 'sequence'"):
        column_from_config({"kind": "sequence"})


def test_preprocessing_stage_gives_the_columns_ids_including_oov(vocab_file, tmp_path):
    """Ids from the saved stage equal the training columns' ids (FarmHash buckets for OOV values)."""
    _age, education, codes, relationship, occupation, workclass, _age_buckets, crossed = _columns(vocab_file)
    columns = {serving.ids_input_name(c): c for c in (education, codes, relationship, occupation, workclass, crossed)}
    directory = tmp_path / "export"
    directory.mkdir()
    serving.write_preprocessing(str(directory), {k: k for k in ["age", "education", "code", "relationship",
                                                                 "occupation", "workclass"]},
                                {"age": "age"}, columns, None)
    raw = {"age": np.array([20.0, 50.0], np.float32), "education": ["HS-grad", "PhD"], "code": [20, 99],
           "relationship": ["Wife", "Cousin"], "occupation": ["Sales", "Astronaut"], "workclass": [1, 7]}
    cache = fc._Cache(raw, torch.device("cpu"))
    expected = {name: column._ids(cache).ids for name, column in columns.items()}
    vocab_file.write_text("changed\n")  # the export holds its own copy
    stage = serving.read_preprocessing(str(directory))
    assert sorted(stage.raw_inputs) == ["age", "code", "education", "occupation", "relationship", "workclass"]
    ids = stage(raw)
    for name in columns:
        assert torch.equal(ids[name], expected[name]), name
    assert ids["ids/education"].tolist() == [[1], [2 + fc.fingerprint64("PhD") % 3]]
    assert ids["ids/code"].tolist() == [[1], [0]]
    assert ids["ids/relationship"].tolist() == [[1], [3]]
    assert ids["ids/occupation"].tolist() == [[fc.fingerprint64("Sales") % 40], [fc.fingerprint64("Astronaut") % 40]]
    assert ids["ids/workclass"].tolist() == [[1], [3]]
    assert ids["age"] is raw["age"]
