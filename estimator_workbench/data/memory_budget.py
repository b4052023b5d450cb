"""One memory budget for the tables a process parses at the same time.

The UI server parses uploads for every browser session in threads of one process. The rows x
columns limit (``sources.MAX_CELLS``) bounds one table, not several sessions that each open a
different large file at once: each parse of a 150 MB CSV peaks near 0.5 GB, and four sessions at
once reached 13.2 GB of 23 GB before the limits (issue 24.3). So each parse reserves the memory it
is expected to peak at before it starts; one that would go over the budget waits for the others to
finish (the page shows its spinner meanwhile) and, after ``WAIT_S``, is refused with the figures
and how to raise the budget. A table larger than the whole budget is parsed alone. A runner
process parses one table at a time and never waits.

The budget is ``WORKBENCH_PARSE_MEMORY_MB`` when set, else a quarter of the machine's memory (at
least 1 GiB).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator

__all__ = ["CSV_PEAK_PER_BYTE", "PARQUET_PEAK_PER_CELL", "WAIT_S", "ParseBudget", "parse_budget"]

# Peak memory of a parse per byte of CSV file: 148 MB of CSV (1.8M x 11) peaked 460 MB above the
# process's baseline in `load_csv` (docs/RELIABILITY.md, issue 24.3): ~3.1, rounded up.
CSV_PEAK_PER_BYTE = 3.5
# Parquet is compressed, so its size says little: 8 bytes a cell for the frame and as much again
# for Arrow's table while it is converted.
PARQUET_PEAK_PER_CELL = 16
WAIT_S = 120.0  # how long a parse waits for room before it is refused
_ENV = "WORKBENCH_PARSE_MEMORY_MB"


def _size(n: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n / 2**10:.1f} KiB"


class ParseBudget:
    """Bytes that the tables parsed at the same time in this process may take together.

    Example:
        >>> budget = ParseBudget(2 * 2**30)
        >>> with budget.reserve(2**30, "iris.csv"):
        ...     budget.in_use
        1073741824
    """

    def __init__(self, total_bytes: int, wait_s: float = WAIT_S) -> None:
        if total_bytes <= 0:
            raise ValueError(f"The parse memory budget must be positive, given {total_bytes} bytes.")
        self.total_bytes = total_bytes
        self.wait_s = wait_s
        self.in_use = 0
        self.waiting = 0  # parses waiting for room now
        self._room = threading.Condition()

    @contextlib.contextmanager
    def reserve(self, nbytes: int, where: str) -> Iterator[None]:
        """Holds ``nbytes`` of the budget while the block parses ``where``; waits for room first.

        Raises ``ValueError`` (what it needs, what is in use, how to raise the budget) when no
        room was made within ``wait_s``.
        """
        wanted = max(0, min(int(nbytes), self.total_bytes))  # a larger table runs alone
        deadline = time.monotonic() + self.wait_s
        with self._room:
            while self.in_use and self.in_use + wanted > self.total_bytes:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ValueError(
                        f"Not enough memory to read {where} now: it needs about {_size(int(nbytes))} "
                        f"while other tables being read hold {_size(self.in_use)} of this server's "
                        f"{_size(self.total_bytes)} for reading data. Try again in a moment, or raise "
                        f"{_ENV} (in MB) when the machine has the memory.")
                self.waiting += 1
                try:
                    self._room.wait(left)
                finally:
                    self.waiting -= 1
            self.in_use += wanted
        try:
            yield
        finally:
            with self._room:
                self.in_use -= wanted
                self._room.notify_all()


def _default_total() -> int:
    raw = os.environ.get(_ENV, "").strip()
    if raw:
        try:
            megabytes = float(raw)
        except ValueError:
            megabytes = -1.0
        if not megabytes > 0:
            raise ValueError(f"{_ENV}={raw!r} is not a positive number of megabytes; set it to e.g. 4096, "
                             "or unset it for a quarter of the machine's memory.")
        return int(megabytes * 2**20)
    import psutil

    return max(2**30, psutil.virtual_memory().total // 4)


_budget: ParseBudget | None = None
_budget_lock = threading.Lock()


def parse_budget() -> ParseBudget:
    """This process's budget (made on first use from ``WORKBENCH_PARSE_MEMORY_MB`` or the machine)."""
    global _budget
    with _budget_lock:
        if _budget is None:
            _budget = ParseBudget(_default_total())
        return _budget
