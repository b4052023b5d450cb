"""The package version, read from the installed distribution's metadata (pyproject.toml holds the one number).

Example:
    >>> import estimator_engine
    >>> estimator_engine.__version__ == package_version()
    True
"""

from __future__ import annotations

from importlib import metadata

__all__ = ["DISTRIBUTION", "__version__", "package_version"]

DISTRIBUTION = "estimator-workbench"


def package_version(distribution: str = DISTRIBUTION) -> str:
    """``distribution``'s installed version; ``'0+unknown'`` when it is not installed (a bare checkout on sys.path)."""
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "0+unknown"


__version__: str = package_version()
