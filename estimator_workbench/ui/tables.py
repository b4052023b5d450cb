"""Pure helpers of the run pages: run table, parameter differences, checkpoints, summary and
series CSV. They take and return plain data (no Streamlit), so unit tests check them directly."""

from __future__ import annotations

import dataclasses
import datetime as _dt
import functools
import json
import math
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from estimator_workbench.store import metrics_store, paths
from estimator_workbench.store.metric_values import BEST, FINAL, metric_label, metric_value
from estimator_workbench.store.records import MODEL_ACTIONS, TRAINING_ACTIONS, RunRecord

__all__ = ['LOSS_SMOOTHING', 'STATUS_ICONS', 'RunProgress', 'dataset_name', 'default_metric', 'differing_params', 'display_status', 'eval_metric_names', 'filter_runs', 'finished_runs_for_start', 'has_checkpoint', 'hub_frame', 'list_checkpoints', 'metric_columns', 'queue_positions', 'run_progress', 'runs_frame', 'series_csv', 'smoothed_train_loss', 'start_from_label', 'summary_frame', 'tidy_frame']


STATUS_ICONS = {"queued": ":material/schedule:", "running": ":material/directions_run:",
                "succeeded": ":material/check_circle:", "failed": ":material/error:",
                "stopped": ":material/stop_circle:", "cancelled": ":material/cancel:",
                "lost": ":material/help:", "stalled": ":material/hourglass_disabled:"}


STATUS_COLOURS = {"queued": "gray", "running": "blue", "succeeded": "green", "failed": "red",
                   "stopped": "orange", "cancelled": "orange", "lost": "violet", "stalled": "orange"}


_CKPT_RE = re.compile(r"^model\.ckpt-(\d+)$")


def _duration(record: RunRecord, now: float | None = None) -> float | None:
    if record.started_at is None:
        return None
    end = record.finished_at or (now or time.time())
    return max(0.0, end - record.started_at)


def _fmt_duration(seconds: float | None) -> str:
    if seconds is None:
        return ""
    seconds = round(seconds)
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}" if seconds >= 3600 \
        else f"{seconds // 60}:{seconds % 60:02d}"


def differing_params(records: Sequence[RunRecord]) -> list[str]:
    """The params whose values are not the same in every run (the only ones worth a column)."""
    keys = sorted({k for r in records for k in r.params if k != "task"})
    out = []
    for key in keys:
        values = {repr(r.params.get(key)) for r in records}
        if len(values) > 1:
            out.append(key)
    return out


def _headline_eval(summary: Mapping[str, Mapping[str, Any]]) -> tuple[str, float | None]:
    """The first eval metric the run has (accuracy, AUC, loss, average loss, else any) and its
    final value (``metric_values``: the one definition every view shows)."""
    names = [n for n in ("eval/accuracy", "eval/auc", "eval/loss", "eval/average_loss") if n in summary]
    names += [n for n in summary if n.startswith("eval/") and n not in names]
    if not names:
        return "", None
    return names[0].split("/", 1)[1], metric_value(summary, names[0], FINAL).value


def runs_frame(records: Sequence[RunRecord], now: float | None = None) -> pd.DataFrame:
    """The runs table: id, name, status, action, template, dataset, step, last loss (the train
    loss, else the eval loss of an evaluate run), the final value of its first eval metric, duration, created, tags, then
    one column per param that differs between runs."""
    now = time.time() if now is None else now
    diff = differing_params(records)
    rows = []
    for r in records:
        # an evaluate run has no train loss: its eval loss and the checkpoint's step instead
        loss = r.summary.get("train/loss") or r.summary.get("eval/loss") or {}
        metric, final = _headline_eval(r.summary)
        ref = (r.dataset or {}).get("ref") or {}
        row = {
            "run": r.run_id,
            "name": r.name,
            "status": r.display_status,  # 'stalled': running, but no training step for a while
            "action": r.action,
            "template": r.template_name or "",
            "dataset": str(ref.get("name") or Path(str(ref.get("path", ""))).name),
            "step": loss.get("last_step"),
            "last loss": loss.get("last"),
            "final eval": final,
            "eval metric": metric,
            "duration": _fmt_duration(_duration(r, now)),
            "created": _dt.datetime.fromtimestamp(r.created_at),
            "tags": ", ".join(r.tags),
        }
        for key in diff:
            value = r.params.get(key)
            row[f"param: {key}"] = value if isinstance(value, (int, float, str, bool)) or value is None else repr(value)
        rows.append(row)
    columns = ["run", "name", "status", "action", "template", "dataset", "step", "last loss",
               "final eval", "eval metric", "duration", "created", "tags"] + [f"param: {k}" for k in diff]
    frame = pd.DataFrame(rows, columns=columns)
    for column in ("step",):
        frame[column] = pd.to_numeric(frame[column], errors="coerce").astype("Int64")
    for column in ("last loss", "final eval"):
        frame[column] = pd.to_numeric(frame[column], errors="coerce").astype("float64")
    return frame


def filter_runs(records: Sequence[RunRecord], statuses: Sequence[str] = (), text: str = "", *,
                tags: Sequence[str] = (), templates: Sequence[str] = (),
                datasets: Sequence[str] = ()) -> list[RunRecord]:
    """Runs whose status is in ``statuses`` (all when empty; 'stalled' matches stalled running
    runs), that carry every tag of ``tags``, whose template is one of ``templates`` and dataset one
    of ``datasets`` (each: all when empty), and whose id, name, template, dataset, note or one of
    whose tags matches ``text`` (a case-insensitive regex, searched in each field; a bad regex is matched
    literally)."""
    out = [r for r in records
           if not statuses or r.status in statuses or display_status(r) in statuses]
    if tags:
        out = [r for r in out if set(tags) <= set(r.tags)]
    if templates:
        out = [r for r in out if (r.template_name or "") in templates]
    if datasets:
        out = [r for r in out if dataset_name(r) in datasets]
    if text:
        try:
            pattern = re.compile(text, re.IGNORECASE)
        except re.error:
            pattern = re.compile(re.escape(text), re.IGNORECASE)
        # each field on its own, so that anchors work: '^lr' finds names starting with 'lr'
        out = [r for r in out
               if any(pattern.search(f) for f in (r.run_id, r.name, r.template_name or "", dataset_name(r), *r.tags,
                                                  r.note or ""))]
    return out


def has_checkpoint(run_dir: str | os.PathLike[str]) -> bool:
    """Whether the run has a checkpoint file (``model/model.ckpt-<step>``): one folder listing, no
    table (the Predict page asks it of every run)."""
    try:
        with os.scandir(os.path.join(run_dir, paths.MODEL_DIR)) as entries:
            return any(_CKPT_RE.match(e.name) and e.is_file() for e in entries)
    except (FileNotFoundError, NotADirectoryError):
        return False


def list_checkpoints(run_dir: Path) -> pd.DataFrame:
    """The run's checkpoint files (``model/model.ckpt-<step>``) by step: step, file, size, time.

    Read from the folder listing only (no ``torch.load`` in the UI process)."""
    model = Path(run_dir) / paths.MODEL_DIR
    rows = []
    try:
        entries = list(os.scandir(model))
    except (FileNotFoundError, NotADirectoryError):
        entries = []
    for entry in entries:
        match = _CKPT_RE.match(entry.name)
        if match and entry.is_file():
            stat = entry.stat()
            rows.append({"step": int(match.group(1)), "file": entry.name,
                         "size kB": round(stat.st_size / 1024, 1),
                         "written": _dt.datetime.fromtimestamp(stat.st_mtime)})
    frame = pd.DataFrame(rows, columns=["step", "file", "size kB", "written"])
    return frame.sort_values("step", ignore_index=True)


def series_csv(records: Sequence[RunRecord], root: Path) -> Callable[[], bytes]:
    """A callable building one CSV of every metric series of ``records`` (for a lazy download)."""
    def build() -> bytes:
        frames = []
        for r in records:
            frame = metrics_store.read_all(paths.run_dir(root, r.run_id) / paths.METRICS_FILE)
            frame.insert(0, "run_name", r.name)
            frame.insert(0, "run", r.run_id)
            frames.append(frame)
        if not frames:
            return b"run,run_name,step,wall_time,split,name,value\n"
        from estimator_workbench.data.predictions import escape_formulas

        # Run names and metric names are user text: '=cmd|...' must not run in a spreadsheet.
        table = escape_formulas(pd.concat(frames, ignore_index=True))
        return table.to_csv(index=False).encode("utf-8")

    return build


def summary_frame(summary: Mapping[str, Mapping[str, Any]]) -> pd.DataFrame:
    """The run's metrics as a table (``metric_values``): split, metric, final value and its step,
    best value and its step."""
    rows = []
    for key in sorted(summary):
        split, _, name = key.partition("/")
        final, best = metric_value(summary, key, FINAL), metric_value(summary, key, BEST)
        rows.append({"split": split, "metric": name, "final": final.value, "final at step": final.step,
                     "best": best.value, "best at step": best.step})
    frame = pd.DataFrame(rows, columns=["split", "metric", "final", "final at step", "best", "best at step"])
    for column in ("final at step", "best at step"):
        frame[column] = pd.to_numeric(frame[column], errors="coerce").astype("Int64")
    return frame


def tidy_frame(frame: pd.DataFrame, digits: int = 4) -> pd.DataFrame:
    """``frame`` for a table view: a float in a column of mixed values (a param: ``0.1``, ``'relu'``)
    as text with ``digits`` significant digits (a sampled learning rate read
    ``0.0031622776601683794``); float columns stay numbers (sortable; the view formats them), and
    missing values stay missing (the view shows them blank). A copy; ``frame`` is not changed.

    Example:
        >>> tidy_frame(pd.DataFrame({"lr": [0.0031622776601683794, "adam"]}))["lr"].tolist()
        ['0.003162', 'adam']
    """
    out = frame.copy()
    for column in out.columns:
        if out[column].dtype == object:
            out[column] = [f"{v:.{digits}g}" if isinstance(v, float) and math.isfinite(v) else
                           (None if isinstance(v, float) else v) for v in out[column]]
    return out


def probability_columns(frame: pd.DataFrame) -> list[str]:
    return [c for c in frame.columns if str(c).startswith(("probability_", "probabilities_"))]


# -- the Runs page as a hub (issue 15 items 5 and 6) ------------------------------------------

LOSS_SMOOTHING = 0.9  # weight of the debiased EMA of the train loss (about the last 10 logged values)


_TAIL_BYTES = 16384  # the end of metrics.jsonl read for the smoothed loss and the step rate


_TAIL_ROWS = 64  # of which the last train losses only: at weight 0.9 older ones weigh < 0.2%


_ETA_WINDOW_S = 60.0  # step rate over the logged steps of the last minute


_TRAIN_LOSS_LINE = re.compile(rb'^\{"step": (-?\d+), "wall_time": (-?[\d.eE+-]+), "split": "train", '
                              rb'"name": "loss", "value": (-?[\w.+-]+)\}\r?$', re.MULTILINE)


def display_status(record: RunRecord) -> str:
    """The status to show: the registry's, or 'stalled' for a running run past its stall timeout
    (``RunRecord.display_status``)."""
    return record.display_status


def dataset_name(record: RunRecord) -> str:
    """The short name of a run's dataset: the bundled name or the file name."""
    ref = (record.dataset or {}).get("ref") or {}
    return str(ref.get("name") or os.path.basename(str(ref.get("path", ""))))


@dataclasses.dataclass(frozen=True)
class _LossTail:
    """The last train-loss rows of a metrics file; the step and wall-time text is converted only
    when asked (the step rate of a running run), the losses always (the smoothed loss)."""

    raw: tuple[tuple[Any, Any, Any], ...]  # (step, wall time, value), as text or numbers

    @functools.cached_property
    def steps(self) -> tuple[int, ...]:
        return tuple(int(r[0]) for r in self.raw)

    @functools.cached_property
    def walls(self) -> tuple[float, ...]:
        return tuple(_float(r[1]) for r in self.raw)

    @functools.cached_property
    def losses(self) -> tuple[float, ...]:
        return tuple(_float(r[2]) for r in self.raw)

    @functools.cached_property
    def smoothed(self) -> float | None:  # at LOSS_SMOOTHING, computed once per read of the file
        return _ema(self.losses, LOSS_SMOOTHING)


def _float(text: Any) -> float:
    try:
        return float(text)
    except (TypeError, ValueError):  # an odd token: skipped as non-finite by the EMA
        return math.nan


def _ema(losses: Sequence[float], weight: float) -> float | None:
    values = [v for v in losses if math.isfinite(v)]
    if not values:
        return None
    ema, debias = 0.0, 1.0
    for value in values:
        ema = weight * ema + (1 - weight) * value
        debias *= weight
    return ema / (1 - debias)


def _metrics_path(root: str | os.PathLike[str], run_id: str) -> str:
    # run ids come from the registry (``new_run_id``), never from user text: no safe_child check
    # needed on this hot path (500 runs per page run)
    return os.path.join(root, paths.RUNS_DIR, run_id, paths.METRICS_FILE)


_tail_cache: dict[str, tuple[int, int, _LossTail]] = {}


_TAIL_CACHE_MAX = 4096


def _parse_loss_lines(chunk: bytes) -> list[tuple[int, float, float]]:
    """``(step, wall time, value)`` of every complete train-loss line, whatever its JSON layout."""
    rows = []
    for line in chunk.split(b"\n"):
        if b'"loss"' not in line or b'"train"' not in line:
            continue
        try:
            row = json.loads(line)
            if (row.get("split"), row.get("name")) == ("train", "loss"):
                rows.append((int(row["step"]), float(row["wall_time"]), float(row["value"])))
        except (ValueError, TypeError, KeyError, AttributeError):
            continue  # a line being written, a corrupt line
    return rows


def _loss_tail(path: str | os.PathLike[str]) -> _LossTail:
    """The train-loss rows (step, wall time, value) in the last ``_TAIL_BYTES`` of a metrics file,
    cached by the file's size and modification time (a finished run's file is read once per
    process; 500 runs cost 500 ``stat`` calls per page run)."""
    key = os.fspath(path)
    try:
        stat = os.stat(key)
    except OSError:
        return _LossTail(())
    cached = _tail_cache.get(key)
    if cached is not None and cached[:2] == (stat.st_size, stat.st_mtime_ns):
        return cached[2]
    with open(key, "rb") as fh:
        if stat.st_size > _TAIL_BYTES:
            fh.seek(stat.st_size - _TAIL_BYTES)
            chunk = fh.read(_TAIL_BYTES)
            chunk = chunk[chunk.find(b"\n") + 1:]  # the first line is cut
        else:
            chunk = fh.read()
    # the writer's fixed layout: one regex call (C) instead of a json.loads per line
    rows: list[Any] = _TRAIN_LOSS_LINE.findall(chunk)[-_TAIL_ROWS:]
    if not rows and b'"loss"' in chunk:  # another JSON layout (a file written by other code)
        rows = _parse_loss_lines(chunk)[-_TAIL_ROWS:]
    tail = _LossTail(tuple(rows))
    if len(_tail_cache) >= _TAIL_CACHE_MAX:
        _tail_cache.clear()
    _tail_cache[key] = (stat.st_size, stat.st_mtime_ns, tail)
    return tail


def smoothed_train_loss(metrics_path: str | os.PathLike[str], weight: float = LOSS_SMOOTHING) -> float | None:
    """The train loss smoothed as TensorBoard does (debiased EMA with ``weight``) over the last
    logged values of ``metrics.jsonl``: the value the smoothed curve ends at, not the last noisy
    point. None when the file has no train loss; non-finite values are skipped.

    Example:
        >>> smoothed_train_loss(Path("workspace/runs/r-20260101-abc123/metrics.jsonl"))  # doctest: +SKIP
        0.4182
    """
    tail = _loss_tail(metrics_path)
    return tail.smoothed if weight == LOSS_SMOOTHING else _ema(tail.losses, weight)


@dataclasses.dataclass(frozen=True)
class RunProgress:
    """Where a run stands: its step, the steps it trains to, the fraction done, the recent step
    rate (steps/s), the estimated seconds left, and its place in the queue (1 = next).

    Example:
        >>> RunProgress(step=50, total=100, steps_per_s=10.0, eta_s=5.0).text()
        'step 50 / 100 · 10 steps/s · ETA 0:05'
    """

    step: int | None = None
    total: int | None = None
    steps_per_s: float | None = None
    eta_s: float | None = None
    queue_position: int | None = None

    @property
    def fraction(self) -> float | None:
        if self.step is None or not self.total:
            return None
        return min(1.0, max(0.0, self.step / self.total))

    def eta_text(self) -> str:
        return "" if self.eta_s is None else _fmt_duration(self.eta_s)

    def text(self) -> str:
        """One line: queue place, or step / total, rate and ETA."""
        if self.queue_position is not None:
            return f"queued: position {self.queue_position} (1 = next)"
        parts = []
        if self.step is not None:
            parts.append(f"step {self.step}" + (f" / {self.total}" if self.total else ""))
        if self.steps_per_s:
            parts.append(f"{self.steps_per_s:.3g} steps/s")
        if self.eta_s is not None:
            parts.append(f"ETA {self.eta_text()}")
        return " · ".join(parts)


def queue_positions(records: Sequence[RunRecord]) -> dict[str, int]:
    """``run id -> place in the queue`` (1 = the next to start) of the queued runs: the launcher
    starts them oldest first. Pass every run (not a filtered list), or the places are wrong."""
    queued = sorted((r for r in records if r.status == "queued"), key=lambda r: r.created_at)
    return {r.run_id: i for i, r in enumerate(queued, start=1)}


def _last_step(record: RunRecord) -> int | None:
    loss = record.summary.get("train/loss") or record.summary.get("eval/loss") or {}
    step = loss.get("last_step")
    if step is None:
        steps = [int(e["last_step"]) for e in record.summary.values() if e.get("last_step") is not None]
        step = max(steps) if steps else None
    return None if step is None else int(step)


def run_progress(record: RunRecord, root: Path, positions: Mapping[str, int] | None = None,
                 now: float | None = None) -> RunProgress:
    """The progress of ``record``: for a running run the step rate over the logged steps of the
    last minute (read from the end of its ``metrics.jsonl``) and the ETA to ``max_steps`` at that
    rate; for a queued run its place in the queue (``positions`` from ``queue_positions``)."""
    total = record.schedule.get("max_steps") or record.schedule.get("steps")
    total = int(total) if total else None
    if record.status == "queued":
        return RunProgress(total=total, queue_position=(positions or {}).get(record.run_id))
    step = _last_step(record)
    if record.status != "running" or record.action not in TRAINING_ACTIONS:
        return RunProgress(step=step, total=total)
    tail = _loss_tail(_metrics_path(root, record.run_id))
    if tail.steps and (step is None or tail.steps[-1] > step):
        step = tail.steps[-1]  # the file is ahead of the summary (merged every ~2 s)
    rate = None
    if len(tail.steps) >= 2:
        last_wall = tail.walls[-1]
        first = next(i for i, w in enumerate(tail.walls) if w >= last_wall - _ETA_WINDOW_S)
        first = min(first, len(tail.steps) - 2)
        # a resumed run's file holds both attempts: measure within the newest one only
        while first < len(tail.steps) - 2 and tail.steps[first] >= tail.steps[-1]:
            first += 1
        d_step, d_wall = tail.steps[-1] - tail.steps[first], tail.walls[-1] - tail.walls[first]
        if d_step > 0 and d_wall > 0:
            rate = d_step / d_wall
    eta = None
    if rate and total and step is not None:
        eta = max(0.0, (total - step) / rate)
    return RunProgress(step=step, total=total, steps_per_s=rate, eta_s=eta)


def eval_metric_names(records: Sequence[RunRecord]) -> list[str]:
    """The eval metrics any of ``records`` logged (``accuracy``, ``auc``, ``loss``, ...), sorted."""
    return sorted({key.split("/", 1)[1] for r in records for key in r.summary if key.startswith("eval/")})


def default_metric(names: Sequence[str]) -> str | None:
    """The metric the runs table ranks by unless the user picks another."""
    for name in ("accuracy", "auc", "loss", "average_loss"):
        if name in names:
            return name
    return names[0] if names else None


def metric_columns(metric: str | None) -> tuple[str, str, str]:
    """The Runs table's columns of the eval ``metric``: its final value, its best value and the step
    of the best (``metric_values.metric_label``), e.g. ``('final eval accuracy', 'best eval
    accuracy', 'best at step')``."""
    if not metric:
        return "final eval", "best eval", "best at step"
    return metric_label(metric, FINAL), metric_label(metric, BEST), "best at step"


def hub_frame(records: Sequence[RunRecord], root: Path, metric: str | None = None,
              positions: Mapping[str, int] | None = None, now: float | None = None) -> pd.DataFrame:
    """The Runs page's table, one row per run in ``records`` order: name, status (with 'stalled'),
    action, progress (fraction, ETA, place in the queue), dataset, template, steps, the final and
    the best value of the eval ``metric`` and the step of the best (``metric_columns``), the
    smoothed train loss, created, duration, tags, owner, run id, then one
    column per param that differs.

    Reads only the registry rows and the last few kB of each run's ``metrics.jsonl`` (cached by
    file size and time), never whole metrics files."""
    now = time.time() if now is None else now
    diff = differing_params(records)
    final_column, best_column, step_column = metric_columns(metric)
    rows = []
    for r in records:
        progress = run_progress(r, root, positions, now)
        final = metric_value(r.summary, metric, FINAL) if metric else None
        best = metric_value(r.summary, metric, BEST) if metric else None
        row = {
            "run": r.run_id,
            "name": r.name,
            "status": display_status(r),
            "action": r.action,
            "progress": progress.fraction,
            "ETA": progress.eta_text(),
            "queue": progress.queue_position,
            "dataset": dataset_name(r),
            "template": r.template_name or "",
            "steps": progress.step,
            final_column: final.value if final else None,
            best_column: best.value if best else None,
            step_column: best.step if best else None,
            "smoothed loss": smoothed_train_loss(_metrics_path(root, r.run_id)),
            "created": _dt.datetime.fromtimestamp(r.created_at),
            "duration": _fmt_duration(_duration(r, now)),
            "tags": ", ".join(r.tags),
            "owner": r.owner or "",  # who submitted it (issue 26.4); empty for runs from before owners
        }
        for key in diff:
            value = r.params.get(key)
            row[f"param: {key}"] = value if isinstance(value, (int, float, str, bool)) or value is None else repr(value)
        rows.append(row)
    columns = ["name", "status", "action", "progress", "ETA", "queue", "dataset", "template", "steps",
               final_column, best_column, step_column, "smoothed loss", "created", "duration", "tags", "owner",
               "run"] + [f"param: {k}" for k in diff]
    frame = pd.DataFrame(rows, columns=columns)
    for column in ("steps", "queue", step_column):
        frame[column] = pd.to_numeric(frame[column], errors="coerce").astype("Int64")
    for column in ("progress", final_column, best_column, "smoothed loss"):
        frame[column] = pd.to_numeric(frame[column], errors="coerce").astype("float64")
    return frame


def finished_runs_for_start(records: Sequence[RunRecord]) -> list[RunRecord]:
    """The runs a new run can start from (warm start, "Start from"): finished training runs and
    TensorFlow imports (not queued or running, not in the trash when ``records`` comes from ``list_runs()``), newest
    first. Label them with ``start_from_label``."""
    out = [r for r in records if r.action in MODEL_ACTIONS and r.is_finished]
    return sorted(out, key=lambda r: r.created_at, reverse=True)


def start_from_label(record: RunRecord) -> str:
    """``name · status · step N · id`` for a "Start from" picker.

    Example:
        >>> start_from_label(record)                       # doctest: +SKIP
        'iris mlp · succeeded · step 500 · r-20260101-abc123'
    """
    step = _last_step(record)
    parts = [record.name, display_status(record)] + ([f"step {step}"] if step is not None else []) + [record.run_id]
    return " · ".join(parts)
