"""Argument introspection for ``model_fn`` / ``input_fn`` (TF's ``function_utils.fn_args``)."""

from __future__ import annotations

import functools
import inspect
import types
import weakref
from collections.abc import Callable
from typing import Any

__all__ = ["call_with_declared", "fn_args"]


# A plain function's parameter names are its code object's: cached per code object, so the
# closure an input_fn factory returns on every evaluate/predict call is inspected once.
_NAMES_BY_CODE: weakref.WeakKeyDictionary[types.CodeType, tuple[str, ...]] = weakref.WeakKeyDictionary()


def fn_args(fn: Callable[..., Any]) -> tuple[str, ...]:
    """Names of the parameters ``fn`` can take by keyword (partial-bound ones excluded, no ``self``)."""
    # __wrapped__ and __signature__ redirect inspect.signature away from the code object.
    if type(fn) is types.FunctionType and "__wrapped__" not in fn.__dict__ and "__signature__" not in fn.__dict__:
        names = _NAMES_BY_CODE.get(fn.__code__)
        if names is None:
            names = _NAMES_BY_CODE[fn.__code__] = _inspected_args(fn)
        return names
    return _inspected_args(fn)


def _inspected_args(fn: Callable[..., Any]) -> tuple[str, ...]:
    if isinstance(fn, functools.partial):
        bound = set(fn.keywords or ())
        return tuple(a for a in fn_args(fn.func)[len(fn.args):] if a not in bound)
    target = fn
    if not inspect.isfunction(fn) and not inspect.ismethod(fn) and hasattr(fn, "__call__"):  # noqa: B004
        target = fn.__call__
    params = inspect.signature(target).parameters.values()
    return tuple(p.name for p in params
                 if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name != "self")


def call_with_declared(fn: Callable[..., Any], available: dict[str, Any]) -> Any:
    """Calls ``fn`` with the entries of ``available`` whose names it declares."""
    declared = fn_args(fn)
    return fn(**{k: v for k, v in available.items() if k in declared})
