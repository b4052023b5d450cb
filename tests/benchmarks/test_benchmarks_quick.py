"""Benchmarks: the pairing/summary helpers give known answers, RESULTS.md is generated from the JSON
with the limits notes kept, and every benchmark script runs in ``--quick`` mode (slow: subprocesses).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "benchmarks"


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


common = _load("bench_common_under_test", BENCH / "_common.py")
run_all = _load("bench_run_all_under_test", BENCH / "run_all.py")


def test_measure_pairs_alternates_and_takes_ratios_within_rounds():
    calls: list[str] = []
    values = {"a": iter([2.0, 4.0, 9.0]), "b": iter([1.0, 1.0, 3.0])}

    def side(name):
        def fn():
            calls.append(name)
            return next(values[name])
        return fn

    r = common.measure_pairs({"a": side("a"), "b": side("b")}, 3, {"a/b": ("a", "b")})
    assert calls == ["a", "b", "b", "a", "b", "a"]  # ABBA: each side goes first in turn
    assert r["ratios"]["a/b"] == {"median": 3.0, "min": 2.0, "max": 4.0, "n": 3, "raw": [2.0, 4.0, 3.0]}
    assert r["sides"]["a"]["median"] == 4.0 and r["sides"]["b"]["max"] == 3.0
    assert r["rounds"] == 3 and r["load_1m_before"] >= 0 and r["load_1m_after"] >= 0
    assert "torch_threads" in r


def test_paired_puts_every_side_first_equally_often():
    firsts: list[str] = []
    order: list[str] = []

    def side(name):
        def fn():
            order.append(name)
            return 1.0
        return fn

    for rounds, names in ((4, "ab"), (6, "abc")):
        order.clear()
        common.paired({n: side(n) for n in names}, rounds)
        firsts = order[::len(names)]
        assert sorted(firsts) == sorted(names * (rounds // len(names))), (names, order)


def test_target_row_decides_met_on_the_median():
    figure = common.stats([0.9, 0.96, 1.0])
    assert common.target_row("k", "m", figure, ">= 0.95", higher_is_better=True, threshold=0.95)["met"] is True
    assert common.target_row("k", "m", figure, "< 0.9", higher_is_better=False, threshold=0.9)["met"] is False
    assert common.target_row("k", "m", figure, "(info)")["met"] is None


def test_results_md_is_generated_with_ranges_load_and_limit_notes(tmp_path):
    rows = [
        common.target_row("train_tiny_batches", "engine / plain, tiny", common.stats([0.8, 0.9, 0.85]),
                          ">= 0.95", higher_is_better=True, threshold=0.95, load=(0.5, 0.7)),
        common.target_row("train_mid_batches", "engine / plain, mid", common.stats([0.97, 0.96, 0.99]),
                          ">= 0.95", higher_is_better=True, threshold=0.95, load=(0.5, 0.7)),
        common.target_row("train_cnn_batches", "engine / plain, cnn", common.stats([0.5]),
                          ">= 0.95", higher_is_better=True, threshold=0.95, load=(1.0, 1.0)),
    ]
    (tmp_path / "train_overhead.json").write_text(json.dumps(
        {"benchmark": "train_overhead", "targets": rows, "command": "python bench_train_overhead.py",
         "machine": {"date": "2026-12-03T10:00:00", "load_avg_1m": 0.7, "cpus": 2, "torch": "2.13.0"}}))
    limits = tmp_path / "limits.md"
    limits.write_text("# notes\n\n## train_tiny_batches\nThe run loop's Python,\n30 us/step.\n\n## other\nx\n")
    text = run_all.render_results(tmp_path, run_all.load_limits(limits))
    tiny = next(line for line in text.splitlines() if "engine / plain, tiny" in line)
    assert "0.850 (0.800-0.900), n=3" in tiny and "**MISSED**" in tiny and "0.5/0.7" in tiny
    assert "The run loop's Python, 30 us/step." in tiny
    mid = next(line for line in text.splitlines() if "engine / plain, mid" in line)
    assert "| met |" in mid and "30 us" not in mid
    cnn = next(line for line in text.splitlines() if "engine / plain, cnn" in line)
    assert "no note yet: add `## train_cnn_batches`" in cnn
    assert "Not measured yet" in text and "tf_peer" in text
    assert "`python bench_train_overhead.py`" in text
    assert "Load warning" not in text  # every load <= 1.5
    rows[0]["load_1m"] = [3.0, 2.5]
    (tmp_path / "train_overhead.json").write_text(json.dumps({"benchmark": "train_overhead", "targets": rows}))
    assert "load of up to 3.0" in run_all.render_results(tmp_path, {})


def test_every_missed_target_key_of_the_scripts_has_a_note():
    notes = run_all.load_limits()
    for key in ("train_tiny_batches", "train_mid_indexed", "train_cnn_indexed", "peer_custom_mid_steady",
                "peer_canned_tiny_steady", "peer_canned_mid_steady", "peer_script_vs_tf", "peer_script_vs_plain",
                "repeated_evaluate", "repeated_predict", "predict_csv_speed", "launch_cli_checked"):
        assert notes.get(key), key


SCRIPTS = ["bench_train_overhead.py", "bench_input_pipeline.py", "bench_repeated_eval.py",
           "bench_predict_csv.py", "bench_metrics_hook.py", "bench_workbench.py", "bench_scale.py",
           "bench_optimizer_kernel.py"]


@pytest.mark.slow
@pytest.mark.parametrize("script", SCRIPTS)
def test_benchmark_script_runs_quick_and_reports_target_rows(script, tmp_path):
    out = tmp_path / "result.json"
    extra = ["--no-lightning"] if script == "bench_train_overhead.py" else []
    if script == "bench_workbench.py":
        extra = ["--parts", "launch,tail"]
    done = subprocess.run([sys.executable, str(BENCH / script), "--quick", *extra, "--json", str(out)],
                          cwd=str(REPO), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert "machine" in result and "command" in result
    if script != "bench_scale.py":  # scale reports slopes, not paired targets
        assert result["targets"], result.keys()
        for row in result["targets"]:
            assert row["median"] is not None and row["min"] <= row["median"] <= row["max"], row
            assert row["load_1m"] is not None


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/tmp/tfpeer_venv/bin/python"), reason="TF peer venv absent (not in CI)")
def test_tf_peer_runs_quick(tmp_path):
    out = tmp_path / "tf_peer.json"
    done = subprocess.run([sys.executable, str(BENCH / "tf_peer" / "run_peer.py"), "--quick",
                           "--workloads", "canned_tiny", "--json", str(out)],
                          cwd=str(REPO), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    keys = [row["key"] for row in json.loads(out.read_text())["targets"]]
    assert keys == ["peer_canned_tiny_steady", "peer_canned_tiny_first"]
