"""How long a 40-row predict waits while a training run holds the machine (issue 28 item 8).

Starts a short training run (the model to predict with), then a long training run, and, once the
long one is running, submits a predict of 40 rows of iris from the first run's model through the
workbench's submit path (``Workspace.submit``, as the Predict page does). Measures from submit to
the predict run ``running`` (its wait in the queue) and to ``succeeded`` (the analyst's answer).

``--helper-slots 0`` is the old behaviour (one local slot on CPU: the predict queues behind the
training run, which this script stops after ``--hold`` seconds so the measurement ends);
``--helper-slots 1`` (the default now) gives predict/evaluate runs of trained models a slot of
their own.

Usage:
    python benchmarks/predict_wait.py --helper-slots 0 --hold 60
    python benchmarks/predict_wait.py --helper-slots 1
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path


def _wait_status(ws, run_id: str, statuses: tuple[str, ...], timeout: float) -> float:
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        ws.launcher.poll()
        if ws.registry.get(run_id).status in statuses:
            return time.monotonic()
        time.sleep(0.05)
    raise TimeoutError(f"run {run_id} not {statuses} after {timeout} s: {ws.registry.get(run_id).status}")


def measure(helper_slots: int, hold: float) -> dict[str, float | int | str]:
    os.environ["WORKBENCH_HELPER_SLOTS"] = str(helper_slots)
    os.environ["WORKBENCH_MAX_CONCURRENT"] = "1"
    from estimator_workbench.api import Workspace
    from estimator_workbench.data import datasets

    with tempfile.TemporaryDirectory(prefix="wb-predict-wait-") as root:
        ws = Workspace(root)
        model = ws.submit("iris", "mlp_classifier", steps=20, wait=True)
        training = ws.submit("iris", "mlp_classifier", steps=10_000_000, name="long training")
        _wait_status(ws, training.id, ("running",), 120)
        spec = datasets.DatasetSpec.from_dict(model.record.dataset)
        rows = spec.load().drop(columns=[spec.schema.label]).head(40)
        data = Path(root) / "forty_rows.csv"
        rows.to_csv(data, index=False)
        submitted = time.monotonic()
        predict = ws.submit(data, None, action="predict", from_run=model, name="predict 40 rows")
        try:
            started = _wait_status(ws, predict.id, ("running", "succeeded", "failed"), hold)
            held = False
        except TimeoutError:
            held = True  # queued behind training for the whole hold: end training, then see it start
            ws.launcher.cancel(training.id, grace=2.0)
            started = _wait_status(ws, predict.id, ("running", "succeeded", "failed"), 120)
        done = _wait_status(ws, predict.id, ("succeeded", "failed", "lost"), 300)
        status = ws.registry.get(predict.id).status
        ws.launcher.shutdown(grace=2.0)
        return {"helper_slots": helper_slots, "predict_status": status,
                "wait_s": round(started - submitted, 2), "answer_s": round(done - submitted, 2),
                "queued_for_whole_hold": held, "hold_s": hold, "load_1m": round(os.getloadavg()[0], 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--helper-slots", type=int, default=1)
    parser.add_argument("--hold", type=float, default=60.0,
                        help="seconds the training run holds the machine at most (then it is cancelled)")
    args = parser.parse_args()
    print(json.dumps(measure(args.helper_slots, args.hold)))


if __name__ == "__main__":
    main()
