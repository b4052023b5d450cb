"""Tests of estimator_workbench.execution.build: the RunConfig keys a run may set."""

from __future__ import annotations

import inspect

import pytest

from estimator_workbench.execution import build


def test_run_config_keys_are_the_engines_json_arguments():
    import estimator_engine as ee
    from estimator_engine.run_config import TF_SESSION_ARGUMENTS

    arguments = set(inspect.signature(ee.RunConfig.__init__).parameters) - {"self"}
    # model_dir is the run's folder; the run's process count, not train_distribute, distributes it;
    # TF's session settings do nothing here; a runner draws no progress bar (its output is worker.log).
    assert set(build.RUN_CONFIG_KEYS) == arguments - {"model_dir", "train_distribute", "eval_distribute",
                                                      "progress_bar", *TF_SESSION_ARGUMENTS}


def test_unknown_run_config_keys_are_named():
    build.check_run_config({"tf_random_seed": 1, "max_steps": 5}, also_allowed=("max_steps",))
    with pytest.raises(ValueError, match=r"run_config has unknown key\(s\) \['bogus', 'model_dir'\]; a run's "
                                         r"RunConfig takes \['tf_random_seed', 'save_summary_steps'"):
        build.check_run_config({"tf_random_seed": 1, "bogus": 2, "model_dir": "/x"})
