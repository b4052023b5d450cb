"""Signing in to the UI, and who the browser session acts as (``current_actor``).

The mode is ``ui.auth_config.sign_in_mode`` of the server's workspace: OpenID Connect through
Streamlit's ``st.login`` / ``st.user``; the users file with a name-and-password form (argon2
hashes, every attempt of every session through the server's one ``login_throttle``); the shared
``$WORKBENCH_PASSWORD`` (``session.require_password``); or nobody signs in. Without a per-person
sign-in (the last two) the session acts as the account that started the server, an admin: it is
one person's workbench.

Example::

    >>> if not require_sign_in():   # doctest: +SKIP
    ...     st.stop()
    >>> current_actor()              # doctest: +SKIP
    Actor(name='alice', admin=False)
"""

from __future__ import annotations

import math

import streamlit as st

from estimator_workbench.store import users
from estimator_workbench.store.users import Actor
from estimator_workbench.ui import auth_config, login_throttle, session

__all__ = ["ACTOR_KEY", "current_actor", "mode", "require_sign_in", "signed_in_box"]

ACTOR_KEY = "_signed_in_actor"


_MODES: dict[str, str] = {}  # workspace -> its mode, decided once per server process


def mode() -> str:
    """This server's sign-in mode (one of ``auth_config.SIGN_IN_MODES``), decided at its first
    page: a users file deleted later does not open the server (its access token was dropped)."""
    root = str(session.workspace())
    if root not in _MODES:
        _MODES[root] = auth_config.sign_in_mode(root, session.password())
    return _MODES[root]


def _oidc_actor() -> Actor | None:
    if not st.user.is_logged_in:
        return None
    name = str(st.user.get("email") or st.user.get("preferred_username") or st.user.get("sub") or "")
    if not name:
        return None
    return Actor(name, admin=name.lower() in auth_config.oidc_admins())


def current_actor() -> Actor:
    """Who this browser session acts as: the signed-in person, else (no per-person sign-in) the
    account that started the server, as an admin."""
    kind = mode()
    if kind == "oidc":
        actor = _oidc_actor()
        if actor is not None:
            return actor
    elif kind == "users":
        saved = st.session_state.get(ACTOR_KEY)
        if isinstance(saved, Actor):
            return saved
    else:
        return Actor(users.current_user(), admin=True)
    st.stop()  # not signed in: no page may act (require_sign_in stopped it already)
    raise AssertionError("unreachable")


def _users_form() -> bool:
    if isinstance(st.session_state.get(ACTOR_KEY), Actor):
        return True
    st.title("Estimator Workbench")
    st.caption("Sign in with the name and password your admin gave you "
               "(`estimator-workbench users add NAME`).")
    with st.form("signin"):
        name = st.text_input("Name", key="_signin_name")
        given = st.text_input("Password", type="password", key="_signin_password")
        submitted = st.form_submit_button("Sign in")
    if submitted:
        throttle = login_throttle.PASSWORD_THROTTLE
        wait = throttle.acquire()
        if wait > 0:
            st.error(f"Too many sign-in attempts on this server: try again in {math.ceil(wait)} s.")
            return False
        try:
            actor = users.verify_password(session.workspace(), name.strip(), given)
        except ValueError as exc:  # an unreadable users file
            session.show_error(exc)
            return False
        if actor is None:
            throttle.failed()
            st.error("Wrong name or password.")
            return False
        throttle.succeeded()
        st.session_state[ACTOR_KEY] = actor
        st.session_state.pop("_signin_password", None)
        st.rerun()
    return False


def _oidc_page() -> bool:
    if _oidc_actor() is not None:
        return True
    st.title("Estimator Workbench")
    if st.user.is_logged_in:
        st.error("Your identity provider sent no e-mail address, user name or subject: the workbench "
                 "cannot tell who you are. Ask your admin to release the 'email' or 'profile' scope.")
        st.button("Sign out", on_click=st.logout)
        return False
    st.caption("Sign in with your organisation's account.")
    st.button("Sign in", key="oidc-login", type="primary", on_click=st.login, icon=":material/login:")
    return False


def require_sign_in() -> bool:
    """True when the session may see the pages (signed in, or no sign-in configured); otherwise
    draws the sign-in form or button and returns False (the caller stops)."""
    kind = mode()
    if kind == "oidc":
        return _oidc_page()
    if kind == "users":
        return _users_form()
    return session.require_password()


def signed_in_box() -> None:
    """In the sidebar: who is signed in, with a Sign out button (per-person sign-in only)."""
    kind = mode()
    if kind not in ("oidc", "users"):
        return
    actor = current_actor()
    shown = st.user.get("name") if kind == "oidc" else None
    label = f"{shown} ({actor.name})" if shown and shown != actor.name else actor.name
    st.sidebar.caption(f"Signed in as **{session.md(label)}**" + (" · admin" if actor.admin else ""))
    if kind == "oidc":
        st.sidebar.button("Sign out", key="signout", on_click=st.logout)
    elif st.sidebar.button("Sign out", key="signout"):
        st.session_state.pop(ACTOR_KEY, None)
        st.rerun()
