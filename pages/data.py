"""Data: pick a bundled dataset or upload one; preview, summary, roles and types, split."""

import pandas as pd
import streamlit as st

from workbench.data import datasets
from workbench.ui import session

st.title("Data")
session.get_launcher()  # pre-starts the warm spare runner while the run is being set up
bundled = {d.name: d for d in datasets.list_bundled()}
source = st.radio("Source", ["Bundled sample", "Upload a file"], horizontal=True, key="data-source")
if source == "Bundled sample":
    names = list(bundled)
    name = st.selectbox("Dataset", names, index=names.index(session.DEFAULT_DATASET), key="data-name",
                        format_func=lambda n: f"{n} — {bundled[n].description}")
    ref, path = {"kind": "bundled", "name": name}, bundled[name].path
else:
    upload = st.file_uploader("CSV or Parquet file", type=["csv", "parquet"], key="data-upload")
    if upload is None:
        st.info("Choose a file: a header row, one column per feature and a label column.")
        st.stop()
    try:
        with st.spinner(f"Checking and saving {upload.name}…"):
            path = datasets.save_upload(session.workspace(), upload.name, upload.getvalue())
    except ValueError as exc:
        session.show_error(exc)
        st.stop()
    ref = {"kind": "file", "path": str(path)}

df = session.load_dataset_frame(path)
st.caption(f"{len(df):,} rows x {df.shape[1]} columns · {session.md(path.name)}")
preview, stats = st.tabs(["Preview", "Column summary"])
preview.dataframe(df.head(200), height=260)
stats.dataframe(datasets.summary(df), height=260)

st.subheader("Roles and types")
inferred = datasets.infer_schema(df)
table = pd.DataFrame([{"column": c.name, "role": c.role, "type": c.dtype, "missing": c.n_missing}
                      for c in inferred.columns])
edited = st.data_editor(table, hide_index=True, disabled=["column", "missing"], key=f"roles-{path}",
                        column_config={"role": st.column_config.SelectboxColumn(options=list(datasets.ROLES), required=True),
                                       "type": st.column_config.SelectboxColumn(options=list(datasets.DTYPES), required=True)})
schema = datasets.Schema(tuple(datasets.ColumnSchema(r.column, r.role, r.type, int(r.missing))
                               for r in edited.itertuples()))

st.subheader("Split and missing values")
c1, c2, c3, c4 = st.columns(4)
eval_fraction = c1.slider("Held out for evaluation", 0.0, 0.5, 0.2, 0.05, key="data-eval")
seed = c2.number_input("Split seed", 0, 2**31 - 1, 42, key="data-seed")
stratify = c3.checkbox("Stratify by label", True, key="data-stratify")
numeric_missing = c4.selectbox("Numeric missing values", ["mean", "zero", "drop"], key="data-missing")

label_missing = "error"
if schema.label in df.columns and df[schema.label].isna().any():
    label_missing = st.radio(
        f"Rows without a label ({int(df[schema.label].isna().sum()):,})", datasets.LABEL_MISSING,
        horizontal=True, key="data-label-missing",
        format_func={"error": "Stop with an error", "drop": "Leave them out of training and evaluation"}.get,
        help="Left-out rows are still predicted on.")

problems = datasets.validate(df, schema, label_missing=label_missing)
if sum(c.role == "label" for c in schema.columns) > 1:
    problems.append("More than one column has the role 'label'; keep exactly one.")
if problems:
    session.show_error("This dataset cannot be used yet:", "\n".join(f"- {p}" for p in problems))
    st.stop()
spec = datasets.DatasetSpec(ref, schema, eval_fraction, int(seed), stratify, numeric_missing,
                            label_missing=label_missing)
train_part, eval_part = datasets.split(datasets.training_rows(df, spec), spec)
st.caption(f"Split: {len(train_part):,} training rows · {len(eval_part):,} evaluation rows")
if eval_fraction > 0 and not len(eval_part):
    st.warning("The evaluation part is empty: evaluation and early stopping would have no rows. Raise "
               "'Held out for evaluation'" + (" or untick 'Stratify by label' (a small class keeps all its "
                                               "rows in training)" if stratify else "") + ".")
chosen = spec.to_dict() | {"fingerprint": spec.fingerprint()}
st.session_state["dataset"] = chosen
st.success(f"Using **{session.md(ref.get('name') or path.name)}**: label **{session.md(schema.label)}** ({spec.task}), "
           f"{len(schema.features)} features. Next: pick a model.")
session.page_link("model", "Model →", icon=":material/code:")
