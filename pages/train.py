"""Train: params from the template's schema, RunConfig, warm start, and launch."""

import streamlit as st

from estimator_workbench import templates
from estimator_workbench.data import datasets
from estimator_workbench.execution.processes import detect_gpus
from estimator_workbench.execution.run_request import default_run_name
from estimator_workbench.execution.submit import parent_relation
from estimator_workbench.store.records import TRAINING_ACTIONS
from estimator_workbench.ui import context, figures, forms, rerun_form, session, sweep_form, tables

st.title("Train")
rerun_form.rerun_notice()  # filled by 'Re-run with these settings' (issue 28 item 10)
dataset, template = session.current_dataset(), session.current_template()
context.sync_url()
ref = dataset["ref"]
st.caption(f"Dataset **{session.md(ref.get('name') or ref.get('path'))}** · template **{session.md(template['name'])}** "
           "(change them on the Data and Model pages)")
problem = template.get("error")  # parsed when the Model page stored the code
if problem:  # never train other code than the editor shows: the broken code is the session's code
    first, _, rest = problem.partition("\n")
    session.show_error(f"{first} Fix it on the Model page: nothing can be trained until it parses.\n{rest}")
    session.page_link("model", "Model →", icon=":material/code:")
    st.stop()
spec = datasets.DatasetSpec.from_dict(dataset)
label = spec.schema.label
frame = session.load_dataset_frame(spec.path, **spec.read_options) if label else None
mismatch = datasets.label_task_warning(template["name"], template["code"], label,
                                       spec.schema.column(label).dtype if label else None,
                                       frame[label] if frame is not None and label in frame.columns else None)
if mismatch:
    session.show_error(mismatch, level="warning")
if frame is not None and spec.task == "classification" and label in frame.columns:
    identifier = datasets.label_identifier_warning(label, frame[label])
    if identifier:
        session.show_error(identifier, level="warning")
if frame is not None and label in frame.columns:
    # Imbalanced classes change which metric to watch. Drawing a chart here also loads the
    # browser's chart code before the launch: on a cold page the run's live chart waited ~6 s for it.
    st.plotly_chart(figures.label_figure(frame[label]), key="train-label", config={"displayModeBar": False})
preflight = context.current_preflight(template["code"])  # only a check of exactly this code counts
if preflight and not preflight.get("ok"):
    session.show_error("The last pre-flight check of this code failed: "
                       + (preflight.get("summary") or "see the Model page").splitlines()[0]
                       + " Fix the code on the Model page; Train checks it again before launching.",
                       level="warning")
registry = session.get_registry()
session.get_launcher()  # polls; pre-starts the warm spare runner (if the Data/Model pages did not)
parents = tables.finished_runs_for_start(registry.list_runs())
remembered = context.remembered_form("train")
params_key = f"p-{template['name']}"

with st.form("train-form"):
    st.subheader("Params")
    raw = forms.params_form(template["params"], key=params_key,
                            values={name: remembered[f"{params_key}-{name}"] for name in template["params"]
                                    if f"{params_key}-{name}" in remembered})
    st.subheader("Run")
    default_name = default_run_name(template["name"], dataset)
    name = st.text_input("Run name", value=default_name, help="Blank: " + default_name, key=f"train-name-{default_name}")
    rc = forms.run_config_form(detect_gpus(), values=remembered)
    parent_id = forms.start_from_picker(parents, default=remembered.get("start-from"))
    launched = st.form_submit_button("Train", type="primary", icon=":material/play_arrow:")
    beside_train = st.container(key="train-problems")  # why a click launched nothing, in words
sweep_form.sweep_section(dataset, template)

if launched:
    context.remember_form("train", {k: st.session_state.get(k) for k in list(st.session_state)
                                    if isinstance(k, str) and k.startswith(("rc-", params_key + "-", "start-from"))})
    problems = list(rc["problems"])
    try:
        params = templates.validate_params(template["params"], raw)
    except ValueError as exc:  # "Invalid params:\n- ...": every param's problem
        problems += [line.removeprefix("- ") for line in str(exc).splitlines()[1:]] or [str(exc)]
    if problems:
        beside_train.error(f"Nothing was launched: {session.plural(len(problems), 'field')} to fix.\n"
                           + "\n".join(f"- {session.md(p)}" for p in problems), icon=":material/error:")
        st.stop()
    action = rc["action"]
    if action not in TRAINING_ACTIONS and not parent_id:
        beside_train.error(f"The action {action!r} needs a trained run under 'Start from'.")
        st.stop()
    relation = parent_relation(action) if parent_id else None
    if relation == "warm_start":
        report = forms.warm_start_check(template=template, params=params, dataset=dataset,
                                     run_config=rc["run_config"], parent=registry.get(parent_id))
        if report.error or report.shape_mismatch:
            st.stop()  # the warm start would fail on these variables: nothing is launched
    try:
        record = forms.launch_run(name=name.strip() or default_name, action=action, dataset=dataset, template=template, params=params,
                               run_config=rc["run_config"], schedule=rc["schedule"],
                               parent_run_id=parent_id or None, parent_relation=relation,
                               num_processes=rc["num_processes"])
    except ValueError as exc:  # refused by the run contract or the pre-flight check: nothing launched
        with beside_train:
            session.show_error(exc)
        st.stop()
    session.set_selected_run(record.run_id)
    session.switch_to("run", record.run_id)
