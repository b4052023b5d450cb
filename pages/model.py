"""Model: pick a template, view and edit its code, save it, run the pre-flight check."""

import streamlit as st

from estimator_workbench import templates
from estimator_workbench.ui import context, forms, session, tf_import_form

st.title("Model")
session.get_launcher()  # pre-starts the warm spare runner while the run is being set up
infos = {t.name: t for t in templates.list_templates(session.workspace())}
current = session.current_template()
names = list(infos)
base = current["name"] if current["name"] in infos else session.DEFAULT_TEMPLATE
name = st.selectbox("Template", names, index=names.index(base), key="model-name",
                    format_func=lambda n: f"{n} ({infos[n].kind})")
info = infos[name]
st.caption(session.md(info.description) if info.description else "(no description)")
if info.error:
    session.show_error(info.error)

forms.edit_code("model_fn code", session.template_code(name, info.code), key=session.editor_key(name),
             on_change=lambda text: session.apply_template_edit(name, text))
st.caption("Edits take effect when you click outside the editor, press **Apply** or Ctrl+Enter; "
           "the pre-flight check and Train use the code applied last.")
template = session.use_template(name, session.template_code(name, info.code))  # this one is now the chosen template
context.sync_url()
code, problem, schema = template["code"], template["error"], template["params"]
if session.is_edited(name):
    st.button("Revert to the saved template", icon=":material/undo:", key=f"revert-{name}",
              on_click=session.revert_template, args=(name, info.code),
              help="Drops this session's edits of the template and shows its saved code again.")
if problem:
    session.show_error(problem)
else:
    with st.expander(f"Params schema ({session.plural(len(schema), 'param')})"):
        st.json(schema, expanded=False)

c1, c2 = st.columns(2)
with c1.form("save-template"):
    new_name = st.text_input("Save as a new template", placeholder="my_mlp")
    if st.form_submit_button("Save", icon=":material/save:"):
        try:
            saved = templates.save_template(session.workspace(), new_name, code)
            session.use_template(saved.name, saved.code)
            st.success(f"Saved as {session.md(repr(saved.name))} in the workspace.")
        except (ValueError, TypeError) as exc:
            session.show_error(exc)
with c2:
    st.write("Pre-flight check: runs `model_fn` in TRAIN, EVAL and PREDICT on a tiny batch of "
             "the chosen dataset, in a separate process.")
    if st.button("Run pre-flight check", icon=":material/fact_check:", disabled=bool(problem)):
        from estimator_workbench.execution.preflight import run_preflight

        with st.spinner("Running the model_fn on a tiny batch…"):
            report = run_preflight(code, session.current_dataset(), {}, timeout=90, template_name=name)
        context.set_preflight(report.to_dict() | {"summary": report.summary(), "first_error": report.first_error()},
                              code, name)

report = context.current_preflight(code)  # a result of other code (edited since) is cleared
if report:
    err = report.get("first_error") or {}
    if report["ok"]:
        st.success(session.md(report["summary"].splitlines()[0]))
    else:  # the check's message and traceback quote user code: shown as text
        session.show_error(report["summary"], err.get("traceback"))
    tabs = st.tabs(["TRAIN", "EVAL", "PREDICT"])
    for tab, mode in zip(tabs, ("train", "eval", "predict")):
        tab.json(report["modes"].get(mode, {"skipped": "not reached"}))
if not problem:
    tf_import_form.import_section(template, session.current_dataset())
session.page_link("train", "Train →", icon=":material/play_arrow:")
