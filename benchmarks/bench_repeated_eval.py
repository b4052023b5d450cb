"""Benchmark 3: repeated ``evaluate`` / ``predict`` against an unchanged checkpoint.

tf.estimator rebuilds the graph and reloads the checkpoint on every call; the engine caches the
built model while the newest checkpoint on disk is unchanged. Workload: the mid MLP 20-64-32-3
trained for 200 steps (default RunConfig); a *fresh* ``Estimator`` on that ``model_dir`` (as a
new process or the UI would have) then makes 20 ``evaluate`` calls on a 1,000-row eval set
(batch 128, accuracy metric), and another fresh one 20 ``predict`` calls (all 1,000 rows consumed).

Reference: the first call of the same Estimator (it builds the model and loads the checkpoint).
Also shown: a fresh Estimator per call (what every tf.estimator call pays), and a hand-written
``no_grad`` loop over the same batches with the model already in memory (the floor of a call). Figure: median time of
calls 2..20 / time of call 1, median over ``--rounds`` sequences. Target: < 0.3.

Each round's ratio is taken within its own sequence; reported as median (min-max) over rounds,
with the load average before and after.

    python benchmarks/bench_repeated_eval.py [--calls 20] [--rounds 5] [--quick] [--json out.json]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from typing import Any

import _common as c
import torch
from bench_train_overhead import MODELS, make_data, make_model_fn

import estimator_engine as ee

TARGET = 0.3
EVAL_ROWS = 1000


def _evaluate(estimator: ee.Estimator, x: torch.Tensor, y: torch.Tensor) -> float:
    start = time.perf_counter()
    estimator.evaluate(ee.inputs.numpy_input_fn({"x": x}, y, batch_size=128, shuffle=False))
    return time.perf_counter() - start


def _predict(estimator: ee.Estimator, x: torch.Tensor, y: torch.Tensor) -> float:
    start = time.perf_counter()
    for _ in estimator.predict(ee.inputs.numpy_input_fn({"x": x}, batch_size=128, shuffle=False)):
        pass
    return time.perf_counter() - start


def _plain(kind: str, net: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    """The hand-written reference of one call: a ``no_grad`` loop over the same 128-row batches
    (loss and accuracy for evaluate, class ids for predict), the model already in memory."""
    start = time.perf_counter()
    with torch.no_grad():
        net.eval()
        loss, correct = 0.0, 0
        for i in range(0, len(x), 128):
            logits = net(x[i:i + 128])
            ids = logits.argmax(dim=1)
            if kind == "evaluate":
                loss += torch.nn.functional.cross_entropy(logits, y[i:i + 128]).item()
                correct += int((ids == y[i:i + 128]).sum())
            else:
                ids.tolist()
    return time.perf_counter() - start


def run(calls: int, rounds: int) -> dict[str, Any]:
    x, y = make_data("mid")
    x_eval, y_eval = x[:EVAL_ROWS], y[:EVAL_ROWS]
    model_dir = tempfile.mkdtemp(prefix="bench_repeat_")
    try:
        ee.Estimator(make_model_fn("mid"), model_dir=model_dir).train(
            ee.inputs.numpy_input_fn({"x": x}, y, batch_size=128, num_epochs=None, shuffle=True), steps=200)
        # Warm-up of the process (imports, kernels), on a separate Estimator.
        _evaluate(ee.Estimator(make_model_fn("mid"), model_dir=model_dir), x_eval, y_eval)
        out: dict[str, Any] = {}
        targets = []
        for kind, call in (("evaluate", _evaluate), ("predict", _predict)):
            sequences, fresh = [], []
            load_before = c.load_1m()
            for _ in range(rounds):
                estimator = ee.Estimator(make_model_fn("mid"), model_dir=model_dir)
                sequences.append([call(estimator, x_eval, y_eval) for _ in range(calls)])
                # The TF-like reference: a new Estimator (rebuild + reload) for each of 5 calls.
                fresh.append(c.median([call(ee.Estimator(make_model_fn("mid"), model_dir=model_dir),
                                            x_eval, y_eval) for _ in range(5)]))
            net = MODELS["mid"][0]()
            plain = c.median([_plain(kind, net, x_eval, y_eval) for _ in range(calls)])
            ratios = [c.median(seq[1:]) / seq[0] for seq in sequences]
            load = (load_before, c.load_1m())
            targets.append(c.target_row(
                f"repeated_{kind}", f"repeated {kind} ({EVAL_ROWS:,} rows, fresh Estimator): median of calls "
                f"2..{calls} / call 1", c.stats(ratios), "< 0.3", higher_is_better=False, threshold=TARGET,
                load=load))
            out[kind] = {
                "later_over_first_stats": c.stats(ratios), "load_1m": list(load),
                "torch_threads": torch.get_num_threads(),
                "first_call_s": c.median([seq[0] for seq in sequences]),
                "later_call_s": c.median([c.median(seq[1:]) for seq in sequences]),
                "later_over_first": c.median(ratios),
                "later_over_first_per_round": ratios,
                "fresh_estimator_per_call_s": c.median(fresh),
                "plain_loop_s": plain,
                "later_over_plain": c.median([c.median(s[1:]) for s in sequences]) / plain,
                "later_over_fresh": c.median([c.median(s[1:]) for s in sequences]) / c.median(fresh),
                "noise_later": c.noise([t for seq in sequences for t in seq[1:]]),
                "sequences": sequences,
                "target": TARGET,
            }
            out[kind]["met"] = out[kind]["later_over_first"] < TARGET
        return {"benchmark": "repeated_eval", "calls": calls, "rounds": rounds, "eval_rows": EVAL_ROWS,
                "results": out, "targets": targets, "met": all(v["met"] for v in out.values())}
    finally:
        shutil.rmtree(model_dir, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="smoke run: 5 calls, 1 round")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    if args.quick:
        args.calls, args.rounds = 5, 1
    c.quiet_engine()
    torch.set_num_threads(1)
    result = run(args.calls, args.rounds)
    rows = [[kind, f"{r['first_call_s'] * 1e3:.1f}", f"{r['later_call_s'] * 1e3:.1f}",
             f"{r['later_over_first']:.3f} ({min(r['later_over_first_per_round']):.2f}-"
             f"{max(r['later_over_first_per_round']):.2f})", f"{r['fresh_estimator_per_call_s'] * 1e3:.1f}",
             f"{r['plain_loop_s'] * 1e3:.1f}",
             "yes" if r["met"] else "NO", f"{r['noise_later']:.0%}"]
            for kind, r in result["results"].items()]
    c.print_table(["call", "first ms", "later ms (median)", "later/first (min-max)", "fresh Estimator ms",
                   "no_grad loop ms", f"<{TARGET}", "noise later"], rows,
                  title=f"{args.calls} calls on {EVAL_ROWS} rows against an unchanged checkpoint "
                        f"(medians of {args.rounds} sequences)")
    c.write_json(result, args.json)


if __name__ == "__main__":
    main()
