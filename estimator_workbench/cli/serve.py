"""``estimator-workbench ui``: the Streamlit server's command line, and the warning when it is
exposed beyond this machine."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

from estimator_workbench import resources
from estimator_workbench.cli.usage import PROG as _PROG
from estimator_workbench.cli.usage import UsageError
from estimator_workbench.ui import access, auth_config

__all__ = ['INSECURE_WARNING', 'NO_TOKEN_WARNING', 'allowed_hosts', 'exposure_warning', 'ui_command']

NO_TOKEN_WARNING = ("warning: --no-token: the UI will not ask for its access token, so every "
                    "account on this machine (127.0.0.1 is reachable by all of them) can open it "
                    "and run arbitrary Python code as this user (templates are code).")


INSECURE_WARNING = ("warning: --insecure-no-auth: the UI listens beyond this machine and nobody "
                    "signs in: whoever reaches it (and has the token) runs code here as this user.")


_UI_SCRIPT = resources.ui_server()  # the installed package's, whatever the cwd


_LOOPBACK = ("127.0.0.1", "localhost", "::1")
# Addresses that bind every interface: the Host names they answer to are this machine's names.
_WILDCARD = ("", "0.0.0.0", "::")


def allowed_hosts(address: str = "127.0.0.1", extra: tuple[str, ...] | list[str] = ()) -> list[str]:
    """The ``Host`` names the UI accepts (Streamlit's ``server.allowedHosts``): the names of the
    address it is bound to, plus ``extra`` (``--allowed-host``). Anything else -- a DNS-rebinding
    page whose Host is ``rebind.attacker.test`` -- is refused on the websocket.

    Example:
        >>> allowed_hosts("127.0.0.1")
        ['localhost', '127.0.0.1', '::1']
    """
    hosts = list(_LOOPBACK[1:2] + _LOOPBACK[:1] + _LOOPBACK[2:])
    bound = address.strip().strip("[]")
    if bound in _WILDCARD:
        hosts += [socket.gethostname(), socket.getfqdn()]
    else:
        hosts.append(bound)
    hosts += [h.strip() for h in extra if h.strip()]
    return list(dict.fromkeys(h.lower() for h in hosts if h))


def ui_command(address: str = "127.0.0.1", port: int | None = None,
               extra_hosts: tuple[str, ...] | list[str] = ()) -> list[str]:
    """The command that starts the Streamlit UI (bound to loopback unless told otherwise).

    XSRF protection and the Host allow-list are passed explicitly so that no config file can turn
    them off. It serves ``estimator_workbench/ui/asgi.py`` (the app behind the access gate), which
    prints the URL with the token; Streamlit's own welcome (a URL without it) is hidden.
    """
    cmd = [sys.executable, "-m", "streamlit", "run", str(_UI_SCRIPT),
           "--server.address", address, "--server.headless", "true",
           "--server.enableXsrfProtection", "true", "--server.enableCORS", "true",
           "--browser.gatherUsageStats", "false", "--logger.hideWelcomeMessage", "true"]
    for host in allowed_hosts(address, extra_hosts):
        cmd += ["--server.allowedHosts", host]
    if port is not None:
        cmd += ["--server.port", str(port)]
    return cmd


def exposure_warning(address: str) -> str | None:
    """The warning printed when the UI is bound beyond loopback (None for loopback)."""
    if address.strip().strip("[]") in _LOOPBACK:
        return None
    password = "is set" if os.environ.get("WORKBENCH_PASSWORD") else "is NOT set"
    return (f"warning: the UI will listen on {address!r}, not only on 127.0.0.1: anyone who can "
            "reach this port can run arbitrary Python code on this machine as this user "
            f"(templates are code). WORKBENCH_PASSWORD {password}; put the UI behind HTTPS and a "
            "firewall (see docs/RELIABILITY.md, 'Security').")


def _is_loopback(address: str) -> bool:
    return address.strip().strip("[]") in _LOOPBACK


def cmd_ui(args: argparse.Namespace, root: Path) -> int:
    cmd = ui_command(args.address, args.port, getattr(args, "allowed_host", None) or ())
    try:
        oidc = auth_config.OidcSettings.from_env(
            metadata_url=getattr(args, "oidc_metadata_url", None), client_id=getattr(args, "oidc_client_id", None),
            redirect_uri=getattr(args, "oidc_redirect_uri", None))
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if oidc is not None:
        try:
            import authlib  # noqa: F401  (st.login needs it)
        except ImportError:
            raise UsageError("OpenID Connect sign-in needs Authlib: install 'estimator-workbench[auth]'.") from None
        cmd += ["--secrets.files", str(auth_config.secrets_file(root))]
    mode = auth_config.sign_in_mode(root, os.environ.get("WORKBENCH_PASSWORD", ""), oidc=oidc is not None)
    insecure = getattr(args, "insecure_no_auth", False)
    if not _is_loopback(args.address) and mode == "none" and not insecure:
        raise UsageError(
            f"refusing to listen on {args.address!r} without sign-in: anyone who reaches it could run "
            f"code here as this user. Set up sign-in (`{_PROG} users add NAME`, or --oidc-metadata-url "
            "with --oidc-client-id and $WORKBENCH_OIDC_CLIENT_SECRET, or $WORKBENCH_PASSWORD for one "
            "person), bind 127.0.0.1, or pass --insecure-no-auth if you know why.")
    warning = exposure_warning(args.address)
    if warning:
        print(f"{_PROG}: {warning}", file=sys.stderr)
    if oidc is not None and not _is_loopback(args.address) and "//localhost:" in oidc.redirect_uri:
        print(f"{_PROG}: warning: the identity provider sends people back to {oidc.redirect_uri}, which "
              "only works in a browser on this machine: pass --oidc-redirect-uri with the address "
              "people open (and register it at the provider).", file=sys.stderr)
    if insecure and not _is_loopback(args.address) and mode == "none":
        print(f"{_PROG}: {INSECURE_WARNING}", file=sys.stderr)
    if getattr(args, "no_token", False):
        print(f"{_PROG}: {NO_TOKEN_WARNING}", file=sys.stderr)
    if args.dry_run:
        print(" ".join(cmd))
        return 0
    if not Path(cmd[4]).exists():
        raise UsageError(f"The UI entry point {cmd[4]} is missing; is the workbench installed "
                         "completely?")
    if oidc is not None:
        auth_config.write_oidc_secrets(root, oidc)
    else:
        auth_config.remove_oidc_secrets(root)
    env = dict(os.environ, WORKBENCH_HOME=str(root))
    env.pop(auth_config.INSECURE_ENV, None)  # only the flag says it, never a stale variable
    if insecure:
        env[auth_config.INSECURE_ENV] = "1"
    env.pop("WORKBENCH_OIDC_CLIENT_SECRET", None)  # it is in the 0600 secrets.toml
    # .streamlit/config.toml is read from the cwd only: its settings that matter come as
    # Streamlit's environment variables instead (an explicit setting of the user's still wins).
    env.setdefault("STREAMLIT_SERVER_FILE_WATCHER_TYPE", "none")
    env.setdefault("STREAMLIT_CLIENT_TOOLBAR_MODE", "viewer")
    # Only the flag turns the token off, never a variable left in the user's shell.
    env.pop(access.NO_TOKEN_ENV, None)
    if getattr(args, "no_token", False):
        env[access.NO_TOKEN_ENV] = "1"
    # The password never enters the server's environment (readable by user code through
    # /proc/<pid>/environ): it goes through a 0600 file that the server deletes once read.
    password = env.pop("WORKBENCH_PASSWORD", "")
    if password:
        fd, secret_path = tempfile.mkstemp(prefix="workbench-password-")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:  # mkstemp creates it 0600
            handle.write(password)
        env["WORKBENCH_PASSWORD_FILE"] = secret_path
    try:
        return _serve(cmd, env)
    finally:
        if password:  # the server deletes it once read; this covers a server that never started
            Path(secret_path).unlink(missing_ok=True)


def _serve(cmd: list[str], env: dict[str, str]) -> int:
    """Runs the server and forwards SIGTERM/SIGHUP/SIGINT to it, so that stopping this command
    never leaves the server behind listening on its port."""
    proc = subprocess.Popen(cmd, env=env)

    def forward(signum: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signum)

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)}
    try:
        while True:
            with contextlib.suppress(KeyboardInterrupt):
                return proc.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
