"""The run contract's RunConfig settings (``store.run_spec.RunConfigSettings``) and the engine's
``ee.RunConfig`` agree both ways: every setting of the engine a run can carry is in the contract,
and every value the contract accepts builds an ``ee.RunConfig`` (so a run is never refused inside
its runner, after it exists, for a value it was submitted with)."""

from __future__ import annotations

import dataclasses
import itertools
import random
import typing

import pytest

import estimator_engine as ee
from estimator_workbench.store.run_spec import (
    ENGINE_ONLY_RUN_CONFIG,
    RunConfigSettings,
    RunSpecError,
    SessionConfigSettings,
    check_run_config,
    field_bounds,
)


def test_the_contract_takes_every_run_config_setting_of_the_engine():
    engine = {f.name for f in dataclasses.fields(ee.RunConfig) if f.init}
    assert set(RunConfigSettings.model_fields) == engine - set(ENGINE_ONLY_RUN_CONFIG)
    assert set(ENGINE_ONLY_RUN_CONFIG) <= engine


def test_num_threads_is_accepted_and_reaches_the_engine(tmp_path):
    settings = RunConfigSettings.model_validate({"num_threads": 2, "session_config": {"intra_op_parallelism_threads": 1}})
    config = ee.RunConfig(**settings.to_engine(), model_dir=str(tmp_path))
    assert config.num_threads == 2


@pytest.mark.parametrize(("given", "message"), [
    ({"precision": "fp16"}, "run_config.precision = 'fp16' is not allowed: it must be '32', '16-mixed' or 'bf16-mixed'."),
    ({"device": "gpu"}, "run_config.device = 'gpu' is not allowed: it must be 'auto', 'cpu', 'cuda', 'cuda:N' or 'mps'."),
    ({"save_checkpoints_steps": 10, "save_checkpoints_secs": 60},
     "run_config: save_checkpoints_steps and save_checkpoints_secs cannot both be set (given 10 and 60.0); keep one."),
    ({"num_threads": 0}, "run_config.num_threads = 0 is out of range: it must be an integer from 1 to 4096."),
])
def test_values_the_engine_refuses_are_refused_at_submit(given, message):
    with pytest.raises(RunSpecError) as refused:
        check_run_config(given)
    assert str(refused.value) == message


def test_every_problem_is_named_at_once():
    with pytest.raises(RunSpecError) as refused:
        check_run_config({"precision": "fp16", "num_threads": 0, "bogus": 1})
    assert str(refused.value).splitlines() == [
        "run_config.precision = 'fp16' is not allowed: it must be '32', '16-mixed' or 'bf16-mixed'.",
        "run_config.num_threads = 0 is out of range: it must be an integer from 1 to 4096.",
        f"run_config.bogus is not a known setting; run_config takes {list(RunConfigSettings.model_fields)}.",
    ]


def _candidates(model: type, name: str) -> list[typing.Any]:
    """Values around every bound and choice of a field, valid and not (the systematic stand-in for
    a property-based generator: hypothesis is not a test dependency)."""
    field = model.model_fields[name]
    args = [a for a in typing.get_args(field.annotation) if a is not type(None)] or [field.annotation]
    values: list[typing.Any] = [None, "x", -1, 0, 1, True]
    for arg in args:
        if typing.get_origin(arg) is typing.Literal:
            values += [*typing.get_args(arg), "fp16", "bf16", "fp32", "16", "grpc+gdr"]
        elif arg is bool:
            values += [True, False, 0, 1, "true"]
        elif arg is int or arg is float:
            lo, hi = field_bounds(model, name)
            for bound in (lo, hi):
                if bound is not None:
                    values += [bound - 1, bound - 0.5, bound, bound + 0.5, bound + 1]
            values += [2, 7, 100, 2**31, 0.25, float("inf"), float("nan")]
        elif arg is str:
            values += ["auto", "cpu", "cuda", "mps", "cuda:0", "cuda:12", "gpu", "cuda:", "cuda:x", "CPU", "",
                       "cuda:0 ", "tpu"]
        elif isinstance(arg, type) and issubclass(arg, SessionConfigSettings):
            values += [{}, {"intra_op_parallelism_threads": 0}, {"intra_op_parallelism_threads": 4,
                                                                   "inter_op_parallelism_threads": 2},
                       {"intra_op_parallelism_threads": -1}, {"inter_op_parallelism_threads": 5000},
                       {"use_per_session_threads": True}]
    return values


def _accepted(settings: dict[str, typing.Any]) -> RunConfigSettings | None:
    try:
        return RunConfigSettings.model_validate(settings)
    except ValueError:
        return None


def test_every_value_the_contract_accepts_builds_an_engine_run_config(tmp_path):
    accepted: dict[str, list[typing.Any]] = {}
    for name in RunConfigSettings.model_fields:
        for value in _candidates(RunConfigSettings, name):
            settings = _accepted({name: value})
            if settings is None:
                continue
            accepted.setdefault(name, []).append(value)
            ee.RunConfig(**settings.to_engine(), model_dir=str(tmp_path))  # raises if the engine refuses
    assert set(accepted) == set(RunConfigSettings.model_fields)  # each field had accepted values
    assert "fp16" not in accepted["precision"] and 0 not in accepted["num_threads"]
    # Settings together: every pair of fields over their accepted values, then random mixes of all.
    for first, second in itertools.combinations(sorted(accepted), 2):
        for a, b in itertools.product(accepted[first][:4], accepted[second][:4]):
            settings = _accepted({first: a, second: b})
            if settings is not None:
                ee.RunConfig(**settings.to_engine(), model_dir=str(tmp_path))
    rng = random.Random(0)
    for _ in range(300):
        chosen = {name: rng.choice(values) for name, values in accepted.items() if rng.random() < 0.5}
        settings = _accepted(chosen)
        if settings is not None:
            ee.RunConfig(**settings.to_engine(), model_dir=str(tmp_path))
