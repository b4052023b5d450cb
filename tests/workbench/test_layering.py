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
        leaf = name.rsplit(".", 1)[-1]
        if leaf == "__main__" or leaf in skip or any(leaf.startswith(p[:-1]) for p in skip if p.endswith("*")):
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
    report = check_imports("workbench", ["streamlit"], skip=["app", "ui*"])
    assert report["failures"] == {}, report["failures"]
    assert report["leaked"] == []
    for module in ("workbench.registry", "workbench.launcher", "workbench.runner",
                   "workbench.metrics_store", "workbench.metrics_hook", "workbench.cli"):
        assert module in report["checked"]


@pytest.mark.slow
def test_engine_modules_import_without_workbench_or_streamlit():
    report = check_imports("estimator_engine", ["workbench", "streamlit"])
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
