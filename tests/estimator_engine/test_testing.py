"""estimator_engine.testing: the known-answer fixtures say what is wrong when misused."""

from __future__ import annotations

import pytest

from estimator_engine.mode_keys import ModeKeys
from estimator_engine.testing import linear_model_fn, make_linear_data


def test_linear_model_fn_without_labels_in_train_names_the_fix():
    features, _ = make_linear_data(n=4)
    with pytest.raises(ValueError, match=r"needs labels in mode .*TRAIN.*got labels=None; return "
                                         r"\(features, labels\) from the input_fn"):
        linear_model_fn(features, None, ModeKeys.TRAIN, {})


def test_make_linear_data_is_the_known_line():
    features, labels = make_linear_data(a=2.0, b=3.0, n=8)
    assert features["x"].shape == (8, 1)
    assert (labels - (2.0 * features["x"] + 3.0)).abs().max().item() < 1e-6
