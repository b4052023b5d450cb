"""The Model page keeps the session's edited code and Train launches exactly that code.

The plain editor (``_plain_editor``: a text area, AppTest cannot type into the Ace component's
iframe) calls the same ``on_change`` as the Ace editor's Apply / blur events; the Ace editor's
events are faked at its public ``code_editor()`` function.
"""

from __future__ import annotations

import pytest

pytest.importorskip("streamlit")
from app_pages import open_page
from streamlit.testing.v1 import AppTest

from estimator_workbench import templates
from estimator_workbench.store.registry import RunRegistry
from estimator_workbench.ui import forms

SAVED = templates.get_template("mlp_classifier").code
EDITED = SAVED.replace("def model_fn(features, labels, mode, params):\n",
                       "def model_fn(features, labels, mode, params):\n    # MY EDIT\n", 1)


def model_page() -> AppTest:
    return open_page("model", _plain_editor=True)


def go(at: AppTest, page: str) -> AppTest:
    at.switch_page(f"../../pages/{page}.py").run()
    assert not at.exception, at.exception
    return at


def train(at: AppTest) -> None:
    go(at, "train")
    at.number_input(key="rc-steps").set_value(3)
    at.selectbox(key="rc-action").set_value("train")
    at.button[0].click()  # the form's submit button
    at.run()
    assert not at.exception, at.exception


def test_revisiting_the_model_page_keeps_the_edited_code_and_the_next_run_uses_it(home):
    at = model_page()
    assert "MY EDIT" in EDITED
    at.text_area(key="editor-mlp_classifier").set_value(EDITED).run()
    assert at.session_state["template"]["code"] == EDITED
    train(at)
    go(at, "model")  # the editor is rebuilt: it must show the edit, not the template file
    assert at.text_area(key="editor-mlp_classifier").value == EDITED
    assert at.session_state["template"]["code"] == EDITED
    train(at)
    runs = RunRegistry(home).list_runs()
    assert len(runs) == 2
    assert all(r.template_code == EDITED for r in runs)


def test_revert_restores_the_saved_template(home):
    at = model_page()
    assert not [b for b in at.button if b.label == "Revert to the saved template"]  # nothing to revert
    at.text_area(key="editor-mlp_classifier").set_value(EDITED).run()
    [revert] = [b for b in at.button if b.label == "Revert to the saved template"]
    revert.click().run()
    assert not at.exception, at.exception
    assert at.session_state["template"]["code"] == SAVED
    [editor] = at.text_area
    assert editor.value == SAVED
    assert not [b for b in at.button if b.label == "Revert to the saved template"]
    go(at, "train")
    go(at, "model")
    assert at.text_area[0].value == SAVED


def test_edits_of_each_template_are_kept_while_another_is_chosen(home):
    at = model_page()
    at.text_area(key="editor-mlp_classifier").set_value(EDITED).run()
    at.selectbox(key="model-name").set_value("mlp_regressor").run()
    assert at.session_state["template"]["name"] == "mlp_regressor"
    at.selectbox(key="model-name").set_value("mlp_classifier").run()
    assert at.text_area(key="editor-mlp_classifier").value == EDITED
    assert at.session_state["template"]["code"] == EDITED


def test_the_page_says_when_edits_take_effect(home):
    at = model_page()
    assert any("Edits take effect when you click outside the editor, press **Apply** or Ctrl+Enter"
               in c.value for c in at.caption), [c.value for c in at.caption]


def test_train_refuses_code_with_a_syntax_error_instead_of_the_last_valid_code(home):
    at = model_page()
    broken = EDITED.replace("# MY EDIT", "x = (", 1)
    at.text_area(key="editor-mlp_classifier").set_value(broken).run()
    assert any("syntax error" in e.value for e in at.error)
    assert at.session_state["template"]["code"] == broken  # stored: Train sees what the editor shows
    go(at, "train")
    line = broken.splitlines().index("    x = (") + 1
    assert any(f"has a syntax error at line {line}" in e.value and "Fix it on the Model page" in e.value
               for e in at.error), [e.value for e in at.error]
    assert not at.button  # no Train form
    assert RunRegistry(home).list_runs() == []


def test_editor_text_of_a_code_editor_response():
    default = {"id": "", "type": "", "lang": "", "text": "", "selected": "", "cursor": ""}
    assert forms._editor_text(default) is None  # nothing reported yet: the value passed in stays
    assert forms._editor_text(default | {"id": "ab12cd34", "type": "blur", "text": "x = 1"}) == "x = 1"
    assert forms._editor_text(default | {"id": "ab12cd34", "type": "submit", "text": ""}) == ""  # emptied
    assert forms._editor_text("plain") == "plain"
    assert forms._editor_text(None) is None


def test_an_editor_component_with_other_arguments_falls_back_to_a_text_area(monkeypatch):
    """A release of streamlit-code-editor whose code_editor() takes other arguments must leave a
    working plain editor, not a broken page."""
    import code_editor

    def changed_signature(code, **kwargs):
        raise TypeError("code_editor() got an unexpected keyword argument 'ghost_text'")

    monkeypatch.setattr(code_editor, "code_editor", changed_signature)
    at = open_page("model")
    assert at.session_state["_plain_editor"] is True
    assert any("def model_fn" in area.value for area in at.text_area)


def ace_response(event_id: str, text: str) -> dict[str, str]:
    return {"id": event_id, "type": "blur", "lang": "python", "text": text, "selected": "", "cursor": ""}


@pytest.fixture
def ace(monkeypatch):
    """streamlit-code-editor's public code_editor() replaced by a fake answering ``responses[key]``
    (its default response before any event); its private component function fails the page."""
    import code_editor

    responses: dict[str, dict[str, str]] = {}
    calls: list[dict] = []

    def fake_code_editor(code, **kwargs):
        calls.append({"code": code, **kwargs})
        return responses.get(kwargs["key"], ace_response("", ""))

    def private(**kwargs):
        raise AssertionError("forms.edit_code used streamlit-code-editor's private _component_func")

    monkeypatch.setattr(code_editor, "code_editor", fake_code_editor)
    monkeypatch.setattr(code_editor, "_component_func", private)
    return responses, calls


def test_the_ace_editor_is_used_through_its_public_function(home, ace):
    _, calls = ace
    at = open_page("model")
    assert "_plain_editor" not in at.session_state
    assert calls and calls[-1]["key"] == "editor-mlp_classifier"
    assert calls[-1]["code"] == SAVED
    assert calls[-1]["response_mode"] == ["blur"]
    assert not at.text_area  # the Ace editor, not the fallback


def test_an_ace_event_applies_the_edit_once(home, ace, monkeypatch):
    from estimator_workbench.ui import session

    responses, calls = ace
    applied: list[str] = []
    apply = session.apply_template_edit
    monkeypatch.setattr(session, "apply_template_edit",
                        lambda name, text: (applied.append(text), apply(name, text))[-1])
    at = open_page("model")
    assert applied == []  # no event yet: the saved code stays
    assert at.session_state["template"]["code"] == SAVED
    responses["editor-mlp_classifier"] = ace_response("ev000001", EDITED)  # the editor lost focus
    at.run()
    assert not at.exception, at.exception
    assert applied == [EDITED]
    assert at.session_state["template"]["code"] == EDITED
    assert [b for b in at.button if b.label == "Revert to the saved template"]
    at.run()  # the component keeps answering the same event on later reruns: applied once
    assert applied == [EDITED]
    assert calls[-1]["code"] == EDITED
    responses["editor-mlp_classifier"] = ace_response("ev000002", SAVED)  # edited back: a new event
    at.run()
    assert applied == [EDITED, SAVED]
    assert at.session_state["template"]["code"] == SAVED
    train(at)
    [run] = RunRegistry(home).list_runs()
    assert run.template_code == SAVED


def test_the_installed_code_editor_accepts_the_call(home):
    """The real streamlit-code-editor (not a fake): its code_editor() takes edit_code's arguments,
    so the page shows the Ace editor and not the text-area fallback."""
    at = open_page("model")
    assert "_plain_editor" not in at.session_state
    assert not at.text_area
