"""Runs: the table of runs with filter and sort; stop, cancel, resume, delete, rename and tag."""

import streamlit as st

from workbench.store.records import STATUSES
from workbench.ui import forms, panels, session, tables

st.title("Runs")
session.get_launcher()  # reap finished runners and start queued runs
registry = session.get_registry()
records = registry.list_runs()
c1, c2 = st.columns([2, 3])
statuses = c1.multiselect("Status", STATUSES, key="runs-status")
text = c2.text_input("Filter (regex on id, name, template, tags)", key="runs-filter")
shown = tables.filter_runs(records, statuses, text)
st.caption(f"{len(shown)} of {len(records)} runs · click a column header to sort")
if not shown:
    st.info("No runs match." if records else "No runs yet. Launch one on the Train page.")
    st.stop()
st.dataframe(tables.runs_frame(shown), hide_index=True, key="runs-table",
             column_config={"last loss": st.column_config.NumberColumn(format="%.4g"),
                            "best eval": st.column_config.NumberColumn(format="%.4g"),
                            "created": st.column_config.DatetimeColumn(format="YYYY-MM-DD HH:mm:ss")})

st.subheader("Act on a run")
record = forms.run_picker(shown, key="runs-picker")
panels.run_actions(record, key="runs")
with st.form("rename-tag"):
    c1, c2 = st.columns(2)
    name = c1.text_input("Name", value=record.name)
    tags = c2.text_input("Tags (comma-separated)", value=", ".join(record.tags))
    if st.form_submit_button("Save name and tags"):
        try:
            registry.rename(record.run_id, name)
            registry.set_tags(record.run_id, [t for t in tags.split(",")])
            st.rerun()
        except (ValueError, TypeError) as exc:
            session.show_error(exc)
session.page_link("run", "Open the run's page →", icon=":material/monitoring:", run_id=record.run_id)
