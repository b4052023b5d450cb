"""The ``input_fn`` contract and the in-memory input functions (TF's ``numpy_io`` / ``pandas_io``).

Separation of concerns:

* ``numpy_input_fn`` / ``pandas_input_fn`` validate their arguments with TF's rules and messages,
  turn the data into column tensors **once** (``torch.from_numpy`` without a copy where the dtype
  allows), and return an ``input_fn``.
* Calling that ``input_fn`` returns a ``BatchIterator``: it owns the *position* in the stream
  (epoch, offset), draws each epoch's order (``torch.randperm`` seeded from ``(seed, epoch)``),
  gathers a batch with one ``index_select`` per numeric column and one numpy fancy index per text
  column (no per-row Python), and can save and restore its position (``state_dict`` /
  ``load_state_dict``) so a resumed training run continues on the very next example.
* ``parse_input_fn_result`` / ``split_batch`` implement TF's rule for what an ``input_fn`` may
  return; the Estimator calls them and knows nothing of how batches are made.

Batching follows TF's queues exactly: the stream is the concatenation of ``num_epochs`` epoch
orders, cut into batches of ``batch_size``. A batch may therefore span an epoch boundary
(3 rows, ``batch_size=2``, ``num_epochs=3`` gives ``[0, 1], [2, 0], [1, 2], [0, 1], [2]``) and only
the very last batch of the stream may be smaller; with ``num_epochs=None`` every batch is full.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "BatchIterator",
    "RepeatedBatch",
    "numpy_input_fn",
    "pandas_input_fn",
    "parse_input_fn_result",
    "split_batch",
]

# A column is a torch tensor (numeric / bool) or a numpy array (text, dates, anything torch lacks).
Column = torch.Tensor | np.ndarray
Structure = Column | dict[Any, Column]

_STATE_FORMAT = "estimator_engine.inputs.BatchIterator/1"
_TORCH_KINDS = frozenset("biufc")  # numpy dtype kinds torch.from_numpy can take
_MASK64 = (1 << 64) - 1
_MAX_SEED = (1 << 63) - 1


# --------------------------------------------------------------------------------------------
# BatchIterator
# --------------------------------------------------------------------------------------------


def _splitmix64(value: int) -> int:
    """One round of SplitMix64: spreads (seed, epoch) so nearby seeds give unrelated orders."""
    value = (value + 0x9E3779B97F4A7C15) & _MASK64
    value = ((value ^ (value >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    value = ((value ^ (value >> 27)) * 0x94D049BB133111EB) & _MASK64
    return value ^ (value >> 31)


def _epoch_seed(seed: int, epoch: int) -> int:
    return _splitmix64(_splitmix64(seed & _MASK64) ^ epoch) >> 1  # 63 bits: manual_seed takes it


def _random_seed() -> int:
    """A shuffle seed drawn from torch's global generator: reproducible once it is seeded (the
    Estimator seeds it from ``RunConfig.tf_random_seed`` before calling the ``input_fn``, as TF
    derives op seeds from the graph seed), fresh in every unseeded process."""
    return int(torch.randint(0, _MAX_SEED, (), dtype=torch.int64))


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _as_column(value: Any, name: str) -> Column:
    """A tensor stays as it is; an array becomes a tensor when torch has its dtype, else stays numpy."""
    if isinstance(value, torch.Tensor):
        if value.dim() == 0:
            raise ValueError(f"{name} must have a leading batch dimension; got a 0-d tensor {value!r}.")
        return value.contiguous()
    array = np.asarray(value)
    if array.ndim == 0:
        raise ValueError(f"{name} must have a leading batch dimension; got a scalar {value!r}.")
    if array.dtype.kind not in _TORCH_KINDS:
        return array  # text, datetimes, objects: numpy fancy indexing per batch
    if not array.dtype.isnative:
        array = array.astype(array.dtype.newbyteorder("="))
    # from_numpy shares memory; it needs a writable, C-contiguous array (a copy only when not).
    array = np.require(array, requirements=["C", "W"])
    return torch.from_numpy(array)


def _map_structure(structure: Any, fn: Callable[[Any, str], Any], name: str) -> Any:
    if structure is None:
        return None
    if isinstance(structure, Mapping):
        return {key: fn(value, f"{name}[{key!r}]") for key, value in structure.items()}
    return fn(structure, name)


def _columns(structure: Any) -> list[Column]:
    if structure is None:
        return []
    if isinstance(structure, Mapping):
        return list(structure.values())
    return [structure]


def _take(column: Column, index: torch.Tensor, index_np: np.ndarray | None) -> Column:
    if type(column) is torch.Tensor or isinstance(column, torch.Tensor):
        return column.index_select(0, index)
    return column[index_np]


def _gather(structure: Any, index: torch.Tensor, index_np: np.ndarray | None) -> Any:
    if structure is None:
        return None
    if isinstance(structure, dict):
        return {key: _take(column, index, index_np) for key, column in structure.items()}
    return _take(structure, index, index_np)


class BatchIterator:
    """Iterates over in-memory columns in batches; resumable through ``state_dict``.

    This is what the ``input_fn`` of ``numpy_input_fn`` / ``pandas_input_fn`` returns, and it can be
    used directly in a hand-written ``input_fn``. It is its own iterator (like a file object): each
    ``next()`` yields ``(features, labels)``, or ``features`` alone when ``labels`` is None, and
    advances the position that ``state_dict()`` reports.

    Args:
        features: a column or a dict of columns. A column is a ``torch.Tensor`` or anything
            ``numpy.asarray`` accepts; numeric and bool arrays become tensors once (sharing memory
            with the array when possible), text and other arrays stay numpy arrays. All columns
            must have the same length along dimension 0.
        labels: ``None``, a column or a dict of columns, of the same length.
        batch_size: examples per batch (the last batch of the stream may be smaller).
        num_epochs: passes over the data; ``None`` repeats forever.
        shuffle: draw a new order for every epoch.
        seed: the shuffle seed; epoch ``e`` uses a ``torch.Generator`` seeded from ``(seed, e)``,
            so its order is reproducible. ``None`` draws one from torch's global generator, as TF
            derives an op seed from the graph seed: reproducible inside an Estimator call with
            ``RunConfig(tf_random_seed=...)`` (or after ``torch.manual_seed``), a different order
            each time this class is built otherwise.
        num_shards / shard_index: with ``num_shards > 1`` this iterator yields only the examples
            at positions ``shard_index, shard_index + num_shards, ...`` of every epoch's order, so
            the shards together cover every example exactly once per epoch.

    Example:
        >>> it = BatchIterator({"x": np.arange(5.0)}, np.arange(5), batch_size=2, shuffle=False)
        >>> [labels.tolist() for _, labels in it]
        [[0, 1], [2, 3], [4]]
    """

    def __init__(
        self,
        features: Structure | Any,
        labels: Structure | Any = None,
        *,
        batch_size: int = 128,
        num_epochs: int | None = 1,
        shuffle: bool = False,
        seed: int | None = None,
        num_shards: int = 1,
        shard_index: int = 0,
    ) -> None:
        if not _is_int(batch_size) or batch_size <= 0:
            raise ValueError(f"batch_size must be a positive int; got {batch_size!r}.")
        if num_epochs is not None and (not _is_int(num_epochs) or num_epochs < 0):
            raise ValueError(
                f"num_epochs must be None (repeat forever) or an int >= 0; got {num_epochs!r}."
            )
        if not isinstance(shuffle, bool):
            raise ValueError(f"shuffle must be a bool; got {shuffle!r}.")
        if seed is not None and not _is_int(seed):
            raise ValueError(f"seed must be None or an int; got {seed!r}.")
        if not _is_int(num_shards) or num_shards < 1:
            raise ValueError(f"num_shards must be an int >= 1; got {num_shards!r}.")
        if not _is_int(shard_index) or not 0 <= shard_index < num_shards:
            raise ValueError(
                f"shard_index must be an int in [0, {num_shards}); got {shard_index!r}."
            )
        self._features = _map_structure(features, _as_column, "features")
        self._labels = _map_structure(labels, _as_column, "labels")
        self._has_numpy_columns = any(not isinstance(column, torch.Tensor)
                                      for column in _columns(self._features) + _columns(self._labels))
        lengths = {len(column) for column in _columns(self._features) + _columns(self._labels)}
        if not lengths:
            raise ValueError("features must hold at least one column; got an empty dict.")
        if len(lengths) != 1:
            raise ValueError(
                f"all feature and label columns must have the same length; got lengths "
                f"{sorted(lengths)}."
            )
        self._num_rows = int(lengths.pop())
        self._shard_rows = len(range(shard_index, self._num_rows, num_shards))
        if self._num_rows == 0 and num_epochs != 0:
            raise ValueError("the data has no rows; an input_fn needs at least one example.")
        if self._shard_rows == 0 and num_epochs != 0:
            raise ValueError(
                f"shard {shard_index} of {num_shards} holds no example: the data has only "
                f"{self._num_rows} rows. Use fewer input pipelines or more data."
            )
        self._batch_size = int(batch_size)
        self._num_epochs = None if num_epochs is None else int(num_epochs)
        self._shuffle = shuffle
        if not shuffle:
            self._seed, self._seed_source = 0, "none"
        elif seed is None:
            self._seed, self._seed_source = _random_seed(), "random"
        else:
            self._seed, self._seed_source = int(seed), "given"
        self._num_shards = int(num_shards)
        self._shard_index = int(shard_index)
        self._epoch = 0
        self._offset = 0
        self._order_epoch = -1
        self._order: torch.Tensor | None = None
        self._identity: torch.Tensor | None = None

    # -- properties ---------------------------------------------------------------------------

    @property
    def num_rows(self) -> int:
        """Rows in the data (all shards)."""
        return self._num_rows

    @property
    def batch_size(self) -> int:
        return self._batch_size

    @property
    def num_epochs(self) -> int | None:
        return self._num_epochs

    @property
    def seed(self) -> int | None:
        """The shuffle seed in use (drawn when none was given); ``None`` without shuffle."""
        return self._seed if self._shuffle else None

    @property
    def epoch(self) -> int:
        """The epoch the next example comes from."""
        return self._epoch

    @property
    def num_batches(self) -> int | None:
        """Batches in the whole stream of this shard, ``None`` when it repeats forever."""
        if self._num_epochs is None:
            return None
        return -(-self._shard_rows * self._num_epochs // self._batch_size)

    # -- iteration ----------------------------------------------------------------------------

    def _epoch_order(self, epoch: int) -> torch.Tensor:
        """This shard's order of row indices for ``epoch`` (cached for the current epoch)."""
        if epoch != self._order_epoch:
            if self._shuffle:
                generator = torch.Generator().manual_seed(_epoch_seed(self._seed, epoch))
                order = torch.randperm(self._num_rows, generator=generator)
                if self._num_shards > 1:
                    order = order[self._shard_index :: self._num_shards].contiguous()
            else:  # the same order every epoch: build it once
                if self._identity is None:
                    self._identity = torch.arange(
                        self._shard_index, self._num_rows, self._num_shards, dtype=torch.int64
                    )
                order = self._identity
            self._order, self._order_epoch = order, epoch
            return order
        return self._order  # type: ignore[return-value]  # set together with _order_epoch

    def _exhausted(self) -> bool:
        return self._num_epochs is not None and self._epoch >= self._num_epochs

    def __iter__(self) -> BatchIterator:
        return self

    def __next__(self) -> Any:
        offset, batch_size, order = self._offset, self._batch_size, self._order
        if order is not None and offset + batch_size < self._shard_rows and self._epoch == self._order_epoch and (
                self._num_epochs is None or self._epoch < self._num_epochs):
            # Hot path: the whole batch lies inside the current epoch's order.
            index = order[offset:offset + batch_size]
            self._offset = offset + batch_size
        else:
            index = self._next_index_across_epochs()
        index_np = index.numpy() if self._has_numpy_columns else None
        features = _gather(self._features, index, index_np)
        if self._labels is None:
            return features
        return features, _gather(self._labels, index, index_np)

    def _next_index_across_epochs(self) -> torch.Tensor:
        pieces = []
        needed = self._batch_size
        while needed > 0 and not self._exhausted():
            order = self._epoch_order(self._epoch)
            # Lengths by arithmetic: len() of a tensor is a Python-level call on the hot path.
            taken = min(needed, self._shard_rows - self._offset)
            pieces.append(order[self._offset : self._offset + taken])
            needed -= taken
            self._offset += taken
            if self._offset >= self._shard_rows:
                self._epoch += 1
                self._offset = 0
        if not pieces:
            raise StopIteration
        return pieces[0] if len(pieces) == 1 else torch.cat(pieces)

    # -- resumability -------------------------------------------------------------------------

    def state_dict(self) -> dict[str, int | str | bool]:
        """The position after the batches yielded so far, plus a fingerprint of the pipeline.

        Holds only ints, strings and bools, so it survives ``torch.load(weights_only=True)``.
        """
        return {
            "format": _STATE_FORMAT,
            "epoch": self._epoch,
            "offset": self._offset,
            "num_rows": self._num_rows,
            "batch_size": self._batch_size,
            "shuffle": self._shuffle,
            "seed": self._seed,
            "seed_source": self._seed_source,
            "num_epochs": -1 if self._num_epochs is None else self._num_epochs,
            "num_shards": self._num_shards,
            "shard_index": self._shard_index,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continues from a position saved by ``state_dict``.

        A seed that was drawn (no seed given) is taken over from the state, so an unseeded shuffled
        stream resumes exactly too.

        Raises:
            ValueError: the state is malformed or was saved by a pipeline with another fingerprint
                (row count, batch size, shuffle, seed, num_epochs or shard); the message lists every
                difference. The caller may then start from the beginning instead.
        """
        if not isinstance(state, Mapping):
            raise ValueError(f"state must be a dict from BatchIterator.state_dict(); got {state!r}.")
        mine = self.state_dict()
        missing = sorted(set(mine) - set(state))
        if missing or state.get("format") != _STATE_FORMAT:
            raise ValueError(
                f"state is not a BatchIterator state of format {_STATE_FORMAT!r} "
                f"(missing keys {missing}, format {state.get('format')!r}); got {dict(state)!r}."
            )
        compared = ["num_rows", "batch_size", "shuffle", "num_epochs", "num_shards"]
        differences = [
            f"{key}: saved {state[key]!r}, now {mine[key]!r}"
            for key in compared
            if state[key] != mine[key]
        ]
        epoch, offset = state["epoch"], state["offset"]
        if state["shard_index"] != mine["shard_index"] and not differences:
            # Another shard's state (the chief saves for every rank of a data-parallel run): the
            # ranks consume rows in lockstep, so this shard has consumed as many rows of its own
            # stream as the saved one had of its stream.
            if not (_is_int(epoch) and _is_int(offset)):
                raise ValueError(f"state holds an impossible position epoch={epoch!r}, offset={offset!r}.")
            saved_rows = len(range(int(state["shard_index"]), self._num_rows, self._num_shards))
            consumed = epoch * saved_rows + offset
            epoch, offset = divmod(consumed, max(self._shard_rows, 1))
        adopt_seed = False
        if self._shuffle and state["shuffle"]:
            if self._seed_source == "random" and state["seed_source"] == "random":
                adopt_seed = True
            elif (state["seed_source"], state["seed"]) != (self._seed_source, self._seed):
                differences.append(
                    f"seed: saved {state['seed']!r} ({state['seed_source']}), "
                    f"now {self._seed!r} ({self._seed_source})"
                )
        if differences:
            raise ValueError(
                "Cannot resume the input position: the saved state was made by a different input "
                "pipeline (" + "; ".join(differences) + "). Rebuild the input_fn with the same "
                "data and arguments to resume, or start from the beginning of the data."
            )
        last = self._num_epochs
        valid = (
            _is_int(epoch)
            and _is_int(offset)
            and epoch >= 0
            and 0 <= offset < max(self._shard_rows, 1)
            and (last is None or epoch < last or (epoch == last and offset == 0))
        )
        if not valid:
            raise ValueError(
                f"state holds an impossible position epoch={epoch!r}, offset={offset!r} for "
                f"{self._shard_rows} rows per epoch and num_epochs={self._num_epochs!r}."
            )
        if adopt_seed:
            self._seed = int(state["seed"])
            self._order_epoch = -1  # orders drawn with the old seed are stale
        self._epoch, self._offset = int(epoch), int(offset)

    def __repr__(self) -> str:
        return (
            f"BatchIterator(num_rows={self._num_rows}, batch_size={self._batch_size}, "
            f"num_epochs={self._num_epochs}, shuffle={self._shuffle}, "
            f"shard={self._shard_index}/{self._num_shards}, epoch={self._epoch}, "
            f"offset={self._offset})"
        )


# --------------------------------------------------------------------------------------------
# input_fn factories
# --------------------------------------------------------------------------------------------


def _check_shuffle(shuffle: Any) -> bool:
    """``shuffle`` itself when it is a bool (TF requires it to be given explicitly)."""
    if not isinstance(shuffle, bool):
        raise ValueError(
            "shuffle must be provided and explicitly set as boolean (it is recommended to set it "
            f"as True for training); got {shuffle!r}. Pass shuffle=True for training, "
            "shuffle=False for evaluation and prediction."
        )
    return shuffle


def _check_batching(batch_size: Any, num_epochs: Any) -> None:
    if not _is_int(batch_size) or batch_size <= 0:
        raise ValueError(f"batch_size must be a positive int; got {batch_size!r}.")
    if num_epochs is not None and (not _is_int(num_epochs) or num_epochs < 0):
        raise ValueError(
            f"num_epochs must be None (repeat forever) or an int >= 0; got {num_epochs!r}."
        )


def _make_input_fn(
    features: Structure,
    labels: Structure | None,
    batch_size: int,
    num_epochs: int | None,
    shuffle: bool,
) -> Callable[..., BatchIterator]:
    def input_fn(config: Any = None, input_context: Any = None) -> BatchIterator:
        """Returns a fresh ``BatchIterator`` over the data, from its beginning.

        Args:
            config: a ``RunConfig``; its ``tf_random_seed`` seeds the shuffle (``None``: a seed
                drawn from torch's global generator, see ``BatchIterator``).
            input_context: an object with ``num_input_pipelines`` and ``input_pipeline_id``; with
                more than one pipeline this call yields only its shard of every epoch.
        """
        seed = getattr(config, "tf_random_seed", None) if config is not None else None
        num_shards, shard_index = 1, 0
        if input_context is not None:
            num_shards = getattr(input_context, "num_input_pipelines", 1)
            shard_index = getattr(input_context, "input_pipeline_id", 0)
            if not _is_int(num_shards) or num_shards < 1 or not _is_int(shard_index) or not (
                0 <= shard_index < num_shards
            ):
                raise ValueError(
                    "input_context must have an int num_input_pipelines >= 1 and an int "
                    "input_pipeline_id in [0, num_input_pipelines); got "
                    f"num_input_pipelines={num_shards!r}, input_pipeline_id={shard_index!r}."
                )
        return BatchIterator(
            features,
            labels,
            batch_size=batch_size,
            num_epochs=num_epochs,
            shuffle=shuffle,
            seed=seed,
            num_shards=num_shards,
            shard_index=shard_index,
        )

    return input_fn


def _sorted_dict(data: Mapping[Any, Any]) -> dict[Any, Any]:
    try:  # TF feeds dict keys in sorted order
        return dict(sorted(data.items(), key=lambda item: item[0]))
    except TypeError:  # keys of mixed types: keep the given order
        return dict(data)


def _as_array(value: Any) -> np.ndarray | torch.Tensor:
    return value if isinstance(value, (np.ndarray, torch.Tensor)) else np.asarray(value)


def _leading_length(value: np.ndarray | torch.Tensor) -> int | None:
    return int(value.shape[0]) if len(value.shape) else None


def numpy_input_fn(
    x: Any,
    y: Any = None,
    batch_size: int = 128,
    num_epochs: int | None = 1,
    shuffle: bool | None = None,
    queue_capacity: int = 1000,
    num_threads: int = 1,
) -> Callable[..., BatchIterator]:
    """Returns an ``input_fn`` that feeds a dict of arrays (or one array) to the model, in batches.

    TF's ``tf.compat.v1.estimator.inputs.numpy_input_fn``. Arrays keep their dtype (``float64``
    stays ``float64``, as in TF); numeric and bool arrays become tensors once, sharing memory with
    the arrays (a later in-place change of such an array shows in later batches; each batch is a
    copy), text arrays stay numpy arrays. Validation happens here, not at the first call.

    Args:
        x: a numpy array (features is then a tensor) or a dict of arrays (features is a dict with
            the same keys, in sorted order as in TF). Tensors are accepted too.
        y: an array, a dict of arrays, or ``None`` (the ``input_fn`` then yields features only).
        batch_size: examples per batch; only the last batch of the stream may be smaller.
        num_epochs: passes over the data; ``None`` repeats forever.
        shuffle: required; ``True`` for training, ``False`` for evaluation and prediction.
        queue_capacity / num_threads: accepted for TF compatibility and ignored (no queues here).

    Returns:
        ``input_fn(config=None, input_context=None) -> BatchIterator``.

    Raises:
        ValueError: shuffle not a bool; empty x or y; duplicate keys in x and y; lengths differ.
        TypeError: x neither a dict nor an array.
    """
    del queue_capacity, num_threads
    shuffle = _check_shuffle(shuffle)
    _check_batching(batch_size, num_epochs)
    if isinstance(x, Mapping):
        if not x:
            raise ValueError("x cannot be an empty dict; pass a dict of arrays, one per feature.")
        features: Structure = {key: _as_array(value) for key, value in _sorted_dict(x).items()}
    elif isinstance(x, (np.ndarray, torch.Tensor)):
        if (x.size if isinstance(x, np.ndarray) else x.numel()) == 0:
            raise ValueError(f"x cannot be an empty array; got shape {tuple(x.shape)}.")
        features = x
    else:
        raise TypeError(
            f"x must be a dict or array; got {type(x).__name__}. Wrap it, e.g. np.asarray(x)."
        )
    labels: Structure | None
    if y is None:
        labels = None
    elif isinstance(y, Mapping):
        if not y:
            raise ValueError("y cannot be empty dict, use None instead.")
        duplicates = set(features) & set(y) if isinstance(features, dict) else set()
        if duplicates:
            raise ValueError(
                f"{len(duplicates)} duplicate keys are found in both x and y: {duplicates}. "
                "Rename the label keys."
            )
        labels = {key: _as_array(value) for key, value in _sorted_dict(y).items()}
    else:
        labels = _as_array(y)

    def shapes(structure: Any) -> Any:
        if isinstance(structure, dict):
            return {key: tuple(value.shape) for key, value in structure.items()}
        return None if structure is None else tuple(structure.shape)

    lengths = {_leading_length(c) for c in _columns(features) + _columns(labels)}
    if len(lengths) != 1 or None in lengths:
        raise ValueError(
            "Length of tensors in x and y is mismatched. All elements in x and y must have the "
            f"same length.\nShapes in x: {shapes(features)}\nShapes in y: {shapes(labels)}\n"
        )
    features = _map_structure(features, _as_column, "x")
    labels = _map_structure(labels, _as_column, "y")
    return _make_input_fn(features, labels, batch_size, num_epochs, shuffle)


def _pandas_column(series: pd.Series, name: str) -> Column:
    """One pandas column as the batch column type (see ``pandas_input_fn`` for the rules)."""
    import pandas as pd

    dtype = series.dtype
    if isinstance(dtype, pd.CategoricalDtype):
        categories = np.asarray(dtype.categories.astype(str), dtype=object)
        lookup = np.append(categories, "")  # code -1 (missing) -> ''
        return lookup[series.cat.codes.to_numpy()]
    if pd.api.types.is_bool_dtype(dtype):
        if series.isna().any():  # nullable boolean with <NA>
            return torch.from_numpy(series.to_numpy(dtype=np.float32, na_value=np.nan))
        return torch.from_numpy(series.to_numpy(dtype=np.bool_, copy=True))
    if pd.api.types.is_integer_dtype(dtype):
        if series.isna().any():  # nullable Int with <NA>
            return torch.from_numpy(series.to_numpy(dtype=np.float32, na_value=np.nan))
        return torch.from_numpy(series.to_numpy(dtype=np.int64, copy=True))
    if pd.api.types.is_float_dtype(dtype):
        return torch.from_numpy(series.to_numpy(dtype=np.float32, na_value=np.nan, copy=True))
    # Text (object, str / string) and anything else: an object array of Python str, missing -> ''.
    values = series.to_numpy(dtype=object, na_value="")
    if pd.api.types.infer_dtype(values, skipna=False) not in ("string", "empty"):
        values = series.astype(str).to_numpy(dtype=object)
        values[series.isna().to_numpy()] = ""
    return np.array(values, dtype=object, copy=True)


def pandas_input_fn(
    x: pd.DataFrame,
    y: pd.Series | pd.DataFrame | None = None,
    batch_size: int = 128,
    num_epochs: int | None = 1,
    shuffle: bool | None = None,
    queue_capacity: int | None = 1000,
    num_threads: int = 1,
    target_column: str = "target",
) -> Callable[..., BatchIterator]:
    """Returns an ``input_fn`` that feeds a pandas DataFrame to the model, in batches.

    TF's ``tf.compat.v1.estimator.inputs.pandas_input_fn``. The frame is converted once, here
    (later changes to it do not show). ``features`` is a dict keyed by column name, in column
    order; the index is not a feature. Column types:

    * float -> ``float32`` tensor (NaN kept); int -> ``int64`` tensor; bool -> ``bool`` tensor;
      nullable ``Int*`` / ``boolean`` with missing values -> ``float32`` with NaN;
    * text (``object``, ``str`` / ``string``) and ``category`` -> a numpy object array of Python
      ``str`` (missing -> ``''``), so feature columns can map them to ids; any other dtype
      (dates, ...) arrives as its ``str()`` text.

    Args:
        x: the features frame.
        y: a Series (labels is one column) or a DataFrame (labels is a dict keyed by its column
            names), with the same index as ``x``; ``None`` yields features only.
        batch_size / num_epochs / shuffle: as in ``numpy_input_fn``.
        queue_capacity / num_threads: accepted for TF compatibility and ignored.
        target_column: TF's name for the label column; must be a str that is not a column of
            ``x`` when ``y`` is given.

    Returns:
        ``input_fn(config=None, input_context=None) -> BatchIterator``.

    Raises:
        ValueError: shuffle not a bool; ``target_column`` already in ``x``; indexes of x and y differ.
        TypeError: ``target_column`` not a str; x not a DataFrame.
    """
    import pandas as pd

    del queue_capacity, num_threads
    shuffle = _check_shuffle(shuffle)
    if not isinstance(target_column, str):
        raise TypeError(f"target_column must be a string type; got {target_column!r}.")
    _check_batching(batch_size, num_epochs)
    if not isinstance(x, pd.DataFrame):
        raise TypeError(f"x must be a pandas DataFrame; got {type(x).__name__}.")
    if len(x.columns) == 0:
        raise ValueError("x cannot be a DataFrame without columns; pass at least one feature.")
    if x.columns.has_duplicates:
        duplicated = sorted({str(c) for c in x.columns[x.columns.duplicated()]})
        raise ValueError(f"x has duplicate column names {duplicated}; rename them.")
    if y is not None:
        if not isinstance(y, (pd.Series, pd.DataFrame)):
            raise TypeError(f"y must be a pandas Series, DataFrame or None; got {type(y).__name__}.")
        if target_column in x:
            raise ValueError(
                f"Cannot use name {target_column} for target column: DataFrame already has a "
                f"column with that name: {list(x.columns)}. Pass another target_column."
            )
        if len(x.index) != len(y.index) or not np.array_equal(x.index, y.index):
            raise ValueError(
                f"Index for x and y are mismatched.\nIndex for x: {x.index}\n"
                f"Index for y: {y.index}\nAlign them, e.g. y = y.set_axis(x.index)."
            )
    features = {column: _pandas_column(x[column], f"x[{column!r}]") for column in x.columns}
    labels: Structure | None
    if y is None:
        labels = None
    elif isinstance(y, pd.DataFrame):
        labels = {column: _pandas_column(y[column], f"y[{column!r}]") for column in y.columns}
    else:
        labels = _pandas_column(y, "y")
    return _make_input_fn(features, labels, batch_size, num_epochs, shuffle)


# --------------------------------------------------------------------------------------------
# What an input_fn returned
# --------------------------------------------------------------------------------------------


def _is_features_like(value: Any) -> bool:
    return isinstance(value, (torch.Tensor, np.ndarray, Mapping))


class RepeatedBatch:
    """One ``(features, labels)`` batch (or features alone) yielded forever.

    TF's constant-tensor inputs: ``train`` runs until ``steps``/``max_steps``, ``evaluate`` until
    ``steps``, and ``predict`` never ends on its own (the Estimator warns; ``is_single_batch`` is
    how it tells).

    Example:
        >>> batches = iter(RepeatedBatch(({"x": torch.ones(2)}, torch.zeros(2))))
        >>> next(batches)[1].tolist(), next(batches)[1].tolist()
        ([0.0, 0.0], [0.0, 0.0])
    """

    is_single_batch = True

    def __init__(self, batch: Any) -> None:
        self.batch = batch

    def __iter__(self) -> Iterator[Any]:
        return itertools.repeat(self.batch)

    def __repr__(self) -> str:
        return f"RepeatedBatch({type(self.batch).__name__})"


def parse_input_fn_result(result: Any) -> Iterable[Any]:
    """Turns what an ``input_fn`` returned into an iterable of batches (TF's rule).

    * A tuple or list whose first element is a tensor, ndarray or dict is ONE batch
      ``(features, labels)`` and must have length 2; it is repeated forever (``RepeatedBatch``).
    * A tensor, ndarray or dict alone is one batch of features (labels ``None``), repeated forever.
    * Anything else iterable (a ``BatchIterator``, a generator, a list of ``(features, labels)``
      tuples, a ``DataLoader``) is the iterable of batches and is returned as it is; normalise each
      element with ``split_batch``.

    Raises:
        ValueError: a ``(features, labels)`` tuple of length other than 2.
        TypeError: ``None``, a string, or something not iterable.
    """
    if isinstance(result, (tuple, list)) and result and _is_features_like(result[0]):
        if len(result) != 2:
            raise ValueError(
                "input_fn should return (features, labels) as a len 2 tuple; got a "
                f"{type(result).__name__} of length {len(result)}."
            )
        return RepeatedBatch(tuple(result))
    if _is_features_like(result):
        return RepeatedBatch(result)
    if result is None or isinstance(result, (str, bytes)) or not isinstance(result, Iterable):
        raise TypeError(
            "input_fn must return an iterable of batches (e.g. a BatchIterator or a generator), "
            f"a (features, labels) tuple, or features; got {type(result).__name__}: {result!r:.200}."
        )
    return result


def split_batch(batch: Any) -> tuple[Any, Any]:
    """Splits one element of an input_fn's iterable into ``(features, labels)``.

    A tuple or list of length 2 is ``(features, labels)``; other lengths raise; anything else is
    features with labels ``None`` (TF's rule for dataset elements).

    Raises:
        ValueError: a tuple or list of length other than 2.
    """
    if isinstance(batch, (tuple, list)):
        if len(batch) != 2:
            raise ValueError(
                "input_fn should return (features, labels) as a len 2 tuple; a batch was a "
                f"{type(batch).__name__} of length {len(batch)}."
            )
        return batch[0], batch[1]
    return batch, None
