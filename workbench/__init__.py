"""The Estimator Workbench backend: registry, launcher, runner, metrics and CLI (no Streamlit here).

Only ``workbench/ui/app.py`` and ``workbench/ui*.py`` import ``streamlit``; every other module is
importable and testable without it (``tests/workbench/test_layering.py`` checks this).
"""

from __future__ import annotations

__all__: list[str] = []
