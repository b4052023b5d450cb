"""Train: params from the template's schema, RunConfig, warm start, and launch."""

import streamlit as st

from workbench import templates
from workbench.execution.processes import detect_gpus
from workbench.execution.submit import parent_relation
from workbench.store.records import TRAINING_ACTIONS
from workbench.ui import forms, session, sweep_form

st.title("Train")
dataset, template = session.current_dataset(), session.current_template()
ref = dataset["ref"]
st.caption(f"Dataset **{session.md(ref.get('name') or ref.get('path'))}** · template **{session.md(template['name'])}** "
           "(change them on the Data and Model pages)")
problem = template.get("error")  # parsed when the Model page stored the code
if problem:  # never train other code than the editor shows: the broken code is the session's code
    first, _, rest = problem.partition("\n")
    session.show_error(f"{first} Fix it on the Model page: nothing can be trained until it parses.\n{rest}")
    session.page_link("model", "Model →", icon=":material/code:")
    st.stop()
registry = session.get_registry()
session.get_launcher()  # polls; pre-starts the warm spare runner (if the Data/Model pages did not)
parents = [r for r in registry.list_runs() if r.action in TRAINING_ACTIONS]

with st.form("train-form"):
    st.subheader("Params")
    raw = forms.params_form(template["params"], key=f"p-{template['name']}")
    st.subheader("Run")
    name = st.text_input("Run name", value=f"{template['name']} on {ref.get('name') or 'upload'}")
    rc = forms.run_config_form(detect_gpus())
    parent_id = st.selectbox("Start from (warm start / evaluate / predict)", [""] + [p.run_id for p in parents],
                             format_func=lambda i: "fresh initialisation" if not i else i)
    launched = st.form_submit_button("Train", type="primary", icon=":material/play_arrow:")
sweep_form.sweep_section(dataset, template)

if launched:
    try:
        params = templates.validate_params(template["params"], raw)
    except ValueError as exc:
        session.show_error(exc)
        st.stop()
    action = rc["action"]
    if action not in TRAINING_ACTIONS and not parent_id:
        st.error(f"The action {action!r} needs a trained run under 'Start from'.")
        st.stop()
    relation = parent_relation(action) if parent_id else None
    if relation == "warm_start":
        report = forms.warm_start_check(template=template, params=params, dataset=dataset,
                                     run_config=rc["run_config"], parent=registry.get(parent_id))
        if report.error or report.shape_mismatch:
            st.stop()  # the warm start would fail on these variables: nothing is launched
    try:
        record = forms.launch_run(name=name, action=action, dataset=dataset, template=template, params=params,
                               run_config=rc["run_config"], schedule=rc["schedule"],
                               parent_run_id=parent_id or None, parent_relation=relation,
                               num_processes=rc["num_processes"])
    except ValueError as exc:  # refused by the run contract or the pre-flight check: nothing launched
        session.show_error(exc)
        st.stop()
    session.set_selected_run(record.run_id)
    session.switch_to("run", record.run_id)
