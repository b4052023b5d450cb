"""Issue 24.6: sessions leaked into each other. One browser's unsaved editor text came back in
every new session through ``ui_state.json`` (and ran in its Train), and a template text the parser
cannot build (MemoryError, RecursionError) broke the Data, Model and Train pages of every new
session. Edits are kept per browser (the access gate's ``workbench-browser-<port>`` cookie), and
such text is a clear error like any other bad template."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("streamlit")
from app_pages import open_page

from estimator_workbench import templates
from estimator_workbench.ui import session, ui_state

SAVED = templates.get_template("mlp_classifier").code
EVIL = SAVED.replace("def model_fn(features, labels, mode, params):\n",
                     "def model_fn(features, labels, mode, params):\n    import os  # BROWSER A\n", 1)
# ``not not not ... 1``: the parser runs out of stack (MemoryError) before any syntax error.
UNPARSABLE = "x = " + "not " * 100_000 + "1\ndef model_fn(features):\n    pass\n"


def as_browser(monkeypatch, browser: str) -> None:
    monkeypatch.setattr(ui_state, "browser_id", lambda: browser)


def test_one_browsers_unsaved_edit_never_reaches_another(home, monkeypatch):
    as_browser(monkeypatch, "browser-a")
    a = open_page("model", _plain_editor=True)
    a.selectbox(key="model-name").set_value("mlp_classifier").run()
    a.text_area(key="editor-mlp_classifier").set_value(EVIL).run()
    assert a.session_state["template"]["code"] == EVIL

    as_browser(monkeypatch, "browser-b")
    b = open_page("train", _plain_editor=True)  # a new session of another browser, same workspace
    assert b.session_state["template"]["name"] == "mlp_classifier"  # the shared context...
    assert b.session_state["template"]["code"] == SAVED  # ...but not A's unsaved text
    b.switch_page("../../pages/model.py").run()
    assert b.text_area(key="editor-mlp_classifier").value == SAVED

    as_browser(monkeypatch, "browser-a")
    again = open_page("model", _plain_editor=True)  # A reloads: its edit comes back
    assert again.text_area(key="editor-mlp_classifier").value == EVIL
    saved = json.loads((home / session.UI_STATE_FILE).read_text())
    assert list(saved["template_edits_by_browser"]) == ["browser-a"]
    assert "template_edits" not in saved


def test_the_old_shared_edits_key_is_ignored(home, monkeypatch):
    (home / session.UI_STATE_FILE).parent.mkdir(parents=True, exist_ok=True)
    (home / session.UI_STATE_FILE).write_text(json.dumps(
        {"template": "mlp_classifier", "template_edits": {"mlp_classifier": EVIL}}))
    at = open_page("train", _plain_editor=True)
    assert at.session_state["template"]["code"] == SAVED


@pytest.mark.parametrize("page", ["data", "model", "train"])
def test_an_unparsable_template_text_is_an_error_not_a_broken_page(home, monkeypatch, page):
    as_browser(monkeypatch, "")
    (home / session.UI_STATE_FILE).parent.mkdir(parents=True, exist_ok=True)
    (home / session.UI_STATE_FILE).write_text(json.dumps(
        {"template": "mlp_classifier",
         "template_edits_by_browser": {"": {"mlp_classifier": UNPARSABLE}}}))
    at = open_page(page, _plain_editor=True)  # open_page fails on any exception of the page
    assert "nested too deeply" in at.session_state["template"]["error"]


def test_parse_template_turns_parser_exhaustion_into_a_clear_error():
    for code in (UNPARSABLE, "PARAMS = " + "-" * 5000 + "1\n" + UNPARSABLE.split("\n", 1)[1],
                 "x = 1" + "+1" * 300_000 + "\ndef model_fn(features):\n    pass\n"):
        with pytest.raises(ValueError, match="nested too deeply for Python's parser"):
            templates.parse_template(code, "deep")
    with pytest.raises(ValueError, match=r"is 1,000,001 characters long; the limit is 1,000,000"):
        templates.parse_template("#" * 1_000_001, "big")
