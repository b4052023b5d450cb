"""Shared helpers of the benchmark scripts: paired timing, medians, peak RSS, tables, JSON.

Every benchmark compares the engine with a named reference measured in the same process,
alternating the order pair by pair (ABBA...) so that a neighbour's load on a shared machine hits
both sides alike; results are medians and ratios of medians, with the spread reported as noise.

Not a test module: pytest never collects it (no ``test_`` prefix).
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import os
import platform
import statistics
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "REPO_ROOT",
    "RESULTS_DIR",
    "PeakRSS",
    "Stats",
    "load_1m",
    "machine_info",
    "measure_pairs",
    "median",
    "noise",
    "paired",
    "print_table",
    "quiet_engine",
    "rss_mb",
    "stats",
    "target_row",
    "write_json",
]

REPO_ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = REPO_ROOT / "benchmarks" / "results"
if str(REPO_ROOT) not in sys.path:  # `python benchmarks/x.py` from anywhere imports the repo
    sys.path.insert(0, str(REPO_ROOT))


def quiet_engine() -> None:
    """Silences the engine's INFO logging (it would be timed, and it floods the table)."""
    logging.getLogger("estimator_engine").setLevel(logging.WARNING)
    logging.getLogger("estimator_workbench").setLevel(logging.WARNING)


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def noise(values: Sequence[float]) -> float:
    """Relative spread of repeated measurements: (max - min) / median."""
    if len(values) < 2:
        return 0.0
    mid = statistics.median(values)
    return float((max(values) - min(values)) / mid) if mid else 0.0


def paired(fns: dict[str, Callable[[], float]], pairs: int) -> dict[str, list[float]]:
    """Runs every fn once per round in an alternating order; returns name -> values.

    Round r rotates the names by r // 2 and reverses them on odd rounds: ab, ba, ba, ab, ... for two
    (ABBA: each side goes first equally often), and every position for more. (Rotating by r *and*
    reversing on odd rounds, as before, gave ab, ab, ab, ... for two sides: never alternated.)
    """
    names = list(fns)
    out: dict[str, list[float]] = {name: [] for name in names}
    for round_ in range(pairs):
        shift = (round_ // 2) % len(names)
        order = names[shift:] + names[:shift]
        if round_ % 2 == 1:
            order = order[::-1]
        for name in order:
            out[name].append(fns[name]())
    return out


Stats = dict[str, Any]  # {"median", "min", "max", "n", "raw"}


def stats(values: Sequence[float]) -> Stats:
    """Median, min and max of repeated measurements, with the raw values kept."""
    vals = [float(v) for v in values]
    if not vals:
        return {"median": None, "min": None, "max": None, "n": 0, "raw": []}
    return {"median": median(vals), "min": min(vals), "max": max(vals), "n": len(vals), "raw": vals}


def load_1m() -> float:
    """The 1-minute load average (other processes on the shared machine)."""
    return float(os.getloadavg()[0])


def _torch_threads() -> int | None:
    torch = sys.modules.get("torch")
    return torch.get_num_threads() if torch is not None else None


def measure_pairs(fns: dict[str, Callable[[], float]], rounds: int,
                  ratios: dict[str, tuple[str, str]] | None = None) -> dict[str, Any]:
    """Alternated pairs: every fn once per round, the order rotated and reversed round by round.

    ``fns`` map a side's name to a call returning one measurement (e.g. steps/s). ``ratios`` map a
    ratio's name to ``(numerator side, denominator side)``; each ratio is taken within a round (the
    two sides ran back to back, under the same load) and then summarised over the rounds.

    Returns ``{"rounds", "sides": {name: Stats}, "ratios": {name: Stats}, "load_1m_before",
    "load_1m_after", "torch_threads"}``; every benchmark reports through it, so every figure is a
    median with its min and max and the load it was measured under.

    Example:
        >>> r = measure_pairs({"a": lambda: 2.0, "b": lambda: 1.0}, 3, {"a/b": ("a", "b")})
        >>> r["ratios"]["a/b"]["median"], r["sides"]["a"]["n"]
        (2.0, 3)
    """
    before = load_1m()
    values = paired(fns, rounds)
    after = load_1m()
    out_ratios = {name: stats([a / b for a, b in zip(values[num], values[den])])
                  for name, (num, den) in (ratios or {}).items()}
    return {"rounds": rounds, "sides": {name: stats(v) for name, v in values.items()},
            "ratios": out_ratios, "load_1m_before": before, "load_1m_after": after,
            "torch_threads": _torch_threads()}


def target_row(key: str, measure: str, figure: Stats, target: str, *, unit: str = "",
               higher_is_better: bool | None = None, threshold: float | None = None,
               load: tuple[float, float] | None = None, note: str = "") -> dict[str, Any]:
    """One row of RESULTS.md's targets table: a figure (median, min, max) against its target.

    ``threshold`` with ``higher_is_better`` decides "met" on the median (``>=`` when higher is
    better, ``<`` otherwise); without them the row is informational. ``key`` is the stable name
    under which ``benchmarks/limits.md`` keeps a hand-written "what limits it" note.
    """
    met = None
    if threshold is not None and higher_is_better is not None and figure.get("median") is not None:
        met = figure["median"] >= threshold if higher_is_better else figure["median"] < threshold
    return {"key": key, "measure": measure, "median": figure.get("median"), "min": figure.get("min"),
            "max": figure.get("max"), "n": figure.get("n"), "unit": unit, "target": target, "met": met,
            "load_1m": list(load) if load else None, "note": note}


def rss_mb() -> float:
    """Current resident set size of this process, in MiB."""
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def _reset_peak() -> bool:
    try:  # Linux: writing 5 to clear_refs resets VmHWM (peak RSS) to the current RSS
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _hwm_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


class PeakRSS:
    """Context manager: peak RSS inside the block, and its growth over the RSS at entry (MiB).

    Uses the kernel's own peak (VmHWM, reset on entry) when it can be reset, else samples RSS
    every 5 ms on a thread.

    Example:
        >>> with PeakRSS() as peak:
        ...     block = bytearray(50 * 2**20)
        >>> peak.growth_mb > 40
        True
    """

    def __init__(self) -> None:
        self.start_mb = 0.0
        self.peak_mb = 0.0
        self.method = ""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def growth_mb(self) -> float:
        return self.peak_mb - self.start_mb

    def _sample(self) -> None:
        while not self._stop.wait(0.005):
            self.peak_mb = max(self.peak_mb, rss_mb())

    def __enter__(self) -> PeakRSS:
        self.start_mb = self.peak_mb = rss_mb()
        if _reset_peak():
            self.method = "VmHWM"
        else:
            self.method = "sampled"
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
        else:
            self.peak_mb = max(self.peak_mb, _hwm_mb())
        self.peak_mb = max(self.peak_mb, rss_mb())


def machine_info() -> dict[str, Any]:
    import torch

    return {
        "date": _dt.datetime.now().isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cpus": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "platform": platform.platform(),
        "load_avg_1m": os.getloadavg()[0],
    }


def print_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], title: str | None = None) -> None:
    """A plain fixed-width table on stdout (floats with 3 significant decimals)."""
    def cell(value: Any) -> str:
        if isinstance(value, float):
            return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"
        return str(value)

    text = [[cell(v) for v in row] for row in rows]
    widths = [max(len(str(h)), *(len(r[i]) for r in text)) for i, h in enumerate(headers)]
    if title:
        print(f"\n{title}")
    print("  ".join(str(h).ljust(w) for h, w in zip(headers, widths)))
    print("  ".join("-" * w for w in widths))
    for row in text:
        print("  ".join(v.rjust(w) if i else v.ljust(w) for i, (v, w) in enumerate(zip(row, widths))))


def write_json(result: dict[str, Any], path: str | os.PathLike[str] | None) -> None:
    """Writes ``result`` (with machine info) as JSON to ``path`` when one is given."""
    if not path:
        return
    result = {**result, "machine": machine_info(), "command": " ".join([Path(sys.executable).name, *sys.argv])}
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        json.dump(result, f, indent=2, default=str)
    print(f"wrote {path}")


def timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def classifier_model_fn(factory, module_name: str = "net"):
    """The benchmarks' model_fn: a classifier over ``features['x']`` built by ``factory``, with
    cross-entropy, Adam(1e-3) and an accuracy metric (the same work as their plain loops)."""
    import torch

    import estimator_engine as ee

    def model_fn(features, labels, mode):
        model = ee.get_module(module_name, factory)
        logits = model(features["x"])
        if mode == ee.ModeKeys.PREDICT:
            return ee.EstimatorSpec(mode, predictions={"class_ids": logits.argmax(dim=1)})
        loss = torch.nn.functional.cross_entropy(logits, labels)
        if mode == ee.ModeKeys.EVAL:
            return ee.EstimatorSpec(mode, loss=loss, eval_metric_ops={
                "accuracy": ee.metrics.accuracy(labels=labels, predictions=logits.argmax(dim=1))})
        optimizer = ee.get_optimizer("adam", lambda: torch.optim.Adam(model.parameters(), lr=1e-3))
        return ee.EstimatorSpec(mode, loss=loss, train_op=ee.minimize(optimizer, loss))

    return model_fn
