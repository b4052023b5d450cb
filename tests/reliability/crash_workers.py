"""Child processes for the crash tests (run as ``python crash_workers.py MODE DIR``; never imported
by pytest as a test module).

Modes:
    ckpt-loop DIR        save checkpoints forever (keep 3), printing ``writing <step>`` before each
    ckpt-torn DIR        save step 1, then die by SIGKILL halfway through writing step 2's bytes
    preds DIR ROWS       write DIR/predictions.csv from a slow fake estimator, ``flushed`` after
                         the first chunk reaches the temp file
"""

from __future__ import annotations

import os
import signal
import sys
import time

__all__ = ["main"]


def _ckpt_loop(model_dir: str) -> None:
    import torch

    from estimator_engine import checkpoints

    step = checkpoints.read_global_step(model_dir)
    weights = torch.randn(1_000_000)  # ~4 MB per file: a write takes a few ms, a good target
    while True:
        step += 1
        print(f"writing {step}", flush=True)
        checkpoints.save_checkpoint(model_dir, {"variables": {"w": weights + step}}, step,
                                    keep_checkpoint_max=3)


def _ckpt_torn(model_dir: str) -> None:
    import io

    import torch

    from estimator_engine import checkpoints

    checkpoints.save_checkpoint(model_dir, {"variables": {"w": torch.ones(1000)}}, 1)
    real_save = torch.save

    def half_then_die(obj, f, *args, **kwargs):
        buffer = io.BytesIO()
        real_save(obj, buffer, *args, **kwargs)
        data = buffer.getvalue()
        f.write(data[: len(data) // 2])
        f.flush()
        os.fsync(f.fileno())
        os.kill(os.getpid(), signal.SIGKILL)  # the power cut, mid-write

    torch.save = half_then_die
    checkpoints.save_checkpoint(model_dir, {"variables": {"w": torch.ones(1000) * 2}}, 2)


class _SlowEstimator:
    """``predict(yield_single_examples=False)`` yielding batches of 10 with a pause between."""

    def __init__(self, rows: int) -> None:
        self.rows = rows

    def predict(self, input_fn, checkpoint_path=None, yield_single_examples=True):
        import numpy as np

        for start in range(0, self.rows, 10):
            n = min(10, self.rows - start)
            time.sleep(0.01)
            yield {"predictions": np.arange(start, start + n, dtype=np.float64)}


def _preds(folder: str, rows: int) -> None:
    import pandas as pd

    from estimator_workbench.data import predictions

    source = pd.DataFrame({"id": range(rows), "x": [f"=cmd|' /C calc'!A{i}" for i in range(rows)]})
    out = os.path.join(folder, "predictions.csv")
    real_flush_to_csv = pd.DataFrame.to_csv
    announced = []

    def to_csv(self, *args, **kwargs):
        result = real_flush_to_csv(self, *args, **kwargs)
        if not announced:
            announced.append(True)
            print("flushed", flush=True)
        return result

    pd.DataFrame.to_csv = to_csv
    predictions.write_predictions_csv(_SlowEstimator(rows), None, source, out, chunk_rows=20)
    print("done", flush=True)


def main(argv: list[str]) -> int:
    mode, folder = argv[0], argv[1]
    if mode == "ckpt-loop":
        _ckpt_loop(folder)
    elif mode == "ckpt-torn":
        _ckpt_torn(folder)
    elif mode == "preds":
        _preds(folder, int(argv[2]))
    else:
        print(f"unknown mode {mode!r}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
