"""Benchmark 2: input pipeline rows/s: ``pandas_input_fn`` / ``numpy_input_fn`` vs ``DataLoader``.

A 1,000,000-row DataFrame with 6 float, 2 int, 2 categorical (``category`` dtype, 12 and 200
levels) and 1 text column, plus an int label. Each system yields shuffled batches of 128 rows
(every column of the batch materialised) and the benchmark iterates over them:

* ``pandas_input_fn``: the frame as it is (categories and text arrive as numpy ``str`` arrays);
* ``numpy_input_fn``: the same columns as numpy arrays (text columns as ``object`` arrays);
* ``numpy_input_fn (codes)``: every column numeric (categories as their integer codes, text as
  codes), the like-for-like input of the reference;
* reference ``DataLoader``, used as its best practice: ONE float32 tensor holding every numeric
  column (categories and text as their integer codes) plus the label tensor, in a
  ``TensorDataset`` read a whole batch at a time -- ``sampler=BatchSampler(RandomSampler(ds), 128,
  drop_last=False)`` with ``batch_size=None``, so each batch is one ``tensor[indices]`` gather
  (no per-row ``__getitem__``, no per-row collate, no per-column tensors); ``num_workers=0``
  (workers only add IPC for in-memory tensors).
* ``dataloader_per_row`` (information): the default ``DataLoader(TensorDataset, batch_size=128,
  shuffle=True)``, timed over its first ``--per-row-rows`` rows (it costs per row).

Rows/s counts only iteration (the one-time conversion of ``*_input_fn`` is reported apart as
``setup_s``); every system covers a whole epoch. Sides alternate round by round
(``_common.measure_pairs``); ratios are per round, then median (min-max).
Target: ``pandas_input_fn`` and ``numpy_input_fn`` >= 3x the best-practice DataLoader's rows/s.

    python benchmarks/bench_input_pipeline.py [--rows 1000000] [--rounds 5] [--quick] [--json out.json]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Iterable
from typing import Any

import _common as c
import numpy as np
import pandas as pd
import torch

import estimator_engine as ee

BATCH = 128
TARGET = 3.0


def make_frame(rows: int, seed: int = 0) -> tuple[pd.DataFrame, pd.Series]:
    rng = np.random.default_rng(seed)
    data: dict[str, Any] = {f"f{i}": rng.standard_normal(rows).astype(np.float32) for i in range(6)}
    data["i0"] = rng.integers(0, 100, rows)
    data["i1"] = rng.integers(-5, 5, rows)
    data["cat_small"] = pd.Categorical.from_codes(rng.integers(0, 12, rows),
                                                  categories=[f"c{i}" for i in range(12)])
    data["cat_large"] = pd.Categorical.from_codes(rng.integers(0, 200, rows),
                                                  categories=[f"level_{i}" for i in range(200)])
    words = np.array(["red", "green", "blue", "cyan", "magenta", "yellow", "black", "white"], dtype=object)
    data["text"] = pd.array(words[rng.integers(0, len(words), rows)], dtype="str")
    frame = pd.DataFrame(data)
    label = pd.Series(rng.integers(0, 3, rows), name="label")
    return frame, label


def numeric_columns(frame: pd.DataFrame) -> dict[str, np.ndarray]:
    out = {}
    for name in frame.columns:
        column = frame[name]
        if isinstance(column.dtype, pd.CategoricalDtype):
            out[name] = column.cat.codes.to_numpy().astype(np.int64)
        elif pd.api.types.is_numeric_dtype(column):
            out[name] = column.to_numpy()
        else:
            out[name] = pd.factorize(column)[0].astype(np.int64)
    return out


def consume(batches: Iterable[Any], max_rows: int | None = None) -> int:
    rows = 0
    for batch in batches:
        labels = batch[1] if isinstance(batch, (tuple, list)) else batch
        rows += len(labels)
        if max_rows is not None and rows >= max_rows:
            break
    return rows


def rate(make: Callable[[], Iterable[Any]], max_rows: int | None = None) -> tuple[float, float]:
    """(rows/s of iteration, setup seconds) of one pass."""
    start = time.perf_counter()
    batches = make()
    setup = time.perf_counter() - start
    start = time.perf_counter()
    rows = consume(batches, max_rows)
    return rows / (time.perf_counter() - start), setup


def best_practice_loader(numeric: dict[str, np.ndarray], y: np.ndarray) -> torch.utils.data.DataLoader:
    """One tensor for all numeric columns, gathered a batch at a time by a shuffled batch sampler."""
    features = torch.from_numpy(np.column_stack([v.astype(np.float32) for v in numeric.values()]))
    dataset = torch.utils.data.TensorDataset(features, torch.from_numpy(np.array(y, copy=True)))
    sampler = torch.utils.data.BatchSampler(torch.utils.data.RandomSampler(dataset), BATCH, drop_last=False)
    return torch.utils.data.DataLoader(dataset, sampler=sampler, batch_size=None)


SYSTEMS = ("pandas_input_fn", "numpy_input_fn", "numpy_input_fn_codes")
LABELS = {"pandas_input_fn": "pandas_input_fn (mixed frame as it is)",
          "numpy_input_fn": "numpy_input_fn (same columns, text as object arrays)",
          "numpy_input_fn_codes": "numpy_input_fn, all-numeric columns (like-for-like)"}


def run(rows: int, rounds: int, per_row_rows: int) -> dict[str, Any]:
    frame, label = make_frame(rows)
    numeric = numeric_columns(frame)
    raw = {name: (frame[name].to_numpy(dtype=object) if not pd.api.types.is_numeric_dtype(frame[name])
                  or isinstance(frame[name].dtype, pd.CategoricalDtype) else frame[name].to_numpy())
           for name in frame.columns}
    y = label.to_numpy()
    best_loader = best_practice_loader(numeric, y)
    per_row_dataset = torch.utils.data.TensorDataset(
        *[torch.from_numpy(np.array(v, copy=True)) for v in (*numeric.values(), y)])

    def pandas_fn() -> Iterable[Any]:
        return ee.inputs.pandas_input_fn(frame, label, batch_size=BATCH, num_epochs=1, shuffle=True)()

    def numpy_fn() -> Iterable[Any]:
        return ee.inputs.numpy_input_fn(raw, y, batch_size=BATCH, num_epochs=1, shuffle=True)()

    def numpy_codes_fn() -> Iterable[Any]:
        return ee.inputs.numpy_input_fn(numeric, y, batch_size=BATCH, num_epochs=1, shuffle=True)()

    def loader() -> Iterable[Any]:
        return iter(best_loader)

    def per_row_loader() -> Iterable[Any]:
        return ((b[:-1], b[-1]) for b in torch.utils.data.DataLoader(per_row_dataset, batch_size=BATCH,
                                                                      shuffle=True))

    setups: dict[str, list[float]] = {name: [] for name in SYSTEMS}

    def engine(name: str, make: Callable[[], Iterable[Any]]) -> Callable[[], float]:
        def fn() -> float:
            value, setup = rate(make)
            setups[name].append(setup)
            return value
        return fn

    rate(loader, 10_000)  # warm-up
    rate(numpy_codes_fn, 10_000)
    measured = c.measure_pairs({
        "pandas_input_fn": engine("pandas_input_fn", pandas_fn),
        "numpy_input_fn": engine("numpy_input_fn", numpy_fn),
        "numpy_input_fn_codes": engine("numpy_input_fn_codes", numpy_codes_fn),
        "dataloader": lambda: rate(loader)[0],
    }, rounds, {name: (name, "dataloader") for name in SYSTEMS})
    per_row = c.stats([rate(per_row_loader, per_row_rows)[0] for _ in range(max(1, min(rounds, 3)))])
    load = (measured["load_1m_before"], measured["load_1m_after"])
    systems: dict[str, Any] = {}
    targets = []
    for name in SYSTEMS:
        ratio = measured["ratios"][name]
        systems[name] = {"rows_per_sec": measured["sides"][name], "over_dataloader": ratio,
                         "setup_s": c.stats(setups[name])}
        if name != "numpy_input_fn_codes":
            targets.append(c.target_row(f"input_{name}", f"{LABELS[name]} rows/s / best-practice DataLoader "
                                        f"(one tensor, batch sampler), {rows:,} rows", ratio, ">= 3x",
                                        unit="x", higher_is_better=True, threshold=TARGET, load=load))
        else:
            targets.append(c.target_row(f"input_{name}", f"{LABELS[name]} rows/s / best-practice DataLoader",
                                        ratio, "(info)", unit="x", load=load))
    systems["dataloader"] = {"rows_per_sec": measured["sides"]["dataloader"]}
    systems["dataloader_per_row"] = {"rows_per_sec": per_row, "timed_rows": per_row_rows}
    met = all(systems[n]["over_dataloader"]["median"] >= TARGET for n in ("pandas_input_fn", "numpy_input_fn"))
    return {"benchmark": "input_pipeline", "rows": rows, "batch": BATCH, "rounds": rounds,
            "columns": {name: str(frame[name].dtype) for name in frame.columns},
            "reference": "DataLoader(TensorDataset(one float32 tensor, labels), sampler=BatchSampler("
                         "RandomSampler, 128), batch_size=None)",
            "measured": measured, "systems": systems, "targets": targets, "target": TARGET, "met": met}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--per-row-rows", type=int, default=100_000,
                        help="rows timed of the per-row (default) DataLoader, shown for information")
    parser.add_argument("--quick", action="store_true", help="smoke run: 100,000 rows, 1 round")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    if args.quick:
        args.rows, args.rounds, args.per_row_rows = 100_000, 1, 10_000
    c.quiet_engine()
    torch.set_num_threads(1)
    result = run(args.rows, args.rounds, args.per_row_rows)
    rows = []
    for name, s in result["systems"].items():
        ratio = s.get("over_dataloader")
        rows.append([name, s["rows_per_sec"]["median"],
                     "-" if ratio is None else f"{ratio['median']:.2f} ({ratio['min']:.2f}-{ratio['max']:.2f})",
                     f"{s['setup_s']['median']:.2f}" if "setup_s" in s else "-"])
    m = result["measured"]
    c.print_table(["system", "rows/s", "x DataLoader (min-max)", "setup s"], rows,
                  title=f"Input pipeline, {args.rows:,} rows, batch {BATCH}, shuffled (medians of {args.rounds} "
                        f"alternated rounds; load {m['load_1m_before']:.1f}/{m['load_1m_after']:.1f})")
    print(f"target: pandas/numpy_input_fn >= {TARGET}x DataLoader -> {'met' if result['met'] else 'MISSED'}")
    c.write_json(result, args.json)


if __name__ == "__main__":
    main()
