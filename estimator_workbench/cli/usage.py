"""What every CLI command shares: the program name, ``UsageError`` (bad input: one line on
stderr, exit code 2) and the checks of arguments that several commands take."""

from __future__ import annotations

import argparse

__all__ = ["PROG", "UsageError", "positive_int"]

PROG = "estimator-workbench"


class UsageError(Exception):
    """Bad input from the user: reported as one line on stderr, exit code 2."""


def positive_int(text: str) -> int:
    """An argparse ``type``: an integer >= 1 (``runs --limit -1`` was accepted, issue 24 item 15)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, given {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, given {text!r}")
    return value


