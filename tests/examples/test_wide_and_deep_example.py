"""examples/wide_and_deep_export.py runs as written and its served scores equal predict()'s."""

from __future__ import annotations

import os
import runpy
import tempfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.slow
def test_wide_and_deep_example_serves_records_like_predict(monkeypatch, capsys, tmp_path):
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    runpy.run_path(os.path.join(ROOT, "examples", "wide_and_deep_export.py"), run_name="__main__")
    lines = capsys.readouterr().out.strip().splitlines()
    assert eval(lines[0])["global_step"] == 300
    assert lines[-1].startswith("served [[") and float(lines[-1].rsplit(" ", 1)[1]) < 1e-6
