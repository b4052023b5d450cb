"""The TF peer workload as a plain PyTorch script: the whole-script reference for the engine.

What a competent engineer writes by hand for ``engine_mlp.py``'s job: the same data, MLP, Adam(1e-3)
(``fused=True`` like the engine's model_fn: the best practice on both sides; ``--loop-adam`` for torch's
CPU default) and batch; ``model.train()``, rows gathered by a shuffled permutation each step,
``zero_grad(set_to_none=True)``; the weights saved once at the end (``torch.save``: the engine's
final checkpoint); accuracy on 2,000 rows and class ids for 2,000 rows under ``torch.no_grad()``.
Then, like the other two scripts, a second loop of as many steps in the warm process (its
steps/s is the steady state of hand-written PyTorch: the ceiling the engine's steady state is
compared with; its time is left out of the whole-script figure). Prints one JSON line with the keys
of ``engine_mlp.py`` that apply.

    .venv/bin/python benchmarks/tf_peer/plain_mlp.py [--steps 2000] [--threads 1] [--size tiny|mid] [--loop-adam]
"""

from __future__ import annotations

import time

_T0 = time.perf_counter()

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

_IMPORT_S = time.perf_counter() - _T0
N_ROWS = 10_000
SIZES = {"tiny": (8, (16,), 2, 32), "mid": (20, (64, 32), 3, 128)}  # as engine_mlp.py / tf_mlp.py


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (0: torch default)")
    parser.add_argument("--size", choices=tuple(SIZES), default="mid")
    parser.add_argument("--loop-adam", action="store_true", help="torch.optim.Adam's CPU default, not fused")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    n_features, hidden, n_classes, batch = SIZES[args.size]
    rng = np.random.default_rng(0)
    x_np = rng.standard_normal((N_ROWS, n_features), dtype=np.float32)
    x, y = torch.from_numpy(x_np), torch.from_numpy(x_np[:, :n_classes].argmax(axis=1).astype(np.int64))
    out_dir = tempfile.mkdtemp(prefix="tfpeer_plain_")
    try:
        start = time.perf_counter()
        layers: list[torch.nn.Module] = []
        width = n_features
        for units in hidden:
            layers += [torch.nn.Linear(width, units), torch.nn.ReLU()]
            width = units
        model = torch.nn.Sequential(*layers, torch.nn.Linear(width, n_classes))
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, fused=not args.loop_adam or None)
        model.train()
        generator = torch.Generator().manual_seed(0)
        order, position = torch.randperm(N_ROWS, generator=generator), 0

        def train(steps: int) -> None:
            nonlocal order, position
            for _ in range(steps):
                if position + batch > N_ROWS:
                    order, position = torch.randperm(N_ROWS, generator=generator), 0
                index = order[position:position + batch]
                position += batch
                loss = torch.nn.functional.cross_entropy(model(x[index]), y[index])
                loss.backward()
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)

        train(args.steps)
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": args.steps},
                   os.path.join(out_dir, "model.pt"))
        train_s = time.perf_counter() - start
        model.eval()
        t = time.perf_counter()
        with torch.no_grad():
            correct = sum(int((model(x[i:min(i + batch, 2000)]).argmax(dim=1) == y[i:min(i + batch, 2000)]).sum())
                          for i in range(0, 2000, batch))
        evaluate_s = time.perf_counter() - t
        t = time.perf_counter()
        with torch.no_grad():
            class_ids = [int(c) for i in range(0, 2000, batch) for c in model(x[i:min(i + batch, 2000)]).argmax(dim=1)]
        predict_s = time.perf_counter() - t
        script_s = time.perf_counter() - start
        model.train()
        t = time.perf_counter()
        train(args.steps)
        train2_s = time.perf_counter() - t
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)
    print(json.dumps({"system": f"plain PyTorch {torch.__version__}", "model": "plain", "size": args.size,
                      "threads": args.threads, "steps": args.steps, "train_s": train_s,
                      "train_steps_per_sec": args.steps / train_s, "evaluate_s": evaluate_s,
                      "predict_s": predict_s, "predicted": len(class_ids), "accuracy": correct / 2000,
                      "script_s": script_s, "train2_s": train2_s,
                      "train2_steps_per_sec": args.steps / train2_s, "import_s": _IMPORT_S}))


if __name__ == "__main__":
    main()
