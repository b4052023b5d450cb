"""Compare: the runs in ``?runs=`` (or picked here) overlaid, what differs between them, the
best run for a chosen metric, parallel coordinates and a param scatter, one CSV; live while any
of them runs."""

import streamlit as st

from estimator_workbench.store.records import MODEL_ACTIONS
from estimator_workbench.ui import compare, compare_eval, live, session, tables

st.title("Compare runs")
registry = session.get_registry()
records = [r for r in registry.list_runs() if r.action in MODEL_ACTIONS]
if len(records) < 1:
    st.info("No training runs yet. Launch some on the Train page.")
    st.stop()
runs = compare.pick_runs(records)
if not runs:
    st.stop()
compare_eval.run_links(runs)  # each run's page and notes (issue 28 item 10)
controls = live.chart_controls("cmp")
colours = compare_eval.colour_by_param(runs)  # runs grouped by a param's value (issue 28 item 10)
if colours:
    controls = {**controls, "run_colours": colours}
compare.compare_view(runs, session.workspace(), controls, interval=live.LIVE_INTERVAL_S)
st.download_button("Download all series (CSV)", data=tables.series_csv(runs, session.workspace()),
                   file_name="series.csv", mime="text/csv", on_click="ignore", icon=":material/download:")
compare_eval.class_metrics_view(runs)  # side-by-side confusion matrices, per-class table (issue 28 item 6)
