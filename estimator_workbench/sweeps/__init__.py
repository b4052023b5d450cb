"""Hyperparameter sweeps with Optuna: each trial is a normal run of the workbench.

- ``spec``: the param space (``--param`` strings) and a sweep's settings (``SweepSpec``), checked
  against the template's ``PARAMS``;
- ``plan``: every check of a request before anything exists (``plan_sweep``);
- ``store``: the study's storage in the workspace (``sweeps/<name>/study.journal``), the driver's
  state, stop request and detached start;
- ``driver``: the process that asks Optuna, submits runs, prunes and tells (``SweepDriver``);
- ``report``: what the Sweeps page shows (trials table, best trial, importances, figures).

The engine never imports this package; only the workbench does, and Optuna is imported lazily.
"""

__all__: list[str] = []
