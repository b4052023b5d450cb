"""Importing a TensorFlow Estimator's model_dir as a run of the workbench (issue 29, section 3).

An import is a run with the action ``import_tf`` (``store.records.IMPORT_ACTION``); its
``checkpoint_path`` is the TF checkpoint it was imported from. It goes through the one submit path
(``execution.submit.submit_run``) in three steps:

1. ``source_checkpoint`` (in the calling process, the engine's reader only: no user code) finds the
   TF checkpoint of a model_dir, a checkpoint prefix or a SavedModel, and refuses anything else;
2. ``check_fit`` builds the run's model in a child process (``execution.compat``: the template
   runs there, never in the CLI or UI process) and compares its variables with the TF
   checkpoint's; a variable missing on either side or of another shape refuses the import before
   the run exists, naming the variables on both sides;
3. the runner (``execute_import``) copies TF's checkpoint files into the run's ``model/`` folder
   (the source is only read), records the dataset statistics the model is used with
   (``task_info.json``) and evaluates the model on the eval split, so the run has metrics to
   compare. Evaluate, predict and continued training then read ``model/`` as they read any run's.

Example:
    >>> is_optimizer_variable("training/Adagrad/dnn/logits/bias/accumulator")
    True
    >>> is_optimizer_variable("dnn/logits/bias")
    False
"""

from __future__ import annotations

import dataclasses
import glob
import json
import os
import re
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["IMPORT_FILE", "ImportFit", "check_fit", "copy_checkpoint", "describe_import", "execute_import",
           "is_optimizer_variable", "source_checkpoint"]

IMPORT_FILE = "imported.json"  # in the run folder: where the model came from

# Variables of a TF checkpoint that are not part of the model: the step, the optimizer's slots and
# hyper-parameters (TF 2: ``training/<Opt>/...``; TF 1: ``<var>/Adagrad``, ``beta1_power``, ...).
_OPTIMIZER_VARIABLE = re.compile(
    r"^(global_step|training/.*|.*/(Adagrad|Adam|Adam_1|Ftrl|Ftrl_1|RMSProp|RMSProp_1|Momentum)"
    r"|(.*/)?beta[12]_power)$")


def is_optimizer_variable(name: str) -> bool:
    """Whether a TF checkpoint variable is the step or optimizer state rather than a model weight."""
    return bool(_OPTIMIZER_VARIABLE.match(name))


def source_checkpoint(path: str | os.PathLike[str]) -> tuple[str, int]:
    """``(TF checkpoint prefix, global step)`` of a TF model_dir (its latest checkpoint), a
    checkpoint prefix or a SavedModel (or its ``variables/`` folder); read with the engine's
    reader only. Raises ``ValueError`` naming the path and what is wrong."""
    from estimator_engine import checkpoints
    from estimator_engine.tf_checkpoint import TFCheckpoint, is_tf_checkpoint

    where = os.fspath(path)
    if not os.path.exists(where) and not is_tf_checkpoint(where):
        raise ValueError(f"{where!r} does not exist. Give a TensorFlow Estimator's model_dir (holding its "
                         "'checkpoint' file), a checkpoint prefix such as model_dir/model.ckpt-1000, or an "
                         "exported SavedModel folder.")
    try:
        prefix = checkpoints.resolve_checkpoint(os.path.abspath(where))
    except Exception as exc:
        raise ValueError(f"{where!r} holds no checkpoint to import: {exc}") from None
    if not is_tf_checkpoint(prefix) or os.path.isfile(prefix):
        raise ValueError(f"{where!r} is not a TensorFlow checkpoint (its latest checkpoint {prefix!r} has no "
                         "'.index' file); import-tf reads checkpoints written by TensorFlow. A workbench run "
                         "is continued with `run --from RUN` instead.")
    try:
        reader = TFCheckpoint(prefix)
        shapes = reader.shapes()
        step = int(reader.read("global_step")) if "global_step" in shapes else 0
    except Exception as exc:
        raise ValueError(f"The TensorFlow checkpoint {prefix!r} cannot be read: {exc}") from None
    return prefix, step


@dataclasses.dataclass(frozen=True)
class ImportFit:
    """How a TF checkpoint's variables fit the model a template builds for a dataset.

    ``missing``: the model's variables the checkpoint lacks; ``unused``: model weights of the
    checkpoint the model has no variable for (optimizer state is left out); ``shape_mismatch``:
    ``name -> (TF shape, model shape)``; ``error``: the model could not be built.

    Example:
        >>> fit = ImportFit(missing=["dnn/logits/bias"], unused=[], shape_mismatch={})
        >>> fit.ok
        False
    """

    missing: list[str]
    unused: list[str]
    shape_mismatch: dict[str, tuple[list[int], list[int]]]
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and not self.missing and not self.unused and not self.shape_mismatch

    def refusal(self, source: str, template: str, dataset: str) -> str:
        """The one-paragraph reason an import is refused (variables named on both sides)."""
        if self.error:
            return (f"Could not build the {template!r} model for dataset {dataset!r} to check the TensorFlow "
                    f"checkpoint {source!r} against it: {self.error}")
        parts = []
        if self.shape_mismatch:
            parts.append("differ in shape (TensorFlow -> this model): " + ", ".join(
                f"{name} {list(tf)} -> {list(model)}" for name, (tf, model) in self.shape_mismatch.items()))
        if self.missing:
            parts.append("the model has, the TensorFlow checkpoint lacks: " + ", ".join(self.missing))
        if self.unused:
            parts.append("the TensorFlow checkpoint has, the model lacks: " + ", ".join(self.unused))
        return (f"The TensorFlow model {source!r} does not fit template {template!r} on dataset {dataset!r}; "
                f"variables that {'; '.join(parts)}. Choose the template, params (hidden_units, "
                "categorical_encoding, embedding_dim, ...) and dataset columns the TensorFlow model was "
                "trained with.")


def check_fit(run_spec: Mapping[str, Any], prefix: str, timeout: float = 120) -> ImportFit:
    """Builds the model of ``run_spec`` in a child process and compares its variables with the
    TF checkpoint ``prefix`` (``execution.compat.check_compatibility``)."""
    from estimator_workbench.execution.compat import check_compatibility

    report = check_compatibility({**dict(run_spec), "action": "train"}, prefix, timeout=timeout)
    if report.error:
        return ImportFit([], [], {}, error=report.error)
    unused = [name for name in report.unexpected if not is_optimizer_variable(name)]
    mismatch = {name: (list(tf), list(model)) for name, (tf, model) in report.shape_mismatch.items()}
    return ImportFit(list(report.missing), unused, mismatch)


def _checkpoint_files(prefix: str) -> list[str]:
    return [prefix + ".index", *sorted(glob.glob(glob.escape(prefix) + ".data-[0-9]*-of-[0-9]*"))]


def copy_checkpoint(prefix: str, step: int, model_dir: Path) -> str:
    """Copies the TF checkpoint ``prefix`` into ``model_dir`` as ``model.ckpt-<step>`` (a
    SavedModel's ``variables`` too: the step in the name is what resumed runs read) with a
    ``checkpoint`` state file naming it; returns the new prefix. The source is only read."""
    from estimator_engine import checkpoints

    model_dir.mkdir(parents=True, exist_ok=True)
    target = model_dir / f"model.ckpt-{step}"
    for path in _checkpoint_files(prefix):
        shutil.copyfile(path, str(target) + path[len(prefix):])
    (model_dir / "checkpoint").write_text(
        f'model_checkpoint_path: "{target.name}"\nall_model_checkpoint_paths: "{target.name}"\n', "utf-8")
    if checkpoints.latest_checkpoint(model_dir) != str(target):
        raise RuntimeError(f"The imported checkpoint {target} is not the latest of {model_dir}.")
    return str(target)


def execute_import(ctx: Any) -> None:
    """The runner's ``import_tf`` action: copies the TF checkpoint into the run's model_dir (once:
    a resumed import keeps its copy), saves the dataset statistics the model is used with, and
    evaluates it on the eval split (when there is one) so the run has metrics to compare."""
    from estimator_workbench.execution.build import build_estimator
    from estimator_workbench.execution.lineage import TASK_INFO_FILE

    source = ctx.spec.checkpoint_path or ""
    prefix, step = source_checkpoint(source)
    from estimator_engine import checkpoints

    if not ctx.model_dir.is_dir() or checkpoints.latest_checkpoint(ctx.model_dir) is None:
        copied = copy_checkpoint(prefix, step, ctx.model_dir)
        (ctx.run_dir / IMPORT_FILE).write_text(json.dumps(
            {"source": source, "checkpoint": prefix, "global_step": step, "copied_to": copied}, indent=1), "utf-8")
        print(f"estimator_workbench.execution.runner: imported TensorFlow checkpoint {prefix} (global step "
              f"{step}) into {copied}", flush=True)
    estimator, input_fns = build_estimator(ctx.spec.model_copy(update={"action": "evaluate"}), str(ctx.model_dir))
    info = getattr(input_fns, "info", None)
    if ctx.is_chief and info is not None:
        (ctx.run_dir / TASK_INFO_FILE).write_text(json.dumps(info, default=_json_default), "utf-8")
    evaluation = getattr(input_fns, "eval", None)
    if evaluation is not None and not ctx.stop_requested():
        results = estimator.evaluate(evaluation, steps=ctx.schedule.eval_steps, hooks=[ctx.make_hook()])
        ctx.write_eval(int(results.get("global_step", step)), results)


def describe_import(record: Any, run_dir: Path) -> str | None:
    """"Imported from TensorFlow: <checkpoint> (global step N)" for an ``import_tf`` run (the line
    its run page and ``runs`` show), else None.

    Example:
        >>> from types import SimpleNamespace
        >>> describe_import(SimpleNamespace(action="train"), Path("."))
        >>> describe_import(SimpleNamespace(action="import_tf", checkpoint_path="/m/model.ckpt-20"), Path("/none"))
        'Imported from TensorFlow: /m/model.ckpt-20'
    """
    from estimator_workbench.store.records import IMPORT_ACTION

    if getattr(record, "action", None) != IMPORT_ACTION:
        return None
    text = f"Imported from TensorFlow: {record.checkpoint_path}"
    try:
        step = json.loads((run_dir / IMPORT_FILE).read_text("utf-8"))["global_step"]
    except (OSError, ValueError, KeyError, TypeError):
        return text  # not copied yet (queued, or the import failed)
    return f"{text} (global step {step})"


def _json_default(value: Any) -> Any:
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"not JSON-serialisable: {value!r}")
