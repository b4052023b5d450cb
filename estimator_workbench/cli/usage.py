"""What every CLI command shares: the program name, ``UsageError`` (bad input: one line on
stderr, exit code 2) and the checks of arguments that several commands take."""

from __future__ import annotations

import argparse
from pathlib import Path

__all__ = ["PROG", "UsageError", "dataset_file", "positive_int"]

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


def dataset_file(dataset: str, flag: str = "--dataset") -> Path | None:
    """The data file ``dataset`` names (a path with a data suffix, or an existing path), or None
    for a name (a bundled dataset). Raises ``UsageError`` for a folder or a missing file.

    Example:
        >>> dataset_file("iris") is None
        True
    """
    path = Path(dataset).expanduser()
    if path.suffix.lower() not in (".csv", ".parquet", ".pq") and not path.exists():
        return None
    if path.is_dir():
        raise UsageError(f"{flag} {dataset!r} is a folder, not a data file. Give the path of a .csv or "
                         ".parquet file (e.g. data/train.csv), or a bundled dataset name.")
    if not path.is_file():
        raise UsageError(f"{flag} file {dataset!r} does not exist.")
    return path
