"""Issue 24.3 (part): the UI server's memory had no budget. Rows x columns is limited for every
format before the frame is built, the refusal names the limit and the file's size, and the server
keeps one parsed copy of a file for all sessions (not one per session and call)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from estimator_workbench.data import sources


@pytest.fixture
def small_cell_limit(monkeypatch):
    monkeypatch.setattr(sources, "MAX_CELLS", 1_000)


def test_a_csv_over_the_cell_limit_is_refused_before_pandas_builds_it(tmp_path, small_cell_limit,
                                                                       monkeypatch):
    path = tmp_path / "wide.csv"
    pd.DataFrame(np.zeros((101, 10))).add_prefix("c").to_csv(path, index=False)  # 1,010 cells
    monkeypatch.setattr(sources.pd, "read_csv", lambda *a, **k: pytest.fail("parsed anyway"))
    size = path.stat().st_size
    with pytest.raises(ValueError, match=(
            rf"CSV file .*wide\.csv' \({size} bytes\) has 101 rows x 10 columns = 1,010 cells, over "
            r"the limit of 1,000 cells that one dataset may hold in memory\. Load a sample of the "
            r"rows, or keep only the columns the model needs\.")):
        sources.load_table(path)


def test_a_csv_at_the_limit_loads(tmp_path, small_cell_limit):
    path = tmp_path / "ok.csv"
    pd.DataFrame(np.zeros((100, 10))).add_prefix("c").to_csv(path, index=False)
    assert sources.load_table(path).shape == (100, 10)


def test_a_csv_over_the_row_limit_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(sources, "MAX_ROWS", 50)
    path = tmp_path / "long.csv"
    pd.DataFrame({"a": range(51), "b": range(51)}).to_csv(path, index=False)
    with pytest.raises(ValueError, match=r"has 51 rows, over the limit of 50\. Load a sample"):
        sources.load_table(path)


def test_a_small_parquet_file_with_many_cells_is_refused_from_its_footer(tmp_path, small_cell_limit):
    pytest.importorskip("pyarrow")
    path = tmp_path / "bomb.parquet"
    pd.DataFrame(np.zeros((200, 20))).add_prefix("c").to_parquet(path)  # 4,000 cells, a few kB
    with pytest.raises(ValueError, match=r"Parquet file .*bomb\.parquet' \(\d+ bytes\) has 200 rows x "
                                         r"20 columns = 4,000 cells, over the limit of 1,000 cells"):
        sources.load_table(path)


def test_every_session_shares_one_parsed_copy(tmp_path):
    pytest.importorskip("streamlit")
    from estimator_workbench.ui import session

    path = tmp_path / "data.csv"
    pd.DataFrame({"a": [1, 2, 3], "b": ["x", "y", "z"]}).to_csv(path, index=False)
    first, second = session.load_dataset_frame(path), session.load_dataset_frame(path)
    assert first is second  # one object, not a copy per call (cache_data made one each time)
