"""Safe defaults of the UI: loopback by default, a loud warning when exposed, XSRF on, the
optional password, and a UI process that never unpickles anything."""

from __future__ import annotations

import pickle
import sys
from pathlib import Path

import pytest
import tomllib

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest

from estimator_workbench.cli import commands as cli
from estimator_workbench.cli import serve
from estimator_workbench.store.registry import RunRegistry
from estimator_workbench.ui import login_throttle, session, tables

REPO = Path(__file__).resolve().parents[2]
APP = str(REPO / "estimator_workbench" / "ui" / "app.py")
PAGES = ("data", "model", "train", "runs", "run", "compare", "predict")


def option(cmd: list[str], name: str) -> str:
    return cmd[cmd.index(name) + 1]


class TestBinding:
    def test_default_is_loopback_with_xsrf_and_no_warning(self, capsys, workspace):
        assert cli.main(["ui", "--dry-run"]) == 0
        out, err = capsys.readouterr()
        cmd = serve.ui_command()
        assert option(cmd, "--server.address") == "127.0.0.1"
        assert option(cmd, "--server.enableXsrfProtection") == "true"
        assert "--server.address 127.0.0.1" in out and "warning" not in err

    @pytest.mark.parametrize("address", ["0.0.0.0", "192.168.1.5", "::"])
    def test_any_other_address_needs_the_flag_and_warns(self, capsys, workspace, address,
                                                        monkeypatch):
        monkeypatch.delenv("WORKBENCH_PASSWORD", raising=False)
        assert cli.main(["ui", "--address", address, "--dry-run"]) == 2  # no sign-in (issue 26.4)
        assert f"refusing to listen on {address!r} without sign-in" in capsys.readouterr().err
        assert cli.main(["ui", "--address", address, "--dry-run", "--insecure-no-auth"]) == 0
        out, err = capsys.readouterr()
        assert f"--server.address {address}" in out
        assert "anyone who can reach this port can run arbitrary Python code" in err
        assert "WORKBENCH_PASSWORD is NOT set" in err

    def test_config_file_keeps_loopback_and_xsrf(self):
        config = tomllib.loads((REPO / ".streamlit" / "config.toml").read_text())
        server = config["server"]
        assert server["address"] == "127.0.0.1"
        assert server.get("enableXsrfProtection", True) is True
        assert server.get("enableCORS", True) is True

    def test_the_app_warns_when_served_beyond_loopback(self, workspace, caplog):
        assert session.warn_if_exposed("127.0.0.1") is None  # "" binds every interface: exposed (issue 14.2)
        with caplog.at_level("WARNING", logger="estimator_workbench.ui"):
            text = session.warn_if_exposed("0.0.0.0")
        assert "anyone who can reach it can run arbitrary Python code" in text
        assert text in caplog.text


class TestPassword:
    def render(self) -> AppTest:
        at = AppTest.from_file(APP, default_timeout=60)
        at.run()
        return at

    def test_off_by_default(self, workspace, monkeypatch):
        monkeypatch.delenv("WORKBENCH_PASSWORD", raising=False)
        at = self.render()
        assert not at.exception and at.title[0].value == "Data"
        assert not [t for t in at.text_input if t.key == "_password"]

    def test_gate_blocks_every_page_until_the_right_password(self, workspace, monkeypatch):
        monkeypatch.setenv("WORKBENCH_PASSWORD", "s3cret-ü")
        clock = [1000.0]
        monkeypatch.setattr(login_throttle, "PASSWORD_THROTTLE", login_throttle.LoginThrottle(clock=lambda: clock[0]))
        at = self.render()
        assert not at.exception
        assert [t.value for t in at.title] == ["Estimator Workbench"]  # no page ran
        assert at.text_input(key="_password").proto.type == at.text_input(key="_password").proto.PASSWORD
        at.text_input(key="_password").input("wrong")
        at.button[0].click().run()
        assert [e.value for e in at.error] == ["Wrong password."]
        assert [t.value for t in at.title] == ["Estimator Workbench"]
        clock[0] += 1.0  # the server-wide throttle's one second between attempts
        at.text_input(key="_password").input("s3cret-ü")
        at.button[0].click().run()
        assert not at.exception
        assert at.title[0].value == "Data"  # the pages now render
        at.switch_page("../../pages/runs.py").run()
        assert at.title[0].value == "Runs"

    def test_guesses_are_limited_per_server_not_per_session(self, workspace, monkeypatch):
        """Issue 24.10: a second session guessing at once is refused unchecked, even with the
        right password; the wait is the same for every session and doubles after 5 failures."""
        monkeypatch.setenv("WORKBENCH_PASSWORD", "pw")
        clock = [1000.0]
        monkeypatch.setattr(login_throttle, "PASSWORD_THROTTLE", login_throttle.LoginThrottle(clock=lambda: clock[0]))
        first, second = self.render(), self.render()  # two browser sessions
        first.text_input(key="_password").input("guess")
        first.button[0].click().run()
        assert [e.value for e in first.error] == ["Wrong password."]
        second.text_input(key="_password").input("pw")
        second.button[0].click().run()
        assert [e.value for e in second.error] == [
            "Too many password attempts on this server: try again in 1 s."]
        assert [t.value for t in second.title] == ["Estimator Workbench"]  # not let in
        clock[0] += 1.0
        second.button[0].click().run()
        assert not second.error and second.title[0].value == "Data"

    def test_compare_is_constant_time(self):
        import inspect

        source = inspect.getsource(session.require_password)
        assert "hmac.compare_digest" in source and "==" not in source.split("compare_digest")[1][:80]


def _finished_run_with_artifacts(home: Path) -> str:
    """A succeeded training run with real checkpoint files, metrics and a predictions file."""
    import torch

    from estimator_engine import checkpoints
    from estimator_workbench.cli import commands as cli
    from estimator_workbench.store.metrics_hook import append_rows

    reg = RunRegistry(home)
    rec = reg.create_run(name="done", action="train", dataset=cli._dataset_dict("iris", None),
                         template={"name": "mlp_classifier", "code": ""}, params={}, run_config={},
                         schedule={"max_steps": 10})
    folder = reg.run_dir(rec.run_id)
    for step in (5, 10):
        checkpoints.save_checkpoint(folder / "model", {"variables": {"w": torch.ones(2)}}, step)
    append_rows(folder / "metrics.jsonl", [{"step": s, "wall_time": float(s), "split": "train",
                                            "name": "loss", "value": 1.0 / s} for s in range(1, 11)])
    (folder / "predictions.csv").write_text("a,class_ids\n1,0\n")
    reg.set_status(rec.run_id, "running")
    reg.update_summary(rec.run_id, {"loss": 0.1}, step=10)
    reg.set_status(rec.run_id, "succeeded")
    return rec.run_id


def test_the_ui_process_never_unpickles(workspace, monkeypatch):
    run_id = _finished_run_with_artifacts(workspace)
    import torch

    calls = []
    real_loads = pickle.loads

    def refuse(name):
        def fail(*args, **kwargs):
            caller = sys._getframe(1).f_code.co_filename
            if name == "pickle.loads" and "streamlit/runtime/caching" in caller:
                # st.cache_data round-trips the UI's own DataFrames (parsed from CSV in this
                # process) through an in-memory pickle; nothing a runner wrote is unpickled.
                return real_loads(*args, **kwargs)
            calls.append(name)
            raise AssertionError(f"the UI process called {name}")
        return fail

    monkeypatch.setattr(torch, "load", refuse("torch.load"))
    monkeypatch.setattr(pickle, "load", refuse("pickle.load"))
    monkeypatch.setattr(pickle, "loads", refuse("pickle.loads"))
    monkeypatch.setattr(pickle, "Unpickler", refuse("pickle.Unpickler"))
    import pandas as pd

    monkeypatch.setattr(pd, "read_pickle", refuse("pandas.read_pickle"))
    for page in PAGES:
        at = AppTest.from_file(APP, default_timeout=60)
        at.query_params["run"] = run_id
        at.run()
        at.switch_page(f"../../pages/{page}.py").run()
        assert not at.exception, (page, at.exception)
    assert calls == []
    # The checkpoints were on screen (listed from the folder, not loaded).
    assert "model.ckpt-10" in tables.list_checkpoints(RunRegistry(workspace).run_dir(run_id))["file"].tolist()


def test_ui_sources_never_unpickle_nor_render_html():
    """Static (AST, so docstrings do not count): no pickle/joblib/dill import, no ``*.load`` of
    torch, no ``read_pickle``, no ``unsafe_allow_html=True``, no ``st.html``/components in the
    UI layer; ``st.cache_data`` never persists to disk (a file a runner could replace)."""
    import ast

    sources = [*sorted((REPO / "estimator_workbench" / "ui").glob("*.py")), *sorted((REPO / "pages").glob("*.py"))]
    for path in sources:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            where = f"{path.name}:{getattr(node, 'lineno', '?')}"
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
                assert not {"pickle", "joblib", "dill", "cloudpickle"} & {n.split(".")[0] for n in names}, where
                assert "streamlit.components.v1" not in names, where
            if isinstance(node, ast.Attribute):
                chain = ast.unparse(node)
                assert chain not in ("torch.load", "st.html", "pd.read_pickle", "components.html"), where
            if isinstance(node, ast.keyword):
                if node.arg == "unsafe_allow_html":
                    assert isinstance(node.value, ast.Constant) and node.value.value is False, where
                if node.arg == "persist":
                    assert isinstance(node.value, ast.Constant) and node.value.value in (None, False), where
