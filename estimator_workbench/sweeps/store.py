"""Where sweeps live: ``<workspace>/sweeps/<name>/`` holds the Optuna study, the driver's status,
its log and its stop request.

Storage: each sweep's study is an Optuna ``JournalStorage`` over a ``JournalFileBackend``
(``study.journal``), not RDB storage on SQLite. The journal is an append-only log written under
a file lock, which Optuna documents as safe for several processes at once (the driver writes; the
UI, the CLI and a second driver read or write) where SQLite RDB storage is documented as unfit for
parallel writers ("database is locked"). It needs no schema migration (alembic) when opened, and
one file per sweep keeps a sweep's folder self-contained (the UI replays only the sweep it shows).

Example:
    >>> study = load_study(root, "lr-search")                     # doctest: +SKIP
    >>> driver_state(root, "lr-search")["state"]                  # doctest: +SKIP
    'running'
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from estimator_workbench.sweeps.spec import (
    SweepSpec,
    SweepSpecError,
    make_pruner,
    make_sampler,
    validate_name,
)

__all__ = [
    "DRIVER_LOG",
    "DRIVER_STATE",
    "JOURNAL_FILE",
    "OWNER_ATTR",
    "STOP_FILE",
    "SWEEPS_DIR",
    "SWEEP_TAG_PREFIX",
    "SweepNotFoundError",
    "create_study",
    "driver_alive",
    "driver_environment",
    "driver_state",
    "list_sweeps",
    "load_spec",
    "load_study",
    "request_stop",
    "start_driver",
    "stop_requested",
    "storage",
    "sweep_dir",
    "sweep_owner",
    "sweep_tag",
    "write_driver_state",
]

SWEEPS_DIR = "sweeps"
JOURNAL_FILE = "study.journal"
DRIVER_STATE = "driver.json"
DRIVER_LOG = "driver.log"
STOP_FILE = "stop.request"
SWEEP_TAG_PREFIX = "sweep:"
SPEC_ATTR = "sweep"  # the study user attribute holding SweepSpec.to_dict()
OWNER_ATTR = "owner"  # the study user attribute naming who started the sweep (issue 26.4)


class SweepNotFoundError(LookupError):
    """No sweep of this name in the workspace."""


def sweep_tag(name: str) -> str:
    """The tag every trial run of sweep ``name`` carries (``sweep:<name>``)."""
    return f"{SWEEP_TAG_PREFIX}{name}"


def sweep_dir(root: str | os.PathLike[str], name: str) -> Path:
    """``<workspace>/sweeps/<name>`` (the name is checked: it becomes a folder)."""
    return Path(root) / SWEEPS_DIR / validate_name(name)


def storage(root: str | os.PathLike[str], name: str) -> Any:
    """The Optuna storage of sweep ``name`` (a journal file in its folder, created on demand)."""
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    folder = sweep_dir(root, name)
    folder.mkdir(parents=True, exist_ok=True)
    return JournalStorage(JournalFileBackend(str(folder / JOURNAL_FILE)))


def _exists(root: str | os.PathLike[str], name: str) -> bool:
    return (sweep_dir(root, name) / JOURNAL_FILE).is_file()


def create_study(root: str | os.PathLike[str], spec: SweepSpec, owner: str | None = None) -> Any:
    """Creates the study of a new sweep and stores ``spec`` in it, and who started it (``owner``:
    the UI's signed-in user, else ``$WORKBENCH_USER`` or the OS account); refuses an existing name."""
    import optuna

    from estimator_workbench.store.users import current_user

    if _exists(root, spec.name):
        raise SweepSpecError(f"A sweep named {spec.name!r} exists already in {Path(root)}: continue it "
                             f"with --resume {spec.name}, or choose another --name.")
    study = optuna.create_study(study_name=spec.name, storage=storage(root, spec.name),
                                direction=spec.direction, sampler=make_sampler(spec),
                                pruner=make_pruner(spec))
    study.set_user_attr(SPEC_ATTR, spec.to_dict())
    study.set_user_attr(OWNER_ATTR, owner or current_user())
    return study


def sweep_owner(study: Any) -> str | None:
    """Who started the sweep of ``study`` (None: a sweep from before owners were recorded)."""
    owner = study.user_attrs.get(OWNER_ATTR)
    return str(owner) if owner else None


def load_spec(study: Any) -> SweepSpec:
    """The ``SweepSpec`` stored in a sweep's study."""
    data = study.user_attrs.get(SPEC_ATTR)
    if not isinstance(data, dict):
        raise SweepNotFoundError(f"Study {study.study_name!r} holds no sweep settings; it was not "
                                 "made by the workbench.")
    return SweepSpec.from_dict(data)


def load_study(root: str | os.PathLike[str], name: str, *, with_sampler: bool = True) -> Any:
    """The study of sweep ``name`` (with its sampler and pruner rebuilt from its settings, so a
    continued sweep searches as it started). Raises ``SweepNotFoundError``."""
    import optuna

    if not _exists(root, name):
        known = list_sweeps(root)
        raise SweepNotFoundError(f"No sweep named {name!r} in {Path(root)}; "
                                 + (f"sweeps: {known}." if known else "there are no sweeps yet."))
    store = storage(root, name)
    if not with_sampler:
        return optuna.load_study(study_name=name, storage=store)
    plain = optuna.load_study(study_name=name, storage=store)
    spec = load_spec(plain)
    return optuna.load_study(study_name=name, storage=store, sampler=make_sampler(spec),
                             pruner=make_pruner(spec))


def list_sweeps(root: str | os.PathLike[str]) -> list[str]:
    """Names of the sweeps of a workspace, newest first."""
    folder = Path(root) / SWEEPS_DIR
    if not folder.is_dir():
        return []
    found = [p for p in folder.iterdir() if (p / JOURNAL_FILE).is_file()]
    return [p.name for p in sorted(found, key=lambda p: (p / JOURNAL_FILE).stat().st_ctime, reverse=True)]


# -- the driver's state, stop request and start ---------------------------------------------------


def write_driver_state(root: str | os.PathLike[str], name: str, state: str, **extra: Any) -> None:
    """Writes ``driver.json`` atomically: ``{'state', 'pid', 'updated', ...}``."""
    folder = sweep_dir(root, name)
    folder.mkdir(parents=True, exist_ok=True)
    data = {"state": state, "pid": os.getpid(), "updated": time.time(), **extra}
    tmp = folder / f"{DRIVER_STATE}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(data, indent=1), encoding="utf-8")
    os.replace(tmp, folder / DRIVER_STATE)


def driver_state(root: str | os.PathLike[str], name: str) -> dict[str, Any]:
    """The last ``driver.json`` of a sweep, with ``state`` 'lost' when it says running but its
    process is gone ('new' when no driver ran yet)."""
    from estimator_workbench.execution.processes import pid_alive

    try:
        data = json.loads((sweep_dir(root, name) / DRIVER_STATE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {"state": "new", "pid": None}
    if data.get("state") in ("starting", "running", "stopping") and not pid_alive(data.get("pid")):
        data["state"] = "lost"
    return data


def driver_alive(root: str | os.PathLike[str], name: str) -> bool:
    """Whether a driver process is working on the sweep now."""
    return driver_state(root, name).get("state") in ("starting", "running", "stopping")


def request_stop(root: str | os.PathLike[str], name: str) -> None:
    """Asks the sweep's driver to stop: it submits no more trials, stops the running trial runs
    (each checkpoints, so a continued sweep resumes them) and exits ``stopped``."""
    (sweep_dir(root, name) / STOP_FILE).write_text(f"{time.time()}\n", encoding="utf-8")


def stop_requested(root: str | os.PathLike[str], name: str) -> bool:
    return (sweep_dir(root, name) / STOP_FILE).exists()


_STARTED: list[subprocess.Popen[bytes]] = []  # detached drivers of this process, reaped below
_STARTED_LOCK = threading.Lock()


def _reap_started() -> None:
    with _STARTED_LOCK:
        for proc in list(_STARTED):
            if proc.poll() is not None:
                _STARTED.remove(proc)


def driver_environment(owner: str | None = None, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """A sweep driver's environment: this process's without its secrets; its trials' owner; and,
    when this process mirrors to MLflow, the server without its password, so that the trials
    are queued for the mirror (which this process, holding the credentials, then syncs)."""
    from estimator_workbench.execution.processes import without_secrets
    from estimator_workbench.store import mlflow_state

    source = dict(os.environ if environ is None else environ)
    env = without_secrets(source)
    env["PYTHONUNBUFFERED"] = "1"
    uri = mlflow_state.mirror_uri(source)
    if uri is not None:
        env[mlflow_state.TARGET_ENV_VAR] = mlflow_state.redact_uri(uri)
    if owner:
        from estimator_workbench.store.users import USER_ENV

        env[USER_ENV] = owner
    return env


def start_driver(root: str | os.PathLike[str], name: str, owner: str | None = None) -> int:
    """Starts the sweep's driver as a detached process (``python -m estimator_workbench.sweeps.driver``, a
    session of its own, output in ``driver.log``), as the launcher starts runners: it outlives the
    UI. Refuses when a driver is already working on the sweep. Returns its pid. The trials it
    submits are ``owner``'s (the UI's signed-in user; default: this process's ``$WORKBENCH_USER``
    or OS account)."""
    _reap_started()
    if driver_alive(root, name):
        raise SweepSpecError(f"Sweep {name!r} is running already (driver pid "
                             f"{driver_state(root, name).get('pid')}).")
    folder = sweep_dir(root, name)
    with contextlib.suppress(FileNotFoundError):
        (folder / STOP_FILE).unlink()
    env = driver_environment(owner)
    with open(folder / DRIVER_LOG, "ab") as log:
        log.write(f"\n=== {time.strftime('%Y-%m-%d %H:%M:%S')} driver start\n".encode())
        log.flush()
        proc = subprocess.Popen(
            [sys.executable, "-m", "estimator_workbench.sweeps.driver", "--workspace", str(Path(root).resolve()), name],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=str(folder), env=env,
            start_new_session=True, close_fds=True)
    # Recorded here too, so that the page shows 'starting' before the driver's imports are done.
    data = {"state": "starting", "pid": proc.pid, "updated": time.time()}
    (folder / DRIVER_STATE).write_text(json.dumps(data), encoding="utf-8")
    with _STARTED_LOCK:
        _STARTED.append(proc)
    return proc.pid
