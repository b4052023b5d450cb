"""The Train page's "Sweep" section: choose params and ranges (log scale for learning rates), a
sampler, trials, parallel runs, a metric and its direction, then start an Optuna sweep whose
trials are normal runs (``estimator_workbench.sweeps``). Nothing is checked or run here: the request goes
through ``plan_sweep`` (the CLI's checks, pre-flight included), the study is created in the
workspace and the driver starts as a process of its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import streamlit as st

from estimator_workbench.ui import session
from estimator_workbench.ui.signin import current_actor

__all__ = ["parallel_choices", "param_spec_text", "sweep_section"]

_NUMERIC = ("int", "float")


def _looks_like_rate(name: str) -> bool:
    lowered = name.lower()
    return "learning_rate" in lowered or lowered in ("lr", "eta") or "weight_decay" in lowered


def param_spec_text(name: str, entry: Mapping[str, Any], *, mode: str, low: Any = None, high: Any = None,
                    log: bool = False, values: str = "") -> str:
    """The ``--param`` text of one row of the form (the same syntax as the CLI's).

    Example:
        >>> param_spec_text("learning_rate", {"type": "float"}, mode="range", low=1e-4, high=0.1, log=True)
        'learning_rate=0.0001:0.1:log'
    """
    if mode == "values":
        return f"{name}={values}"
    flags = (":int" if entry.get("type") == "int" else "") + (":log" if log else "")
    return f"{name}={low:g}:{high:g}{flags}" if entry.get("type") != "int" else f"{name}={int(low)}:{int(high)}{flags}"


def _default_metric(template: Mapping[str, Any]) -> str:
    name = str(template.get("name") or "").lower()
    return "accuracy" if "classifier" in name or "digits" in name else "loss"


def _param_rows(schema: Mapping[str, Mapping[str, Any]], chosen: list[str]) -> list[str]:
    specs = []
    for name in chosen:
        entry = schema[name]
        kind = entry.get("type")
        c1, c2, c3, c4 = st.columns([2, 2, 2, 1])
        c1.markdown(f"**{session.md(name)}** · {session.md(kind)}")
        if kind in _NUMERIC:
            mode = c1.radio("Search", ("range", "values"), key=f"sw-mode-{name}", horizontal=True,
                            label_visibility="collapsed")
        else:
            mode = "values"
        if mode == "values":
            default = entry.get("default")
            values = c2.text_input("Values (comma-separated)", key=f"sw-values-{name}",
                                   value="" if default is None else str(default))
            specs.append(param_spec_text(name, entry, mode="values", values=values))
            continue
        default = float(entry.get("default") or 0.0)
        lo_default = entry.get("min", default / 10 if default > 0 else 0.0)
        hi_default = entry.get("max", default * 10 if default > 0 else 1.0)
        if _looks_like_rate(name) and default > 0:
            lo_default, hi_default = max(float(lo_default), default / 100), min(float(hi_default), default * 100)
        fmt = "%d" if kind == "int" else "%g"
        cast = int if kind == "int" else float
        low = c2.number_input("Low", value=cast(lo_default), key=f"sw-low-{name}", format=fmt)
        high = c3.number_input("High", value=cast(hi_default), key=f"sw-high-{name}", format=fmt)
        log = c4.checkbox("log", value=_looks_like_rate(name), key=f"sw-log-{name}",
                          help="Sample on a log scale (learning rates, decays: values spanning decades).")
        specs.append(param_spec_text(name, entry, mode="range", low=low, high=high, log=log))
    return specs


def parallel_choices() -> tuple[list[int], str]:
    """``(the trial counts "Run at once" offers, why the largest)``: 1 up to the runs this machine
    holds at once (``run_spec.machine_limit``, the cap ``plan_sweep`` enforces)."""
    from estimator_workbench.store.run_spec import machine_limit

    limit = machine_limit()
    return list(range(1, max(1, limit.processes) + 1)), limit.reason


def sweep_section(dataset: Mapping[str, Any], template: Mapping[str, Any]) -> None:
    """Renders the Sweep section for the session's dataset and template; "Start sweep" checks
    the request, creates the study and starts its driver, then opens the Sweeps page."""
    schema = {k: v for k, v in (template.get("params") or {}).items() if k != "task"}
    # A toggle rather than an expander: while it is off the section adds no widgets to the page.
    if not st.toggle("Sweep: search params with Optuna", key="sw-open",
                     help="Run many trials of this template with params chosen by Optuna."):
        return
    with st.container(border=True):
        if not schema:
            st.info("This template declares no PARAMS: there is nothing to search.")
            return
        st.caption("Each trial is a normal run (queued, live, comparable, resumable) tagged "
                   "`sweep:<name>`; the others params keep the template's defaults. Unpromising "
                   "trials are pruned from their evaluations (median rule).")
        suggested = [n for n in schema if _looks_like_rate(n)][:1] or list(schema)[:1]
        chosen = st.multiselect("Params to search", list(schema), default=suggested, key="sw-params")
        specs = _param_rows(schema, chosen)
        c1, c2, c3 = st.columns(3)
        sampler = c1.selectbox("Sampler", ("tpe", "random", "grid"), key="sw-sampler",
                               format_func={"tpe": "TPE (Bayesian)", "random": "Random",
                                            "grid": "Grid (listed values)"}.get)
        trials = c2.number_input("Trials", min_value=1, max_value=1000, value=10, key="sw-trials")
        at_once, why = parallel_choices()
        parallel = c3.selectbox("Run at once", at_once, key="sw-parallel",
                                help=f"Trials running at the same time; the others wait in the queue. At most "
                                     f"{at_once[-1]}: {why}.")
        c1, c2, c3 = st.columns(3)
        metric = c1.text_input("Metric (final evaluation)", value=_default_metric(template), key="sw-metric")
        direction = c2.selectbox("Direction", ("auto", "maximize", "minimize"), key="sw-direction",
                                 help="auto: minimize names with 'loss' or 'error', else maximize.")
        steps = c3.number_input("Steps per trial", min_value=1, value=200, key="sw-steps")
        c1, c2, c3 = st.columns(3)
        eval_every = c1.number_input("Evaluate every (steps; 0: steps/5)", min_value=0, value=0,
                                     key="sw-eval-every")
        prune = c2.selectbox("Pruning", ("median", "none"), key="sw-pruner")
        name = c3.text_input("Sweep name (blank: automatic)", key="sw-name")
        if st.button("Start sweep", icon=":material/tune:", key="sw-start", disabled=not specs):
            _start(dataset, template, specs=specs, sampler=sampler, trials=int(trials),
                   parallel=int(parallel), metric=metric.strip(),
                   direction="" if direction == "auto" else direction, steps=int(steps),
                   eval_every=int(eval_every), pruner=prune, name=name.strip())


def _start(dataset: Mapping[str, Any], template: Mapping[str, Any], *, specs: list[str], name: str,
           **settings: Any) -> None:
    from estimator_workbench.sweeps import store
    from estimator_workbench.sweeps.plan import default_name, plan_sweep
    from estimator_workbench.sweeps.spec import SweepSpecError

    root = session.workspace()
    ref = dataset.get("ref") or {}
    sweep_name = name or default_name(str(template.get("name")), str(ref.get("name") or "data"))
    try:
        with st.spinner("Checking the sweep (pre-flight check of the template)..."):
            spec = plan_sweep(root, name=sweep_name, dataset=dataset, params=specs,
                              template={"name": template.get("name"), "code": template.get("code")},
                              **settings)
            store.create_study(root, spec, owner=current_actor().name)
        store.start_driver(root, spec.name, owner=current_actor().name)
    except SweepSpecError as exc:
        session.show_error(exc)
        return
    st.session_state["sweep"] = spec.name
    page = session.PAGE_SCRIPTS.get("sweeps")
    if page is None:
        st.success(f"Sweep {spec.name} started.")
        return
    st.switch_page(page, query_params={"sweep": spec.name})
