"""``estimator-workbench ui``: the Streamlit server's command line, and the warning when it is
exposed beyond this machine."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from workbench import resources
from workbench.cli.usage import PROG as _PROG
from workbench.cli.usage import UsageError

__all__ = ['exposure_warning', 'ui_command']


_UI_SCRIPT = resources.ui_script()  # the installed package's, whatever the cwd


_LOOPBACK = ("127.0.0.1", "localhost", "::1")


def ui_command(address: str = "127.0.0.1", port: int | None = None) -> list[str]:
    """The command that starts the Streamlit UI (bound to loopback unless told otherwise).

    XSRF protection is passed explicitly so that no config file can turn it off.
    """
    cmd = [sys.executable, "-m", "streamlit", "run", str(_UI_SCRIPT),
           "--server.address", address, "--server.headless", "true",
           "--server.enableXsrfProtection", "true", "--server.enableCORS", "true",
           "--browser.gatherUsageStats", "false"]
    if port is not None:
        cmd += ["--server.port", str(port)]
    return cmd


def exposure_warning(address: str) -> str | None:
    """The warning printed when the UI is bound beyond loopback (None for loopback)."""
    if address.strip() in _LOOPBACK:
        return None
    password = "is set" if os.environ.get("WORKBENCH_PASSWORD") else "is NOT set"
    return (f"warning: the UI will listen on {address!r}, not only on 127.0.0.1: anyone who can "
            "reach this port can run arbitrary Python code on this machine as this user "
            f"(templates are code). WORKBENCH_PASSWORD {password}; put the UI behind HTTPS and a "
            "firewall (see docs/RELIABILITY.md, 'Security').")


def _cmd_ui(args: argparse.Namespace, root: Path) -> int:
    cmd = ui_command(args.address, args.port)
    warning = exposure_warning(args.address)
    if warning:
        print(f"{_PROG}: {warning}", file=sys.stderr)
    if args.dry_run:
        print(" ".join(cmd))
        return 0
    if not Path(cmd[4]).exists():
        raise UsageError(f"The UI entry point {cmd[4]} is missing; is the workbench installed "
                         "completely?")
    env = dict(os.environ, WORKBENCH_HOME=str(root))
    # .streamlit/config.toml is read from the cwd only: its settings that matter come as
    # Streamlit's environment variables instead (an explicit setting of the user's still wins).
    env.setdefault("STREAMLIT_SERVER_FILE_WATCHER_TYPE", "none")
    env.setdefault("STREAMLIT_CLIENT_TOOLBAR_MODE", "viewer")
    # The server replaces this process (same pid): a SIGTERM or Ctrl-C sent to
    # `estimator-workbench` reaches Streamlit itself, so no server is left listening behind it.
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(cmd[0], cmd, env)
    return 0  # not reached
