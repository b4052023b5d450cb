"""Serving exported models over TensorFlow Serving's REST API (``estimator-workbench serve``).

* ``repository``: the model versions of an export folder, loaded without the model_fn's source;
* ``protocol``: TF Serving's JSON requests -> model inputs, outputs -> its JSON responses;
* ``app``: the Starlette application (routes, error JSON, request size limit, ``/healthz``);
* ``run_export``: exports a workbench run for serving (in a child process: it runs template code).
"""

__all__: list[str] = []
