"""The README's examples run as written (from the repository root, as the README says)."""

from __future__ import annotations

import os
import runpy
import tempfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.slow
def test_canned_example_trains_evaluates_and_serves(monkeypatch, capsys, tmp_path):
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the example's model and export dirs
    runpy.run_path(os.path.join(ROOT, "examples", "canned_example.py"), run_name="__main__")
    lines = capsys.readouterr().out.strip().splitlines()
    result = eval(lines[0])  # the printed metrics dict
    assert result["accuracy"] > 0.9
    assert "'scores'" in lines[-1]
