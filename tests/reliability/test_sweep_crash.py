"""A sweep survives crashes of its driver and runners (issue 24, item 4).

The attack's sequence: SIGKILL the driver's process group and every runner's, then
``sweep --resume``. Before the fix one crash failed 2 of 2 in-flight trials (adoption took the
runs, still ``running`` in the registry, as live; the first poll marked them lost and the driver
failed them), and four crashes left 8 of 8 failed and "finished" with 0 complete.
"""

from __future__ import annotations

import functools
import os
import signal
from pathlib import Path

import polling
import pytest

from estimator_engine import checkpoints
from estimator_workbench import templates
from estimator_workbench.cli import commands as cli
from estimator_workbench.execution.processes import pid_alive
from estimator_workbench.store.registry import RunRegistry
from estimator_workbench.sweeps import store
from estimator_workbench.sweeps.driver import SweepDriver
from estimator_workbench.sweeps.plan import plan_sweep

pytestmark = pytest.mark.slow

wait_for = functools.partial(polling.wait_for, timeout=180.0, interval=0.1)
STEPS = 1200
CRASHES = 4


class _Report:  # the pre-flight's verdict (the template is the bundled one: it passes)
    ok = True
    modes = {"eval": {"metric_keys": ["accuracy"]}}

    def summary(self) -> str:
        return ""


def slow_template() -> dict:
    """The bundled MLP, 10 ms per step: a run is still training when the crash comes."""
    info = templates.get_template("mlp_classifier")
    anchor = "    train_op = ee.minimize("
    assert anchor in info.code
    return {"name": info.name, "code": info.code.replace(anchor, "    __import__('time').sleep(0.01)\n" + anchor, 1)}


def trial_runs(root: Path, name: str) -> list:
    return RunRegistry(root).list_runs(tag=store.sweep_tag(name), newest_first=False)


def checkpointed(root: Path, run_id: str) -> bool:
    model_dir = RunRegistry(root).run_dir(run_id) / "model"
    return model_dir.is_dir() and checkpoints.latest_checkpoint(model_dir) is not None


def both_training_from_a_checkpoint(root: Path, *, attempt: int) -> bool:
    runs = trial_runs(root, "crash")
    return (len(runs) == 2 and all(r.status == "running" and r.attempt == attempt for r in runs)
            and all(checkpointed(root, r.run_id) for r in runs))


def crash(root: Path, name: str) -> None:
    """SIGKILL to the driver's process group and to every running trial's."""
    groups = [store.driver_state(root, name)["pid"]] + [r.pid for r in trial_runs(root, name) if r.status == "running"]
    for pgid in groups:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    wait_for(lambda: not any(pid_alive(pid) for pid in groups))
    for proc in list(store._STARTED):  # reap the driver (this test process started it)
        proc.wait(timeout=30)


def test_four_crashes_then_resume_every_trial_completes(workspace, monkeypatch):
    monkeypatch.setenv("WORKBENCH_WARM_SPARES", "0")  # two runners on two cores, no third process
    spec = plan_sweep(workspace, name="crash", dataset=cli._dataset_dict("iris", None), template=slow_template(),
                      params=["learning_rate=0.01:0.1:log"], steps=STEPS, trials=2, parallel=2,
                      metric="accuracy", direction="maximize", eval_every=600, pruner="none", seed=0,
                      run_config={"save_checkpoints_steps": 50},
                      preflight=lambda *a, **k: _Report())
    store.create_study(workspace, spec)
    store.start_driver(workspace, "crash")
    for number in range(CRASHES):
        wait_for(functools.partial(both_training_from_a_checkpoint, workspace, attempt=number + 1))
        crash(workspace, "crash")
        assert all(r.status == "running" for r in trial_runs(workspace, "crash"))  # as the crash left them
        if number < CRASHES - 1:
            store.start_driver(workspace, "crash")  # what `sweep --resume crash --detach` does
    lines: list[str] = []
    assert SweepDriver(workspace, "crash", poll_s=0.2, out=lines.append).run() == 0  # `sweep --resume crash`
    study = store.load_study(workspace, "crash", with_sampler=False)
    runs = {r.run_id: r for r in trial_runs(workspace, "crash")}
    assert [t.state.name for t in study.trials] == ["COMPLETE", "COMPLETE"], lines
    assert len(runs) == 2  # the same two runs, resumed: no new trial replaced a failed one
    for trial in study.trials:
        run = runs[trial.user_attrs["run_id"]]
        assert run.status == "succeeded" and run.attempt == CRASHES + 1
        assert run.summary["train/loss"]["last_step"] == STEPS
        assert f"Trial #{trial.number} continued: run {run.run_id} resumed from its checkpoint" in lines
    assert "Sweep crash finished: 2 complete." in lines


def test_adoption_reaps_before_it_judges(workspace):
    """A trial's run left 'running' by a dead runner is resumed, not adopted as live and failed
    at the next poll (which is what running ``runs`` before ``--resume`` used to avoid)."""
    import optuna

    spec = plan_sweep(workspace, name="adopt", dataset=cli._dataset_dict("iris", None),
                      template={"name": "mlp_classifier", "code": templates.get_template("mlp_classifier").code},
                      params=["learning_rate=0.01:0.1:log"], steps=20, trials=1, parallel=1, metric="accuracy",
                      direction="maximize", pruner="none", preflight=lambda *a, **k: _Report())
    study = store.create_study(workspace, spec)
    trial = study.ask()
    registry = RunRegistry(workspace)
    from estimator_workbench.execution.submit import submit_run

    record = submit_run(registry, None, name="adopt #0", action="train_and_evaluate", dataset=spec.dataset,
                        template=spec.template, params={"learning_rate": 0.05}, run_config={},
                        schedule={"max_steps": 20})
    trial.set_user_attr("run_id", record.run_id)
    import subprocess
    import sys

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    registry.set_status(record.run_id, "running", pid=dead.pid)

    class Launcher:  # records what the driver asks; starts nothing
        def __init__(self) -> None:
            self.resumed: list[str] = []

        def poll(self) -> list[str]:
            return []

        def reap_lost(self) -> list[str]:
            from estimator_workbench.execution.launcher import LocalLauncher

            return LocalLauncher(workspace, gpus=[]).reap_lost()

        def resume(self, run_id: str) -> None:
            self.resumed.append(run_id)

    launcher = Launcher()
    driver = SweepDriver(workspace, "adopt", launcher=launcher, out=lambda line: None)
    driver._adopt()
    assert launcher.resumed == [record.run_id]
    assert registry.get(record.run_id).status == "lost"
    assert optuna.trial.TrialState.RUNNING == store.load_study(workspace, "adopt").trials[0].state
