"""Predict: a run and checkpoint, a bundled or uploaded dataset -> predictions CSV; one row too."""

import pandas as pd
import streamlit as st

from estimator_workbench.data import datasets
from estimator_workbench.store import paths
from estimator_workbench.store.records import MODEL_ACTIONS
from estimator_workbench.ui import forms, live, panels, session, tables

st.title("Predict")
registry = session.get_registry()
trained = [r for r in registry.list_runs() if r.action in MODEL_ACTIONS
           and tables.has_checkpoint(registry.run_dir(r.run_id))]
if not trained:
    st.info("No trained run with a checkpoint yet. Train one first.")
    st.stop()
record = forms.run_picker(trained, label="Model (run)", key="pred-run")
ckpts = tables.list_checkpoints(registry.run_dir(record.run_id))["file"].tolist()
ckpt = st.selectbox("Checkpoint", ckpts, index=len(ckpts) - 1, key="pred-ckpt",
                    format_func=lambda f: panels.checkpoint_text(panels.checkpoint_step(f)))
base = datasets.DatasetSpec.from_dict(record.dataset)

single, batch = st.tabs(["Dataset", "Single row"])
with batch:
    info_cols = [c.name for c in base.schema.columns if c.role == "feature"]
    with st.form("single-row"):
        sample = session.load_dataset_frame(base.path, **base.read_options)
        # typed: numbers, selects of the seen categories, dates (labels escaped: column names are user text)
        row = forms.single_row_inputs(sample, info_cols, {c.name: c.dtype for c in base.schema.columns},
                                      key=f"row-{record.run_id}")
        one = st.form_submit_button("Predict this row")
    upload_bytes = pd.DataFrame([row]).to_csv(index=False).encode() if one else None
    upload_name = "single_row.csv"
with single:
    source = st.radio("Data", ["The run's dataset", "Upload a file"], horizontal=True, key="pred-source")
    file = st.file_uploader("CSV or Parquet", type=["csv", "parquet"], key="pred-upload") if source != "The run's dataset" else None
    go = st.button("Predict", type="primary", icon=":material/batch_prediction:", key="pred-go")
    if go and file is not None:
        upload_bytes, upload_name = file.getvalue(), file.name
    elif go:
        upload_bytes, upload_name = None, None
if one or go:
    try:
        dataset = panels.prediction_dataset(base, upload_name, upload_bytes, typed_row=one)
    except ValueError as exc:
        session.show_error(exc)
        st.stop()
    what = "1 row" if one else (upload_name or "dataset")  # a typed row is no upload (issue 28 item 9)
    child = panels.launch_from(record, "predict", str(registry.run_dir(record.run_id) / paths.MODEL_DIR / ckpt),
                           dataset=dataset, name=f"predict {what} with {record.name}")
    st.session_state["pred-child"] = child.run_id

if st.session_state.get("pred-child"):
    live.prediction_result(st.session_state["pred-child"])
