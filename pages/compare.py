"""Compare: overlay the curves of runs, the params that differ, param vs metric, one CSV."""

import pandas as pd
import streamlit as st

from workbench.store import metrics_store, paths
from workbench.store.records import TRAINING_ACTIONS
from workbench.ui import figures, live, session, tables

st.title("Compare runs")
registry = session.get_registry()
records = [r for r in registry.list_runs() if r.action in TRAINING_ACTIONS]
if len(records) < 1:
    st.info("No training runs yet. Launch some on the Train page.")
    st.stop()
by_id = {r.run_id: r for r in records}
chosen = st.multiselect("Runs", list(by_id), default=list(by_id)[:2], key="cmp-runs",
                        format_func=lambda i: f"{by_id[i].name} · {i}")
runs = [by_id[i] for i in chosen]
if not runs:
    st.stop()

controls = live.chart_controls("cmp")
frames = []
for r in runs:
    frame = metrics_store.read_all(paths.run_dir(session.workspace(), r.run_id) / paths.METRICS_FILE)
    frames.append(metrics_store.downsample(frame, live.MAX_POINTS).assign(run=r.run_id))
data = pd.concat(frames, ignore_index=True)
labels = figures.unique_run_labels([(r.run_id, r.name) for r in runs])  # "name · r-1a2b3c" when names repeat
st.plotly_chart(figures.curves_figure(data, run_labels=labels, **controls), key="cmp-curves")

st.subheader("Params that differ")
table = tables.runs_frame(runs)
table["name"] = table["run"].map(labels)
diff = [c for c in table.columns if c.startswith("param: ")]
st.dataframe(table[["run", "name", "status", "step", "last loss", "best eval", *diff]], hide_index=True)
if diff:
    c1, c2 = st.columns(2)
    param = c1.selectbox("Parameter", diff, format_func=lambda c: c.removeprefix("param: "))
    metric = c2.selectbox("Metric", ["last loss", "best eval"])
    st.plotly_chart(figures.param_scatter_figure(table, param, metric, label_column="name"), key="cmp-scatter")
else:
    st.caption("The selected runs have the same params.")
st.download_button("Download all series (CSV)", data=tables.series_csv(runs, session.workspace()),
                   file_name="series.csv", mime="text/csv", on_click="ignore", icon=":material/download:")
