"""The registry database locked, missing, without tables or held past every retry at UI start-up:
readers wait and retry, the pages render, nothing crashes."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest

from estimator_workbench.store import database, registry_db
from estimator_workbench.store.registry import RunRegistry

REPO = Path(__file__).resolve().parents[2]
APP = str(REPO / "estimator_workbench" / "ui" / "app.py")


def render(page: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.switch_page(f"../../pages/{page}.py").run()
    return at


def add_run(home: Path, name: str = "kept") -> str:
    """A finished (cancelled) run: nothing for the page's launcher poll to start."""
    reg = RunRegistry(home)
    run_id = reg.create_run(
        name=name, action="train", dataset={"ref": {"kind": "bundled", "name": "iris"}},
        template={"name": "t", "code": ""}, params={}, run_config={}).run_id
    reg.set_status(run_id, "cancelled")
    return run_id


class _Locker:
    """Holds an exclusive lock on the database (readers blocked too, even in WAL) for ``seconds``."""

    def __init__(self, db: Path, seconds: float) -> None:
        self.conn = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
        self.conn.execute("PRAGMA locking_mode = EXCLUSIVE")
        self.conn.execute("BEGIN EXCLUSIVE")
        self.conn.execute("UPDATE runs SET note = note")
        self.timer = threading.Timer(seconds, self.release)
        self.timer.start()

    def release(self) -> None:
        try:
            self.conn.execute("COMMIT")
        finally:
            self.conn.close()

    def join(self) -> None:
        self.timer.join()


def test_lock_is_really_exclusive(workspace):
    add_run(workspace)
    locker = _Locker(workspace / "registry.sqlite", 0.5)
    try:
        probe = sqlite3.connect(workspace / "registry.sqlite", timeout=0)
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            probe.execute("SELECT COUNT(*) FROM runs").fetchone()
        probe.close()
    finally:
        locker.join()


@pytest.mark.parametrize("page", ["runs", "run", "compare"])
def test_pages_wait_out_a_locked_registry(workspace, page):
    run_id = add_run(workspace)
    locker = _Locker(workspace / "registry.sqlite", 1.0)
    started = time.monotonic()
    try:
        at = render(page)
    finally:
        locker.join()
    assert not at.exception, at.exception
    assert not [w for w in at.warning if "cannot be read" in w.value]  # no give-up path either
    assert time.monotonic() - started >= 0.9  # it waited instead of failing
    if page == "runs":
        assert run_id in at.dataframe[0].value["run"].tolist()


def test_a_lock_held_past_every_retry_shows_a_warning_not_a_crash(workspace, monkeypatch):
    add_run(workspace)
    monkeypatch.setattr(database, "BUSY_TIMEOUT_MS", 50)
    monkeypatch.setattr(registry_db, "_LOCK_RETRIES", 2)
    locker = _Locker(workspace / "registry.sqlite", 3.0)
    try:
        at = render("runs")
    finally:
        locker.join()
    assert not at.exception, at.exception
    shown = [w.value.replace("\\", "") for w in at.warning]  # markdown escapes removed
    assert any("cannot be read right now" in text and "registry.sqlite" in text
               for text in shown), shown
    assert at.button(key="_registry_retry")


@pytest.mark.parametrize("state", ["missing file", "empty file", "tables dropped"])
@pytest.mark.parametrize("page", ["runs", "run", "compare", "predict", "train"])
def test_pages_render_without_tables(workspace, state, page):
    workspace.mkdir(parents=True)
    db = workspace / "registry.sqlite"
    if state == "empty file":
        db.write_bytes(b"")
    elif state == "tables dropped":
        add_run(workspace)
        with sqlite3.connect(db) as conn:
            conn.execute("DROP TABLE runs")
            conn.execute("DROP TABLE schema_version")
    at = render(page)
    assert not at.exception, at.exception
    assert not [w for w in at.warning if "cannot be read" in w.value]  # readers saw "no runs"
    assert at.title[0].value
