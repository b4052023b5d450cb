"""The sign-in form of a users file, the owner-gated run buttons and the --insecure-no-auth banner
(issue 26.4), under AppTest."""

from __future__ import annotations

import pytest
from app_pages import APP, open_page
from streamlit.testing.v1 import AppTest

from estimator_workbench.store import audit, users
from estimator_workbench.store.registry import RunRegistry
from estimator_workbench.store.users import Actor
from estimator_workbench.ui import access, auth_config, login_throttle, session, signin


@pytest.fixture(autouse=True)
def _fresh_throttle():
    login_throttle.PASSWORD_THROTTLE.reset()
    yield
    login_throttle.PASSWORD_THROTTLE.reset()


def finished_run(home, owner: str):
    reg = RunRegistry(home)
    rec = reg.create_run(name=f"{owner} mlp", action="train", dataset={"ref": {"kind": "bundled", "name": "iris"}},
                         template={"name": "mlp_classifier", "code": "x"}, params={}, run_config={}, owner=owner)
    reg.set_status(rec.run_id, "running")
    return reg.set_status(rec.run_id, "succeeded")


def button(at: AppTest, key: str):
    return next(b for b in at.button if b.key == key)


def test_the_users_file_asks_for_a_name_and_password(home):
    users.add_user(home, "alice", "alice password", admin=True)
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    assert not at.exception and [t.label for t in at.text_input] == ["Name", "Password"]
    assert not [b for b in at.button if b.key == "signout"]  # no page ran
    at.text_input(key="_signin_name").input("alice")
    at.text_input(key="_signin_password").input("wrong password")
    at.button[0].click().run()
    assert [e.value for e in at.error] == ["Wrong name or password."]
    login_throttle.PASSWORD_THROTTLE.reset()  # the next attempt would wait a second
    at.text_input(key="_signin_password").input("alice password")
    at.button[0].click().run()
    assert not at.exception and not at.error
    assert at.session_state[signin.ACTOR_KEY] == Actor("alice", admin=True)
    assert any("Signed in as **alice** · admin" in c.value for c in at.sidebar.caption)
    assert "_signin_password" not in at.session_state


def test_someone_elses_run_cannot_be_stopped_deleted_or_restored(home):
    users.add_user(home, "alice", "alice password")
    users.add_user(home, "bob", "bob password")
    alices = finished_run(home, "alice")
    bobs = finished_run(home, "bob")
    at = open_page("runs", **{signin.ACTOR_KEY: Actor("bob")})
    assert list(at.dataframe[0].value["owner"]) == ["bob", "alice"]  # everyone sees the team's runs
    # The picker starts on the newest run: bob's own, whose buttons are enabled.
    assert not button(at, f"runs-delete-{bobs.run_id}").disabled
    assert not button(at, f"runs-resume-{bobs.run_id}").disabled
    at.selectbox(key="runs-picker").select_index(1).run()
    delete = button(at, f"runs-delete-{alices.run_id}")
    resume = button(at, f"runs-resume-{alices.run_id}")
    assert delete.disabled and resume.disabled
    assert delete.help == f"Run '{alices.run_id}' belongs to alice: only alice or an admin can delete it."
    assert resume.help == f"Run '{alices.run_id}' belongs to alice: only alice or an admin can resume it."
    assert audit.audit_entries(RunRegistry(home)) == []  # a disabled button did nothing


def test_an_admin_may_act_on_everyones_runs(home):
    users.add_user(home, "root", "root password", admin=True)
    alices = finished_run(home, "alice")
    at = open_page("runs", **{signin.ACTOR_KEY: Actor("root", admin=True)})
    assert not button(at, f"runs-delete-{alices.run_id}").disabled
    button(at, f"runs-resume-{alices.run_id}").click().run()
    assert not at.exception
    assert [(e.actor, e.action, e.outcome) for e in audit.audit_entries(RunRegistry(home))] == [
        ("root", "resume", "done")]
    shown = at.dataframe[-1].value  # the Audit log expander's table, the last on the page
    assert list(shown[["who", "action", "run", "outcome"]].itertuples(index=False, name=None)) == [
        ("root", "resume", alices.run_id, "done")]


def test_insecure_no_auth_shows_a_banner_on_every_page(home, monkeypatch):
    monkeypatch.setattr(session, "bound_addresses", lambda: ["0.0.0.0"])
    monkeypatch.setattr(access, "gate_installed", lambda: True)
    monkeypatch.setattr(session, "_password_cache", [])
    monkeypatch.delenv("WORKBENCH_PASSWORD", raising=False)
    monkeypatch.setenv(auth_config.INSECURE_ENV, "1")
    at = open_page("runs")
    assert any(w.value.startswith("**Insecure: no sign-in.**") for w in at.warning)
    assert [t.value for t in at.title] == ["Runs"]  # the page still runs


def test_a_run_started_in_a_signed_in_session_is_that_persons(home):
    users.add_user(home, "carol", "carol password")
    at = open_page("train", **{signin.ACTOR_KEY: Actor("carol")})
    at.number_input(key="rc-steps").set_value(3)  # a three-step stub run
    at.button[0].click().run()  # the form's submit button
    assert not at.exception, at.exception
    assert [r.owner for r in RunRegistry(home).list_runs()] == ["carol"]


def test_only_an_admin_changes_how_many_runs_run_at_once(home):
    users.add_user(home, "alice", "alice password")
    users.add_user(home, "root", "root password", admin=True)
    at = open_page("runs", **{signin.ACTOR_KEY: Actor("alice")})
    assert not at.exception
    assert not [n for n in at.number_input if n.key == "settings-max-concurrent"]  # no form for alice
    assert any("Only an admin can change them (alice is not one)." in c.value for c in at.caption)
    at = open_page("runs", **{signin.ACTOR_KEY: Actor("root", admin=True)})
    assert [n.key for n in at.number_input if n.key.startswith("settings-")] == [
        "settings-max-concurrent", "settings-helper-slots"]
