"""Names never escape the workspace, SQL is parameterised, and nothing loads a pickle that can
run code. (Crafted checkpoints at the engine level: tests/estimator_engine/test_checkpoints.py.)"""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

import pytest

from estimator_workbench import templates
from estimator_workbench.cli import commands as cli
from estimator_workbench.data import datasets
from estimator_workbench.store import paths
from estimator_workbench.store.registry import RunRegistry

REPO = Path(__file__).resolve().parents[2]
ESCAPES = ["../evil", "../../etc/passwd", "/etc/passwd", "a/../../b", "..", ".", "",
           "x\\..\\..\\y", "ok\x00.csv", "runs/../../x"]


@pytest.mark.parametrize("name", ESCAPES)
def test_run_ids_cannot_escape(workspace, name):
    with pytest.raises((ValueError, TypeError)):
        paths.run_dir(workspace, name)
    with pytest.raises((ValueError, TypeError)):
        RunRegistry(workspace).run_dir(name)


@pytest.mark.parametrize("name", ESCAPES)
def test_cli_run_arguments_cannot_escape(workspace, name, capsys):
    for command in (["stop", name], ["resume", name], ["export", name], ["cancel", name]):
        assert cli.main(command) == 2
    assert "Traceback" not in capsys.readouterr().err


@pytest.mark.parametrize("name", [*ESCAPES, "my/template", "C:\\x"])
def test_template_names_cannot_escape(workspace, name):
    code = 'PARAMS = {}\nDESCRIPTION = "x"\n\ndef model_fn(features, labels, mode, params):\n    pass\n'
    with pytest.raises(ValueError, match="Invalid template name"):
        templates.save_template(workspace, name, code)
    with pytest.raises(ValueError, match="Invalid template name"):
        templates.get_template(name, workspace)
    assert not list(workspace.parent.glob("*.py")) and not Path("/etc/evil.py").exists()


@pytest.mark.parametrize("name", ["../../evil.csv", "/tmp/abs/evil.csv", "..\\..\\evil.csv",
                                  "a/b/../../../evil.csv", ".hidden.csv", "ok\x00x.csv",
                                  "😈 <script>.csv"])
def test_upload_names_stay_in_the_datasets_folder(workspace, name):
    data = b"a,b\n1,x\n2,y\n"
    try:
        stored = datasets.save_upload(workspace, name, data)
    except ValueError as exc:  # refused is fine too, as long as nothing was written outside
        assert "Unsupported upload" in str(exc)
    else:
        assert stored.parent == workspace / "datasets"
        assert re.fullmatch(r"[A-Za-z0-9_\-]+\.csv", stored.name), stored.name
    everything = [p for p in workspace.parent.rglob("*") if p.is_file()]
    outside = [p for p in everything if (workspace / "datasets") not in p.parents]
    assert not outside and not Path("/tmp/abs").exists(), outside


def test_registry_update_refuses_unknown_columns(workspace):
    reg = RunRegistry(workspace)
    rec = reg.create_run(name="x", action="train", dataset={}, template={}, params={}, run_config={})
    with pytest.raises(ValueError, match="column must be one of"):
        reg._update(rec.run_id, "status = 'succeeded', name", "x")
    assert reg.get(rec.run_id).status == "queued"


def test_sql_values_are_parameters_and_injection_is_inert(workspace):
    reg = RunRegistry(workspace)
    evil = "x'; DROP TABLE runs; --"
    rec = reg.create_run(name=evil, action="train", dataset={"n": evil}, template={"name": evil},
                         params={}, run_config={})
    reg.set_tags(rec.run_id, [evil])
    reg.set_note(rec.run_id, evil)
    assert reg.get(rec.run_id).name == evil
    assert reg.list_runs(tag=evil)[0].run_id == rec.run_id
    assert not reg.exists(evil) and len(reg.list_runs()) == 1


# Interpolations reviewed as safe: they never hold user input (constants, '?' lists, a literal
# sort direction, a column name from the whitelist checked in RunRegistry._update).
_SAFE_SQL_INTERPOLATIONS = {
    "BUSY_TIMEOUT_MS",
    "', '.join(('?' for _ in wanted))",
    "'DESC' if newest_first else 'ASC'",
    "column",
}
_SQL = re.compile(r"\b(SELECT|INSERT|UPDATE|DELETE|PRAGMA|CREATE|DROP|WHERE|ORDER BY|LIMIT)\b")


def test_sql_is_never_built_from_values():
    """Every f-string that holds SQL in estimator_workbench/ interpolates only reviewed expressions; every
    ``execute`` gets its SQL as a literal, a reviewed f-string or a variable built from them."""
    found = []
    for path in sorted((REPO / "estimator_workbench").rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.JoinedStr):
                literal = "".join(v.value for v in node.values if isinstance(v, ast.Constant))
                if not _SQL.search(literal):
                    continue
                for value in node.values:
                    if isinstance(value, ast.FormattedValue):
                        expr = ast.unparse(value.value)
                        found.append(expr)
                        assert expr in _SAFE_SQL_INTERPOLATIONS, (
                            f"{path.name}:{node.lineno}: SQL f-string interpolates {expr!r}; pass "
                            "values as ? parameters")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr in ("execute", "executemany", "executescript") and node.args:
                first = node.args[0]
                assert not isinstance(first, ast.BinOp) or not isinstance(first.op, ast.Mod), (
                    f"{path.name}:{node.lineno}: %-formatted SQL")
                if isinstance(first, ast.Call) and ast.unparse(first.func).endswith(".format"):
                    pytest.fail(f"{path.name}:{node.lineno}: str.format SQL")
    assert "column" in found  # the scan does see the registry's f-strings


def _calls(path: Path, dotted: str):
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and ast.unparse(node.func) == dotted:
            yield node


def test_every_torch_load_is_weights_only_and_nothing_unpickles():
    sources = sorted((REPO / "estimator_workbench").rglob("*.py")) + sorted((REPO / "estimator_engine").rglob("*.py"))
    loads = 0
    for path in sources:
        for call in _calls(path, "torch.load"):
            loads += 1
            flags = {k.arg: k.value for k in call.keywords}
            assert "weights_only" in flags and isinstance(flags["weights_only"], ast.Constant) \
                and flags["weights_only"].value is True, f"{path}:{call.lineno}"
        for dotted in ("pickle.load", "pickle.loads", "pd.read_pickle", "joblib.load",
                       "np.load", "numpy.load"):
            for call in _calls(path, dotted):
                flags = {k.arg: k.value for k in call.keywords}
                allowed = dotted in ("np.load", "numpy.load") and not (
                    "allow_pickle" in flags and getattr(flags["allow_pickle"], "value", True))
                assert allowed, f"{path}:{call.lineno} calls {dotted}"
    assert loads >= 1


@pytest.mark.slow
def test_crafted_checkpoint_in_a_run_is_refused_without_running_it(workspace, tmp_path):
    """A checkpoint replaced by a pickle whose ``__reduce__`` would run code: the evaluate run
    fails with a clear error and the payload never runs."""
    import torch

    from estimator_workbench.execution import runner

    marker = tmp_path / "pwned"

    class Payload:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    reg = RunRegistry(workspace)
    info = templates.get_template("mlp_classifier")
    parent = reg.create_run(name="victim", action="train", dataset=cli._dataset_dict("iris", None),
                            template={"name": info.name, "code": info.code},
                            params={"hidden_units": "4"}, run_config={"tf_random_seed": 0},
                            schedule={"max_steps": 3})
    assert runner.run(reg.run_dir(parent.run_id), install_signal_handlers=False) == 0
    ckpt = reg.run_dir(parent.run_id) / "model" / "model.ckpt-3"
    torch.save({"format": "estimator_engine.checkpoint", "x": Payload()}, ckpt)
    ev = reg.create_run(name="ev", action="evaluate", dataset=parent.dataset,
                        template=parent.template, params=parent.params,
                        run_config=parent.run_config, parent_run_id=parent.run_id,
                        parent_relation="evaluate_from")
    assert runner.run(reg.run_dir(ev.run_id), install_signal_handlers=False) == 1
    done = reg.get(ev.run_id)
    assert done.status == "failed" and "model.ckpt-3 is not a valid estimator_engine checkpoint" in done.error
    assert "Unsupported global" in done.error or "weights_only" in done.error, done.error
    assert not marker.exists()
