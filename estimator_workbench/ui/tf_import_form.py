"""The Model page's "Import a TensorFlow model" section: a TF Estimator's model_dir registered as a
run of the chosen template on the chosen dataset (``execution.tf_import``, through ``submit_run``:
the model is checked in a child process before the run exists)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import streamlit as st

from estimator_workbench.execution.run_request import dataset_name
from estimator_workbench.store.records import IMPORT_ACTION
from estimator_workbench.ui.session import get_launcher, get_registry, md, page_link, show_error
from estimator_workbench.ui.signin import current_actor

__all__ = ["import_section"]


def import_section(template: Mapping[str, Any], dataset: Mapping[str, Any]) -> None:
    """A path input and an Import button; shows the new run (with a link) or why it was refused."""
    from estimator_workbench import templates
    from estimator_workbench.execution.submit import submit_run

    with st.expander("Import a TensorFlow model", icon=":material/move_to_inbox:"):
        st.caption(f"A TensorFlow Estimator's model_dir (its latest checkpoint), a checkpoint prefix or a "
                   f"SavedModel becomes a run of **{md(template['name'])}** on **{md(dataset_name(dataset))}**, "
                   "read without TensorFlow. Its variables must fit the model this template builds for the dataset.")
        with st.form("import-tf", border=False):
            path = st.text_input("TensorFlow model_dir", placeholder="/models/iris_dnn", key="import-tf-path")
            params_text = st.text_input("Params (JSON)", value="{}", key="import-tf-params",
                                        help='The template params the TF model was built with, e.g. {"hidden_units": "10,10"}.')
            submitted = st.form_submit_button("Import", icon=":material/move_to_inbox:")
        if not submitted:
            return
        try:
            params = json.loads(params_text or "{}")
            if not isinstance(params, dict):
                raise ValueError(f"Params must be a JSON object, given: {params_text!r}.")
            params = templates.validate_params(template["params"], params)
            with st.spinner("Checking the TensorFlow model against the template..."):
                record = submit_run(get_registry(), get_launcher(), name=f"TF {path.rstrip('/').rsplit('/', 1)[-1]} "
                                    f"({template['name']})", action=IMPORT_ACTION, dataset=dataset,
                                    template={"name": template["name"], "code": template["code"]}, params=params,
                                    run_config={}, schedule={}, checkpoint_path=path.strip(),
                                    control={"checkpoint_path": "TensorFlow model_dir"},
                                    owner=current_actor().name)
        except (ValueError, TypeError) as exc:
            show_error(exc)
            return
        st.success(f"Imported as run {record.run_id} from {md(record.checkpoint_path)}.")
        page_link("run", "Open the run →", icon=":material/open_in_new:", run_id=record.run_id)
