"""User-code error text (a run's error and traceback, pre-flight messages, upload errors) is shown
as text: escaped inside markdown boxes (``session.show_error`` -> ``session.md``) or in plain code blocks,
never as markdown emphasis, links or HTML."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("streamlit")
from app_pages import open_page
from streamlit.testing.v1 import AppTest

from estimator_workbench import templates
from estimator_workbench.data import datasets
from estimator_workbench.store import paths
from estimator_workbench.store.registry import RunRegistry
from estimator_workbench.ui import session

EVIL = "**bold** <script>x</script> [link](http://x)"
TRACEBACK = f'Traceback (most recent call last):\n  File "<template t>", line 3, in model_fn\nValueError: {EVIL}'


def markdown_values(at: AppTest) -> list[str]:
    """The markdown source of every element that renders markdown."""
    return [e.value for kind in ("markdown", "caption", "error", "warning", "success", "info", "toast")
            for e in getattr(at, kind)]


def assert_shown_as_text(at: AppTest, evil: str = EVIL, *, in_code: str | None = None) -> None:
    """``evil`` appears escaped in a markdown box, no markdown element has live markup from it,
    and ``in_code`` (when given) appears verbatim in a code block."""
    values = markdown_values(at)
    assert any(session.md(evil) in v for v in values), values
    for value in values:
        live = re.sub(r"\\.", "", value)  # what is left once the escaped characters are removed
        for markup in ("**bold**", "<script", "](http"):
            assert markup not in live, (markup, value)
    if in_code is not None:
        assert any(in_code in c.value for c in at.code), [c.value for c in at.code]


def failed_run(home: Path, **kwargs) -> str:
    reg = RunRegistry(home)
    rec = reg.create_run(name="broken", action="train", run_config={}, params={},
                         template={"name": "t", "code": "def model_fn(features): ..."}, **kwargs)
    reg.set_status(rec.run_id, "running", pid=None)
    reg.set_status(rec.run_id, "failed", error=f"ValueError: {EVIL}", traceback=TRACEBACK)
    return rec.run_id


def test_md_escapes_the_pinned_string():
    assert session.md(EVIL) == r"\*\*bold\*\* \<script\>x\</script\> \[link\]\(http\://x\)"


def test_run_page_shows_a_failed_runs_error_and_traceback_as_text(home):
    run_id = failed_run(home, dataset={"ref": {"kind": "bundled", "name": "iris"}})
    at = open_page("run", query={"run": run_id})
    assert_shown_as_text(at, f"ValueError: {EVIL}", in_code=TRACEBACK)


def test_model_page_shows_a_preflight_error_as_text(home):
    """A real pre-flight check (child process) of a model_fn that raises with markup in its message."""
    code = templates.get_template("mlp_classifier").code.replace(
        "def model_fn(features, labels, mode, params):\n",
        f"def model_fn(features, labels, mode, params):\n    raise ValueError({EVIL!r})\n", 1)
    at = open_page("model", _plain_editor=True)
    at.text_area(key="editor-mlp_classifier").set_value(code).run()
    [check] = [b for b in at.button if b.label == "Run pre-flight check"]
    check.click().run(timeout=120)
    assert not at.exception, at.exception
    assert not at.session_state["preflight"]["ok"]
    assert_shown_as_text(at, in_code=f"ValueError: {EVIL}")


def test_predict_page_shows_a_failed_predict_run_as_text(home):
    df = datasets.load_table(datasets.bundled_path("iris"))
    spec = datasets.DatasetSpec({"kind": "bundled", "name": "iris"}, datasets.infer_schema(df))
    dataset = spec.to_dict() | {"fingerprint": spec.fingerprint()}
    reg = RunRegistry(home)
    parent = reg.create_run(name="trained", action="train", dataset=dataset, run_config={}, params={},
                            template={"name": "t", "code": "def model_fn(features): ..."})
    model_dir = reg.run_dir(parent.run_id) / paths.MODEL_DIR
    model_dir.mkdir(parents=True)
    (model_dir / "model.ckpt-00000010").write_bytes(b"")  # listed only, never loaded by the UI
    child = failed_run(home, dataset=dataset)
    at = open_page("predict", **{"pred-child": child})
    assert_shown_as_text(at, f"ValueError: {EVIL}")
    assert any(e.value.startswith(f"Run {child} failed: ") for e in at.error)


def test_data_page_shows_an_upload_error_naming_a_column_as_text(home):
    at = open_page("data")
    at.radio(key="data-source").set_value("Upload a file").run()
    at.file_uploader(key="data-upload").set_value(("one.csv", f"{EVIL}\n1\n2\n".encode(), "text/csv")).run()
    assert not at.exception, at.exception
    assert any("only one column" in e.value for e in at.error)
    assert_shown_as_text(at)


def test_a_run_stopped_on_a_nan_loss_shows_its_message_as_a_warning(home):
    reg = RunRegistry(home)
    rec = reg.create_run(name="diverged", action="train", run_config={}, params={},
                         dataset={"ref": {"kind": "bundled", "name": "iris"}},
                         template={"name": "t", "code": "def model_fn(features): ..."},
                         schedule={"nan_policy": "stop"})
    reg.set_status(rec.run_id, "running", pid=None)
    message = f"NaN loss at global step 7 (last finite loss 0.5); stopped as the run asked {EVIL}"
    reg.set_status(rec.run_id, "stopped", error=message)
    at = open_page("run", query={"run": rec.run_id})
    assert [w.value for w in at.warning] == [session.md(message)]
    assert not at.error
    assert_shown_as_text(at, message)
