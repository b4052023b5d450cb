"""``estimator-workbench serve RUN|EXPORT_DIR``: serves a model over TensorFlow Serving's REST API.

::

    estimator-workbench serve r-20261204-ab12cd            export the run (once), then serve it
    estimator-workbench serve runs/ab12/export/saved_model --name census --port 8501 --workers 2

A run is exported in a child process first (its template is user code), into
``runs/<id>/export/saved_model/<timestamp>/``, and reused while it matches the run's latest
checkpoint. Stop the server with Ctrl-C or SIGTERM (requests in flight finish first).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from estimator_workbench.cli.usage import PROG as _PROG
from estimator_workbench.cli.usage import UsageError
from estimator_workbench.store import paths, trash
from estimator_workbench.store.records import RunNotFoundError
from estimator_workbench.store.registry import RunRegistry

__all__ = ["add_parser", "cmd_serve"]

_DEFAULT_NAME = "default"  # TF Serving's --model_name default


def add_parser(sub: Any) -> None:
    """Adds ``serve`` to the CLI's subcommands."""
    cmd = sub.add_parser("serve", help="serve a run's model (or an export folder) over TF Serving's REST API")
    cmd.add_argument("target", metavar="RUN|EXPORT_DIR",
                     help="a run id (exported first) or an export folder (one version, or a base of numbered ones)")
    cmd.add_argument("--name", help="the model name in the URLs (default: the run id, else 'default')")
    cmd.add_argument("--host", default="127.0.0.1", help="interface to listen on (default 127.0.0.1)")
    cmd.add_argument("--port", type=int, default=8501, help="port (default 8501, TF Serving's REST port)")
    cmd.add_argument("--workers", type=int, default=1, help="worker processes (default 1)")
    cmd.add_argument("--max-request-bytes", type=int, default=32 * 1024 * 1024,
                     help="larger request bodies are refused with 413 (default 32 MiB)")
    cmd.add_argument("--runtime", choices=("torch", "onnxruntime"), default="torch",
                     help="run the torch.export program (default) or the export's model.onnx (made with "
                          "format='onnx'; needs the onnx extra)")
    cmd.add_argument("--max-concurrency", type=int, default=256,
                     help="concurrent connections beyond this are answered 503 (default 256)")


def _resolve(root: Path, target: str, runtime: str) -> tuple[Path, str | None]:
    """(export folder, run id or None) for ``target``."""
    candidate = Path(target).expanduser()
    if candidate.is_dir():
        return candidate, None
    try:
        paths.run_dir(root, target)  # refuses '..', separators and absolute names first
        registry = RunRegistry(root)
        registry.get(target)
    except (ValueError, RunNotFoundError) as exc:
        raise UsageError(f"{target!r} is neither an export folder nor a run of the workspace {str(root)!r}: "
                         f"{exc}") from None
    if target in trash.trashed_times(registry):
        raise UsageError(f"Run {target!r} is in the trash; restore it first with `{_PROG} trash restore {target}`.")
    from estimator_workbench.serve.run_export import export_run_in_child

    print(f"{_PROG}: exporting run {target} for serving ...", file=sys.stderr, flush=True)
    return export_run_in_child(registry.run_dir(target), format="onnx" if runtime == "onnxruntime" else "torch.export"), target


def cmd_serve(args: argparse.Namespace, root: Path) -> int:
    for flag, value in (("--port", args.port), ("--workers", args.workers),
                        ("--max-request-bytes", args.max_request_bytes), ("--max-concurrency", args.max_concurrency)):
        if value < (0 if flag == "--port" else 1) or (flag == "--port" and value > 65535):
            raise UsageError(f"{flag} must be a positive number{' up to 65535' if flag == '--port' else ''}, "
                             f"given {value}.")
    try:
        from estimator_workbench.serve import server
    except ImportError as exc:
        raise UsageError(f"serving needs the 'serve' extra ({exc.name} is missing): "
                         "pip install 'estimator-workbench[serve]'") from None
    folder, run_id = _resolve(root, args.target, args.runtime)
    if args.runtime == "onnxruntime":
        from estimator_workbench.serve.repository import find_versions

        without = [str(p) for p in find_versions(folder).values() if "onnx" not in
                   json.loads((p / "signature.json").read_text("utf-8"))]
        if without:
            raise UsageError(f"--runtime onnxruntime: {', '.join(without)} has no model.onnx; export with "
                             "export_saved_model(..., format='onnx'), or serve with --runtime torch.")
    name = args.name or run_id or _DEFAULT_NAME
    if "/" in name or ":" in name or not name.strip():
        raise UsageError(f"--name {name!r} cannot hold '/' or ':' (they separate the parts of the URL).")
    url = f"http://{args.host if ':' not in args.host else f'[{args.host}]'}:{args.port}/v1/models/{name}"
    print(f"{_PROG}: serving {folder} as {url}  (POST {url}:predict; Ctrl-C stops)", file=sys.stderr, flush=True)
    server.serve({name: folder}, host=args.host, port=args.port, workers=args.workers,
                 max_request_bytes=args.max_request_bytes, limit_concurrency=args.max_concurrency,
                 runtime=args.runtime)
    return 0
