"""``import estimator_engine`` stays cheap: pandas (only for pandas_input_fn and frame-taking feature
column paths), streamlit and plotly are not imported eagerly, and a numpy-fed model trains without
pandas installed at all (issue 17.3)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

HEAVY = ("pandas", "streamlit", "plotly")


def _run(code: str, tmp_path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.getcwd(), "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=180, env=env, cwd=tmp_path)


def test_import_does_not_load_pandas_streamlit_or_plotly(tmp_path):
    done = _run(f"""
        import sys
        import estimator_engine
        print(sorted(name for name in {HEAVY!r} if name in sys.modules))
    """, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "[]"


def test_numpy_model_trains_with_pandas_and_streamlit_blocked(tmp_path):
    done = _run(f"""
        import sys
        for name in {HEAVY!r}:
            sys.modules[name] = None  # any import of them raises ImportError
        import numpy as np
        import estimator_engine as ee

        x = np.linspace(-1, 1, 32, dtype=np.float32).reshape(32, 1)
        est = ee.DNNRegressor(hidden_units=[4], feature_columns=[ee.feature_column.numeric_column("x")],
                              model_dir={str(tmp_path / "model")!r}, config=ee.RunConfig(tf_random_seed=0))
        est.train(ee.inputs.numpy_input_fn({{"x": x}}, 2 * x + 3, batch_size=8, shuffle=True), steps=4)
        print(est.get_variable_value("global_step"), "loss" in est.evaluate(
            ee.inputs.numpy_input_fn({{"x": x}}, 2 * x + 3, batch_size=8, shuffle=False)))
    """, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split()[-2:] == ["4", "True"]


def test_pandas_is_imported_when_first_needed():
    from estimator_engine._lazy_import import LazyModule

    lazy = LazyModule("json")
    assert "(imported)" not in repr(lazy)
    assert lazy.loads("[1]") == [1]
    assert "(imported)" in repr(lazy)
