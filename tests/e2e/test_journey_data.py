"""Browser journey of the Data page (issue 15 items 3 and 4): upload seattle-weather (vega_datasets'
local file: a date column, five imbalanced classes), see each column's distribution and the date
column's choice, reload the page and find the same dataset and choice. Ends on the bundled iris,
so journeys after it start from the usual dataset."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from browser_kit import MARKS, playwright_sync, shot, shot_at, wait_idle

pytestmark = MARKS


def test_data_journey(server, page):
    vega = pytest.importorskip("vega_datasets")
    weather = Path(vega.local_data.seattle_weather.filepath).read_bytes()
    expect = playwright_sync.expect
    page.goto(server["url"])
    wait_idle(page, 60)
    page.wait_for_selector("h1:has-text('Data')")

    page.get_by_text("Upload a file", exact=True).click()
    wait_idle(page)
    page.get_by_test_id("stFileUploaderDropzoneInput").set_input_files(
        files=[{"name": "seattle-weather.csv", "mimeType": "text/csv", "buffer": weather}])
    page.get_by_text("Using seattle-weather.csv").wait_for(timeout=30_000)
    wait_idle(page)
    assert "dataset=upload%3Aseattle-weather.csv" in page.url or "dataset=upload:seattle-weather.csv" in page.url
    held_out = re.compile(r"Split: 1,1\d\d training rows · 2\d\d evaluation rows")  # 20 % held out, stratified
    expect(page.get_by_text(held_out)).to_be_visible()

    # distributions and missing values of every column
    page.get_by_role("tab", name="Distributions and missing values").click()
    wait_idle(page)
    table = page.get_by_test_id("stDataFrame").filter(has_text="distribution").first
    expect(table).to_be_visible()
    shot(page, "data-distributions")

    # the date column: expanded by default, the user may leave it out
    expect(page.get_by_text("Date column date")).to_be_visible()
    expect(page.get_by_text(re.compile("expanded into date_year, date_month, date_dayofweek"))).to_be_visible()
    page.get_by_text("Leave it out", exact=True).click()
    wait_idle(page)
    expect(page.get_by_text(re.compile("left out of the features"))).to_be_visible()
    shot_at(page, page.get_by_role("heading", name="Dates and high-cardinality columns"), "data-date-column")

    # a reload keeps the dataset (not iris) and the choice
    page.reload()
    wait_idle(page, 60)
    page.get_by_text("Using seattle-weather.csv").wait_for(timeout=30_000)
    expect(page.get_by_text(re.compile("left out of the features"))).to_be_visible()
    assert page.get_by_role("radio", name="Leave it out").is_checked()
    expect(page.get_by_text(held_out)).to_be_visible()

    # back to the bundled iris, for the journeys that follow
    page.get_by_text("Bundled sample", exact=True).click()
    wait_idle(page)
    page.get_by_text(re.compile(r"^Using iris")).wait_for(timeout=30_000)
