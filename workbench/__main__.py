"""``python -m workbench`` = ``estimator-workbench`` (see ``workbench.cli``)."""

from __future__ import annotations

import sys

from workbench.cli import main

__all__: list[str] = []

if __name__ == "__main__":
    sys.exit(main())
