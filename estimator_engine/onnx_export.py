"""ONNX for ``export_saved_model(..., format="onnx")``: the torch.export program as ``model.onnx``.

The ONNX model is converted from the very ``torch.export`` program the export saves (torch's own
exporter, ``torch.onnx.export(exported_program, dynamo=True)``, which needs ``onnxscript``), with
the program's inputs and outputs under readable names and the batch (and categorical id width)
dimensions dynamic. Its inputs are the program's: the dense features and, for categorical
columns, their int64 ids (``ids/<column>``); the string lookups stay in ``preprocessing.json``
(run them with ``estimator_engine.export.load(path).preprocessing``), and a string output
(``classes``) comes out as ids, mapped through the vocabulary that ``signature.json`` records.

Before anything is written the model is run by onnxruntime on the example batch and on a batch of
another size; outputs that differ from the torch program's by more than 1e-5 refuse the export.

Needs the ``onnx`` extra: ``pip install 'estimator-workbench[onnx]'`` (onnx, onnxscript, onnxruntime).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

__all__ = ["ONNX_FILENAME", "check_onnx_available", "onnxruntime_program", "write_onnx"]

ONNX_FILENAME = "model.onnx"
_TOLERANCE = 1e-5


def check_onnx_available() -> None:
    """Raises ImportError naming the extra when onnx, onnxscript or onnxruntime is missing."""
    missing = []
    for module in ("onnx", "onnxscript", "onnxruntime"):
        try:
            importlib.import_module(module)
        except ImportError:
            missing.append(module)
    if missing:
        raise ImportError(f"export_saved_model(format='onnx') needs {', '.join(missing)}: "
                          "pip install 'estimator-workbench[onnx]'")


def _variant(inputs: dict[str, torch.Tensor], grow: bool) -> dict[str, torch.Tensor]:
    """The example inputs with other values and, when ``grow`` (a dynamic batch), one more row."""
    out = {}
    for name, tensor in inputs.items():
        if tensor.dim() == 0:
            out[name] = tensor
            continue
        grown = torch.cat([tensor, tensor[:1]], dim=0) if grow else tensor
        out[name] = grown.flip(0) + 0.5 if grown.is_floating_point() else grown.flip(0)
    return out


def _compare(expected: Sequence[torch.Tensor], got: Sequence[np.ndarray], names: Sequence[str]) -> str | None:
    for name, e, g in zip(names, expected, got):
        e_np = e.detach().cpu().numpy()
        if e_np.shape != g.shape:
            return f"output {name!r} has shape {list(g.shape)} in onnxruntime, {list(e_np.shape)} in torch"
        if e.is_floating_point():
            if not np.allclose(g, e_np, rtol=_TOLERANCE, atol=_TOLERANCE, equal_nan=True):
                worst = float(np.nanmax(np.abs(g.astype(np.float64) - e_np.astype(np.float64))))
                return f"output {name!r} differs from torch by up to {worst:.3g} (> {_TOLERANCE})"
        elif not np.array_equal(g, e_np):
            return f"output {name!r} differs from torch"
    return None


def write_onnx(exported: Any, inputs: dict[str, torch.Tensor], output_names: Sequence[str],
               directory: str, static_batch: bool = False) -> dict[str, Any]:
    """Converts ``exported`` (a ``torch.export.ExportedProgram`` over the dict ``inputs``) to
    ``directory/model.onnx``; returns its description for ``signature.json``. The check runs a
    batch of another size too, unless the program's batch is ``static_batch``.

    Raises ValueError with the reason when the conversion fails or onnxruntime disagrees with torch.
    """
    import onnxruntime

    input_names = list(inputs)
    path = os.path.join(directory, ONNX_FILENAME)
    try:
        program = torch.onnx.export(exported, input_names=input_names, output_names=list(output_names),
                                    dynamo=True, verbose=False)
        if program is None:  # only with an f= argument
            raise RuntimeError("torch.onnx.export returned no program")
        program.save(path)
    except Exception as exc:
        raise ValueError(f"Cannot export this model to ONNX: torch.onnx.export failed ({type(exc).__name__}: "
                         f"{str(exc).strip().splitlines()[0][:500] if str(exc).strip() else ''}). Operations "
                         "without an ONNX equivalent cannot be exported; use format='torch.export'.") from exc
    try:
        session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
        module = exported.module()
        for variant in (inputs, _variant(inputs, grow=not static_batch)):
            with torch.no_grad():
                expected = module(variant)
            feeds = {name: variant[name].detach().cpu().numpy() for name in input_names}
            got = session.run(list(output_names), feeds)
            problem = _compare(expected, got, output_names)
            if problem is not None:
                raise ValueError(f"Cannot export this model to ONNX: onnxruntime's answer is not torch's on "
                                 f"a batch of {next(iter(variant.values())).shape[0]} rows: {problem}.")
    except Exception:
        if os.path.exists(path):
            os.remove(path)
        raise
    return {"file": ONNX_FILENAME, "inputs": input_names, "outputs": list(output_names),
            "opset": int(program.model.opset_imports.get("", 0)),
            "onnxruntime_version": onnxruntime.__version__}


def onnxruntime_program(path: str, info: dict[str, Any]) -> Callable[[dict[str, torch.Tensor]], tuple[torch.Tensor, ...]]:
    """The export's ``model.onnx`` under onnxruntime, called as the torch program is: a dict of
    input tensors -> the tuple of outputs (``export.load(path, runtime="onnxruntime")`` uses it)."""
    check_onnx_available()
    import onnxruntime

    session = onnxruntime.InferenceSession(os.path.join(path, info["file"]), providers=["CPUExecutionProvider"])
    names, outputs = list(info["inputs"]), list(info["outputs"])

    def run(inputs: dict[str, torch.Tensor]) -> tuple[torch.Tensor, ...]:
        feeds = {name: inputs[name].detach().cpu().numpy() for name in names}
        return tuple(torch.from_numpy(value) for value in session.run(outputs, feeds))

    return run
