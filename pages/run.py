"""Run detail: name, notes and progress (ETA / queue place); live status and charts, eval results,
checkpoints, evaluation plots, log, bundle."""

import streamlit as st

from estimator_workbench.store import paths
from estimator_workbench.ui import forms, live, panels, rerun_form, runs_hub, session

st.title("Run")
registry = session.get_registry()
records = registry.list_runs()
if runs_hub.trashed_notice(session.selected_run_id()):
    st.stop()
wanted = session.selected_run_id()
if wanted and records and wanted not in {r.run_id for r in records}:  # never silently another run
    st.warning(f"Run {session.md(wanted)} is not in this workspace (deleted for good?): showing the newest "
               "run instead.", icon=":material/warning:")
record = forms.run_picker(records)
if record is None:
    st.info("No runs yet. Launch one on the Train page.")
    session.page_link("train", "Train →", icon=":material/play_arrow:")
    st.stop()

runs_hub.show_notice()  # the outcome of a confirmed Cancel or Delete
runs_hub.run_header(record)
panels.run_actions(record, key="detail")
rerun_form.rerun_button(record)  # the Train form filled with this run's settings (issue 28 item 10)
controls = live.chart_controls("detail")
live.live_metrics(record.run_id, controls)
if record.action == "predict":  # its output is the predictions file, as on the Predict page
    st.subheader("Predictions")
    live.prediction_result(record.run_id)

folder = registry.run_dir(record.run_id)
evals, ckpts, plots, params, log, again = st.tabs(
    ["Metrics summary", "Checkpoints", "Evaluation plots", "Params", "Worker log", "Reproduce"])
with evals:
    live.metrics_summary(record.run_id)  # live like the charts while the run is active
with ckpts:
    panels.checkpoints_panel(record)
with plots:
    panels.evaluation_plots(record)
with params:
    st.json({"params": record.params, "run_config": record.run_config, "schedule": record.schedule,
             "dataset": record.dataset.get("ref")}, expanded=False)
with log:
    log_path = folder / paths.WORKER_LOG
    st.code(log_path.read_text("utf-8", "replace")[-20000:] if log_path.exists() else "(no log yet)")
with again:
    panels.reproduce_panel(record)
panels.mlflow_status(record)  # "MLflow: synced to ..." / "not reachable at ..., will retry" (issue 27)
panels.serve_panel(record)  # the `serve` command and a curl :predict example (issue 27)
if record.traceback:  # the error itself is in the live panel above
    with st.expander("Traceback", expanded=record.status == "failed"):
        st.code(record.traceback, language=None)
st.download_button("Download reproducible bundle (.zip)", data=panels.bundle_bytes(record.run_id),
                   file_name=f"{record.run_id}.zip", mime="application/zip", on_click="ignore",
                   icon=":material/download:")
if record.action in ("train", "train_and_evaluate"):
    from estimator_workbench.execution.notebook import notebook_bytes

    st.download_button("Open as notebook (.ipynb)", data=lambda: notebook_bytes(session.workspace(), record.run_id),
                       file_name=f"{record.run_id}.ipynb", mime="application/x-ipynb+json", on_click="ignore",
                       icon=":material/description:")
