"""``estimator-workbench`` (estimator_workbench._entry): ``--version`` from the metadata, and a clear message
naming the ``ui`` extra when it is not installed (issue 17, items 3 and 5)."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata

from estimator_workbench import _entry


def test_version_comes_from_the_installed_metadata(capsys):
    assert _entry.main(["--version"]) == 0
    assert capsys.readouterr().out == f"estimator-workbench {metadata.version('estimator-workbench')}\n"


def test_missing_ui_extra_is_named_with_the_install_command(monkeypatch, capsys):
    real_version = metadata.version

    def version(name):
        if name in ("plotly", "streamlit-code-editor"):
            raise metadata.PackageNotFoundError(name)
        return real_version(name)

    monkeypatch.setattr(_entry.metadata, "version", version)
    assert _entry.missing_extra_packages("ui") == ["plotly", "streamlit-code-editor"]
    assert _entry.main(["runs"]) == 2
    err = capsys.readouterr().err
    assert "needs the 'ui' extra" in err
    assert "missing: plotly, streamlit-code-editor" in err
    assert "pip install 'estimator-workbench[ui]'" in err


def test_with_the_ui_extra_installed_nothing_is_missing():
    assert _entry.missing_extra_packages("ui") == []
    assert _entry.missing_extra_packages("no-such-extra") == []


def test_console_script_runs_the_cli(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-c", "import sys; from estimator_workbench._entry import main; sys.exit(main())",
         "--workspace", str(tmp_path / "ws"), "runs"],
        capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
