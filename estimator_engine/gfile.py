"""Paths that may be URLs: a model_dir on ``s3://``, ``gs://``, ... as TF's ``tf.io.gfile`` allowed.

TF's Estimator took ``model_dir="gs://bucket/run"`` or ``"s3://..."`` because every file it wrote
went through ``tf.io.gfile``. Here a path is either

* a local path (or a ``file://`` URL, turned into the local path by :func:`normalize`): the engine
  uses ``os`` directly, exactly as before, and nothing here is imported or called that costs time;
* any other URL (``s3://``, ``gs://``, ``az://``, ``memory://``, ...): it goes through `fsspec
  <https://filesystem-spec.readthedocs.io>`_, imported on the first URL only. Install the
  ``remote`` extra (``pip install 'estimator-workbench[remote]'``: fsspec and s3fs); ``gs://``
  also needs ``gcsfs``, ``az://`` ``adlfs``.

Credentials and endpoints come from the usual places: the AWS variables and files for S3
(``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_ENDPOINT_URL`` for an S3-compatible
server such as MinIO), or fsspec's own configuration (``FSSPEC_S3_ENDPOINT_URL``,
``FSSPEC_S3_KEY``, ... or ``fsspec.config.conf``).

How writes stay atomic on an object store: an object becomes visible only when its upload is
complete (a single PUT, or a multipart upload's final "complete" call), so a reader never sees a
torn object. :func:`write_bytes` and :func:`put_file` upload to the final name directly; a
multi-file artifact (a checkpoint and its ``checkpoint`` index, an export directory) is committed
by writing its index / marker object last.

Example:
    >>> from estimator_engine import gfile
    >>> gfile.is_remote("s3://bucket/run"), gfile.is_remote("/tmp/run")
    (True, False)
    >>> gfile.normalize("file:///tmp/run")
    '/tmp/run'
    >>> gfile.join("s3://bucket/run", "checkpoint")
    's3://bucket/run/checkpoint'
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import unquote, urlsplit

from estimator_engine.errors import EstimatorError

__all__ = [
    "StorageError",
    "abspath",
    "download_file",
    "exists",
    "filesystem",
    "getmtime",
    "is_remote",
    "is_url",
    "isdir",
    "isfile",
    "join",
    "listdir",
    "local_staging_dir",
    "makedirs",
    "normalize",
    "put_file",
    "read_bytes",
    "remove",
    "reporting",
    "rmtree",
    "upload_tree",
    "version",
    "write_bytes",
]

_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*)://")
_INSTALL_HINT = ("install the remote extra: pip install 'estimator-workbench[remote]' (fsspec and "
                 "s3fs; gcsfs for gs://, adlfs for az://)")


class StorageError(EstimatorError, OSError):
    """A file of a remote model_dir (``s3://...``) could not be read or written.

    The message names the URL, the operation and the store's own reason (e.g. wrong credentials).
    """


def is_url(path: str) -> bool:
    """Whether ``path`` starts with ``<scheme>://`` (a ``file://`` URL counts)."""
    return _URL.match(path) is not None


def is_remote(path: str) -> bool:
    """Whether ``path`` is a URL that fsspec handles, i.e. any URL but ``file://``."""
    match = _URL.match(path)
    return match is not None and match.group(1).lower() != "file"


def normalize(path: str | bytes | os.PathLike[Any]) -> str:
    """``os.fspath(path)``, with a ``file://`` URL turned into its local path.

    Example:
        >>> normalize("file://localhost/tmp/a%20b")
        '/tmp/a b'
    """
    text = os.fsdecode(os.fspath(path))
    match = _URL.match(text)
    if match is None or match.group(1).lower() != "file":
        return text
    parts = urlsplit(text)
    if parts.netloc not in ("", "localhost"):
        raise ValueError(f"{text!r}: a file:// URL must name a local path (file:///path), not host "
                         f"{parts.netloc!r}.")
    return unquote(parts.path)


def abspath(path: str) -> str:
    """``os.path.abspath`` for a local path; a URL is returned as it is."""
    return path if is_remote(path) else os.path.abspath(path)


def join(base: str, *names: str) -> str:
    """``os.path.join`` for a local path; ``/``-joined for a URL."""
    if not is_remote(base):
        return os.path.join(base, *names)
    return "/".join([base.rstrip("/"), *(name.strip("/") for name in names)])


def filesystem(url: str) -> tuple[Any, str]:
    """``(fsspec filesystem, path inside it)`` of a URL; imports fsspec on first use.

    Raises:
        ImportError: fsspec, or the package of the URL's protocol (s3fs, gcsfs, ...), is missing.
        ValueError: fsspec knows no such protocol.
    """
    try:
        import fsspec  # type: ignore[import-untyped]
    except ImportError as exc:
        raise ImportError(f"{url!r} is a URL: reading and writing it needs fsspec; "
                          f"{_INSTALL_HINT}.") from exc
    try:
        return fsspec.core.url_to_fs(url)
    except ImportError as exc:
        raise ImportError(f"{url!r}: {exc} ({_INSTALL_HINT}).") from exc
    except ValueError as exc:
        raise ValueError(f"{url!r} is not a storage URL fsspec knows ({exc}); use a local path "
                         "or a URL such as s3://bucket/prefix.") from exc


_CREDENTIALS_HINT = {
    "s3": " Check the S3 credentials (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY or "
          "FSSPEC_S3_KEY / FSSPEC_S3_SECRET) and the endpoint (AWS_ENDPOINT_URL).",
    "gs": " Check the Google Cloud credentials (GOOGLE_APPLICATION_CREDENTIALS).",
}


@contextlib.contextmanager
def reporting(operation: str, url: str) -> Iterator[None]:
    """Turns a store's error into a StorageError naming the URL (FileNotFoundError passes)."""
    try:
        yield
    except FileNotFoundError:
        raise
    except (ImportError, StorageError):
        raise
    except Exception as exc:  # botocore, aiohttp and fsspec errors have no common base
        scheme = url.split("://", 1)[0].lower()
        hint = _CREDENTIALS_HINT.get(scheme, "") if isinstance(exc, PermissionError) or (
            "credential" in str(exc).lower() or "access" in str(exc).lower()) else ""
        first_line = (str(exc).strip().splitlines() or [""])[0][:300].rstrip(".")
        raise StorageError(f"Could not {operation} {url}: {type(exc).__name__}: {first_line}."
                           f"{hint}") from exc


def _probe(path: str, local: Callable[[str], bool], method: str, operation: str) -> bool:
    if not is_remote(path):
        return local(path)
    fs, inner = filesystem(path)
    with reporting(operation, path):
        fs.invalidate_cache(inner)  # another process may have written it since a listing
        return bool(getattr(fs, method)(inner))


def exists(path: str) -> bool:
    """Whether a file or directory exists at ``path``."""
    return _probe(path, os.path.exists, "exists", "check")


def isfile(path: str) -> bool:
    """Whether ``path`` is a file (an object, on a store)."""
    return _probe(path, os.path.isfile, "isfile", "check")


def isdir(path: str) -> bool:
    """Whether ``path`` is a directory (on a store: a prefix that holds objects)."""
    return _probe(path, os.path.isdir, "isdir", "list")


def listdir(path: str) -> list[str]:
    """Names (not paths) of the entries of a directory; FileNotFoundError when there is none."""
    if not is_remote(path):
        return os.listdir(path)
    fs, inner = filesystem(path)
    with reporting("list", path):
        entries = fs.ls(inner, detail=False, refresh=True)
    inner = inner.rstrip("/")
    return [entry.rstrip("/").rsplit("/", 1)[-1] for entry in entries
            if entry.rstrip("/") != inner]


def makedirs(path: str) -> None:
    """Creates a directory and its parents; on an object store there is nothing to create."""
    if not is_remote(path):
        os.makedirs(path, exist_ok=True)
        return
    fs, inner = filesystem(path)
    with reporting("create", path), contextlib.suppress(FileExistsError):
        fs.makedirs(inner, exist_ok=True)  # a no-op on S3 / GCS; real on memory:// and sftp


def getmtime(path: str) -> float:
    """Modification time (seconds since the epoch) of a file."""
    if not is_remote(path):
        return os.path.getmtime(path)
    fs, inner = filesystem(path)
    with reporting("stat", path):
        fs.invalidate_cache(inner)
        return float(fs.modified(inner).timestamp())


def version(path: str) -> tuple[str, int, int]:
    """``(path, change marker, size)`` of a file: it changes whenever the file is rewritten.

    Locally the marker is the mtime in nanoseconds; on a store it is a hash of the object's ETag
    (or of its modification time where the store has no ETag).
    """
    if not is_remote(path):
        stat = os.stat(path)
        return (os.path.abspath(path), stat.st_mtime_ns, stat.st_size)
    fs, inner = filesystem(path)
    with reporting("stat", path):
        fs.invalidate_cache(inner)
        info = fs.info(inner)
    tag = info.get("ETag") or info.get("etag") or info.get("LastModified") or info.get("mtime")
    return (path, hash(str(tag)), int(info.get("size") or 0))


def read_bytes(path: str) -> bytes:
    """The content of a file; FileNotFoundError when there is none."""
    if not is_remote(path):
        with open(path, "rb") as handle:
            return handle.read()
    fs, inner = filesystem(path)
    with reporting("read", path):
        return bytes(fs.cat_file(inner))


def write_bytes(path: str, data: bytes) -> None:
    """Writes a whole file. On a store: one upload, visible to readers only once complete."""
    if not is_remote(path):
        with open(path, "wb") as handle:
            handle.write(data)
        return
    fs, inner = filesystem(path)
    with reporting("write", path):
        fs.pipe_file(inner, data)


def put_file(local_path: str, url: str) -> None:
    """Uploads a local file to ``url``; visible to readers only once the upload is complete."""
    fs, inner = filesystem(url)
    with reporting("upload to", url):
        fs.put_file(local_path, inner)


def download_file(url: str, local_path: str) -> None:
    """Downloads ``url`` to a local file."""
    fs, inner = filesystem(url)
    with reporting("download", url):
        fs.get_file(inner, local_path)


def remove(path: str) -> None:
    """Deletes one file; FileNotFoundError when there is none."""
    if not is_remote(path):
        os.remove(path)
        return
    fs, inner = filesystem(path)
    with reporting("delete", path):
        fs.rm_file(inner)


def rmtree(path: str) -> None:
    """Deletes a directory and everything under it."""
    if not is_remote(path):
        import shutil

        shutil.rmtree(path)
        return
    fs, inner = filesystem(path)
    with reporting("delete", path):
        fs.rm(inner, recursive=True)


def upload_tree(local_dir: str, url: str, last: str | None = None) -> None:
    """Uploads every file under ``local_dir`` to ``url``, the relative path ``last`` at the end.

    The file named by ``last`` is the commit marker: a reader that finds it finds everything else.
    """
    files = []
    for root, _, names in os.walk(local_dir):
        for name in names:
            files.append(os.path.relpath(os.path.join(root, name), local_dir))
    files.sort(key=lambda relative: relative == last)  # the marker goes last
    for relative in files:
        put_file(os.path.join(local_dir, relative), join(url, *relative.split(os.sep)))


def local_staging_dir(prefix: str) -> str:
    """A fresh local directory for files that are built here and uploaded to a store."""
    return tempfile.mkdtemp(prefix=prefix)
