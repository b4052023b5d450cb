"""Data and settings shared by both sides of the parity runs (no TF, no engine import).

Both sides read the same bundled CSVs, feed them unshuffled in the same order, and run the same
number of steps; the engine side starts from the weights TF wrote in its ``model.ckpt-0``.
"""

from __future__ import annotations

import csv
import json
import os

import numpy as np

__all__ = ["IRIS_FEATURES", "ROOT", "init_variables", "iris", "load_json", "penguins", "save_json"]

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
IRIS_FEATURES = ["sepal_length_cm", "sepal_width_cm", "petal_length_cm", "petal_width_cm"]
BATCH = 32
STEPS = 200

# Names in TF's checkpoints that are optimizer state or bookkeeping, not model weights.
_NOT_MODEL = ("global_step", "training/", "/Adagrad", "/Adam", "/Ftrl", "/accumulator",
              "beta1_power", "beta2_power", "_CHECKPOINTABLE_OBJECT_GRAPH")


def iris() -> tuple[dict[str, np.ndarray], np.ndarray]:
    rows = _read_csv("iris.csv")
    x = {name: np.array([float(r[name]) for r in rows], np.float32) for name in IRIS_FEATURES}
    species = sorted({r["species"] for r in rows})
    return x, np.array([species.index(r["species"]) for r in rows], np.int64)


def _read_csv(name: str) -> list[dict[str, str]]:
    with open(os.path.join(ROOT, "sample_data", name), newline="") as handle:
        return list(csv.DictReader(handle))


def penguins() -> tuple[dict[str, np.ndarray], np.ndarray]:
    """A census-like table: numeric and string columns, a binary label (species == Adelie)."""
    rows = [r for r in _read_csv("penguins.csv") if all(v not in ("", "NA") for v in r.values())]
    x = {"island": np.array([r["island"] for r in rows], object),
         "sex": np.array([r["sex"] for r in rows], object),
         "bill_length": np.array([float(r["bill_length_mm"]) / 10 for r in rows], np.float32),
         "bill_depth": np.array([float(r["bill_depth_mm"]) / 10 for r in rows], np.float32),
         "flipper_length": np.array([float(r["flipper_length_mm"]) for r in rows], np.float32)}
    return x, np.array([int(r["species"] == "Adelie") for r in rows], np.int64)


def is_model_variable(name: str) -> bool:
    return not any(part in name for part in _NOT_MODEL)


def save_json(path: str, value: object) -> None:
    with open(path, "w") as handle:
        json.dump(value, handle, indent=1, sort_keys=True, default=float)


def load_json(path: str) -> dict:
    with open(path) as handle:
        return json.load(handle)


def init_variables(npz_path: str) -> dict[str, np.ndarray]:
    with np.load(npz_path) as data:
        return {name.replace("|", "/"): data[name] for name in data.files}
