"""The package metadata tells the truth (issue 17, items 2, 3 and 5).

* The base dependencies are what ``import estimator_engine`` needs: no UI package.
* No arbitrary upper bounds; every dependency has a lower bound, and ``constraints/minimum.txt``
  (installed by .ci/run's minimum lane) pins exactly those lower bounds, so the declared minimums
  are the tested ones.
* The reproducible CPU install is ``constraints/cpu.txt`` (torch's CPU build pinned there, never in
  the metadata), and README's two set-up commands and ``.ci/run`` use it.
* One version number: pyproject.toml's, read back through the installed metadata.
"""

from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

REPO = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
PROJECT = PYPROJECT["project"]

# Packages only the workbench (UI, CLI, figures) needs; none may be a base dependency.
UI_PACKAGES = {"streamlit", "plotly", "pandas", "streamlit-code-editor", "pydantic", "psutil", "pyarrow",
               "ray", "optuna", "mlflow", "mlflow-skinny"}
# Upper bounds that are deliberate, with the reason; anything else is an arbitrary cap.
ALLOWED_UPPER_BOUNDS = {
    "streamlit-code-editor": "0.x component: ui.edit_code relies on its on_change argument",
}
SELF = "estimator-workbench"

_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?\s*(.*)$")


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def parse(requirement: str) -> tuple[str, list[tuple[str, str]]]:
    """``'torch>=2.13; extra == "x"'`` -> ``('torch', [('>=', '2.13')])``."""
    match = _NAME.match(requirement.split(";")[0])
    assert match, f"cannot parse requirement {requirement!r}"
    specifiers = [(op, version.strip()) for op, version in
                  re.findall(r"(===|==|~=|!=|<=|>=|<|>)\s*([^,\s]+)", match.group(3))]
    return canonical(match.group(1)), specifiers


def requirements(extra: str | None = None) -> list[str]:
    return PROJECT["dependencies"] if extra is None else PROJECT["optional-dependencies"][extra]


def pins(path: Path) -> dict[str, str]:
    """``name==version`` lines of a constraints file (comments and options skipped)."""
    result = {}
    for line in path.read_text().splitlines():
        line = line.split("#")[0].strip()
        if not line or line.startswith("-"):
            continue
        name, specifiers = parse(line)
        assert [op for op, _ in specifiers] == ["=="], f"{path.name}: {line!r} is not an exact pin"
        result[name] = specifiers[0][1]
    return result


def test_base_dependencies_are_the_engine_only():
    names = {parse(r)[0] for r in requirements()}
    assert names == {"torch", "numpy", "tensorboardx", "tqdm"}  # tqdm: the progress bar (issue 25)
    assert not names & UI_PACKAGES


def test_ui_extra_holds_the_workbench_packages():
    names = {parse(r)[0] for r in requirements("ui")}
    assert {"streamlit", "plotly", "pandas", "streamlit-code-editor", "pydantic", "psutil"} <= names


def test_test_extra_installs_the_ui_and_tensorboard():
    self_refs = [r for r in requirements("test") if parse(r)[0] == SELF]
    assert len(self_refs) == 1 and {"ui", "tensorboard"} <= set(
        re.search(r"\[(.*)\]", self_refs[0]).group(1).split(","))
    assert {"pytest", "mypy", "ruff", "playwright"} <= {parse(r)[0] for r in requirements("test")}


@pytest.mark.parametrize("extra", [None, *PYPROJECT["project"]["optional-dependencies"]])
def test_every_dependency_has_a_lower_bound_and_no_arbitrary_cap(extra):
    for requirement in requirements(extra):
        name, specifiers = parse(requirement)
        if name == SELF:
            continue
        ops = [op for op, _ in specifiers]
        assert ">=" in ops, f"{requirement!r} ({extra or 'base'}) has no lower bound (>=)"
        assert not {"==", "===", "~="} & set(ops), f"{requirement!r} pins a version in package metadata"
        if {"<", "<="} & set(ops):
            assert name in ALLOWED_UPPER_BOUNDS, (
                f"{requirement!r} caps {name}: an upper bound in library metadata makes pip downgrade "
                f"a user's newer release; pin it in constraints/cpu.txt instead")


def test_torch_is_not_capped_in_metadata():
    (torch_requirement,) = [r for r in requirements() if parse(r)[0] == "torch"]
    assert [op for op, _ in parse(torch_requirement)[1]] == [">="]


def test_minimum_constraints_pin_exactly_the_declared_lower_bounds():
    minimum = pins(REPO / "constraints" / "minimum.txt")
    declared = {}
    for extra in (None, "ui", "tensorboard", "serve", "onnx", "mlflow"):
        for requirement in requirements(extra):
            name, specifiers = parse(requirement)
            if name != SELF:
                lower = dict(specifiers)[">="]
                # The same package in two tables (numpy) must not declare two minimums.
                assert declared.setdefault(name, lower) == lower, f"{name}: two lower bounds"
    for name, lower in declared.items():
        assert name in minimum, f"constraints/minimum.txt does not pin {name} (declared >= {lower})"
        assert minimum[name] == lower, (
            f"{name}: pyproject declares >= {lower} but the minimum lane installs {minimum[name]}")


def test_cpu_lock_pins_torch_cpu_build_and_every_declared_package():
    lock = pins(REPO / "constraints" / "cpu.txt")
    # torch==2.13.0 matches the local CPU build 2.13.0+cpu and the public index's 2.13.0 alike
    assert lock["torch"] == "2.13.0"
    for extra in (None, "ui", "tensorboard", "serve", "onnx", "test", "ray", "mlflow"):
        for requirement in requirements(extra):
            name = parse(requirement)[0]
            if name != SELF:
                assert name in lock, f"constraints/cpu.txt does not pin {name}"


def _fenced_commands(text: str) -> list[str]:
    return [line.strip() for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S)
            for line in block.splitlines() if line.strip()]


def test_readme_set_up_commands_use_the_cpu_lock_and_ci_runs_the_test_command():
    readme = (REPO / "README.md").read_text()
    set_up = readme.split("## Set up", 1)[1].split("\n## ", 1)[0]
    run_command, test_command = _fenced_commands(set_up)
    for command in (run_command, test_command):
        assert "-c constraints/cpu.txt" in command, command
    assert run_command.endswith(".venv/bin/estimator-workbench") and "[ui" in run_command
    assert test_command.endswith(".venv/bin/python -m pytest -q -p no:cacheprovider")
    ci_lines = [line.strip() for line in (REPO / ".ci" / "run").read_text().splitlines()]
    assert test_command in ci_lines, ".ci/run must run exactly README's test command"


def test_version_is_read_from_the_installed_metadata():
    import estimator_engine

    assert PROJECT["version"] == metadata.version(SELF) == estimator_engine.__version__


def test_engine_declares_inline_types():
    assert (REPO / "estimator_engine" / "py.typed").is_file()
