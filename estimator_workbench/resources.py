"""Where the files shipped with the package lie: the UI pages, the bundled datasets, the UI script.

They are found through :mod:`importlib.resources`, never through paths relative to a checkout, so a
wheel install works from any directory. ``pages/`` and ``sample_data/`` stay at the top of the
repository and are installed as the packages ``estimator_workbench.pages`` and ``estimator_workbench.sample_data``
(``package-dir`` in pyproject.toml); an editable install maps the same names to the checkout's folders.

Example::

    >>> from estimator_workbench import resources
    >>> (resources.sample_data_dir() / "iris.csv").is_file()
    True
"""
from __future__ import annotations

from importlib import resources
from pathlib import Path

__all__ = ["pages_dir", "sample_data_dir", "ui_script", "ui_server"]


def _package_dir(package: str) -> Path:
    # Installed as plain files (wheel or editable install), so the Traversable is a real folder.
    folder = Path(str(resources.files(package)))
    if not folder.is_dir():
        raise FileNotFoundError(
            f"{package!r} resolves to {folder}, which is not a folder: the estimator-workbench "
            "install is incomplete; reinstall it (pip install --force-reinstall estimator-workbench).")
    return folder


def pages_dir() -> Path:
    """The folder of the Streamlit pages (``pages/*.py``)."""
    return _package_dir("estimator_workbench.pages")


def sample_data_dir() -> Path:
    """The folder of the bundled datasets (``sample_data/*.csv`` and their README)."""
    return _package_dir("estimator_workbench.sample_data")


def ui_script() -> Path:
    """The Streamlit entry script that ``estimator-workbench`` runs."""
    return _package_dir("estimator_workbench.ui") / "app.py"


def ui_server() -> Path:
    """The file that ``estimator-workbench ui`` serves: ``ui_script`` behind the access gate."""
    return _package_dir("estimator_workbench.ui") / "asgi.py"
