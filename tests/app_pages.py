"""``open_page``: the workbench app under Streamlit's AppTest, on one page, for the page tests."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[1] / "estimator_workbench" / "ui" / "app.py")


def open_page(page: str | None = None, *, query: Mapping[str, str] | None = None, **state: Any) -> AppTest:
    """The app run once with ``state`` in its session and ``query`` in its URL, then switched to
    ``pages/<page>.py`` (None: the default page); fails on any exception the page raised."""
    at = AppTest.from_file(APP, default_timeout=60)
    for key, value in state.items():
        at.session_state[key] = value
    for key, value in (query or {}).items():
        at.query_params[key] = value
    at.run()
    if page is not None:
        at.switch_page(f"../../pages/{page}.py").run()
    assert not at.exception, at.exception
    return at
