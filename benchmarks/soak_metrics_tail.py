"""Soak: ``MetricsTail`` on a 1,000,000-line ``metrics.jsonl`` — an incremental read costs
O(new lines), whatever the size of the file.

For files of 10k, 100k and 1M lines, times (median of repeats) the first full read, then an
incremental read after appending 10, 100 and 1,000 lines, and records the bytes each read asked
for. O(new lines) means: the incremental time is flat across file sizes and grows with the
number of new lines. The CI version (byte counting on 50k lines) is
tests/reliability/test_load.py::test_incremental_read_costs_only_the_new_bytes.

    python benchmarks/soak_metrics_tail.py [--lines 1000000] [--repeats 7] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from typing import Any

import _common as c

from estimator_workbench.store import metrics_store


def line(step: int) -> bytes:
    return (json.dumps({"step": step, "wall_time": 1.7e9 + step, "split": "train", "name": "loss",
                        "value": 1.0 / step}) + "\n").encode()


def build(path: str, n: int) -> None:
    with open(path, "wb") as f:
        for start in range(1, n + 1, 100_000):
            f.write(b"".join(line(s) for s in range(start, min(n, start + 99_999) + 1)))


def measure(n_lines: int, repeats: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "metrics.jsonl")
        build(path, n_lines)
        size_mb = os.path.getsize(path) / 1e6
        t = time.perf_counter()
        tail = metrics_store.MetricsTail(path)
        rows = len(tail.read())
        full_s = time.perf_counter() - t
        assert rows == n_lines
        result: dict[str, Any] = {"lines": n_lines, "file_mb": round(size_mb, 1),
                                  "full_read_s": round(full_s, 3), "incremental": {}}
        step = n_lines
        for new in (10, 100, 1000):
            times, sizes = [], []
            for _ in range(repeats):
                chunk = b"".join(line(s) for s in range(step + 1, step + new + 1))
                step += new
                with open(path, "ab") as f:
                    f.write(chunk)
                before = tail.offset
                t = time.perf_counter()
                got = tail.read()
                times.append(time.perf_counter() - t)
                assert len(got) == new
                sizes.append(tail.offset - before)
            result["incremental"][new] = {"median_ms": round(c.median(times) * 1e3, 3),
                                          "bytes_read": int(c.median(sizes))}
        return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--json", default=str(c.RESULTS_DIR / "soak_metrics_tail.json"))
    args = parser.parse_args()
    sizes = sorted({10_000, 100_000, args.lines})
    results = [measure(n, args.repeats) for n in sizes]
    print(f"{'lines':>10} {'MB':>7} {'full read s':>12} | incremental read, ms (bytes): "
          "+10 / +100 / +1000 lines")
    for r in results:
        inc = r["incremental"]
        print(f"{r['lines']:>10,} {r['file_mb']:>7} {r['full_read_s']:>12} | "
              + " / ".join(f"{inc[k]['median_ms']} ({inc[k]['bytes_read']:,})" for k in (10, 100, 1000)))
    small, big = results[0]["incremental"][100]["median_ms"], results[-1]["incremental"][100]["median_ms"]
    verdict = {"ratio_big_to_small_file_at_100_new_lines": round(big / small, 2) if small else None}
    print(f"+100 lines on {results[-1]['lines']:,} vs {results[0]['lines']:,} lines: "
          f"{verdict['ratio_big_to_small_file_at_100_new_lines']}x (1.0 = independent of file size)")
    c.write_json({"results": results, **verdict}, args.json)


if __name__ == "__main__":
    main()
