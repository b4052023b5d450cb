"""Tests of the summary writer (JSON lines + optional TensorBoard) and of the readers."""

from __future__ import annotations

import gc
import json
import logging
import math
import time

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

    def test_flush_without_sync_makes_both_files_readable_and_leaves_the_fsync(self, tmp_path, monkeypatch):
        """evaluate's results flush: TensorBoard and read_summaries see them now, no fsync paid."""
        pytest.importorskip("tensorboard")
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

        synced = []
        monkeypatch.setattr(summary.os, "fsync", synced.append)
        writer = SummaryWriter(tmp_path, flush_secs=60, tensorboard=True)
        writer.add_scalar("accuracy", 0.5, 10)
        writer.flush(sync=False)
        accumulator = EventAccumulator(str(tmp_path))
        accumulator.Reload()
        assert [(e.step, e.value) for e in accumulator.Scalars("accuracy")] == [(10, 0.5)]
        assert [r["value"] for r in lines(tmp_path)] == [0.5] and synced == []
        writer.flush()
        assert len(synced) == 1
        writer.close()

    def test_the_periodic_flush_makes_events_readable_without_an_fsync(self, tmp_path, monkeypatch):
        """Training writes every flush_secs from its own thread: no fsync there (a slow disk would
        stall the steps); the hooks' flush at the end of train() and close() sync."""
        pytest.importorskip("tensorboard")
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

        synced = []
        monkeypatch.setattr(summary.os, "fsync", synced.append)
        writer = SummaryWriter(tmp_path, flush_secs=0, tensorboard=True)
        writer.add_scalar("loss", 1.0, 1)
        writer.add_scalar("loss", 0.5, 2)  # its own flush writes the first event
        accumulator = EventAccumulator(str(tmp_path))
        accumulator.Reload()
        assert [e.step for e in accumulator.Scalars("loss")] == [1] and synced == []
        writer.close()
        assert len(synced) == 1

    def test_a_writer_reopened_within_the_second_keeps_the_first_event_file(self, tmp_path):
        pytest.importorskip("tensorboard")
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

        writer = SummaryWriter(tmp_path, tensorboard=True)
        writer.add_scalar("loss", 1.0, 1)
        writer.close()
        writer.add_scalar("loss", 2.0, 2)  # reopens: a second event file, the first untouched
        writer.close()
        assert len(list(tmp_path.glob("events.out.tfevents.*"))) == 2
        accumulator = EventAccumulator(str(tmp_path))
        accumulator.Reload()
        assert [(e.step, e.value) for e in accumulator.Scalars("loss")] == [(1, 1.0), (2, 2.0)]

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

    def test_one_event_per_call_with_every_value(self, tmp_path, monkeypatch):
        """Created lazily; each add_scalars call is one event holding every value with its tag as
        given (as TF's evaluation writes its metrics); text as tensorboardX's text summary."""
        pytest.importorskip("tensorboard")
        from tensorboard.backend.event_processing.event_file_loader import LegacyEventFileLoader

        monkeypatch.setattr(summary, "_TENSORBOARD_AVAILABLE", True)
        writer = SummaryWriter(tmp_path)  # tensorboard=None: used because it is "installed"
        assert list(tmp_path.iterdir()) == []  # created lazily
        writer.add_scalars({"loss": 0.5, "auc precision/recall": 1}, 3)
        writer.add_text("t", "x", 4)
        writer.close()
        [path] = tmp_path.glob("events.out.tfevents.*")
        events = list(LegacyEventFileLoader(str(path)).Load())  # the protos as written
        assert events[0].file_version == "brain.Event:2"
        assert [(e.step, [(v.tag, v.simple_value) for v in e.summary.value]) for e in events[1:2]] == [
            (3, [("loss", 0.5), ("auc precision/recall", 1.0)])]
        assert [(e.step, [(v.tag, v.tensor.string_val) for v in e.summary.value]) for e in events[2:]] == [
            (4, [("t/text_summary", [b"x"])])]
        assert len(lines(tmp_path)) == 3
        with SummaryWriter(tmp_path / "plain", tensorboard=False) as writer:
            writer.add_scalar("loss", 1, 5)
        assert [p.name for p in (tmp_path / "plain").iterdir()] == [SUMMARIES_FILENAME]

    def test_tensorboard_event_files(self, tmp_path):
        pytest.importorskip("tensorboard")
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

        with SummaryWriter(tmp_path) as writer:
            writer.add_scalar("loss", 0.5, 7)
            writer.add_scalars({"loss": 0.25, "accuracy": 0.75}, 8)
            writer.add_text("checkpoint_path", "model.ckpt-8", 8)
        accumulator = EventAccumulator(str(tmp_path))
        accumulator.Reload()
        assert [(e.step, e.value) for e in accumulator.Scalars("loss")] == [(7, 0.5), (8, 0.25)]
        assert [(e.step, e.value) for e in accumulator.Scalars("accuracy")] == [(8, 0.75)]
        assert len(lines(tmp_path)) == 4


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
