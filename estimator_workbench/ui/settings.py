"""The workbench's settings the UI can change while it runs: how many local runs execute at once
(issue 28 item 8). They act on the launcher every session of this server shares, like
``estimator-workbench --max-concurrent N --helper-slots N ui`` at start-up."""

from __future__ import annotations

from typing import Any

import streamlit as st

from estimator_workbench.ui.signin import current_actor

__all__ = ["concurrency_settings"]


def concurrency_settings(launcher: Any, key: str = "settings") -> None:
    """An expander with the local concurrency: training runs at once, and the helper slots for
    evaluate/predict runs of trained models (which then never queue behind training). A Ray
    launcher schedules on its cluster: the expander says so and changes nothing."""
    with st.expander("Settings: runs at once", icon=":material/tune:", key=f"{key}-open"):
        if not hasattr(launcher, "helper_slots"):
            st.caption("Runs go to a Ray cluster, which schedules them; these settings are for local runs.")
            return
        actor = current_actor()
        if not actor.admin:  # the launcher is shared by everyone on this server
            st.caption(f"Training runs at once: {launcher.max_concurrent}; evaluate/predict slots: "
                       f"{launcher.helper_slots}. Only an admin can change them ({actor.name} is not one).")
            return
        with st.form(f"{key}-concurrency", border=False):
            c1, c2 = st.columns(2)
            runs = c1.number_input("Training runs at once", min_value=1, max_value=64, step=1,
                                   value=int(launcher.max_concurrent), key=f"{key}-max-concurrent",
                                   help="Runs beyond it wait in the queue. Default: one per GPU, one on CPU "
                                        "($WORKBENCH_MAX_CONCURRENT, --max-concurrent).")
            helpers = c2.number_input("Evaluate/predict slots", min_value=0, max_value=16, step=1,
                                      value=int(launcher.helper_slots), key=f"{key}-helper-slots",
                                      help="Evaluate and predict runs of trained models (evaluation plots, "
                                           "predictions) run in these slots beside training, so they never "
                                           "wait behind it; 0 queues them with training "
                                           "($WORKBENCH_HELPER_SLOTS, --helper-slots).")
            if st.form_submit_button("Apply", icon=":material/check:"):
                launcher.max_concurrent = int(runs)
                launcher.helper_slots = int(helpers)
                started = launcher.poll()  # a larger limit starts queued runs now
                st.toast(f"{int(runs)} training run{'' if runs == 1 else 's'} and {int(helpers)} "
                         f"evaluate/predict slot{'' if helpers == 1 else 's'} at once"
                         + (f"; started {len(started)} queued." if started else "."))
        st.caption("For every session of this server until it restarts.")
