"""Peak memory of one process parsing several CSV files at once, as the UI server does for several
browser sessions, with and without a tight parse budget (``WORKBENCH_PARSE_MEMORY_MB``).

    python benchmarks/parse_memory.py --mb 60 --files 4

Each setting runs in a fresh process (peak RSS from ``getrusage``); prints one line per setting.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

_CHILD = """
import json, resource, sys, threading, time
from estimator_workbench.data import sources
paths = sys.argv[1:]
errors = []
def parse(path):
    try:
        sources.load_table(path)
    except ValueError as e:
        errors.append(str(e)[:120])
start = time.perf_counter()
threads = [threading.Thread(target=parse, args=(p,)) for p in paths]
for t in threads: t.start()
for t in threads: t.join()
print(json.dumps({"peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "seconds": time.perf_counter() - start, "refused": errors}))
"""


def make_csv(path: Path, megabytes: int, seed: int) -> None:
    rows = int(megabytes * 2**20 / 110)  # ~110 bytes a row with 11 columns
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(rng.standard_normal((rows, 10)).round(6), columns=[f"x{i}" for i in range(10)])
    frame["label"] = rng.integers(0, 3, rows)
    frame.to_csv(path, index=False)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=60, help="size of each CSV file")
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--budgets", default="none,600", help="comma list of WORKBENCH_PARSE_MEMORY_MB ('none': the default)")
    args = parser.parse_args()
    repo = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory(prefix="parse_memory_") as tmp:
        paths = [Path(tmp) / f"t{i}.csv" for i in range(args.files)]
        for i, path in enumerate(paths):
            make_csv(path, args.mb, i)
        sizes = [round(p.stat().st_size / 2**20, 1) for p in paths]
        for budget in args.budgets.split(","):
            env = dict(os.environ, PYTHONPATH=str(repo))
            env.pop("WORKBENCH_PARSE_MEMORY_MB", None)
            if budget != "none":
                env["WORKBENCH_PARSE_MEMORY_MB"] = budget
            out = subprocess.run([sys.executable, "-c", _CHILD, *map(str, paths)], env=env, check=True,
                                 capture_output=True, text=True).stdout
            result = json.loads(out)
            print(json.dumps({"budget_mb": budget, "files_mb": sizes, "load": os.getloadavg()[0],
                              "at": time.strftime("%H:%M:%S"), **result}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
