"""The versions of a served model: an export folder as TensorFlow Serving's model base path.

``export_saved_model`` writes ``<export_dir_base>/<10-digit timestamp>/``; TF Serving serves a base
path whose numeric subfolders are the versions (the newest answers when no version is asked for).
So ``estimator-workbench serve`` takes either one version folder (its number is the version, 1 when
its name is not a number) or the base folder (every numeric subfolder holding a ``signature.json``).
Each version is loaded with ``estimator_engine.export.load``: no model_fn source, nothing unpickled.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

from estimator_engine import export as export_lib

__all__ = ["ModelNotFound", "ModelRepository", "ModelVersion", "find_versions"]

SIGNATURE_FILE = export_lib.SIGNATURE_FILENAME


class ModelNotFound(LookupError):
    """No such model or version (TF Serving's NOT_FOUND, HTTP 404)."""


def find_versions(path: str | os.PathLike[str]) -> dict[int, Path]:
    """``{version: folder}`` of an export folder (a version folder or a base of numeric folders).

    Raises ValueError saying what was expected when ``path`` holds no export.

    Example:
        >>> # find_versions('runs/ab12/export/saved_model')  ->  {1764660000: Path('.../1764660000')}
    """
    folder = Path(path).expanduser()
    if not folder.is_dir():
        raise ValueError(f"{str(folder)!r} is not a folder; give an export folder (the path "
                         "export_saved_model returned, or its parent holding numbered versions) or a run id.")
    if (folder / SIGNATURE_FILE).is_file():
        return {int(folder.name) if folder.name.isdigit() else 1: folder}
    versions = {int(child.name): child for child in folder.iterdir()
                if child.name.isdigit() and (child / SIGNATURE_FILE).is_file()}
    if not versions:
        raise ValueError(f"{str(folder)!r} holds no exported model: neither {SIGNATURE_FILE} nor numbered "
                         "version folders with one. Export the model first (export_saved_model, or serve "
                         "a run id to export the run).")
    return dict(sorted(versions.items()))


@dataclasses.dataclass
class ModelVersion:
    """One loaded version: a callable per signature key, and the export's ``signature.json``.

    Example:
        >>> # version = ModelVersion.load(1764660000, Path('export/1764660000'))
        >>> # version.signatures['serving_default']({'x': [[1.0]]})
    """

    version: int
    path: Path
    meta: dict[str, Any]
    signatures: dict[str, export_lib.LoadedModel]

    @property
    def default_signature(self) -> str:
        return str(self.meta.get("default_signature") or export_lib.DEFAULT_SERVING_SIGNATURE_DEF_KEY)

    @classmethod
    def load(cls, version: int, path: Path, runtime: str = "torch") -> ModelVersion:
        """Loads every signature of the export in ``path`` (``runtime``: 'torch' or 'onnxruntime')."""
        first = export_lib.load(path, runtime=runtime)
        signatures = {first.signature_key: first}
        for key in first.signature["signatures"]:
            if key not in signatures:
                signatures[key] = export_lib.load(path, signature=key, runtime=runtime)
        return cls(version, path, dict(first.signature), signatures)


class ModelRepository:
    """The served models by name, each with its loaded versions.

    Example:
        >>> # repo = ModelRepository.load({'census': 'runs/ab12/export/saved_model'})
        >>> # repo.get('census').version      # the newest version
    """

    def __init__(self, models: dict[str, dict[int, ModelVersion]]) -> None:
        self.models = models

    @classmethod
    def load(cls, paths: dict[str, str | os.PathLike[str]], runtime: str = "torch") -> ModelRepository:
        return cls({name: {version: ModelVersion.load(version, folder, runtime)
                           for version, folder in find_versions(path).items()}
                    for name, path in paths.items()})

    def versions(self, name: str) -> dict[int, ModelVersion]:
        if name not in self.models:
            raise ModelNotFound(f"Servable not found for request: Latest({name})")
        return self.models[name]

    def get(self, name: str, version: int | None = None) -> ModelVersion:
        versions = self.versions(name)
        if version is None:
            return versions[max(versions)]
        if version not in versions:
            raise ModelNotFound(f"Servable not found for request: Specific({name}, {version})")
        return versions[version]
