"""Tests of estimator_workbench.store.metrics_store (tail by byte offset, downsample) and estimator_workbench.store.metrics_hook."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from estimator_engine.hooks.base import SessionRunContext, SessionRunValues
from estimator_workbench.store.metrics_hook import MetricsWriterHook, append_rows, write_eval
from estimator_workbench.store.metrics_store import (
    COLUMNS,
    MetricsTail,
    downsample,
    read_all,
    rows_to_frame,
)


def line(step, name="loss", value=1.0, split="train"):
    return json.dumps({"step": step, "wall_time": 1.0, "split": split, "name": name,
                       "value": value}) + "\n"


class TestMetricsTail:
    def test_missing_file_is_empty(self, tmp_path):
        tail = MetricsTail(tmp_path / "metrics.jsonl")
        assert tail.read() == []
        frame = tail.read_frame()
        assert list(frame.columns) == list(COLUMNS) and len(frame) == 0

    def test_incremental_reads_only_new_lines(self, tmp_path):
        path = tmp_path / "metrics.jsonl"
        path.write_text(line(1) + line(2))
        tail = MetricsTail(path)
        assert [r["step"] for r in tail.read()] == [1, 2]
        assert tail.read() == []
        with open(path, "a") as f:
            f.write(line(3))
        assert [r["step"] for r in tail.read()] == [3]
        assert tail.offset == path.stat().st_size

    def test_partial_line_left_for_next_time(self, tmp_path):
        path = tmp_path / "metrics.jsonl"
        full = line(5, value=0.25)
        path.write_text(line(4) + full[:10])
        tail = MetricsTail(path)
        assert [r["step"] for r in tail.read()] == [4]
        assert tail.read() == []  # still partial
        with open(path, "a") as f:
            f.write(full[10:] + full[:3])
        rows = tail.read()
        assert rows == [{"step": 5, "wall_time": 1.0, "split": "train", "name": "loss", "value": 0.25}]

    def test_corrupt_and_blank_lines_skipped(self, tmp_path):
        path = tmp_path / "metrics.jsonl"
        path.write_text(line(1) + "\n{not json}\n[1, 2]\n" + line(2))
        assert [r["step"] for r in MetricsTail(path).read()] == [1, 2]

    def test_truncated_or_replaced_file_restarts(self, tmp_path):
        path = tmp_path / "metrics.jsonl"
        path.write_text(line(1) + line(2) + line(3))
        tail = MetricsTail(path)
        assert len(tail.read()) == 3
        path.unlink()
        path.write_text(line(9))
        assert [r["step"] for r in tail.read()] == [9]

    def test_read_all_frame_types(self, tmp_path):
        path = tmp_path / "metrics.jsonl"
        path.write_text(line(1, value=0.5) + line(1, name="accuracy", value=0.9, split="eval")
                        + line(2, value=float("nan")))
        frame = read_all(path)
        assert frame["value"].dtype == np.float64 and str(frame["step"].dtype) == "Int64"
        assert frame.loc[1, "split"] == "eval" and math.isnan(frame.loc[2, "value"])


class TestDownsample:
    def test_per_series_keeps_first_and_last(self):
        rows = [{"step": s, "wall_time": 0.0, "split": "train", "name": "loss", "value": float(s)}
                for s in range(1, 1001)]
        rows += [{"step": s, "wall_time": 0.0, "split": "eval", "name": "acc", "value": 1.0}
                 for s in range(0, 1000, 100)]
        out = downsample(rows_to_frame(rows), 50)
        loss = out[out["name"] == "loss"]
        assert len(loss) == 50 and loss["step"].iloc[0] == 1 and loss["step"].iloc[-1] == 1000
        assert (out["name"] == "acc").sum() == 10  # short series untouched

    def test_small_frame_untouched_and_bad_arg(self):
        frame = rows_to_frame([{"step": 1, "wall_time": 0.0, "split": "t", "name": "x", "value": 1}])
        assert downsample(frame, 10) is frame
        with pytest.raises(ValueError, match="max_points must be an int >= 2, given: 1"):
            downsample(frame, 1)


class FakeSession:
    def __init__(self, mode="train"):
        self.mode = mode
        self.global_step = 0


def drive(hook, session, steps, loss=lambda s: 1.0 / s):
    """Plays the engine's part: before_run, step, resolve fetches, after_run."""
    hook.begin()
    hook.after_create_session(session, None)
    stopped_at = None
    for _ in range(steps):
        ctx = SessionRunContext(original_args=None, session=session)
        args = hook.before_run(ctx)
        session.global_step += 1
        results = None
        if args is not None:
            results = {k: (session.global_step if v == "global_step" else loss(session.global_step))
                       for k, v in args.fetches.items()}
        hook.after_run(ctx, SessionRunValues(results))
        if ctx.stop_requested:
            stopped_at = session.global_step
            break
    hook.end(session)
    return stopped_at


class TestMetricsWriterHook:
    def test_logs_first_and_every_n_steps(self, tmp_path):
        path = tmp_path / "metrics.jsonl"
        hook = MetricsWriterHook(path, every_n_steps=10)
        drive(hook, FakeSession(), 35)
        frame = read_all(path)
        loss = frame[frame["name"] == "loss"]
        assert loss["step"].tolist() == [1, 10, 20, 30]
        assert loss["value"].tolist() == pytest.approx([1.0, 0.1, 0.05, 1 / 30])
        speed = frame[frame["name"] == "steps_per_sec"]
        assert speed["step"].tolist() == [10, 20, 30] and (speed["value"] > 0).all()
        assert set(frame["split"]) == {"train"} and hook.last_step == 35
        assert path.read_bytes().endswith(b"\n")

    def test_stop_file_requests_stop(self, tmp_path):
        stop = tmp_path / "stop.request"
        hook = MetricsWriterHook(tmp_path / "m.jsonl", every_n_steps=5, stop_file=stop)

        def loss(step):
            if step == 5:
                stop.write_text("x")
            return 0.5

        assert drive(hook, FakeSession(), 100, loss=loss) == 5
        assert hook.stop_requested

    def test_should_stop_and_heartbeat(self, tmp_path):
        beats = []
        hook = MetricsWriterHook(tmp_path / "m.jsonl", heartbeat=lambda: beats.append(1),
                                 should_stop=lambda: True)
        assert drive(hook, FakeSession(), 50) == 1
        assert len(beats) == 1  # at session start; then at most every ~2 s

    def test_heartbeat_errors_do_not_break_training(self, tmp_path):
        def boom():
            raise RuntimeError("database is locked")

        hook = MetricsWriterHook(tmp_path / "m.jsonl", heartbeat=boom)
        assert drive(hook, FakeSession(), 3) is None

    def test_eval_mode_logs_nothing(self, tmp_path):
        path = tmp_path / "m.jsonl"
        drive(MetricsWriterHook(path), FakeSession(mode="eval"), 20)
        assert not path.exists()

    def test_bad_every_n_steps(self, tmp_path):
        with pytest.raises(ValueError, match="every_n_steps must be an int >= 1, given: 0"):
            MetricsWriterHook(tmp_path / "m.jsonl", every_n_steps=0)

    def test_write_eval_and_append_rows(self, tmp_path):
        import torch

        path = tmp_path / "m.jsonl"
        rows = write_eval(path, 100, {"accuracy": torch.tensor(0.75), "loss": np.float32(0.5),
                                      "global_step": 100, "confusion": np.zeros((2, 2))})
        assert [(r["name"], r["value"]) for r in rows] == [("accuracy", 0.75), ("loss", 0.5)]
        assert append_rows(path, []) == 0
        frame = read_all(path)
        assert frame["split"].tolist() == ["eval", "eval"] and frame["step"].tolist() == [100, 100]


def test_gpu_memory_logged_when_cuda_is_in_use(tmp_path, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda *a, **k: 3 * 2**20)
    path = tmp_path / "m.jsonl"
    drive(MetricsWriterHook(path, every_n_steps=5), FakeSession(), 5)
    frame = read_all(path)
    memory = frame[frame["name"] == "gpu_memory_mb"]
    assert memory["step"].tolist() == [1, 5] and memory["value"].tolist() == [3.0, 3.0]


class TestFastPaths:
    """The fixed-format writer and the bulk readers agree with json.dumps / json.loads."""

    def test_format_rows_is_json_dumps(self):
        from estimator_workbench.store.metrics_hook import format_rows

        rows = [{"step": 1, "wall_time": 1733000000.123456, "split": "train", "name": "loss",
                 "value": 0.1},
                {"step": 2, "wall_time": 1.0, "split": "eval", "name": 'a"b\\c', "value": float("nan")},
                {"step": None, "wall_time": 1.0, "split": "eval", "name": "x", "value": np.float64(1e-20)},
                {"step": 3, "wall_time": 2.0, "split": "eval", "name": "é", "value": float("-inf")},
                {"step": 4, "wall_time": 2.0, "split": "eval", "name": "n", "value": 7}]
        expected = "".join(json.dumps({k: (float(r[k]) if isinstance(r[k], np.floating) else r[k])
                                       for k in COLUMNS}) + "\n" for r in rows).encode()
        assert format_rows(rows) == expected

    def test_bulk_frame_matches_row_parser(self, tmp_path):
        path = tmp_path / "metrics.jsonl"
        rows = [{"step": s, "wall_time": 1.5 + s, "split": "train" if s % 3 else "eval",
                 "name": "loss" if s % 2 else "accuracy", "value": 1.0 / (s + 1)}
                for s in range(5000)]  # > 64 KB: the columnar reader
        rows[7]["value"] = float("nan")
        rows[9]["step"] = None
        append_rows(path, rows)
        fast = MetricsTail(path).read_frame()
        slow = rows_to_frame(MetricsTail(path).read())
        assert len(fast) == 5000 and list(fast.columns) == list(COLUMNS)
        assert str(fast["step"].dtype) == "Int64" and fast["value"].dtype == np.float64
        assert fast["step"].isna().tolist() == slow["step"].isna().tolist()
        np.testing.assert_array_equal(fast["value"].to_numpy(), slow["value"].to_numpy())
        assert fast["name"].tolist() == slow["name"].tolist()
        assert fast["split"].tolist() == slow["split"].tolist()

    def test_bulk_read_falls_back_on_odd_lines(self, tmp_path):
        path = tmp_path / "metrics.jsonl"
        good = "".join(line(s) for s in range(2000))
        path.write_text(good + "{not json}\n\n[1]\n" + line(2000) + line(2001)[:7])
        tail = MetricsTail(path)
        frame = tail.read_frame()
        assert frame["step"].tolist() == list(range(2001))
        assert tail.offset == len(good) + len("{not json}\n\n[1]\n") + len(line(2000))
        assert [r["step"] for r in MetricsTail(path).read()] == list(range(2001))


def test_stop_file_between_logged_steps_is_seen_within_a_quarter_second(tmp_path):
    import time

    stop = tmp_path / "stop.request"
    hook = MetricsWriterHook(tmp_path / "m.jsonl", every_n_steps=1000, stop_file=stop)

    def loss(step):
        return 0.5

    session = FakeSession()
    hook.begin()
    hook.after_create_session(session, None)
    stopped_at = None
    for _ in range(10_000):
        ctx = SessionRunContext(original_args=None, session=session)
        args = hook.before_run(ctx)
        session.global_step += 1
        if session.global_step == 3:
            stop.write_text("x")  # between logged steps (1 and 1000)
        results = None if args is None else {"loss": 0.5, "global_step": session.global_step}
        hook.after_run(ctx, SessionRunValues(results))
        if ctx.stop_requested:
            stopped_at = session.global_step
            break
        time.sleep(0.001)
    hook.end(session)
    assert stopped_at is not None and 3 <= stopped_at < 1000 and hook.stop_requested


def test_file_is_kept_open_and_closed_at_end(tmp_path):
    path = tmp_path / "m.jsonl"
    hook = MetricsWriterHook(path, every_n_steps=2)
    session = FakeSession()
    hook.begin()
    hook.after_create_session(session, None)
    for _ in range(4):
        ctx = SessionRunContext(original_args=None, session=session)
        args = hook.before_run(ctx)
        session.global_step += 1
        hook.after_run(ctx, SessionRunValues(
            None if args is None else {"loss": 0.25, "global_step": session.global_step}))
        assert hook._fd is not None
        # every logged step is on disk at once (no buffering in the process)
        assert path.read_bytes().endswith(b"\n")
    hook.end(session)
    assert hook._fd is None
    assert read_all(path)["step"].tolist() == [1, 2, 2, 4, 4]  # loss; loss + steps_per_sec


@pytest.mark.parametrize(("max_steps", "expected"), [(5, [1, 5]), (25, [1, 10, 20, 25]), (20, [1, 10, 20])])
def test_the_last_step_of_a_run_is_always_logged(tmp_path, max_steps, expected):
    """A run whose max_steps is not a multiple of the logging period logs its last step too (a
    succeeded 5-step run logged every 10 steps used to show only step 1)."""
    import estimator_engine as ee
    from estimator_engine.testing import linear_model_fn, make_linear_data

    features, labels = make_linear_data(n=64)
    input_fn = ee.inputs.numpy_input_fn(features, labels, batch_size=8, num_epochs=None, shuffle=False)
    est = ee.Estimator(linear_model_fn, model_dir=str(tmp_path / "model"), params={})
    path = tmp_path / "metrics.jsonl"
    est.train(input_fn, max_steps=max_steps,
              hooks=[MetricsWriterHook(path, every_n_steps=10, final_step=max_steps)])
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["step"] for r in rows if r["name"] == "loss"] == expected
