"""Where the workspace and its run folders live; the only module that builds workspace paths.

Layout::

    <workspace>/registry.sqlite
    <workspace>/.ui/server-<port>.json   the running UI server's URL and access token (0600)
    <workspace>/runs/<run_id>/run.json  metrics.jsonl  worker.log  model/  predictions.csv
                              export/  stop.request

With a storage URL (``$WORKBENCH_STORAGE_URL`` or ``--storage-url``, e.g. ``s3://bucket/prefix``)
a run's model_dir (checkpoints, event files, the engine's exports) is ``<storage>/runs/<run_id>/model``
on that object store; the registry, run.json, metrics.jsonl, logs and predictions stay local.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

__all__ = [
    "ENV_VAR",
    "EXPORT_DIR",
    "METRICS_FILE",
    "MODEL_DIR",
    "OWNER_ONLY_UMASK",
    "PREDICTIONS_FILE",
    "REGISTRY_FILE",
    "RUNS_DIR",
    "RUN_JSON",
    "STOP_FILE",
    "STORAGE_URL_ENV",
    "UI_DIR",
    "WORKER_LOG",
    "check_storage_url",
    "model_location",
    "owner_only_umask",
    "registry_path",
    "run_dir",
    "runs_root",
    "safe_child",
    "secure_workspace",
    "storage_url",
    "ui_server_file",
    "workspace_root",
]

ENV_VAR = "WORKBENCH_HOME"
REGISTRY_FILE = "registry.sqlite"
RUNS_DIR = "runs"
RUN_JSON = "run.json"
METRICS_FILE = "metrics.jsonl"
WORKER_LOG = "worker.log"
MODEL_DIR = "model"
PREDICTIONS_FILE = "predictions.csv"
EXPORT_DIR = "export"
STOP_FILE = "stop.request"
UI_DIR = ".ui"
STORAGE_URL_ENV = "WORKBENCH_STORAGE_URL"
# Uploads, the registry, run records, predictions and logs are private to the workspace's owner:
# the workbench's processes create folders 0700 and files 0600 whatever the shell's umask.
OWNER_ONLY_UMASK = 0o077


def workspace_root(override: str | os.PathLike[str] | None = None) -> Path:
    """The workspace folder: ``override`` > ``$WORKBENCH_HOME`` > ``./workspace`` (absolute).

    Example:
        >>> workspace_root("/tmp/ws").as_posix()
        '/tmp/ws'
    """
    if override is not None and os.fspath(override) != "":
        return Path(override).expanduser().resolve()
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env).expanduser().resolve()
    return (Path.cwd() / "workspace").resolve()


def storage_url() -> str | None:
    """The workspace's storage URL for run artifacts (``$WORKBENCH_STORAGE_URL``), or ``None``.

    Raises:
        ValueError: it is set but is not an object-store URL such as ``s3://bucket/prefix``.

    Example:
        >>> storage_url() is None or "://" in storage_url()
        True
    """
    url = os.environ.get(STORAGE_URL_ENV, "").strip()
    if not url:
        return None
    scheme = re.match(r"^([A-Za-z][A-Za-z0-9+.\-]*)://", url)
    if scheme is None or scheme.group(1).lower() == "file":  # estimator_engine.gfile.is_remote's rule
        raise ValueError(f"{STORAGE_URL_ENV}={url!r} is not a storage URL: use an object store's URL "
                         "such as s3://bucket/prefix or gs://bucket/prefix (unset it to keep run "
                         "artifacts in the workspace folder).")
    return url.rstrip("/")


def check_storage_url() -> str | None:
    """``storage_url()``, checked further: fsspec and the URL's file-system package import.

    Raises:
        ValueError: a bad URL, or one fsspec does not know.
        ImportError: fsspec or the store's package (s3fs, gcsfs) is missing.
    """
    url = storage_url()
    if url is None:
        return None
    try:
        import fsspec
    except ImportError as exc:
        raise ImportError(f"{STORAGE_URL_ENV}={url!r} needs fsspec: install the remote extra, "
                          "pip install 'estimator-workbench[remote]'.") from exc
    try:
        fsspec.core.url_to_fs(url)
    except ImportError as exc:
        raise ImportError(f"{url!r}: {exc} (install the remote extra: pip install "
                          "'estimator-workbench[remote]').") from exc
    except ValueError as exc:
        raise ValueError(f"{url!r} is not a storage URL fsspec knows ({exc}).") from exc
    return url


def model_location(run_dir: str | os.PathLike[str]) -> str:
    """A run's model_dir: ``<storage>/runs/<run_id>/model`` with a storage URL, else ``<run_dir>/model``.

    Example:
        >>> model_location("/ws/runs/r-1") if storage_url() is None else "/ws/runs/r-1/model"
        '/ws/runs/r-1/model'
    """
    url = storage_url()
    if url is None:
        return os.path.join(os.fspath(run_dir), MODEL_DIR)
    return f"{url}/{RUNS_DIR}/{Path(run_dir).name}/{MODEL_DIR}"


def safe_child(root: str | os.PathLike[str], name: str) -> Path:
    """``root / name`` for a single plain path component; refuses anything that could escape ``root``.

    Raises:
        ValueError: ``name`` is empty, ``.``/``..``, absolute, or holds a path separator or NUL.

    Example:
        >>> safe_child("/ws/runs", "r-20260101-abc123").name
        'r-20260101-abc123'
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, given: {name!r}")
    bad = (
        name in ("", ".", "..")
        or "/" in name
        or "\\" in name
        or "\x00" in name
        or os.path.isabs(name)
        or (os.altsep is not None and os.altsep in name)
    )
    if bad:
        raise ValueError(
            f"Unsafe name {name!r}: expected a single file or folder name without path separators, "
            "'..' or an absolute path. Use the name as listed in the workspace (e.g. a run id).")
    return Path(root) / name


def registry_path(root: str | os.PathLike[str]) -> Path:
    """The SQLite registry file of a workspace."""
    return Path(root) / REGISTRY_FILE


def runs_root(root: str | os.PathLike[str]) -> Path:
    """The folder holding one sub-folder per run."""
    return Path(root) / RUNS_DIR


def run_dir(root: str | os.PathLike[str], run_id: str) -> Path:
    """The folder of one run (``runs/<run_id>``); ``run_id`` is checked with ``safe_child``."""
    return safe_child(runs_root(root), run_id)


def ui_server_file(root: str | os.PathLike[str], port: int) -> Path:
    """The file where the UI server on ``port`` keeps its URL and access token (owner-only).

    Example:
        >>> ui_server_file("/ws", 8501).as_posix()
        '/ws/.ui/server-8501.json'
    """
    return Path(root) / UI_DIR / f"server-{int(port)}.json"


def owner_only_umask() -> int:
    """Makes this process create folders 0700 and files 0600 (umask 077), for the entry points
    of the CLI, the UI server and the runners; returns the previous umask."""
    return os.umask(OWNER_ONLY_UMASK)


def secure_workspace(root: str | os.PathLike[str]) -> str | None:
    """Makes an existing workspace folder owner-only (0700) when other accounts can read or enter
    it, and says so; None when nothing had to change (or the folder does not exist yet: it is
    created 0700). A folder of another owner is left alone, with a warning.

    0700 on the workspace itself is enough to keep every file inside from other accounts (they
    cannot pass through it), so files made under an older umask need no change.

    Example:
        >>> secure_workspace("/no/such/workspace") is None
        True
    """
    folder = Path(root)
    try:
        info = folder.stat()
    except OSError:
        return None
    if not stat.S_ISDIR(info.st_mode) or not info.st_mode & 0o077:
        return None
    mode = stat.S_IMODE(info.st_mode)
    if info.st_uid != os.geteuid():
        return (f"warning: the workspace {folder} (mode {mode:04o}, owner uid {info.st_uid}) is "
                "open to other accounts, and it is not yours to change: they can read its "
                "uploads, registry and predictions. Ask its owner to run chmod 700 on it.")
    os.chmod(folder, 0o700)
    return (f"the workspace {folder} was open to other accounts (mode {mode:04o}): it is now "
            "owner-only (0700), so they can no longer read its uploads, registry, runs or logs.")
