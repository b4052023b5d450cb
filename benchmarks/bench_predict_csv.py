"""Benchmark 4: 1,000,000 rows through ``Estimator.predict`` to a CSV file: rows/s and peak RSS.

Workload: the mid MLP 20-64-32-3 (trained 100 steps), predicting ``class_ids`` and
``probabilities`` for a 1,000,000-row frame (an ``id`` column + 20 float features), batch 1,024,
written as ``id, class_ids, probability_0..2``.

* engine: ``estimator_workbench.data.predictions.write_predictions_csv`` (streaming, 10,000-row chunks, atomic
  rename) when ``estimator_workbench.data.predictions`` imports; otherwise the benchmark's own streaming writer
  over ``estimator.predict(yield_single_examples=False)`` (the JSON says which);
* reference: a hand-written loop -- ``model(x[chunk])`` under ``torch.no_grad()`` for the same
  batches, softmax/argmax, and the same ``DataFrame.to_csv`` appends per 10,000 rows.

Both sides start from the same ``DataFrame`` and the timed region, and the memory figure, include
turning it into model input (the engine: ``frame[columns].to_numpy()`` + ``numpy_input_fn``; the
reference: the same ``to_numpy()`` + ``torch.from_numpy``): a user pays that conversion either way.

Peak RSS growth = the kernel's peak RSS (VmHWM, reset before the call) minus the RSS just before
the call (model loaded, frame in memory), for both sides. Targets: engine rows/s >= 0.9 of the
reference's (per-round ratio, median of alternated pairs), engine growth < 200 MB.

    python benchmarks/bench_predict_csv.py [--rows 1000000] [--rounds 5] [--quick] [--json out.json]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
import warnings
from typing import Any

import _common as c
import numpy as np
import pandas as pd
import torch
from bench_train_overhead import make_model_fn

import estimator_engine as ee

TARGET_MB = 200.0
TARGET_RATIO = 0.9
FEATURES = [f"f{i:02d}" for i in range(20)]
BATCH = 1024
CHUNK = 10_000


def make_frame(rows: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, 20), dtype=np.float32)
    frame = pd.DataFrame(x, columns=[f"f{i:02d}" for i in range(20)])
    frame.insert(0, "id", np.arange(rows, dtype=np.int64))
    return frame


def predict_model_fn():
    base = make_model_fn("mid")

    def model_fn(features, labels, mode):
        if mode != ee.ModeKeys.PREDICT:
            return base(features, labels, mode)
        logits = ee.get_module("net", lambda: None)(features["x"])
        return ee.EstimatorSpec(mode, predictions={"class_ids": logits.argmax(dim=1),
                                                   "probabilities": torch.softmax(logits, dim=1)})

    return model_fn


def _fallback_writer(estimator: ee.Estimator, input_fn: Any, frame: pd.DataFrame, out: str) -> int:
    """A streaming CSV writer over batched predictions (used when estimator_workbench.data.predictions is absent)."""
    written, header = 0, True
    pending: list[dict[str, np.ndarray]] = []
    n_pending = 0

    def flush() -> None:
        nonlocal written, header, pending, n_pending
        if not n_pending:
            return
        chunk = pd.DataFrame({"id": frame["id"].to_numpy()[written:written + n_pending],
                              "class_ids": np.concatenate([p["class_ids"] for p in pending])})
        probabilities = np.concatenate([p["probabilities"] for p in pending])
        for k in range(probabilities.shape[1]):
            chunk[f"probability_{k}"] = probabilities[:, k]
        chunk.to_csv(out, mode="w" if header else "a", header=header, index=False)
        header, written, pending, n_pending = False, written + n_pending, [], 0

    for batch in estimator.predict(input_fn, yield_single_examples=False):
        pending.append(batch)
        n_pending += len(batch["class_ids"])
        if n_pending >= CHUNK:
            flush()
    flush()
    return written


def engine_write(estimator: ee.Estimator, frame: pd.DataFrame, out: str) -> tuple[float, float, str]:
    try:
        from estimator_workbench.data.predictions import write_predictions_csv
    except ImportError:
        write_predictions_csv = None
    with c.PeakRSS() as peak:
        start = time.perf_counter()
        features = {"x": frame[FEATURES].to_numpy()}  # the input conversion is part of the work
        input_fn = ee.inputs.numpy_input_fn(features, batch_size=BATCH, shuffle=False)
        if write_predictions_csv is not None:
            info = write_predictions_csv(estimator, input_fn, frame, out, id_columns=["id"], chunk_rows=CHUNK)
            rows, writer = info["rows"], "estimator_workbench.data.predictions.write_predictions_csv"
        else:
            rows, writer = _fallback_writer(estimator, input_fn, frame, out), "benchmark fallback writer"
        seconds = time.perf_counter() - start
    return rows / seconds, peak.growth_mb, writer


def plain_write(model: torch.nn.Module, frame: pd.DataFrame, out: str) -> tuple[float, float]:
    with c.PeakRSS() as peak, torch.no_grad():
        start = time.perf_counter()
        with warnings.catch_warnings():  # pandas' Copy-on-Write hands out a read-only view: fine here
            warnings.simplefilter("ignore", UserWarning)
            x = torch.from_numpy(frame[FEATURES].to_numpy())  # the same conversion as the engine's
        ids = frame["id"].to_numpy()
        header = True
        for offset in range(0, len(x), CHUNK):
            parts = [model(x[i:i + BATCH]) for i in range(offset, min(offset + CHUNK, len(x)), BATCH)]
            logits = torch.cat(parts)
            probabilities = torch.softmax(logits, dim=1).numpy()
            chunk = pd.DataFrame({"id": ids[offset:offset + len(logits)],
                                  "class_ids": logits.argmax(dim=1).numpy()})
            for k in range(probabilities.shape[1]):
                chunk[f"probability_{k}"] = probabilities[:, k]
            chunk.to_csv(out, mode="w" if header else "a", header=header, index=False)
            header = False
        seconds = time.perf_counter() - start
    return len(x) / seconds, peak.growth_mb


def run(rows: int, rounds: int) -> dict[str, Any]:
    frame = make_frame(rows)
    work = tempfile.mkdtemp(prefix="bench_csv_")
    try:
        model_dir = os.path.join(work, "model")
        x = torch.from_numpy(frame[[f"f{i:02d}" for i in range(20)]].to_numpy()[:10_000].copy())
        y = x[:, :3].argmax(dim=1)
        estimator = ee.Estimator(predict_model_fn(), model_dir=model_dir)
        estimator.train(ee.inputs.numpy_input_fn({"x": x}, y, batch_size=128, num_epochs=None, shuffle=True),
                        steps=100)
        # The reference gets the very same weights from the checkpoint.
        model = torch.nn.Sequential(torch.nn.Linear(20, 64), torch.nn.ReLU(), torch.nn.Linear(64, 32),
                                    torch.nn.ReLU(), torch.nn.Linear(32, 3))
        names = [n for n in estimator.get_variable_names() if n.startswith("net/")]
        model.load_state_dict({n[len("net/"):].replace("/", "."): torch.as_tensor(estimator.get_variable_value(n))
                               for n in names})
        model.eval()
        out_engine, out_plain = os.path.join(work, "engine.csv"), os.path.join(work, "plain.csv")
        engine_write(estimator, frame.iloc[:20_000], out_engine)  # warm-up
        engine_rates, engine_growth, plain_rates, plain_growth = [], [], [], []
        writer = ""

        def engine() -> float:
            nonlocal writer
            rate, growth, writer = engine_write(estimator, frame, out_engine)
            engine_rates.append(rate)
            engine_growth.append(growth)
            return rate

        def plain() -> float:
            rate, growth = plain_write(model, frame, out_plain)
            plain_rates.append(rate)
            plain_growth.append(growth)
            return rate

        measured = c.measure_pairs({"engine": engine, "plain": plain}, rounds, {"engine/plain": ("engine", "plain")})
        size_mb = os.path.getsize(out_engine) / 2**20
        same = pd.read_csv(out_engine, nrows=1000).round(5).equals(pd.read_csv(out_plain, nrows=1000).round(5))
        ratio = measured["ratios"]["engine/plain"]
        growth_engine, growth_plain = c.stats(engine_growth), c.stats(plain_growth)
        load = (measured["load_1m_before"], measured["load_1m_after"])
        result = {
            "benchmark": "predict_csv", "rows": rows, "batch": BATCH, "chunk_rows": CHUNK, "rounds": rounds,
            "writer": writer, "csv_mb": size_mb, "first_1000_rows_equal_to_reference": bool(same),
            "input_conversion_timed": True, "measured": measured,
            "engine_rows_per_sec": measured["sides"]["engine"]["median"],
            "plain_rows_per_sec": measured["sides"]["plain"]["median"],
            "engine_over_plain": ratio["median"],
            "engine_peak_rss_growth_mb": growth_engine["max"], "plain_peak_rss_growth_mb": growth_plain["max"],
            "growth_mb": {"engine": growth_engine, "plain": growth_plain},
            "rss_after_mb": c.rss_mb(), "target_growth_mb": TARGET_MB, "target_ratio": TARGET_RATIO,
            "targets": [
                c.target_row("predict_csv_speed", f"predict {rows:,} rows to CSV, rows/s / a hand-written loop "
                             "(input conversion timed on both sides)", ratio, ">= 0.9",
                             higher_is_better=True, threshold=TARGET_RATIO, load=load),
                c.target_row("predict_csv_memory", f"predict {rows:,} rows to CSV, engine peak RSS growth "
                             f"(input conversion included; reference: {growth_plain['median']:.0f} MB)",
                             growth_engine, "< 200 MB", unit="MB", higher_is_better=False,
                             threshold=TARGET_MB, load=load),
            ],
        }
        result["met"] = (result["engine_peak_rss_growth_mb"] < TARGET_MB and ratio["median"] >= TARGET_RATIO)
        return result
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="smoke run: 50,000 rows, 1 round")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    if args.quick:
        args.rows, args.rounds = 50_000, 1
    c.quiet_engine()
    torch.set_num_threads(1)
    r = run(args.rows, args.rounds)
    c.print_table(["system", "rows/s", "peak RSS growth MB", f"<{TARGET_MB:.0f} MB"], [
        ["engine: " + r["writer"], r["engine_rows_per_sec"], f"{r['engine_peak_rss_growth_mb']:.1f}",
         "yes" if r["engine_peak_rss_growth_mb"] < TARGET_MB else "NO"],
        ["reference: hand-written loop + to_csv", r["plain_rows_per_sec"], f"{r['plain_peak_rss_growth_mb']:.1f}", ""],
    ], title=f"Predictions to CSV, {args.rows:,} rows ({r['csv_mb']:.0f} MB file), medians of {args.rounds} pairs")
    ratio = r["measured"]["ratios"]["engine/plain"]
    print(f"engine/reference rows/s: {ratio['median']:.3f} ({ratio['min']:.2f}-{ratio['max']:.2f}), target >= "
          f"{TARGET_RATIO}; load {r['measured']['load_1m_before']:.1f}/{r['measured']['load_1m_after']:.1f}; first 1000 rows equal: "
          f"{r['first_1000_rows_equal_to_reference']}")
    c.write_json(r, args.json)


if __name__ == "__main__":
    main()
