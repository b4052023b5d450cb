"""Benchmark 2: input pipeline rows/s: ``pandas_input_fn`` / ``numpy_input_fn`` vs ``DataLoader``.

A 1,000,000-row DataFrame with 6 float, 2 int, 2 categorical (``category`` dtype, 12 and 200
levels) and 1 text column, plus an int label. Each system yields shuffled batches of 128 rows
(every column of the batch materialised) and the benchmark iterates over them:

* ``pandas_input_fn``: the frame as it is (categories and text arrive as numpy ``str`` arrays);
* ``numpy_input_fn``: the same columns as numpy arrays (text columns as ``object`` arrays);
* ``numpy_input_fn (codes)``: every column numeric (categories as their integer codes, text as
  codes), the like-for-like input of the reference;
* reference ``DataLoader``: ``DataLoader(TensorDataset(*columns), batch_size=128, shuffle=True)``
  over the numeric version (a ``TensorDataset`` cannot hold text), default settings
  (``num_workers=0``, the default collate).

Rows/s counts only iteration (the one-time conversion of ``*_input_fn`` is reported apart as
``setup_s``). The DataLoader is timed over its first ``--dataloader-rows`` rows (it costs per row,
so its rate does not depend on how far it gets); the engine's functions over a whole epoch.
Target: ``pandas_input_fn`` and ``numpy_input_fn`` >= 3x the DataLoader's rows/s.

    python benchmarks/bench_input_pipeline.py [--rows 1000000] [--rounds 3] [--json out.json]
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


def run(rows: int, rounds: int, dataloader_rows: int) -> dict[str, Any]:
    frame, label = make_frame(rows)
    numeric = numeric_columns(frame)
    raw = {name: (frame[name].to_numpy(dtype=object) if not pd.api.types.is_numeric_dtype(frame[name])
                  or isinstance(frame[name].dtype, pd.CategoricalDtype) else frame[name].to_numpy())
           for name in frame.columns}
    y = label.to_numpy()
    tensors = [torch.from_numpy(np.array(v, copy=True)) for v in (*numeric.values(), y)]
    dataset = torch.utils.data.TensorDataset(*tensors)

    def pandas_fn() -> Iterable[Any]:
        return ee.inputs.pandas_input_fn(frame, label, batch_size=BATCH, num_epochs=1, shuffle=True)()

    def numpy_fn() -> Iterable[Any]:
        return ee.inputs.numpy_input_fn(raw, y, batch_size=BATCH, num_epochs=1, shuffle=True)()

    def numpy_codes_fn() -> Iterable[Any]:
        return ee.inputs.numpy_input_fn(numeric, y, batch_size=BATCH, num_epochs=1, shuffle=True)()

    def loader() -> Iterable[Any]:
        return ((b[:-1], b[-1]) for b in torch.utils.data.DataLoader(dataset, batch_size=BATCH, shuffle=True))

    setups: dict[str, list[float]] = {"pandas_input_fn": [], "numpy_input_fn": [], "numpy_input_fn_codes": []}

    def engine(name: str, make: Callable[[], Iterable[Any]]) -> Callable[[], float]:
        def fn() -> float:
            value, setup = rate(make)
            setups[name].append(setup)
            return value
        return fn

    rate(loader, 10_000)  # warm-up
    rate(numpy_codes_fn, 10_000)
    values = c.paired({
        "pandas_input_fn": engine("pandas_input_fn", pandas_fn),
        "numpy_input_fn": engine("numpy_input_fn", numpy_fn),
        "numpy_input_fn_codes": engine("numpy_input_fn_codes", numpy_codes_fn),
        "dataloader": lambda: rate(loader, dataloader_rows)[0],
    }, rounds)
    reference = c.median(values["dataloader"])
    systems = {}
    for name, vals in values.items():
        systems[name] = {"rows_per_sec": c.median(vals), "noise": c.noise(vals), "raw": vals,
                         "over_dataloader": c.median(vals) / reference,
                         "setup_s": c.median(setups[name]) if setups.get(name) else 0.0}
    met = all(systems[n]["over_dataloader"] >= TARGET for n in ("pandas_input_fn", "numpy_input_fn"))
    return {"benchmark": "input_pipeline", "rows": rows, "batch": BATCH, "rounds": rounds,
            "columns": {name: str(frame[name].dtype) for name in frame.columns},
            "systems": systems, "target": TARGET, "met": met}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dataloader-rows", type=int, default=200_000)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    c.quiet_engine()
    torch.set_num_threads(1)
    result = run(args.rows, args.rounds, args.dataloader_rows)
    rows = [[name, s["rows_per_sec"], s["over_dataloader"], f"{s['setup_s']:.2f}", f"{s['noise']:.0%}"]
            for name, s in result["systems"].items()]
    c.print_table(["system", "rows/s", "x DataLoader", "setup s", "noise"], rows,
                  title=f"Input pipeline, {args.rows:,} rows, batch {BATCH}, shuffled "
                        f"(medians of {args.rounds} alternated rounds)")
    print(f"target: pandas/numpy_input_fn >= {TARGET}x DataLoader -> {'met' if result['met'] else 'MISSED'}")
    c.write_json(result, args.json)


if __name__ == "__main__":
    main()
