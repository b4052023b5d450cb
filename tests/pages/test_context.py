"""Context survives a browser reload: a reload is a new session (a new ``AppTest``) on the same
workspace. The dataset, the template, the edited code, the Train form's values and the uploads
come back from ``<workspace>/ui_state.json``; the URL (``?dataset=&template=``) wins over it; a
pre-flight result belongs to the code it checked."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

pytest.importorskip("streamlit")
from app_pages import open_page
from streamlit.testing.v1 import AppTest

from estimator_workbench import templates
from estimator_workbench.data import datasets
from estimator_workbench.store.registry import RunRegistry
from estimator_workbench.ui import context, session

REPO = Path(__file__).resolve().parents[2]
SAVED = templates.get_template("mlp_classifier").code
EDITED = SAVED.replace("def model_fn(features, labels, mode, params):\n",
                       "def model_fn(features, labels, mode, params):\n    # MY EDIT\n", 1)


def go(at: AppTest, page: str) -> AppTest:
    at.switch_page(f"../../pages/{page}.py").run()
    assert not at.exception, at.exception
    return at


def reload(page: str | None = None, query: dict[str, str] | None = None) -> AppTest:
    """A browser reload: a fresh session of the app on the same workspace."""
    return open_page(page, query=query, _plain_editor=True)


def shown(at: AppTest, kind: str = "warning") -> list[str]:
    return [re.sub(r"\\(.)", r"\1", e.value) for e in getattr(at, kind)]


def test_a_reload_keeps_the_chosen_dataset_and_its_settings(home):
    at = open_page()
    at.selectbox(key="data-name").set_value("penguins").run()
    at.slider(key="data-eval").set_value(0.3).run()
    at.number_input(key="data-seed").set_value(7).run()
    assert at.session_state["dataset"]["ref"] == {"kind": "bundled", "name": "penguins"}
    assert at.query_params["dataset"] in ("penguins", ["penguins"])
    saved = json.loads((home / session.UI_STATE_FILE).read_text())
    assert saved["dataset"]["ref"] == {"kind": "bundled", "name": "penguins"}

    again = reload()  # the Data page of a new session: not iris
    assert again.selectbox(key="data-name").value == "penguins"
    assert again.slider(key="data-eval").value == 0.3
    assert again.number_input(key="data-seed").value == 7
    spec = datasets.DatasetSpec.from_dict(again.session_state["dataset"])
    assert (spec.ref, spec.eval_fraction, spec.seed) == ({"kind": "bundled", "name": "penguins"}, 0.3, 7)

    train = reload("train")  # a reload on the Train page trains on penguins too
    assert "Dataset **penguins**" in train.caption[0].value


def test_switching_pages_does_not_reset_the_dataset(home):
    at = open_page()
    at.selectbox(key="data-name").set_value("wine").run()
    go(at, "model")
    go(at, "data")  # the Data page's widgets were forgotten by Streamlit; the choice is not
    assert at.selectbox(key="data-name").value == "wine"
    assert at.session_state["dataset"]["ref"]["name"] == "wine"


def test_the_url_wins_over_the_workspace_file(home):
    at = open_page()
    at.selectbox(key="data-name").set_value("penguins").run()
    linked = reload(query={"dataset": "wine", "template": "linear"})
    assert linked.selectbox(key="data-name").value == "wine"
    assert linked.session_state["template"]["name"] == "linear"
    unknown = reload(query={"dataset": "no_such_data"})  # a bad link: said, then the saved choice
    assert unknown.selectbox(key="data-name").value == "wine"  # (the linked page saved it)
    assert any("no_such_data" in n for n in unknown.session_state["_context_notes"])


def test_uploads_are_kept_listed_and_can_be_deleted(home):
    at = open_page()
    at.radio(key="data-source").set_value("Upload a file").run()
    body = (REPO / "sample_data" / "iris.csv").read_bytes()
    at.file_uploader(key="data-upload").set_value(("my flowers.csv", body, "text/csv")).run()
    assert not at.exception, at.exception
    assert (home / "datasets" / "my_flowers.csv").read_bytes() == body  # a safe name in the workspace
    assert at.query_params["dataset"] in ("upload:my_flowers.csv", ["upload:my_flowers.csv"])

    again = reload()  # the upload is still chosen, without uploading it again
    assert again.radio(key="data-source").value == "Upload a file"
    assert again.selectbox(key="data-upload-name").value == "my_flowers.csv"
    assert again.selectbox(key="data-upload-name").options == ["my_flowers.csv"]
    assert again.session_state["dataset"]["ref"]["path"] == str(home / "datasets" / "my_flowers.csv")

    again.button(key="data-upload-delete").click().run()
    assert not (home / "datasets" / "my_flowers.csv").exists()
    assert any("Choose a file" in i.value for i in again.info)
    gone = reload("train")  # the saved dataset is gone: said, and the default used
    assert "Dataset **iris**" in gone.caption[0].value
    assert any("is gone" in n for n in gone.session_state["_context_notes"])


def test_a_reload_keeps_the_template_and_its_edited_code(home):
    at = open_page("model", _plain_editor=True)
    at.selectbox(key="model-name").set_value("mlp_classifier").run()
    at.text_area(key="editor-mlp_classifier").set_value(EDITED).run()
    assert at.query_params["template"] in ("mlp_classifier", ["mlp_classifier"])

    again = reload("model")
    assert again.selectbox(key="model-name").value == "mlp_classifier"
    assert again.text_area(key="editor-mlp_classifier").value == EDITED
    assert again.session_state["template"]["code"] == EDITED


def test_a_reload_keeps_the_train_form_values(home):
    at = open_page("train")
    at.number_input(key="rc-steps").set_value(3)
    at.number_input(key="rc-batch").set_value(16)
    at.selectbox(key="rc-action").set_value("train")
    at.checkbox(key="rc-es").check()  # (not used by 'train': refused, but the values are kept)
    at.number_input(key="p-mlp_classifier-learning_rate").set_value(0.05)
    at.button[0].click()
    at.run()
    again = reload("train")
    assert again.number_input(key="rc-steps").value == 3
    assert again.number_input(key="rc-batch").value == 16
    assert again.selectbox(key="rc-action").value == "train"
    assert again.checkbox(key="rc-es").value is True
    assert again.number_input(key="p-mlp_classifier-learning_rate").value == 0.05


def test_a_preflight_result_belongs_to_the_code_it_checked(home):
    failed = {"ok": False, "summary": "Pre-flight check failed in TRAIN: boom", "modes": {},
              "first_error": {"traceback": "Traceback: boom"}}
    at = open_page("model", _plain_editor=True)
    session_code = at.session_state["template"]["code"]
    # what the Model page's button stores (the check itself runs in a child process)
    at.session_state["preflight"] = failed | {"code_sha256": context.code_hash(session_code)}
    go(at, "train")
    assert any("The last pre-flight check of this code failed: Pre-flight check failed in TRAIN: boom" in w
               for w in shown(at))
    go(at, "model")
    assert any("boom" in e for e in shown(at, "error"))
    at.text_area(key="editor-mlp_classifier").set_value(EDITED).run()  # the code changed: result cleared
    assert "preflight" not in at.session_state
    assert not any("boom" in e for e in shown(at, "error"))
    go(at, "train")
    assert not any("pre-flight" in w for w in shown(at))


def test_the_preflight_result_is_kept_across_a_reload_with_its_code(home):
    code = SAVED
    stored = {"ok": False, "summary": "Pre-flight check failed in EVAL: nope", "modes": {},
              "first_error": None, "code_sha256": context.code_hash(code), "template": "mlp_classifier"}
    (home).mkdir(parents=True, exist_ok=True)
    (home / session.UI_STATE_FILE).write_text(json.dumps({"preflight": stored, "template": "mlp_classifier"}))
    at = reload("train")
    assert any("failed in EVAL: nope" in w for w in shown(at))


def test_a_broken_state_file_is_ignored(home):
    home.mkdir(parents=True, exist_ok=True)
    (home / session.UI_STATE_FILE).write_text("{not json")
    at = open_page()
    assert at.selectbox(key="data-name").value == "iris"
    assert json.loads((home / session.UI_STATE_FILE).read_text())["dataset"]["ref"]["name"] == "iris"


def test_train_warns_when_the_template_does_not_fit_the_label(home):
    at = open_page("model", _plain_editor=True)
    at.selectbox(key="model-name").set_value("mlp_regressor").run()  # iris: a class label
    go(at, "train")
    assert any("Template 'mlp_regressor' is a regression model, but the label 'species' is categorical (3 classes)"
               in w for w in shown(at))
    go(at, "data")
    at.selectbox(key="data-name").set_value("diabetes").run()
    go(at, "train")
    assert not any("regression model" in w for w in shown(at))
    assert RunRegistry(home).list_runs() == []
