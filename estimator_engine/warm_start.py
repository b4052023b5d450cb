"""Warm start: initialise a new model's variables from another model's checkpoint (TF's §6 rules).

``WarmStartSettings`` keeps TF's fields and meaning; ``WarmStarter`` applies them one module at a
time, because the Estimator creates modules lazily (``get_module``) and warm-starts each one right
after it is built::

    starter = WarmStarter(WarmStartSettings("/runs/old_model", vars_to_warm_start="mlp/.*"))
    starter.apply("mlp", mlp_module)        # for each module, when it is created
    report = starter.finish()               # raises on unused var_name_to_* keys (typo guard)

Selection (``vars_to_warm_start``), matched with ``re.match`` (anchored at the start only):

* a str: a regex over the **trainable** parameters (``requires_grad``); ``'.*'`` (the default)
  selects every trainable parameter and no buffer (batch-norm statistics stay fresh);
* a list of str: regexes over **all** variables, parameters and persistent buffers;
* ``None``: only the variables named in ``var_name_to_vocab_info``.

``global_step`` is never warm-started (it is not a module variable): a warm-started model trains
from step 0. A selected variable missing from the source checkpoint, or of another shape, is an
error, as in TF. Optimizer state is never warm-started.

From TensorFlow: ``ckpt_to_initialize_from`` may be a TF model_dir, checkpoint prefix or SavedModel
(read without TensorFlow). Canned estimators use TF's names and layouts and need nothing more. A
custom ``model_fn`` of torch layers maps its names to TF's with ``var_name_to_prev_var_name``
(:func:`tf_variable_names` builds it from ``{submodule: TF scope}``), and the warm start converts
TF's layouts for torch layers (:func:`from_tf_layout`: dense ``[in, out]`` -> ``Linear.weight``
``[out, in]``, conv HWIO -> OIHW)::

    names = tf_variable_names("mlp", make_mlp(), {"0": "dense", "2": "dense_1"})
    WarmStartSettings("/tf_model_dir", var_name_to_prev_var_name=names)
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

import torch

from estimator_engine.checkpoints import (
    GLOBAL_STEP_NAME,
    _limited,
    _load,
    _module_targets,
    resolve_checkpoint,
    trainable_variable_names,
)

__all__ = [
    "VocabInfo",
    "WarmStartReport",
    "WarmStartSettings",
    "WarmStarter",
    "compare_variables",
    "from_tf_layout",
    "tf_variable_names",
    "warm_start_settings_from",
]

Vocab = Sequence[str] | str | os.PathLike


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_vocab(value: Any, argument: str) -> Any:
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, str):
        if not value:
            raise ValueError(f"`{argument}` must be a vocabulary file path or a list of tokens, "
                             "got ''.")
        return value
    if isinstance(value, (list, tuple)) and all(isinstance(t, str) for t in value):
        return tuple(value)
    raise ValueError(f"`{argument}` must be a vocabulary file path (one token per line) or a list "
                     f"of str tokens, got {value!r:.100}.")


def _checked_vocab(vocab: Vocab) -> str | tuple[str, ...]:
    """A vocabulary field after ``_check_vocab`` normalised it (a path str or a token tuple)."""
    return cast("str | tuple[str, ...]", vocab)


def _read_vocab(vocab: str | tuple[str, ...], size: int, argument: str) -> list[str]:
    """The first ``size`` tokens (all when ``size == -1``) of a token list or vocabulary file."""
    if isinstance(vocab, str):
        try:
            with open(vocab, encoding="utf-8") as handle:
                tokens = [line.rstrip("\r\n") for line in handle]
        except OSError as exc:
            raise ValueError(f"Cannot read the vocabulary file {vocab!r} given as `{argument}`: "
                             f"{exc}.") from exc
    else:
        tokens = list(vocab)
    if size == -1:
        return tokens
    if len(tokens) < size:
        raise ValueError(f"`{argument}` has {len(tokens)} tokens, fewer than the size {size} "
                         "given for it; fix the size or the vocabulary.")
    return tokens[:size]


@dataclasses.dataclass(frozen=True)
class VocabInfo:
    """How to remap a vocabulary-sized variable when warm-starting (TF's ``VocabInfo``).

    Rows (``axis=0``) or columns (``axis=1``) are matched by token: a token in both vocabularies
    gets its old row; new tokens and the ``num_oov_buckets`` OOV rows get ``backup_initializer``.

    Args:
        new_vocab: the current vocabulary: a list of tokens or a file path, one token per line.
        new_vocab_size: how many tokens of ``new_vocab`` the model uses (its first N).
        num_oov_buckets: OOV rows after the vocabulary rows in the current variable.
        old_vocab: the vocabulary the checkpoint's variable was trained with.
        old_vocab_size: how many tokens of ``old_vocab`` to use; -1 uses all.
        backup_initializer: ``None`` (zeros) or a callable ``(shape) -> tensor`` giving a tensor
            of the whole current variable's shape; its rows are used where no old row exists.
        axis: 0 (rows, e.g. embeddings) or 1 (columns, e.g. the output layer of a classifier).

    Example:
        >>> info = VocabInfo(new_vocab=["doctor", "consultant", "engineer"], new_vocab_size=3,
        ...                  num_oov_buckets=0, old_vocab=["doctor", "lawyer", "consultant"])
        >>> info.axis
        0
    """

    new_vocab: Vocab
    new_vocab_size: int
    num_oov_buckets: int
    old_vocab: Vocab
    old_vocab_size: int = -1
    backup_initializer: Callable[[tuple[int, ...]], Any] | None = None
    axis: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "new_vocab", _check_vocab(self.new_vocab, "new_vocab"))
        object.__setattr__(self, "old_vocab", _check_vocab(self.old_vocab, "old_vocab"))
        if not _is_int(self.new_vocab_size) or self.new_vocab_size <= 0:
            raise ValueError(f"`new_vocab_size` must be an int > 0, got {self.new_vocab_size!r}.")
        if not _is_int(self.num_oov_buckets) or self.num_oov_buckets < 0:
            raise ValueError(f"`num_oov_buckets` must be an int >= 0, got {self.num_oov_buckets!r}.")
        if not _is_int(self.old_vocab_size) or not (self.old_vocab_size == -1
                                                    or self.old_vocab_size > 0):
            raise ValueError("`old_vocab_size` must be -1 (the whole old vocabulary) or an int > 0, "
                             f"got {self.old_vocab_size!r}.")
        if self.backup_initializer is not None and not callable(self.backup_initializer):
            raise ValueError("`backup_initializer` must be None (zeros) or a callable (shape) -> "
                             f"tensor, got {self.backup_initializer!r}.")
        if self.axis not in (0, 1) or isinstance(self.axis, bool):
            raise ValueError(f"The only valid values for `axis` are 0 and 1, got {self.axis!r}.")

    def new_tokens(self) -> list[str]:
        """The first ``new_vocab_size`` tokens of the new vocabulary."""
        return _read_vocab(_checked_vocab(self.new_vocab), self.new_vocab_size, "new_vocab")

    def old_tokens(self) -> list[str]:
        """The first ``old_vocab_size`` tokens of the old vocabulary (all when -1)."""
        return _read_vocab(_checked_vocab(self.old_vocab), self.old_vocab_size, "old_vocab")


def _check_selection(value: Any) -> str | tuple[str, ...] | None:
    def compiled(pattern: str) -> str:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"`vars_to_warm_start` holds an invalid regex {pattern!r}: {exc}.") \
                from exc
        return pattern

    if value is None:
        return None
    if isinstance(value, str):
        return compiled(value)
    if isinstance(value, (list, tuple)):
        if not all(isinstance(item, str) for item in value):
            types = sorted({type(item).__name__ for item in value})
            raise ValueError(
                "If `vars_to_warm_start` is a list, it must be all `str` (regexes over all "
                f"variable names); given types are {types}: {value!r:.200}.")
        return tuple(compiled(item) for item in value)
    raise ValueError(
        "`vars_to_warm_start` must be a regex str (over trainable variables), a list of regex "
        f"str (over all variables) or None (only var_name_to_vocab_info), got {value!r:.200}.")


@dataclasses.dataclass(frozen=True)
class WarmStartSettings:
    """What to warm-start from where (TF's ``WarmStartSettings``; ``Estimator(warm_start_from=)``).

    Args:
        ckpt_to_initialize_from: a model_dir (its latest checkpoint is used) or a checkpoint file.
        vars_to_warm_start: a regex str over trainable parameters (default ``'.*'``), a list of
            regex str over all variables including buffers, or ``None`` (only the variables in
            ``var_name_to_vocab_info``). Matched with ``re.match``; ``global_step`` never is.
        var_name_to_vocab_info: ``{current variable name: VocabInfo}`` for vocabulary remapping.
        var_name_to_prev_var_name: ``{current variable name: its name in the checkpoint}``; only
            renames, does not select.

    Example:
        >>> settings = WarmStartSettings("/tmp/old_model", vars_to_warm_start="dnn/.*")
        >>> settings.var_name_to_prev_var_name
        {}
        >>> settings.replace(vars_to_warm_start=None).vars_to_warm_start is None
        True
    """

    ckpt_to_initialize_from: str
    vars_to_warm_start: str | Sequence[str] | None = ".*"
    var_name_to_vocab_info: Mapping[str, VocabInfo] | None = None
    var_name_to_prev_var_name: Mapping[str, str] | None = None

    def __post_init__(self) -> None:
        source = self.ckpt_to_initialize_from
        if isinstance(source, os.PathLike):
            source = os.fspath(source)
        if not source:
            raise ValueError("`ckpt_to_initialize_from` MUST be set in WarmStartSettings")
        if not isinstance(source, str):
            raise ValueError("`ckpt_to_initialize_from` must be a model_dir or checkpoint path "
                             f"(str or os.PathLike), got {source!r}.")
        object.__setattr__(self, "ckpt_to_initialize_from", source)
        object.__setattr__(self, "vars_to_warm_start", _check_selection(self.vars_to_warm_start))
        vocab = dict(self.var_name_to_vocab_info or {})
        for key, info in vocab.items():
            if not isinstance(key, str) or not isinstance(info, VocabInfo):
                raise ValueError("`var_name_to_vocab_info` must map variable names (str) to "
                                 f"VocabInfo, got {key!r}: {info!r:.100}.")
        prev = dict(self.var_name_to_prev_var_name or {})
        for key, old in prev.items():
            if not isinstance(key, str) or not isinstance(old, str) or not old:
                raise ValueError("`var_name_to_prev_var_name` must map variable names (str) to "
                                 f"their names in the checkpoint (str), got {key!r}: {old!r}.")
        object.__setattr__(self, "var_name_to_vocab_info", vocab)
        object.__setattr__(self, "var_name_to_prev_var_name", prev)

    def replace(self, **changes: Any) -> WarmStartSettings:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)


def warm_start_settings_from(value: Any) -> WarmStartSettings | None:
    """Normalises ``Estimator(warm_start_from=...)``: None, a path, or a ``WarmStartSettings``.

    A path (model_dir or checkpoint file) means "warm-start every trainable variable from it".
    """
    if value is None:
        return None
    if isinstance(value, WarmStartSettings):
        return value
    if isinstance(value, (str, os.PathLike)):
        return WarmStartSettings(ckpt_to_initialize_from=os.fspath(value))
    raise ValueError(f"warm_start_from must be a string or a WarmStartSettings, given: {value!r}")


@dataclasses.dataclass(frozen=True)
class WarmStartReport:
    """What a warm start did.

    Args:
        checkpoint_path: the source checkpoint file.
        source_global_step: the global step of the source checkpoint (not copied).
        warm_started: variables copied from the checkpoint, in the order applied.
        skipped: variables of the applied modules that the selection left out.
        renamed: ``{variable: name it was read from}`` for ``var_name_to_prev_var_name`` entries.
        vocab_remapped: variables copied through a ``VocabInfo``.

    Example:
        >>> WarmStartReport("/m/model.ckpt-5", 5, ("a/w",), (), {}, ()).warm_started
        ('a/w',)
    """

    checkpoint_path: str
    source_global_step: int
    warm_started: tuple[str, ...]
    skipped: tuple[str, ...]
    renamed: Mapping[str, str]
    vocab_remapped: tuple[str, ...]


def _remap_vocab(name: str, old: torch.Tensor, target: torch.Tensor, info: VocabInfo,
                 tokens: tuple[list[str], list[str]]) -> torch.Tensor | str:
    """The remapped value for ``target``, or a problem description."""
    new_tokens, old_tokens = tokens
    axis, shape = info.axis, tuple(target.shape)
    expected = info.new_vocab_size + info.num_oov_buckets
    if len(shape) <= axis or shape[axis] != expected:
        return (f"variable {name!r} has shape {list(shape)}, but its VocabInfo needs {expected} "
                f"(new_vocab_size {info.new_vocab_size} + num_oov_buckets "
                f"{info.num_oov_buckets}) along axis {axis}")
    other_old = list(old.shape[:axis]) + list(old.shape[axis + 1:])
    other_new = list(shape[:axis]) + list(shape[axis + 1:])
    if old.dim() != len(shape) or other_old != other_new or old.shape[axis] < len(old_tokens):
        return (f"Shape of variable {name!r} ({list(shape)}) cannot be remapped from the "
                f"checkpoint's tensor of shape {list(old.shape)} with {len(old_tokens)} old "
                f"vocabulary entries along axis {axis}")
    old_index: dict[str, int] = {}
    for index, token in enumerate(old_tokens):
        old_index.setdefault(token, index)
    rows = [old_index.get(token, -1) for token in new_tokens] + [-1] * info.num_oov_buckets
    mapping = torch.tensor(rows, dtype=torch.long)
    if info.backup_initializer is None:
        result = torch.zeros(shape, dtype=target.dtype)
    else:
        result = torch.as_tensor(info.backup_initializer(shape)).detach().to("cpu", target.dtype)
        if tuple(result.shape) != shape:
            return (f"backup_initializer of variable {name!r} returned shape "
                    f"{list(result.shape)}, expected {list(shape)}")
        result = result.clone()
    present = mapping >= 0
    moved = result.movedim(axis, 0)
    moved[present] = old.movedim(axis, 0)[mapping[present]].to(target.dtype)
    return moved.movedim(0, axis)


class WarmStarter:
    """Applies a ``WarmStartSettings`` module by module; the checkpoint is loaded once.

    Args:
        settings: a ``WarmStartSettings``, or a model_dir / checkpoint path (all trainables).

    Example:
        >>> import tempfile
        >>> from estimator_engine.checkpoints import create_checkpoint
        >>> src = tempfile.mkdtemp()
        >>> _ = create_checkpoint(src, {"lin/weight": [[2.0]], "lin/bias": [3.0]}, global_step=7)
        >>> starter = WarmStarter(WarmStartSettings(src))
        >>> lin = torch.nn.Linear(1, 1)
        >>> starter.apply("lin", lin)
        >>> lin.weight.item(), starter.finish().warm_started
        (2.0, ('lin/weight', 'lin/bias'))
    """

    def __init__(self, settings: WarmStartSettings | str | os.PathLike) -> None:
        resolved = warm_start_settings_from(settings)
        if resolved is None:
            raise ValueError("WarmStarter needs settings, got None.")
        self.settings = resolved
        self._checkpoint_path: str | None = None
        self._source: dict[str, Any] | None = None
        self._vocab_tokens: dict[str, tuple[list[str], list[str]]] = {}
        self._warm_started: dict[str, None] = {}
        self._skipped: dict[str, None] = {}
        self._renamed: dict[str, str] = {}
        self._remapped: dict[str, None] = {}
        self._seen: set[str] = set()

    @property
    def checkpoint_path(self) -> str:
        """The source checkpoint file (resolved from ``ckpt_to_initialize_from`` once)."""
        if self._checkpoint_path is None:
            self._checkpoint_path = resolve_checkpoint(self.settings.ckpt_to_initialize_from)
        return self._checkpoint_path

    def _source_checkpoint(self) -> dict[str, Any]:
        if self._source is None:
            self._source = _load(self.checkpoint_path, mmap=True)
        return self._source

    def _selected(self, name: str, trainable: set[str]) -> bool:
        selection = self.settings.vars_to_warm_start
        if selection is None:
            return name in (self.settings.var_name_to_vocab_info or {})
        if isinstance(selection, str):
            return name in trainable and re.match(selection, name) is not None
        return any(re.match(pattern, name) is not None for pattern in selection)

    def apply(self, module_name: str, module: torch.nn.Module) -> None:
        """Copies the selected variables of one module from the source checkpoint, in place.

        Raises:
            ValueError: a selected variable is missing from the checkpoint or has another shape
                (all such variables of the module are named; nothing is copied then).
            CheckpointError / CheckpointNotFoundError: the source checkpoint cannot be read.
        """
        targets = _module_targets(module_name, module)
        trainable = trainable_variable_names(module_name, module)
        self._seen.update(targets)
        selected = [name for name in targets if self._selected(name, trainable)]
        for name in targets:
            if name not in selected:
                self._skipped[name] = None
        if not selected:
            return
        source = self._source_checkpoint()
        variables = source["variables"]
        # TF's layouts (dense kernel [in, out], conv HWIO) become torch's for torch layers.
        from_tf = bool(source.get("tf_checkpoint"))
        # Both are dicts after WarmStartSettings.__post_init__; `or {}` only tells the type checker.
        prev_names = self.settings.var_name_to_prev_var_name or {}
        vocab_infos = self.settings.var_name_to_vocab_info or {}
        plan: list[tuple[str, torch.Tensor, torch.Tensor]] = []
        problems: list[str] = []
        for name in selected:
            target = targets[name]
            source_name = prev_names.get(name, name)
            if source_name not in variables:
                close = difflib.get_close_matches(source_name, list(variables), n=3, cutoff=0.5)
                hint = f"; close names in the checkpoint: {close}" if close else ""
                problems.append(f"Tensor {source_name!r} (for variable {name!r}) is not found in "
                                f"checkpoint {self.checkpoint_path}{hint}")
                continue
            old = variables[source_name]
            if from_tf:
                owner, parameter = _owner(module, name[len(module_name) + 1:])
                converted = from_tf_layout(old, owner, parameter)
                if list(converted.shape) != list(old.shape):
                    source_name = (f"{source_name} (TF layout {list(old.shape)}, as "
                                   f"{type(owner).__name__}.{parameter})")
                old = converted
            info = vocab_infos.get(name)
            if info is not None:
                if name not in self._vocab_tokens:
                    self._vocab_tokens[name] = (info.new_tokens(), info.old_tokens())
                value = _remap_vocab(name, old, target, info, self._vocab_tokens[name])
                if isinstance(value, str):
                    problems.append(value)
                    continue
            elif list(old.shape) != list(target.shape):
                problems.append(f"Shape of variable {name!r} ({list(target.shape)}) doesn't match "
                                f"with shape of tensor {source_name!r} ({list(old.shape)}) from "
                                f"checkpoint {self.checkpoint_path}")
                continue
            else:
                value = old
            plan.append((name, target, value))
        if problems:
            raise ValueError(
                f"Warm-starting module {module_name!r} failed: " + "; ".join(problems) + ". "
                "Leave such variables out with `vars_to_warm_start`, map them to their names in "
                "the checkpoint with `var_name_to_prev_var_name`, or give vocabulary-sized ones a "
                "`var_name_to_vocab_info` entry.")
        with torch.no_grad():
            for name, target, value in plan:
                target.copy_(value)
                self._warm_started[name] = None
                self._skipped.pop(name, None)
                if name in prev_names:
                    self._renamed[name] = prev_names[name]
                if name in vocab_infos:
                    self._remapped[name] = None

    def finish(self) -> WarmStartReport:
        """Checks that every ``var_name_to_*`` key was used and returns the report.

        Raises:
            ValueError: 'You provided the following variables in var_name_to_prev_var_name that
                were not used: [...]' (resp. ``var_name_to_vocab_info``), a guard against typos.
        """
        viable = sorted(self._seen)
        for argument, keys, used in (
                ("var_name_to_prev_var_name", self.settings.var_name_to_prev_var_name or {},
                 self._renamed),
                ("var_name_to_vocab_info", self.settings.var_name_to_vocab_info or {},
                 self._remapped)):
            unused = sorted(set(keys) - set(used))
            if unused:
                raise ValueError(
                    f"You provided the following variables in {argument} that were not used: "
                    f"{unused}. Perhaps you misspelled them, or `vars_to_warm_start` does not "
                    f"select them? Here is the list of viable variable names: {_limited(viable)}")
        step = int(self._source["global_step"]) if self._source is not None else -1
        checkpoint = self._checkpoint_path or ""
        self._source = None  # drop the cached tensors (memory maps)
        return WarmStartReport(
            checkpoint_path=checkpoint,
            source_global_step=step,
            warm_started=tuple(self._warm_started),
            skipped=tuple(self._skipped),
            renamed=dict(self._renamed),
            vocab_remapped=tuple(self._remapped),
        )


# ---------------------------------------------------------------------------------------------
# TF / Keras layouts and names for torch layers (a custom model_fn warm-started from TF)

_CONVOLUTIONS = (torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d)
_TRANSPOSED = (torch.nn.ConvTranspose1d, torch.nn.ConvTranspose2d, torch.nn.ConvTranspose3d)
_NORMS = (torch.nn.modules.batchnorm._NormBase, torch.nn.LayerNorm, torch.nn.GroupNorm)
# torch parameter/buffer name -> Keras / tf.compat.v1.layers variable name, per layer kind.
_KERAS_NAMES: list[tuple[tuple[type, ...], dict[str, str]]] = [
    ((torch.nn.Linear, *_CONVOLUTIONS, *_TRANSPOSED), {"weight": "kernel", "bias": "bias"}),
    (_NORMS, {"weight": "gamma", "bias": "beta", "running_mean": "moving_mean",
              "running_var": "moving_variance"}),
    ((torch.nn.Embedding,), {"weight": "embeddings"}),
]


def from_tf_layout(value: torch.Tensor, layer: torch.nn.Module, parameter: str) -> torch.Tensor:
    """A TF variable's value in the layout torch's ``layer`` keeps its ``parameter`` in.

    The rules (TF / Keras layout -> torch layout):

    * ``nn.Linear.weight``: dense ``kernel`` ``[in, out]`` -> ``[out, in]`` (transposed);
    * ``nn.Conv{1,2,3}d.weight``: ``[*spatial, in, out]`` (HWIO) -> ``[out, in, *spatial]`` (OIHW);
    * ``nn.ConvTranspose{1,2,3}d.weight``: ``[*spatial, out, in]`` -> ``[in, out, *spatial]``;
    * everything else (biases, batch-norm ``gamma``/``beta``/``moving_*``, embeddings, the engine's
      own TF-layout ``Dense``) is kept as it is.

    Warm-starting from a TF checkpoint applies these rules by itself; call this to load TF values
    by hand (e.g. from ``ee.checkpoints.load_variable``).

    Example:
        >>> kernel = torch.arange(6.0).reshape(3, 2)  # TF dense kernel [in=3, out=2]
        >>> from_tf_layout(kernel, torch.nn.Linear(3, 2), "weight").shape
        torch.Size([2, 3])
    """
    tensor = torch.as_tensor(value)
    if parameter != "weight":
        return tensor
    if isinstance(layer, torch.nn.Linear) and tensor.dim() == 2:
        return tensor.t().contiguous()
    if isinstance(layer, (*_CONVOLUTIONS, *_TRANSPOSED)) and tensor.dim() >= 3:
        spatial = list(range(tensor.dim() - 2))
        return tensor.permute(tensor.dim() - 1, tensor.dim() - 2, *spatial).contiguous()
    return tensor


def _owner(module: torch.nn.Module, path: str) -> tuple[torch.nn.Module, str]:
    """(the submodule holding ``path``'s variable, the variable's own name); path uses '/'."""
    *parents, leaf = path.split("/")
    owner = module
    for part in parents:
        child = owner._modules.get(part)
        if child is None:
            return module, path
        owner = child
    return owner, leaf


def tf_variable_names(module_name: str, module: torch.nn.Module,
                      scopes: Mapping[str, str]) -> dict[str, str]:
    """``var_name_to_prev_var_name`` for torch layers warm-started from Keras/``tf.layers`` ones.

    Args:
        module_name: the name given to ``ee.get_module``.
        module: the module (e.g. an ``nn.Sequential``).
        scopes: ``{submodule path ('.' or '/' separated, '' for the module itself): TF scope}``,
            e.g. ``{"0": "dense", "2": "dense_1"}`` for TF's ``dense/kernel``, ``dense_1/kernel``.

    Returns:
        ``{engine variable: TF variable}``: ``weight`` -> ``kernel`` (Linear, Conv), ``gamma``
        (norms) or ``embeddings`` (Embedding); ``bias`` -> ``bias`` or ``beta``;
        ``running_mean``/``running_var`` -> ``moving_mean``/``moving_variance``. Layouts are
        converted by the warm start itself (:func:`from_tf_layout`).

    Raises:
        ValueError: a path in ``scopes`` names no submodule (the submodules are listed).

    Example:
        >>> net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
        >>> tf_variable_names("mlp", net, {"0": "hidden", "2": "logits"})["mlp/0/weight"]
        'hidden/kernel'
    """
    names: dict[str, str] = {}
    available = dict(module.named_modules())
    for path, scope in scopes.items():
        key = path.replace("/", ".")
        layer = available.get(key)
        if layer is None:
            raise ValueError(f"tf_variable_names: {path!r} is not a submodule of {module_name!r}; "
                             f"its submodules are {sorted(k for k in available if k)}.")
        rename = next((table for kinds, table in _KERAS_NAMES if isinstance(layer, kinds)), {})
        for local, value in layer.state_dict(keep_vars=True).items():
            if "." in local or not isinstance(value, torch.Tensor) or local == "num_batches_tracked":
                continue
            prefix = f"{module_name}/{key.replace('.', '/')}/" if key else f"{module_name}/"
            names[prefix + local] = f"{scope}/{rename.get(local, local)}"
    return names


def compare_variables(checkpoint: str | os.PathLike,
                      variables: Mapping[str, Sequence[int] | torch.Size | torch.Tensor]
                      ) -> dict[str, Any]:
    """Compares a model's variables (name -> shape) with a checkpoint's (a file or model_dir).

    ``global_step`` takes part only when ``variables`` names it.

    Returns:
        ``{'matching': [names], 'missing': [in the model only], 'unexpected': [in the checkpoint
        only], 'shape_mismatch': {name: (checkpoint shape, model shape)}}``, names sorted, shapes
        as tuples.

    Example:
        >>> import tempfile
        >>> from estimator_engine.checkpoints import create_checkpoint
        >>> d = tempfile.mkdtemp()
        >>> _ = create_checkpoint(d, {"lin/weight": [[1.0, 2.0]], "lin/bias": [0.0]}, 1)
        >>> compare_variables(d, {"lin/weight": (1, 3), "lin/scale": (1,), "lin/bias": (1,)})
        {'matching': ['lin/bias'], 'missing': ['lin/scale'], 'unexpected': [], 'shape_mismatch': {'lin/weight': ((1, 2), (1, 3))}}
    """
    data = _load(resolve_checkpoint(checkpoint), mmap=True)
    ckpt = {name: tuple(value.shape) for name, value in data["variables"].items()}
    if GLOBAL_STEP_NAME in variables:
        ckpt[GLOBAL_STEP_NAME] = ()
    model = {name: tuple(shape.shape if isinstance(shape, torch.Tensor) else shape)
             for name, shape in variables.items()}
    matching = sorted(n for n in model if n in ckpt and ckpt[n] == model[n])
    mismatch = {n: (ckpt[n], model[n]) for n in sorted(model) if n in ckpt and ckpt[n] != model[n]}
    return {
        "matching": matching,
        "missing": sorted(n for n in model if n not in ckpt),
        "unexpected": sorted(n for n in ckpt if n not in model),
        "shape_mismatch": mismatch,
    }
