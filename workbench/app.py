"""The Streamlit entry point of the workbench: a router over ``../pages/*.py``.

Start it with ``estimator-workbench`` (or ``streamlit run workbench/app.py``). Page titles and
icons live here; each page is a thin script that reads widgets, calls ``workbench`` and renders.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from workbench import ui

__all__ = ["PAGES_DIR", "main"]

PAGES_DIR = Path(__file__).resolve().parent.parent / "pages"

# (short name, file, title, icon); the first one is the landing page.
_PAGES = (
    ("data", "data.py", "Data", ":material/table_chart:"),
    ("model", "model.py", "Model", ":material/code:"),
    ("train", "train.py", "Train", ":material/play_arrow:"),
    ("runs", "runs.py", "Runs", ":material/list:"),
    ("run", "run.py", "Run detail", ":material/monitoring:"),
    ("compare", "compare.py", "Compare", ":material/compare_arrows:"),
    ("predict", "predict.py", "Predict", ":material/batch_prediction:"),
)


def main() -> None:
    """Builds the navigation and runs the selected page."""
    st.set_page_config(page_title="Estimator Workbench", page_icon=":material/model_training:",
                       layout="wide")
    pages = {name: st.Page(PAGES_DIR / file, title=title, icon=icon, url_path=name,
                           default=(i == 0))
             for i, (name, file, title, icon) in enumerate(_PAGES)}
    ui.register_pages(pages)
    nav = st.navigation({"Build": [pages["data"], pages["model"], pages["train"]],
                         "Analyse": [pages["runs"], pages["run"], pages["compare"], pages["predict"]]})
    st.sidebar.caption(f"Workspace: `{ui.workspace()}`")
    nav.run()


main()
