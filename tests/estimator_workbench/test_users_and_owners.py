"""Issue 26.4, a team on one server: the users file (argon2 hashes, owner-only), run owners, who
may act on a run, the audit log (SQLite and PostgreSQL), and the UI command's refusal to listen
beyond loopback without sign-in."""

from __future__ import annotations

import io
import json
import re
import stat
import time

import pytest
from stub_runs import STUB_TEMPLATE

from estimator_workbench.cli.commands import main
from estimator_workbench.execution import run_actions
from estimator_workbench.execution.submit import submit_run
from estimator_workbench.store import audit, trash, users
from estimator_workbench.store.audit import NotAllowedError
from estimator_workbench.store.registry import RunRegistry
from estimator_workbench.store.users import Actor
from estimator_workbench.ui import auth_config


def make_run(reg: RunRegistry, owner: str | None, status: str = "succeeded"):
    rec = reg.create_run(name=f"{owner}'s run", action="train", dataset={}, template={"name": "t", "code": "x"},
                         params={}, run_config={}, owner=owner)
    if status != "queued":
        reg.set_status(rec.run_id, "running")
        reg.set_status(rec.run_id, status)
    return reg.get(rec.run_id)


class FakeLauncher:
    """Records stop/cancel/resume calls (the real launchers are tested in test_launcher.py)."""

    def __init__(self, registry: RunRegistry) -> None:
        self.registry = registry
        self.calls: list[tuple[str, str]] = []

    def stop(self, run_id: str) -> None:
        self.calls.append(("stop", run_id))

    def cancel(self, run_id: str, grace: float = 10.0, *, wait: bool = True):
        self.calls.append(("cancel", run_id))
        return self.registry.get(run_id)

    def resume(self, run_id: str):
        self.calls.append(("resume", run_id))
        return self.registry.get(run_id)


class TestUsersFile:
    def test_add_stores_a_salted_argon2id_hash_owner_only(self, tmp_path):
        users.add_user(tmp_path, "alice", "correct horse battery", admin=True)
        users.add_user(tmp_path, "bob", "correct horse battery")
        path = users.users_file(tmp_path)
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
        stored = json.loads(path.read_text())["users"]
        assert stored["alice"]["hash"].startswith("$argon2id$")
        assert stored["alice"]["hash"] != stored["bob"]["hash"]  # same password, another salt
        assert "correct horse battery" not in path.read_text()
        assert [(u.name, u.admin) for u in users.list_users(tmp_path)] == [("alice", True), ("bob", False)]

    def test_verify(self, tmp_path):
        users.add_user(tmp_path, "alice", "correct horse battery", admin=True)
        assert users.verify_password(tmp_path, "alice", "correct horse battery") == Actor("alice", admin=True)
        assert users.verify_password(tmp_path, "alice", "correct horse batter") is None
        assert users.verify_password(tmp_path, "mallory", "correct horse battery") is None
        assert users.verify_password(tmp_path, "alice", "") is None

    def test_an_outdated_hash_is_replaced_at_sign_in(self, tmp_path):
        from argon2 import PasswordHasher

        users.add_user(tmp_path, "alice", "correct horse battery")
        path = users.users_file(tmp_path)
        data = json.loads(path.read_text())
        data["users"]["alice"]["hash"] = PasswordHasher(time_cost=1, memory_cost=8192).hash("correct horse battery")
        path.write_text(json.dumps(data))
        assert users.verify_password(tmp_path, "alice", "correct horse battery") == Actor("alice")
        assert "m=65536,t=3" in json.loads(path.read_text())["users"]["alice"]["hash"]

    @pytest.mark.parametrize(("name", "password", "message"), [
        ("alice", "short", r"the password of 'alice' must be at least 8 characters long"),
        ("../x", "long enough", r"user name '\.\./x' is not allowed: use 1-64 letters"),
        ("", "long enough", r"user name '' is not allowed"),
    ])
    def test_bad_input_is_refused(self, tmp_path, name, password, message):
        with pytest.raises(ValueError, match=message):
            users.add_user(tmp_path, name, password)
        assert not users.users_file(tmp_path).exists()

    def test_a_second_add_needs_replace_and_remove(self, tmp_path):
        users.add_user(tmp_path, "alice", "first password")
        with pytest.raises(ValueError, match=r"user 'alice' is already in .*pass --replace"):
            users.add_user(tmp_path, "alice", "second password")
        users.add_user(tmp_path, "alice", "second password", admin=True, replace=True)
        assert users.verify_password(tmp_path, "alice", "second password") == Actor("alice", admin=True)
        users.remove_user(tmp_path, "alice")
        assert users.list_users(tmp_path) == [] and not users.has_users(tmp_path)
        with pytest.raises(ValueError, match="no user 'alice'"):
            users.remove_user(tmp_path, "alice")

    def test_cli_actor(self, tmp_path, monkeypatch):
        monkeypatch.setenv("WORKBENCH_USER", "carol")
        assert users.cli_actor(tmp_path) == Actor("carol", admin=True)  # no users file: one person's
        users.add_user(tmp_path, "dave", "password dave", admin=True)
        assert users.cli_actor(tmp_path) == Actor("carol", admin=False)
        users.add_user(tmp_path, "carol", "password carol", admin=True)
        assert users.cli_actor(tmp_path) == Actor("carol", admin=True)

    def test_cli_users_add_reads_the_password_from_stdin(self, workspace, monkeypatch, capsys):
        monkeypatch.setattr("sys.stdin", io.StringIO("s3cret-password\n"))
        assert main(["--workspace", str(workspace), "users", "add", "erin", "--admin"]) == 0
        assert users.verify_password(workspace, "erin", "s3cret-password") == Actor("erin", admin=True)
        assert main(["--workspace", str(workspace), "users", "list"]) == 0
        assert "erin  (admin)" in capsys.readouterr().out
        monkeypatch.setattr("sys.stdin", io.StringIO("short\n"))
        assert main(["--workspace", str(workspace), "users", "add", "frank"]) == 2
        assert "must be at least 8 characters" in capsys.readouterr().err


@pytest.mark.usefixtures("db_backend")
class TestOwnersAndAudit:
    def test_submit_records_the_owner(self, workspace, monkeypatch):
        reg = RunRegistry(workspace)
        monkeypatch.setenv("WORKBENCH_USER", "carol")
        common = dict(name="n", action="evaluate", dataset={}, template=STUB_TEMPLATE, params={},
                      run_config={}, schedule={})
        assert submit_run(reg, None, **common).owner == "carol"  # the CLI / API: $WORKBENCH_USER
        assert submit_run(reg, None, owner="alice", **common).owner == "alice"  # the UI's signed-in user
        assert sorted(r.owner for r in reg.list_runs()) == ["alice", "carol"]
        assert make_run(reg, None).owner is None

    def test_only_the_owner_or_an_admin_acts_and_everything_is_logged(self, workspace):
        reg = RunRegistry(workspace)
        alice, bob, admin = Actor("alice"), Actor("bob"), Actor("root", admin=True)
        running = make_run(reg, "alice", status="queued")
        reg.set_status(running.run_id, "running")
        done = make_run(reg, "alice")
        launcher = FakeLauncher(reg)
        before = time.time()
        for action, call in (("stop", lambda a: run_actions.stop(launcher, running.run_id, a)),
                             ("cancel", lambda a: run_actions.cancel(launcher, running.run_id, a, grace=1.0)),
                             ("resume", lambda a: run_actions.resume(launcher, done.run_id, a))):
            with pytest.raises(NotAllowedError, match=rf"belongs to alice: only alice or an admin can {action} it"):
                call(bob)
        assert launcher.calls == []
        run_actions.stop(launcher, running.run_id, alice)
        run_actions.cancel(launcher, running.run_id, admin)
        assert launcher.calls == [("stop", running.run_id), ("cancel", running.run_id)]

        refused = run_actions.trash_runs(reg, [done.run_id], bob)
        assert refused.done == [] and "only alice or an admin can delete it" in refused.refused[done.run_id]
        assert trash.trashed_times(reg) == {}
        assert run_actions.trash_runs(reg, [done.run_id], alice).done == [done.run_id]
        assert "restore" in run_actions.restore_runs(reg, [done.run_id], bob).refused[done.run_id]
        assert run_actions.restore_runs(reg, [done.run_id], admin).done == [done.run_id]
        run_actions.trash_runs(reg, [done.run_id], alice)
        assert run_actions.empty_trash(reg, bob).done == []
        assert run_actions.empty_trash(reg, alice).done == [done.run_id]
        assert not reg.exists(done.run_id)

        log = list(reversed(audit.audit_entries(reg)))
        assert [(e.actor, e.action, e.run_id, e.outcome) for e in log] == [
            ("bob", "stop", running.run_id, "refused"),
            ("bob", "cancel", running.run_id, "refused"),
            ("bob", "resume", done.run_id, "refused"),
            ("alice", "stop", running.run_id, "done"),
            ("root", "cancel", running.run_id, "done"),
            ("bob", "trash", done.run_id, "refused"),
            ("alice", "trash", done.run_id, "done"),
            ("bob", "restore", done.run_id, "refused"),
            ("root", "restore", done.run_id, "done"),
            ("alice", "trash", done.run_id, "done"),
            ("bob", "delete", done.run_id, "refused"),
            ("alice", "delete", done.run_id, "done"),
        ]
        assert all(before <= e.at <= time.time() for e in log)
        assert "belongs to alice" in log[0].detail
        assert [e.action for e in audit.audit_entries(reg, run_id=running.run_id)] == ["cancel", "stop", "cancel", "stop"]

    def test_a_run_from_before_owners_is_anyones(self, workspace):
        reg = RunRegistry(workspace)
        legacy = make_run(reg, None)
        assert audit.refusal(legacy, Actor("bob"), "trash") is None
        assert run_actions.trash_runs(reg, [legacy.run_id], Actor("bob")).done == [legacy.run_id]

    def test_the_cli_refuses_someone_elses_run(self, workspace, monkeypatch, capsys):
        reg = RunRegistry(workspace)
        users.add_user(workspace, "alice", "alice password")  # a team workspace: the CLI user is no admin
        run = make_run(reg, "alice")
        monkeypatch.setenv("WORKBENCH_USER", "bob")
        assert main(["--workspace", str(workspace), "delete", run.run_id]) == 2
        assert f"Run '{run.run_id}' belongs to alice: only alice or an admin can delete it." in capsys.readouterr().err
        assert main(["--workspace", str(workspace), "resume", run.run_id, "--detach"]) == 2
        assert "only alice or an admin can resume it" in capsys.readouterr().err
        assert reg.get(run.run_id).status == "succeeded"
        monkeypatch.setenv("WORKBENCH_USER", "alice")
        assert main(["--workspace", str(workspace), "delete", run.run_id]) == 0
        assert [(e.actor, e.outcome) for e in audit.audit_entries(reg)] == [
            ("alice", "done"), ("bob", "refused"), ("bob", "refused")]
        capsys.readouterr()
        assert main(["--workspace", str(workspace), "audit", "--json"]) == 0
        shown = json.loads(capsys.readouterr().out)
        assert [(e["actor"], e["action"], e["run_id"], e["outcome"]) for e in shown] == [
            ("alice", "trash", run.run_id, "done"), ("bob", "resume", run.run_id, "refused"),
            ("bob", "trash", run.run_id, "refused")]
        assert main(["--workspace", str(workspace), "audit", "--limit", "1"]) == 0
        assert re.fullmatch(rf"\d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d  alice  trash  {run.run_id}  done\n",
                            capsys.readouterr().out)


class TestBindingNeedsSignIn:
    @pytest.fixture(autouse=True)
    def _no_sign_in_settings(self, monkeypatch):
        for name in ("WORKBENCH_PASSWORD", "WORKBENCH_OIDC_METADATA_URL", "WORKBENCH_OIDC_CLIENT_ID",
                     "WORKBENCH_OIDC_CLIENT_SECRET", "WORKBENCH_OIDC_REDIRECT_URI"):
            monkeypatch.delenv(name, raising=False)

    def ui(self, workspace, *extra):
        return main(["--workspace", str(workspace), "ui", "--dry-run", *extra])

    def test_a_non_loopback_address_without_sign_in_is_refused(self, workspace, capsys):
        assert self.ui(workspace, "--address", "0.0.0.0") == 2
        err = capsys.readouterr().err
        assert "error: refusing to listen on '0.0.0.0' without sign-in" in err
        assert "--insecure-no-auth" in err and "Traceback" not in err
        assert self.ui(workspace) == 0  # loopback: the access token is enough

    def test_insecure_no_auth_lets_it_start_with_a_warning(self, workspace, capsys):
        assert self.ui(workspace, "--address", "0.0.0.0", "--insecure-no-auth") == 0
        assert "warning: --insecure-no-auth" in capsys.readouterr().err

    def test_any_sign_in_lets_it_start(self, workspace, monkeypatch, capsys):
        monkeypatch.setenv("WORKBENCH_PASSWORD", "one person")
        assert self.ui(workspace, "--address", "0.0.0.0") == 0
        monkeypatch.delenv("WORKBENCH_PASSWORD")
        users.add_user(workspace, "alice", "alice password")
        assert self.ui(workspace, "--address", "0.0.0.0") == 0
        assert auth_config.sign_in_mode(workspace) == "users"

    def test_oidc_settings(self, workspace, monkeypatch, capsys):
        assert self.ui(workspace, "--address", "0.0.0.0", "--oidc-client-id", "wb") == 2
        assert ("OpenID Connect sign-in needs --oidc-metadata-url, $WORKBENCH_OIDC_CLIENT_SECRET as well"
                in capsys.readouterr().err)
        monkeypatch.setenv("WORKBENCH_OIDC_CLIENT_SECRET", "client-secret")
        url = "http://127.0.0.1:9/.well-known/openid-configuration"
        assert self.ui(workspace, "--address", "0.0.0.0", "--oidc-client-id", "wb", "--oidc-metadata-url", url) == 0
        assert f"--secrets.files {auth_config.secrets_file(workspace)}" in capsys.readouterr().out


class TestOidcSecrets:
    def test_the_auth_section_is_written_owner_only_and_keeps_its_cookie_secret(self, tmp_path):
        import tomllib

        settings = auth_config.OidcSettings("http://idp/.well-known/openid-configuration", "wb", 'se"cret')
        path = auth_config.write_oidc_secrets(tmp_path, settings)
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        section = tomllib.loads(path.read_text())["auth"]
        assert section == {"redirect_uri": "http://localhost:{port}/oauth2callback",
                           "cookie_secret": section["cookie_secret"], "client_id": "wb",
                           "client_secret": 'se"cret',
                           "server_metadata_url": "http://idp/.well-known/openid-configuration"}
        assert len(section["cookie_secret"]) >= 40
        again = tomllib.loads(auth_config.write_oidc_secrets(tmp_path, settings).read_text())["auth"]
        assert again["cookie_secret"] == section["cookie_secret"]  # sign-ins survive a restart
        assert auth_config.sign_in_mode(tmp_path) == "oidc"
        auth_config.remove_oidc_secrets(tmp_path)
        assert not path.exists() and auth_config.sign_in_mode(tmp_path, "pw") == "password"

    def test_a_hand_written_secrets_file_is_never_removed(self, tmp_path):
        path = auth_config.secrets_file(tmp_path)
        path.parent.mkdir(parents=True)
        path.write_text("[auth]\nclient_id = 'mine'\n")
        auth_config.remove_oidc_secrets(tmp_path)
        assert path.exists()

    def test_a_bad_redirect_uri_is_refused(self):
        with pytest.raises(ValueError, match="--oidc-redirect-uri must end with /oauth2callback"):
            auth_config.OidcSettings.from_env({"WORKBENCH_OIDC_CLIENT_SECRET": "s"}, metadata_url="http://idp/x",
                                              client_id="wb", redirect_uri="http://h:1/callback")


class TestSweepAndUploadOwners:
    def test_a_sweep_records_who_started_it(self, workspace, monkeypatch):
        from estimator_workbench.sweeps import store
        from estimator_workbench.sweeps.spec import SweepSpec, parse_param

        monkeypatch.setenv("WORKBENCH_USER", "carol")
        spec = SweepSpec(name="s1", dataset={}, template={"name": "t", "code": ""}, base_params={},
                         space=(parse_param("learning_rate=0.001:0.1:log"),), steps=100, trials=5, parallel=1,
                         metric="accuracy")
        assert store.sweep_owner(store.create_study(workspace, spec)) == "carol"
        other = SweepSpec.from_dict({**spec.to_dict(), "name": "s2"})
        assert store.sweep_owner(store.create_study(workspace, other, owner="alice")) == "alice"
        assert store.sweep_owner(store.load_study(workspace, "s2", with_sampler=False)) == "alice"

    def test_an_upload_records_its_first_uploader(self, workspace, monkeypatch):
        from estimator_workbench.data import datasets

        monkeypatch.setenv("WORKBENCH_USER", "carol")
        data = b"x,y\n1,2\n3,4\n5,6\n"
        first = datasets.save_upload(workspace, "t.csv", data)
        assert datasets.upload_owner(workspace, first.name) == "carol"
        again = datasets.save_upload(workspace, "t.csv", data, owner="alice")  # same content
        assert again == first and datasets.upload_owner(workspace, first.name) == "carol"
        other = datasets.save_upload(workspace, "t.csv", b"x,y\n7,8\n9,10\n", owner="alice")
        assert datasets.upload_owner(workspace, other.name) == "alice"
        assert {p.name for p in datasets.list_uploads(workspace)} == {first.name, other.name}  # no .owner file
        datasets.delete_upload(workspace, other.name)
        assert not list(workspace.joinpath("datasets").glob(f".{other.name}.owner"))


def test_db_copy_takes_the_owners_and_the_audit_log_along(workspace, postgres_url, monkeypatch, capsys):
    from estimator_workbench.store.registry_db import DATABASE_URL_ENV

    monkeypatch.delenv(DATABASE_URL_ENV, raising=False)
    local = RunRegistry(workspace)
    run = make_run(local, "alice")
    run_actions.trash_runs(local, [run.run_id], Actor("bob"))
    run_actions.trash_runs(local, [run.run_id], Actor("alice"))
    assert main(["--workspace", str(workspace), "db", "copy", "--to", postgres_url]) == 0
    assert "Audit log: 2 entries copied." in capsys.readouterr().out
    remote = RunRegistry(workspace, database_url=postgres_url)
    assert remote.get(run.run_id).owner == "alice"
    assert audit.audit_entries(remote) == audit.audit_entries(local)
    assert main(["--workspace", str(workspace), "db", "copy", "--to", postgres_url]) == 0
    assert "Audit log: 0 entries copied." in capsys.readouterr().out  # nothing doubled
