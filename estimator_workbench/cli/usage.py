"""What every CLI command shares: the program name and ``UsageError`` (bad input: one line on
stderr, exit code 2)."""

from __future__ import annotations

__all__ = ["PROG", "UsageError"]

PROG = "estimator-workbench"


class UsageError(Exception):
    """Bad input from the user: reported as one line on stderr, exit code 2."""
