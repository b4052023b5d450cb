"""The three modes a ``model_fn`` is called in (TF's ``tf.estimator.ModeKeys``)."""

from __future__ import annotations

import enum

__all__ = ["ModeKeys"]


class ModeKeys(str, enum.Enum):
    """Standard names for model modes; the values are TF's strings.

    Because it is a ``str`` enum, ``ModeKeys.TRAIN == 'train'`` holds, so ported code that compares
    ``mode`` with the string keeps working.

    Example:
        >>> ModeKeys.PREDICT == 'infer'
        True
    """

    TRAIN = "train"
    EVAL = "eval"
    PREDICT = "infer"

    def __str__(self) -> str:  # so f-strings print 'train', not 'ModeKeys.TRAIN'
        return self.value
