"""Tests of ``estimator_engine.inputs``: TF's numpy/pandas input functions, batching, resuming."""

from __future__ import annotations

import inspect
import itertools
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch

from estimator_engine.inputs import (
    BatchIterator,
    RepeatedBatch,
    numpy_input_fn,
    pandas_input_fn,
    parse_input_fn_result,
    split_batch,
)
from estimator_engine.run_config import RunConfig


def _config(seed):
    return SimpleNamespace(tf_random_seed=seed)


def _context(num, pipeline_id):
    return SimpleNamespace(num_input_pipelines=num, input_pipeline_id=pipeline_id)


def _labels_stream(iterator):
    """All labels of a stream, flattened, as a list of ints."""
    return [int(v) for _, labels in iterator for v in labels]


def _xy(n=4):
    return {"a": np.arange(n) * 1.0, "b": np.arange(32, 32 + n)}, np.arange(-32, -32 + n)


# --------------------------------------------------------------------------------------------
# numpy_input_fn: TF's known answers (numpy_io_test.py)
# --------------------------------------------------------------------------------------------


class TestNumpyInputFnTF:
    def test_batches_in_order_then_end(self):
        x, y = _xy()
        batches = list(numpy_input_fn(x, y, batch_size=2, shuffle=False, num_epochs=1)())
        assert len(batches) == 2
        features, target = batches[0]
        assert features["a"].tolist() == [0, 1]
        assert features["b"].tolist() == [32, 33]
        assert target.tolist() == [-32, -31]

    def test_very_large_batch_and_multiple_epochs_spans_epochs(self):
        x, y = _xy(2)
        batches = list(numpy_input_fn(x, y, batch_size=128, shuffle=False, num_epochs=2)())
        assert len(batches) == 1
        features, target = batches[0]
        assert features["a"].tolist() == [0, 1, 0, 1]
        assert features["b"].tolist() == [32, 33, 32, 33]
        assert target.tolist() == [-32, -31, -32, -31]

    def test_zero_epochs_yields_nothing(self):
        x, y = _xy()
        assert list(numpy_input_fn(x, y, batch_size=2, shuffle=False, num_epochs=0)()) == []

    def test_last_batch_is_partial(self):
        x, y = _xy(5)
        batches = list(numpy_input_fn(x, y, batch_size=2, shuffle=False, num_epochs=1)())
        assert [t.tolist() for _, t in batches] == [[-32, -31], [-30, -29], [-28]]
        assert batches[-1][0]["b"].tolist() == [36]

    def test_partial_batches_span_epochs_and_only_the_last_is_short(self):
        x, y = _xy(3)
        batches = list(numpy_input_fn(x, y, batch_size=2, shuffle=False, num_epochs=3)())
        assert [f["a"].tolist() for f, _ in batches] == [[0, 1], [2, 0], [1, 2], [0, 1], [2]]
        assert [t.tolist() for _, t in batches] == [
            [-32, -31], [-30, -32], [-31, -30], [-32, -31], [-30],
        ]

    def test_batch_larger_than_data(self):
        x, y = _xy()
        batches = list(numpy_input_fn(x, y, batch_size=10, shuffle=False, num_epochs=1)())
        assert len(batches) == 1
        assert batches[0][0]["a"].tolist() == [0, 1, 2, 3]

    def test_features_of_different_dimensions(self):
        x = {"a": np.array([[1, 2], [3, 4]]), "b": np.array([5, 6])}
        (features, target), = numpy_input_fn(
            x, np.arange(-32, -30), batch_size=2, shuffle=False, num_epochs=1
        )()
        assert features["a"].tolist() == [[1, 2], [3, 4]]
        assert features["b"].tolist() == [5, 6]
        assert target.tolist() == [-32, -31]

    def test_x_as_list_is_a_type_error(self):
        with pytest.raises(TypeError, match="x must be a dict or array; got list"):
            numpy_input_fn(list(range(32, 36)), np.arange(4), batch_size=2, shuffle=False)

    def test_x_empty_dict(self):
        with pytest.raises(ValueError, match="x cannot be an empty dict"):
            numpy_input_fn({}, np.arange(4), shuffle=False)

    def test_x_empty_array(self):
        with pytest.raises(ValueError, match="x cannot be an empty array"):
            numpy_input_fn(np.array([[], []]), np.arange(4), shuffle=False)

    def test_y_none_yields_features_only(self):
        x, _ = _xy()
        batches = list(numpy_input_fn(x, None, batch_size=2, shuffle=False, num_epochs=1)())
        assert len(batches) == 2
        assert isinstance(batches[0], dict) and len(batches[0]) == 2
        assert batches[0]["a"].tolist() == [0, 1]
        assert batches[1]["b"].tolist() == [34, 35]

    @pytest.mark.parametrize("shuffle", [None, 1, "yes"])
    def test_shuffle_must_be_an_explicit_bool(self, shuffle):
        with pytest.raises(ValueError, match="shuffle must be provided and explicitly set as boolean"):
            numpy_input_fn(np.arange(32, 36), np.arange(4), shuffle=shuffle)

    def test_shuffle_none_is_the_default_and_fails(self):
        with pytest.raises(ValueError, match=r"shuffle must be provided.*got None"):
            numpy_input_fn(np.arange(32, 36), np.arange(4))

    def test_target_key_name_in_x_is_fine_and_x_is_not_mutated(self):
        array = np.arange(32, 36)
        x = {"__target_key__": array}
        features, target = next(iter(
            numpy_input_fn(x, np.arange(4), batch_size=2, shuffle=False, num_epochs=1)()
        ))
        assert list(x) == ["__target_key__"]
        assert features["__target_key__"].tolist() == [32, 33]
        assert target.tolist() == [0, 1]

    def test_mismatched_lengths(self):
        x, _ = _xy()
        with pytest.raises(ValueError, match="Length of tensors in x and y is mismatched"):
            numpy_input_fn(x, np.arange(10), batch_size=2, shuffle=False)
        with pytest.raises(ValueError, match=r"(?s)mismatched.*Shapes in x: \{'a': \(1,\)"):
            numpy_input_fn({"a": np.arange(1), "b": x["b"]}, None, batch_size=2, shuffle=False)

    def test_y_as_dict(self):
        x, _ = _xy()
        y = {"y1": np.arange(-32, -28), "y2": np.arange(32, 28, -1)}
        batches = list(numpy_input_fn(x, y, batch_size=2, shuffle=False, num_epochs=1)())
        features, targets = batches[0]
        assert len(batches) == 2 and len(features) == 2 and len(targets) == 2
        assert targets["y1"].tolist() == [-32, -31]
        assert targets["y2"].tolist() == [32, 31]

    def test_y_empty_dict(self):
        x, _ = _xy()
        with pytest.raises(ValueError, match="y cannot be empty dict, use None instead"):
            numpy_input_fn(x, {}, shuffle=False)

    def test_duplicate_keys_in_x_and_y(self):
        x, _ = _xy()
        y = {"y1": np.arange(4), "a": x["a"], "y2": np.arange(4), "b": x["b"]}
        with pytest.raises(ValueError, match="2 duplicate keys are found in both x and y"):
            numpy_input_fn(x, y, shuffle=False)

    def test_x_is_array_features_is_a_tensor(self):
        batches = list(numpy_input_fn(
            np.arange(4) * 1.0, np.arange(-32, -28), batch_size=2, shuffle=False, num_epochs=1
        )())
        features, target = batches[0]
        assert isinstance(features, torch.Tensor)
        assert features.tolist() == [0, 1] and target.tolist() == [-32, -31]
        assert len(batches) == 2

    def test_x_is_nd_array(self):
        x = np.arange(16).reshape(4, 2, 2) * 1.0
        y = np.arange(-48, -32).reshape(4, 2, 2)
        features, target = next(iter(numpy_input_fn(x, y, batch_size=2, shuffle=False)()))
        assert features.tolist() == [[[0, 1], [2, 3]], [[4, 5], [6, 7]]]
        assert target.tolist() == [[[-48, -47], [-46, -45]], [[-44, -43], [-42, -41]]]

    def test_x_array_y_dict(self):
        features, targets = next(iter(numpy_input_fn(
            np.arange(4) * 1.0, {"y1": np.arange(-32, -28)}, batch_size=2, shuffle=False
        )()))
        assert features.tolist() == [0, 1]
        assert list(targets) == ["y1"] and targets["y1"].tolist() == [-32, -31]

    def test_array_and_dict_give_the_same_output(self):
        x_arr = np.vstack((np.arange(4) * 1.0, np.arange(32, 36)))
        y = np.arange(-48, -40).reshape(2, 4)
        arr = next(iter(numpy_input_fn(x_arr, y, batch_size=2, shuffle=False)()))
        dct = next(iter(numpy_input_fn({"feature1": x_arr}, y, batch_size=2, shuffle=False)()))
        assert torch.equal(arr[0], dct[0]["feature1"])
        assert torch.equal(arr[1], dct[1])


class TestNumpyInputFnDetails:
    def test_dtypes_are_kept_and_text_stays_numpy(self):
        x = {
            "f64": np.arange(3, dtype=np.float64),
            "f32": np.arange(3, dtype=np.float32),
            "i32": np.arange(3, dtype=np.int32),
            "flag": np.array([True, False, True]),
            "word": np.array(["a", "bb", "ccc"]),
        }
        features = next(iter(numpy_input_fn(x, batch_size=3, shuffle=False)()))
        assert features["f64"].dtype == torch.float64
        assert features["f32"].dtype == torch.float32
        assert features["i32"].dtype == torch.int32
        assert features["flag"].dtype == torch.bool
        assert isinstance(features["word"], np.ndarray)
        assert features["word"].tolist() == ["a", "bb", "ccc"]
        assert all(isinstance(w, str) for w in features["word"])

    def test_feature_keys_are_sorted_like_tf(self):
        features = next(iter(numpy_input_fn({"b": np.arange(2), "a": np.arange(2)}, shuffle=False)()))
        assert list(features) == ["a", "b"]

    def test_dict_values_may_be_lists_and_tensors(self):
        x = {"a": [1.0, 2.0, 3.0], "t": torch.tensor([4, 5, 6])}
        features, labels = next(iter(numpy_input_fn(x, [0, 1, 0], batch_size=3, shuffle=False)()))
        assert features["a"].tolist() == [1.0, 2.0, 3.0]
        assert features["t"].tolist() == [4, 5, 6]
        assert labels.tolist() == [0, 1, 0]

    def test_batches_are_copies(self):
        data = np.arange(4.0)
        features = next(iter(numpy_input_fn({"a": data}, batch_size=2, shuffle=False)()))
        features["a"] += 100
        assert data.tolist() == [0.0, 1.0, 2.0, 3.0]

    def test_read_only_array_is_accepted(self):
        data = np.arange(4.0)
        data.flags.writeable = False
        features = next(iter(numpy_input_fn({"a": data}, batch_size=4, shuffle=False)()))
        assert features["a"].tolist() == [0.0, 1.0, 2.0, 3.0]

    @pytest.mark.parametrize("batch_size", [0, -1, 2.5, True])
    def test_bad_batch_size(self, batch_size):
        with pytest.raises(ValueError, match="batch_size must be a positive int"):
            numpy_input_fn(np.arange(4), batch_size=batch_size, shuffle=False)

    @pytest.mark.parametrize("num_epochs", [-1, 1.5])
    def test_bad_num_epochs(self, num_epochs):
        with pytest.raises(ValueError, match="num_epochs must be None"):
            numpy_input_fn(np.arange(4), num_epochs=num_epochs, shuffle=False)

    def test_input_fn_declares_only_config_and_input_context(self):
        input_fn = numpy_input_fn(np.arange(4), shuffle=False)
        params = inspect.signature(input_fn).parameters
        assert list(params) == ["config", "input_context"]
        assert all(p.default is None for p in params.values())

    def test_each_call_starts_from_the_beginning(self):
        input_fn = numpy_input_fn(np.arange(4), np.arange(4), batch_size=2, shuffle=False)
        first = input_fn()
        next(first)
        assert next(iter(input_fn()))[1].tolist() == [0, 1]

    def test_num_epochs_none_repeats_forever_with_full_batches(self):
        batches = numpy_input_fn(
            np.arange(5), np.arange(5), batch_size=3, num_epochs=None, shuffle=False
        )()
        taken = list(itertools.islice(batches, 20))
        assert len(taken) == 20
        assert all(len(labels) == 3 for _, labels in taken)
        stream = [int(v) for _, labels in taken for v in labels]
        assert stream == [i % 5 for i in range(60)]
        assert batches.num_batches is None


# --------------------------------------------------------------------------------------------
# Order: every row once per epoch, seeds, epochs
# --------------------------------------------------------------------------------------------


class TestOrder:
    @pytest.mark.parametrize("shuffle", [False, True])
    @pytest.mark.parametrize("batch_size", [1, 3, 7, 10, 64])
    def test_every_row_exactly_once_per_epoch(self, shuffle, batch_size):
        n, epochs = 10, 4
        input_fn = numpy_input_fn(
            np.arange(n), np.arange(n), batch_size=batch_size, num_epochs=epochs, shuffle=shuffle
        )
        batches = input_fn(config=_config(3))
        stream = _labels_stream(batches)
        assert len(stream) == n * epochs
        for e in range(epochs):
            assert sorted(stream[e * n : (e + 1) * n]) == list(range(n))
        assert batches.num_batches == -(-n * epochs // batch_size)

    def test_features_and_labels_stay_aligned_when_shuffled(self):
        n = 50
        input_fn = numpy_input_fn(
            {"x": np.arange(n) * 10, "t": np.array([f"r{i}" for i in range(n)])},
            {"y": np.arange(n)}, batch_size=7, num_epochs=2, shuffle=True,
        )
        for features, labels in input_fn(config=_config(1)):
            assert (features["x"] == labels["y"] * 10).all()
            assert features["t"].tolist() == [f"r{int(i)}" for i in labels["y"]]

    def test_same_seed_same_order_and_epochs_differ(self):
        input_fn = numpy_input_fn(np.arange(100), np.arange(100), batch_size=32, num_epochs=3,
                                  shuffle=True)
        first = _labels_stream(input_fn(config=_config(42)))
        second = _labels_stream(input_fn(config=RunConfig(tf_random_seed=42)))
        assert first == second
        epochs = [first[i * 100 : (i + 1) * 100] for i in range(3)]
        assert epochs[0] != epochs[1] != epochs[2] != epochs[0]
        assert epochs[0] != list(range(100))

    def test_different_seeds_different_orders(self):
        input_fn = numpy_input_fn(np.arange(100), np.arange(100), batch_size=32, shuffle=True)
        assert _labels_stream(input_fn(config=_config(1))) != _labels_stream(
            input_fn(config=_config(2))
        )

    def test_no_seed_gives_fresh_randomness(self):
        input_fn = numpy_input_fn(np.arange(100), np.arange(100), batch_size=32, shuffle=True)
        first, second = input_fn(), input_fn(config=_config(None))
        assert first.seed is not None and first.seed != second.seed
        assert _labels_stream(first) != _labels_stream(second)

    def test_known_order_for_a_seed(self):
        # Pins the seeding scheme: changing it silently would change every seeded run's data order.
        order = _labels_stream(numpy_input_fn(
            np.arange(8), np.arange(8), batch_size=8, num_epochs=1, shuffle=True
        )(config=_config(0)))
        from estimator_engine.inputs import _epoch_seed

        expected = torch.randperm(8, generator=torch.Generator().manual_seed(_epoch_seed(0, 0)))
        assert order == expected.tolist()

    def test_shuffle_false_ignores_the_seed(self):
        input_fn = numpy_input_fn(np.arange(6), np.arange(6), batch_size=4, shuffle=False)
        assert _labels_stream(input_fn(config=_config(5))) == list(range(6))
        assert input_fn(config=_config(5)).seed is None


# --------------------------------------------------------------------------------------------
# pandas_input_fn
# --------------------------------------------------------------------------------------------


def _frame():
    index = np.arange(100, 104)
    x = pd.DataFrame({"a": np.arange(4), "b": np.arange(32, 36)}, index=index)
    y = pd.Series(np.arange(-32, -28), index=index)
    return x, y


def _frame_y_df():
    x, _ = _frame()
    y = pd.DataFrame({"a_target": np.arange(10, 14), "b_target": np.arange(50, 54)},
                     index=x.index)
    return x, y


class TestPandasInputFnTF:
    def test_index_mismatch(self):
        x, _ = _frame()
        with pytest.raises(ValueError, match="Index for x and y are mismatched"):
            pandas_input_fn(x, pd.Series(np.arange(-32, -28)), batch_size=2, shuffle=False)

    def test_target_column_must_be_a_string(self):
        x, y = _frame()
        with pytest.raises(TypeError, match="target_column must be a string type"):
            pandas_input_fn(x, y, batch_size=2, shuffle=False, target_column=["one", "two"])

    def test_shuffle_must_be_given(self):
        x, _ = _frame()
        with pytest.raises(ValueError, match="shuffle must be provided and explicitly set as boolean"):
            pandas_input_fn(x, pd.Series(np.arange(-32, -28)))

    def test_target_column_already_in_x(self):
        x, y = _frame()
        x["target"] = 1
        with pytest.raises(ValueError, match="Cannot use name target for target column: DataFrame "
                                             "already has a column with that name"):
            pandas_input_fn(x, y, shuffle=False)
        pandas_input_fn(x, y, shuffle=False, target_column="label")  # another name is fine
        pandas_input_fn(x, None, shuffle=False)  # no y: no conflict

    def test_produces_expected_outputs(self):
        x, y = _frame()
        features, target = next(iter(pandas_input_fn(x, y, batch_size=2, shuffle=False)()))
        assert features["a"].tolist() == [0, 1]
        assert features["b"].tolist() == [32, 33]
        assert target.tolist() == [-32, -31]
        assert "index" not in features and list(features) == ["a", "b"]

    def test_y_dataframe(self):
        x, y = _frame_y_df()
        features, targets = next(iter(pandas_input_fn(x, y, batch_size=2, shuffle=False)()))
        assert features["a"].tolist() == [0, 1]
        assert targets["a_target"].tolist() == [10, 11]
        assert targets["b_target"].tolist() == [50, 51]

    def test_y_dataframe_with_columns_overlapping_x(self):
        x, y = _frame_y_df()
        y = y.rename(columns={"a_target": "a", "b_target": "a_n"})
        features, targets = next(iter(pandas_input_fn(x, y, batch_size=2, shuffle=False)()))
        assert features["a"].tolist() == [0, 1] and features["b"].tolist() == [32, 33]
        assert targets["a"].tolist() == [10, 11] and targets["a_n"].tolist() == [50, 51]

    def test_large_batch_multiple_epochs(self):
        index = np.arange(100, 102)
        x = pd.DataFrame({"a": np.arange(2), "b": np.arange(32, 34)}, index=index)
        y = pd.Series(np.arange(-32, -30), index=index)
        batches = list(pandas_input_fn(x, y, batch_size=128, shuffle=False, num_epochs=2)())
        assert len(batches) == 1
        assert batches[0][0]["a"].tolist() == [0, 1, 0, 1]
        assert batches[0][1].tolist() == [-32, -31, -32, -31]

    def test_data_size_not_divided_by_batch_size(self):
        index = np.arange(100, 105)
        x = pd.DataFrame({"a": np.arange(5), "b": np.arange(32, 37)}, index=index)
        y = pd.Series(np.arange(-32, -27), index=index)
        batches = list(pandas_input_fn(x, y, batch_size=2, shuffle=False, num_epochs=1)())
        assert [f["a"].tolist() for f, _ in batches] == [[0, 1], [2, 3], [4]]
        assert [t.tolist() for _, t in batches] == [[-32, -31], [-30, -29], [-28]]

    def test_only_x(self):
        x, _ = _frame()
        features = next(iter(pandas_input_fn(x, None, batch_size=2, shuffle=False)()))
        assert features["a"].tolist() == [0, 1] and features["b"].tolist() == [32, 33]

    @pytest.mark.parametrize(
        ("batch_size", "shuffle", "num_epochs", "expected"),
        [(4, False, 1, 1), (4, True, 1, 1), (2, True, 2, 4), (3, False, 1, 2)],
    )
    def test_respects_epochs(self, batch_size, shuffle, num_epochs, expected):
        x, y = _frame()
        batches = pandas_input_fn(x, y, batch_size=batch_size, shuffle=shuffle,
                                  num_epochs=num_epochs, queue_capacity=None)()
        assert len(list(batches)) == expected


class TestPandasColumns:
    def test_column_types(self):
        x = pd.DataFrame({
            "f": [0.5, np.nan, 2.0],
            "i": np.array([1, 2, 3], dtype=np.int32),
            "flag": [True, False, True],
            "text": pd.Series(["a", None, "c"], dtype="str"),
            "obj": pd.Series(["x", None, "z"], dtype=object),
            "mixed": pd.Series(["x", 3, None], dtype=object),
            "cat": pd.Categorical(["lo", None, "hi"]),
            "nint": pd.array([1, None, 3], dtype="Int64"),
            "nint_full": pd.array([1, 2, 3], dtype="Int64"),
        })
        features = next(iter(pandas_input_fn(x, batch_size=3, shuffle=False)()))
        assert features["f"].dtype == torch.float32
        assert features["f"][0].item() == 0.5 and torch.isnan(features["f"][1])
        assert features["i"].dtype == torch.int64 and features["i"].tolist() == [1, 2, 3]
        assert features["flag"].dtype == torch.bool
        for name, expected in [("text", ["a", "", "c"]), ("obj", ["x", "", "z"]),
                               ("mixed", ["x", "3", ""]), ("cat", ["lo", "", "hi"])]:
            column = features[name]
            assert isinstance(column, np.ndarray) and column.dtype == object, name
            assert column.tolist() == expected, name
            assert all(type(v) is str for v in column), name
        assert features["nint"].dtype == torch.float32
        assert features["nint"][0].item() == 1 and torch.isnan(features["nint"][1])
        assert features["nint_full"].dtype == torch.int64

    def test_text_labels(self):
        x = pd.DataFrame({"a": [1.0, 2.0]})
        _, labels = next(iter(pandas_input_fn(x, pd.Series(["yes", "no"]), shuffle=False)()))
        assert labels.tolist() == ["yes", "no"]

    def test_frame_is_copied_at_creation(self):
        x, y = _frame()
        input_fn = pandas_input_fn(x, y, batch_size=4, shuffle=False)
        x.loc[100, "a"] = 99
        assert next(iter(input_fn()))[0]["a"].tolist() == [0, 1, 2, 3]

    def test_x_must_be_a_dataframe(self):
        with pytest.raises(TypeError, match="x must be a pandas DataFrame; got Series"):
            pandas_input_fn(pd.Series([1, 2]), shuffle=False)

    def test_duplicate_columns(self):
        x = pd.DataFrame([[1, 2]], columns=["a", "a"])
        with pytest.raises(ValueError, match=r"x has duplicate column names \['a'\]"):
            pandas_input_fn(x, shuffle=False)


# --------------------------------------------------------------------------------------------
# Resuming
# --------------------------------------------------------------------------------------------


def _features_equal(left, right):
    if isinstance(left, dict):
        return left.keys() == right.keys() and all(_features_equal(left[k], right[k]) for k in left)
    if isinstance(left, tuple):
        return all(_features_equal(a, b) for a, b in zip(left, right))
    if isinstance(left, torch.Tensor):
        return torch.equal(left, right)
    return np.array_equal(left, right)


def _seeded(seed):
    return SimpleNamespace(tf_random_seed=seed)


class TestResume:
    @pytest.mark.parametrize("shuffle", [False, True])
    @pytest.mark.parametrize("num_epochs", [1, 3, None])
    @pytest.mark.parametrize("stop_after", [0, 1, 3, 4, 6])
    @pytest.mark.parametrize("seed", [7, None])
    def test_resumed_stream_equals_uninterrupted(self, tmp_path, shuffle, num_epochs, stop_after,
                                                 seed):
        n, batch_size, total = 11, 4, 9
        x = pd.DataFrame({"num": np.arange(n) * 1.5, "word": [f"w{i}" for i in range(n)]})
        input_fn = pandas_input_fn(x, pd.Series(np.arange(n)), batch_size=batch_size,
                                   num_epochs=num_epochs, shuffle=shuffle)
        config = _config(seed)
        interrupted = input_fn(config=config)
        head = list(itertools.islice(interrupted, stop_after))
        path = tmp_path / "state.pt"
        torch.save({"input": interrupted.state_dict()}, path)
        state = torch.load(path, weights_only=True)["input"]
        reference = head + list(itertools.islice(interrupted, total - stop_after))
        if seed is not None:  # a seeded stream is also the same as a fresh uninterrupted one
            fresh = list(itertools.islice(input_fn(config=config), total))
            assert all(_features_equal(a, b) for a, b in zip(fresh, reference, strict=True))

        resumed = input_fn(config=config)  # seed None: a fresh seed, taken over from the state
        resumed.load_state_dict(state)
        tail = list(itertools.islice(resumed, total - stop_after))
        assert len(head + tail) == len(reference)
        for got, want in zip(head + tail, reference):
            assert _features_equal(got, want)

    def test_state_holds_only_plain_values(self):
        batches = numpy_input_fn(np.arange(10), batch_size=3, shuffle=True)(config=_config(1))
        next(batches)
        state = batches.state_dict()
        assert all(type(v) in (int, str, bool) for v in state.values())
        assert state["epoch"] == 0 and state["offset"] == 3
        assert state["num_rows"] == 10 and state["batch_size"] == 3 and state["shuffle"] is True
        assert state["seed"] == 1 and state["num_epochs"] == 1
        assert state["num_shards"] == 1 and state["shard_index"] == 0

    def test_state_reflects_only_yielded_batches(self):
        batches = numpy_input_fn(np.arange(4), batch_size=2, num_epochs=2, shuffle=False)()
        assert (batches.state_dict()["epoch"], batches.state_dict()["offset"]) == (0, 0)
        next(batches)
        assert (batches.state_dict()["epoch"], batches.state_dict()["offset"]) == (0, 2)
        next(batches)
        assert (batches.state_dict()["epoch"], batches.state_dict()["offset"]) == (1, 0)
        assert batches.epoch == 1

    def test_finished_stream_resumes_as_finished(self):
        input_fn = numpy_input_fn(np.arange(4), batch_size=2, shuffle=False)
        done = input_fn()
        list(done)
        resumed = input_fn()
        resumed.load_state_dict(done.state_dict())
        assert list(resumed) == []

    @pytest.mark.parametrize(
        ("changes", "message"),
        [
            ({"batch_size": 3}, r"batch_size: saved 2, now 3"),
            ({"num_epochs": 2}, r"num_epochs: saved 1, now 2"),
            ({"num_epochs": None}, r"num_epochs: saved 1, now -1"),
            ({"shuffle": False}, r"shuffle: saved True, now False"),
            ({"rows": 9}, r"num_rows: saved 8, now 9"),
            ({"seed": 6}, r"seed: saved 5 \(given\), now 6 \(given\)"),
            ({"seed": None}, r"seed: saved 5 \(given\), now \d+ \(random\)"),
        ],
    )
    def test_fingerprint_mismatch(self, changes, message):
        def make(rows=8, batch_size=2, num_epochs=1, shuffle=True, seed=5):
            fn = numpy_input_fn(np.arange(rows), batch_size=batch_size, num_epochs=num_epochs,
                                shuffle=shuffle)
            return fn(config=_config(seed))

        saved = make()
        next(saved)
        with pytest.raises(ValueError, match=r"Cannot resume the input position.*" + message):
            make(**changes).load_state_dict(saved.state_dict())

    def test_shard_mismatch(self):
        fn = numpy_input_fn(np.arange(8), batch_size=2, shuffle=False)
        saved = fn(input_context=_context(2, 0))
        with pytest.raises(ValueError, match=r"num_shards: saved 2, now 1"):
            fn().load_state_dict(saved.state_dict())

    def test_other_shard_resumes_after_the_same_number_of_rows(self):
        """The chief saves for every rank of a DDP run: rank 1 continues in lockstep from rank 0's state."""
        fn = numpy_input_fn(np.arange(7), batch_size=2, shuffle=True, num_epochs=None)
        ranks = [fn(config=_seeded(5), input_context=_context(2, r)) for r in (0, 1)]  # 4 and 3 rows
        for _ in range(3):  # 6 rows consumed by each shard
            for batches in ranks:
                next(batches)
        expected = next(ranks[1])
        resumed = fn(config=_seeded(5), input_context=_context(2, 1))
        resumed.load_state_dict(ranks[0].state_dict())
        assert np.array_equal(next(resumed), expected)

    def test_malformed_states(self):
        batches = numpy_input_fn(np.arange(8), batch_size=2, shuffle=False)()
        with pytest.raises(ValueError, match="state must be a dict"):
            batches.load_state_dict([1, 2])
        with pytest.raises(ValueError, match=r"not a BatchIterator state.*missing keys \['epoch'"):
            state = batches.state_dict()
            del state["epoch"]
            batches.load_state_dict(state)
        with pytest.raises(ValueError, match="impossible position epoch=0, offset=8"):
            batches.load_state_dict({**batches.state_dict(), "offset": 8})
        with pytest.raises(ValueError, match="impossible position epoch=2"):
            batches.load_state_dict({**batches.state_dict(), "epoch": 2})


# --------------------------------------------------------------------------------------------
# Sharding (input_context)
# --------------------------------------------------------------------------------------------


class TestSharding:
    @pytest.mark.parametrize("shuffle", [False, True])
    @pytest.mark.parametrize(("n", "shards"), [(10, 3), (9, 3), (5, 4), (7, 1)])
    def test_shards_cover_every_example_once_per_epoch(self, shuffle, n, shards):
        epochs = 3
        input_fn = numpy_input_fn(np.arange(n), np.arange(n), batch_size=2, num_epochs=epochs,
                                  shuffle=shuffle)
        streams = [_labels_stream(input_fn(config=_config(11), input_context=_context(shards, i)))
                   for i in range(shards)]
        per_epoch = [len(range(i, n, shards)) for i in range(shards)]
        for e in range(epochs):
            seen = []
            for stream, size in zip(streams, per_epoch):
                seen += stream[e * size : (e + 1) * size]
            assert sorted(seen) == list(range(n))

    def test_shard_of_an_ordered_stream(self):
        input_fn = numpy_input_fn(np.arange(7), np.arange(7), batch_size=10, shuffle=False)
        assert _labels_stream(input_fn(input_context=_context(3, 1))) == [1, 4]

    @pytest.mark.parametrize(("num", "pipeline_id"), [(0, 0), (2, 2), (2, -1), ("2", 0)])
    def test_bad_input_context(self, num, pipeline_id):
        input_fn = numpy_input_fn(np.arange(7), shuffle=False)
        with pytest.raises(ValueError, match="input_context must have an int num_input_pipelines"):
            input_fn(input_context=_context(num, pipeline_id))

    def test_shard_without_examples(self):
        input_fn = numpy_input_fn(np.arange(2), shuffle=False)
        with pytest.raises(ValueError, match="shard 2 of 3 holds no example"):
            input_fn(input_context=_context(3, 2))


# --------------------------------------------------------------------------------------------
# BatchIterator used directly
# --------------------------------------------------------------------------------------------


class TestBatchIterator:
    def test_docstring_example(self):
        it = BatchIterator({"x": np.arange(5.0)}, np.arange(5), batch_size=2, shuffle=False)
        assert [labels.tolist() for _, labels in it] == [[0, 1], [2, 3], [4]]

    def test_tensors_are_not_copied_at_creation(self):
        data = np.arange(4.0)
        it = BatchIterator({"x": data}, batch_size=4)
        data[0] = 9.0  # shared memory: visible in later batches, as documented
        assert next(it)["x"].tolist() == [9.0, 1.0, 2.0, 3.0]

    def test_validation(self):
        with pytest.raises(ValueError, match="same length; got lengths \\[2, 3\\]"):
            BatchIterator({"a": np.arange(2)}, np.arange(3))
        with pytest.raises(ValueError, match="the data has no rows"):
            BatchIterator({"a": np.zeros(0)})
        with pytest.raises(ValueError, match="the data has no rows"):
            pandas_input_fn(pd.DataFrame({"a": []}), shuffle=False)()
        with pytest.raises(ValueError, match="at least one column"):
            BatchIterator({})
        with pytest.raises(ValueError, match="leading batch dimension"):
            BatchIterator(torch.tensor(1.0))
        with pytest.raises(ValueError, match="shard_index must be an int in \\[0, 2\\)"):
            BatchIterator(np.arange(4), num_shards=2, shard_index=2)
        with pytest.raises(ValueError, match="seed must be None or an int"):
            BatchIterator(np.arange(4), shuffle=True, seed="1")

    def test_repr(self):
        assert "num_rows=4" in repr(BatchIterator(np.arange(4), batch_size=2))


# --------------------------------------------------------------------------------------------
# parse_input_fn_result / split_batch
# --------------------------------------------------------------------------------------------


class TestParseInputFnResult:
    def test_features_labels_tuple_is_one_batch_repeated_forever(self):
        features, labels = {"x": torch.ones(2)}, torch.zeros(2)
        parsed = parse_input_fn_result((features, labels))
        assert isinstance(parsed, RepeatedBatch) and parsed.is_single_batch
        taken = list(itertools.islice(parsed, 5))
        assert len(taken) == 5 and all(b[0] is features and b[1] is labels for b in taken)

    def test_list_of_two_is_a_tuple_too(self):
        parsed = parse_input_fn_result([torch.ones(2), None])
        assert next(iter(parsed)) == (parsed.batch[0], None)

    @pytest.mark.parametrize("result", [(torch.ones(1),), (torch.ones(1), 1, 2), [{"a": 1}] * 3])
    def test_wrong_tuple_length(self, result):
        with pytest.raises(ValueError, match=r"input_fn should return \(features, labels\) as a "
                                             r"len 2 tuple"):
            parse_input_fn_result(result)

    @pytest.mark.parametrize("features", [{"x": torch.ones(2)}, torch.ones(2), np.ones(2)])
    def test_features_alone(self, features):
        parsed = parse_input_fn_result(features)
        assert isinstance(parsed, RepeatedBatch)
        assert next(iter(parsed)) is features

    def test_iterables_are_used_as_they_are(self):
        batches = numpy_input_fn(np.arange(4), shuffle=False)()
        assert parse_input_fn_result(batches) is batches
        generator = (b for b in [({"x": 1}, 2)])
        assert parse_input_fn_result(generator) is generator
        listed = [({"x": torch.ones(1)}, torch.ones(1)), ({"x": torch.ones(1)}, torch.ones(1))]
        assert parse_input_fn_result(listed) is listed
        loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.ones(4)))
        assert parse_input_fn_result(loader) is loader

    @pytest.mark.parametrize("result", [None, 3, "abc"])
    def test_not_iterable(self, result):
        with pytest.raises(TypeError, match="input_fn must return an iterable of batches"):
            parse_input_fn_result(result)

    def test_split_batch(self):
        assert split_batch(({"x": 1}, 2)) == ({"x": 1}, 2)
        assert split_batch([{"x": 1}, 2]) == ({"x": 1}, 2)
        assert split_batch({"x": 1}) == ({"x": 1}, None)
        with pytest.raises(ValueError, match=r"as a len 2 tuple; a batch was a tuple of length 3"):
            split_batch((1, 2, 3))


# --------------------------------------------------------------------------------------------
# Reproducibility from RunConfig.tf_random_seed when no seed is given (issue 12.8)


def _losses_of_two_runs(tmp_path, input_fn, seed=0):
    import estimator_engine as ee

    def model_fn(features, labels, mode):
        net = ee.get_module("linear", lambda: torch.nn.Linear(1, 1))
        x, y = features["x"].float().reshape(-1, 1), labels.float().reshape(-1, 1)
        loss = torch.nn.functional.mse_loss(net(x), y)
        optimizer = ee.get_optimizer("sgd", lambda: torch.optim.SGD(net.parameters(), lr=0.1))
        return ee.EstimatorSpec(mode, loss=loss, train_op=ee.minimize(optimizer, loss))

    class Losses(ee.SessionRunHook):
        def __init__(self):
            self.values = []

        def before_run(self, run_context):
            return ee.SessionRunArgs("loss")

        def after_run(self, run_context, run_values):
            self.values.append(run_values.results)

    runs = []
    for name in ("a", "b"):
        torch.manual_seed(int.from_bytes(name.encode(), "little"))  # unrelated global states
        hook = Losses()
        ee.Estimator(model_fn, model_dir=str(tmp_path / name), config=ee.RunConfig(tf_random_seed=seed)).train(
            input_fn, steps=6, hooks=[hook])
        runs.append(hook.values)
    return runs


def _rows(n=40):
    x = np.linspace(-1, 1, n, dtype=np.float32).reshape(n, 1)
    return {"x": x}, 2 * x + 3


def test_hand_written_batch_iterator_shuffles_from_tf_random_seed(tmp_path):
    features, labels = _rows()

    def input_fn():  # no config argument, no seed: the Estimator's seed decides the order
        return BatchIterator(features, labels, batch_size=4, num_epochs=None, shuffle=True)

    first, second = _losses_of_two_runs(tmp_path, input_fn)
    assert len(first) == 6 and first == second


@pytest.mark.parametrize("kind", ["numpy", "pandas"])
def test_input_fns_shuffle_from_tf_random_seed(tmp_path, kind):
    features, labels = _rows()
    if kind == "numpy":
        input_fn = numpy_input_fn(features, labels, batch_size=4, num_epochs=None, shuffle=True)
    else:
        input_fn = pandas_input_fn(pd.DataFrame({"x": features["x"][:, 0]}), pd.Series(labels[:, 0]),
                                   batch_size=4, num_epochs=None, shuffle=True)
    first, second = _losses_of_two_runs(tmp_path, input_fn)
    assert first == second


def test_unseeded_batch_iterator_follows_torchs_global_generator():
    def order():
        return [y.tolist() for _, y in BatchIterator(np.arange(20), np.arange(20), batch_size=20, shuffle=True)]

    torch.manual_seed(5)
    first = order()
    torch.manual_seed(5)
    assert order() == first
    assert order() != first  # the next draw of the generator: another order
