"""The run store: paths of a workspace, the run registry (SQLite), run records, and the per-run
metrics stream (``metrics.jsonl``: the engine hook that writes it and the tail that reads it)."""
