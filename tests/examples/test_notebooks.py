"""The example notebooks (examples/notebooks/) are stored without outputs and run headless on a
fresh kernel (nbclient + ipykernel), as a user runs them from the top."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "examples" / "notebooks").glob("*.ipynb"))


def test_the_three_notebooks_are_there_and_stored_without_outputs():
    nbformat = pytest.importorskip("nbformat")
    assert [p.name for p in NOTEBOOKS] == ["quickstart.ipynb", "tf_porting.ipynb", "workbench_tour.ipynb"]
    for path in NOTEBOOKS:
        notebook = nbformat.read(path, as_version=4)
        nbformat.validate(notebook)
        code = [cell for cell in notebook.cells if cell.cell_type == "code"]
        assert code and all(not cell.outputs and cell.execution_count is None for cell in code), path.name


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_headless_on_a_fresh_kernel(path, tmp_path, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    monkeypatch.setenv("WORKBENCH_HOME", str(tmp_path / "workspace"))  # the kernel inherits it
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    notebook = nbformat.read(path, as_version=4)
    nbclient.NotebookClient(notebook, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()  # raises on a cell error
    errors = [o for c in notebook.cells for o in c.get("outputs", ()) if o.get("output_type") == "error"]
    assert errors == []
    text = "".join(o.get("text", "") for c in notebook.cells for o in c.get("outputs", ()))
    if path.stem == "quickstart":
        assert "accuracy" in text
        assert "INFO:estimator_engine: loss = " in text and "Loss for final step:" in text
    if path.stem == "tf_porting":
        assert "INFO:estimator_engine: Saving checkpoints for 600 into" in text
    if path.stem == "workbench_tour":
        assert len(list((tmp_path / "workspace" / "runs").iterdir())) == 2
        assert list(tmp_path.glob("r-*.ipynb"))
        assert "best for final eval accuracy -> r-" in text  # ws.compare() of the two runs
        compared = next(c for c in notebook.cells if c.cell_type == "code" and "ws.compare(" in c.source)
        views = [o for o in compared.outputs if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
        assert len(views) == 3  # live widgets in a kernel: curves, parallel coordinates, scatter
