"""Writes legacy_registry.sqlite: a workspace registry made by the workbench before alembic
(commit 51c8951, schema_version 4), with runs in every finished state, one in the trash, tags,
a note, a parent and a NaN in a summary. Regenerate with the code of that commit:

    git archive 51c8951 estimator_workbench estimator_engine | tar -x -C /tmp/old
    PYTHONPATH=/tmp/old python tests/estimator_workbench/data/make_legacy_registry.py
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

from estimator_workbench.store import trash
from estimator_workbench.store.registry import RunRegistry

assert not hasattr(__import__("estimator_workbench.store.registry_db").store.registry_db, "resolve_url"), \
    "run with the code of commit 51c8951 on PYTHONPATH"
ws = Path(tempfile.mkdtemp())
reg = RunRegistry(ws)
kw = dict(action="train", dataset={"name": "iris", "fingerprint": "sha256:abc"},
          template={"name": "mlp_classifier", "code": "def model_fn(features, labels, mode, params): ...\n"},
          params={"hidden_units": [8, 4]}, run_config={"tf_random_seed": 7}, schedule={"max_steps": 50})
ids = []
for i, outcome in enumerate(["succeeded", "failed", "stopped", "cancelled", "lost", "succeeded"]):
    rec = reg.create_run(name=f"run {i}", **kw)
    reg.set_status(rec.run_id, "running", pid=100 + i)
    reg.heartbeat(rec.run_id, last_step=10 * i, last_step_at=1_700_000_000.5 + i)
    reg.update_summary(rec.run_id, {"loss": 1.0 / (i + 1), "accuracy": float("nan") if i == 2 else 0.5},
                       step=10 * i)
    reg.set_status(rec.run_id, outcome, error=None if outcome == "succeeded" else f"{outcome}: why",
                   traceback="Traceback ..." if outcome == "failed" else None)
    ids.append(rec.run_id)
child = reg.create_run(name="evaluate run 0", **{**kw, "action": "evaluate"}, parent_run_id=ids[0],
                       parent_relation="evaluate_from", checkpoint_path="model/model.ckpt-50")
reg.set_status(child.run_id, "cancelled")
reg.set_tags(ids[0], ["best", "baseline"])
reg.set_note(ids[1], "diverged: lr too high ✗")
trash.trash_run(reg, ids[3])
out = Path(__file__).with_name("legacy_registry.sqlite")
conn = __import__("sqlite3").connect(reg.db_path)
conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
conn.close()
shutil.copyfile(reg.db_path, out)
shutil.rmtree(ws)
print(f"{out}: {len(ids) + 1} runs", file=sys.stderr)
