"""Modules imported on first use, so that ``import estimator_engine`` does not pay for them.

pandas takes about 0.3-0.7 s to import and is needed only by ``pandas_input_fn`` and the feature
column paths that take frames or factorise text; a numpy-fed model never touches it.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

__all__ = ["LazyModule", "pandas"]


class LazyModule:
    """Stands in for a module and imports it on first attribute access.

    Example:
        >>> json = LazyModule("json")
        >>> json.dumps([1])
        '[1]'
    """

    def __init__(self, name: str) -> None:
        self._name = name
        self._module: ModuleType | None = None

    def __getattr__(self, attribute: str) -> Any:
        if self._module is None:
            self._module = importlib.import_module(self._name)
        return getattr(self._module, attribute)

    def __repr__(self) -> str:
        return f"<lazy module {self._name!r}{' (imported)' if self._module is not None else ''}>"


pandas = LazyModule("pandas")
