"""``python -m workbench`` = ``estimator-workbench`` (see ``workbench.cli.commands``)."""

from __future__ import annotations

import sys

from workbench.cli.commands import main

__all__: list[str] = []

if __name__ == "__main__":
    sys.exit(main())
