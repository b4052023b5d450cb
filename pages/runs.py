"""Runs, the hub: filter, sort and select runs; compare, tag or delete (to the trash) the selected
ones; stop, cancel, resume, rename and tag one run; restore runs from the trash."""

import streamlit as st

from estimator_workbench.ui import forms, panels, runs_hub, session, settings

st.title("Runs")
refreshed = runs_hub.refreshed_by_watcher()
# Polled (reap finished runners, start queued runs) except on the watcher's redraw, which only reads.
launcher = session.get_launcher(poll=not refreshed)
registry = session.get_registry()
drawn = registry.change_stamp()  # before the read: a change in between redraws once more
records = registry.list_runs()
runs_hub.refresh_when_changed(drawn)  # a run from Python, the CLI or another browser shows up
runs_hub.show_notice()
shown, metric = runs_hub.runs_filters(records)
groups = runs_hub.helper_grouping(shown)  # evaluate/predict runs under their run (issue 28 item 9)
shown = groups.rows
st.caption(f"{len(shown)} of {len(records)} runs · click a column header to sort · tick rows to select")
if shown:
    selected = runs_hub.runs_table(shown, records, metric, groups, keep_selection=refreshed)
    runs_hub.bulk_actions(selected)

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
else:
    st.info("No runs match." if records else "No runs yet. Launch one on the Train page.")
runs_hub.trash_section()
runs_hub.audit_section()
settings.concurrency_settings(launcher)  # local runs at once, helper slots (issue 28 item 8)
