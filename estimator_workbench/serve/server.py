"""Starts uvicorn on the serving application (``estimator-workbench serve``).

uvicorn gives what a model server needs without code of ours: N worker processes sharing the port
(``workers``), a cap on concurrent connections answered with 503 beyond it (``limit_concurrency``),
and a graceful shutdown on SIGTERM or Ctrl-C (stop accepting, finish the requests in flight for up
to ``graceful_timeout`` seconds, exit 0). The models load in each worker before it accepts
connections, so ``/healthz`` answers only once they are ready.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping

from estimator_workbench.serve.app import CONFIG_ENV, DEFAULT_MAX_REQUEST_BYTES
from estimator_workbench.serve.repository import find_versions

__all__ = ["DEFAULT_PORT", "serve"]

DEFAULT_PORT = 8501  # TF Serving's REST port


def serve(models: Mapping[str, str | os.PathLike[str]], host: str = "127.0.0.1", port: int = DEFAULT_PORT,
          workers: int = 1, max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES, limit_concurrency: int = 256,
          graceful_timeout: float = 30.0, log_level: str = "info", runtime: str = "torch") -> None:
    """Serves ``models`` ({name: export folder}) until SIGTERM or Ctrl-C.

    ``runtime="onnxruntime"`` serves the exports' ``model.onnx`` (made with ``format="onnx"``).
    Raises ValueError (before anything starts) when a folder holds no export.

    Example:
        >>> # serve({'census': 'runs/ab12/export/saved_model'}, port=8501)
    """
    import uvicorn

    for path in models.values():
        find_versions(path)
    os.environ[CONFIG_ENV] = json.dumps({
        "models": {name: os.path.abspath(os.fspath(path)) for name, path in models.items()},
        "max_request_bytes": int(max_request_bytes), "runtime": runtime})
    uvicorn.run("estimator_workbench.serve.app:app_from_environment", factory=True, host=host, port=int(port),
                workers=int(workers), limit_concurrency=int(limit_concurrency),
                timeout_graceful_shutdown=float(graceful_timeout), log_level=log_level, access_log=False)
