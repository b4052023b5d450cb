"""The command-line front end (``estimator-workbench``); ``main`` is its entry point."""

from estimator_workbench.cli.commands import main

__all__ = ["main"]
