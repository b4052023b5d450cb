"""GPU check: ``Estimator.train`` on CUDA vs a plain PyTorch loop, fp32 and bf16-mixed, and DDP.

One prepared script for a machine with a GPU (about 2-4 minutes on an H200):

* models: an MLP 1024-4096-4096-1024 (batch 1024, big enough to keep the GPU busy) and a small
  CNN on 3x32x32 images (batch 256);
* precisions: ``32`` and ``bf16-mixed`` (``torch.autocast(dtype=bfloat16)`` around the forward
  pass, in both the engine and the plain loop);
* both sides read the same host-memory data and move each batch to the GPU (the engine through
  ``numpy_input_fn`` and its pinned, ``non_blocking`` copy; the plain loop by indexing a
  permutation of host tensors, ``pin_memory()`` and ``non_blocking=True``);
* steps/s is steady state: counted between step ``warmup`` and the last step with
  ``torch.cuda.synchronize()`` at both ends, so start-up and the final checkpoint are excluded;
  the engine and the plain loop alternate for ``--rounds`` rounds; ratio = median engine/plain
  (target >= 0.95);
* DDP: with two or more GPUs, ``torchrun --standalone --nproc-per-node 2`` runs this script in
  ``--ddp-worker`` mode: a plain DDP loop and the engine (automatic DDP under torchrun) on the
  MLP, steps/s and ratio, and a check that the parameters are identical on both ranks. Skipped
  with a message on one GPU.

Prints a table and writes JSON (``--json``, default ``benchmarks/results/gpu_check.json``).
Without CUDA it prints a message and exits 0; ``--cpu-smoke`` runs everything on tiny sizes on
the CPU (fp32 and bf16 autocast on CPU, DDP over gloo) to check the script itself.

    python benchmarks/gpu_check.py [--rounds 3] [--steps 200] [--json out.json] [--cpu-smoke]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import json
import logging
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import estimator_engine as ee

__all__ = ["main"]

TARGET = 0.95
_HERE = Path(__file__).resolve().parent


# -- models ------------------------------------------------------------------------------------


def _mlp(sizes: tuple[int, ...]) -> Callable[[], torch.nn.Module]:
    def build() -> torch.nn.Module:
        layers: list[torch.nn.Module] = []
        for i in range(len(sizes) - 1):
            layers.append(torch.nn.Linear(sizes[i], sizes[i + 1]))
            if i < len(sizes) - 2:
                layers.append(torch.nn.ReLU())
        return torch.nn.Sequential(*layers)

    return build


def _cnn(channels: int, width: int, classes: int) -> Callable[[], torch.nn.Module]:
    def build() -> torch.nn.Module:
        return torch.nn.Sequential(
            torch.nn.Conv2d(3, channels, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(channels, 2 * channels, 3, padding=1), torch.nn.ReLU(),
            torch.nn.MaxPool2d(2), torch.nn.Flatten(),
            torch.nn.Linear(2 * channels * (width // 4) ** 2, classes))

    return build


def workloads(smoke: bool) -> dict[str, dict[str, Any]]:
    """name -> factory, input shape, classes, batch, rows."""
    if smoke:
        return {
            "mlp": {"factory": _mlp((32, 64, 64, 8)), "shape": (32,), "classes": 8, "batch": 64,
                    "rows": 2048},
            "cnn": {"factory": _cnn(4, 8, 10), "shape": (3, 8, 8), "classes": 10, "batch": 32,
                    "rows": 1024},
        }
    return {
        "mlp": {"factory": _mlp((1024, 4096, 4096, 1024)), "shape": (1024,), "classes": 1024,
                "batch": 1024, "rows": 32768},
        "cnn": {"factory": _cnn(32, 32, 10), "shape": (3, 32, 32), "classes": 10, "batch": 256,
                "rows": 16384},
    }


def make_data(spec: dict[str, Any], seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((spec["rows"], *spec["shape"]), dtype=np.float32)
    y = rng.integers(0, spec["classes"], spec["rows"]).astype(np.int64)
    return x, y


# -- timing ------------------------------------------------------------------------------------


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class _StepTimer(ee.SessionRunHook):
    """Times the steps after ``warmup`` (synchronising the device at both ends)."""

    def __init__(self, device: torch.device, warmup: int, steps: int) -> None:
        self.device, self.warmup, self.steps = device, warmup, steps
        self.count, self.t0, self.rate = 0, 0.0, float("nan")

    def after_run(self, run_context: Any, run_values: Any) -> None:
        self.count += 1
        if self.count == self.warmup:
            _sync(self.device)
            self.t0 = time.perf_counter()
        elif self.count == self.warmup + self.steps:
            _sync(self.device)
            self.rate = self.steps / (time.perf_counter() - self.t0)


_DTYPES = {"32": None, "bf16-mixed": torch.bfloat16}


def plain_loop(spec: dict[str, Any], x: np.ndarray, y: np.ndarray, device: torch.device,
               precision: str, warmup: int, steps: int, ddp: bool = False) -> float:
    """A hand-written loop on the same host data; steps/s after ``warmup`` steps."""
    torch.manual_seed(0)
    model: torch.nn.Module = spec["factory"]().to(device)
    if ddp:
        model = torch.nn.parallel.DistributedDataParallel(
            model, device_ids=[device.index] if device.type == "cuda" else None)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    xs, ys = torch.from_numpy(x), torch.from_numpy(y)
    if ddp:  # the same sharding the engine does: every rank its own slice
        rank, world = torch.distributed.get_rank(), torch.distributed.get_world_size()
        xs, ys = xs[rank::world], ys[rank::world]
    dtype = _DTYPES[precision]
    pin = device.type == "cuda"
    generator = torch.Generator().manual_seed(0)
    order, position, batch = torch.randperm(len(xs), generator=generator), 0, spec["batch"]
    t0 = 0.0
    for step in range(1, warmup + steps + 1):
        if position + batch > len(xs):
            order, position = torch.randperm(len(xs), generator=generator), 0
        index = order[position:position + batch]
        position += batch
        xb, yb = xs[index], ys[index]
        if pin:
            xb, yb = xb.pin_memory(), yb.pin_memory()
        xb, yb = xb.to(device, non_blocking=True), yb.to(device, non_blocking=True)
        with torch.autocast(device.type, dtype=dtype) if dtype else contextlib.nullcontext():
            logits = model(xb)
        loss = torch.nn.functional.cross_entropy(logits.float(), yb)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if step == warmup:
            _sync(device)
            t0 = time.perf_counter()
    _sync(device)
    return steps / (time.perf_counter() - t0)


def _model_fn(spec: dict[str, Any], holder: dict[str, Any] | None = None) -> Callable[..., Any]:
    factory = spec["factory"]

    def model_fn(features: Any, labels: Any, mode: str) -> Any:
        model = ee.get_module("net", factory)
        if holder is not None:
            holder["module"] = model
        logits = model(features["x"])
        loss = torch.nn.functional.cross_entropy(logits.float(), labels)
        optimizer = ee.get_optimizer("adam", lambda: torch.optim.Adam(model.parameters(), lr=1e-4))
        return ee.EstimatorSpec(mode, loss=loss, train_op=ee.minimize(optimizer, loss))

    return model_fn


def engine_train(spec: dict[str, Any], x: np.ndarray, y: np.ndarray, device: torch.device,
                 precision: str, warmup: int, steps: int,
                 after: Callable[[ee.Estimator], Any] | None = None) -> tuple[float, Any]:
    """``Estimator.train`` on the same data; steps/s after ``warmup`` steps (and ``after(est)``)."""
    model_dir = tempfile.mkdtemp(prefix="gpu_check_")
    try:
        torch.manual_seed(0)
        config = ee.RunConfig(device=str(device), precision=precision, tf_random_seed=0,
                              save_checkpoints_steps=10**9, save_summary_steps=10**9,
                              log_step_count_steps=10**9)
        estimator = ee.Estimator(_model_fn(spec), model_dir=model_dir, config=config)
        input_fn = ee.inputs.numpy_input_fn({"x": x}, y, batch_size=spec["batch"], num_epochs=None,
                                            shuffle=True)
        timer = _StepTimer(device, warmup, steps)
        estimator.train(input_fn, steps=warmup + steps, hooks=[timer])
        extra = after(estimator) if after is not None else None
        return timer.rate, extra
    finally:
        shutil.rmtree(model_dir, ignore_errors=True)


# -- single device -----------------------------------------------------------------------------


def single_device(device: torch.device, smoke: bool, rounds: int, steps: int,
                  warmup: int) -> list[dict[str, Any]]:
    rows = []
    precisions = ["32", "bf16-mixed"]
    for name, spec in workloads(smoke).items():
        x, y = make_data(spec)
        for precision in precisions:
            engine, plain = [], []
            for _ in range(rounds):  # alternate: drifts (clocks, other tenants) hit both sides
                plain.append(plain_loop(spec, x, y, device, precision, warmup, steps))
                engine.append(engine_train(spec, x, y, device, precision, warmup, steps)[0])
            ratios = [e / p for e, p in zip(engine, plain)]
            rows.append({"model": name, "precision": precision, "batch": spec["batch"],
                         "plain_steps_s": statistics.median(plain),
                         "engine_steps_s": statistics.median(engine),
                         "ratio": statistics.median(ratios), "rounds": rounds, "steps": steps})
            print(f"  {name:4s} {precision:10s} plain {rows[-1]['plain_steps_s']:9.1f}/s  "
                  f"engine {rows[-1]['engine_steps_s']:9.1f}/s  ratio {rows[-1]['ratio']:.3f}",
                  flush=True)
    return rows


# -- DDP -----------------------------------------------------------------------------------------


def ddp_worker(args: argparse.Namespace) -> int:
    """One rank of the 2-rank check (run under torchrun)."""
    rank, local_rank = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
    smoke = args.cpu_smoke
    device = torch.device("cpu") if smoke else torch.device(f"cuda:{local_rank}")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    backend = "gloo" if smoke else "nccl"
    spec = workloads(smoke)["mlp"]
    x, y = make_data(spec)
    torch.distributed.init_process_group(backend)
    try:
        plain = plain_loop(spec, x, y, device, "bf16-mixed" if not smoke else "32",
                           args.warmup, args.steps, ddp=True)
    finally:
        torch.distributed.destroy_process_group()

    precision = "bf16-mixed" if not smoke else "32"
    engine, _ = engine_train(spec, x, y, device, precision, args.warmup, args.steps)
    same = _params_identical_across_ranks(spec, x, y, device, precision, backend)
    if rank == 0:
        result = {"world_size": int(os.environ["WORLD_SIZE"]), "precision": precision,
                  "plain_steps_s_per_rank": plain, "engine_steps_s_per_rank": engine,
                  "ratio": engine / plain, "params_identical": same}
        Path(args.ddp_out).write_text(json.dumps(result), encoding="utf-8")
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()
    return 0


def _params_identical_across_ranks(spec: dict[str, Any], x: np.ndarray, y: np.ndarray,
                                   device: torch.device, precision: str, backend: str) -> bool:
    """Trains a few engine steps, then compares every rank's parameters with rank 0's."""
    holder: dict[str, Any] = {}
    model_dir = tempfile.mkdtemp(prefix="gpu_check_ddp_")
    try:
        config = ee.RunConfig(device=str(device), precision=precision, tf_random_seed=0)
        estimator = ee.Estimator(_model_fn(spec, holder), model_dir=model_dir, config=config)
        input_fn = ee.inputs.numpy_input_fn({"x": x}, y, batch_size=spec["batch"], num_epochs=None,
                                            shuffle=True)
        estimator.train(input_fn, steps=5)
    finally:
        shutil.rmtree(model_dir, ignore_errors=True)
    module = holder.get("module")
    if module is None:
        return False
    module = getattr(module, "module", module)  # unwrap DistributedDataParallel
    flat = torch.cat([p.detach().float().reshape(-1).cpu() for p in module.parameters()])
    if not torch.distributed.is_initialized():  # the engine may keep its group for reuse
        torch.distributed.init_process_group(backend)
    tensor = flat.to(device)
    reference = tensor.clone()
    torch.distributed.broadcast(reference, src=0)
    same = torch.tensor([float(torch.equal(tensor, reference))], device=device)
    torch.distributed.all_reduce(same, op=torch.distributed.ReduceOp.MIN)
    return bool(same.item() == 1.0)


def ddp_check(smoke: bool, args: argparse.Namespace) -> dict[str, Any]:
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if not smoke and gpus < 2:
        return {"skipped": f"needs 2 GPUs, this machine has {gpus}"}
    out = Path(tempfile.mkdtemp(prefix="gpu_check_ddp_")) / "rank0.json"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
           str(Path(__file__).resolve()), "--ddp-worker", "--ddp-out", str(out),
           "--steps", str(args.steps), "--warmup", str(args.warmup)]
    if smoke:
        cmd.append("--cpu-smoke")
    env = dict(os.environ, PYTHONPATH=str(_HERE.parent))
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env, check=False)
    try:
        if proc.returncode != 0:
            return {"error": f"torchrun exited {proc.returncode}",
                    "output_tail": (proc.stdout + proc.stderr)[-3000:]}
        return json.loads(out.read_text(encoding="utf-8"))
    finally:
        shutil.rmtree(out.parent, ignore_errors=True)


# -- main ----------------------------------------------------------------------------------------


def machine() -> dict[str, Any]:
    info: dict[str, Any] = {"python": platform.python_version(), "torch": torch.__version__,
                            "host": platform.node(), "cpus": os.cpu_count()}
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
        info["gpus"] = torch.cuda.device_count()
        info["cuda"] = torch.version.cuda
    return info


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=None, help="timed steps per measurement")
    parser.add_argument("--warmup", type=int, default=None)
    parser.add_argument("--json", default=str(_HERE / "results" / "gpu_check.json"))
    parser.add_argument("--cpu-smoke", action="store_true",
                        help="tiny sizes on the CPU: checks the script, measures nothing useful")
    parser.add_argument("--no-ddp", action="store_true")
    parser.add_argument("--ddp-worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--ddp-out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    smoke = args.cpu_smoke
    args.steps = args.steps or (20 if smoke else 200)
    args.warmup = args.warmup or (5 if smoke else 20)
    logging.getLogger("estimator_engine").setLevel(logging.WARNING)
    warnings.filterwarnings("ignore")
    if args.ddp_worker:
        return ddp_worker(args)
    if not smoke and not torch.cuda.is_available():
        print("gpu_check: no CUDA device on this machine; nothing to measure (exit 0). "
              "Use --cpu-smoke to check the script on tiny CPU sizes.")
        return 0
    device = torch.device("cpu") if smoke else torch.device("cuda:0")
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False  # fp32 means fp32 on both sides
        torch.backends.cudnn.allow_tf32 = False
    started = time.perf_counter()
    print(f"gpu_check on {device} ({'CPU smoke, tiny sizes' if smoke else machine().get('gpu')})",
          flush=True)
    rows = single_device(device, smoke, args.rounds, args.steps, args.warmup)
    ddp = {"skipped": "--no-ddp"} if args.no_ddp else ddp_check(smoke, args)
    elapsed = time.perf_counter() - started

    header = f"{'model':5s} {'precision':10s} {'batch':>5s} {'plain/s':>10s} {'engine/s':>10s} {'ratio':>6s}  ok"
    print("\n" + header + "\n" + "-" * len(header))
    for r in rows:
        print(f"{r['model']:5s} {r['precision']:10s} {r['batch']:5d} {r['plain_steps_s']:10.1f} "
              f"{r['engine_steps_s']:10.1f} {r['ratio']:6.3f}  {'yes' if r['ratio'] >= TARGET else 'NO'}")
    if "ratio" in ddp:
        print(f"ddp x{ddp['world_size']} {ddp['precision']:10s}       "
              f"{ddp['plain_steps_s_per_rank']:10.1f} {ddp['engine_steps_s_per_rank']:10.1f} "
              f"{ddp['ratio']:6.3f}  params identical across ranks: {ddp['params_identical']}")
    else:
        print(f"ddp: {ddp.get('skipped') or ddp.get('error')}")
        if "output_tail" in ddp:
            print(ddp["output_tail"])
    print(f"target ratio >= {TARGET}; total {elapsed:.0f}s")
    result = {"date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
              "machine": machine(), "device": str(device), "cpu_smoke": smoke, "target": TARGET,
              "single_device": rows, "ddp": ddp, "elapsed_s": elapsed}
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(result, indent=2), encoding="utf-8")
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
