"""The Data page's choices as ``run`` flags: column roles and types, how a date or text column is
encoded, the evaluation split and missing numeric values, so every choice the UI offers is a
flag too (the run contract's dataset spec is the same either way).

Example:
    >>> parser = argparse.ArgumentParser()
    >>> add_data_arguments(parser)
    >>> args = parser.parse_args(["--role", "name=ignore", "--eval-fraction", "0.3"])
    >>> args.role, args.eval_fraction
    (['name=ignore'], 0.3)
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from estimator_workbench.cli.usage import UsageError

__all__ = ["add_data_arguments", "apply_data_flags"]


def add_data_arguments(parser: argparse.ArgumentParser) -> None:
    """Adds the Data page's choices to ``parser`` (the ``run`` command)."""
    # The choices' own module: the data modules import pandas, which would delay run's runner.
    from estimator_workbench.data.choices import (
        DATE_ENCODINGS,
        DTYPES,
        NUMERIC_MISSING,
        ROLES,
        TEXT_ENCODINGS,
    )

    data = parser.add_argument_group("data (the Data page's choices)")
    data.add_argument("--role", action="append", default=[], metavar="COLUMN=ROLE",
                      help=f"a column's role, one of {list(ROLES)} (repeatable)")
    data.add_argument("--type", action="append", default=[], metavar="COLUMN=TYPE", dest="column_type",
                      help=f"a column's type, one of {list(DTYPES)} (repeatable)")
    data.add_argument("--encoding", action="append", default=[], metavar="COLUMN=ENCODING",
                      help=f"a date column: {list(DATE_ENCODINGS)}; a text column: {list(TEXT_ENCODINGS)} "
                           "(repeatable)")
    data.add_argument("--hash-buckets", type=int, help="buckets of the columns encoded 'hash'")
    data.add_argument("--eval-fraction", type=float, help="share of rows held out for evaluation, in [0, 1)")
    data.add_argument("--split-seed", type=int, help="seed of the evaluation split")
    data.add_argument("--stratify", action=argparse.BooleanOptionalAction, default=None,
                      help="keep the class proportions in both parts of the split")
    data.add_argument("--numeric-missing", choices=NUMERIC_MISSING,
                      help="missing numbers: the training mean, zero, or drop the rows")


def _pairs(values: list[str], flag: str, columns: tuple[str, ...]) -> dict[str, str]:
    pairs = {}
    for value in values:
        column, sep, choice = value.partition("=")
        if not sep or not column or not choice:
            raise UsageError(f"{flag} takes COLUMN=VALUE, given: {value!r}.")
        if column not in columns:
            raise UsageError(f"{flag} {value!r}: the data has no column {column!r}; its columns are {list(columns)}.")
        pairs[column] = choice
    return pairs


def apply_data_flags(spec: Any, args: argparse.Namespace) -> Any:
    """``spec`` (a ``DatasetSpec``) with the data flags of ``args`` applied; a bad value raises
    ``UsageError`` naming the flag."""
    columns = tuple(spec.schema.names)
    schema = spec.schema
    flags = (("--role", getattr(args, "role", []), "role"), ("--type", getattr(args, "column_type", []), "dtype"))
    for flag, values, field in flags:
        for column, choice in _pairs(values, flag, columns).items():
            try:
                schema = schema.replace_column(column, **{field: choice})
            except ValueError as exc:
                raise UsageError(f"{flag} {column}={choice}: {exc}") from None
    changes: dict[str, Any] = {"schema": schema}
    encodings = _pairs(getattr(args, "encoding", []), "--encoding", columns)
    if encodings:
        changes["encodings"] = {**spec.encodings, **encodings}
    for flag, field in (("hash_buckets", "hash_buckets"), ("eval_fraction", "eval_fraction"),
                        ("split_seed", "seed"), ("stratify", "stratify"), ("numeric_missing", "numeric_missing")):
        value = getattr(args, flag, None)
        if value is not None:
            changes[field] = value
    try:
        return dataclasses.replace(spec, **changes)
    except ValueError as exc:
        raise UsageError(f"The data flags do not describe a usable dataset: {exc}") from None
