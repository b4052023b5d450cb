"""The HTTP layer of ``estimator-workbench serve``: a Starlette application speaking TF Serving's
REST API (``estimator_workbench.serve.protocol``), run by uvicorn (``estimator_workbench.serve.server``).

Routes::

    GET  /v1/models/NAME[/versions/N]                      model status
    GET  /v1/models/NAME[/versions/N]/metadata             signature defs
    POST /v1/models/NAME[/versions/N]:(predict|classify|regress)
    GET  /healthz                                          200 {"status": "ok"} once the models are loaded

Every error is TF Serving's ``{"error": "..."}`` with its status code (400 bad request, 404 unknown
model, version or URL, 413 a body over ``max_request_bytes``, 500 anything unexpected). Model calls
run in worker threads (torch releases the GIL), so one slow request does not hold the others.

Starlette rather than FastAPI: the routes are TF Serving's fixed JSON protocol with its own error
shape, so FastAPI's pydantic request models and OpenAPI schema would add a dependency and nothing
a client of TF Serving uses.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Callable
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from estimator_workbench.serve import protocol
from estimator_workbench.serve.repository import ModelNotFound, ModelRepository

__all__ = ["CONFIG_ENV", "DEFAULT_MAX_REQUEST_BYTES", "app_from_environment", "create_app"]

_log = logging.getLogger("estimator_workbench.serve")

# How the CLI hands the configuration to uvicorn's worker processes (which import the factory).
CONFIG_ENV = "WORKBENCH_SERVE_CONFIG"
DEFAULT_MAX_REQUEST_BYTES = 32 * 1024 * 1024

_PATH = re.compile(r"^/v1/models/(?P<name>[^/:]+)"
                   r"(?:/versions/(?P<version>[^/:]+)|/labels/(?P<label>[^/:]+))?"
                   r"(?::(?P<verb>[A-Za-z_]+)|/(?P<metadata>metadata))?$")
_VERBS: dict[str, Callable[..., dict[str, Any]]] = {
    "predict": protocol.predict, "classify": protocol.classify, "regress": protocol.regress}


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


class _TooLarge(Exception):
    pass


async def _read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise _TooLarge
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _TooLarge
        chunks.append(chunk)
    return b"".join(chunks)


def create_app(repository: ModelRepository, max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES) -> Starlette:
    """The ASGI application serving ``repository``.

    Example:
        >>> # uvicorn.run(create_app(ModelRepository.load({'m': 'export/'})), port=8501)
    """

    async def models(request: Request) -> Response:
        path = request.url.path
        match = _PATH.match(path)
        if match is None or match["label"] is not None or (match["verb"] and match["metadata"]):
            if match is not None and match["label"] is not None:
                return _error(404, f"Servable not found for request: Label({match['name']}, {match['label']}); "
                                   "this server has no version labels: use /versions/N")
            return _error(404, f"Malformed request: {request.method} {path}")
        name, verb = match["name"], match["verb"]
        version = None
        if match["version"] is not None:
            if not match["version"].isdigit():
                return _error(400, f"Failed to convert version: {match['version']} to numeric.")
            version = int(match["version"])
        try:
            if request.method == "GET" and verb is None:
                if match["metadata"]:
                    return JSONResponse(protocol.model_metadata(repository, name, version))
                return JSONResponse(protocol.model_status(repository, name, version))
            if request.method != "POST" or verb not in _VERBS:
                return _error(404, f"Malformed request: {request.method} {path}")
            try:
                raw = await _read_body(request, max_request_bytes)
            except _TooLarge:
                return _error(413, f"The request body is larger than the limit of {max_request_bytes} bytes "
                                   "(--max-request-bytes); send fewer rows per request")
            try:
                body = json.loads(raw or b"null")
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                return _error(400, f"JSON Parse error: {exc}")
            result = await run_in_threadpool(_VERBS[verb], repository, name, version, body)
            return JSONResponse(result)
        except ModelNotFound as exc:
            return _error(404, str(exc))
        except protocol.RequestError as exc:
            return _error(exc.status, exc.message)
        except Exception as exc:  # an internal error still answers TF Serving's error JSON
            _log.exception("serving %s %s failed", request.method, path)
            return _error(500, f"{type(exc).__name__}: {exc}")

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok", "models": {name: sorted(versions)
                                                         for name, versions in repository.models.items()}})

    async def not_found(request: Request, exc: Exception) -> Response:
        status = exc.status_code if isinstance(exc, HTTPException) else 500
        return _error(status, f"Malformed request: {request.method} {request.url.path}")

    return Starlette(routes=[Route("/healthz", healthz, methods=["GET"]),
                             Route("/v1/models/{rest:path}", models, methods=["GET", "POST"])],
                     exception_handlers={404: not_found, 405: not_found})


def app_from_environment() -> Starlette:
    """uvicorn's factory: loads the models named in ``$WORKBENCH_SERVE_CONFIG`` (JSON: ``models``
    {name: export folder}, ``max_request_bytes``, ``runtime``); each worker process calls it once."""
    config = json.loads(os.environ[CONFIG_ENV])
    repository = ModelRepository.load(config["models"], runtime=config.get("runtime") or "torch")
    return create_app(repository, int(config.get("max_request_bytes") or DEFAULT_MAX_REQUEST_BYTES))
