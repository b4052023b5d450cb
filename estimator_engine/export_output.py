"""What an exported model returns per signature (TF's ``tf.estimator.export.*Output`` classes).

They are plain value objects: the ``EstimatorSpec`` validates them in PREDICT mode and the exporter
turns each into one signature of the exported program. A string output (TF's ``classes``) cannot be a
torch tensor, so it is a ``StringLookup``: an id tensor plus a vocabulary; the export records the
vocabulary as JSON and ``ee.export.load`` returns ``vocabulary[ids]`` as a numpy array of ``bytes``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

__all__ = ["ClassificationOutput", "ExportOutput", "PredictOutput", "RegressionOutput", "StringLookup",
           "string_array"]


def _check_tensor(value: Any, what: str) -> None:
    if not isinstance(value, torch.Tensor):
        raise ValueError(f"{what} must be a torch.Tensor, given: {value!r}")


def _all_text(values: np.ndarray) -> bool:
    return all(isinstance(v, (str, bytes)) for v in values.flat)


def string_array(value: Any) -> np.ndarray | None:
    """``value`` as TF returns a string tensor (a numpy object array of UTF-8 ``bytes``), or ``None``.

    Strings are what a string feature holds in the engine (a list, or a numpy ``str``/``bytes``/
    ``object`` array of them, e.g. a record key passed through with ``forward_features``); anything
    else (a tensor, numbers) gives ``None``.

    Example:
        >>> string_array(['2024-01-01', b'x']).tolist()
        [b'2024-01-01', b'x']
        >>> string_array(torch.zeros(2)) is None
        True
    """
    if isinstance(value, np.ndarray):
        if value.dtype.kind == "O" and all(isinstance(v, bytes) for v in value.flat):
            return value  # already TF's form (e.g. a canned head's class names): no copy
        if value.dtype.kind not in "OUS" or (value.dtype.kind == "O" and not _all_text(value)):
            return None
        array = value
    elif isinstance(value, (list, tuple)) and len(value):
        try:
            array = np.array(value, dtype=object)
        except ValueError:  # ragged rows: not a string tensor
            return None
        if not _all_text(array):
            return None
    else:
        return None
    out = np.empty(array.shape, dtype=object)
    out.flat[:] = [v if isinstance(v, bytes) else str(v).encode("utf-8") for v in array.flat]
    return out


class StringLookup:
    """A string output derived from an integer id tensor: ``vocabulary[ids]`` (TF's string ``classes``).

    The exported program returns ``ids``; the export stores ``vocabulary`` (plain JSON) and the loaded
    model maps the ids to a numpy array of UTF-8 ``bytes``, as TF returns string tensors.

    Example:
        >>> lookup = StringLookup(torch.tensor([[1], [0]]), ['no', 'yes'])
        >>> lookup.lookup(lookup.ids).tolist()
        [[b'yes'], [b'no']]
    """

    def __init__(self, ids: torch.Tensor, vocabulary: Sequence[str | bytes]):
        _check_tensor(ids, "StringLookup ids")
        if ids.is_floating_point() or ids.is_complex() or ids.dtype == torch.bool:
            raise ValueError(f"StringLookup ids must be an integer tensor, given dtype {ids.dtype}")
        if isinstance(vocabulary, (str, bytes)) or not len(vocabulary):
            raise ValueError(f"StringLookup vocabulary must be a non-empty list of strings, given: {vocabulary!r}")
        words = []
        for word in vocabulary:
            if isinstance(word, bytes):
                word = word.decode("utf-8")
            if not isinstance(word, str):
                raise ValueError(f"StringLookup vocabulary entries must be str or bytes, given: {word!r}")
            words.append(word)
        self.ids = ids
        self.vocabulary: tuple[str, ...] = tuple(words)

    def lookup(self, ids: Any) -> np.ndarray:
        """``vocabulary[ids]`` as a numpy object array of ``bytes`` with the shape of ``ids``."""
        table = np.array([w.encode("utf-8") for w in self.vocabulary], dtype=object)
        ids = ids.detach().cpu().numpy() if isinstance(ids, torch.Tensor) else np.asarray(ids)
        return table[ids.astype(np.int64)]


class ExportOutput:
    """Base class of the values of ``EstimatorSpec.export_outputs``."""

    def as_signature_outputs(self) -> dict[str, torch.Tensor | StringLookup]:
        """The named tensors this output exposes in the exported signature."""
        raise NotImplementedError


class ClassificationOutput(ExportOutput):
    """Class scores and/or class ids of a classifier.

    Example:
        >>> out = ClassificationOutput(scores=torch.tensor([[0.2, 0.8]]))
        >>> sorted(out.as_signature_outputs())
        ['scores']
    """

    def __init__(self, scores: torch.Tensor | None = None, classes: torch.Tensor | StringLookup | None = None):
        if scores is None and classes is None:
            raise ValueError("At least one of scores and classes must be set.")
        if scores is not None:
            _check_tensor(scores, "ClassificationOutput scores")
            if scores.is_floating_point() is False:
                raise ValueError(f"ClassificationOutput scores must be a float tensor, given dtype {scores.dtype}")
        if classes is not None and not isinstance(classes, StringLookup):
            _check_tensor(classes, "ClassificationOutput classes")
        self.scores = scores
        self.classes = classes

    def as_signature_outputs(self) -> dict[str, torch.Tensor | StringLookup]:
        outputs: dict[str, torch.Tensor | StringLookup] = {}
        if self.scores is not None:
            outputs["scores"] = self.scores
        if self.classes is not None:
            outputs["classes"] = self.classes
        return outputs


class RegressionOutput(ExportOutput):
    """The predicted value of a regressor.

    Example:
        >>> RegressionOutput(torch.tensor([1.5])).value
        tensor([1.5000])
    """

    def __init__(self, value: torch.Tensor):
        _check_tensor(value, "RegressionOutput value")
        if not value.is_floating_point():
            raise ValueError(f"RegressionOutput value must be a float tensor, given dtype {value.dtype}")
        self.value = value

    def as_signature_outputs(self) -> dict[str, torch.Tensor | StringLookup]:
        return {"outputs": self.value}


class PredictOutput(ExportOutput):
    """Arbitrary named output tensors (the default signature of a model with dict predictions).

    Example:
        >>> sorted(PredictOutput({'y': torch.zeros(2)}).outputs)
        ['y']
    """

    def __init__(self, outputs: torch.Tensor | Mapping[str, Any]):
        if isinstance(outputs, torch.Tensor):
            outputs = {"output": outputs}
        if not isinstance(outputs, Mapping):
            raise ValueError(f"PredictOutput outputs must be a tensor or a dict of tensors, given: {outputs!r}")
        checked: dict[str, Any] = {}
        for key, value in outputs.items():
            if not isinstance(key, str):
                raise ValueError(f"PredictOutput output keys must be strings, given: {key!r}")
            if not isinstance(value, (torch.Tensor, StringLookup)):
                # A string feature passed through (TF's string tensor): kept as bytes.
                strings = string_array(value)
                if strings is None:
                    raise ValueError(f"PredictOutput output {key!r} must be a torch.Tensor, a StringLookup or "
                                     f"strings (a list or numpy array of str/bytes), given: {value!r:.200}")
                value = strings
            checked[key] = value
        self.outputs = checked

    def as_signature_outputs(self) -> dict[str, Any]:
        """The named outputs; a string output is a numpy array of bytes (not exported: see export.py)."""
        return dict(self.outputs)
