"""A run as a Jupyter notebook: the same data, split, column roles, model_fn, params and RunConfig,
trained, evaluated and predicted with the engine alone (no runner, no registry).

``write_run_notebook`` writes it with ``nbformat`` (the ``notebook`` extra); ``run.to_notebook``,
``estimator-workbench notebook RUN -o run.ipynb`` and the run page's download call it. Every
setting is an editable cell: the dataset spec (roles, split, missing-value handling), the
template's source, ``RUN_PARAMS``, ``RUN_CONFIG`` and the schedule. The data goes through
``estimator_workbench.data`` (the module the runner reads it with), so the split and encodings are
the run's; with the run's seed on CPU the evaluation equals the run's recorded metrics.

What the notebook leaves out of the runner's work: the workbench's metrics stream, stop signals,
early stopping and the NaN policy (none of which changes the numbers of a run that completed).

Example:
    >>> write_run_notebook("workspace", "r-20261204-abc", "run.ipynb")          # doctest: +SKIP
    PosixPath('run.ipynb')
"""

from __future__ import annotations

import os
import pprint
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["notebook_bytes", "notebook_for_run", "write_run_notebook"]

# Schedule keys the notebook's training reads; the runner's other ones (preflight, stall policy,
# early stopping, NaN policy, metrics frequency) do not change what is trained.
_SCHEDULE_KEYS = ("max_steps", "eval_steps", "eval_every_steps", "batch_size", "shuffle_seed")
_RUN_CONFIG_SKIP = ("max_steps", "steps", "eval_steps", "eval_every_steps", "metrics_every_n_steps",
                    "batch_size", "shuffle_seed", "preflight", "preflight_timeout")


def _literal(value: Any) -> str:
    """``value`` as Python source (dicts wrapped at 100 columns)."""
    return pprint.pformat(value, width=100, sort_dicts=True)


def _recorded(summary: Mapping[str, Mapping[str, Any]]) -> dict[str, float]:
    """The run's last evaluation metrics (``eval/<name>`` -> last value)."""
    return {tag.split("/", 1)[1]: float(s["last"]) for tag, s in sorted(summary.items())
            if tag.startswith("eval/") and s.get("last") is not None}


def notebook_for_run(record: Any) -> Any:
    """The ``nbformat`` notebook of ``record`` (a ``RunRecord``)."""
    import nbformat
    from nbformat import v4

    if record.action not in ("train", "train_and_evaluate"):
        raise ValueError(f"Run {record.run_id!r} is a {record.action!r} run; a notebook reproduces a training "
                         "run (train or train_and_evaluate). Export the run it was made from.")
    schedule = {k: record.schedule[k] for k in _SCHEDULE_KEYS if record.schedule.get(k) is not None}
    schedule.setdefault("max_steps", record.schedule.get("steps"))
    run_config = {k: v for k, v in sorted(record.run_config.items()) if k not in _RUN_CONFIG_SKIP}
    dataset = {k: v for k, v in record.dataset.items() if k != "fingerprint"}
    recorded = _recorded(record.summary)
    evaluate = record.action == "train_and_evaluate"
    cells = [
        v4.new_markdown_cell(
            f"# Run `{record.run_id}`: {record.name}\n\n"
            f"Template **{record.template_name}**, action **{record.action}**, exported from the Estimator "
            "Workbench. This notebook reproduces the run with `estimator_engine` alone: the same data, "
            "split and column roles (read by `estimator_workbench.data`, as the run's runner read them), "
            "the template's `model_fn`, its params and RunConfig. Every setting below is an editable cell.\n\n"
            "With the run's seed on CPU the evaluation at the end equals the run's recorded metrics."),
        v4.new_code_cell(
            "import json\nimport shutil\n\nimport pandas as pd\nimport torch\n\nimport estimator_engine as ee\n"
            "from estimator_workbench.data import datasets"),
        v4.new_markdown_cell("## Data\nThe dataset spec: where the data is, the role and type of each column, "
                             "the train/eval split and missing-value handling."),
        v4.new_code_cell(f"DATASET = {_literal(dataset)}\n\n"
                         "spec = datasets.DatasetSpec.from_dict(DATASET)\ndf = spec.load()\ndf.head()"),
        v4.new_markdown_cell("## Schedule\nSteps, batch size and evaluation interval of the run."),
        v4.new_code_cell(f"SCHEDULE = {_literal(schedule)}\n\n"
                         "input_fns = datasets.make_input_fns(\n"
                         "    spec, df, batch_size=SCHEDULE.get('batch_size', 32), num_epochs=None,\n"
                         "    shuffle_seed=SCHEDULE.get('shuffle_seed', spec.seed))\n"
                         "print(f\"{input_fns.info['n_train']} training rows, {input_fns.info['n_eval']} evaluation rows\")"),
        v4.new_markdown_cell(f"## The model_fn\nThe source of template `{record.template_name}` as the run used it."),
        v4.new_code_cell(str(record.template_code or "").rstrip()),
        v4.new_markdown_cell("## Params and RunConfig\n`params['task']` (columns, statistics, classes) is "
                             "filled from the data, as the workbench does."),
        v4.new_code_cell(f"RUN_PARAMS = {_literal(dict(record.params))}  # the template's PARAMS holds their schema\nRUN_CONFIG = {_literal(run_config)}\n"
                         f"MODEL_DIR = {('model-' + record.run_id)!r}\n\n"
                         "shutil.rmtree(MODEL_DIR, ignore_errors=True)  # train from scratch, as the run did\n"
                         "estimator = ee.Estimator(model_fn, model_dir=MODEL_DIR,\n"
                         "                         config=ee.RunConfig(model_dir=MODEL_DIR, **RUN_CONFIG),\n"
                         "                         params={**RUN_PARAMS, 'task': input_fns.info})"),
        v4.new_markdown_cell("## Train" + (" and evaluate" if evaluate else "")),
        v4.new_code_cell(
            "every = SCHEDULE.get('eval_every_steps') or max(1, SCHEDULE['max_steps'] // 10)\n"
            "ee.train_and_evaluate(estimator,\n"
            "                      ee.TrainSpec(input_fns.train, max_steps=SCHEDULE['max_steps']),\n"
            "                      ee.EvalSpec(input_fns.eval, steps=SCHEDULE.get('eval_steps'), every_n_steps=every))"
            if evaluate else
            "estimator.train(input_fns.train, max_steps=SCHEDULE['max_steps'], progress_bar=True)"),
        v4.new_markdown_cell("## Evaluate\nThe metrics beside the run's recorded ones."),
        v4.new_code_cell(
            f"RECORDED = {_literal(recorded)}  # the run's last evaluation\n\n"
            "results = estimator.evaluate(input_fns.eval) if input_fns.eval is not None else {}\n"
            "print('RESULTS_JSON', json.dumps({key: float(value) for key, value in results.items()}))\n"
            "pd.DataFrame({'this notebook': pd.Series(results, dtype=object), 'recorded run': pd.Series(RECORDED, dtype=object)})"),
        v4.new_markdown_cell("## Curves\nThe training loss (every `save_summary_steps`) and the evaluations."),
        v4.new_code_cell(
            "import plotly.express as px\n\n"
            "train = pd.DataFrame(ee.summary.read_summaries(MODEL_DIR))\n"
            "evals = pd.DataFrame(ee.summary.read_summaries(estimator.eval_dir()))\n"
            "curves = pd.concat([train.assign(split='train'), evals.assign(split='eval')], ignore_index=True)\n"
            "px.line(curves, x='step', y='value', color='split', facet_row='tag', markers=True, height=500)"),
        v4.new_markdown_cell("## Predict"),
        v4.new_code_cell(
            "predictions = pd.DataFrame(list(estimator.predict(input_fns.predict)))\npredictions.head()"),
    ]
    notebook = v4.new_notebook(cells=cells, metadata={
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
        "estimator_workbench": {"run_id": record.run_id, "recorded": recorded}})
    nbformat.validate(notebook)
    return notebook


def write_run_notebook(root: str | os.PathLike[str], run_id: str, path: str | os.PathLike[str]) -> Path:
    """Writes the notebook of run ``run_id`` of workspace ``root`` to ``path``; returns ``path``."""
    import nbformat

    from estimator_workbench.store.registry import RunRegistry

    record = RunRegistry(root).get(run_id)
    notebook = notebook_for_run(record)
    target = Path(path)
    if target.is_dir():
        raise ValueError(f"{str(target)!r} is a folder; give a file name like {run_id}.ipynb.")
    target.parent.mkdir(parents=True, exist_ok=True)
    temp = target.with_name(target.name + ".tmp")
    temp.write_text(nbformat.writes(notebook), encoding="utf-8")
    os.replace(temp, target)
    return target


def notebook_bytes(root: str | os.PathLike[str], run_id: str) -> bytes:
    """The notebook of run ``run_id`` as ``.ipynb`` bytes (the run page's download)."""
    import nbformat

    from estimator_workbench.store.registry import RunRegistry

    return nbformat.writes(notebook_for_run(RunRegistry(root).get(run_id))).encode("utf-8")
