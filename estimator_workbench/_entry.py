"""The ``estimator-workbench`` console script: checks that the ``ui`` extra is installed, then runs the CLI.

``estimator_workbench.cli`` and everything it imports need the ``ui`` extra (pandas, streamlit, plotly, ...).
A base install (``pip install estimator-workbench``: the engine only) would otherwise fail with a
``ModuleNotFoundError`` traceback; this module imports nothing from the workbench until the check
has passed, and says which extra to install. ``--version`` works without the extra.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from importlib import metadata

from estimator_engine._version import DISTRIBUTION, package_version

__all__ = ["main", "missing_extra_packages"]

_PROG = "estimator-workbench"


def missing_extra_packages(extra: str = "ui", distribution: str = DISTRIBUTION) -> list[str]:
    """The distributions that ``distribution[extra]`` requires and that are not installed.

    Read from the installed metadata, so the ``ui`` table of pyproject.toml is the only list.
    Empty when ``distribution`` itself is not installed (a checkout on sys.path: nothing to check).

    Example:
        >>> missing_extra_packages("no-such-extra")
        []
    """
    try:
        requirements = metadata.requires(distribution) or []
    except metadata.PackageNotFoundError:
        return []
    marker = re.compile(rf"""extra\s*==\s*["']{re.escape(extra)}["']""")
    missing = []
    for requirement in requirements:
        if not marker.search(requirement):
            continue
        name = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement).group(0)  # type: ignore[union-attr]
        if name == distribution:
            continue  # a self-reference such as estimator-workbench[tensorboard]
        try:
            metadata.version(name)
        except metadata.PackageNotFoundError:
            missing.append(name)
    return sorted(set(missing))


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``estimator-workbench``; returns the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if "--version" in args:
        print(f"{_PROG} {package_version()}")
        return 0
    missing = missing_extra_packages("ui")
    if missing:
        print(f"{_PROG}: error: the workbench needs the 'ui' extra, which is not installed "
              f"(missing: {', '.join(missing)}). Install it with: pip install '{DISTRIBUTION}[ui]' "
              f"(from a checkout: pip install -e '.[ui]' -c constraints/cpu.txt). "
              f"The engine alone (import estimator_engine) needs no extra.", file=sys.stderr)
        return 2
    from estimator_workbench import cli
    from estimator_workbench.store import paths

    paths.owner_only_umask()  # the workspace is private whatever the shell's umask (issue 24.8)
    return cli.main(args)


if __name__ == "__main__":
    sys.exit(main())
