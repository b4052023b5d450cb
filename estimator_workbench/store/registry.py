"""The run registry: the source of truth for runs, one SQLite file per workspace or a shared
PostgreSQL database (``$WORKBENCH_DATABASE_URL``).

The registry holds one row per run (what was asked for, where it stands, summary metrics); time
series live in each run's ``metrics.jsonl``. The SQLite plumbing (WAL mode, short
``BEGIN IMMEDIATE`` writes retried on contention, reads that never create the file, schema
migrations) lives in ``estimator_workbench.store.registry_db``.

Status state machine (``set_status`` enforces it)::

    queued  -> running | cancelled
    running -> succeeded | failed | stopped | cancelled | lost
    lost    -> succeeded | failed | stopped | cancelled   (a runner marked lost by a heartbeat
                                                          timeout that reports back after all)
    succeeded | failed | stopped | cancelled | lost -> queued    (resume: same model_dir)

One writer per run (fencing): every start (``queued -> running``) gives the run a new
``attempt`` number, the token of the attempt that owns it. A runner keeps its token and writes
(status, summary, heartbeat; metrics and checkpoints after ``check_owner``) only while the row
still names its attempt in ``OWNED_STATUSES``; otherwise the registry raises
``OwnershipLostError`` and the runner stops without writing.

A full disk: reads fall back to a read-only (``immutable``) connection, which needs no write to
the ``-shm`` file; writes raise ``RegistryError("disk full: ... free space on <path>")``.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import sqlite3
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from estimator_workbench.store import paths
from estimator_workbench.store.guards import (
    OwnerCheck,
    check_record_owner,
    process_start_time,
    uptime,
)
from estimator_workbench.store.records import (
    ACTIONS,
    ALLOWED_TRANSITIONS,
    PARENT_RELATIONS,
    STATUSES,
    SUMMARISED_ON_STATUS,
    InvalidTransitionError,
    RunNotFoundError,
    RunRecord,
    is_lower_better,
    new_run_id,
    run_spec,
)
from estimator_workbench.store.registry_db import (
    SCHEMA_VERSION,
    Connection,
    RegistryDatabase,
    json_text,
    resolve_url,
)

__all__ = ['SCHEMA_VERSION', 'RunRegistry', 'process_start_time']


_EDITABLE_COLUMNS = ("name", "tags_json", "note")


class RunRegistry(RegistryDatabase):
    """The runs of one workspace, stored in ``<root>/registry.sqlite`` or the database at
    ``database_url`` (default ``$WORKBENCH_DATABASE_URL``).

    Args:
        root: the workspace folder (see ``estimator_workbench.store.paths.workspace_root``): the run
            folders, and the SQLite file by default. Nothing is created until the first write.
        database_url: ``postgresql://user:password@host:port/database`` (psycopg 3) or
            ``sqlite:///path``; None: ``$WORKBENCH_DATABASE_URL``, else ``<root>/registry.sqlite``.

    Example:
        >>> reg = RunRegistry("/tmp/ws")                                         # doctest: +SKIP
        >>> rec = reg.create_run(name="demo", action="train", dataset={"name": "iris"},
        ...                      template={"name": "mlp_classifier", "code": "def model_fn..."},
        ...                      params={"hidden_units": [16]}, run_config={})   # doctest: +SKIP
        >>> reg.set_status(rec.run_id, "running", pid=1234).status              # doctest: +SKIP
        'running'
    """

    def __init__(self, root: str | os.PathLike[str], *, database_url: str | None = None) -> None:
        self.root = Path(root)
        self.db_path = paths.registry_path(self.root)
        self.url = resolve_url(self.root, database_url)
        self._initialised = False
        self._owner_check = OwnerCheck(self)

    # -- paths -------------------------------------------------------------------------------

    def run_dir(self, run_id: str) -> Path:
        """The folder of a run (``runs/<run_id>``)."""
        return paths.run_dir(self.root, run_id)

    # -- create / read -----------------------------------------------------------------------

    def create_run(self, *, name: str, action: str, dataset: Mapping[str, Any],
                   template: Mapping[str, Any], params: Mapping[str, Any],
                   run_config: Mapping[str, Any], schedule: Mapping[str, Any] | None = None,
                   parent_run_id: str | None = None, parent_relation: str | None = None,
                   checkpoint_path: str | None = None, num_processes: int = 1,
                   owner: str | None = None) -> RunRecord:
        """Registers a new ``queued`` run and writes its ``runs/<id>/run.json`` (once).

        Args:
            name: a display name (free text; never used in paths).
            action: one of ``ACTIONS``.
            dataset: the dataset reference (``estimator_workbench.data.datasets.DatasetSpec.to_dict()``: file,
                column roles, split, missing-value handling) plus its ``fingerprint`` (content
                hash), which the registry copies into ``RunRecord.dataset_fingerprint``.
            template: ``{'name': ..., 'code': <snapshot of the model_fn source>}``.
            params: the ``params`` passed to the ``model_fn``.
            run_config: ``RunConfig`` fields.
            schedule: how long to run: ``max_steps``, ``steps``, ``eval_steps``,
                ``eval_every_steps``, ``metrics_every_n_steps`` (all optional).
            parent_run_id / parent_relation: the run this one comes from, and how
                (one of ``PARENT_RELATIONS``).
            checkpoint_path: a checkpoint to evaluate/predict from or warm-start from.
            num_processes: processes to launch (``> 1`` runs under ``torch.distributed.run``).
            owner: who submits it (the signed-in user; ``store.users.current_user()`` for the CLI):
                only they or an admin may stop, cancel, delete or restore it (``store.audit``).
        """
        problems = []
        if not isinstance(name, str):
            problems.append(f"name must be a str, given: {name!r}")
        if action not in ACTIONS:
            problems.append(f"action must be one of {list(ACTIONS)}, given: {action!r}")
        for arg, value in (("dataset", dataset), ("template", template), ("params", params),
                           ("run_config", run_config), ("schedule", schedule or {})):
            if not isinstance(value, Mapping):
                problems.append(f"{arg} must be a dict, given: {value!r}")
        if parent_relation is not None and parent_relation not in PARENT_RELATIONS:
            problems.append(
                f"parent_relation must be one of {list(PARENT_RELATIONS)} or None, given: {parent_relation!r}")
        if (parent_relation is None) != (parent_run_id is None):
            problems.append("parent_run_id and parent_relation must be given together, given: "
                            f"parent_run_id={parent_run_id!r}, parent_relation={parent_relation!r}")
        if not isinstance(num_processes, int) or isinstance(num_processes, bool) or num_processes < 1:
            problems.append(f"num_processes must be an int >= 1, given: {num_processes!r}")
        if owner is not None and (not isinstance(owner, str) or not owner.strip()):
            problems.append(f"owner must be a non-empty str or None, given: {owner!r}")
        if problems:
            raise ValueError("Invalid run: " + "; ".join(problems) + ".")
        dataset, template, params = dict(dataset), dict(template), dict(params)
        run_config, schedule = dict(run_config), dict(schedule or {})
        dataset_json = json_text(dataset, "dataset")
        params_json = json_text(params, "params")
        run_config_json = json_text(run_config, "run_config")
        schedule_json = json_text(schedule, "schedule")
        fingerprint = dataset.get("fingerprint")
        created = time.time()
        self._ensure_schema()

        def insert(conn: Connection) -> RunRecord:
            if parent_run_id is not None:
                self._fetch(conn, parent_run_id)
            for _ in range(100):
                run_id = new_run_id(created)
                if conn.execute("SELECT 1 FROM runs WHERE run_id = ?", (run_id,)).fetchone() is None:
                    break
            conn.execute(
                """INSERT INTO runs (run_id, name, action, status, dataset_json, dataset_fingerprint,
                       template_name, template_code, params_json, run_config_json, schedule_json,
                       parent_run_id, parent_relation, checkpoint_path, num_processes, created_at, owner)
                   VALUES (?, ?, ?, 'queued', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
                (run_id, name, action, dataset_json,
                 None if fingerprint is None else str(fingerprint),
                 template.get("name"), template.get("code"), params_json, run_config_json,
                 schedule_json, parent_run_id, parent_relation, checkpoint_path, num_processes,
                 created, owner))
            record = self._fetch(conn, run_id)
            # run.json inside the transaction: a run row never exists without its folder.
            folder = self.run_dir(run_id)
            folder.mkdir(mode=0o700, parents=True, exist_ok=False)
            try:
                from estimator_workbench.store.run_spec import (
                    RunSpec,  # (pydantic: imported when needed)
                )

                tmp = folder / (paths.RUN_JSON + ".tmp")
                tmp.write_text(RunSpec.from_dict(run_spec(record)).to_json(), encoding="utf-8")
                os.replace(tmp, folder / paths.RUN_JSON)
            except BaseException:
                shutil.rmtree(folder, ignore_errors=True)  # the row is rolled back too
                raise
            return record

        return self._write(insert)

    def get(self, run_id: str) -> RunRecord:
        """The run ``run_id``; raises ``RunNotFoundError`` if there is none."""
        rows = self._read("SELECT * FROM runs WHERE run_id = ?", (run_id,))
        if not rows:
            raise RunNotFoundError(f"No run {run_id!r} in this workspace; list runs with `runs`.")
        return RunRecord.from_row(rows[0])

    def exists(self, run_id: str) -> bool:
        return bool(self._read("SELECT 1 FROM runs WHERE run_id = ?", (run_id,)))

    def list_runs(self, status: str | Iterable[str] | None = None, *, action: str | None = None,
                  tag: str | None = None, limit: int | None = None,
                  newest_first: bool = True, trashed: bool | None = False) -> list[RunRecord]:
        """Runs, optionally filtered by status (one or several), action or tag; ``trashed``: those
        out of the trash (False, the default), in it (True) or both (None)."""
        clauses = [] if trashed is None else [f"trashed_at IS {'NOT ' if trashed else ''}NULL"]
        args: list[Any] = []
        if status is not None:
            wanted = [status] if isinstance(status, str) else list(status)
            for value in wanted:
                if value not in STATUSES:
                    raise ValueError(f"status must be one of {list(STATUSES)}, given: {value!r}")
            clauses.append(f"status IN ({', '.join('?' for _ in wanted)})")
            args.extend(wanted)
        if action is not None:
            clauses.append("action = ?")
            args.append(action)
        sql = "SELECT * FROM runs"
        if clauses:
            sql += " WHERE " + " AND ".join(clauses)
        sql += f" ORDER BY created_at {'DESC' if newest_first else 'ASC'}, rowid {'DESC' if newest_first else 'ASC'}"
        if limit is not None:
            sql += " LIMIT ?"
            args.append(int(limit))
        try:
            records = [RunRecord.from_row(row) for row in self._read(sql, tuple(args))]
        except sqlite3.OperationalError as exc:  # a workspace of an older workbench that no write
            if "no such column: trashed_at" not in str(exc):  # migrated yet: its trash is empty
                raise
            return [] if trashed else self.list_runs(status, action=action, tag=tag, limit=limit,
                                                     newest_first=newest_first, trashed=None)
        if tag is not None:
            records = [r for r in records if tag in r.tags]
        return records

    def change_stamp(self) -> tuple[tuple[Any, ...], ...]:
        """A cheap fingerprint of the runs' lifecycle: it changes when a run is created, started,
        finished, resumed, trashed, restored, deleted or tagged (and on nearly every rename), and
        stays the same through heartbeats, progress and metric summaries of running runs.

        One aggregate query (no rows read into Python), so a page can poll it every few seconds
        and redraw only when it changed (the Runs page: a run submitted from Python or the CLI
        shows up without a reload).

        Example:
            >>> before = RunRegistry("/tmp/ws").change_stamp()                 # doctest: +SKIP
            >>> ...  # a run submitted elsewhere
            >>> RunRegistry("/tmp/ws").change_stamp() != before                # doctest: +SKIP
            True
        """
        sql = ("SELECT status, trashed_at IS NULL AS kept, COUNT(*), MAX(created_at), MAX(started_at), "
               "MAX(finished_at), MAX(trashed_at), SUM(attempt), SUM(LENGTH(name) + LENGTH(tags_json)) "
               "FROM runs GROUP BY status, kept ORDER BY status, kept")
        try:
            rows = self._read(sql)
        except sqlite3.OperationalError as exc:  # a workspace of an older workbench, not migrated yet
            if "no such column" not in str(exc):
                raise
            rows = self._read("SELECT status, COUNT(*), MAX(created_at), MAX(started_at), MAX(finished_at) "
                              "FROM runs GROUP BY status ORDER BY status")
        return tuple(tuple(row) for row in rows)

    # -- state machine -----------------------------------------------------------------------

    def set_status(self, run_id: str, status: str, *, error: str | None = None,
                   traceback: str | None = None, pid: int | None = None,
                   expected: str | Iterable[str] | None = None,
                   attempt: int | None = None) -> RunRecord:
        """Moves a run to ``status``, enforcing the state machine in the module docstring.

        ``running`` starts a new attempt (``attempt`` + 1: the new owner's fencing token) and sets
        ``started_at``, ``pid`` (when given, with its start time) and the heartbeat; a finished
        status sets ``finished_at`` and the error text (a run that comes back from ``lost`` drops
        the stale "lost" error); ``queued`` (a resume) clears pid, error and finish time.
        ``expected`` makes the change conditional on the current status, ``attempt`` on the run
        still being owned by that attempt (a runner's own status changes).

        Raises:
            InvalidTransitionError: the state machine does not allow the change.
            OwnershipLostError: ``attempt`` no longer owns the run.
        """
        if status not in STATUSES:
            raise ValueError(f"status must be one of {list(STATUSES)}, given: {status!r}")
        allowed_from = None
        if expected is not None:
            allowed_from = {expected} if isinstance(expected, str) else set(expected)

        pid_started = process_start_time(pid) if status == "running" else None

        def change(conn: Connection) -> RunRecord:
            record = self._fetch(conn, run_id)
            current = record.status
            if attempt is not None:
                check_record_owner(record, attempt)
            if allowed_from is not None and current not in allowed_from:
                raise InvalidTransitionError(
                    f"Run {run_id!r} is {current!r}, expected {sorted(allowed_from)} "
                    f"before moving to {status!r}.")
            if status not in ALLOWED_TRANSITIONS.get(current, ()):
                allowed = ALLOWED_TRANSITIONS.get(current, ())
                raise InvalidTransitionError(
                    f"Cannot move run {run_id!r} from {current!r} to {status!r}; "
                    f"from {current!r} a run can go to {list(allowed)}.")
            now = time.time()
            if status == "running":
                conn.execute(
                    "UPDATE runs SET status = ?, started_at = ?, heartbeat_at = ?, heartbeat_uptime = ?, "
                    "finished_at = NULL, attempt = attempt + 1, last_step = NULL, last_step_at = NULL "
                    "WHERE run_id = ?", (status, now, now, uptime(), run_id))
                if pid is not None:  # its start time too (None: gone); without a pid both stay
                    conn.execute("UPDATE runs SET pid = ?, pid_started = ? WHERE run_id = ?",
                                 (pid, pid_started, run_id))
            elif status == "queued":
                conn.execute(
                    "UPDATE runs SET status = ?, pid = NULL, pid_started = NULL, finished_at = NULL, "
                    "error = NULL, traceback = NULL WHERE run_id = ?", (status, run_id))
            elif current == "lost":
                # The runner was alive after all and reports its own outcome: the "lost: ..."
                # text is stale, so the outcome's own error (or none) replaces it.
                conn.execute(
                    "UPDATE runs SET status = ?, finished_at = ?, error = ?, traceback = ?, "
                    "pid = COALESCE(?, pid) WHERE run_id = ?",
                    (status, now, error, traceback, pid, run_id))
            else:
                conn.execute(
                    "UPDATE runs SET status = ?, finished_at = ?, error = COALESCE(?, error), "
                    "traceback = COALESCE(?, traceback), pid = COALESCE(?, pid) WHERE run_id = ?",
                    (status, now, error, traceback, pid, run_id))
            return self._fetch(conn, run_id)

        if status in SUMMARISED_ON_STATUS and self.get(run_id).started_at is not None:
            # before the outcome, so that whoever sees the outcome sees the summary too
            self.refresh_summary(run_id, attempt=attempt)
        return self._write(change)

    def check_owner(self, run_id: str, attempt: int) -> None:
        """Raises ``OwnershipLostError`` unless attempt ``attempt`` still owns the run (a runner
        calls it before every metrics write and checkpoint save: ~70 us, see ``OwnerCheck``)."""
        self._owner_check.check(run_id, attempt)

    def close_owner_check(self) -> None:
        """Closes the connection ``check_owner`` keeps open (safe to call twice)."""
        self._owner_check.close()

    def refresh_summary(self, run_id: str, *, attempt: int | None = None) -> RunRecord:
        """The run's summary, made afresh from every line of its ``metrics.jsonl`` (see
        ``update_summary``; ``attempt`` fences the write)."""
        import pandas as pd  # only when a summary is built

        from estimator_workbench.store.metrics_store import read_all

        frame = read_all(self.run_dir(run_id) / paths.METRICS_FILE)
        if not len(frame):
            return self.get(run_id)
        frame = frame.sort_values(["step", "wall_time"], kind="stable")
        return self.update_summary(run_id, [
            {"step": None if pd.isna(step) else int(step), "split": split, "name": name, "value": value}
            for step, split, name, value in zip(frame["step"], frame["split"], frame["name"], frame["value"])],
            replace=True, attempt=attempt)

    def heartbeat(self, run_id: str, *, pid: int | None = None, attempt: int | None = None,
                  last_step: int | None = None, last_step_at: float | None = None) -> None:
        """Records that the run's process is alive now (only while it is ``running``), and the
        last completed training step and its time when given (the stall check reads them).

        With ``attempt``: raises ``OwnershipLostError`` when that attempt no longer owns the run
        (a beat while the run is ``lost`` but still owned records nothing).
        """
        def beat(conn: Connection) -> None:
            if attempt is not None:
                check_record_owner(self._fetch(conn, run_id), attempt)
            conn.execute(
                "UPDATE runs SET heartbeat_at = ?, heartbeat_uptime = ?, pid = COALESCE(?, pid), "
                "last_step = COALESCE(?, last_step), last_step_at = COALESCE(?, last_step_at) "
                "WHERE run_id = ? AND status = 'running'",
                (time.time(), uptime(), pid, last_step, last_step_at, run_id))

        self._write(beat)

    # -- summary metrics ---------------------------------------------------------------------

    def update_summary(self, run_id: str,
                       metrics: Iterable[Mapping[str, Any]] | Mapping[str, float], *,
                       step: int | None = None, split: str = "train", replace: bool = False,
                       attempt: int | None = None) -> RunRecord:
        """Merges metric values into the run's summary (last, best and step of best per metric).

        ``metrics`` is either rows like the lines of ``metrics.jsonl``
        (``{'step', 'split', 'name', 'value'}``, in time order), or a mapping ``name -> value``
        recorded at ``step`` under ``split``. Keys are ``'<split>/<name>'``; best is the minimum
        for names containing 'loss' or 'error', else the maximum. Non-finite values update
        ``last`` but never ``best``. ``replace`` drops the summary held so far first.
        ``attempt`` makes the write conditional on that attempt owning the run.
        """
        if isinstance(metrics, Mapping):
            rows: list[Mapping[str, Any]] = [
                {"step": step, "split": split, "name": name, "value": value}
                for name, value in metrics.items()]
        else:
            rows = list(metrics)

        def merge(conn: Connection) -> RunRecord:
            record = self._fetch(conn, run_id)
            if attempt is not None:
                check_record_owner(record, attempt)
            summary = {} if replace else {key: dict(value) for key, value in record.summary.items()}
            for row in rows:
                try:
                    value = float(row["value"])
                except (TypeError, ValueError, KeyError):
                    continue
                key = f"{row.get('split') or split}/{row['name']}"
                row_step = row.get("step")
                entry = summary.setdefault(key, {"last": None, "last_step": None,
                                                 "best": None, "best_step": None})
                entry["last"], entry["last_step"] = value, row_step
                if not math.isfinite(value):
                    continue
                best = entry["best"]
                lower = is_lower_better(str(row["name"]))
                if best is None or (value < best if lower else value > best):
                    entry["best"], entry["best_step"] = value, row_step
            conn.execute("UPDATE runs SET summary_json = ? WHERE run_id = ?",
                         (json.dumps(summary, sort_keys=True), run_id))
            return self._fetch(conn, run_id)

        return self._write(merge)

    # -- user edits --------------------------------------------------------------------------

    def rename(self, run_id: str, name: str) -> RunRecord:
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"name must be a non-empty str, given: {name!r}")
        return self._update(run_id, "name", name.strip())

    def set_tags(self, run_id: str, tags: Iterable[str]) -> RunRecord:
        if isinstance(tags, str):
            raise TypeError(f"tags must be a list of str, given: {tags!r}")
        tags = list(tags)
        for tag in tags:
            if not isinstance(tag, str):
                raise TypeError(f"tags must be a list of str, given: {tags!r}")
        unique = list(dict.fromkeys(t.strip() for t in tags if t.strip()))
        return self._update(run_id, "tags_json", json.dumps(unique))

    def set_note(self, run_id: str, note: str) -> RunRecord:
        if not isinstance(note, str):
            raise TypeError(f"note must be a str, given: {note!r}")
        return self._update(run_id, "note", note)

    def _update(self, run_id: str, column: str, value: Any) -> RunRecord:
        # A column name cannot be an SQL parameter: only these literal names ever reach the f-string.
        if column not in _EDITABLE_COLUMNS:
            raise ValueError(f"column must be one of {list(_EDITABLE_COLUMNS)}, given: {column!r}")

        def change(conn: Connection) -> RunRecord:
            self._fetch(conn, run_id)
            conn.execute(f"UPDATE runs SET {column} = ? WHERE run_id = ?", (value, run_id))
            return self._fetch(conn, run_id)

        return self._write(change)

    def delete(self, run_id: str, *, force: bool = False) -> None:
        """Deletes the run's row and folder for good (the UI's Delete moves runs to the trash
        instead: ``estimator_workbench.store.trash``). A running run needs ``force=True`` (stop it first).

        Raises:
            ValueError: the run is running and ``force`` is false (a queued run is simply dropped).
        """
        folder = self.run_dir(run_id)
        running = f"Run {run_id!r} is running; cancel it before deleting it (or pass force=True)."
        if self.get(run_id).status == "running" and not force:
            raise ValueError(running)

        def remove(conn: Connection) -> None:
            record = self._fetch(conn, run_id)
            if record.status == "running" and not force:
                raise ValueError(running)
            conn.execute("DELETE FROM runs WHERE run_id = ?", (run_id,))

        # The folder first, then the row (issue 24 item 12): killed in between, the run is still
        # listed (in the trash) and the next delete finishes it; the other order left a folder
        # that no command listed or removed.
        shutil.rmtree(folder, ignore_errors=True)
        self._write(remove)

