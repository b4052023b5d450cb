"""The engine without the UI (issue 17, item 3): the wheel's base requirements are the engine's, and
``estimator_engine`` imports and trains with every UI package blocked.

Both tests are slow: one builds the wheel (about 30 s), one trains in a fresh interpreter.
"""

from __future__ import annotations

import email.parser
import json
import re
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# Everything only the `ui` (and `ray`) extras bring, plus the workbench itself.
UI_MODULES = ["streamlit", "plotly", "pandas", "code_editor", "pydantic", "psutil", "pyarrow", "ray",
              "estimator_workbench"]

_TRAIN_WITHOUT_UI = textwrap.dedent("""
    import json, sys

    blocked = set(sys.argv[1].split(","))

    import importlib.abc, importlib.machinery

    class Refuse(importlib.abc.Loader):
        def create_module(self, spec):
            raise ModuleNotFoundError(f"import of {spec.name!r} is not allowed: not a base dependency",
                                      name=spec.name)

        def exec_module(self, module):
            pass

    class Blocker:
        # A spec without an origin, whose loading fails as a missing module does: probes such as
        # torch._dynamo's importlib.util.find_spec(name) pass, an import raises ModuleNotFoundError.
        def find_spec(self, fullname, path=None, target=None):
            if fullname.split(".")[0] in blocked:
                return importlib.machinery.ModuleSpec(fullname, Refuse(), origin=None)
            return None

    sys.meta_path.insert(0, Blocker())
    import estimator_engine as ee
    from estimator_engine.testing import linear_model_fn, make_linear_data

    features, labels = make_linear_data(a=2.0, b=3.0, n=256)
    x, y = features["x"].numpy(), labels.numpy()
    estimator = ee.Estimator(linear_model_fn, model_dir=sys.argv[2], params={"learning_rate": 0.1},
                             config=ee.RunConfig(tf_random_seed=0))
    estimator.train(ee.inputs.numpy_input_fn({"x": x}, y, batch_size=32, num_epochs=None, shuffle=True),
                    steps=300)
    metrics = estimator.evaluate(ee.inputs.numpy_input_fn({"x": x}, y, batch_size=64, shuffle=False))
    weight = estimator.get_variable_value("linear/weight").item()
    bias = estimator.get_variable_value("linear/bias").item()
    leaked = sorted(m for m in sys.modules if m.split(".")[0] in blocked)
    print(json.dumps({"loss": float(metrics["loss"]), "weight": weight, "bias": bias, "leaked": leaked}))
""")


@pytest.mark.slow
def test_engine_trains_a_numpy_input_fn_model_with_every_ui_package_blocked(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-c", _TRAIN_WITHOUT_UI, ",".join(UI_MODULES), str(tmp_path / "model")],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["leaked"] == []
    assert result["weight"] == pytest.approx(2.0, abs=0.05)
    assert result["bias"] == pytest.approx(3.0, abs=0.05)
    assert result["loss"] < 1e-3


@pytest.mark.slow
def test_built_wheel_requires_only_the_engine_and_ships_py_typed(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", str(REPO), "-w", str(tmp_path)],
        cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (wheel,) = tmp_path.glob("estimator_workbench-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        (metadata_name,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        message = email.parser.Parser().parsestr(archive.read(metadata_name).decode())
        entry_points = archive.read(metadata_name.replace("METADATA", "entry_points.txt")).decode()
    assert "estimator_engine/py.typed" in names
    base = sorted(re.match(r"[A-Za-z0-9._-]+", r).group(0).lower()
                  for r in message.get_all("Requires-Dist") if "extra ==" not in r)
    assert base == ["numpy", "tensorboardx", "torch", "tqdm"]  # tqdm: the progress bar (issue 25)
    assert "estimator-workbench = estimator_workbench._entry:main" in entry_points
