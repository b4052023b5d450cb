"""Mirroring runs to experiment trackers (MLflow, the ``mlflow`` extra).

* ``mlflow_mirror``: a finished run -> an MLflow run (params, metrics, tags, notes, the model);
* ``pyfunc``: the run's exported model as an MLflow pyfunc model.

Where each run's mirror stands is ``estimator_workbench.store.mlflow_state``; the launchers start
the sync (``estimator_workbench.execution.mirror_trigger``).
"""

__all__: list[str] = []
