"""Pure helpers of the run pages: run table, parameter differences, checkpoints, summary and
series CSV. They take and return plain data (no Streamlit), so unit tests check them directly."""

from __future__ import annotations

import datetime as _dt
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from workbench.store import metrics_store, paths
from workbench.store.records import RunRecord

__all__ = ['STATUS_ICONS', 'differing_params', 'filter_runs', 'list_checkpoints', 'runs_frame', 'series_csv', 'summary_frame']


STATUS_ICONS = {"queued": ":material/schedule:", "running": ":material/directions_run:",
                "succeeded": ":material/check_circle:", "failed": ":material/error:",
                "stopped": ":material/stop_circle:", "cancelled": ":material/cancel:",
                "lost": ":material/help:", "stalled": ":material/hourglass_disabled:"}


_STATUS_COLOURS = {"queued": "gray", "running": "blue", "succeeded": "green", "failed": "red",
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


def _best_eval(summary: Mapping[str, Mapping[str, Any]]) -> tuple[str, Any]:
    for name in ("eval/accuracy", "eval/auc", "eval/loss", "eval/average_loss"):
        if name in summary:
            return name.split("/", 1)[1], summary[name].get("best")
    for name, entry in summary.items():
        if name.startswith("eval/"):
            return name.split("/", 1)[1], entry.get("best")
    return "", None


def runs_frame(records: Sequence[RunRecord], now: float | None = None) -> pd.DataFrame:
    """The runs table: id, name, status, action, template, dataset, step, last loss (the train
    loss, else the eval loss of an evaluate run), best eval metric, duration, created, tags, then
    one column per param that differs between runs."""
    now = time.time() if now is None else now
    diff = differing_params(records)
    rows = []
    for r in records:
        # an evaluate run has no train loss: its eval loss and the checkpoint's step instead
        loss = r.summary.get("train/loss") or r.summary.get("eval/loss") or {}
        metric, best = _best_eval(r.summary)
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
            "best eval": best,
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
               "best eval", "eval metric", "duration", "created", "tags"] + [f"param: {k}" for k in diff]
    frame = pd.DataFrame(rows, columns=columns)
    for column in ("step",):
        frame[column] = pd.to_numeric(frame[column], errors="coerce").astype("Int64")
    for column in ("last loss", "best eval"):
        frame[column] = pd.to_numeric(frame[column], errors="coerce").astype("float64")
    return frame


def filter_runs(records: Sequence[RunRecord], statuses: Sequence[str] = (), text: str = "") -> list[RunRecord]:
    """Runs whose status is in ``statuses`` (all when empty) and whose id, name, template or tags
    match ``text`` (a case-insensitive regex; a bad regex is matched literally)."""
    out = [r for r in records if not statuses or r.status in statuses]
    if text:
        try:
            pattern = re.compile(text, re.IGNORECASE)
        except re.error:
            pattern = re.compile(re.escape(text), re.IGNORECASE)
        out = [r for r in out if pattern.search(" ".join([r.run_id, r.name, r.template_name or "", *r.tags]))]
    return out


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
        from workbench.data.predictions import escape_formulas

        # Run names and metric names are user text: '=cmd|...' must not run in a spreadsheet.
        table = escape_formulas(pd.concat(frames, ignore_index=True))
        return table.to_csv(index=False).encode("utf-8")

    return build


def summary_frame(summary: Mapping[str, Mapping[str, Any]]) -> pd.DataFrame:
    """The registry's summary metrics as a table: split, metric, last, step, best, best step."""
    rows = []
    for key, entry in sorted(summary.items()):
        split, _, name = key.partition("/")
        rows.append({"split": split, "metric": name, "last": entry.get("last"),
                     "last step": entry.get("last_step"), "best": entry.get("best"),
                     "best step": entry.get("best_step")})
    return pd.DataFrame(rows, columns=["split", "metric", "last", "last step", "best", "best step"])


def _probability_columns(frame: pd.DataFrame) -> list[str]:
    return [c for c in frame.columns if str(c).startswith(("probability_", "probabilities_"))]
