"""The Estimator Workbench backend: registry, launcher, runner, metrics and CLI (no Streamlit here).

Only ``estimator_workbench/ui/app.py`` and ``estimator_workbench/ui*.py`` import ``streamlit``; every other module is
importable and testable without it (``tests/estimator_workbench/test_layering.py`` checks this).
"""

from __future__ import annotations

__all__: list[str] = []
