"""Benchmark 1: training step overhead of ``Estimator.train`` vs a plain PyTorch loop (and Lightning).

Three models, chosen to span the overhead-bound to the compute-bound case:

* ``tiny``: MLP 8-16-2, batch 32 (almost no compute: the per-step overhead is all there is);
* ``mid``:  MLP 20-64-32-3, batch 128 (the reference workload of environment.md);
* ``cnn``:  Conv(1->8, 3x3)-ReLU-Conv(8->16, 3x3)-ReLU-Linear(16*4*4 -> 10) on 8x8 "digits"
  images, batch 64.

Two variants per model, each engine vs a plain loop measured in the same process in alternated
pairs (``_common.measure_pairs``: median, min and max of the per-round ratio, load before/after):

* ``batches``: both sides consume the very same precomputed list of ``steps`` batches (the
  engine's ``input_fn`` returns that list): the engine's run-loop overhead alone;
* ``indexed``: the engine through ``numpy_input_fn(..., shuffle=True, num_epochs=None)`` against
  a plain loop that indexes the in-memory tensors by a shuffled permutation each step (the best
  hand-written practice: an input pipeline has to gather rows on both sides).

A third variant, ``progress`` (not in the default set), measures the progress bar: the ``indexed``
engine run with ``progress_bar=False`` against the same run with ``progress_bar=True`` (the text
bar written to ``os.devnull``), ratio off/on; and off against the plain loop, which is the
``indexed`` figure when the bar costs nothing when off.

The plain loop is what a competent engineer writes: ``model.train()``, the same Adam(1e-3),
``cross_entropy``, ``zero_grad(set_to_none=True)``. The engine runs ``Estimator.train`` with the
default RunConfig, so the default hooks (step limit, NaN check, loss logging, steps/s counter,
summaries every 100 steps) and the initial and final checkpoints are included -- the whole
``train()`` call is timed, as a user experiences it. Lightning (defaults / lean) is added to the
``indexed`` variant when ``lightning`` or ``pytorch_lightning`` imports (information only).

Steps/s = steps / wall seconds. Target: engine/plain >= 0.95 for every model and variant. One
thread (``torch.set_num_threads(1)``) to limit the effect of other processes on the 2-core machine.

    python benchmarks/bench_train_overhead.py [--models tiny,mid,cnn] [--variants batches,indexed]
        [--rounds 7] [--quick] [--json out.json]
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import io
import logging
import os
import shutil
import tempfile
import time
import warnings
from collections.abc import Callable
from typing import Any

import _common as c
import torch

import estimator_engine as ee
from estimator_engine.model_state import use_fastest_kernel

N_ROWS = 10_000
TARGET = 0.95


def _tiny() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))


def _mid() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(20, 64), torch.nn.ReLU(), torch.nn.Linear(64, 32),
                               torch.nn.ReLU(), torch.nn.Linear(32, 3))


def _cnn() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Conv2d(1, 8, 3), torch.nn.ReLU(), torch.nn.Conv2d(8, 16, 3),
                               torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(16 * 4 * 4, 10))


# name -> (factory, input shape after the batch dim, classes, batch size, default steps)
MODELS: dict[str, tuple[Callable[[], torch.nn.Module], tuple[int, ...], int, int, int]] = {
    "tiny": (_tiny, (8,), 2, 32, 2000),
    "mid": (_mid, (20,), 3, 128, 2000),
    "cnn": (_cnn, (1, 8, 8), 10, 64, 600),
}
MODEL_LABELS = {"tiny": "8-16-2 b32", "mid": "20-64-32-3 b128", "cnn": "CNN 1x8x8 b64"}


def make_data(name: str, rows: int = N_ROWS, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    _, shape, classes, _, _ = MODELS[name]
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, *shape, generator=generator)
    y = (x.reshape(rows, -1)[:, :classes].argmax(dim=1)).long()
    return x, y


class PermutationBatches:
    """In-memory batches by a per-epoch permutation (the plain loop's and Lightning's input)."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor, batch: int, steps: int) -> None:
        self.x, self.y, self.batch, self.steps = x, y, batch, steps

    def __len__(self) -> int:
        return self.steps

    def __iter__(self):
        n = len(self.x)
        generator = torch.Generator().manual_seed(0)
        order, position = torch.randperm(n, generator=generator), 0
        for _ in range(self.steps):
            if position + self.batch > n:
                order, position = torch.randperm(n, generator=generator), 0
            index = order[position:position + self.batch]
            position += self.batch
            yield self.x[index], self.y[index]


def precomputed_batches(name: str, x: torch.Tensor, y: torch.Tensor, steps: int) -> list[tuple[dict, torch.Tensor]]:
    """``steps`` shuffled batches gathered once, as ``({"x": xb}, yb)``: the input of both sides
    of the ``batches`` variant."""
    return [({"x": xb}, yb) for xb, yb in PermutationBatches(x, y, MODELS[name][3], steps)]


def _plain_model(name: str) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(0)
    model = MODELS[name][0]()
    model.train()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    # The engine's get_optimizer gives this Adam torch's fastest kernel for the device (fused on
    # CPU); the plain loop runs the same kernel, so the ratio stays the engine's overhead alone.
    use_fastest_kernel(optimizer)
    return model, optimizer


def plain_loop(name: str, x: torch.Tensor, y: torch.Tensor, steps: int) -> float:
    """The ``indexed`` reference: rows gathered by a shuffled permutation each step."""
    batch = MODELS[name][3]
    model, optimizer = _plain_model(name)
    start = time.perf_counter()
    for xb, yb in PermutationBatches(x, y, batch, steps):
        loss = torch.nn.functional.cross_entropy(model(xb), yb)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return steps / (time.perf_counter() - start)


def plain_loop_batches(name: str, batches: list[tuple[dict, torch.Tensor]]) -> float:
    """The ``batches`` reference: the same precomputed batches the engine gets."""
    model, optimizer = _plain_model(name)
    start = time.perf_counter()
    for features, yb in batches:
        loss = torch.nn.functional.cross_entropy(model(features["x"]), yb)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return len(batches) / (time.perf_counter() - start)


def make_model_fn(name: str) -> Callable[..., ee.EstimatorSpec]:
    return c.classifier_model_fn(MODELS[name][0])


def engine_train(name: str, x: torch.Tensor, y: torch.Tensor, steps: int,
                 config: ee.RunConfig | None = None, progress_bar: bool | None = False) -> float:
    batch = MODELS[name][3]
    model_dir = tempfile.mkdtemp(prefix="bench_train_")
    try:
        torch.manual_seed(0)
        estimator = ee.Estimator(make_model_fn(name), model_dir=model_dir, config=config)
        input_fn = ee.inputs.numpy_input_fn({"x": x}, y, batch_size=batch, num_epochs=None, shuffle=True)
        with open(os.devnull, "w") as sink, contextlib.redirect_stderr(sink):  # where a bar is drawn
            start = time.perf_counter()
            estimator.train(input_fn, steps=steps, progress_bar=progress_bar)
            return steps / (time.perf_counter() - start)
    finally:
        shutil.rmtree(model_dir, ignore_errors=True)


def engine_train_batches(name: str, batches: list[tuple[dict, torch.Tensor]]) -> float:
    """``Estimator.train`` whose ``input_fn`` returns the precomputed batches (a list is an
    iterable of ``(features, labels)``, like a ``tf.data.Dataset``)."""
    model_dir = tempfile.mkdtemp(prefix="bench_train_")
    try:
        torch.manual_seed(0)
        estimator = ee.Estimator(make_model_fn(name), model_dir=model_dir)
        start = time.perf_counter()
        estimator.train(lambda: batches, steps=len(batches), progress_bar=False)  # a bar is measured by 'progress'
        return len(batches) / (time.perf_counter() - start)
    finally:
        shutil.rmtree(model_dir, ignore_errors=True)


def _lightning() -> Any:
    for module in ("lightning.pytorch", "pytorch_lightning"):
        with contextlib.suppress(ImportError):
            return __import__(module, fromlist=["Trainer"])
    return None


def lightning_train(pl: Any, name: str, x: torch.Tensor, y: torch.Tensor, steps: int, lean: bool) -> float:
    factory, _, _, batch, _ = MODELS[name]

    class Module(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = factory()

        def training_step(self, batch_, batch_idx):
            xb, yb = batch_
            loss = torch.nn.functional.cross_entropy(self.net(xb), yb)
            if not lean:
                self.log("loss", loss)
            return loss

        def configure_optimizers(self):
            return torch.optim.Adam(self.parameters(), lr=1e-3)

    root = tempfile.mkdtemp(prefix="bench_pl_")
    try:
        torch.manual_seed(0)
        module = Module()
        options: dict[str, Any] = {"max_steps": steps, "max_epochs": -1, "accelerator": "cpu",
                                   "devices": 1, "default_root_dir": root, "enable_progress_bar": False}
        if lean:
            options.update(logger=False, enable_checkpointing=False, enable_model_summary=False,
                           num_sanity_val_steps=0)
        start = time.perf_counter()
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            pl.Trainer(**options).fit(module, train_dataloaders=PermutationBatches(x, y, batch, steps))
        return steps / (time.perf_counter() - start)
    finally:
        shutil.rmtree(root, ignore_errors=True)


VARIANTS = ("batches", "indexed")
ALL_VARIANTS = (*VARIANTS, "progress")
VARIANT_LABELS = {"batches": "same precomputed batches", "indexed": "numpy_input_fn vs a plain loop that indexes",
                  "progress": "progress bar off vs on (numpy_input_fn)"}


def run(models: list[str], rounds: int, steps_scale: float = 1.0, lightning: bool = True,
        variants: tuple[str, ...] = VARIANTS) -> dict[str, Any]:
    pl = _lightning() if lightning else None
    if pl is not None:
        for logger_name in ("lightning", "lightning.pytorch", "pytorch_lightning", "lightning_fabric"):
            logging.getLogger(logger_name).setLevel(logging.ERROR)
    results: dict[str, Any] = {}
    targets: list[dict[str, Any]] = []
    for name in models:
        steps = max(50, int(MODELS[name][4] * steps_scale))
        x, y = make_data(name)
        batches = precomputed_batches(name, x, y, steps)
        plain_loop(name, x, y, 100)  # warm-up: allocator, kernels, first checkpoint write
        engine_train(name, x, y, 100)
        engine_train_batches(name, batches[:100])
        results[name] = {"steps": steps, "batch": MODELS[name][3]}
        for variant in variants:
            if variant == "progress":
                fns = {"plain": functools.partial(plain_loop, name, x, y, steps),
                       "off": functools.partial(engine_train, name, x, y, steps, progress_bar=False),
                       "on": functools.partial(engine_train, name, x, y, steps, progress_bar=True)}
                measured = c.measure_pairs(fns, rounds, {"off/on": ("off", "on"), "engine/plain": ("off", "plain")})
                measured["met"] = measured["ratios"]["off/on"]["median"] <= 1 / TARGET
                results[name][variant] = measured
                targets.append(c.target_row(
                    f"train_{name}_progress", f"Estimator.train progress bar off / on, {name} {MODEL_LABELS[name]}",
                    measured["ratios"]["off/on"], "information",
                    load=(measured["load_1m_before"], measured["load_1m_after"])))
                continue
            if variant == "batches":
                fns: dict[str, Callable[[], float]] = {
                    "plain": functools.partial(plain_loop_batches, name, batches),
                    "engine": functools.partial(engine_train_batches, name, batches),
                }
            else:
                fns = {"plain": functools.partial(plain_loop, name, x, y, steps),
                       "engine": functools.partial(engine_train, name, x, y, steps)}
                if pl is not None:
                    lightning_train(pl, name, x, y, 50, lean=True)
                    fns["lightning"] = functools.partial(lightning_train, pl, name, x, y, steps, lean=False)
                    fns["lightning_lean"] = functools.partial(lightning_train, pl, name, x, y, steps, lean=True)
            ratios = {"engine/plain": ("engine", "plain")}
            if "lightning" in fns:
                ratios.update({"lightning/plain": ("lightning", "plain"),
                               "lightning_lean/plain": ("lightning_lean", "plain")})
            measured = c.measure_pairs(fns, rounds, ratios)
            ratio = measured["ratios"]["engine/plain"]
            measured["met"] = ratio["median"] >= TARGET
            results[name][variant] = measured
            targets.append(c.target_row(
                f"train_{name}_{variant}",
                f"Estimator.train / plain loop, {name} {MODEL_LABELS[name]}, {VARIANT_LABELS[variant]}",
                ratio, ">= 0.95", higher_is_better=True, threshold=TARGET,
                load=(measured["load_1m_before"], measured["load_1m_after"])))
    return {"benchmark": "train_overhead", "rounds": rounds, "models": results, "targets": targets,
            "lightning": None if pl is None else getattr(pl, "__version__", "?"),
            "lightning_note": None if pl is not None else
            "lightning not importable in this interpreter; run with the Lightning venv (README)"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="tiny,mid,cnn")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps-scale", type=float, default=1.0, help="multiply every model's steps")
    parser.add_argument("--quick", action="store_true", help="smoke run: 1 round, a tenth of the steps")
    parser.add_argument("--no-lightning", action="store_true")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.steps_scale = 1, 0.1
    c.quiet_engine()
    torch.set_num_threads(1)
    os.environ.setdefault("PL_DISABLE_FORK", "1")
    result = run(args.models.split(","), args.rounds, args.steps_scale, not args.no_lightning,
                 tuple(args.variants.split(",")))
    rows = []
    for name, entry in result["models"].items():
        if "progress" in entry:
            m = entry["progress"]
            off_on, off_plain = m["ratios"]["off/on"], m["ratios"]["engine/plain"]
            print(f"{name}: progress off/on {off_on['median']:.3f} (min {off_on['min']:.3f}, max "
                  f"{off_on['max']:.3f}); off/plain {off_plain['median']:.3f} ({off_plain['min']:.2f}-"
                  f"{off_plain['max']:.2f}); load {m['load_1m_before']:.1f}/{m['load_1m_after']:.1f}")
        for variant in VARIANTS:
            if variant not in entry:
                continue
            m = entry[variant]
            sides, ratio = m["sides"], m["ratios"]["engine/plain"]
            rows.append([name, variant, entry["steps"], sides["plain"]["median"], sides["engine"]["median"],
                         f"{ratio['median']:.3f} ({ratio['min']:.2f}-{ratio['max']:.2f})",
                         sides.get("lightning", {}).get("median", "-"),
                         "yes" if m["met"] else "NO", f"{m['load_1m_before']:.1f}/{m['load_1m_after']:.1f}"])
    if rows:  # none when only the 'progress' variant ran
        c.print_table(["model", "variant", "steps", "plain/s", "engine/s", "engine/plain (min-max)", "lightning/s",
                       f">={TARGET}", "load"], rows,
                      title=f"Training step overhead (medians of {args.rounds} alternated pairs, 1 thread)")
    if result["lightning"] is None:
        print(result["lightning_note"])
    c.write_json(result, args.json)


if __name__ == "__main__":
    main()
