"""Tests of the summary writer (JSON lines + optional TensorBoard) and of the readers."""

from __future__ import annotations

import gc
import json
import logging
import math
import sys
import time
import types

import numpy as np
import pytest
import torch

from estimator_engine import summary
from estimator_engine.summary import (
    SUMMARIES_FILENAME,
    SummaryWriter,
    SummaryWriterCache,
    read_eval_metrics,
    read_summaries,
)


def lines(logdir):
    path = logdir / SUMMARIES_FILENAME
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.fixture
def monotonic(monkeypatch):
    state = {"now": 50.0}
    monkeypatch.setattr(time, "monotonic", lambda: state["now"])
    return state


class TestSummaryWriter:
    def test_scalars_and_text_as_json_lines(self, tmp_path, monkeypatch):
        monkeypatch.setattr(time, "time", lambda: 1234.5)
        logdir = tmp_path / "run" / "eval"
        writer = SummaryWriter(logdir, tensorboard=False)
        assert not logdir.exists()  # nothing on disk before the first summary
        writer.add_scalar("loss", torch.tensor(0.25), step=np.int64(10))
        writer.add_scalars({"accuracy": np.float32(0.5), "auc": 1}, step=10)
        writer.add_text("notes", "hello", step=11)
        writer.close()
        assert lines(logdir) == [
            {"step": 10, "wall_time": 1234.5, "tag": "loss", "value": 0.25},
            {"step": 10, "wall_time": 1234.5, "tag": "accuracy", "value": 0.5},
            {"step": 10, "wall_time": 1234.5, "tag": "auc", "value": 1.0},
            {"step": 11, "wall_time": 1234.5, "tag": "notes", "text": "hello"},
        ]
        assert writer.path == str(logdir / SUMMARIES_FILENAME) and writer.logdir == str(logdir)

    def test_bad_values(self, tmp_path):
        writer = SummaryWriter(tmp_path, tensorboard=False)
        with pytest.raises(TypeError, match=r"Summary 'w' must be a scalar number, given array"):
            writer.add_scalar("w", np.ones(3), step=1)
        with pytest.raises(TypeError, match="A summary tag must be a str, given 3"):
            writer.add_scalar(3, 1.0, step=1)
        with pytest.raises(TypeError, match="scalars must be a dict"):
            writer.add_scalars([1.0], step=1)
        with pytest.raises(TypeError, match="logdir must be a non-empty path"):
            SummaryWriter("")
        with pytest.raises(ValueError, match="flush_secs must be a number >= 0, given -1"):
            SummaryWriter(tmp_path, flush_secs=-1)
        writer.close()
        assert lines(tmp_path) == []

    def test_nan_round_trips(self, tmp_path):
        with SummaryWriter(tmp_path, tensorboard=False) as writer:
            writer.add_scalar("loss", float("nan"), 1)
        assert math.isnan(read_eval_metrics(tmp_path)[1]["loss"])

    def test_buffered_until_flush_or_flush_secs(self, tmp_path, monotonic):
        writer = SummaryWriter(tmp_path, flush_secs=5, tensorboard=False)
        writer.add_scalar("a", 1, 1)
        monotonic["now"] += 4.9
        writer.add_scalar("a", 2, 2)
        assert lines(tmp_path) == []
        monotonic["now"] += 0.1  # 5 s after the oldest pending line
        writer.add_scalar("a", 3, 3)
        assert [r["value"] for r in lines(tmp_path)] == [1, 2, 3]
        writer.add_scalar("a", 4, 4)
        assert len(lines(tmp_path)) == 3
        writer.flush()
        assert len(lines(tmp_path)) == 4
        writer.close()

    def test_flush_without_events_writes_the_lines_and_leaves_the_event_file_to_its_flusher(self, tmp_path):
        """evaluate's results flush: the JSON lines now, tensorboardX's fsyncing flush left to its thread."""
        pytest.importorskip("tensorboardX")
        writer = SummaryWriter(tmp_path, flush_secs=60, tensorboard=True)
        writer.add_scalar("accuracy", 0.5, 10)
        flushes = []
        real = writer._state.tensorboard.flush
        writer._state.tensorboard.flush = lambda: flushes.append("events")
        writer.flush(events=False)
        assert [r["value"] for r in lines(tmp_path)] == [0.5] and flushes == []
        writer.flush()
        assert flushes == ["events"]
        writer._state.tensorboard.flush = real
        writer.close()

    def test_flush_secs_zero_writes_at_once_and_pending_is_bounded(self, tmp_path, monotonic):
        with SummaryWriter(tmp_path / "a", flush_secs=0, tensorboard=False) as writer:
            writer.add_scalar("x", 1, 1)
            assert len(lines(tmp_path / "a")) == 1
        with SummaryWriter(tmp_path / "b", flush_secs=1e9, tensorboard=False) as writer:
            for step in range(summary._MAX_PENDING_LINES):
                writer.add_scalar("x", step, step)
            assert len(lines(tmp_path / "b")) == summary._MAX_PENDING_LINES

    def test_close_then_write_appends(self, tmp_path):
        writer = SummaryWriter(tmp_path, tensorboard=False)
        writer.add_scalar("a", 1, 1)
        writer.close()
        writer.close()  # twice is fine
        writer.add_scalar("a", 2, 2)
        writer.close()
        with SummaryWriter(tmp_path, tensorboard=False) as other:  # another process, later
            other.add_scalar("a", 3, 3)
        assert [r["step"] for r in lines(tmp_path)] == [1, 2, 3]

    def test_flushed_when_garbage_collected(self, tmp_path):
        writer = SummaryWriter(tmp_path, flush_secs=1e9, tensorboard=False)
        writer.add_scalar("a", 1, 1)
        del writer
        gc.collect()
        assert len(lines(tmp_path)) == 1

    def test_tensorboard_wiring_with_a_fake_module(self, tmp_path, monkeypatch):
        calls = []

        class FakeTensorBoardWriter:
            def __init__(self, logdir, flush_secs):
                calls.append(("init", logdir))

            def add_scalar(self, tag, value, global_step, walltime):
                calls.append(("scalar", tag, value, global_step))

            def add_text(self, tag, text, global_step, walltime):
                calls.append(("text", tag, text, global_step))

            def flush(self):
                calls.append(("flush",))

            def close(self):
                calls.append(("close",))

        fake = types.ModuleType("tensorboardX")
        fake.SummaryWriter = FakeTensorBoardWriter
        monkeypatch.setitem(sys.modules, "tensorboardX", fake)
        monkeypatch.setattr(summary, "_TENSORBOARD_AVAILABLE", True)
        writer = SummaryWriter(tmp_path)  # tensorboard=None: used because it is "installed"
        assert calls == []  # created lazily
        writer.add_scalars({"loss": 0.5, "acc": 1}, 3)
        writer.add_text("t", "x", 4)
        writer.close()
        assert calls == [("init", str(tmp_path)), ("scalar", "loss", 0.5, 3), ("scalar", "acc", 1.0, 3),
                         ("text", "t", "x", 4), ("flush",), ("close",)]
        assert len(lines(tmp_path)) == 3
        calls.clear()
        with SummaryWriter(tmp_path, tensorboard=False) as writer:
            writer.add_scalar("loss", 1, 5)
        assert calls == []

    def test_tensorboard_event_files(self, tmp_path):
        pytest.importorskip("tensorboard")
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

        with SummaryWriter(tmp_path) as writer:
            writer.add_scalar("loss", 0.5, 7)
            writer.add_scalar("loss", 0.25, 8)
        accumulator = EventAccumulator(str(tmp_path))
        accumulator.Reload()
        assert [(e.step, e.value) for e in accumulator.Scalars("loss")] == [(7, 0.5), (8, 0.25)]
        assert len(lines(tmp_path)) == 2


class TestSummaryWriterCache:
    def test_one_writer_per_directory(self, tmp_path, monkeypatch):
        monkeypatch.chdir(tmp_path)
        try:
            writer = SummaryWriterCache.get("logs")
            assert SummaryWriterCache.get(tmp_path / "logs") is writer
            assert SummaryWriterCache.get("other") is not writer
            writer.add_scalar("a", 1, 1)
        finally:
            SummaryWriterCache.clear()  # closes, so pending lines are written
        assert len(lines(tmp_path / "logs")) == 1
        assert SummaryWriterCache.get("logs") is not writer
        SummaryWriterCache.clear()


class TestReaders:
    def write(self, path, text):
        path.mkdir(parents=True, exist_ok=True)
        (path / SUMMARIES_FILENAME).write_text(text)

    def test_read_eval_metrics(self, tmp_path):
        with SummaryWriter(tmp_path, tensorboard=False) as writer:
            writer.add_scalars({"loss": 3.0, "accuracy": 0.5}, step=20)
            writer.add_scalars({"loss": 4.0}, step=10)
            writer.add_text("note", "ignored", step=10)
            writer.add_scalars({"loss": 2.0}, step=20)  # a later line for the same step wins
        metrics = read_eval_metrics(tmp_path)
        assert metrics == {10: {"loss": 4.0}, 20: {"loss": 2.0, "accuracy": 0.5}}
        assert list(metrics) == [10, 20]

    def test_missing_directory_or_file(self, tmp_path):
        assert read_eval_metrics(tmp_path / "nope") == {}
        assert read_eval_metrics(tmp_path) == {}
        assert read_summaries(tmp_path / "nope") == []
        (tmp_path / "file").write_text("x")
        assert read_eval_metrics(tmp_path / "file") == {}

    def test_truncated_last_line_is_skipped(self, tmp_path, caplog):
        good = json.dumps({"step": 1, "wall_time": 0.0, "tag": "loss", "value": 1.5})
        self.write(tmp_path, good + "\n" + good[:-9])
        with caplog.at_level(logging.WARNING, logger="estimator_engine"):
            assert read_eval_metrics(tmp_path) == {1: {"loss": 1.5}}
        assert caplog.records == []  # a line still being written is expected, not warned about

    def test_corrupt_middle_line_is_skipped_with_a_warning(self, tmp_path, caplog):
        first = json.dumps({"step": 1, "wall_time": 0.0, "tag": "loss", "value": 1.5})
        last = json.dumps({"step": 2, "wall_time": 0.0, "tag": "loss", "value": 0.5})
        self.write(tmp_path, f"{first}\n{{garbage\n\n[1, 2]\n{last}\n")
        with caplog.at_level(logging.WARNING, logger="estimator_engine"):
            assert read_eval_metrics(tmp_path) == {1: {"loss": 1.5}, 2: {"loss": 0.5}}
        assert "Skipping a corrupt line 2" in caplog.text

    def test_read_summaries_returns_every_line(self, tmp_path, monkeypatch):
        monkeypatch.setattr(time, "time", lambda: 7.0)
        with SummaryWriter(tmp_path, tensorboard=False) as writer:
            writer.add_scalar("loss", 1.0, 1)
            writer.add_text("note", "hi", 1)
            writer.add_scalar("loss", 0.5, 1)
        assert read_summaries(tmp_path) == [
            {"step": 1, "wall_time": 7.0, "tag": "loss", "value": 1.0},
            {"step": 1, "wall_time": 7.0, "tag": "note", "text": "hi"},
            {"step": 1, "wall_time": 7.0, "tag": "loss", "value": 0.5},
        ]
