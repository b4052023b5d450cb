"""``python -m estimator_workbench`` = ``estimator-workbench`` (see ``estimator_workbench.cli.commands``)."""

from __future__ import annotations

import sys

from estimator_workbench.cli.commands import main

__all__: list[str] = []

if __name__ == "__main__":
    sys.exit(main())
