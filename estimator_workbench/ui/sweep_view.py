"""The Sweeps page's views: the sweeps of the workspace, and for one sweep its best trial,
parallel coordinates, param importances, trials table (each linked to its run) and the stop /
continue buttons. The data and figures come from ``estimator_workbench.sweeps.report``; this module only
renders them (and refreshes them every few seconds while the sweep's driver works).
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from estimator_workbench.ui import session
from estimator_workbench.ui.signin import current_actor

__all__ = ["sweep_details", "sweeps_page"]

_LIVE = ("starting", "running", "stopping")


def sweeps_page() -> None:
    """The whole page: the sweeps table, a picker (``?sweep=<name>`` in the URL) and the details."""
    from estimator_workbench.sweeps import report

    root = session.workspace()
    rows = report.sweep_rows(root)
    if not rows:
        st.info("No sweeps yet. Start one from the Sweep section of the Train page, or with "
                "`estimator-workbench sweep --dataset iris --template mlp_classifier --steps 200 "
                "--param learning_rate=0.0001:0.1:log --trials 10 --metric accuracy`.")
        session.page_link("train", "Train →", icon=":material/play_arrow:")
        return
    _overview(rows)
    names = [r["sweep"] for r in rows]
    wanted = st.query_params.get("sweep") or st.session_state.get("sweep")
    index = names.index(wanted) if wanted in names else 0
    name = st.selectbox("Sweep", names, index=index, key="sweeps-pick")
    if st.query_params.get("sweep") != name:
        st.query_params["sweep"] = name
    st.session_state["sweep"] = name
    sweep_details(name)


def _overview(first: list[dict[str, Any]], interval: float = 3.0) -> None:
    """The sweeps table. It was drawn once per page run, outside the details' live fragment, so it
    kept a sweep's "starting · 0/6" after the sweep had finished (issue 28 item 7): it refreshes
    itself while a sweep's driver works, and reruns the page once when none works any more (the
    details' controls follow)."""
    from estimator_workbench.sweeps import report

    live = any(r.get("state") in _LIVE for r in first)

    @st.fragment(run_every=interval if live else None)
    def table() -> None:
        rows = report.sweep_rows(session.workspace()) if live else first
        session.show_table(pd.DataFrame(rows), hide_index=True, key="sweeps-table",
                     column_config={"best": st.column_config.NumberColumn(format="%.4g")})
        if live and not any(r.get("state") in _LIVE for r in rows):
            st.rerun()  # once: every sweep has ended, the page's controls follow its state

    table()


def _controls(name: str, state: dict[str, Any], remaining: bool) -> None:
    from estimator_workbench.sweeps import store
    from estimator_workbench.sweeps.spec import SweepSpecError

    root = session.workspace()
    c1, c2, _ = st.columns([1, 1, 4])
    live = state.get("state") in _LIVE
    if c1.button("Stop sweep", icon=":material/stop:", key=f"sweep-stop-{name}",
                 disabled=not live or state.get("state") == "stopping",
                 help="Submit no more trials; the running trials checkpoint and stop. Continue later."):
        store.request_stop(root, name)
        st.toast(f"Stop requested for sweep {name}.")
    if c2.button("Continue sweep", icon=":material/play_arrow:", key=f"sweep-continue-{name}",
                 disabled=live or not remaining,
                 help="Start the sweep's driver again: it resumes the stopped trials and adds the "
                      "missing ones to the same study."):
        try:
            store.start_driver(root, name, owner=current_actor().name)
            st.toast(f"Sweep {name} continues.")
        except SweepSpecError as exc:
            session.show_error(exc)


def sweep_details(name: str) -> None:
    """One sweep: controls, then a live fragment with the best trial, figures and trials table."""
    from estimator_workbench.sweeps import store

    root = session.workspace()
    state = store.driver_state(root, name)
    live = state.get("state") in _LIVE

    @st.fragment(run_every="3s" if live else None)
    def body() -> None:
        _body(name)

    body()


def _body(name: str) -> None:
    from estimator_workbench.sweeps import report, store

    root = session.workspace()
    study = store.load_study(root, name, with_sampler=False)
    spec = store.load_spec(study)
    state = store.driver_state(root, name)
    counts = report.trial_counts(study)
    finished = sum(counts.get(s, 0) for s in ("complete", "pruned", "fail"))
    unfinished = counts.get("running", 0) + counts.get("waiting", 0)
    remaining = finished < spec.planned_trials or unfinished > 0
    st.subheader(f"Sweep {name}")
    st.caption(f"Driver: **{session.md(state.get('state'))}** · template **{session.md(spec.template.get('name'))}** · "
               f"{spec.sampler} sampler · {spec.direction} eval **{session.md(spec.metric)}** · "
               f"{spec.steps} steps per trial, evaluated every {spec.eval_every} · {spec.parallel} at once · "
               f"pruning: {spec.pruner} · runs tagged `{store.sweep_tag(name)}`")
    _controls(name, state, remaining)
    c = st.columns(5)
    c[0].metric("Trials", f"{sum(counts.values())}/{spec.planned_trials}")
    c[1].metric("Complete", counts.get("complete", 0))
    c[2].metric("Pruned", counts.get("pruned", 0))
    c[3].metric("Failed", counts.get("fail", 0))
    c[4].metric("Running", unfinished)
    best = report.best_trial(study, spec)
    if best is None:
        st.info("No trial has completed yet: the best trial, parallel coordinates and importances "
                "appear once one has.")
    else:
        st.markdown(f"**Best trial #{best['number']}**: {session.md(spec.metric)} = **{best['value']:.6g}** · "
                    + ", ".join(f"`{k}` = {v:.4g}" if isinstance(v, float) else f"`{k}` = {v}"
                                for k, v in best["params"].items()))
        if best.get("run_id"):
            session.page_link("run", f"Open the best run {best['run_id']} →", icon=":material/monitoring:",
                              run_id=best["run_id"])
        fig = report.parallel_figure(study, spec)
        if fig is not None:
            st.plotly_chart(fig, key=f"sweep-parallel-{name}")
        importances, method = report.param_importances(study)
        if importances is None:
            st.info(method)  # why there are none yet
        else:
            st.plotly_chart(report.importance_figure(importances, method), key=f"sweep-importance-{name}")
    st.markdown("**Trials**")
    frame = report.trials_frame(study, session.get_registry())
    if frame.empty:
        st.caption("No trials yet.")
        return
    frame["open"] = ["run?run=" + r if isinstance(r, str) and r else None for r in frame["run"]]
    session.show_table(frame, hide_index=True, key=f"sweep-trials-{name}",
                 column_config={"value": st.column_config.NumberColumn(format="%.4g"),
                                "open": st.column_config.LinkColumn("open run", display_text="open")})
    ids = [r for r in frame["run"] if isinstance(r, str) and r]
    if ids:
        labels = {f"{r}": f"#{t} · {r} · {s}" for t, r, s in zip(frame["trial"], frame["run"], frame["state"])
                  if isinstance(r, str) and r}
        picked = st.selectbox("Trial run", ids, format_func=labels.get, key=f"sweep-trial-pick-{name}")
        session.page_link("run", "Open the trial's run →", icon=":material/monitoring:", run_id=picked)
    if state.get("state") == "failed":
        st.error(f"The driver failed: {session.md(state.get('message'))}. See "
                 f"{session.md(store.sweep_dir(root, name) / store.DRIVER_LOG)}.")
