"""The package list and the resource lookups that make the wheel carry pages/ and sample_data/."""
from __future__ import annotations

from pathlib import Path

import tomllib
from setuptools import find_packages

from estimator_workbench import resources

REPO = Path(__file__).resolve().parents[2]
MAPPED = {"estimator_workbench.pages": "pages", "estimator_workbench.sample_data": "sample_data"}


def _setuptools_table() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]


def test_explicit_package_list_is_what_find_packages_sees_plus_the_mapped_folders():
    # A new subpackage missing from the explicit list would be silently left out of the wheel.
    table = _setuptools_table()
    found = set(find_packages(str(REPO), include=["estimator_engine*", "estimator_workbench*"]))
    assert set(table["packages"]) == found | set(MAPPED)
    assert table["package-dir"] == MAPPED


def test_resources_resolve_to_the_mapped_folders_not_relative_paths():
    assert resources.pages_dir().resolve() == (REPO / "pages").resolve()
    assert resources.sample_data_dir().resolve() == (REPO / "sample_data").resolve()
    assert resources.ui_script().resolve() == (REPO / "estimator_workbench" / "ui" / "app.py").resolve()
    assert {"data.py", "model.py", "train.py", "runs.py", "run.py", "compare.py", "predict.py"} <= {
        p.name for p in resources.pages_dir().glob("*.py")}
    assert (resources.sample_data_dir() / "iris.csv").is_file()


def test_package_data_patterns_cover_every_shipped_file():
    data = _setuptools_table()["package-data"]
    assert "*.csv" in data["estimator_workbench.sample_data"]
    templates = {p.relative_to(REPO / "estimator_workbench" / "templates").as_posix()
                 for p in (REPO / "estimator_workbench" / "templates" / "bundled").rglob("*.py")}
    patterns = data["estimator_workbench.templates"]
    assert templates and all(any(Path(t).match(pat) for pat in patterns) for t in templates)
