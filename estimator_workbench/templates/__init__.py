"""model_fn templates: bundled and user-saved Python files, their params schema, save, diff, load.

A template is a Python file that defines, at top level:

* ``model_fn(features, labels, mode, params)`` returning an ``ee.EstimatorSpec``;
* ``PARAMS``: a literal dict ``name -> {'type': 'int'|'float'|'str'|'bool'|'choice', 'default',
  'min', 'max', 'choices', 'help'}`` (the UI builds its form from it);
* ``DESCRIPTION``: a literal string (the module docstring is used when it is missing).

At run time the workbench passes the validated user params plus ``params['task']`` (the
dataset's ``task_info``: task, n_classes, label vocabulary, feature names, statistics,
vocabularies), so the model_fn can build its input layer and head.

Reading a template (``list_templates``, ``get_template``, ``save_template``) never executes it:
``PARAMS`` and ``DESCRIPTION`` are read from the syntax tree with ``ast.literal_eval``, so the UI
process never runs user code. Only ``load_model_fn`` executes code, and it is called in runner and
pre-flight processes only.

Bundled templates live in ``estimator_workbench/templates/*.py`` (data files, not imported as modules);
user templates in ``<workspace>/templates/<name>.py``. The canned estimators (``DNNClassifier``,
``LinearRegressor``, ...) are no-code templates in ``estimator_workbench/templates/canned/``: each
``model_fn`` builds the engine's canned estimator from the params and the dataset's feature
columns and delegates to its ``model_fn``, so a canned run goes through the same snapshot,
pre-flight check, runner and bundle as any other template (``CANNED`` lists them).
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import difflib
import linecache
import math
import os
import re
import sys
import tempfile
import types
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

__all__ = [
    "BUNDLED_DIR",
    "CANNED",
    "CANNED_DIR",
    "MAX_TEMPLATE_CHARS",
    "PARAM_TYPES",
    "TemplateInfo",
    "check_params_schema",
    "diff_templates",
    "get_template",
    "list_templates",
    "load_model_fn",
    "parse_template",
    "save_template",
    "template_filename",
    "validate_params",
]

BUNDLED_DIR = Path(__file__).resolve().parent / "bundled"
PARAM_TYPES = ("int", "float", "str", "bool", "choice")
# The bundled templates are 2-8 kB; a megabyte of code is data that belongs in a file, and its
# syntax tree alone takes ~100x its size in the UI process.
MAX_TEMPLATE_CHARS = 1_000_000
_NAME_RE = re.compile(r"[A-Za-z0-9_\-]{1,64}")
_SPEC_KEYS = {"type", "default", "min", "max", "choices", "help", "label"}

CANNED_DIR = BUNDLED_DIR / "canned"


@dataclasses.dataclass(frozen=True)
class TemplateInfo:
    """A template as the UI sees it (nothing executed).

    Attributes:
        name: the template name (file stem).
        description: DESCRIPTION, or the module docstring.
        code: the source text.
        params: the PARAMS schema (``{}`` when the code could not be read; see ``error``).
        kind: ``'bundled'``, ``'user'`` (saved in the workspace) or ``'canned'`` (a canned
            estimator, ``estimator_workbench/templates/canned/``).
        path: the file, or None.
        error: why PARAMS/DESCRIPTION could not be read, or None.

    Example:
        >>> info = get_template("mlp_classifier")
        >>> info.kind, "hidden_units" in info.params
        ('bundled', True)
    """

    name: str
    description: str
    code: str
    params: dict[str, dict[str, Any]]
    kind: str = "bundled"
    path: Path | None = None
    error: str | None = None

    def defaults(self) -> dict[str, Any]:
        """The default value of every param."""
        return {name: spec.get("default") for name, spec in self.params.items()}


def template_filename(name: str) -> str:
    """The pseudo file name a template's code is compiled under (tracebacks and pre-flight
    line numbers refer to it)."""
    return f"<template {name}>"


def _syntax_error_message(e: SyntaxError, what: str) -> str:
    line = (e.text or "").rstrip("\n")
    pointer = f"\n    {line}" if line.strip() else ""
    return f"{what} has a syntax error at line {e.lineno}: {e.msg}.{pointer}"


def parse_template(code: str, name: str = "template") -> tuple[str, dict[str, dict[str, Any]]]:
    """``(DESCRIPTION, PARAMS)`` read from ``code`` without executing it.

    The text may come from anyone (an editor, an upload, a saved file): text the parser cannot
    build -- nesting deep enough for a MemoryError or RecursionError, or more than
    ``MAX_TEMPLATE_CHARS`` -- is a ValueError like any other bad template, never a crash.

    Raises:
        ValueError: a syntax error (with its line), no top-level ``model_fn``, a ``PARAMS`` or
            ``DESCRIPTION`` that is not a literal, an invalid params schema, or code too large
            or too deeply nested to parse.
    """
    if len(code) > MAX_TEMPLATE_CHARS:
        raise ValueError(f"Template {name!r} is {len(code):,} characters long; the limit is "
                         f"{MAX_TEMPLATE_CHARS:,}. Move data out of the code (read it in input_fn).")
    try:
        return _parse_template(code, name)
    except (MemoryError, RecursionError):
        raise ValueError(f"Template {name!r} is nested too deeply for Python's parser to read "
                         "(a MemoryError or RecursionError while building its syntax tree). "
                         "Split the deep expression into smaller statements.") from None


def _parse_template(code: str, name: str) -> tuple[str, dict[str, dict[str, Any]]]:
    try:
        tree = ast.parse(code, filename=template_filename(name))
    except SyntaxError as e:
        raise ValueError(_syntax_error_message(e, f"Template {name!r}")) from None
    values: dict[str, Any] = {}
    has_model_fn = False
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == "model_fn":
            has_model_fn = True
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        for target in targets:
            if isinstance(target, ast.Name):
                if target.id == "model_fn":
                    has_model_fn = True
                if target.id in ("PARAMS", "DESCRIPTION"):
                    try:
                        values[target.id] = ast.literal_eval(value)
                    except ValueError:
                        raise ValueError(
                            f"Template {name!r}: {target.id} at line {node.lineno} must be a literal "
                            f"({'a dict of dicts' if target.id == 'PARAMS' else 'a string'}) so that it "
                            "can be read without running the code; move computed values into model_fn."
                        ) from None
    if not has_model_fn:
        raise ValueError(f"Template {name!r} defines no top-level model_fn. Add "
                         "`def model_fn(features, labels, mode, params): ...`.")
    description = values.get("DESCRIPTION", ast.get_docstring(tree) or "")
    if not isinstance(description, str):
        raise ValueError(f"Template {name!r}: DESCRIPTION must be a string, given: {description!r}.")
    schema = values.get("PARAMS", {})
    check_params_schema(schema, name)
    return description.strip(), schema


def check_params_schema(schema: Any, name: str = "template") -> None:
    """ValueError unless ``schema`` is a valid PARAMS dict (known types, valid defaults)."""
    if not isinstance(schema, dict):
        raise ValueError(f"Template {name!r}: PARAMS must be a dict of name -> spec, given: {schema!r}.")
    problems = []
    for pname, spec in schema.items():
        if not isinstance(pname, str) or not pname.isidentifier():
            problems.append(f"param name {pname!r} is not an identifier")
            continue
        if pname == "task":
            problems.append("param name 'task' is reserved (params['task'] is the dataset's task info)")
            continue
        if not isinstance(spec, dict):
            problems.append(f"{pname}: spec must be a dict, given {spec!r}")
            continue
        unknown = set(spec) - _SPEC_KEYS
        if unknown:
            problems.append(f"{pname}: unknown spec keys {sorted(unknown)} (allowed: {sorted(_SPEC_KEYS)})")
        ptype = spec.get("type")
        if ptype not in PARAM_TYPES:
            problems.append(f"{pname}: type must be one of {PARAM_TYPES}, given {ptype!r}")
            continue
        if ptype == "choice" and not (isinstance(spec.get("choices"), (list, tuple)) and spec["choices"]):
            problems.append(f"{pname}: a 'choice' param needs a non-empty 'choices' list")
            continue
        if "default" not in spec:
            problems.append(f"{pname}: missing 'default'")
            continue
        problem = _check_value(pname, spec, spec["default"])[1]
        if problem:
            problems.append(f"default of {problem}")
    if problems:
        raise ValueError(f"Template {name!r}: invalid PARAMS schema:\n- " + "\n- ".join(problems))


def _check_value(name: str, spec: Mapping[str, Any], value: Any) -> tuple[Any, str | None]:
    """(coerced value, None) or (None, problem text)."""
    ptype = spec["type"]
    got = f"{name}={value!r}"
    if ptype == "bool":
        if isinstance(value, bool):
            return value, None
        if isinstance(value, str) and value.strip().lower() in ("true", "false", "1", "0", "yes", "no"):
            return value.strip().lower() in ("true", "1", "yes"), None
        if isinstance(value, int) and value in (0, 1):
            return bool(value), None
        return None, f"{got}: expected a bool (true/false)"
    if ptype == "int":
        coerced = None
        if isinstance(value, int) and not isinstance(value, bool):
            coerced = value
        elif isinstance(value, float) and value.is_integer():
            coerced = int(value)
        elif isinstance(value, str):
            try:
                coerced = int(value.strip())
            except ValueError:
                pass
        if coerced is None:
            return None, f"{got}: expected an int"
        value = coerced
    elif ptype == "float":
        coerced = None
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            coerced = float(value)
        elif isinstance(value, str):
            try:
                coerced = float(value.strip())
            except ValueError:
                pass
        if coerced is None or not math.isfinite(coerced):
            return None, f"{got}: expected a finite float"
        value = coerced
    elif ptype == "str":
        if not isinstance(value, str):
            return None, f"{got}: expected a str"
        return value, None
    elif ptype == "choice":
        choices = list(spec["choices"])
        if value in choices:
            return value, None
        matches = [c for c in choices if str(c) == str(value)]
        if matches:
            return matches[0], None
        return None, f"{got}: not one of the choices {choices}"
    lo, hi = spec.get("min"), spec.get("max")
    if lo is not None and value < lo:
        return None, f"{got}: below the minimum {lo}"
    if hi is not None and value > hi:
        return None, f"{got}: above the maximum {hi}"
    return value, None


def validate_params(schema: Mapping[str, Mapping[str, Any]], params: Mapping[str, Any] | None) -> dict[str, Any]:
    """Checks ``params`` against a PARAMS schema: coerces types, fills defaults.

    Strings from a form are coerced (``'3'`` -> 3 for an int, ``'true'`` -> True for a bool).
    Every problem is collected into one ValueError: unknown names, wrong types, values below
    ``min`` / above ``max``, values not in ``choices``.

    Returns:
        A new dict with one entry per schema param (``task`` is never accepted here; the
        workbench adds it).

    Example:
        >>> validate_params({"lr": {"type": "float", "default": 0.1, "min": 0}}, {"lr": "0.5"})
        {'lr': 0.5}
    """
    params = dict(params or {})
    problems = []
    for name in params:
        if name not in schema:
            reserved = " (reserved: the workbench fills params['task'])" if name == "task" else ""
            problems.append(f"unknown param {name!r}{reserved}; known params: {sorted(schema)}")
    out: dict[str, Any] = {}
    for name, spec in schema.items():
        value = params.get(name, spec.get("default"))
        coerced, problem = _check_value(name, spec, value)
        if problem:
            problems.append(problem)
        else:
            out[name] = coerced
    if problems:
        raise ValueError("Invalid params:\n- " + "\n- ".join(problems))
    return out


def _info_from_file(path: Path, kind: str) -> TemplateInfo:
    code = path.read_text(encoding="utf-8")
    try:
        description, schema = parse_template(code, path.stem)
        error = None
    except ValueError as e:
        description, schema, error = "", {}, str(e)
    return TemplateInfo(path.stem, description, code, schema, kind, path, error)


#: The canned estimators offered as no-code templates: name -> TemplateInfo with ``kind='canned'``.
CANNED: dict[str, TemplateInfo] = {p.stem: _info_from_file(p, "canned") for p in sorted(CANNED_DIR.glob("*.py"))}


def _user_dir(workspace: str | os.PathLike | None) -> Path | None:
    return None if workspace is None else Path(workspace) / "templates"


def list_templates(workspace: str | os.PathLike | None = None) -> list[TemplateInfo]:
    """Bundled templates, then the canned estimators (``CANNED``), then the workspace's own, each
    sorted by name. A user template that cannot be read is listed with ``error`` set."""
    infos = [_info_from_file(p, "bundled") for p in sorted(BUNDLED_DIR.glob("*.py"))
             if not p.name.startswith("_")]
    infos += [CANNED[k] for k in sorted(CANNED)]
    user = _user_dir(workspace)
    if user is not None and user.is_dir():
        infos += [_info_from_file(p, "user") for p in sorted(user.glob("*.py"))]
    return infos


def _check_name(name: Any) -> str:
    if not isinstance(name, str) or "/" in name or "\\" in name or ".." in name:
        raise ValueError(f"Invalid template name: {name!r}. Use letters, digits, '_' and '-' "
                         "only (no path separators or '..').")
    cleaned = re.sub(r"\s+", "_", name.strip())
    if cleaned.endswith(".py"):
        cleaned = cleaned[:-3]
    if not _NAME_RE.fullmatch(cleaned):
        raise ValueError(f"Invalid template name: {name!r}. Use 1-64 letters, digits, '_' and '-'.")
    return cleaned


def get_template(name: str, workspace: str | os.PathLike | None = None) -> TemplateInfo:
    """The template ``name``: a user template in the workspace wins over a bundled one of the
    same name (saving under a bundled name is refused, so this only matters for old files)."""
    key = _check_name(name)
    user = _user_dir(workspace)
    if user is not None and (user / f"{key}.py").is_file():
        return _info_from_file(user / f"{key}.py", "user")
    if (BUNDLED_DIR / f"{key}.py").is_file() and not key.startswith("_"):
        return _info_from_file(BUNDLED_DIR / f"{key}.py", "bundled")
    if key in CANNED:
        return CANNED[key]
    known = [t.name for t in list_templates(workspace)]
    raise ValueError(f"Unknown template name: {name!r}. Choose one of {known}.")


def save_template(workspace: str | os.PathLike, name: str, code: str, overwrite: bool = False) -> TemplateInfo:
    """Saves ``code`` as ``<workspace>/templates/<name>.py`` after checking it (never running it).

    The name keeps ``[A-Za-z0-9_-]`` (spaces become ``_``); path separators and ``..`` are refused.
    The code must parse (a syntax error is reported with its line), define a top-level
    ``model_fn`` and literal ``PARAMS``/``DESCRIPTION``. Bundled names are read-only; an existing
    user template is replaced only with ``overwrite=True``. The write is atomic.
    """
    key = _check_name(name)
    if not isinstance(code, str):
        raise TypeError(f"save_template: code must be a str, given: {type(code).__name__}.")
    if (BUNDLED_DIR / f"{key}.py").is_file() or key in CANNED:
        raise ValueError(f"Template name {key!r} is a bundled template, which is read-only. "
                         "Save your copy under another name, e.g. "
                         f"{key + '_copy'!r}.")
    description, schema = parse_template(code, key)
    folder = Path(workspace) / "templates"
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{key}.py"
    if target.exists() and not overwrite:
        raise ValueError(f"A template named {key!r} already exists in {str(folder)!r}. Pass "
                         "overwrite=True to replace it, or choose another name.")
    # A unique temporary name: sessions of one UI share a process (issue 24 item 7).
    fd, tmp = tempfile.mkstemp(prefix=f".{key}.py.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(code)
        os.replace(tmp, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    return TemplateInfo(key, description, code, schema, "user", target, None)


def diff_templates(a_code: str, b_code: str, a_name: str = "a", b_name: str = "b", context: int = 3) -> str:
    """A unified diff of two template sources (empty string when they are equal)."""
    return "".join(difflib.unified_diff(
        a_code.splitlines(keepends=True), b_code.splitlines(keepends=True),
        fromfile=a_name, tofile=b_name, n=context,
    ))


def load_model_fn(code: str, filename: str) -> Callable[..., Any]:
    """Executes template ``code`` in a fresh module and returns its ``model_fn``.

    This RUNS user code: call it only in runner and pre-flight processes, never in the UI process.
    The source is registered in ``linecache`` under ``filename`` (see ``template_filename``), so
    tracebacks through the template show its lines.

    Raises:
        SyntaxError / ImportError / any exception the module's top level raises (the pre-flight
        check turns them into a report); TypeError when ``model_fn`` is missing or not callable.
    """
    linecache.cache[filename] = (len(code), None, code.splitlines(keepends=True), filename)
    compiled = compile(code, filename, "exec", dont_inherit=True)
    module_name = "workbench_template_" + re.sub(r"\W", "_", filename)
    module = types.ModuleType(module_name)
    module.__file__ = filename
    sys.modules[module_name] = module  # dataclasses and pickling look classes up here
    exec(compiled, module.__dict__)
    model_fn = module.__dict__.get("model_fn")
    if not callable(model_fn):
        raise TypeError(f"The template {filename} defines no callable model_fn (found: {model_fn!r}). "
                        "Define `def model_fn(features, labels, mode, params): ...`.")
    return model_fn
