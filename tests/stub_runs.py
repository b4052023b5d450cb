"""Runs for the stub runners (``tests/estimator_workbench/stub_runner.py`` and the runners tests write):
their knobs (``sleep``, ``fail``, ``ignore_sigterm``, ...) travel in the run's ``params``, which the
run contract leaves to the template, not in its schedule, which the contract checks (no test-only
settings in product code). ``STUB_TEMPLATE`` declares them, so a stub run submitted through
``submit_run`` (the UI's forms, the CLI) passes the params check too.

Example:
    >>> stub_run_args({"max_steps": 5, "sleep": 0.0})
    {'schedule': {'max_steps': 5}, 'params': {'sleep': 0.0}}
"""

from __future__ import annotations

from typing import Any

__all__ = ["STUB_KNOBS", "STUB_TEMPLATE", "stub_run_args"]

STUB_KNOBS = ("sleep", "fail", "ignore_sigterm", "helper", "linger")

STUB_TEMPLATE = {"name": "stub", "code": '''PARAMS = {
    "sleep": {"type": "float", "default": 0.02, "min": 0},
    "fail": {"type": "bool", "default": False},
    "ignore_sigterm": {"type": "bool", "default": False},
}


def model_fn(features, labels, mode, params):
    raise NotImplementedError("the stub runner never calls the model_fn")
'''}


def stub_run_args(schedule: dict[str, Any], params: dict[str, Any] | None = None) -> dict[str, Any]:
    """``schedule`` and ``params`` for ``create_run``/``submit_run``: the stub knobs moved to params."""
    knobs = {k: v for k, v in schedule.items() if k in STUB_KNOBS}
    return {"schedule": {k: v for k, v in schedule.items() if k not in STUB_KNOBS},
            "params": {**(params or {}), **knobs}}
