"""Pre-flight check of a model_fn template: import it, check it, run it on a tiny batch, in a child.

``run_preflight`` starts ``python -m estimator_workbench.execution.preflight IN.json OUT.json`` (a new process, never a
fork of the caller, in its own session), waits at most ``timeout`` seconds and kills its process
group after that. The child:

1. compiles and imports the code (a syntax or import error is reported with the user's line);
2. checks the ``model_fn`` signature (``features`` required; only ``features, labels, mode,
   params, config``);
3. validates the params against the template's PARAMS;
4. loads and validates the dataset and takes a few rows of it;
5. runs a real ``ee.Estimator`` in a temporary model_dir: ``train(steps=1)``,
   ``evaluate(steps=1)`` and one ``predict`` batch, recording what each mode's EstimatorSpec holds
   (loss shape and value, train_op, metric keys, prediction keys and shapes, parameter count) or
   the error (type, message, the user's line number and code line).

The report is JSON (never pickle), written by the child after every stage, so a timeout still says
how far the check got.

``check_in_process`` runs the same checks in the calling process (a SIGALRM timer for the timeout):
the runner uses it before training when a run asks for a pre-flight check, so a launch pays for
the interpreter and torch once instead of twice (measured on this project's 2-core machine under
load: 0.5 s in a warm runner against 22-30 s for a child that imports torch again). An outside watchdog
(``estimator_workbench.execution.preflight_watchdog``) kills a runner whose check ignores that timer. It RUNS user code: never call it in the UI.

Example:
    >>> report = run_preflight(code, spec, {"hidden_units": "16"})   # doctest: +SKIP
    >>> report.ok, report.modes["train"]["loss_shape"]                # doctest: +SKIP
    (True, [])
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from estimator_workbench.execution.preflight_watchdog import (
    start_watchdog,
    stop_watchdog,
    timeout_message,
)

__all__ = ["ALLOWED_ARGS", "MODES", "PreflightReport", "check_in_process", "error_info", "main",
           "run_preflight"]

ALLOWED_ARGS = ("features", "labels", "mode", "params", "config")
MODES = ("train", "eval", "predict")


@dataclasses.dataclass
class PreflightReport:
    """The outcome of a pre-flight check.

    Attributes:
        ok: every stage and every mode passed.
        stage: the last stage reached (``start``, ``import``, ``signature``, ``params``, ``dataset``,
            ``train``, ``eval``, ``predict``, ``done``).
        error: the error that stopped the check before the modes ran (or a timeout), else None:
            ``{'stage', 'type', 'message', 'line', 'code_line', 'traceback'}``.
        modes: per mode (``train``, ``eval``, ``predict``) a dict with ``ok`` and either the spec
            facts (``loss_shape``, ``loss``, ``train_op``, ``metric_keys``, ``metrics``,
            ``prediction_keys``, ``prediction_shapes``, ``parameter_count``) or ``error``
            (as above) or ``skipped`` (why it did not run).
        duration_s: wall time of the check.

    Example:
        >>> PreflightReport.from_dict({"ok": False, "stage": "import"}).ok
        False
    """

    ok: bool = False
    stage: str = "start"
    error: dict[str, Any] | None = None
    modes: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    duration_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PreflightReport:
        fields = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in fields})

    def first_error(self) -> dict[str, Any] | None:
        """The error to show first: the stage error, else the first failing mode's."""
        if self.error:
            return self.error
        for mode in MODES:
            if self.modes.get(mode, {}).get("error"):
                return self.modes[mode]["error"]
        return None

    def summary(self) -> str:
        """A few lines of text for a terminal or a log."""
        if self.ok:
            lines = ["Pre-flight check passed."]
        else:
            err = self.first_error() or {}
            where = f" (line {err['line']}: {err.get('code_line', '').strip()})" if err.get("line") else ""
            lines = [f"Pre-flight check failed in {err.get('stage', self.stage)}: "
                     f"{err.get('type', 'Error')}: {err.get('message', '')}{where}"]
        for mode in MODES:
            info = self.modes.get(mode)
            if not info:
                continue
            if info.get("ok"):
                facts = [f"loss shape {info['loss_shape']}" if info.get("loss_shape") is not None else None,
                         "train_op" if info.get("train_op") else None,
                         f"metrics {info['metric_keys']}" if info.get("metric_keys") else None,
                         f"predictions {info.get('prediction_shapes')}",
                         f"{info.get('parameter_count')} parameters"]
                lines.append(f"  {mode}: ok, " + ", ".join(f for f in facts if f))
            elif info.get("skipped"):
                lines.append(f"  {mode}: skipped ({info['skipped']})")
            else:
                lines.append(f"  {mode}: {info.get('error', {}).get('type')}")
        return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# Parent side


def run_preflight(code: str, dataset_spec: Any, params: Mapping[str, Any] | None = None,
                  timeout: float = 30, *, template_name: str = "template", n_rows: int = 8,
                  action: str = "train", python: str | None = None) -> PreflightReport:
    """Runs the pre-flight check of ``code`` on ``dataset_spec`` in a child process.

    Args:
        code: the template source.
        dataset_spec: a ``DatasetSpec`` or its ``to_dict()``.
        params: the user params (validated against the template's PARAMS in the child).
        timeout: seconds before the child is killed (reported as ``timed out after N s``).
        template_name: names the code in tracebacks (``<template NAME>``).
        n_rows: rows per batch of the check.
        action: the run's action (``predict`` needs no label).
        python: the interpreter (default: this one).

    Returns:
        The ``PreflightReport`` (the check's failures are in the report, not raised).
    """
    spec_dict = dataset_spec.to_dict() if hasattr(dataset_spec, "to_dict") else dict(dataset_spec)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="preflight-") as tmp:
        in_path, out_path = Path(tmp) / "in.json", Path(tmp) / "out.json"
        in_path.write_text(json.dumps({
            "code": code, "template_name": template_name, "dataset": spec_dict,
            "params": dict(params or {}), "n_rows": int(n_rows), "action": action,
        }), encoding="utf-8")
        from estimator_workbench.execution.processes import without_secrets

        env = without_secrets(os.environ)  # the check runs user code: no UI password for it
        env.setdefault("OMP_NUM_THREADS", "1")
        env["CUDA_VISIBLE_DEVICES"] = ""  # the check runs on CPU: fast start, no GPU contention
        proc = subprocess.Popen(
            [python or sys.executable, "-m", "estimator_workbench.execution.preflight", str(in_path), str(out_path)],
            cwd=tmp, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, start_new_session=True,
        )
        timed_out = False
        try:
            _, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            kill_group(proc)
            _, stderr = proc.communicate()
        report = _read_report(out_path)
        report.duration_s = round(time.monotonic() - started, 3)
        if timed_out:
            report.ok = False
            message = timeout_message(timeout, report.stage)
            report.error = {"stage": report.stage, "type": "TimeoutError", "message": message,
                            "line": None, "code_line": None, "traceback": None}
        elif proc.returncode != 0 and report.error is None and report.stage != "done":
            tail = stderr.decode("utf-8", "replace")[-2000:]
            report.ok = False
            report.error = {"stage": report.stage, "type": "ChildProcessError",
                            "message": f"the check process exited with code {proc.returncode}: {tail}",
                            "line": None, "code_line": None, "traceback": tail}
    return report


def kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()


def _read_report(path: Path) -> PreflightReport:
    try:
        return PreflightReport.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return PreflightReport()


# ---------------------------------------------------------------------------------------------
# Child side


def error_info(exc: BaseException, filename: str, stage: str) -> dict[str, Any]:
    """Type, message, and the user's line (the innermost traceback frame in ``filename``)."""
    line = code_line = None
    if isinstance(exc, SyntaxError) and exc.filename == filename:
        line, code_line = exc.lineno, (exc.text or "").rstrip("\n")
    frames = traceback.extract_tb(exc.__traceback__)
    user = [f for f in frames if f.filename == filename]
    if user and line is None:
        line, code_line = user[-1].lineno, user[-1].line
    # the user's part of the traceback: from the first frame in the template on
    first = next((i for i, f in enumerate(frames) if f.filename == filename), 0)
    tb = "".join(traceback.format_list(frames[first:]))
    tb += "".join(traceback.format_exception_only(type(exc), exc))
    message = exc.msg if isinstance(exc, SyntaxError) else str(exc)
    return {"stage": stage, "type": type(exc).__name__, "message": message, "line": line,
            "code_line": code_line, "traceback": tb}


def _shape(value: Any) -> list[int] | None:
    shape = getattr(value, "shape", None)
    return [int(d) for d in shape] if shape is not None else None


def _check_signature(model_fn: Any) -> str | None:
    try:
        sig = inspect.signature(model_fn)
    except (TypeError, ValueError) as e:
        return f"the signature of model_fn cannot be read: {e}"
    names = []
    for p in sig.parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            return (f"model_fn has a variable argument {p}; declare only named arguments from "
                    f"{list(ALLOWED_ARGS)}.")
        names.append(p.name)
    unexpected = [n for n in names if n not in ALLOWED_ARGS]
    if unexpected:
        return (f"model_fn has unexpected arguments {unexpected}: it may take only "
                f"{list(ALLOWED_ARGS)} (put hyper-parameters in params).")
    if "features" not in names:
        return f"model_fn must take a 'features' argument; it takes {names}."
    return None


class _Recorder:
    """Wraps the user's model_fn (same signature for the Estimator) and records the first spec
    of each mode and the parameter count of the registered modules."""

    def __init__(self, model_fn: Any) -> None:
        self.specs: dict[str, Any] = {}
        self.parameter_count: int | None = None
        self.current_mode = "?"  # set by the check before each Estimator call

        @functools.wraps(model_fn)  # inspect.signature follows __wrapped__: the engine sees the user's args
        def recording(*args: Any, **kwargs: Any) -> Any:
            import estimator_engine as ee

            spec = model_fn(*args, **kwargs)
            mode = self.current_mode
            if not isinstance(spec, ee.EstimatorSpec):
                raise TypeError(
                    f"model_fn returned {type(spec).__name__} ({spec!r:.80}) in {mode.upper()} mode; it must "
                    "return ee.EstimatorSpec(mode, predictions=..., loss=..., train_op=...)."
                )
            self.specs.setdefault(mode, spec)
            self._count_parameters()
            return spec

        self.model_fn = recording

    def _count_parameters(self) -> None:
        from estimator_engine import model_state

        state = getattr(model_state, "_active", None)
        modules = getattr(state, "modules", None) or {}
        seen: dict[int, int] = {}
        for module in modules.values():
            for p in module.parameters():
                seen[id(p)] = p.numel()
        self.parameter_count = sum(seen.values())


def _spec_facts(spec: Any, parameter_count: int | None) -> dict[str, Any]:
    predictions = spec.predictions
    if isinstance(predictions, Mapping):
        shapes = {k: _shape(v) for k, v in predictions.items()}
    else:
        shapes = {"": _shape(predictions)} if predictions is not None else {}
    loss = spec.loss
    return {
        "ok": True,
        "loss_shape": _shape(loss) if loss is not None else None,
        "loss": float(loss.detach().float().cpu()) if loss is not None and loss.numel() == 1 else None,
        "train_op": spec.train_op is not None,
        "metric_keys": sorted(spec.eval_metric_ops or {}),
        "prediction_keys": sorted(shapes),
        "prediction_shapes": shapes,
        "parameter_count": parameter_count,
    }


def _finite(value: Any) -> Any:
    try:
        f = float(value)
    except (TypeError, ValueError):
        return str(value)
    return f if math.isfinite(f) else str(f)


class _Writer:
    def __init__(self, path: Path | None, started: float) -> None:
        self.path, self.started = path, started
        self.report = PreflightReport()

    def stage(self, name: str) -> None:
        self.report.stage = name
        self.flush()

    def flush(self) -> None:
        self.report.duration_s = round(time.monotonic() - self.started, 3)
        if self.path is None:
            return
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.report.to_dict(), default=str), encoding="utf-8")
        os.replace(tmp, self.path)


def _run_checks(job: Mapping[str, Any], out: _Writer, model_dir: str) -> None:
    from estimator_workbench import templates
    from estimator_workbench.data import datasets

    report = out.report
    name = job.get("template_name", "template")
    filename = templates.template_filename(name)
    code = job["code"]

    out.stage("import")
    try:
        model_fn = templates.load_model_fn(code, filename)
    except BaseException as e:
        report.error = error_info(e, filename, "import")
        return

    out.stage("signature")
    problem = _check_signature(model_fn)
    if problem:
        report.error = {"stage": "signature", "type": "TypeError", "message": problem,
                        "line": getattr(getattr(model_fn, "__code__", None), "co_firstlineno", None),
                        "code_line": None, "traceback": None}
        if report.error["line"]:
            report.error["code_line"] = code.splitlines()[report.error["line"] - 1]
        return

    out.stage("params")
    try:
        _, schema = templates.parse_template(code, name)
        params = templates.validate_params(schema, job.get("params") or {})
    except ValueError as e:
        report.error = {"stage": "params", "type": "ValueError", "message": str(e), "line": None,
                        "code_line": None, "traceback": None}
        return

    out.stage("dataset")
    try:
        spec = datasets.DatasetSpec.from_dict(job["dataset"])
        df = spec.load()
        datasets.validate(df, spec.schema, action=job.get("action", "train"), raise_errors=True,
                          label_missing=spec.label_missing)
        info = datasets.task_info(df, spec)
        n_rows = max(1, int(job.get("n_rows", 8)))
        # a few rows for each part; the statistics and vocabularies come from the full dataset
        sample = df.sample(n=min(len(df), 4 * n_rows), random_state=spec.seed)
        fns = datasets.make_input_fns(spec, sample, batch_size=n_rows, shuffle_seed=0, info=info)
    except Exception as e:
        report.error = {"stage": "dataset", "type": type(e).__name__, "message": str(e), "line": None,
                        "code_line": None, "traceback": None}
        return
    params["task"] = info

    import estimator_engine as ee

    recorder = _Recorder(model_fn)
    try:
        config = ee.RunConfig(model_dir=model_dir, tf_random_seed=0, device="cpu",
                              save_checkpoints_steps=1000, log_step_count_steps=None,
                              save_summary_steps=None)
        estimator = ee.Estimator(recorder.model_fn, model_dir=model_dir, config=config, params=params)
    except Exception as e:
        report.error = error_info(e, filename, "signature")
        return

    runs = {
        "train": lambda: estimator.train(fns.train, steps=1),
        "eval": lambda: {k: _finite(v) for k, v in estimator.evaluate(fns.eval or fns.train, steps=1).items()},
        "predict": lambda: next(iter(estimator.predict(fns.predict, yield_single_examples=False))),
    }
    for mode, run in runs.items():
        if mode != "train" and not report.modes["train"].get("ok"):
            report.modes[mode] = {"ok": False, "skipped": "TRAIN failed, so there is no checkpoint to use"}
            continue
        out.stage(mode)
        recorder.current_mode = mode
        try:
            result = run()
        except BaseException as e:
            if isinstance(e, KeyboardInterrupt):
                raise
            report.modes[mode] = {"ok": False, "error": error_info(e, filename, mode)}
            continue
        spec = recorder.specs.get(mode)
        facts = _spec_facts(spec, recorder.parameter_count) if spec is not None else {"ok": True}
        if mode == "eval":
            facts["metrics"] = result
        if mode == "predict":
            facts["prediction_shapes"] = {k: _shape(v) for k, v in result.items()} if isinstance(result, Mapping) \
                else {"": _shape(result)}
            facts["prediction_keys"] = sorted(facts["prediction_shapes"])
        report.modes[mode] = facts


def _check(job: Mapping[str, Any], out: _Writer) -> PreflightReport:
    """Runs every stage, then sets ``ok`` and the final stage; the report is flushed."""
    # The scratch model sits beside the report (the run's folder, or run_preflight's temporary one), not
    # in /tmp: a process killed mid-check leaves nothing outside it, and the next check there cleans up.
    scratch = out.path.parent if out.path is not None else None
    for stale in scratch.glob("preflight-model-*") if scratch is not None else ():
        shutil.rmtree(stale, ignore_errors=True)
    try:
        with tempfile.TemporaryDirectory(prefix="preflight-model-", dir=scratch) as model_dir:
            _run_checks(job, out, model_dir)
    except BaseException as e:
        out.report.error = error_info(e, "<template>", out.report.stage)
    report = out.report
    report.ok = report.error is None and all(report.modes.get(m, {}).get("ok") for m in MODES)
    if report.ok or report.error is not None or report.modes:
        report.stage = "done" if report.ok else report.stage
    out.flush()
    return report


class _CheckTimeout(Exception):
    """Raised into the check by the SIGALRM timer (reported as a ``TimeoutError``)."""


def check_in_process(code: str, dataset_spec: Any, params: Mapping[str, Any] | None = None,
                     timeout: float | None = 60, *, template_name: str = "template",
                     n_rows: int = 8, action: str = "train",
                     report_path: str | os.PathLike[str] | None = None) -> PreflightReport:
    """The pre-flight check of ``run_preflight``, run in this process (no child interpreter).

    Same stages, same report. The random number generators (torch, numpy, ``random``) are
    restored afterwards, so the check does not change what the caller's training draws. The
    timeout interrupts Python code through ``SIGALRM`` (main thread only; elsewhere there is no
    timeout); a long call inside a C extension ends only when it returns.

    Args:
        code, dataset_spec, params, template_name, n_rows, action: as for ``run_preflight``.
        timeout: seconds before the check is interrupted (None: no limit).
        report_path: where to write the report JSON after every stage (optional).

    Returns:
        The ``PreflightReport`` (failures are in the report, not raised).

    Example:
        >>> report = check_in_process(code, spec, {"hidden_units": "16"},
        ...                           report_path="runs/r-1/preflight.json")  # doctest: +SKIP
        >>> report.ok                                                           # doctest: +SKIP
        True
    """
    import random

    import numpy as np
    import torch

    spec_dict = dataset_spec.to_dict() if hasattr(dataset_spec, "to_dict") else dict(dataset_spec)
    job = {"code": code, "template_name": template_name, "dataset": spec_dict,
           "params": dict(params or {}), "n_rows": int(n_rows), "action": action}
    out = _Writer(None if report_path is None else Path(report_path), time.monotonic())
    rng = (torch.random.get_rng_state(), np.random.get_state(), random.getstate())
    use_alarm = (timeout is not None and timeout > 0 and hasattr(signal, "setitimer")
                 and threading.current_thread() is threading.main_thread())
    previous: Any = None
    watchdog = None
    if use_alarm:
        def on_alarm(signum: int, frame: Any) -> None:
            raise _CheckTimeout(timeout_message(float(timeout), out.report.stage))

        previous = signal.signal(signal.SIGALRM, on_alarm)
        signal.setitimer(signal.ITIMER_REAL, float(timeout))
        watchdog = start_watchdog(float(timeout), out.path)
    try:
        try:
            report = _check(job, out)
        except _CheckTimeout as e:  # the timer fired between two guarded stages
            report = out.report
            report.ok, report.error = False, error_info(e, "<template>", report.stage)
    finally:
        if watchdog is not None:
            stop_watchdog(watchdog)
        if use_alarm:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
        torch.random.set_rng_state(rng[0])
        np.random.set_state(rng[1])
        random.setstate(rng[2])
    _rename_timeouts(report)
    out.flush()
    return report


def _rename_timeouts(report: PreflightReport) -> None:
    """A ``_CheckTimeout`` anywhere in the report reads as the child check's ``TimeoutError``."""
    errors = [report.error] + [info.get("error") for info in report.modes.values()]
    for err in errors:
        if err and err.get("type") == _CheckTimeout.__name__:
            err["type"] = "TimeoutError"
            err["traceback"] = None if not err.get("traceback") else err["traceback"].replace(
                _CheckTimeout.__name__, "TimeoutError")
    if report.error is None:
        timed_out = next((info["error"] for info in report.modes.values()
                          if (info.get("error") or {}).get("type") == "TimeoutError"), None)
        if timed_out is not None:  # as the child check reports it: the whole check timed out
            report.error = dict(timed_out)
            report.ok = False


def main(argv: list[str] | None = None) -> int:
    """Child entry point: ``python -m estimator_workbench.execution.preflight IN.json OUT.json``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) != 2:
        print("usage: python -m estimator_workbench.execution.preflight IN.json OUT.json", file=sys.stderr)
        return 2
    job = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    _check(job, _Writer(Path(argv[1]), time.monotonic()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
