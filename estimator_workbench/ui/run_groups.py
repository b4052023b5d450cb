"""Helper runs in the Runs list (issue 28 item 9): the evaluate/predict runs launched from a
trained run ("eval plots of …", "predict … with …", "evaluate with …") are grouped under that
run instead of crowding the list. Pure functions (no Streamlit), tested directly."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Sequence

from estimator_workbench.execution.launcher import is_helper_run
from estimator_workbench.store.records import RunRecord

__all__ = ["NESTED_PREFIX", "RunGroups", "group_helper_runs"]

NESTED_PREFIX = "↳ "  # a helper run's name, listed under its parent


@dataclasses.dataclass(frozen=True)
class RunGroups:
    """The rows of the Runs table in order, what each parent's helpers are, and which rows are
    helpers shown under their parent.

    Example:
        >>> groups = group_helper_runs(records, show_helpers=False)  # doctest: +SKIP
        >>> groups.helpers[parent_id]                                # doctest: +SKIP
        '2 predict · 1 evaluate'
    """

    rows: list[RunRecord]
    helpers: dict[str, str]  # parent run id -> '2 predict · 1 evaluate'
    nested: frozenset[str]  # ids of helper rows listed right under their parent


def _describe(children: Sequence[RunRecord]) -> str:
    counts = Counter(c.action for c in children)
    return " · ".join(f"{n} {action}" for action, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def group_helper_runs(records: Sequence[RunRecord], *, show_helpers: bool) -> RunGroups:
    """Groups the helper runs of ``records`` under their parent run.

    Helpers (``is_helper_run``) whose parent is among ``records`` are hidden
    (``show_helpers=False``) or listed right after their parent, oldest first
    (``show_helpers=True``); either way the parent's row says how many it has. A helper whose
    parent is not listed (filtered out, in the trash) stays a row of its own. The other rows keep
    their order."""
    listed = {r.run_id for r in records}
    children: dict[str, list[RunRecord]] = {}
    for r in records:
        if is_helper_run(r) and r.parent_run_id in listed:
            children.setdefault(str(r.parent_run_id), []).append(r)
    grouped = {c.run_id for kids in children.values() for c in kids}
    rows: list[RunRecord] = []
    for r in records:
        if r.run_id in grouped:
            continue
        rows.append(r)
        if show_helpers:
            rows.extend(sorted(children.get(r.run_id, ()), key=lambda c: c.created_at))
    helpers = {parent: _describe(kids) for parent, kids in children.items()}
    return RunGroups(rows, helpers, frozenset(grouped) if show_helpers else frozenset())
