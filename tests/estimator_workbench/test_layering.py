"""Layering: imports point down only (ARCHITECTURE.md "Layers").

Every non-UI ``workbench`` module imports with ``streamlit`` blocked, and every
``estimator_engine`` module imports with ``workbench`` and ``streamlit`` blocked. Each check runs
in a fresh interpreter with a meta-path finder that refuses the blocked packages, so a module
imported earlier by another test cannot hide a violation.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# The UI modules that import streamlit; every other workbench module (ui.figures and ui.tables
# included: pure functions) must import without it.
STREAMLIT_UI = ("app", "session", "forms", "live", "panels", "runs_hub", "context")
STREAMLIT_UI += ("sweep_form", "sweep_view")  # the Train page's Sweep section, the Sweeps page
STREAMLIT_UI += ("asgi", "ui_state")  # the UI server: st.App behind the access gate; st.context cookies
STREAMLIT_UI += ("tf_import_form",)  # the Model page's "Import a TensorFlow model" section
STREAMLIT_UI += ("signin",)  # the sign-in form / st.login and who the session acts as (issue 26.4)
# the Runs page's concurrency settings, Compare's per-class view, 'Re-run with these settings'
STREAMLIT_UI += ("settings", "compare_eval", "rerun_form")

# Runs in the child: block packages, import every module of one package, report failures as JSON.
_CHECK = textwrap.dedent("""
    import importlib, json, pkgutil, sys, traceback

    package, blocked, skip = sys.argv[1], set(sys.argv[2].split(",")), set(sys.argv[3].split(","))

    class Blocker:
        def find_spec(self, fullname, path=None, target=None):
            if fullname.split(".")[0] in blocked:
                raise ImportError(f"layering: import of {fullname!r} is not allowed here")
            return None

    sys.meta_path.insert(0, Blocker())
    for name in blocked:
        sys.modules.pop(name, None)
    root = importlib.import_module(package)
    names = [package] + [m.name for m in pkgutil.walk_packages(root.__path__, package + ".")]
    failures, checked = {}, []
    for name in names:
        if name.rsplit(".", 1)[-1] == "__main__" or name in skip:
            continue
        try:
            importlib.import_module(name)
            checked.append(name)
        except BaseException as exc:
            failures[name] = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    leaked = sorted(m for m in sys.modules if m.split(".")[0] in blocked)
    print(json.dumps({"checked": checked, "failures": failures, "leaked": leaked}))
""")


def check_imports(package: str, blocked: list[str], skip: list[str] = (), cwd: Path = REPO,
                  extra_path: str | None = None) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (extra_path, str(REPO), env.get("PYTHONPATH")) if p)
    proc = subprocess.run(
        [sys.executable, "-c", _CHECK, package, ",".join(blocked), ",".join(skip) or "-"],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=240, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_workbench_modules_import_without_streamlit():
    report = check_imports("estimator_workbench", ["streamlit"], skip=[f"estimator_workbench.ui.{m}" for m in STREAMLIT_UI])
    assert report["failures"] == {}, report["failures"]
    assert report["leaked"] == []
    for module in ("estimator_workbench.store.registry", "estimator_workbench.execution.launcher", "estimator_workbench.execution.runner",
                   "estimator_workbench.store.metrics_store", "estimator_workbench.store.metrics_hook", "estimator_workbench.cli.commands",
                   "estimator_workbench.ui.figures", "estimator_workbench.ui.tables", "estimator_workbench.data.datasets"):
        assert module in report["checked"]


@pytest.mark.slow
def test_engine_modules_import_without_workbench_or_streamlit():
    report = check_imports("estimator_engine", ["estimator_workbench", "workbench", "streamlit"])
    assert report["failures"] == {}, report["failures"]
    assert report["leaked"] == []
    assert "estimator_engine.estimator" in report["checked"]


@pytest.mark.slow
def test_blocker_catches_a_violation(tmp_path):
    pkg = tmp_path / "badpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "fine.py").write_text("import json\n")
    (pkg / "bad.py").write_text("import streamlit as st\n")
    report = check_imports("badpkg", ["streamlit"], cwd=tmp_path, extra_path=str(tmp_path))
    assert report["checked"] == ["badpkg", "badpkg.fine"]
    assert "layering: import of 'streamlit' is not allowed here" in report["failures"]["badpkg.bad"]


def workbench_import_graph(root: Path = REPO / "estimator_workbench") -> dict[str, set[str]]:
    """Module -> the workbench modules it imports (at any depth: lazy imports count too), read
    from the syntax tree. A submodule importing its own package (``__init__``) is no edge, nor is
    an import for type hints only (under ``if TYPE_CHECKING:``), which never runs."""
    import ast

    modules = {}
    for path in root.rglob("*.py"):
        parts = path.relative_to(root.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        modules[name] = path
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        edges = set()
        tree = ast.parse(path.read_text("utf-8"))
        type_only = {id(n) for block in ast.walk(tree) if isinstance(block, ast.If)
                     and "TYPE_CHECKING" in ast.unparse(block.test) for n in ast.walk(block)}
        for node in ast.walk(tree):
            if id(node) in type_only:
                continue
            if isinstance(node, ast.ImportFrom) and node.module:
                targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            edges |= {t for t in targets if t in modules and t != name and not name.startswith(t + ".")}
        graph[name] = edges
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` (as a path that ends where it starts), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt):], nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_workbench_has_no_import_cycles():
    assert find_cycle(workbench_import_graph()) is None, " -> ".join(find_cycle(workbench_import_graph()))


def test_cycle_finder_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def private_uses(root: Path) -> list[str]:
    """Each use of another module's ``_private`` name under ``root``: ``from m import _name``, and
    ``alias._name`` where ``alias`` is a module of the package imported by this one (lazy imports
    too). A module's own privates, dunders and ``self._x`` are not counted."""
    import ast

    package = root.name
    found = []
    for path in sorted(root.rglob("*.py")):
        if "bundled" in path.parts:
            continue
        tree = ast.parse(path.read_text("utf-8"))
        where = path.relative_to(root.parent).as_posix()
        modules = {}  # local alias -> imported module of the package
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == package:
                for alias in node.names:
                    if alias.name.startswith("_") and not alias.name.startswith("__"):
                        found.append(f"{where}:{node.lineno} imports {node.module}.{alias.name}")
                    modules[alias.asname or alias.name] = f"{node.module}.{alias.name}"
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] == package and alias.asname:
                        modules[alias.asname] = alias.name
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules
                    and node.attr.startswith("_") and not node.attr.startswith("__")):
                found.append(f"{where}:{node.lineno} uses {modules[node.value.id]}.{node.attr}")
    return found


def test_no_module_uses_another_modules_private_names():
    # Files were once split to meet a line cap and reached into each other's privates; a name
    # another module needs is public (and in its module's __all__ where it has one).
    assert private_uses(REPO / "estimator_workbench") == []


def test_the_private_name_finder_sees_imports_and_module_attributes(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("def _helper():\n    pass\n")
    (package / "b.py").write_text("from pkg.a import _helper\nfrom pkg import a\n\ndef f():\n    a._helper()\n"
                                  "    self_like = a\n    return a.__name__\n")
    assert private_uses(package) == ["pkg/b.py:1 imports pkg.a._helper", "pkg/b.py:5 uses pkg.a._helper"]
