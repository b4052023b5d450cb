"""``estimator-workbench users``: the workspace's users file, for a team without an identity
provider (``estimator_workbench.store.users``)::

    estimator-workbench users add NAME [--admin] [--replace]   asks for the password (twice)
    estimator-workbench users list
    estimator-workbench users remove NAME
    estimator-workbench audit [--run RUN] [--limit N] [--json]   who stopped, cancelled, deleted... what

The password is read from the terminal without echo, or from standard input (one line) when that
is not a terminal, never from the command line (other accounts read it in ``ps``).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as _dt
import getpass
import json
import sys
from pathlib import Path
from typing import Any

from estimator_workbench.cli.usage import PROG as _PROG
from estimator_workbench.cli.usage import UsageError, positive_int
from estimator_workbench.store import audit, users
from estimator_workbench.store.registry import RunRegistry

__all__ = ["add_parsers", "cmd_audit", "cmd_users"]


def add_parsers(sub: Any) -> None:
    """Adds ``users`` to the CLI's subcommands."""
    cmd = sub.add_parser("users", help="people who sign in to the UI (a users file with argon2 password hashes)")
    cmd.add_argument("users_command", choices=("add", "list", "remove"))
    cmd.add_argument("name", nargs="?", help="add / remove: the user name")
    cmd.add_argument("--admin", action="store_true", help="add: may stop, cancel, delete and restore everyone's runs")
    cmd.add_argument("--replace", action="store_true", help="add: set a new password for a user already there")
    log = sub.add_parser("audit", help="the audit log: who stopped, cancelled, resumed, deleted or restored which run, when")
    log.add_argument("--run", help="only this run's entries")
    log.add_argument("--limit", type=positive_int, default=50, help="newest entries shown (default 50)")
    log.add_argument("--json", action="store_true")


def cmd_audit(args: argparse.Namespace, root: Path) -> int:
    """Prints the audit log, newest first."""
    entries = audit.audit_entries(RunRegistry(root), run_id=args.run, limit=args.limit)
    if args.json:
        print(json.dumps([dataclasses.asdict(e) for e in entries]))
        return 0
    if not entries:
        print("The audit log is empty.")
    for e in entries:
        when = _dt.datetime.fromtimestamp(e.at).strftime("%Y-%m-%d %H:%M:%S")
        print(f"{when}  {e.actor}  {e.action}  {e.run_id}  {e.outcome}" + (f"  ({e.detail})" if e.detail else ""))
    return 0


def _read_password(name: str) -> str:
    if not sys.stdin.isatty():
        return sys.stdin.readline().rstrip("\r\n")
    first = getpass.getpass(f"Password for {name}: ")
    if getpass.getpass("Again: ") != first:
        raise UsageError("the two passwords differ; nothing was changed.")
    return first


def cmd_users(args: argparse.Namespace, root: Path) -> int:
    """Runs ``users add|list|remove``."""
    if args.users_command in ("add", "remove") and not args.name:
        raise UsageError(f"users {args.users_command} needs a user name: `{_PROG} users {args.users_command} NAME`.")
    if args.users_command == "list":
        entries = users.list_users(root)
        if not entries:
            print(f"No users in {users.users_file(root)}; add one with `{_PROG} users add NAME`.")
        for entry in entries:
            added = _dt.datetime.fromtimestamp(entry.created_at).strftime("%Y-%m-%d %H:%M")
            print(f"{entry.name}{'  (admin)' if entry.admin else ''}  added {added}")
        return 0
    if args.users_command == "remove":
        users.remove_user(root, args.name)
        print(f"User {args.name} removed from {users.users_file(root)}.")
        return 0
    users.check_name(args.name)  # before asking for a password
    if not args.replace and args.name in {e.name for e in users.list_users(root)}:
        raise UsageError(f"user {args.name!r} is already in {users.users_file(root)}; pass --replace "
                         "to set a new password.")
    password = _read_password(args.name)
    entry = users.add_user(root, args.name, password, admin=args.admin, replace=args.replace)
    print(f"User {entry.name}{' (admin)' if entry.admin else ''} saved in {users.users_file(root)}; "
          f"`{_PROG} ui` now asks for a name and password.")
    return 0
