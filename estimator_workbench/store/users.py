"""Who is acting: the people of a workspace's users file, and the user the CLI and the Python API
act as.

For a small team without an identity provider, ``estimator-workbench users add NAME [--admin]``
writes ``<workspace>/.ui/users.json`` (0600 in a 0700 folder): one entry per person with an
argon2id hash of their password (``argon2-cffi``: a random salt per hash, the parameters inside
the hash string), whether they are an admin, and when they were added. The UI then asks for a
name and password (``estimator_workbench.ui.signin``); a hash made with older parameters is
replaced by a fresh one at the next sign-in.

The CLI and the Python API act as ``$WORKBENCH_USER``, else the operating-system account
(``current_user``); they are an admin when the users file says that name is one, or when the
workspace has no users file.

Example::

    >>> add_user(root, "alice", "correct horse battery", admin=True)  # doctest: +SKIP
    >>> verify_password(root, "alice", "correct horse battery")          # doctest: +SKIP
    Actor(name='alice', admin=True)
    >>> verify_password(root, "alice", "wrong") is None                  # doctest: +SKIP
    True
"""

from __future__ import annotations

import dataclasses
import getpass
import json
import os
import re
import time
from pathlib import Path
from typing import Any

from estimator_workbench.store import paths

__all__ = ["MIN_PASSWORD_LENGTH", "USERS_FILE", "USER_ENV", "Actor", "UserEntry", "add_user", "check_name", "cli_actor",
           "current_user", "has_users", "list_users", "remove_user", "users_file", "verify_password"]

USERS_FILE = "users.json"
USER_ENV = "WORKBENCH_USER"
MIN_PASSWORD_LENGTH = 8
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+-]{0,63}")
_FORMAT_VERSION = 1


@dataclasses.dataclass(frozen=True)
class Actor:
    """A person acting on runs: their name and whether they may act on everyone's runs.

    Example:
        >>> Actor("alice", admin=True)
        Actor(name='alice', admin=True)
    """

    name: str
    admin: bool = False


@dataclasses.dataclass(frozen=True)
class UserEntry:
    """One person of the users file (the hash stays inside the file).

    Example:
        >>> UserEntry("bob", admin=False, created_at=0.0).admin
        False
    """

    name: str
    admin: bool
    created_at: float


def current_user() -> str:
    """Who the CLI and the Python API act as: ``$WORKBENCH_USER``, else the OS account."""
    name = os.environ.get(USER_ENV, "").strip()
    if name:
        return name
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (a container's anonymous uid)
        return f"uid-{os.getuid()}"


def cli_actor(root: str | os.PathLike[str]) -> Actor:
    """``current_user()`` as an ``Actor``: an admin when the workspace's users file says so, or
    when the workspace has no users file (one person's workspace: there is no one else's run)."""
    name = current_user()
    users = _load(users_file(root))
    entry = users.get(name)
    return Actor(name, admin=not users or bool(entry and entry.get("admin")))


def users_file(root: str | os.PathLike[str]) -> Path:
    """``<workspace>/.ui/users.json``."""
    return Path(root) / paths.UI_DIR / USERS_FILE


def has_users(root: str | os.PathLike[str]) -> bool:
    """Whether the workspace has a users file with at least one person in it."""
    return bool(_load(users_file(root)))


def _hasher() -> Any:
    try:
        from argon2 import PasswordHasher
    except ImportError as exc:  # the ui extra brings it
        raise ValueError(f"the users file needs the argon2-cffi package ({exc}); install "
                         "'estimator-workbench[ui]'.") from None
    return PasswordHasher()  # argon2id, RFC 9106's low-memory profile (64 MiB, 3 passes)


def _load(path: Path) -> dict[str, dict[str, Any]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise ValueError(f"The users file {path} cannot be read ({exc}); fix or delete it, then "
                         "add the users again with `estimator-workbench users add NAME`.") from None
    users = data.get("users") if isinstance(data, dict) else None
    if not isinstance(users, dict):
        raise ValueError(f"The users file {path} holds no 'users' object; delete it and add the "
                         "users again with `estimator-workbench users add NAME`.")
    return {str(k): v for k, v in users.items() if isinstance(v, dict)}


def _save(path: Path, users: dict[str, dict[str, Any]]) -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(path.parent, 0o700)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump({"version": _FORMAT_VERSION, "users": users}, handle, indent=2, sort_keys=True)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def check_name(name: str) -> str:
    """``name`` when it is a valid user name, else ``ValueError`` saying what is allowed."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValueError(f"user name {name!r} is not allowed: use 1-64 letters, digits and . _ @ + - "
                         "(starting with a letter or digit).")
    return name


def add_user(root: str | os.PathLike[str], name: str, password: str, *, admin: bool = False,
             replace: bool = False) -> UserEntry:
    """Adds ``name`` with an argon2id hash of ``password`` (``replace``: a new password and admin
    flag for someone already there); raises ``ValueError`` for a bad name, a password shorter
    than ``MIN_PASSWORD_LENGTH`` or a name already there without ``replace``."""
    check_name(name)
    if not isinstance(password, str) or len(password) < MIN_PASSWORD_LENGTH:
        raise ValueError(f"the password of {name!r} must be at least {MIN_PASSWORD_LENGTH} characters long.")
    path = users_file(root)
    users = _load(path)
    if name in users and not replace:
        raise ValueError(f"user {name!r} is already in {path}; pass --replace to set a new password.")
    created = float(users.get(name, {}).get("created_at") or time.time())
    users[name] = {"hash": _hasher().hash(password), "admin": bool(admin), "created_at": created}
    _save(path, users)
    return UserEntry(name, bool(admin), created)


def remove_user(root: str | os.PathLike[str], name: str) -> None:
    """Removes ``name`` from the users file (``ValueError`` when it is not there)."""
    path = users_file(root)
    users = _load(path)
    if name not in users:
        raise ValueError(f"no user {name!r} in {path}; see `estimator-workbench users list`.")
    del users[name]
    _save(path, users)


def list_users(root: str | os.PathLike[str]) -> list[UserEntry]:
    """The people of the users file, by name."""
    return [UserEntry(name, bool(entry.get("admin")), float(entry.get("created_at") or 0.0))
            for name, entry in sorted(_load(users_file(root)).items())]


# Checked against when the name is unknown, so that a wrong name costs as long as a wrong password
# (the answer time does not tell which names exist).
_DUMMY_HASH: list[str] = []


def verify_password(root: str | os.PathLike[str], name: str, password: str) -> Actor | None:
    """The ``Actor`` when ``password`` is ``name``'s, else None (unknown name or wrong password)."""
    from argon2.exceptions import InvalidHashError, VerificationError

    hasher = _hasher()
    path = users_file(root)
    users = _load(path)
    entry = users.get(name) if isinstance(name, str) else None
    if entry is None:
        if not _DUMMY_HASH:
            _DUMMY_HASH.append(hasher.hash("not a password of anyone"))
        try:
            hasher.verify(_DUMMY_HASH[0], password or "")
        except VerificationError:
            pass
        return None
    try:
        hasher.verify(str(entry.get("hash", "")), password)
    except (VerificationError, InvalidHashError):
        return None
    if hasher.check_needs_rehash(str(entry["hash"])):  # parameters raised since it was made
        entry["hash"] = hasher.hash(password)
        users[name] = entry
        _save(path, users)
    return Actor(name, admin=bool(entry.get("admin")))
