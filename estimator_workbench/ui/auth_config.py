"""How people sign in to the UI server, decided once at start (no Streamlit import: the CLI reads
it too).

Sign-in modes, strongest first:

- ``oidc``: Streamlit's OpenID Connect login (``st.login``) against the team's identity provider.
  ``estimator-workbench ui`` takes ``--oidc-metadata-url``, ``--oidc-client-id`` and
  ``--oidc-redirect-uri`` (or ``$WORKBENCH_OIDC_METADATA_URL``, ``$WORKBENCH_OIDC_CLIENT_ID``,
  ``$WORKBENCH_OIDC_REDIRECT_URI``) and ``$WORKBENCH_OIDC_CLIENT_SECRET`` (never a flag: other
  accounts read flags in ``ps``), and writes the ``[auth]`` section Streamlit reads into
  ``<workspace>/.ui/secrets.toml`` (0600 in a 0700 folder; its ``cookie_secret`` is random and
  kept across restarts), which the server is pointed at with ``--secrets.files``.
  ``$WORKBENCH_OIDC_ADMINS`` (comma-separated e-mail addresses or names) names the admins.
- ``users``: the workspace's users file (``estimator-workbench users add NAME``) and a sign-in
  form (``estimator_workbench.ui.signin``).
- ``password``: the one shared ``$WORKBENCH_PASSWORD`` (one person).
- ``none``: nobody signs in (the access token still guards the server).

With ``oidc`` or ``users`` the access token of ``ui.access`` is off: every person signs in instead
(as Jupyter drops its token when a password is set), and the identity provider's redirect back to
``/oauth2callback`` could not carry the token's ``SameSite=Strict`` cookie anyway.

Binding beyond loopback with ``none`` is refused unless ``--insecure-no-auth`` is passed; then
``$WORKBENCH_INSECURE_NO_AUTH=1`` makes the UI show a banner on every page.

Example::

    >>> settings = OidcSettings.from_env({"WORKBENCH_OIDC_METADATA_URL": "http://idp/.well-known/openid-configuration",
    ...                                   "WORKBENCH_OIDC_CLIENT_ID": "wb", "WORKBENCH_OIDC_CLIENT_SECRET": "s"})
    >>> settings.client_id
    'wb'
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import secrets
from collections.abc import Mapping
from pathlib import Path

from estimator_workbench.store import paths, users

__all__ = ["INSECURE_ENV", "OIDC_ADMINS_ENV", "SECRETS_FILE", "SIGN_IN_MODES", "OidcSettings", "oidc_admins",
           "remove_oidc_secrets", "secrets_file", "sign_in_mode", "write_oidc_secrets"]

INSECURE_ENV = "WORKBENCH_INSECURE_NO_AUTH"
OIDC_ADMINS_ENV = "WORKBENCH_OIDC_ADMINS"
SECRETS_FILE = "secrets.toml"
SIGN_IN_MODES = ("oidc", "users", "password", "none")
_GENERATED = "# Written by estimator-workbench ui from its --oidc-* settings; it rewrites this file at each start.\n"


@dataclasses.dataclass(frozen=True)
class OidcSettings:
    """The OpenID Connect client of the UI server (Streamlit's ``[auth]`` section).

    Example:
        >>> OidcSettings("http://idp/.well-known/openid-configuration", "wb", "secret").redirect_uri
        'http://localhost:{port}/oauth2callback'
    """

    metadata_url: str
    client_id: str
    client_secret: str
    redirect_uri: str = "http://localhost:{port}/oauth2callback"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, *, metadata_url: str | None = None,
                 client_id: str | None = None, redirect_uri: str | None = None) -> OidcSettings | None:
        """The settings from the flags given, else ``$WORKBENCH_OIDC_*``; None when none is set.
        Raises ``ValueError`` naming what is missing when only some are."""
        env = os.environ if env is None else env
        given = {
            "--oidc-metadata-url": metadata_url or env.get("WORKBENCH_OIDC_METADATA_URL", ""),
            "--oidc-client-id": client_id or env.get("WORKBENCH_OIDC_CLIENT_ID", ""),
            "$WORKBENCH_OIDC_CLIENT_SECRET": env.get("WORKBENCH_OIDC_CLIENT_SECRET", ""),
        }
        redirect = redirect_uri or env.get("WORKBENCH_OIDC_REDIRECT_URI", "")
        if not any(v.strip() for v in given.values()) and not redirect:
            return None
        missing = [k for k, v in given.items() if not v.strip()]
        if missing:
            raise ValueError(f"OpenID Connect sign-in needs {', '.join(missing)} as well (given: "
                             f"{', '.join(k for k in given if k not in missing) or 'a redirect URI'}).")
        url = given["--oidc-metadata-url"].strip()
        if not re.match(r"https?://", url):
            raise ValueError(f"--oidc-metadata-url must be an http(s) URL of the provider's "
                             f"/.well-known/openid-configuration, given: {url!r}.")
        settings = cls(url, given["--oidc-client-id"].strip(), given["$WORKBENCH_OIDC_CLIENT_SECRET"].strip())
        if redirect:
            if not redirect.endswith("/oauth2callback"):
                raise ValueError(f"--oidc-redirect-uri must end with /oauth2callback (Streamlit's "
                                 f"callback route), given: {redirect!r}.")
            settings = dataclasses.replace(settings, redirect_uri=redirect)
        return settings


def secrets_file(root: str | os.PathLike[str]) -> Path:
    """``<workspace>/.ui/secrets.toml``: the ``[auth]`` section the UI server reads."""
    return Path(root) / paths.UI_DIR / SECRETS_FILE


def _toml_string(value: str) -> str:
    return json.dumps(value)  # a JSON string is a valid TOML basic string


def write_oidc_secrets(root: str | os.PathLike[str], settings: OidcSettings) -> Path:
    """Writes Streamlit's ``[auth]`` section for ``settings`` (0600), keeping the cookie secret of
    an earlier start (sign-ins survive a restart)."""
    path = secrets_file(root)
    cookie = secrets.token_urlsafe(32)
    if path.exists():
        found = re.search(r'^cookie_secret = "([\w-]+)"$', path.read_text(encoding="utf-8"), re.M)
        cookie = found.group(1) if found else cookie
    body = _GENERATED + "[auth]\n" + "".join(
        f"{key} = {_toml_string(value)}\n" for key, value in (
            ("redirect_uri", settings.redirect_uri), ("cookie_secret", cookie),
            ("client_id", settings.client_id), ("client_secret", settings.client_secret),
            ("server_metadata_url", settings.metadata_url)))
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(path.parent, 0o700)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(body)
    os.replace(tmp, path)
    return path


def remove_oidc_secrets(root: str | os.PathLike[str]) -> None:
    """Removes a ``secrets.toml`` this command wrote earlier (a start without OIDC settings)."""
    path = secrets_file(root)
    try:
        if path.read_text(encoding="utf-8").startswith(_GENERATED):
            path.unlink()
    except OSError:
        pass


def oidc_admins(env: Mapping[str, str] | None = None) -> frozenset[str]:
    """The e-mail addresses or names in ``$WORKBENCH_OIDC_ADMINS`` (lower case)."""
    env = os.environ if env is None else env
    return frozenset(a.strip().lower() for a in env.get(OIDC_ADMINS_ENV, "").split(",") if a.strip())


def sign_in_mode(root: str | os.PathLike[str], password: str = "", *, oidc: bool | None = None) -> str:
    """One of ``SIGN_IN_MODES`` for a server of workspace ``root``: ``oidc`` when its
    ``secrets.toml`` has an ``[auth]`` section (or ``oidc`` is True: the CLI is about to write
    it; False: it is about to be removed), else ``users`` when its users file has someone, else
    ``password`` when ``password`` (the shared one) is set, else ``none``."""
    if oidc is None:
        try:
            oidc = bool(re.search(r"^\[auth\]", secrets_file(root).read_text(encoding="utf-8"), re.M))
        except OSError:
            oidc = False
    if oidc:
        return "oidc"
    if users.has_users(root):
        return "users"
    return "password" if password else "none"
