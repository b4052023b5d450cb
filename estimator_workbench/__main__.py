"""``python -m estimator_workbench`` = ``estimator-workbench`` (see ``estimator_workbench.cli.commands``)."""

from __future__ import annotations

import sys

from estimator_workbench.cli.commands import main
from estimator_workbench.store import paths

__all__: list[str] = []

if __name__ == "__main__":
    paths.owner_only_umask()  # the workspace is private whatever the shell's umask (issue 24.8)
    sys.exit(main())
