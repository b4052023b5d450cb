"""The parse memory budget (issue 24.3): tables parsed at the same time share one budget."""

from __future__ import annotations

import threading
import time

import pandas as pd
import pytest

from estimator_workbench.data import memory_budget, sources
from estimator_workbench.data.memory_budget import ParseBudget


def test_a_parse_that_fits_does_not_wait():
    budget = ParseBudget(100)
    with budget.reserve(60, "a.csv"), budget.reserve(40, "b.csv"):
        assert budget.in_use == 100
    assert budget.in_use == 0


def test_a_parse_over_the_budget_waits_for_the_one_holding_it():
    budget = ParseBudget(100, wait_s=30)
    first_in, release, order = threading.Event(), threading.Event(), []

    def first():
        with budget.reserve(70, "a.csv"):
            first_in.set()
            release.wait(10)
            order.append("a done")

    def second():
        first_in.wait(10)
        with budget.reserve(70, "b.csv"):
            order.append("b parsing")

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    first_in.wait(10)
    deadline = time.monotonic() + 10
    while not budget.waiting and time.monotonic() < deadline:  # until b waits
        time.sleep(0.01)
    assert order == [] and budget.in_use == 70 and budget.waiting == 1
    release.set()
    for t in threads:
        t.join(10)
    assert order == ["a done", "b parsing"]
    assert budget.in_use == 0


def test_a_table_larger_than_the_budget_is_parsed_alone():
    budget = ParseBudget(100, wait_s=0.2)
    with budget.reserve(500, "huge.csv"):
        assert budget.in_use == 100
        with pytest.raises(ValueError, match="needs about"):
            with budget.reserve(1, "tiny.csv"):
                pass


def test_the_refusal_gives_the_figures_and_the_setting():
    budget = ParseBudget(4 * 2**30, wait_s=0.05)
    with budget.reserve(3 * 2**30, "big.csv"):
        with pytest.raises(ValueError) as info:
            with budget.reserve(2 * 2**30, "other.csv"):
                pass
    assert str(info.value) == (
        "Not enough memory to read other.csv now: it needs about 2.0 GiB while other tables being "
        "read hold 3.0 GiB of this server's 4.0 GiB for reading data. Try again in a moment, or "
        "raise WORKBENCH_PARSE_MEMORY_MB (in MB) when the machine has the memory.")
    assert budget.in_use == 0  # nothing is left reserved by the refused parse


def test_load_table_reserves_a_csv_s_expected_peak(tmp_path, monkeypatch):
    path = tmp_path / "t.csv"
    pd.DataFrame({"x": range(1000), "y": range(1000)}).to_csv(path, index=False)
    seen = []

    class Recording(ParseBudget):
        def reserve(self, nbytes, where):
            seen.append((nbytes, where))
            return super().reserve(nbytes, where)

    monkeypatch.setattr(memory_budget, "_budget", Recording(2**30))
    frame = sources.load_table(path)
    assert len(frame) == 1000
    assert seen == [(int(3.5 * path.stat().st_size), repr(str(path)))]


def test_load_table_is_refused_while_the_budget_is_held(tmp_path, monkeypatch):
    path = tmp_path / "t.csv"
    pd.DataFrame({"x": range(1000), "y": range(1000)}).to_csv(path, index=False)
    budget = ParseBudget(path.stat().st_size * 4, wait_s=0.05)
    monkeypatch.setattr(memory_budget, "_budget", budget)
    with budget.reserve(path.stat().st_size * 2, "another upload"):
        with pytest.raises(ValueError, match=r"Not enough memory to read '.*t\.csv' now: it needs about \d+\.\d KiB while other tables being read hold \d+\.\d KiB"):
            sources.load_table(path)
    assert len(sources.load_table(path)) == 1000  # room again once the other parse is done


@pytest.mark.parametrize("raw", ["abc", "0", "-5"])
def test_a_bad_budget_setting_is_refused_with_the_fix(monkeypatch, raw):
    monkeypatch.setenv("WORKBENCH_PARSE_MEMORY_MB", raw)
    with pytest.raises(ValueError, match=r"is not a positive number of megabytes; set it to e\.g\. 4096"):
        memory_budget._default_total()


def test_the_budget_setting_and_its_default(monkeypatch):
    monkeypatch.setenv("WORKBENCH_PARSE_MEMORY_MB", "512")
    assert memory_budget._default_total() == 512 * 2**20
    monkeypatch.delenv("WORKBENCH_PARSE_MEMORY_MB")
    import psutil

    assert memory_budget._default_total() == max(2**30, psutil.virtual_memory().total // 4)
