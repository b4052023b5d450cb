"""What every CLI command shares: the program name, ``UsageError`` (bad input: one line on
stderr, exit code 2) and the checks of arguments that several commands take."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

__all__ = ["PROG", "UsageError", "json_object", "non_negative_int", "positive_int"]

PROG = "estimator-workbench"


class UsageError(Exception):
    """Bad input from the user: reported as one line on stderr, exit code 2."""


def _int_at_least(minimum: int, why: str) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = minimum - 1
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be an integer >= {minimum}, given {text!r}")
        return value

    parse.__doc__ = f"An argparse ``type``: an integer >= {minimum} ({why})."
    return parse


positive_int = _int_at_least(1, "``runs --limit -1`` was accepted, issue 24 item 15")
non_negative_int = _int_at_least(0, "``--helper-slots 0`` turns the helper slots off")


def json_object(text: str | None, flag: str) -> dict[str, Any]:
    """The JSON object a flag such as ``--params`` gives (``{}`` when it is not given); a
    ``UsageError`` naming the flag for anything else.

    Example:
        >>> json_object('{"learning_rate": 0.1}', "--params")
        {'learning_rate': 0.1}
    """
    if text is None or text == "":
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{flag} must be a JSON object, given: {text!r} ({exc.msg} at "
                         f"position {exc.pos}). Example: '{{\"hidden_units\": [32, 16]}}'.") from None
    except RecursionError:
        raise UsageError(f"{flag} is nested too deeply to read; a run's settings are a few levels deep "
                         "at most.") from None
    if not isinstance(value, dict):
        raise UsageError(f"{flag} must be a JSON object, given: {text!r}.")
    return value
