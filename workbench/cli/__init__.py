"""The command-line front end (``estimator-workbench``); ``main`` is its entry point."""

from workbench.cli.commands import main

__all__ = ["main"]
