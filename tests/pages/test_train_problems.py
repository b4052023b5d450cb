"""The Train form says what is wrong next to Train, in words, and offers only what the machine holds
(issue 28 item 3, issue 24 item 9).

A number widget with min/max marks a value out of its bounds red with the reason in a hover
tooltip, and the form's button then did nothing. The form's numbers have no widget bounds: every
problem is listed under Train on click and nothing is launched. Process counts are choices up to
``machine_limit``.
"""

from __future__ import annotations

import re

import pytest

pytest.importorskip("streamlit")
from app_pages import open_page

from estimator_workbench.store.registry import RunRegistry
from estimator_workbench.store.run_spec import MachineLimit


def plain(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text)  # the page escapes markdown in user-facing values


def problems_beside_train(at) -> list[str]:
    return [plain(e.value) for e in at.error if e.value.startswith("Nothing was launched")]


def test_every_invalid_field_is_listed_next_to_train_and_nothing_launches(home):
    at = open_page("train")
    params = "p-mlp_classifier"
    assert at.number_input(key=f"{params}-learning_rate").min is None  # no silent browser-side refusal
    assert "Allowed: from 1e-06 to 1." in at.number_input(key=f"{params}-learning_rate").help
    at.number_input(key=f"{params}-learning_rate").set_value(-0.01)
    at.number_input(key=f"{params}-dropout").set_value(1.5)
    at.number_input(key="rc-steps").set_value(0)
    at.number_input(key="rc-batch").set_value(0)
    at.button[0].click().run()  # Train
    assert not at.exception, at.exception
    [shown] = problems_beside_train(at)
    assert shown.startswith("Nothing was launched: 4 fields to fix.")
    assert "'Train until step (max_steps)' is 0: it must be from 1 to 10,000,000." in shown
    assert "'Batch size' is 0: it must be from 1 to 65,536." in shown
    assert "learning_rate=-0.01: below the minimum 1e-06" in shown
    assert "dropout=1.5: above the maximum 0.9" in shown
    assert RunRegistry(home).list_runs() == []

    # fixed: it launches, and the list is gone
    at.number_input(key=f"{params}-learning_rate").set_value(0.01)
    at.number_input(key=f"{params}-dropout").set_value(0.2)
    at.number_input(key="rc-steps").set_value(3)
    at.number_input(key="rc-batch").set_value(8)
    at.button[0].click().run()
    assert not at.exception, at.exception
    [record] = RunRegistry(home).list_runs()
    assert record.params["learning_rate"] == 0.01 and record.schedule["batch_size"] == 8


def test_processes_and_parallel_trials_offer_only_what_the_machine_holds(home, monkeypatch):
    from estimator_workbench.ui import forms, sweep_form

    limit = MachineLimit(3, "this machine has 3 CPU cores and 8.0 GiB of memory")
    monkeypatch.setattr(forms, "machine_limit", lambda: limit)
    monkeypatch.setattr("estimator_workbench.store.run_spec.machine_limit", lambda: limit)
    at = open_page("train")
    procs = at.selectbox(key="rc-procs")
    assert procs.options == ["1", "2", "3"] and "At most 3: this machine has 3 CPU cores" in procs.help
    at.toggle(key="sw-open").set_value(True).run()
    parallel = at.selectbox(key="sw-parallel")
    assert parallel.options == ["1", "2", "3"] and "At most 3: this machine has 3 CPU cores" in parallel.help
    # with GPUs, one process per GPU (never more than the machine holds)
    assert forms.process_choices(2)[0] == [1, 2]
    assert forms.process_choices(8)[0] == [1, 2, 3]
    assert sweep_form.parallel_choices()[0] == [1, 2, 3]


def test_the_default_run_name_says_what_on_what(home):
    from estimator_workbench.execution.run_request import default_run_name

    at = open_page("train")
    assert at.text_input(key="train-name-mlp_classifier on iris").value == "mlp_classifier on iris"
    upload = {"ref": {"kind": "file", "path": str(home / "uploads" / "seattle-weather.csv")}}
    assert default_run_name("mlp_classifier", upload) == "mlp_classifier on seattle-weather"
    at.text_input(key="train-name-mlp_classifier on iris").set_value("  ")  # left blank: the default, not an empty name
    at.number_input(key="rc-steps").set_value(3)
    at.button[0].click().run()
    [record] = RunRegistry(home).list_runs()
    assert record.name == "mlp_classifier on iris"
