"""The worker entry point: ``python -m workbench.runner RUN_DIR`` executes one run.

Separation of concerns:
    - the **launcher** (``workbench.launcher``) spawns this module in a fresh interpreter and may
      signal it; it never runs model code itself;
    - the **runner** (this module) owns the run's lifecycle: it reads ``run.json``, marks the run
      ``running``, beats the heartbeat, builds the Estimator (``workbench.templates``), executes
      the action, appends metrics (``workbench.metrics_hook``), and records the outcome
      (``succeeded``, ``stopped``, ``cancelled`` or ``failed`` with the user-code traceback);
    - the **engine** (``estimator_engine``) trains, evaluates and predicts, and writes checkpoints
      into ``runs/<id>/model/`` (so a resumed run continues from the last one).

Stop and cancel: ``runs/<id>/stop.request`` (written by ``LocalLauncher.stop``) makes the metrics
hook request a stop between steps; the engine then writes its end-of-training checkpoint and the
run ends ``stopped``. SIGTERM (``LocalLauncher.cancel``) does the same but ends ``cancelled``.

Under ``torch.distributed.run`` every rank runs this module; only rank 0 writes to the registry
and to ``metrics.jsonl``. Each rank dies with its torchrun agent (``die_with_torchrun_agent``).

Run schedule (``run.json['schedule']``, falling back to the same keys in ``run_config``):
``max_steps`` (absolute; ``steps`` is read as the same target, so a resumed run finishes the
original budget instead of adding to it), ``eval_steps``, ``eval_every_steps``
(train_and_evaluate), ``metrics_every_n_steps``, the input settings ``batch_size`` and
``shuffle_seed`` (handed to ``build_estimator`` at the top level of its spec), and ``preflight``
/ ``preflight_timeout``: when ``preflight`` is true, the pre-flight check
(``workbench.preflight.check_in_process``) runs in this process before the Estimator is built
(not under ``torch.distributed.run``, where the caller checks before launching, and not for
``evaluate``/``predict``, which reuse a trained model on data that may have no label); its report
goes to ``runs/<id>/preflight.json`` and a failed check fails the run with the check's error.
``early_stopping`` (``{'metric', 'mode', 'patience', 'min_delta'}``, train_and_evaluate; see
``EarlyStopping``) and ``nan_policy`` (``'fail'``, the default, or ``'stop'``: the run ends
``stopped`` at the first NaN loss, its newest checkpoint the last finite one).
Checking here rather than in a separate process before the launch saves a second interpreter
start and torch import (seconds) between pressing Train and the first metric line.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from workbench import paths
from workbench.registry import (
    SUMMARISED_ON_STATUS,
    TRAINING_ACTIONS,
    InvalidTransitionError,
    RunRegistry,
)

__all__ = [
    "DEFAULT_PREFLIGHT_TIMEOUT_S",
    "PREFLIGHT_FILE",
    "SCHEDULE_KEYS",
    "SPARE_FLAG",
    "PreflightFailed",
    "RunContext",
    "die_with_torchrun_agent",
    "execute_with_engine",
    "format_user_traceback",
    "main",
    "run",
]

SCHEDULE_KEYS = ("max_steps", "steps", "eval_steps", "eval_every_steps", "metrics_every_n_steps",
                 "batch_size", "shuffle_seed", "preflight", "preflight_timeout")
PREFLIGHT_FILE = "preflight.json"
DEFAULT_PREFLIGHT_TIMEOUT_S = 60.0
_HEARTBEAT_EVERY_S = 2.0
_PACKAGE_DIRS = tuple(
    str(Path(__file__).resolve().parent.parent / name) + os.sep
    for name in ("workbench", "estimator_engine"))


@dataclass
class RunContext:
    """What an action executor gets: the run's spec and folder, and the stop signals.

    Attributes:
        run_dir: the run folder.
        spec: the parsed ``run.json``.
        schedule: the merged schedule (see the module docstring).
        is_chief: rank 0 (or not distributed).
        terminate: set by SIGTERM (cancel).
    """

    run_dir: Path
    spec: dict[str, Any]
    schedule: dict[str, Any]
    is_chief: bool = True
    terminate: threading.Event = field(default_factory=threading.Event)
    summary_rows: list[dict[str, Any]] = field(default_factory=list)
    nan_hook: Any = None  # the NanTensorHook of a run with nan_policy 'stop'

    @property
    def run_id(self) -> str:
        return str(self.spec["run_id"])

    @property
    def metrics_path(self) -> Path:
        return self.run_dir / paths.METRICS_FILE

    @property
    def stop_path(self) -> Path:
        return self.run_dir / paths.STOP_FILE

    @property
    def model_dir(self) -> Path:
        return self.run_dir / paths.MODEL_DIR

    def stop_requested(self) -> bool:
        """A graceful stop was asked for (stop file) or the process got SIGTERM."""
        return self.terminate.is_set() or self.stop_path.exists()

    def make_hook(self) -> Any:
        """A ``MetricsWriterHook`` wired to this run (rank > 0: stop signals only, no file writes)."""
        from workbench.metrics_hook import MetricsWriterHook

        every = int(self.schedule.get("metrics_every_n_steps") or 10)
        return MetricsWriterHook(
            self.metrics_path if self.is_chief else os.devnull, every_n_steps=every,
            stop_file=self.stop_path, should_stop=self.terminate.is_set)

    def diverged(self) -> str | None:
        """Why training stopped on a NaN loss (``nan_policy: 'stop'``), or None."""
        hook = self.nan_hook
        if hook is None or hook.diverged_at is None:
            return None
        from estimator_engine import checkpoints

        last = hook.last_finite_loss
        saved = checkpoints.read_global_step(self.model_dir) if self.model_dir.is_dir() else 0
        return (f"NaN loss at global step {hook.diverged_at} (last finite loss "
                f"{'none' if last is None else f'{last:.6g}'}); stopped as the run asked (nan_policy "
                f"'stop'). The newest checkpoint, step {saved}, is from before the divergence: lower "
                "the learning rate and resume, or warm-start a new run from it.")

    def write_eval(self, step: int, metrics: Mapping[str, Any], split: str = "eval") -> None:
        """Appends evaluation results to ``metrics.jsonl`` (chief only) and keeps them for the summary."""
        if not self.is_chief:
            return
        from workbench.metrics_hook import write_eval

        self.summary_rows.extend(write_eval(self.metrics_path, step, metrics, split=split))


Executor = Callable[[RunContext], None]


def _schedule(spec: Mapping[str, Any]) -> dict[str, Any]:
    merged = {k: v for k, v in (spec.get("run_config") or {}).items() if k in SCHEDULE_KEYS}
    merged.update(spec.get("schedule") or {})
    if merged.get("max_steps") is None and merged.get("steps") is not None:
        merged["max_steps"] = merged["steps"]
    return merged


def _engine_spec(spec: Mapping[str, Any], model_dir: Path) -> dict[str, Any]:
    """The run spec handed to ``build_estimator``: RunConfig without schedule keys, absolute paths."""
    out = dict(spec)
    out["run_config"] = {k: v for k, v in (spec.get("run_config") or {}).items()
                         if k not in SCHEDULE_KEYS}
    out["schedule"] = _schedule(spec)
    for key in ("batch_size", "shuffle_seed"):  # build_estimator reads these at the top level
        if out["schedule"].get(key) is not None:
            out[key] = out["schedule"][key]
    out["model_dir"] = str(model_dir)
    return out


def _input_fn(input_fns: Any, key: str) -> Any:
    from workbench import datasets

    if isinstance(input_fns, Mapping):
        value = input_fns.get(key)
    else:
        value = getattr(input_fns, key, None)
    if value is None and key == "eval" and isinstance(input_fns, datasets.InputFns):
        info = input_fns.info
        raise ValueError(f"No evaluation rows: the split put {info.get('n_train')} rows in train and "
                         f"{info.get('n_eval')} in eval. Raise the dataset's eval fraction (or add "
                         "rows), or choose the action 'train'.")
    if value is None:
        raise ValueError(f"The template's build_estimator gave no {key!r} input_fn.")
    return value


TASK_INFO_FILE = "task_info.json"


def _parent_dir(ctx: RunContext) -> Path | None:
    parent = ctx.spec.get("parent_run_id")
    return None if not parent else paths.run_dir(ctx.run_dir.parent.parent, str(parent))


def _prepare_lineage(ctx: RunContext, spec: dict[str, Any]) -> None:
    """Fills ``task_info``, ``warm_start_from`` and the checkpoint to use from the run's parent.

    - own ``task_info.json`` (a resumed run) or the parent's: the model keeps the statistics and
      vocabularies it was trained with;
    - ``warm_start``: ``warm_start_from`` = ``checkpoint_path`` or the parent's model_dir;
    - ``resume`` (a new run continuing another): the parent's checkpoints are copied into this
      run's empty model_dir, so the global step continues;
    - ``evaluate_from`` / ``predict_from``: ``checkpoint_path`` or the parent's latest checkpoint.
    """
    parent_dir = _parent_dir(ctx)
    for source in (ctx.run_dir, parent_dir):
        if source is not None and (source / TASK_INFO_FILE).exists():
            spec.setdefault("task_info", json.loads((source / TASK_INFO_FILE).read_text("utf-8")))
            break
    relation = ctx.spec.get("parent_relation")
    checkpoint = ctx.spec.get("checkpoint_path")
    parent_model = None if parent_dir is None else parent_dir / paths.MODEL_DIR
    if parent_dir is not None and checkpoint and not os.path.isabs(checkpoint):
        # 'model.ckpt-100' as the checkpoint list shows it, or 'model/model.ckpt-100' from the run folder
        in_model_dir = parent_model / checkpoint
        checkpoint = str(in_model_dir if in_model_dir.exists() else parent_dir / checkpoint)
    if relation == "warm_start":
        spec.setdefault("warm_start_from", checkpoint or str(parent_model))
    elif relation == "resume" and parent_model is not None and parent_model.is_dir():
        if not any(ctx.model_dir.iterdir()):
            import shutil

            shutil.copytree(parent_model, ctx.model_dir, dirs_exist_ok=True)
    elif relation in ("evaluate_from", "predict_from") and not checkpoint and parent_model is not None:
        from estimator_engine import checkpoints

        checkpoint = checkpoints.latest_checkpoint(parent_model)
        if checkpoint is None:
            raise ValueError(f"The parent run {ctx.spec.get('parent_run_id')!r} has no checkpoint "
                             f"in {parent_model}; train it first.")
    spec["checkpoint_path"] = checkpoint


class PreflightFailed(Exception):
    """The run's pre-flight check failed; ``report`` is the ``PreflightReport``."""

    def __init__(self, report: Any) -> None:
        super().__init__(report.summary())
        self.report = report


def _preflight(ctx: RunContext) -> None:
    """Runs the pre-flight check in this process when the schedule asks for it (see the module
    docstring); raises ``PreflightFailed`` when it fails."""
    if not ctx.schedule.get("preflight") or int(os.environ.get("WORLD_SIZE", "1")) > 1:
        return
    if ctx.spec.get("action") not in TRAINING_ACTIONS:
        # The check trains a step; these actions reuse a trained model (whose code already ran)
        # on data that may have no label.
        return
    from workbench.preflight import check_in_process

    template = ctx.spec.get("template") or {}
    timeout = ctx.schedule.get("preflight_timeout")
    report = check_in_process(
        template.get("code") or "", ctx.spec.get("dataset") or {}, ctx.spec.get("params") or {},
        DEFAULT_PREFLIGHT_TIMEOUT_S if timeout is None else float(timeout),
        template_name=str(template.get("name") or "template"),
        action=str(ctx.spec.get("action") or "train"),
        report_path=ctx.run_dir / PREFLIGHT_FILE if ctx.is_chief else None)
    print(report.summary(), flush=True)
    if not report.ok:
        raise PreflightFailed(report)


def execute_with_engine(ctx: RunContext) -> None:
    """Runs the pre-flight check when asked, builds the Estimator through
    ``workbench.build.build_estimator`` and runs the action."""
    _preflight(ctx)
    if ctx.stop_requested():
        return
    from workbench.build import build_estimator

    ctx.model_dir.mkdir(parents=True, exist_ok=True)
    spec = _engine_spec(ctx.spec, ctx.model_dir)
    _prepare_lineage(ctx, spec)
    if ctx.is_chief and ctx.spec["action"] in TRAINING_ACTIONS:
        drop_orphaned_metrics(ctx.metrics_path, ctx.model_dir)
    estimator, input_fns = build_estimator(spec, str(ctx.model_dir))
    info = getattr(input_fns, "info", None)
    if ctx.is_chief and info is not None and not (ctx.run_dir / TASK_INFO_FILE).exists():
        (ctx.run_dir / TASK_INFO_FILE).write_text(json.dumps(info, default=_json_default), "utf-8")
    action = ctx.spec["action"]
    schedule = ctx.schedule
    max_steps = schedule.get("max_steps")
    eval_steps = schedule.get("eval_steps")
    checkpoint_path = spec.get("checkpoint_path")
    if ctx.stop_requested():
        return
    if action == "train":
        estimator.train(_input_fn(input_fns, "train"), hooks=_train_hooks(ctx), max_steps=max_steps)
    elif action == "evaluate":
        results = estimator.evaluate(_input_fn(input_fns, "eval"), steps=eval_steps,
                                     hooks=[ctx.make_hook()], checkpoint_path=checkpoint_path)
        ctx.write_eval(int(results.get("global_step", 0)), results)
    elif action == "train_and_evaluate":
        _train_and_evaluate(ctx, estimator, input_fns, max_steps, eval_steps)
    elif action == "predict":
        _predict(ctx, estimator, input_fns, checkpoint_path)
    else:
        raise ValueError(f"Unknown action {action!r} in run.json; expected train, evaluate, "
                         "predict or train_and_evaluate.")


def drop_orphaned_metrics(metrics_path: Path, model_dir: Path) -> int:
    """Removes the rows logged past the newest checkpoint; returns how many.

    Training resumes from that checkpoint, so rows beyond it came from an attempt that died before
    saving them; kept, the charts would show two histories for the same steps and the summary the
    dead attempt's loss. TensorBoard purges such orphaned steps the same way. The file is
    replaced (temp file + rename): tailing readers see a new file and read it again.
    """
    from estimator_engine import checkpoints

    if not metrics_path.exists():
        return 0
    latest = checkpoints.latest_checkpoint(model_dir) if model_dir.is_dir() else None
    try:  # the step from the name (model.ckpt-N): a checkpoint that fails to load keeps every row
        resumed_at = 0 if latest is None else int(Path(latest).name.rpartition("-")[2])
    except ValueError:
        return 0
    lines = metrics_path.read_bytes().splitlines(keepends=True)
    kept = [line for line in lines if not _logged_after(line, resumed_at)]
    if len(kept) == len(lines):
        return 0
    temp = metrics_path.with_name(metrics_path.name + f".{os.getpid()}.tmp")
    temp.write_bytes(b"".join(kept))
    os.replace(temp, metrics_path)
    return len(lines) - len(kept)


def _logged_after(line: bytes, step: int) -> bool:
    try:
        row_step = json.loads(line).get("step")
    except (ValueError, AttributeError):
        return False  # a partial or odd line: left to the readers, which skip it
    return isinstance(row_step, int) and row_step > step


def _json_default(value: Any) -> Any:
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"not JSON-serialisable: {value!r}")


def _current_step(estimator: Any) -> int:
    from estimator_engine import checkpoints

    return int(checkpoints.read_global_step(estimator.model_dir))


def _train_and_evaluate(ctx: RunContext, estimator: Any, input_fns: Any, max_steps: int | None,
                        eval_steps: int | None) -> None:
    """Alternates ``train(max_steps=next boundary)`` and ``evaluate`` until ``max_steps``."""
    if max_steps is None:
        raise ValueError("train_and_evaluate needs schedule['max_steps'] (how long to train), "
                         "given none; set max_steps in the run's schedule.")
    every = int(ctx.schedule.get("eval_every_steps") or max(1, max_steps // 10))
    train_fn, eval_fn = _input_fn(input_fns, "train"), _input_fn(input_fns, "eval")
    stopper = EarlyStopping.from_schedule(ctx.schedule.get("early_stopping"))
    step = _current_step(estimator)
    while step < max_steps and not ctx.stop_requested():
        target = min(max_steps, (step // every + 1) * every)
        estimator.train(train_fn, hooks=_train_hooks(ctx), max_steps=target)
        if ctx.diverged():
            break
        new_step = _current_step(estimator)
        results = estimator.evaluate(eval_fn, steps=eval_steps)  # reuses the trained model in memory
        ctx.write_eval(int(results.get("global_step", new_step)), results)
        if new_step <= step:  # input ended before the boundary: nothing more to train on
            break
        step = new_step
        if stopper is not None and stopper.update(step, results):
            print(f"workbench.runner: early stopping at step {step}: {stopper.reason}", flush=True)
            break


def _train_hooks(ctx: RunContext) -> list[Any]:
    """The metrics hook, plus ``NanTensorHook(fail_on_nan_loss=False)`` when the run asks to stop
    (rather than fail) on a NaN loss; it then replaces the engine's default NaN check."""
    hooks = [ctx.make_hook()]
    policy = ctx.schedule.get("nan_policy", "fail")
    if policy not in ("fail", "stop"):
        raise ValueError(f"schedule['nan_policy'] must be 'fail' or 'stop', given: {policy!r}.")
    if policy == "stop":
        import estimator_engine as ee

        ctx.nan_hook = ctx.nan_hook or ee.NanTensorHook("loss", fail_on_nan_loss=False)
        hooks.append(ctx.nan_hook)
    return hooks


@dataclass
class EarlyStopping:
    """Stops train_and_evaluate when an eval metric has not improved for ``patience`` evaluations.

    ``schedule['early_stopping'] = {'metric': 'loss', 'mode': 'min', 'patience': 3, 'min_delta': 0}``;
    ``mode`` defaults to ``'min'`` for names with 'loss' or 'error' in them and ``'max'`` otherwise.

    Example:
        >>> stopper = EarlyStopping(metric="loss", mode="min", patience=1)
        >>> stopper.update(10, {"loss": 1.0}), stopper.update(20, {"loss": 1.5})
        (False, True)
    """

    metric: str
    mode: str
    patience: int
    min_delta: float = 0.0
    best: float | None = None
    best_step: int | None = None
    waited: int = 0
    reason: str = ""

    @classmethod
    def from_schedule(cls, settings: Mapping[str, Any] | None) -> EarlyStopping | None:
        if not settings or not int(settings.get("patience") or 0):
            return None
        metric = str(settings.get("metric") or "loss")
        mode = settings.get("mode") or ("min" if any(w in metric for w in ("loss", "error")) else "max")
        if mode not in ("min", "max"):
            raise ValueError(f"schedule['early_stopping']['mode'] must be 'min' or 'max', given: {mode!r}.")
        return cls(metric=metric, mode=mode, patience=int(settings["patience"]),
                   min_delta=float(settings.get("min_delta") or 0.0))

    def update(self, step: int, results: Mapping[str, Any]) -> bool:
        """Records one evaluation; returns True when training should stop."""
        if self.metric not in results:
            raise ValueError(f"Early stopping watches eval metric {self.metric!r}, but the evaluation "
                             f"reported {sorted(results)}. Choose one of those.")
        value = float(results[self.metric])
        better = self.best is None or (value < self.best - self.min_delta if self.mode == "min"
                                       else value > self.best + self.min_delta)
        if better:
            self.best, self.best_step, self.waited = value, step, 0
            return False
        self.waited += 1
        if self.waited >= self.patience:
            self.reason = (f"eval {self.metric} has not improved on {self.best:.6g} (step {self.best_step}) "
                           f"for {self.waited} evaluations")
            return True
        return False


def _predict(ctx: RunContext, estimator: Any, input_fns: Any, checkpoint_path: str | None) -> None:
    """Writes ``predictions.csv``: the input rows plus the prediction columns, streaming
    (``workbench.predictions.write_predictions_csv``)."""
    out = ctx.run_dir / paths.PREDICTIONS_FILE
    predict_fn = _input_fn(input_fns, "predict")
    from workbench import datasets
    from workbench.predictions import write_predictions_csv

    source = datasets.DatasetSpec.from_dict(ctx.spec["dataset"]).load()
    info = getattr(input_fns, "info", None) or {}
    write_predictions_csv(estimator, predict_fn, source, out,
                          label_vocabulary=info.get("label_vocabulary"),
                          checkpoint_path=checkpoint_path)


def _is_user_frame(filename: str) -> bool:
    if filename.startswith("<") and not filename.startswith(("<template", "<model_fn", "<string")):
        return False
    absolute = os.path.abspath(filename) if not filename.startswith("<") else filename
    if absolute.startswith(_PACKAGE_DIRS):
        return False
    return not any(part in absolute for part in (
        f"{os.sep}site-packages{os.sep}", f"{os.sep}dist-packages{os.sep}",
        f"{os.sep}lib{os.sep}python3"))


def format_user_traceback(exc: BaseException) -> tuple[str, str]:
    """``(summary, traceback_text)``: the error line, and the traceback cut to user-code frames.

    The summary names the last user-code location when there is one, e.g.
    ``"ValueError: bad shape (template.py, line 12, in model_fn)"``. When no frame is user code
    (the error is in the data or the engine), the whole traceback is kept.
    """
    frames = traceback.extract_tb(exc.__traceback__)
    user = [f for f in frames if _is_user_frame(f.filename)]
    head = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    summary = head.splitlines()[-1] if head else type(exc).__name__
    if user:
        last = user[-1]
        summary += f" ({os.path.basename(last.filename)}, line {last.lineno}, in {last.name})"
        text = ("Traceback (user code only; the full traceback is in worker.log):\n"
                + "".join(traceback.format_list(user)) + head + "\n")
    else:
        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return summary[:2000], text


class _Heartbeat:
    """Beats the registry every ~2 s from a daemon thread while the run executes, and merges the
    metric lines logged since into the run's summary (the runs tables show a running run's step
    and loss)."""

    def __init__(self, registry: RunRegistry, run_id: str, metrics_path: Path | None = None) -> None:
        from workbench.metrics_store import MetricsTail

        self._registry, self._run_id = registry, run_id
        self._tail = None if metrics_path is None else MetricsTail(metrics_path)
        self._generation = -1  # the first beat builds the summary afresh
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="workbench-heartbeat", daemon=True)

    def __enter__(self) -> _Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _loop(self) -> None:
        while not self._stop.wait(_HEARTBEAT_EVERY_S):
            try:
                self._registry.heartbeat(self._run_id)
                self._update_summary()
            except Exception:  # a busy or vanished registry must not kill the run
                pass

    def _update_summary(self) -> None:
        if self._tail is None:
            return
        rows = self._tail.read()
        if self._tail.generation != self._generation:
            # First beat, or the file was replaced (a resume dropped a dead attempt's rows).
            self._generation = self._tail.generation
            self._registry.refresh_summary(self._run_id)
        elif rows:
            self._registry.update_summary(self._run_id, rows)


def _preflight_error(report: Any) -> tuple[str, str]:
    """``(summary, traceback_text)`` of a failed pre-flight check, as ``format_user_traceback``."""
    text = report.summary()
    err = report.first_error() or {}
    if err.get("traceback"):
        text += "\n\n" + str(err["traceback"])
    return text.splitlines()[0][:2000], text


def _finish(registry: RunRegistry, run_id: str, status: str, **kwargs: Any) -> None:
    """Records the run's outcome, its summary made from its metrics file first (set_status does
    that itself for the outcomes in ``SUMMARISED_ON_STATUS``)."""
    if status not in SUMMARISED_ON_STATUS:
        _safe(lambda: registry.refresh_summary(run_id))
    try:
        registry.set_status(run_id, status, **kwargs)
    except InvalidTransitionError:
        pass  # the launcher already recorded an outcome (e.g. cancelled after SIGKILL)


def run(run_dir: str | os.PathLike[str], *, execute: Executor | None = None,
        install_signal_handlers: bool = True) -> int:
    """Executes the run in ``run_dir``; returns the process exit code (0 unless it failed).

    Args:
        run_dir: ``<workspace>/runs/<run_id>``.
        execute: the action executor (default: ``execute_with_engine``); tests pass a stub.
        install_signal_handlers: turn SIGTERM into a graceful stop (main thread only).
    """
    die_with_torchrun_agent()
    run_dir = Path(run_dir).resolve()
    spec_file = run_dir / paths.RUN_JSON
    try:
        spec = json.loads(spec_file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        print(f"workbench.runner: cannot read {spec_file}: {exc}", file=sys.stderr)
        return 2
    root = run_dir.parent.parent
    registry = RunRegistry(root)
    is_chief = int(os.environ.get("RANK", "0")) == 0
    ctx = RunContext(run_dir=run_dir, spec=spec, schedule=_schedule(spec), is_chief=is_chief)
    run_id = ctx.run_id

    previous: Any = None
    if install_signal_handlers and threading.current_thread() is threading.main_thread():
        def on_sigterm(signum: int, frame: FrameType | None) -> None:
            ctx.terminate.set()

        previous = signal.signal(signal.SIGTERM, on_sigterm)
    try:
        if is_chief:
            record = registry.get(run_id)
            if record.status == "queued":
                registry.set_status(run_id, "running", pid=os.getpid())
            elif record.status == "running":
                registry.heartbeat(run_id)
            else:
                print(f"workbench.runner: run {run_id} is {record.status!r}, not starting it.",
                      file=sys.stderr)
                return 0
        print(f"workbench.runner: run {run_id} ({spec.get('action')}) started, pid {os.getpid()}",
              flush=True)
        started = time.monotonic()
        try:
            if is_chief:
                with _Heartbeat(registry, run_id, ctx.metrics_path):
                    (execute or execute_with_engine)(ctx)
            else:
                (execute or execute_with_engine)(ctx)
        except BaseException as exc:
            if not isinstance(exc, PreflightFailed):  # (its summary is already in the log)
                traceback.print_exc()
            if not is_chief:
                return 1
            summary, text = (_preflight_error(exc.report) if isinstance(exc, PreflightFailed)
                             else format_user_traceback(exc))
            if ctx.terminate.is_set() or isinstance(exc, KeyboardInterrupt):
                _finish(registry, run_id, "cancelled", error=summary, traceback=text)
                return 0
            _finish(registry, run_id, "failed", error=summary, traceback=text)
            return 1
        if not is_chief:
            return 0
        diverged = ctx.diverged()
        if ctx.terminate.is_set():
            status = "cancelled"
        elif ctx.stop_path.exists() or diverged:
            status = "stopped"
        else:
            status = "succeeded"
        _finish(registry, run_id, status, error=diverged)
        print(f"workbench.runner: run {run_id} {status} in {time.monotonic() - started:.1f}s",
              flush=True)
        return 0
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        if is_chief:
            _safe(lambda: start_queued_runs(root))


def start_queued_runs(root: Path) -> list[str]:
    """Starts the runs queued behind this one, when its launcher asked for that (CPU runs).

    Without it, runs submitted with ``run --detach`` while another ran would wait for a UI or a
    CLI command to poll the queue. A launcher that also polls cannot start a run twice: a run
    moves from queued to running once.
    """
    from workbench.launcher import QUEUE_HANDOFF_ENV, LocalLauncher

    slots = os.environ.get(QUEUE_HANDOFF_ENV)
    if not slots:
        return []
    return LocalLauncher(root, max_concurrent=int(slots), gpus=[]).poll()


_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def die_with_torchrun_agent() -> bool:
    """Under ``torch.distributed.run``, asks Linux to SIGKILL this rank when its agent dies.

    torchrun starts each rank in a session of its own, so a rank that ignores SIGTERM or hangs
    in a collective would outlive an agent killed with SIGKILL (cancel's escalation) as an
    orphan. ``prctl(PR_SET_PDEATHSIG, SIGKILL)`` ties the rank to its parent, the agent. Applies
    only when torchrun's ``LOCAL_RANK`` and ``WORLD_SIZE`` are set, on Linux; returns whether
    the death signal is armed.

    Example:
        >>> die_with_torchrun_agent()  # not under torchrun: does nothing
        False
    """
    if not sys.platform.startswith("linux") or not {"LOCAL_RANK", "WORLD_SIZE"} <= set(os.environ):
        return False
    parent = os.getppid()
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) != 0:
            return False
    except (OSError, AttributeError):
        return False
    if os.getppid() != parent:  # the agent died before prctl: no death signal will come
        os.kill(os.getpid(), signal.SIGKILL)
    return True


def _safe(fn: Callable[[], Any]) -> None:
    try:
        fn()
    except Exception:
        traceback.print_exc()


SPARE_FLAG = "--spare"


def _spare(stdin: Any = None) -> int:
    """A warm spare runner (``python -m workbench.runner --spare``, started by the launcher).

    Imports what every run needs (torch, the engine, pandas, the dataset and build helpers, and
    ``torch._dynamo``, which the first ``torch.optim`` optimizer of a process imports), then waits
    for one line on stdin: the RUN_DIR to execute, exactly as ``python -m workbench.runner
    RUN_DIR`` would (output to the run's worker.log, cwd the run folder). End of input (the
    launcher closed the pipe or died) ends the spare without running anything.
    """
    stdin = sys.stdin if stdin is None else stdin
    try:
        import torch._dynamo  # noqa: F401  (the optimizer's lazy import: ~1 s on a small CPU)

        import estimator_engine  # noqa: F401
        from workbench import build, metrics_hook, metrics_store, preflight  # noqa: F401
    except Exception:  # a broken install: the real run reports it in its own log
        traceback.print_exc()
    print(f"workbench.runner: spare pid {os.getpid()} ready", flush=True)
    line = stdin.readline()
    if not line.strip():
        return 0
    run_dir = Path(line.strip())
    fd = os.open(run_dir / paths.WORKER_LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    os.chdir(run_dir)
    return run(run_dir)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry: ``python -m workbench.runner RUN_DIR`` (or ``--spare``, see ``_spare``)."""
    args = sys.argv[1:] if argv is None else argv
    if args == [SPARE_FLAG]:
        return _spare()
    if len(args) != 1:
        print("usage: python -m workbench.runner RUN_DIR", file=sys.stderr)
        return 2
    return run(args[0])


if __name__ == "__main__":
    sys.exit(main())
