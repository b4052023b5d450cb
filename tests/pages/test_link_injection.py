"""Issue 24.11: text from the URL (``?runs=`` on Compare, ``?dataset=`` in both its forms and
``?template=``) was placed in markdown as is, so a crafted link drew the attacker's link and made
the browser fetch their image. It is escaped like stored names: shown as text."""

from __future__ import annotations

import pytest

pytest.importorskip("streamlit")
from app_pages import open_page

from estimator_workbench.store.registry import RunRegistry
from estimator_workbench.ui import session

LINK = "[click me](http://evil.test/steal)"
IMAGE = "![x](http://evil.test/pixel.png)"


def toasts(at) -> list[str]:
    return [t.value for t in at.toast]


def assert_literal(texts: list[str], needle: str) -> None:
    """One of ``texts`` quotes ``needle`` escaped (every markdown character after a backslash),
    and none holds it as live markdown."""
    assert any(session.md(needle) in t for t in texts), texts
    assert not any(needle in t for t in texts), texts


@pytest.mark.parametrize("dataset", [f"{LINK}{IMAGE}", f"upload:{LINK}{IMAGE}"])
def test_a_crafted_dataset_link_is_shown_as_text(home, dataset):
    at = open_page(query={"dataset": dataset})
    assert_literal(toasts(at), LINK)


def test_a_crafted_template_link_is_shown_as_text(home):
    at = open_page(query={"template": IMAGE + LINK})
    assert_literal(toasts(at), IMAGE)


def test_crafted_run_ids_on_compare_are_shown_as_text(home):
    RunRegistry(home).create_run(  # the page lists unknown ids once the workspace has runs
        name="a", action="train", dataset={"ref": {"kind": "bundled", "name": "iris"}},
        template={"name": "mlp_classifier", "code": "def model_fn(features): ..."}, params={},
        run_config={}, schedule={"max_steps": 5})
    at = open_page("compare", query={"runs": f"{LINK},{IMAGE}"})
    captions = [c.value for c in at.caption if "Not in this workspace" in c.value]
    assert_literal(captions, LINK)
    assert_literal(captions, IMAGE)
