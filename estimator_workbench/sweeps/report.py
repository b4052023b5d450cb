"""What the Sweeps page shows, as plain data and plotly figures (no streamlit): the sweeps of a
workspace, one sweep's trials table (joined with its runs), its best trial, Optuna's parameter
importances and parallel-coordinates plot.

Example:
    >>> rows = sweep_rows(root)                          # doctest: +SKIP
    >>> frame = trials_frame(load_study(root, "lr"), RunRegistry(root))   # doctest: +SKIP
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping
from typing import Any

import pandas as pd

from estimator_workbench.store.records import RunNotFoundError
from estimator_workbench.store.registry import RunRegistry
from estimator_workbench.sweeps import store
from estimator_workbench.sweeps.spec import SweepSpec

__all__ = [
    "best_trial",
    "importance_figure",
    "parallel_figure",
    "param_importances",
    "sweep_rows",
    "trial_counts",
    "trials_frame",
]


def trial_counts(study: Any) -> dict[str, int]:
    """Trials by state (``complete``, ``pruned``, ``fail``, ``running``, ``waiting``)."""
    return dict(Counter(t.state.name.lower() for t in study.get_trials(deepcopy=False)))


def sweep_rows(root: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """One row per sweep of the workspace: settings, progress, best value, driver state."""
    rows = []
    for name in store.list_sweeps(root):
        try:
            study = store.load_study(root, name, with_sampler=False)
            spec = store.load_spec(study)
        except Exception as exc:  # an unreadable journal must not hide the other sweeps
            rows.append({"sweep": name, "state": f"unreadable: {exc}"})
            continue
        counts = trial_counts(study)
        best = best_trial(study, spec)
        rows.append({"sweep": name, "state": store.driver_state(root, name).get("state"),
                     "template": spec.template.get("name"), "dataset": _dataset_name(spec.dataset),
                     "sampler": spec.sampler, "metric": spec.metric, "direction": spec.direction,
                     "trials": f"{sum(counts.values())}/{spec.planned_trials}",
                     "complete": counts.get("complete", 0), "pruned": counts.get("pruned", 0),
                     "failed": counts.get("fail", 0),
                     "best": None if best is None else best["value"]})
    return rows


def _dataset_name(dataset: Mapping[str, Any]) -> str:
    ref = dataset.get("ref") or {}
    return str(ref.get("name") or os.path.basename(str(ref.get("path") or "data")))


def best_trial(study: Any, spec: SweepSpec) -> dict[str, Any] | None:
    """``{'number', 'value', 'params', 'run_id'}`` of the best complete trial, or None."""
    from optuna.trial import TrialState

    if not study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        return None
    best = study.best_trial
    return {"number": best.number, "value": best.value, "params": dict(best.params),
            "run_id": best.user_attrs.get("run_id"), "metric": spec.metric, "direction": spec.direction}


def trials_frame(study: Any, registry: RunRegistry) -> pd.DataFrame:
    """The trials table: number, state, value, params, run id, run status, reason (pruned /
    failed), last evaluated step."""
    rows = []
    for trial in study.get_trials(deepcopy=False):
        run_id = trial.user_attrs.get("run_id")
        status, error = None, trial.user_attrs.get("error")
        if run_id:
            try:
                record = registry.get(run_id)
                status = record.status
                if record.error and trial.state.name == "PRUNED":
                    error = record.error
            except RunNotFoundError:
                status = "deleted"
        steps = list(trial.intermediate_values)
        rows.append({"trial": trial.number, "state": trial.state.name.lower(), "value": trial.value,
                     **{f"param {k}": v for k, v in trial.params.items()},
                     "run": run_id, "run status": status, "last eval step": max(steps) if steps else None,
                     "reason": error})
    return pd.DataFrame(rows)


def param_importances(study: Any) -> tuple[dict[str, float] | None, str]:
    """``(importances, method)`` from ``optuna.importance.get_param_importances``, or
    ``(None, why not)`` while fewer than two trials are complete or the values do not vary.

    The method is Optuna's default, fANOVA; Optuna releases whose fANOVA needs scikit-learn (not a
    dependency here) fall back to PED-ANOVA, which needs nothing more.
    """
    import optuna
    from optuna.trial import TrialState

    complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    if len(complete) < 2:
        return None, (f"Param importances need at least 2 complete trials; this sweep has "
                      f"{len(complete)}.")
    try:
        try:
            return dict(optuna.importance.get_param_importances(study)), "fANOVA"
        except ImportError:
            import warnings

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # ExperimentalWarning
                evaluator = optuna.importance.PedAnovaImportanceEvaluator()
            return dict(optuna.importance.get_param_importances(study, evaluator=evaluator)), "PED-ANOVA"
    except (ValueError, RuntimeError) as exc:
        return None, f"Param importances cannot be computed yet: {exc}"


def importance_figure(importances: Mapping[str, float], method: str = "fANOVA") -> Any:
    """A horizontal bar chart of the importances (largest on top)."""
    import plotly.graph_objects as go

    items = sorted(importances.items(), key=lambda kv: kv[1])
    fig = go.Figure(go.Bar(x=[v for _, v in items], y=[k for k, _ in items], orientation="h",
                           hovertemplate="%{y}: %{x:.3f}<extra></extra>"))
    fig.update_layout(title=f"Param importances ({method})", xaxis_title="importance",
                      height=120 + 40 * len(items), margin={"l": 10, "r": 10, "t": 40, "b": 10})
    return fig


def parallel_figure(study: Any, spec: SweepSpec) -> Any | None:
    """Optuna's parallel-coordinates plot of the complete trials (None without any)."""
    from optuna.trial import TrialState
    from optuna.visualization import plot_parallel_coordinate

    if not study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        return None
    fig = plot_parallel_coordinate(study, target_name=spec.metric)
    fig.update_layout(title=f"Parallel coordinates: params against {spec.metric} ({spec.direction})")
    return fig
