"""Checkpoint save / restore time on an S3 stand-in (moto's server on 127.0.0.1) beside local disk.

``checkpoints.save_checkpoint`` (write, index, prune with keep_checkpoint_max=2) and
``checkpoints.load_checkpoint`` (``torch.load(weights_only=True)``) of a state of N float32
parameters, on a local ``tmp`` directory and on ``s3://<bucket>/bench`` served by moto (the same
server the tests start, credentials enforced). Each size is measured in alternated pairs
(local, s3, local, s3, ...); the table gives the median, min and max of each side and the ratio of
the medians. moto keeps objects in memory and runs on the same machine, so the ratio is the cost of
the S3 protocol path (serialise, HTTP, signing, s3fs), not of a network: a real bucket adds its
round-trip time and bandwidth.

Needs the test extra (moto[s3], flask, s3fs). Not a test module.

Usage: python benchmarks/bench_remote_checkpoint.py [--sizes 1e5,1e6,2.5e7] [--rounds 5] [--json PATH]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))

from s3_server import S3Server

from estimator_engine import checkpoints


def _state(parameters: int) -> dict:
    generator = torch.Generator().manual_seed(0)
    return {"variables": {"net/weight": torch.randn(parameters, generator=generator)}}


def _time(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1e5,1e6,2.5e7", help="parameter counts, comma-separated")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    sizes = [int(float(size)) for size in args.sizes.split(",")]

    server = S3Server.start()
    os.environ.update(server.env())
    bucket = f"bench-{uuid.uuid4().hex[:8]}"
    server.client().create_bucket(Bucket=bucket)
    rows = []
    try:
        with tempfile.TemporaryDirectory() as local_root:
            for size in sizes:
                state = _state(size)
                dirs = {"local": os.path.join(local_root, f"m{size}"), "s3": f"s3://{bucket}/m{size}"}
                times: dict[str, dict[str, list[float]]] = {side: {"save": [], "load": []} for side in dirs}
                step = 0
                checkpoints.save_checkpoint(dirs["s3"], state, step, keep_checkpoint_max=2)  # warm the client
                for _ in range(args.rounds):
                    for side, directory in dirs.items():
                        step += 1
                        times[side]["save"].append(_time(lambda d=directory, s=step, st=state: checkpoints.save_checkpoint(
                            d, st, s, keep_checkpoint_max=2)))
                        times[side]["load"].append(_time(lambda d=directory: checkpoints.load_checkpoint(d)))
                for op in ("save", "load"):
                    local, remote = times["local"][op], times["s3"][op]
                    rows.append({"parameters": size, "megabytes": round(size * 4 / 2**20, 1), "op": op,
                                 "local_median_s": statistics.median(local), "local_min_s": min(local),
                                 "local_max_s": max(local), "s3_median_s": statistics.median(remote),
                                 "s3_min_s": min(remote), "s3_max_s": max(remote),
                                 "ratio": statistics.median(remote) / statistics.median(local)})
    finally:
        server.stop()
    print(f"{'params':>10} {'MB':>6} {'op':>4} | {'local med':>9} {'min':>7} {'max':>7} | "
          f"{'s3 med':>8} {'min':>7} {'max':>7} | {'s3/local':>8}")
    for r in rows:
        print(f"{r['parameters']:>10} {r['megabytes']:>6} {r['op']:>4} | {r['local_median_s']:>9.4f} "
              f"{r['local_min_s']:>7.4f} {r['local_max_s']:>7.4f} | {r['s3_median_s']:>8.4f} "
              f"{r['s3_min_s']:>7.4f} {r['s3_max_s']:>7.4f} | {r['ratio']:>8.2f}")
    if args.json:
        import json

        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump({"rounds": args.rounds, "rows": rows}, handle, indent=2)


if __name__ == "__main__":
    main()
