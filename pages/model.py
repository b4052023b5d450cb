"""Model: pick a template, view and edit its code, save it, run the pre-flight check."""

import streamlit as st

from workbench import templates, ui

st.title("Model")
ui.get_launcher()  # pre-starts the warm spare runner while the run is being set up
infos = {t.name: t for t in templates.list_templates(ui.workspace())}
current = ui.current_template()
names = list(infos)
base = current["name"] if current["name"] in infos else ui.DEFAULT_TEMPLATE
name = st.selectbox("Template", names, index=names.index(base), key="model-name",
                    format_func=lambda n: f"{n} ({infos[n].kind})")
info = infos[name]
st.caption(ui.md(info.description) if info.description else "(no description)")
if info.error:
    ui.show_error(info.error)

ui.edit_code("model_fn code", ui.template_code(name, info.code), key=ui.editor_key(name),
             on_change=lambda text: ui.apply_template_edit(name, text))
st.caption("Edits take effect when you click outside the editor, press **Apply** or Ctrl+Enter; "
           "the pre-flight check and Train use the code applied last.")
template = ui.use_template(name, ui.template_code(name, info.code))  # this one is now the chosen template
code, problem, schema = template["code"], template["error"], template["params"]
if ui.is_edited(name):
    st.button("Revert to the saved template", icon=":material/undo:", key=f"revert-{name}",
              on_click=ui.revert_template, args=(name, info.code),
              help="Drops this session's edits of the template and shows its saved code again.")
if problem:
    ui.show_error(problem)
else:
    with st.expander(f"Params schema ({len(schema)} params)"):
        st.json(schema, expanded=False)

c1, c2 = st.columns(2)
with c1.form("save-template"):
    new_name = st.text_input("Save as a new template", placeholder="my_mlp")
    if st.form_submit_button("Save", icon=":material/save:"):
        try:
            saved = templates.save_template(ui.workspace(), new_name, code)
            ui.use_template(saved.name, saved.code)
            st.success(f"Saved as {ui.md(repr(saved.name))} in the workspace.")
        except (ValueError, TypeError) as exc:
            ui.show_error(exc)
with c2:
    st.write("Pre-flight check: runs `model_fn` in TRAIN, EVAL and PREDICT on a tiny batch of "
             "the chosen dataset, in a separate process.")
    if st.button("Run pre-flight check", icon=":material/fact_check:", disabled=bool(problem)):
        from workbench.preflight import run_preflight

        with st.spinner("Running the model_fn on a tiny batch…"):
            report = run_preflight(code, ui.current_dataset(), {}, timeout=90, template_name=name)
        st.session_state["preflight"] = report.to_dict() | {"summary": report.summary(),
                                                            "first_error": report.first_error()}

report = st.session_state.get("preflight")
if report:
    err = report.get("first_error") or {}
    if report["ok"]:
        st.success(ui.md(report["summary"].splitlines()[0]))
    else:  # the check's message and traceback quote user code: shown as text
        ui.show_error(report["summary"], err.get("traceback"))
    tabs = st.tabs(["TRAIN", "EVAL", "PREDICT"])
    for tab, mode in zip(tabs, ("train", "eval", "predict")):
        tab.json(report["modes"].get(mode, {"skipped": "not reached"}))
ui.page_link("train", "Train →", icon=":material/play_arrow:")
