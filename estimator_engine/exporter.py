"""Exporters: what ``train_and_evaluate`` does with a model after each evaluation (TF's ``exporter.py``).

An ``Exporter`` is called after every evaluation with the evaluated checkpoint and its metrics and
decides whether to export: ``LatestExporter`` always, ``FinalExporter`` only at the end of training,
``BestExporter`` when the metrics beat the best seen so far (also across restarts: it reads past
results from the eval directory). Exports go to ``<model_dir>/export/<exporter name>/<timestamp>/``;
``exports_to_keep`` deletes all but the newest N folders whose names are exactly 10 digits.

An exporter that raises inside ``train_and_evaluate`` stops training, as in TF, but the evaluation
it was called for is not lost: it is already in the eval summaries, it is logged, and the raised
``ExporterError`` names the exporter and carries the result (``eval_result``, ``global_step``).
"""

from __future__ import annotations

import glob
import logging
import os
from collections.abc import Callable, Mapping
from typing import Any

from estimator_engine import gfile
from estimator_engine._fn_args import fn_args
from estimator_engine.errors import EstimatorError
from estimator_engine.summary import read_eval_metrics

__all__ = ["BestExporter", "Exporter", "ExporterError", "FinalExporter", "LatestExporter", "call_exporter"]

_log = logging.getLogger("estimator_engine")


class Exporter:
    """Base class: a named policy that exports a model after an evaluation.

    Subclasses implement ``name`` and ``export``.

    Example:
        >>> class Nothing(Exporter):
        ...     name = 'nothing'
        ...     def export(self, estimator, export_path, checkpoint_path, eval_result, is_the_final_export):
        ...         return None
        >>> Nothing().name
        'nothing'
    """

    @property
    def name(self) -> str:
        """Directory name of this exporter's exports under ``<model_dir>/export``."""
        raise NotImplementedError

    def export(self, estimator: Any, export_path: str, checkpoint_path: str | None,
               eval_result: Mapping[str, Any] | None, is_the_final_export: bool) -> str | None:
        """Exports (or not) the model of ``checkpoint_path``; returns the export dir or ``None``."""
        raise NotImplementedError


class ExporterError(EstimatorError, RuntimeError):
    """An exporter failed after an evaluation; the evaluation's result travels with the error.

    Attributes:
        exporter_name: the failing exporter's ``name``.
        eval_result: the metrics of the evaluation it was exporting (also in the eval summaries).
        global_step: the evaluated global step.

    Example:
        >>> error = ExporterError('latest', {'loss': 0.5, 'global_step': 10})
        >>> error.exporter_name, error.eval_result['loss']
        ('latest', 0.5)
    """

    def __init__(self, exporter_name: str, eval_result: Mapping[str, Any] | None, detail: str = "") -> None:
        self.exporter_name = exporter_name
        self.detail = detail
        self.eval_result = dict(eval_result) if eval_result is not None else None
        self.global_step = (eval_result or {}).get("global_step")
        super().__init__(
            f"Exporter {exporter_name!r} failed after the evaluation at global step {self.global_step}"
            f"{': ' + detail if detail else ''}. The evaluation result is kept (written to the eval "
            f"summaries and in this error's eval_result): {self.eval_result}.")

    def __reduce__(self) -> tuple[Any, ...]:  # picklable across processes, like other exceptions
        return (type(self), (self.exporter_name, self.eval_result, self.detail))


def call_exporter(exporter: Exporter, estimator: Any, export_path: str, checkpoint_path: str | None,
                  eval_result: Mapping[str, Any] | None, is_the_final_export: bool) -> str | None:
    """Calls ``exporter.export``; its error is re-raised as ``ExporterError`` naming it, with the result.

    Example:
        >>> class Broken(Exporter):
        ...     name = 'broken'
        ...     def export(self, *args, **kwargs):
        ...         raise OSError('disk full')
        >>> try:
        ...     call_exporter(Broken(), None, '/tmp/x', None, {'loss': 1.0, 'global_step': 3}, False)
        ... except ExporterError as error:
        ...     print(error.exporter_name, error.global_step)
        broken 3
    """
    try:
        return exporter.export(estimator=estimator, export_path=export_path, checkpoint_path=checkpoint_path,
                               eval_result=eval_result, is_the_final_export=is_the_final_export)
    except Exception as exc:
        error = ExporterError(exporter.name, eval_result, f"{type(exc).__name__}: {exc}")
        _log.error("%s", error)
        raise error from exc


def _export_saved_model(estimator: Any, export_path: str, receiver_fn: Callable[..., Any] | None,
                        assets_extra: Mapping[str, str] | None, checkpoint_path: str | None) -> str:
    method = getattr(estimator, "export_saved_model", None)
    if method is None:  # an Estimator without the method wired in: the module function does the same
        from estimator_engine.export import export_saved_model

        return export_saved_model(estimator, export_path, receiver_fn, assets_extra=assets_extra,
                                  checkpoint_path=checkpoint_path)
    return method(export_path, receiver_fn, assets_extra=assets_extra, checkpoint_path=checkpoint_path)


class _SavedModelExporter(Exporter):
    # None (BestExporter's default, as in TF) fails when exporting: "An input_receiver_fn must be defined."
    def __init__(self, name: str, serving_input_receiver_fn: Callable[..., Any] | None,
                 assets_extra: Mapping[str, str] | None = None, as_text: bool = False) -> None:
        self._name = name
        self._serving_input_receiver_fn = serving_input_receiver_fn
        self._assets_extra = assets_extra
        self._as_text = as_text

    @property
    def name(self) -> str:
        return self._name

    def export(self, estimator, export_path, checkpoint_path, eval_result, is_the_final_export):
        del eval_result, is_the_final_export
        return _export_saved_model(estimator, export_path, self._serving_input_receiver_fn,
                                   self._assets_extra, checkpoint_path)


def _check_exports_to_keep(exports_to_keep: Any) -> None:
    if exports_to_keep is not None and (isinstance(exports_to_keep, bool) or not isinstance(exports_to_keep, int)
                                        or exports_to_keep <= 0):
        raise ValueError("`exports_to_keep`, if provided, must be positive number. Got "
                         f"{exports_to_keep!r}; pass None to keep every export.")


def _garbage_collect_exports(export_dir_base: str, exports_to_keep: int | None) -> None:
    """Deletes all but the ``exports_to_keep`` largest 10-digit export folders (others are left alone)."""
    if exports_to_keep is None:
        return
    try:
        names = gfile.listdir(export_dir_base)
    except FileNotFoundError:
        return
    versions = sorted(int(name) for name in names if len(name) == 10 and name.isdigit())
    for version in versions[:-exports_to_keep]:
        path = gfile.join(export_dir_base, str(version))
        try:
            gfile.rmtree(path)
        except FileNotFoundError as exc:
            _log.warning("Can not delete %s recursively: %s", path, exc)


class LatestExporter(Exporter):
    """Exports after every evaluation and keeps the newest ``exports_to_keep`` exports.

    Args:
        name: the exporter's name (its folder under ``<model_dir>/export``).
        serving_input_receiver_fn: a no-argument function returning a ``ServingInputReceiver``.
        assets_extra: ``{destination: source}`` files copied into ``assets.extra/``.
        as_text: accepted for TF compatibility (there is no text form of a program).
        exports_to_keep: how many exports to keep; ``None`` keeps all.

    Example:
        >>> exporter = LatestExporter('latest', lambda: None, exports_to_keep=3)
        >>> exporter.name
        'latest'
    """

    def __init__(self, name: str, serving_input_receiver_fn: Callable[..., Any],
                 assets_extra: Mapping[str, str] | None = None, as_text: bool = False,
                 exports_to_keep: int | None = 5) -> None:
        self._saved_model_exporter = _SavedModelExporter(name, serving_input_receiver_fn, assets_extra, as_text)
        _check_exports_to_keep(exports_to_keep)
        self._exports_to_keep = exports_to_keep

    @property
    def name(self) -> str:
        return self._saved_model_exporter.name

    def export(self, estimator, export_path, checkpoint_path, eval_result, is_the_final_export):
        export_result = self._saved_model_exporter.export(estimator, export_path, checkpoint_path,
                                                          eval_result, is_the_final_export)
        _garbage_collect_exports(export_path, self._exports_to_keep)
        return export_result


class FinalExporter(Exporter):
    """Exports only once, at the end of training (``is_the_final_export``).

    Example:
        >>> FinalExporter('final', lambda: None).export(None, '/tmp/x', None, {}, False) is None
        True
    """

    def __init__(self, name: str, serving_input_receiver_fn: Callable[..., Any],
                 assets_extra: Mapping[str, str] | None = None, as_text: bool = False) -> None:
        self._saved_model_exporter = _SavedModelExporter(name, serving_input_receiver_fn, assets_extra, as_text)

    @property
    def name(self) -> str:
        return self._saved_model_exporter.name

    def export(self, estimator, export_path, checkpoint_path, eval_result, is_the_final_export):
        if not is_the_final_export:
            return None
        _log.info("Performing the final export in the end of training.")
        return self._saved_model_exporter.export(estimator, export_path, checkpoint_path,
                                                 eval_result, is_the_final_export)


def _loss_smaller(best_eval_result: Mapping[str, Any], current_eval_result: Mapping[str, Any]) -> bool:
    """Default ``compare_fn``: True iff the current ``loss`` is strictly smaller than the best."""
    key = "loss"
    if not best_eval_result or key not in best_eval_result:
        raise ValueError("best_eval_result cannot be empty or no loss is found in it. "
                         f"Given: {best_eval_result!r}.")
    if not current_eval_result or key not in current_eval_result:
        raise ValueError("current_eval_result cannot be empty or no loss is found in it. "
                         f"Given: {current_eval_result!r}.")
    return best_eval_result[key] > current_eval_result[key]


def _verify_compare_fn_args(compare_fn: Callable[..., Any]) -> None:
    args = set(fn_args(compare_fn))
    if "best_eval_result" not in args:
        raise ValueError(f"compare_fn ({compare_fn}) must include best_eval_result argument.")
    if "current_eval_result" not in args:
        raise ValueError(f"compare_fn ({compare_fn}) must include current_eval_result argument.")
    non_valid_args = sorted(args - {"best_eval_result", "current_eval_result"})
    if non_valid_args:
        raise ValueError(f"compare_fn ({compare_fn}) has following not expected args: {non_valid_args}")


class BestExporter(Exporter):
    """Exports when an evaluation beats the best one so far (by ``compare_fn``), surviving restarts.

    On its first call for a model_dir it reads the past evaluation results of the eval directories
    matching ``event_file_pattern`` (its directory part, e.g. ``eval`` of ``'eval/*.tfevents.*'``,
    read with ``read_eval_metrics``) and takes the best as the baseline, so a restarted training
    job does not export a model worse than one exported before. Results at or after the current
    evaluation's global step are not "past" (the current result is already written when the
    exporter runs; TF compensates with "always export on the first call", which forgets the past
    best). It exports when there is no best yet or when ``compare_fn(best, current)`` is True.

    Args:
        name: the exporter's name (its folder under ``<model_dir>/export``).
        serving_input_receiver_fn: a no-argument function returning a ``ServingInputReceiver``.
        event_file_pattern: eval results to scan, relative to model_dir; ``None`` skips the scan.
        compare_fn: ``fn(best_eval_result, current_eval_result) -> bool``, True when current is
            better. Default: strictly smaller ``loss``.
        assets_extra: ``{destination: source}`` files copied into ``assets.extra/``.
        as_text: accepted for TF compatibility.
        exports_to_keep: how many exports to keep; ``None`` keeps all.

    Example:
        >>> exporter = BestExporter(serving_input_receiver_fn=lambda: None,
        ...                         compare_fn=lambda best_eval_result, current_eval_result:
        ...                             current_eval_result['auc'] > best_eval_result['auc'])
        >>> exporter.name
        'best_exporter'
    """

    def __init__(self, name: str = "best_exporter", serving_input_receiver_fn: Callable[..., Any] | None = None,
                 event_file_pattern: str | None = "eval/*.tfevents.*",
                 compare_fn: Callable[..., bool] | None = _loss_smaller,
                 assets_extra: Mapping[str, str] | None = None, as_text: bool = False,
                 exports_to_keep: int | None = 5) -> None:
        if compare_fn is None:
            raise ValueError("`compare_fn` must not be None.")
        if not callable(compare_fn):
            raise TypeError(f"`compare_fn` must be callable, given: {compare_fn!r}")
        _verify_compare_fn_args(compare_fn)
        self._compare_fn = compare_fn
        self._saved_model_exporter = _SavedModelExporter(name, serving_input_receiver_fn, assets_extra, as_text)
        self._event_file_pattern = event_file_pattern
        self._model_dir: str | None = None
        self._best_eval_result: dict[str, Any] | None = None
        _check_exports_to_keep(exports_to_keep)
        self._exports_to_keep = exports_to_keep

    @property
    def name(self) -> str:
        return self._saved_model_exporter.name

    @property
    def best_eval_result(self) -> dict[str, Any] | None:
        """The best evaluation result known so far (``None`` before any)."""
        return self._best_eval_result

    def export(self, estimator, export_path, checkpoint_path, eval_result, is_the_final_export):
        export_result = None
        if self._model_dir != estimator.model_dir and self._event_file_pattern:
            _log.info("Loading best metric from the eval results.")
            self._model_dir = estimator.model_dir
            current_step = (eval_result or {}).get("global_step")
            self._best_eval_result = self._get_best_eval_result(
                os.path.join(self._model_dir, self._event_file_pattern), before_step=current_step)
        if self._best_eval_result is None or self._compare_fn(
                best_eval_result=self._best_eval_result, current_eval_result=eval_result):
            _log.info("Performing best model export.")
            self._best_eval_result = dict(eval_result) if eval_result is not None else None
            export_result = self._saved_model_exporter.export(estimator, export_path, checkpoint_path,
                                                              eval_result, is_the_final_export)
            _garbage_collect_exports(export_path, self._exports_to_keep)
        return export_result

    def _get_best_eval_result(self, full_pattern: str, before_step: Any = None) -> dict[str, Any] | None:
        """The best past result (steps before ``before_step``) of the eval dirs the pattern's directory matches."""
        directory_pattern = os.path.dirname(full_pattern)
        best: dict[str, Any] | None = None
        if gfile.is_remote(directory_pattern):
            fs, inner = gfile.filesystem(directory_pattern)
            scheme = directory_pattern.split("://", 1)[0]
            with gfile.reporting("list", directory_pattern):
                eval_dirs = [f"{scheme}://{found}" for found in fs.glob(inner)]
        else:
            eval_dirs = glob.glob(directory_pattern)
        for eval_dir in sorted(eval_dirs):
            for step, metrics in read_eval_metrics(eval_dir).items():
                if before_step is not None and step >= before_step:
                    continue  # the evaluation being exported was written before this call
                result = {**metrics, "global_step": step}
                if best is None or self._compare_fn(best_eval_result=best, current_eval_result=result):
                    best = result
        return best
