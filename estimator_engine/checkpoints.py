"""Checkpoint files and the ``checkpoint`` state file of a model_dir (TF's Saver, on ``torch.save``).

Layout of a model_dir (TF's, so TF users find their way)::

    <model_dir>/model.ckpt-0        one file per checkpoint: torch.save of a dict (below)
    <model_dir>/model.ckpt-5
    <model_dir>/checkpoint          the state file, TF's text format, paths relative to model_dir:
        model_checkpoint_path: "model.ckpt-5"
        all_model_checkpoint_paths: "model.ckpt-0"
        all_model_checkpoint_paths: "model.ckpt-5"

A checkpoint file holds::

    {"format": "estimator_engine.checkpoint", "format_version": 1,
     "global_step": int,
     "variables": {"<module name>/<parameter or persistent buffer path, '/' for '.'>": Tensor},
     "optimizers": {name: optimizer.state_dict()},
     "rng": {...}, "input": dict | None, "hooks": {key: state}}

The "prefix" TF returns from ``latest_checkpoint`` is the checkpoint file's path here.

What this module does better than TF's Saver (reference §7, §10.6):

* every write is atomic (temp file in the same directory, flush + fsync, ``os.replace``), so a crash
  leaves the previous checkpoint and state file intact; the temp file's name carries the writer's
  pid, and the next save removes the ones whose writer died (a process killed mid-write);
* pruning (``keep_checkpoint_max``) runs over the state file, so checkpoints written by an earlier
  process are pruned too, and all surplus checkpoints go at once;
* files are read with ``torch.load(weights_only=True)``: a file crafted to run code is refused, and a
  damaged file is reported by name together with the next older checkpoint to fall back to;
* a restore that does not fit the model fails with every missing, unexpected and mis-shaped
  variable named, before anything in the model is changed.

TensorFlow's own checkpoints (``<prefix>.index`` + ``<prefix>.data-*``, read by
``estimator_engine.tf_checkpoint`` without TensorFlow) are read wherever a checkpoint is: a TF
model_dir's ``checkpoint`` file lists them, ``list_variables``/``load_variable`` show them as
``tf.train.list_variables``/``load_variable`` do, and ``load_checkpoint`` turns one into the dict
above (its numeric variables, TF's ``global_step``), so a canned estimator restores from it;
the optimizer slots of TF's canned defaults (Adagrad, Ftrl, Adam) fill the torch optimizers' state
(:func:`restore_tf_optimizer_state`). A SavedModel directory (or its ``variables/`` folder) stands for the checkpoint
it holds. New checkpoints are never written in TF's format, and pruning never deletes TF's files.
"""

from __future__ import annotations

import ast
import contextlib
import difflib
import io
import logging
import math
import os
import pickle
import re
import tempfile
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import IO, Any, NamedTuple, TypeGuard

import numpy as np
import torch

from estimator_engine import gfile
from estimator_engine.errors import CheckpointError, CheckpointNotFoundError
from estimator_engine.tf_checkpoint import TFCheckpoint, is_tf_checkpoint, saved_model_prefix

__all__ = [
    "CHECKPOINT_FORMAT",
    "CHECKPOINT_FORMAT_VERSION",
    "DEFAULT_BASENAME",
    "GLOBAL_STEP_NAME",
    "STATE_FILENAME",
    "all_checkpoints",
    "assign_module_variables",
    "create_checkpoint",
    "latest_checkpoint",
    "list_checkpoint_files",
    "list_variables",
    "load_checkpoint",
    "load_variable",
    "module_variables",
    "read_global_step",
    "rebuild_checkpoint_state",
    "remove_stale_temp_files",
    "resolve_checkpoint",
    "restore_tf_optimizer_state",
    "save_checkpoint",
    "trainable_variable_names",
]

logger = logging.getLogger(__name__)

CHECKPOINT_FORMAT = "estimator_engine.checkpoint"
CHECKPOINT_FORMAT_VERSION = 1
STATE_FILENAME = "checkpoint"
DEFAULT_BASENAME = "model.ckpt"
GLOBAL_STEP_NAME = "global_step"

_STATE_PATH_KEYS = ("model_checkpoint_path", "all_model_checkpoint_paths")
_STATE_FLOAT_KEYS = ("all_model_checkpoint_timestamps", "last_preserved_timestamp")
_STATE_LINE = re.compile(r"^([A-Za-z_]+)\s*:\s*(.+?)\s*$")
_QUOTED = re.compile(r'^"(?:[^"\\]|\\.)*"$')

# Types torch.load(weights_only=True) accepts (checked on torch 2.13); anything else in a state
# dict would save fine and then refuse to load, so save_checkpoint rejects it up front.
_SAFE_SCALARS = frozenset({str, bytes, bytearray, int, float, complex, bool, type(None),
                           torch.Size, torch.dtype, torch.device})


# ---------------------------------------------------------------------------------------------
# Small helpers


def _fspath(value: Any, argument: str) -> str:
    if not isinstance(value, (str, os.PathLike)):
        raise TypeError(f"`{argument}` must be a path (str or os.PathLike), got {value!r}.")
    path = gfile.normalize(value)  # a file:// URL is its local path
    if not path:
        raise ValueError(f"`{argument}` must be a non-empty path, got {value!r}.")
    return path


def _is_int(value: Any) -> TypeGuard[int | np.integer]:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _same_dir(path: str, directory: str) -> bool:
    if gfile.is_remote(path) or gfile.is_remote(directory):
        return os.path.dirname(path).rstrip("/") == directory.rstrip("/")
    return os.path.normcase(os.path.abspath(os.path.dirname(path))) == os.path.normcase(
        os.path.abspath(directory))


def _exists(path: str) -> bool:
    """Whether a checkpoint exists at ``path``: an engine file or a TF checkpoint prefix."""
    if gfile.is_remote(path):
        return gfile.isfile(path)  # TF's own checkpoints are read from local disk only
    return os.path.isfile(path) or is_tf_checkpoint(path)


def _fsync_dir(directory: str) -> None:
    """Makes a rename durable (POSIX); a no-op where directories cannot be opened (Windows)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


_TEMP_SUFFIX = ".tmp"
_TEMP_NAME = re.compile(r"^\..+\.(\d+)\.[^.]+\.tmp$")  # .<file>.<pid>.<random>.tmp


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's live process
    return True


def remove_stale_temp_files(directory: str | os.PathLike[str]) -> list[str]:
    """Deletes the temp files of atomic writes in ``directory`` whose writer process is gone
    (killed mid-write); returns their paths. Temp files of live writers are left alone.

    Example:
        >>> remove_stale_temp_files("/nonexistent")
        []
    """
    removed: list[str] = []
    try:
        names = os.listdir(directory)
    except OSError:
        return removed
    for name in names:
        match = _TEMP_NAME.match(name) if name.endswith(_TEMP_SUFFIX) else None
        if match is None or _pid_alive(int(match.group(1))):
            continue
        path = os.path.join(directory, name)
        with contextlib.suppress(OSError):
            os.remove(path)
            removed.append(path)
    if removed:
        logger.info("Removed %d temp file(s) left by a writer that died mid-write: %s", len(removed), removed)
    return removed


def _atomic_write(path: str, write: Callable[[IO[bytes]], object]) -> None:
    """Writes ``path`` through a temp file in the same directory: flush, fsync, ``os.replace``.

    A crash at any point leaves either the old file or the new one, never a torn file; the temp
    file is removed when the write fails inside this process. On an object store the file is
    written locally and uploaded in one go: the object appears only once its upload is complete
    (a failed or killed upload leaves the previous object, or none).
    """
    if gfile.is_remote(path):
        with tempfile.TemporaryDirectory(prefix="estimator-upload-") as staging:
            local = os.path.join(staging, os.path.basename(path))
            with open(local, "wb") as handle:
                write(handle)
            gfile.put_file(local, path)
        return
    directory = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.{os.getpid()}.", suffix=_TEMP_SUFFIX,
                               dir=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise
    _fsync_dir(directory)


def _check_loadable(value: Any, where: str, safe_types: tuple[type, ...]) -> None:
    """Raises TypeError naming the first value ``torch.load(weights_only=True)`` would refuse.

    Types are checked exactly: subclasses such as ``numpy.float64`` (a float), a str Enum or a
    namedtuple pickle as their own class and would be refused at load time.
    """
    kind = type(value)
    if kind in (dict, OrderedDict):
        for key, item in value.items():
            _check_loadable(key, f"{where} key {key!r}", safe_types)
            _check_loadable(item, f"{where}[{key!r}]", safe_types)
        return
    if kind in (list, tuple, set):
        for index, item in enumerate(value):
            _check_loadable(item, f"{where}[{index}]", safe_types)
        return
    if kind in _SAFE_SCALARS or isinstance(value, torch.Tensor) or kind in safe_types:
        return
    raise TypeError(
        f"Cannot checkpoint {where}: a {kind.__module__}.{kind.__qualname__} ({value!r:.80}) "
        "would not load back with torch.load(weights_only=True). Store plain Python values "
        "(int, float, str, bool, None, list, tuple, dict) or torch tensors instead: e.g. float(x) "
        "for a numpy scalar, torch.from_numpy(a) for a numpy array, str(x) for an Enum.")


# ---------------------------------------------------------------------------------------------
# The state file


class _State(NamedTuple):
    newest: str | None  # raw path as written in the file
    paths: list[str]  # raw paths, oldest first (newest included)
    timestamps: list[float] | None  # parallel to paths, or None when absent/inconsistent
    last_preserved: float | None


def _state_path(checkpoint_dir: str) -> str:
    return gfile.join(checkpoint_dir, STATE_FILENAME)


def _state_error(state_file: str, problem: str) -> CheckpointError:
    directory = os.path.dirname(state_file)
    return CheckpointError(
        f"Cannot read the checkpoint state file {state_file!r}: {problem}. Delete it (the "
        "checkpoint files themselves are not affected) and, to keep using them, rebuild it with "
        f"estimator_engine.checkpoints.rebuild_checkpoint_state({directory!r}); the checkpoint "
        f"files are listed by list_checkpoint_files({directory!r}).")


def _read_state(checkpoint_dir: str) -> _State | None:
    """Parses ``<dir>/checkpoint``; ``None`` when there is no state file."""
    state_file = _state_path(checkpoint_dir)
    try:
        if gfile.is_remote(state_file):
            text = gfile.read_bytes(state_file).decode("utf-8")
        else:
            with open(state_file, encoding="utf-8") as handle:
                text = handle.read()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except gfile.StorageError:  # the store refused (credentials, network): not a damaged file
        raise
    except (OSError, UnicodeDecodeError) as exc:
        raise _state_error(state_file, f"{type(exc).__name__}: {exc}") from exc
    newest: str | None = None
    paths: list[str] = []
    timestamps: list[float] = []
    last_preserved: float | None = None
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = _STATE_LINE.match(line)
        if match is None or match.group(1) not in _STATE_PATH_KEYS + _STATE_FLOAT_KEYS:
            raise _state_error(state_file, f"line {number} is not understood: {raw!r}")
        key, value = match.groups()
        if key in _STATE_PATH_KEYS:
            if not _QUOTED.match(value):
                raise _state_error(state_file, f"line {number} needs a quoted path: {raw!r}")
            try:
                path = ast.literal_eval(value)
            except (ValueError, SyntaxError) as exc:
                raise _state_error(state_file, f"line {number} has a bad path: {raw!r}") from exc
            if key == "model_checkpoint_path":
                newest = path
            else:
                paths.append(path)
        else:
            try:
                number_value = float(value)
            except ValueError as exc:
                raise _state_error(state_file, f"line {number} needs a number: {raw!r}") from exc
            if key == "last_preserved_timestamp":
                last_preserved = number_value
            else:
                timestamps.append(number_value)
    if newest and newest not in paths:  # TF: the newest is always part of the list
        paths.append(newest)
        if timestamps:
            timestamps.append(math.nan)
    if newest is None and paths:
        newest = paths[-1]
    return _State(newest, paths, timestamps if len(timestamps) == len(paths) else None,
                  last_preserved)


def _quote(path: str) -> str:
    escaped = path.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def _write_state(checkpoint_dir: str, entries: list[tuple[str, float]],
                 last_preserved: float | None) -> None:
    """Writes the state file atomically; ``entries`` = (stored path, save time), oldest first."""
    lines = []
    if entries:
        lines.append(f"model_checkpoint_path: {_quote(entries[-1][0])}")
    lines += [f"all_model_checkpoint_paths: {_quote(path)}" for path, _ in entries]
    lines += [f"all_model_checkpoint_timestamps: {stamp!r}" for _, stamp in entries]
    if last_preserved is not None:
        lines.append(f"last_preserved_timestamp: {last_preserved!r}")
    data = ("\n".join(lines) + "\n").encode("utf-8")
    _atomic_write(_state_path(checkpoint_dir), lambda handle: handle.write(data))


def _resolve_entry(checkpoint_dir: str, raw: str) -> str:
    """Absolute path of a state-file entry; relative entries are relative to the directory."""
    if gfile.is_remote(checkpoint_dir):
        if gfile.is_remote(raw):
            return raw
        # A local absolute path in a store's state file: the model_dir was copied there.
        return gfile.join(checkpoint_dir, os.path.basename(raw) if os.path.isabs(raw) else raw)
    if os.path.isabs(raw):
        if not _exists(raw):
            moved = os.path.join(checkpoint_dir, os.path.basename(raw))
            if _exists(moved):  # the model_dir was moved or copied
                return os.path.abspath(moved)
        return os.path.abspath(raw)
    return os.path.abspath(os.path.join(checkpoint_dir, raw))


def _stored_entry(checkpoint_dir: str, path: str) -> str:
    """The form written to the state file: relative inside the directory, absolute otherwise."""
    return os.path.basename(path) if _same_dir(path, checkpoint_dir) else gfile.abspath(path)


def _entry_time(path: str, recorded: float | None) -> float:
    if recorded is not None and math.isfinite(recorded):
        return recorded
    if gfile.is_remote(path):
        try:
            return gfile.getmtime(path)
        except OSError:
            return time.time()
    try:
        return os.path.getmtime(path if os.path.isfile(path) else path + ".index")
    except OSError:
        return time.time()


def _existing_entries(checkpoint_dir: str) -> tuple[list[tuple[str, float]], float | None]:
    """(absolute path, save time) of every listed checkpoint, oldest first, and the anchor."""
    state = _read_state(checkpoint_dir)
    if state is None:
        return [], None
    stamps: Sequence[float | None] = state.timestamps or [None] * len(state.paths)
    entries: list[tuple[str, float]] = []
    seen: set[str] = set()
    for raw, stamp in zip(state.paths, stamps):
        path = _resolve_entry(checkpoint_dir, raw)
        if path in seen:  # keep the newest listing of a duplicated entry
            entries = [entry for entry in entries if entry[0] != path]
        seen.add(path)
        entries.append((path, _entry_time(path, stamp)))
    return entries, state.last_preserved


# ---------------------------------------------------------------------------------------------
# Saving and pruning


def save_checkpoint(
    model_dir: str | os.PathLike[str],
    state: Mapping[str, Any],
    global_step: int,
    keep_checkpoint_max: int | None = 5,
    keep_checkpoint_every_n_hours: float | None = None,
    basename: str = DEFAULT_BASENAME,
) -> str:
    """Writes ``<model_dir>/<basename>-<global_step>`` atomically, lists it, prunes old ones.

    Args:
        model_dir: directory of the checkpoints (created when missing).
        state: the checkpoint's content: ``variables`` (name -> tensor; not ``global_step``),
            ``optimizers``, ``rng``, ``input``, ``hooks`` and any other key. Missing keys are filled
            with empty values; ``format``, ``format_version`` and ``global_step`` are set here.
        global_step: the step the checkpoint is written at (its file name ends in it).
        keep_checkpoint_max: how many of the newest checkpoints listed in the state file to keep;
            ``None`` or 0 keeps all. Older listed checkpoints are deleted, all at once, including
            ones written by an earlier process.
        keep_checkpoint_every_n_hours: additionally keep (on disk, no longer listed in the state
            file, as TF does) the first checkpoint saved at least N hours after the last one kept
            this way. Save times come from the state file's ``all_model_checkpoint_timestamps``
            (file mtimes for entries without one); the starting point is the first save into an
            empty directory, stored as ``last_preserved_timestamp``.
        basename: the file-name prefix (TF's ``model.ckpt``).

    Returns:
        The absolute path of the checkpoint file (TF's checkpoint "prefix").

    Raises:
        TypeError: ``state`` holds a value ``torch.load(weights_only=True)`` would refuse.
        ValueError: a bad argument.

    Re-saving the same step replaces the file and moves its entry to the newest position.
    """
    directory = _fspath(model_dir, "model_dir")
    if not _is_int(global_step) or global_step < 0:
        raise ValueError(f"`global_step` must be an int >= 0, got {global_step!r}.")
    if keep_checkpoint_max is not None and (not _is_int(keep_checkpoint_max)
                                            or keep_checkpoint_max < 0):
        raise ValueError("`keep_checkpoint_max` must be None or an int >= 0 (None or 0 keeps "
                         f"all), got {keep_checkpoint_max!r}.")
    if keep_checkpoint_every_n_hours is not None and (
            isinstance(keep_checkpoint_every_n_hours, bool)
            or not isinstance(keep_checkpoint_every_n_hours, (int, float))
            or not keep_checkpoint_every_n_hours > 0):
        raise ValueError("`keep_checkpoint_every_n_hours` must be None or a number > 0, got "
                         f"{keep_checkpoint_every_n_hours!r}.")
    if not isinstance(basename, str) or not basename or os.sep in basename:
        raise ValueError(f"`basename` must be a file-name prefix like 'model.ckpt', got {basename!r}.")
    if not isinstance(state, Mapping):
        raise TypeError(f"`state` must be a dict of named state, got {type(state).__name__}.")
    variables = state.get("variables", {})
    if not isinstance(variables, Mapping):
        raise TypeError("`state['variables']` must map variable names to tensors, got "
                        f"{type(variables).__name__}.")
    if GLOBAL_STEP_NAME in variables:
        raise ValueError("`state['variables']` must not hold 'global_step'; pass the step as the "
                         "`global_step` argument (it is stored under the checkpoint's own key).")
    for name, value in variables.items():
        if not isinstance(name, str) or not isinstance(value, torch.Tensor):
            raise TypeError(f"`state['variables']` must map str names to tensors; entry {name!r} "
                            f"is a {type(value).__name__}.")

    payload: dict[str, Any] = {"variables": {}, "optimizers": {}, "rng": {}, "input": None,
                               "hooks": {}}
    payload.update(state)
    payload["format"] = CHECKPOINT_FORMAT
    payload["format_version"] = CHECKPOINT_FORMAT_VERSION
    payload["global_step"] = int(global_step)
    safe_types = tuple(t for t in torch.serialization.get_safe_globals() if isinstance(t, type))
    _check_loadable(payload, "state", safe_types)

    entries, last_preserved = _existing_entries(directory)  # a bad state file fails before writing
    gfile.makedirs(directory)
    if not gfile.is_remote(directory):  # a store has no temp files: uploads are all-or-nothing
        remove_stale_temp_files(directory)
    path = gfile.abspath(gfile.join(directory, f"{basename}-{int(global_step)}"))
    _atomic_write(path, lambda handle: torch.save(payload, handle))

    now = time.time()
    if last_preserved is None:
        last_preserved = min([stamp for _, stamp in entries], default=now)
    entries = [entry for entry in entries if entry[0] != path] + [(path, now)]
    doomed: list[str] = []
    if keep_checkpoint_max:
        surplus, entries = entries[:-keep_checkpoint_max], entries[-keep_checkpoint_max:]
        for surplus_path, stamp in surplus:
            if (keep_checkpoint_every_n_hours is not None
                    and stamp - keep_checkpoint_every_n_hours * 3600.0 >= last_preserved):
                last_preserved = stamp  # kept on disk, dropped from the state file (TF)
            else:
                doomed.append(surplus_path)
    _write_state(directory, [(_stored_entry(directory, p), stamp) for p, stamp in entries],
                 last_preserved if keep_checkpoint_every_n_hours is not None else None)
    # Deleting after the state file no longer lists them: a crash here leaves orphans, never a
    # state file that lists missing files.
    for old in doomed:
        if old == path:
            continue
        if not _same_dir(old, directory):
            logger.info("Not deleting %s: it lies outside the model_dir %s.", old, directory)
            continue
        if not gfile.is_remote(old) and not os.path.isfile(old) and is_tf_checkpoint(old):
            # TensorFlow's files (a model_dir imported from TF) are never the engine's to delete.
            logger.info("Not deleting TensorFlow checkpoint %s (no longer listed in %s).", old,
                        _state_path(directory))
            continue
        with contextlib.suppress(FileNotFoundError):
            gfile.remove(old)
    return path


def rebuild_checkpoint_state(checkpoint_dir: str | os.PathLike[str],
                             basename: str = DEFAULT_BASENAME) -> str | None:
    """Rewrites the state file from the checkpoint files found on disk (oldest step first).

    Use it after deleting a damaged state file. Returns the newest checkpoint, or ``None`` (and
    writes nothing) when the directory holds no checkpoint file.
    """
    directory = _fspath(checkpoint_dir, "checkpoint_dir")
    files = list_checkpoint_files(directory, basename=basename)
    if not files:
        return None
    _write_state(directory, [(os.path.basename(p), gfile.getmtime(p)) for p in files], None)
    return files[-1]


# ---------------------------------------------------------------------------------------------
# Finding checkpoints


def latest_checkpoint(checkpoint_dir: str | os.PathLike[str]) -> str | None:
    """Absolute path of the newest checkpoint listed in ``<checkpoint_dir>/checkpoint``.

    Returns ``None`` when there is no state file (or it lists nothing). When the newest listed file
    is missing, the newest listed file that exists is returned and a warning is logged.

    Raises:
        CheckpointError: the state file cannot be parsed (the message says how to fix it).
    """
    directory = _fspath(checkpoint_dir, "checkpoint_dir")
    state = _read_state(directory)
    if state is None or not state.paths:
        return None
    candidates = [_resolve_entry(directory, raw) for raw in state.paths]
    newest = _resolve_entry(directory, state.newest or state.paths[-1])
    ordered = [newest] + [c for c in reversed(candidates) if c != newest]
    for candidate in ordered:
        if _exists(candidate):
            if candidate != newest:
                logger.warning("The newest checkpoint listed in %s, %s, is missing; using %s.",
                               _state_path(directory), newest, candidate)
            return candidate
    logger.warning("None of the checkpoints listed in %s exist (newest: %s).",
                   _state_path(directory), newest)
    return None


def all_checkpoints(checkpoint_dir: str | os.PathLike[str]) -> list[str]:
    """Absolute paths of the checkpoints listed in the state file, oldest first ([] without one)."""
    directory = _fspath(checkpoint_dir, "checkpoint_dir")
    state = _read_state(directory)
    if state is None:
        return []
    result: list[str] = []
    for raw in state.paths:
        path = _resolve_entry(directory, raw)
        if path in result:
            result.remove(path)
        result.append(path)
    return result


def list_checkpoint_files(checkpoint_dir: str | os.PathLike[str],
                          basename: str = DEFAULT_BASENAME) -> list[str]:
    """Absolute paths of the files ``<basename>-<int>`` in the directory, by step (temp files ignored)."""
    directory = _fspath(checkpoint_dir, "checkpoint_dir")
    pattern = re.compile(rf"^{re.escape(basename)}-(\d+)$")
    try:
        names = gfile.listdir(directory)
    except (FileNotFoundError, NotADirectoryError):
        return []
    found = []
    remote = gfile.is_remote(directory)
    for name in names:
        match = pattern.match(name)
        full = gfile.join(directory, name)
        if match and (remote or os.path.isfile(full)):  # a store lists objects only
            found.append((int(match.group(1)), gfile.abspath(full)))
    return [path for _, path in sorted(found)]


def resolve_checkpoint(path: str | os.PathLike[str]) -> str:
    """A directory -> its latest checkpoint; a checkpoint file -> its absolute path.

    Raises:
        CheckpointNotFoundError: the directory holds no checkpoint, or the file does not exist.
    """
    target = _fspath(path, "checkpoint")
    if gfile.is_remote(target):
        return _resolve_remote(target)
    if os.path.isdir(target):
        latest = latest_checkpoint(target)
        if latest is None:
            saved_model = saved_model_prefix(target)
            if saved_model is not None:  # a TF SavedModel dir or its variables/ folder
                return os.path.abspath(saved_model)
            raise CheckpointNotFoundError(
                f"Could not find trained model in model_dir: {target}. Train first, or pass a "
                "checkpoint file path.")
        return latest
    tf_file = re.match(r"^(.*)\.(?:index|data-\d{5}-of-\d{5})$", target)
    if tf_file and not os.path.isfile(tf_file.group(1)) and is_tf_checkpoint(tf_file.group(1)):
        return os.path.abspath(tf_file.group(1))  # one of a TF checkpoint's files: its prefix
    if _exists(target):
        return os.path.abspath(target)
    raise CheckpointNotFoundError(
        f"Checkpoint {target!r} does not exist: pass a model_dir holding a 'checkpoint' state "
        "file, the path of a checkpoint file such as '<model_dir>/model.ckpt-100', a TF "
        "checkpoint prefix (the part before '.index') or a SavedModel directory.")


def _resolve_remote(target: str) -> str:
    """resolve_checkpoint for a URL: a model_dir (its ``checkpoint`` object) or a checkpoint file."""
    latest = latest_checkpoint(target)
    if latest is not None:
        return latest
    if gfile.isfile(target) and os.path.basename(target) != STATE_FILENAME:
        return target
    raise CheckpointNotFoundError(
        f"Could not find a checkpoint at {target}: it is neither a model_dir holding a "
        "'checkpoint' state object nor a checkpoint object such as '<model_dir>/model.ckpt-100'. "
        "Train first, or check the URL.")


# ---------------------------------------------------------------------------------------------
# Loading


def _next_older(path: str) -> str | None:
    match = re.match(r"^(.*)-(\d+)$", os.path.basename(path))
    if match is None:
        return None
    base, step = match.group(1), int(match.group(2))
    older = [p for p in list_checkpoint_files(os.path.dirname(path), basename=base)
             if int(p.rsplit("-", 1)[1]) < step]
    return older[-1] if older else None


def _invalid(path: str, problem: str) -> CheckpointError:
    older = _next_older(path)
    fallback = (f" The next older checkpoint is {older}: pass it as checkpoint_path, or delete "
                "the damaged file (and its line in the 'checkpoint' state file) to resume from it."
                if older else " There is no older checkpoint in the same directory.")
    return CheckpointError(
        f"Checkpoint file {path} is not a valid estimator_engine checkpoint: {problem}.{fallback}")


def _load(path: str, map_location: Any = "cpu", mmap: bool = False) -> dict[str, Any]:
    source: str | io.BytesIO = path
    if gfile.is_remote(path):
        # The object is read whole into memory and loaded from there, without pickle as ever.
        try:
            source = io.BytesIO(gfile.read_bytes(path))
        except FileNotFoundError as exc:
            raise CheckpointNotFoundError(f"Checkpoint {path} does not exist.") from exc
        mmap = False
    elif not os.path.isfile(path) and is_tf_checkpoint(path):
        return _load_tf(path)
    if _is_tf_v1(source):
        raise CheckpointError(
            f"Checkpoint file {path} is a TensorFlow V1 checkpoint (the single-file TensorSlice "
            "format of Saver(write_version=SaverDef.V1)); only TF's V2 format (<prefix>.index + "
            "<prefix>.data-*) is read. Re-save it as V2 with TensorFlow: "
            "tf.compat.v1.train.Saver().save(session, prefix) after restoring it.")
    try:
        data = torch.load(source, map_location=map_location, weights_only=True, mmap=mmap)
    except pickle.UnpicklingError as exc:
        # Never relay torch's advice (load with weights_only=False / add safe globals): for a
        # crafted file that advice is the exploit.
        found = re.search(r"unsupported global:? (?:GLOBAL )?([\w.]+)", str(exc), re.IGNORECASE)
        what = f" (Unsupported global: {found.group(1)})" if found else ""
        raise _invalid(path, "the safe loader refused it: it holds pickled objects other than "
                             f"tensors and plain values{what}, as a file crafted to run code does. "
                             "Do not load it by other means; use a checkpoint from a trusted source"
                       ) from exc
    except Exception as exc:  # any failure to unpickle means "not a checkpoint we can trust"
        first_line = (str(exc).strip().splitlines() or [""])[0][:300]
        raise _invalid(path, f"{type(exc).__name__}: {first_line}") from exc
    if not isinstance(data, dict) or data.get("format") != CHECKPOINT_FORMAT:
        raise _invalid(path, "it does not carry the format marker "
                             f"{CHECKPOINT_FORMAT!r} (was it written by torch.save directly?)")
    version = data.get("format_version")
    if not _is_int(version) or version > CHECKPOINT_FORMAT_VERSION:
        raise _invalid(path, f"format_version {version!r} is newer than this engine reads "
                             f"({CHECKPOINT_FORMAT_VERSION}); upgrade estimator_engine")
    if not _is_int(data.get("global_step")) or not isinstance(data.get("variables"), dict):
        raise _invalid(path, "it lacks an int 'global_step' or a 'variables' dict")
    return data


def _is_tf_v1(path: str | io.BytesIO) -> bool:
    """A TF V1 checkpoint: one SSTable file (it ends in the table magic), not a torch zip."""
    if isinstance(path, io.BytesIO):
        data = path.getbuffer()
        return len(data) >= 48 and bytes(data[-8:]) == bytes.fromhex("57fb808b247547db")
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            if handle.tell() < 48:
                return False
            handle.seek(-8, os.SEEK_END)
            return handle.read(8) == bytes.fromhex("57fb808b247547db")
    except OSError:
        return False


class _TFVariables(dict):
    """A TF checkpoint's variables, also found under the engine's name of a shared embedding.

    TF 2's ``shared_embeddings`` keep their table as a top-level variable named after the
    collection (``idx_last_idx_shared_embedding``); the engine keeps it, as TF 1 did, in the
    ``DenseFeatures`` that uses it (``.../input_layer/idx_last_idx_shared_embedding/
    embedding_weights``). A lookup of the latter finds the former.
    """

    _SUFFIX = "/embedding_weights"

    def _alias(self, key: object) -> str | None:
        if not isinstance(key, str) or not key.endswith(self._SUFFIX):
            return None
        collection = key[:-len(self._SUFFIX)].rsplit("/", 1)[-1]
        return collection if dict.__contains__(self, collection) else None

    def __contains__(self, key: object) -> bool:
        return dict.__contains__(self, key) or self._alias(key) is not None

    def __missing__(self, key: str) -> torch.Tensor:
        alias = self._alias(key)
        if alias is None:
            raise KeyError(key)
        return dict.__getitem__(self, alias)

    def get(self, key: str, default: Any = None) -> Any:
        return self[key] if key in self else default


def _tf_variables(reader: TFCheckpoint) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """The numeric variables of a TF checkpoint as tensors (strings and unsigned ints left out),
    and apart from them TF 1's optimizer slots (``<var>/Adagrad``, ``<var>/Adam_1``, ...)."""
    variables: dict[str, torch.Tensor] = _TFVariables()
    slots: dict[str, torch.Tensor] = {}
    names = set(reader.shapes())
    for name in reader.shapes():
        if name == GLOBAL_STEP_NAME or reader.dtype_name(name) not in _TF_TORCH_DTYPES:
            continue
        if any(name[:at] in names for at in _slashes(name)):
            # Named under another variable: a TF 1 optimizer slot (<var>/Adagrad, <var>/Adam_1,
            # <var>/t_0/Adagrad of a partitioned one), not a model variable.
            if name.rsplit("/", 1)[-1] in _TF1_SLOT_NAMES:
                slots[name] = torch.from_numpy(reader.read(name))
            continue
        variables[name] = torch.from_numpy(reader.read(name))
    return variables, slots


def _slashes(name: str) -> list[int]:
    return [index for index, char in enumerate(name) if char == "/"]


# TF dtypes a module variable can have (bfloat16 arrives as float32: numpy has no bfloat16).
_TF_TORCH_DTYPES = frozenset({"float16", "bfloat16", "float32", "float64", "int8", "int16",
                              "int32", "int64", "uint8", "bool", "complex64", "complex128"})


def _load_tf(prefix: str) -> dict[str, Any]:
    """A TF checkpoint as the engine's checkpoint dict: variables and TF's global_step."""
    reader = TFCheckpoint(prefix)
    step = int(reader.read(GLOBAL_STEP_NAME)) if GLOBAL_STEP_NAME in reader else 0
    variables, slots = _tf_variables(reader)
    return {"format": CHECKPOINT_FORMAT, "format_version": CHECKPOINT_FORMAT_VERSION,
            "global_step": step, "variables": variables, "optimizers": {},
            "rng": {}, "input": None, "hooks": {}, "tf_checkpoint": prefix, "tf1_slots": slots}


# torch optimizer class name -> (TF 2.15's slot scope, {torch state key: TF slot name}); the
# canned estimators' optimizers, which TF saves as training/<scope>/<variable>/<slot>.
_TF_SLOTS: dict[str, tuple[str, dict[str, str]]] = {
    "Adagrad": ("Adagrad", {"sum": "accumulator"}),
    "Ftrl": ("Ftrl", {"accumulator": "accumulator", "linear": "linear"}),
    "TFAdam": ("Adam", {"exp_avg": "m", "exp_avg_sq": "v"}),
    "Adam": ("Adam", {"exp_avg": "m", "exp_avg_sq": "v"}),
}


# The same optimizers' state as TF 1's tf.compat.v1.train optimizers save it: <variable>/<slot>;
# Adam's step count is in the beta1_power accumulator (beta1 ** (steps + 1)).
_TF1_SLOTS: dict[str, dict[str, str]] = {
    "Adagrad": {"sum": "Adagrad"},
    "Ftrl": {"accumulator": "Ftrl", "linear": "Ftrl_1"},
    "TFAdam": {"exp_avg": "Adam", "exp_avg_sq": "Adam_1"},
    "Adam": {"exp_avg": "Adam", "exp_avg_sq": "Adam_1"},
}
_TF1_SLOT_NAMES = frozenset(slot for slots in _TF1_SLOTS.values() for slot in slots.values())


def _tf1_adam_steps(checkpoint: Mapping[str, Any], beta1: float, name: str) -> float | None:
    """Steps TF 1's Adam took, from the ``beta1_power`` whose scope shares most with ``name``
    (TF 1's canned DNN keeps it as ``dnn/head/beta1_power``): TF starts it at beta1 and
    multiplies it by beta1 after each step."""
    parts = name.split("/")

    def shared(key: str) -> int:
        scope = key.split("/")[:-1]
        return next((i for i, (a, b) in enumerate(zip(scope, parts)) if a != b), min(len(scope), len(parts)))

    powers = sorted((key for key in checkpoint["variables"] if key.rsplit("/", 1)[-1] == "beta1_power"),
                    key=lambda key: (-shared(key), key))
    if not powers or not 0 < beta1 < 1:
        return None
    power = float(checkpoint["variables"][powers[0]])
    return float(round(math.log(power) / math.log(beta1))) - 1 if 0 < power < 1 else None


_PARTITION = re.compile(r"(?:t|part)_\d+")


def _tf1_slot(slots: Mapping[str, torch.Tensor], name: str, slot: str) -> torch.Tensor | None:
    """``<name>/<slot>``, or the slot of the one partition TF 1's canned estimators give their
    variables (``<name>/t_0/<slot>``, ``<name>/part_0/<slot>``); ``None`` for several partitions."""
    found = slots.get(f"{name}/{slot}")
    if found is not None:
        return found
    prefix, suffix = f"{name}/", f"/{slot}"
    parts = [key for key in slots if key.startswith(prefix) and key.endswith(suffix)
             and _PARTITION.fullmatch(key[len(prefix):-len(suffix)])]
    return slots[parts[0]] if len(parts) == 1 else None


def restore_tf_optimizer_state(optimizer: torch.optim.Optimizer,
                               parameter_names: Mapping[int, str],
                               checkpoint: Mapping[str, Any]) -> list[str]:
    """Fills ``optimizer``'s state from a TF checkpoint's slots; returns the variables it filled.

    TF 2.15's canned estimators save optimizer state as ``training/<Opt>/<variable>/<slot>``
    (Adagrad ``accumulator``; Ftrl ``accumulator``, ``linear``; Adam ``m``, ``v``), and Adam's
    bias correction counts from ``global_step``. TF 1's (``tf.compat.v1.estimator.*`` with
    ``tf.compat.v1.train`` optimizers) save ``<variable>/Adagrad``; ``<variable>/Ftrl`` and
    ``Ftrl_1``; ``<variable>/Adam`` and ``Adam_1``, Adam counting its steps in ``beta1_power``
    (``checkpoint['tf1_slots']``). ``parameter_names`` maps ``id(parameter)`` to
    its variable name. Parameters without all their slots (or of an optimizer kind not listed
    here) keep a fresh state.

    Example:
        >>> restore_tf_optimizer_state(torch.optim.SGD([torch.nn.Parameter(torch.ones(1))]),
        ...                            {}, {"variables": {}, "global_step": 0})
        []
    """
    kind = _TF_SLOTS.get(type(optimizer).__name__)
    if kind is None:
        return []
    scope, slots = kind
    variables = checkpoint["variables"]
    tf1_slots = checkpoint.get("tf1_slots") or {}
    step = float(checkpoint.get("global_step", 0))
    restored = []
    for group in optimizer.param_groups:
        for param in group["params"]:
            name = parameter_names.get(id(param))
            if name is None:
                continue
            values = {key: variables.get(f"training/{scope}/{name}/{slot}")
                      for key, slot in slots.items()}
            steps = step
            if any(v is None for v in values.values()):  # TF 1's layout
                values = {key: _tf1_slot(tf1_slots, name, slot)
                          for key, slot in _TF1_SLOTS[type(optimizer).__name__].items()}
                if scope == "Adam" and all(v is not None for v in values.values()):
                    counted = _tf1_adam_steps(checkpoint, group["betas"][0], name)
                    steps = step if counted is None else counted
            if any(v is None or tuple(v.shape) != tuple(param.shape) for v in values.values()):
                continue
            state = optimizer.state[param]
            for key, value in values.items():
                state[key] = value.to(device=param.device, dtype=param.dtype).clone()
            if scope != "Ftrl":  # torch's Adagrad and Adam count steps per parameter
                state["step"] = torch.tensor(steps)
            restored.append(name)
    return restored


def load_checkpoint(path: str | os.PathLike[str], map_location: Any = "cpu",
                    mmap: bool = False) -> dict[str, Any]:
    """Loads a checkpoint (a file, or a directory's latest) with ``torch.load(weights_only=True)``.

    Args:
        path: a checkpoint file or a model_dir.
        map_location: passed to ``torch.load`` (CPU by default).
        mmap: memory-map the tensors instead of reading them (cheap for partial reads).

    Raises:
        CheckpointNotFoundError: no checkpoint at ``path``.
        CheckpointError: the file is not a valid checkpoint (damaged, foreign, or crafted to run
            code); the message names the next older checkpoint of the directory, if any.
    """
    return _load(resolve_checkpoint(path), map_location=map_location, mmap=mmap)


def read_global_step(model_dir: str | os.PathLike[str]) -> int:
    """The global step of the latest checkpoint in ``model_dir``; 0 on any failure (TF's rule)."""
    try:
        latest = latest_checkpoint(model_dir)
        if latest is None:
            return 0
        if not gfile.is_remote(latest) and not os.path.isfile(latest) and is_tf_checkpoint(latest):
            return int(TFCheckpoint(latest).read(GLOBAL_STEP_NAME))  # not the whole model
        return int(_load(latest, mmap=True)["global_step"])
    except Exception:  # TF: any failure to read counts as step 0
        logger.debug("Could not read the global step of %r; using 0.", model_dir, exc_info=True)
        return 0


def list_variables(checkpoint: str | os.PathLike[str]) -> list[tuple[str, list[int]]]:
    """(name, shape) of every variable of a checkpoint, sorted by name (``tf.train.list_variables``).

    ``checkpoint`` is a model_dir (its latest checkpoint), an engine checkpoint file, a TF
    checkpoint prefix, or a TF SavedModel directory (or its ``variables/`` folder). ``global_step``
    is included with shape ``[]``, as in TF; a TF checkpoint lists everything it holds (optimizer
    slots, strings) as ``tf.train.list_variables`` does.

    Example:
        >>> list_variables("/tf_model_dir")  # doctest: +SKIP
        [('dnn/hiddenlayer_0/bias', [8]), ('dnn/hiddenlayer_0/kernel', [4, 8]), ...]
    """
    path = resolve_checkpoint(checkpoint)
    if not gfile.is_remote(path) and not os.path.isfile(path) and is_tf_checkpoint(path):
        return sorted(TFCheckpoint(path).shapes().items())
    data = _load(path, mmap=True)
    pairs = [(name, list(value.shape)) for name, value in data["variables"].items()]
    pairs.append((GLOBAL_STEP_NAME, []))
    return sorted(pairs)


def _to_numpy(value: torch.Tensor) -> np.ndarray:
    tensor = value.detach().cpu()
    if tensor.dtype in (torch.bfloat16,):
        tensor = tensor.float()
    return tensor.numpy().copy()


def load_variable(checkpoint: str | os.PathLike[str], name: str) -> np.ndarray:
    """The value of one variable of a checkpoint as a numpy array (``tf.train.load_variable``).

    ``checkpoint`` is any of what :func:`list_variables` takes. From a TF checkpoint, strings come
    back as an object array of ``bytes``, bfloat16 as float32, and a partitioned variable
    (``part_0``, ``part_1``, ... in TF's graph) as the full tensor.

    Raises:
        ValueError: no variable of that name (close names are listed).
    """
    path = resolve_checkpoint(checkpoint)
    if not gfile.is_remote(path) and not os.path.isfile(path) and is_tf_checkpoint(path):
        reader = TFCheckpoint(path)
        if name not in reader:
            _raise_unknown(name, list(reader.shapes()), path)
        return reader.read(name)
    data = _load(path, mmap=True)
    if name == GLOBAL_STEP_NAME:
        return np.array(data["global_step"], dtype=np.int64)
    variables = data["variables"]
    if name not in variables:
        _raise_unknown(name, [*variables, GLOBAL_STEP_NAME], path)
    return _to_numpy(variables[name])


def _raise_unknown(name: str, names: list[str], path: str) -> None:
    close = difflib.get_close_matches(str(name), names, n=5, cutoff=0.5)
    hint = f" Close names: {close}." if close else f" It holds: {sorted(names)[:20]}."
    raise ValueError(f"Variable {name!r} not found in checkpoint {path}.{hint}")


def _as_tensor(name: str, value: Any) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().clone()
    try:
        array = np.asarray(value)
    except Exception as exc:
        raise TypeError(f"Variable {name!r}: cannot turn {value!r:.80} into an array.") from exc
    if array.dtype.kind == "f":
        array = array.astype(np.float32)
    elif array.dtype.kind in "iu":
        array = array.astype(np.int64)
    elif array.dtype.kind != "b":
        raise TypeError(f"Variable {name!r} must hold numbers, got dtype {array.dtype} "
                        f"({value!r:.80}).")
    return torch.from_numpy(np.ascontiguousarray(array))


def create_checkpoint(model_dir: str | os.PathLike[str], variables: Mapping[str, Any],
                      global_step: int) -> str:
    """Writes a checkpoint holding ``variables`` (name -> array-like) at ``global_step``.

    Floats become float32 tensors, ints int64; tensors keep their dtype. Other checkpoints in the
    directory are kept. Returns the checkpoint path.

    Example:
        >>> import tempfile
        >>> d = tempfile.mkdtemp()
        >>> path = create_checkpoint(d, {"linear/weight": [[2.0]], "linear/bias": [3.0]}, 10)
        >>> list_variables(path)
        [('global_step', []), ('linear/bias', [1]), ('linear/weight', [1, 1])]
    """
    if not isinstance(variables, Mapping):
        raise TypeError(f"`variables` must map names to array-likes, got {type(variables).__name__}.")
    tensors: dict[str, torch.Tensor] = {}
    for name, value in variables.items():
        if not isinstance(name, str) or not name:
            raise ValueError(f"Variable names must be non-empty strings, got {name!r}.")
        if name == GLOBAL_STEP_NAME:
            raise ValueError("Pass the step as `global_step`, not as a variable named "
                             "'global_step'.")
        tensors[name] = _as_tensor(name, value)
    return save_checkpoint(model_dir, {"variables": tensors}, global_step, keep_checkpoint_max=None)


# ---------------------------------------------------------------------------------------------
# Modules <-> flat variable dicts


def _unwrap(module: torch.nn.Module) -> torch.nn.Module:
    """The user's module inside DDP / DataParallel / torch.compile wrappers (names stay stable)."""
    while True:
        inner = getattr(module, "_orig_mod", None)  # torch.compile
        if isinstance(inner, torch.nn.Module):
            module = inner
            continue
        if isinstance(module, (torch.nn.parallel.DistributedDataParallel,
                               torch.nn.DataParallel)):
            module = module.module
            continue
        return module


def _check_module(name: Any, module: Any) -> torch.nn.Module:
    if not isinstance(name, str) or not name:
        raise ValueError(f"Module name must be a non-empty string, got {name!r}.")
    if not isinstance(module, torch.nn.Module):
        raise TypeError(f"Module {name!r} must be a torch.nn.Module, got {type(module).__name__}.")
    return _unwrap(module)


def module_variables(name: str, module: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Parameters and persistent buffers of ``module`` as ``{'<name>/<path with />': tensor}``.

    The tensors are the module's own (detached views sharing storage, no copy).

    Example:
        >>> sorted(module_variables("linear", torch.nn.Linear(2, 1)))
        ['linear/bias', 'linear/weight']
    """
    module = _check_module(name, module)
    return {f"{name}/{key.replace('.', '/')}": value.detach()
            for key, value in module.state_dict(keep_vars=True).items()
            if isinstance(value, torch.Tensor)}


def trainable_variable_names(name: str, module: torch.nn.Module) -> set[str]:
    """Names (as in :func:`module_variables`) of the parameters with ``requires_grad``."""
    module = _check_module(name, module)
    return {f"{name}/{key.replace('.', '/')}"
            for key, param in module.named_parameters(remove_duplicate=False)
            if param.requires_grad}


def _module_targets(name: str, module: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Like module_variables, but the live tensors to copy into (parameters, buffers)."""
    module = _check_module(name, module)
    return {f"{name}/{key.replace('.', '/')}": value
            for key, value in module.state_dict(keep_vars=True).items()
            if isinstance(value, torch.Tensor)}


def _shape(value: Any) -> list[int]:
    return list(getattr(value, "shape", ()))


def _limited(names: Iterable[str], limit: int = 20) -> str:
    names = sorted(names)
    shown = ", ".join(repr(n) for n in names[:limit])
    return f"[{shown}{', ...' if len(names) > limit else ''}] ({len(names)})"


def assign_module_variables(name: str, module: torch.nn.Module,
                            variables: Mapping[str, torch.Tensor],
                            checkpoint_path: str | None = None) -> None:
    """Restores ``module`` strictly from a flat variables dict (a checkpoint's ``variables``).

    Values are copied in place under ``torch.no_grad()``, so parameter identity (and with it any
    optimizer holding them) is kept. Everything is checked before anything is copied.

    Raises:
        CheckpointError: variables of the module missing from ``variables``, variables under the
            module's prefix that the module does not have, or shape mismatches — all of them named.
    """
    targets = _module_targets(name, module)
    where = f"the checkpoint {checkpoint_path}" if checkpoint_path else "the checkpoint"
    problems = []
    missing = [key for key in targets if key not in variables]
    if missing:
        problems.append(f"variables of the model missing from {where}: {_limited(missing)}")
    prefix = f"{name}/"
    unexpected = [key for key in variables if key.startswith(prefix) and key not in targets]
    if unexpected:
        problems.append(f"variables in {where} that module {name!r} does not have: "
                        f"{_limited(unexpected)}")
    for key, target in targets.items():
        if key in variables and _shape(variables[key]) != list(target.shape):
            problems.append(f"variable {key!r} has shape {_shape(variables[key])} in {where} but "
                            f"{list(target.shape)} in the model")
    if problems:
        raise CheckpointError(
            "Restoring from checkpoint failed: " + "; ".join(problems) + ". The model built by "
            "model_fn does not match the checkpoint (a mismatch between the current graph and the "
            "checkpoint, as TF says): use a new model_dir, restore the model_fn that wrote the "
            "checkpoint, or warm-start the variables that still fit with "
            "WarmStartSettings(ckpt_to_initialize_from=..., vars_to_warm_start=...).")
    with torch.no_grad():
        for key, target in targets.items():
            target.copy_(variables[key])
