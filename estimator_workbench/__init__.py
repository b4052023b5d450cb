"""The Estimator Workbench backend: registry, launcher, runner, metrics, CLI and the Python API
(no Streamlit here).

``estimator_workbench.Workspace`` (and ``Run``, ``Sweep``) are the notebook API of
``estimator_workbench.api``, imported on first use so that ``import estimator_workbench`` stays
light. Only ``estimator_workbench/ui/app.py`` and ``estimator_workbench/ui*.py`` import ``streamlit``;
every other module is importable and testable without it (``tests/estimator_workbench/test_layering.py``
checks this).
"""

from __future__ import annotations

from typing import Any

__all__ = ["Run", "Sweep", "Workspace"]

_API = frozenset(__all__)


def __getattr__(name: str) -> Any:
    if name in _API:
        from estimator_workbench import api

        return getattr(api, name)
    raise AttributeError(f"module 'estimator_workbench' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
