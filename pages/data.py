"""Data: pick a bundled dataset or an upload (kept in the workspace); preview, distributions and
missing values, roles and types, dates and high-cardinality columns, split. The choice survives
a reload (``session.restore_context``)."""

from pathlib import Path

import pandas as pd
import streamlit as st

from estimator_workbench.data import datasets, profile
from estimator_workbench.ui import context, forms, session, signin

st.title("Data")
session.get_launcher()  # pre-starts the warm spare runner while the run is being set up
current = session.current_dataset()  # this session's choice, else the one saved in the workspace / URL
context.sync_url()  # the chosen dataset stays in the URL, also when this page stops early
workspace = session.workspace()
bundled = {d.name: d for d in datasets.list_bundled()}
current_ref = current["ref"]
current_upload = Path(current_ref["path"]).name if current_ref.get("kind") == "file" else None
# The widgets start from the session's dataset (a page switch or a reload forgets widget values);
# a widget's key is its identity, so these initial values never override what the user set.
source = st.radio("Source", ["Bundled sample", "Upload a file"], index=1 if current_upload else 0, horizontal=True,
                  key="data-source")
if source == "Bundled sample":
    names = list(bundled)
    name = st.selectbox("Dataset", names, key="data-name",
                        index=names.index(current_ref["name"] if current_ref.get("name") in bundled
                                          else session.DEFAULT_DATASET),
                        format_func=lambda n: f"{n} — {bundled[n].description}")
    ref, path = {"kind": "bundled", "name": name}, bundled[name].path
else:
    upload = st.file_uploader("Add a CSV or Parquet file (kept in the workspace)", type=["csv", "parquet"],
                              key="data-upload")
    if upload is not None and st.session_state.get("_data-saved-upload") != upload.file_id:
        try:
            with st.spinner(f"Checking and saving {upload.name}…"):
                saved_path = datasets.save_upload(workspace, upload.name, upload.getvalue(),
                                                  owner=signin.current_actor().name)
        except ValueError as exc:
            session.show_error(exc)
            st.stop()
        st.session_state["_data-saved-upload"] = upload.file_id
        st.session_state["data-upload-name"] = saved_path.name  # the new upload is the chosen one
    stored = [p.name for p in datasets.list_uploads(workspace)]
    if not stored:
        st.info("Choose a file: a header row, one column per feature and a label column.")
        st.stop()
    if st.session_state.get("data-upload-name") not in stored:
        st.session_state["data-upload-name"] = current_upload if current_upload in stored else stored[0]
    c1, c2 = st.columns([4, 1], vertical_alignment="bottom")
    chosen_upload = c1.selectbox(f"Uploaded files ({len(stored)} in the workspace)", stored, key="data-upload-name")
    with c2.popover("Delete…", icon=":material/delete:"):
        st.write(f"Delete {session.md(chosen_upload)} from the workspace? Runs that used it keep their "
                 "results but cannot be re-run on it.")
        if st.button("Delete the file", key="data-upload-delete", type="primary"):
            datasets.delete_upload(workspace, chosen_upload)
            st.session_state.pop("data-upload-name", None)
            st.rerun()
    path = datasets.upload_path(workspace, chosen_upload)
    ref = {"kind": "file", "path": str(path)}

read: dict[str, str] = {}  # how a CSV upload is read, where the analyst chose it: part of the ref the run loads
read_note = None
if ref["kind"] == "file" and path.suffix.lower() == ".csv":
    read_note = st.empty()
    saved_read = current_ref if current_ref.get("path") == ref["path"] else {}
    with st.expander("CSV format: delimiter and encoding", icon=":material/table_rows:",
                     expanded=any(k in saved_read for k in ("delimiter", "encoding"))):
        read = forms.csv_read_form(saved_read, key=f"data-csv-{path.name}")
    ref |= read
try:
    df = session.load_dataset_frame(path, **read)
except ValueError as exc:  # a delimiter or encoding chosen that does not fit the file
    session.show_error(exc)
    st.stop()
if read_note is not None:  # what was detected (or chosen): encoding, delimiter, decimal mark
    read_note.caption(session.md(profile.source_format_note(df) or ""))
try:  # the saved choice describes this data: its roles, encodings and split come back
    saved = datasets.DatasetSpec.from_dict(current) if current_ref == ref else None
except ValueError:
    saved = None
st.caption(f"{session.plural(len(df), 'row')} x {session.plural(df.shape[1], 'column')} · {session.md(path.name)}")
inferred = session.inferred_schema(path, **read)
if saved is not None and list(saved.schema.names) == list(inferred.names):
    inferred = saved.schema
preview, distributions, stats = st.tabs(["Preview", "Distributions and missing values", "Column summary"])
preview.dataframe(df.head(200), height=260, placeholder="")  # a missing value: a blank cell, not "None"
distributions.dataframe(session.dataset_distributions(path, inferred, **read), hide_index=True,
                        height=min(420, 35 * (df.shape[1] + 1) + 3),  # no empty rows below a few columns
                        column_config={"distribution": st.column_config.BarChartColumn(
                            "distribution", help="Numbers: a histogram over 20 bins. Dates: rows per month. "
                                                 "Text: the 10 most frequent values, then the rest.")})
with stats:  # a mean reads 5.843, not 5.843333333333334
    session.show_table(session.dataset_summary(path, **read), height=260)  # once per file, server-wide

st.subheader("Roles and types")
table = pd.DataFrame([{"column": c.name, "role": c.role, "type": c.dtype, "missing": c.n_missing}
                      for c in inferred.columns])
data_key = f"{path}|{read}" if read else str(path)  # other columns when read another way: other widgets
# Per dataset, the roles this session set: a widget's state is dropped when another dataset (or
# page) is shown, and coming back must not reset them (issue 28 item 7).
base = forms.kept_roles(table, data_key, editing=f"roles-{data_key}" in st.session_state)
edited = st.data_editor(base, hide_index=True, disabled=["column", "missing"], key=f"roles-{data_key}",
                        column_config={"role": st.column_config.SelectboxColumn(options=list(datasets.ROLES), required=True),
                                       "type": st.column_config.SelectboxColumn(options=list(datasets.DTYPES), required=True)})
forms.keep_roles(data_key, edited)
schema = datasets.Schema(tuple(datasets.ColumnSchema(r.column, r.role, r.type, int(r.missing))
                               for r in edited.itertuples()))

encodings, hash_buckets = forms.encodings_form(df, schema, saved, key=f"enc-{data_key}")

st.subheader("Split and missing values")
start = saved or datasets.DatasetSpec(ref, schema)  # the saved settings of this data, else the defaults
c1, c2, c3, c4 = st.columns(4)
eval_fraction = c1.slider("Held out for evaluation", 0.0, 0.5, float(start.eval_fraction), 0.05, key="data-eval")
seed = c2.number_input("Split seed", 0, 2**31 - 1, int(start.seed), key="data-seed")
stratify = c3.checkbox("Stratify by label", bool(start.stratify), key="data-stratify")
numeric_missing = c4.selectbox("Numeric missing values", list(datasets.NUMERIC_MISSING), key="data-missing",
                               index=list(datasets.NUMERIC_MISSING).index(start.numeric_missing))

label_missing = "error"
if schema.label in df.columns and df[schema.label].isna().any():
    label_missing = st.radio(
        f"Rows without a label ({int(df[schema.label].isna().sum()):,})", datasets.LABEL_MISSING,
        horizontal=True, key="data-label-missing", index=list(datasets.LABEL_MISSING).index(start.label_missing),
        format_func={"error": "Stop with an error", "drop": "Leave them out of training and evaluation"}.get,
        help="Left-out rows are still predicted on.")

problems = datasets.validate(df, schema, label_missing=label_missing)
if sum(c.role == "label" for c in schema.columns) > 1:
    problems.append("More than one column has the role 'label'; keep exactly one.")
if problems:
    session.show_error("This dataset cannot be used yet:", "\n".join(f"- {p}" for p in problems))
    st.stop()
spec = datasets.DatasetSpec(ref, schema, eval_fraction, int(seed), stratify, numeric_missing,
                            label_missing=label_missing, encodings=encodings, hash_buckets=hash_buckets)
used_rows = datasets.training_rows(df, spec)
train_part, eval_part = datasets.split(used_rows, spec)
st.caption(f"Split: {len(train_part):,} training rows · {len(eval_part):,} evaluation rows")
for note in (datasets.split_note(used_rows, spec),
             datasets.label_identifier_warning(schema.label, df[schema.label] if spec.task == "classification"
                                               and schema.label in df.columns else None)):
    if note:
        session.show_error(note, level="warning")
if eval_fraction > 0 and not len(eval_part):
    st.warning("The evaluation part is empty: evaluation and early stopping would have no rows. Raise "
               "'Held out for evaluation'" + (" or untick 'Stratify by label' (a small class keeps all its "
                                               "rows in training)" if stratify else "") + ".")
template = session.current_template()
context.set_dataset(spec.to_dict() | {"fingerprint": spec.fingerprint()})  # (and both in the URL)
warning = datasets.label_task_warning(template["name"], template["code"], schema.label,
                                      schema.column(schema.label).dtype if schema.label else None,
                                      df[schema.label] if schema.label in df.columns else None)
if warning:
    session.show_error(warning, level="warning")
st.success(f"Using **{session.md(ref.get('name') or path.name)}**: label **{session.md(schema.label)}** ({spec.task}), "
           f"{session.plural(len(spec.model_features(df)), 'feature')}. Next: pick a model.")
session.page_link("model", "Model →", icon=":material/code:")
