"""Tests of ``RunConfig`` against TF's ``run_config.py`` rules (defaults, validation, replace, cluster)."""

from __future__ import annotations

import dataclasses
import os
import pathlib

import numpy as np
import pytest
import torch

import estimator_engine as ee
from estimator_engine.run_config import RunConfig, TaskType

REPLACEABLE = (
    "model_dir", "tf_random_seed", "save_summary_steps", "save_checkpoints_steps",
    "save_checkpoints_secs", "keep_checkpoint_max", "keep_checkpoint_every_n_hours",
    "log_step_count_steps", "train_distribute", "eval_distribute", "device", "precision",
    "compile", "num_threads", "session_config", "session_creation_timeout_secs", "device_fn", "protocol",
    "experimental_max_worker_delay_secs", "checkpoint_save_graph_def", "progress_bar",
)


@pytest.fixture(autouse=True)
def _single_process(monkeypatch):
    """Each test starts outside torchrun unless it sets the variables itself."""
    for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK"):
        monkeypatch.delenv(name, raising=False)


def _launched(monkeypatch, world_size: int, rank: int, local_rank: int | None = None) -> None:
    monkeypatch.setenv("WORLD_SIZE", str(world_size))
    monkeypatch.setenv("RANK", str(rank))
    if local_rank is not None:
        monkeypatch.setenv("LOCAL_RANK", str(local_rank))


# -- defaults (TF's test_default_property_values) ------------------------------------------------


def test_default_property_values():
    config = RunConfig()
    assert config.model_dir is None
    assert config.tf_random_seed is None
    assert config.save_summary_steps == 100
    assert config.save_checkpoints_steps is None
    assert config.save_checkpoints_secs == 600
    assert config.keep_checkpoint_max == 5
    assert config.keep_checkpoint_every_n_hours == 10000
    assert config.log_step_count_steps == 100
    assert config.train_distribute is None
    assert config.eval_distribute is None
    assert config.device == "auto"
    assert config.precision == "32"
    assert config.compile is False


def test_default_distributed_properties():
    config = RunConfig()
    assert config.is_chief is True
    assert config.task_type == TaskType.WORKER == "worker"
    assert config.task_id == 0
    assert config.num_worker_replicas == 1
    assert config.num_ps_replicas == 0
    assert config.global_id_in_cluster == 0
    assert config.world_size == 1
    assert config.master == ""
    assert config.cluster_spec == {}


def test_task_type_names():
    assert (TaskType.CHIEF, TaskType.WORKER, TaskType.EVALUATOR, TaskType.PS) == (
        "chief", "worker", "evaluator", "ps")


def test_equal_configs_compare_equal():
    assert RunConfig() == RunConfig()
    assert RunConfig(tf_random_seed=1) != RunConfig(tf_random_seed=2)


def test_all_fields_set():
    config = RunConfig(model_dir="/tmp/m", tf_random_seed=7, save_summary_steps=0,
                       save_checkpoints_steps=0, keep_checkpoint_max=0,
                       keep_checkpoint_every_n_hours=0.5, log_step_count_steps=1, device="cpu",
                       precision="bf16-mixed", compile=True)
    assert (config.model_dir, config.tf_random_seed, config.save_summary_steps) == ("/tmp/m", 7, 0)
    assert (config.save_checkpoints_steps, config.save_checkpoints_secs) == (0, None)
    assert (config.keep_checkpoint_max, config.keep_checkpoint_every_n_hours) == (0, 0.5)
    assert (config.log_step_count_steps, config.device, config.precision) == (1, "cpu", "bf16-mixed")
    assert config.compile is True


def test_model_dir_path_is_converted_to_str(tmp_path):
    config = RunConfig(model_dir=tmp_path / "model")
    assert config.model_dir == str(tmp_path / "model")
    assert isinstance(config.model_dir, str)
    assert config.replace(model_dir=pathlib.Path(tmp_path)).model_dir == str(tmp_path)


# -- None is accepted everywhere (TF's test_init_none_value / test_replace_none_value) ------------

NONE_FIELDS = [f.name for f in dataclasses.fields(RunConfig)]


def test_every_field_is_covered():
    assert set(NONE_FIELDS) == set(REPLACEABLE)


@pytest.mark.parametrize("name", NONE_FIELDS)
def test_init_none_value(name):
    config = RunConfig(**{name: None})
    assert getattr(config, name) is None


def test_init_all_none():
    config = RunConfig(**{name: None for name in NONE_FIELDS})
    for name in NONE_FIELDS:
        assert getattr(config, name) is None


@pytest.mark.parametrize("name", NONE_FIELDS)
def test_replace_none_value(name):
    assert getattr(RunConfig().replace(**{name: None}), name) is None


def test_replace_all_none():
    config = RunConfig().replace(**{name: None for name in NONE_FIELDS})
    for name in NONE_FIELDS:
        assert getattr(config, name) is None


# -- validation -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("kwargs", "fragment"), [
    ({"model_dir": ""}, "model_dir should be non-empty"),
    ({"tf_random_seed": 1.0}, "tf_random_seed must be integer"),
    ({"tf_random_seed": "1"}, "tf_random_seed must be integer"),
    ({"save_summary_steps": -1}, "save_summary_steps should be >= 0"),
    ({"save_checkpoints_steps": -1}, "save_checkpoints_steps should be >= 0"),
    ({"save_checkpoints_secs": -1}, "save_checkpoints_secs should be >= 0"),
    ({"keep_checkpoint_max": -1}, "keep_checkpoint_max should be >= 0"),
    ({"keep_checkpoint_every_n_hours": 0}, "keep_checkpoint_every_n_hours should be > 0"),
    ({"keep_checkpoint_every_n_hours": -1.5}, "keep_checkpoint_every_n_hours should be > 0"),
    ({"log_step_count_steps": 0}, "log_step_count_steps should be > 0"),
    ({"log_step_count_steps": -3}, "log_step_count_steps should be > 0"),
    ({"save_summary_steps": "100"}, "save_summary_steps should be >= 0"),
    ({"save_summary_steps": True}, "save_summary_steps should be >= 0"),
    ({"device": "gpu"}, "device must be 'auto', 'cpu', 'cuda', 'cuda:N' or 'mps'"),
    ({"device": "cuda:"}, "device must be"),
    ({"device": "cuda:x"}, "device must be"),
    ({"device": "CPU"}, "device must be"),
    ({"device": 0}, "device must be"),
    ({"precision": "16"}, "precision must be one of"),
    ({"precision": 32}, "precision must be one of"),
    ({"precision": "bf16"}, "precision must be one of"),
])
def test_validation(kwargs, fragment):
    with pytest.raises(ValueError, match=fragment) as info:
        RunConfig(**kwargs)
    (value,) = kwargs.values()
    assert repr(value) in str(info.value)  # the received value is shown


@pytest.mark.parametrize(("kwargs", "fragment"), [
    ({"model_dir": ""}, "model_dir should be non-empty"),
    ({"tf_random_seed": 1.5}, "tf_random_seed must be integer"),
    ({"save_summary_steps": -1}, "save_summary_steps should be >= 0"),
    ({"save_checkpoints_steps": -1}, "save_checkpoints_steps should be >= 0"),
    ({"save_checkpoints_secs": -1}, "save_checkpoints_secs should be >= 0"),
    ({"keep_checkpoint_max": -1}, "keep_checkpoint_max should be >= 0"),
    ({"keep_checkpoint_every_n_hours": 0}, "keep_checkpoint_every_n_hours should be > 0"),
    ({"log_step_count_steps": 0}, "log_step_count_steps should be > 0"),
    ({"device": "tpu"}, "device must be"),
    ({"precision": "64"}, "precision must be one of"),
])
def test_replace_revalidates(kwargs, fragment):
    with pytest.raises(ValueError, match=fragment):
        RunConfig().replace(**kwargs)


def test_boundary_values_are_accepted():
    config = RunConfig(save_summary_steps=0, save_checkpoints_secs=0, keep_checkpoint_max=0,
                       keep_checkpoint_every_n_hours=1e-3, log_step_count_steps=1, tf_random_seed=0)
    assert config.save_checkpoints_secs == 0
    assert RunConfig(save_checkpoints_steps=0).save_checkpoints_steps == 0


@pytest.mark.parametrize("device", ["auto", "cpu", "cuda", "cuda:0", "cuda:12", "mps"])
def test_valid_devices(device):
    assert RunConfig(device=device).device == device


@pytest.mark.parametrize("precision", ["32", "16-mixed", "bf16-mixed"])
def test_valid_precisions(precision):
    assert RunConfig(precision=precision).precision == precision


def test_all_problems_are_reported_in_one_error():
    with pytest.raises(ValueError, match="Invalid RunConfig") as info:
        RunConfig(save_summary_steps=-1, log_step_count_steps=0, device="gpu", precision="8")
    message = str(info.value)
    for fragment in ("save_summary_steps should be >= 0", "log_step_count_steps should be > 0",
                     "device must be", "precision must be one of"):
        assert fragment in message


def test_two_problems_in_replace_are_reported_together():
    with pytest.raises(ValueError) as info:
        RunConfig().replace(tf_random_seed=1.0, keep_checkpoint_max=-2)
    message = str(info.value)
    assert "tf_random_seed must be integer" in message
    assert "keep_checkpoint_max should be >= 0" in message


# -- checkpoint frequency -------------------------------------------------------------------------


def test_neither_frequency_given_means_600_secs():
    config = RunConfig()
    assert (config.save_checkpoints_steps, config.save_checkpoints_secs) == (None, 600)


def test_steps_only_clears_secs():
    config = RunConfig(save_checkpoints_steps=100)
    assert (config.save_checkpoints_steps, config.save_checkpoints_secs) == (100, None)


def test_secs_only_clears_steps():
    config = RunConfig(save_checkpoints_secs=30)
    assert (config.save_checkpoints_steps, config.save_checkpoints_secs) == (None, 30)


def test_both_frequencies_cannot_be_set():
    with pytest.raises(ValueError, match=(
            "`save_checkpoints_steps` and `save_checkpoints_secs` cannot be both set")):
        RunConfig(save_checkpoints_steps=100, save_checkpoints_secs=60)


def test_both_frequencies_none_disables_checkpoints():
    config = RunConfig(save_checkpoints_steps=None, save_checkpoints_secs=None)
    assert (config.save_checkpoints_steps, config.save_checkpoints_secs) == (None, None)


@pytest.mark.parametrize("name", ["save_checkpoints_steps", "save_checkpoints_secs"])
def test_one_explicit_none_disables_checkpoints(name):
    # TF: only one passed -> the other becomes None, even when the one passed is None.
    config = RunConfig(**{name: None})
    assert (config.save_checkpoints_steps, config.save_checkpoints_secs) == (None, None)


def test_one_frequency_with_the_other_none():
    config = RunConfig(save_checkpoints_steps=5, save_checkpoints_secs=None)
    assert (config.save_checkpoints_steps, config.save_checkpoints_secs) == (5, None)


def test_replace_steps_flips_secs():
    config = RunConfig(save_checkpoints_secs=60).replace(save_checkpoints_steps=100)
    assert (config.save_checkpoints_steps, config.save_checkpoints_secs) == (100, None)


def test_replace_secs_flips_steps():
    config = RunConfig(save_checkpoints_steps=100).replace(save_checkpoints_secs=60)
    assert (config.save_checkpoints_steps, config.save_checkpoints_secs) == (None, 60)


def test_replace_both_non_none_raises():
    with pytest.raises(ValueError, match="cannot be both set"):
        RunConfig().replace(save_checkpoints_steps=100, save_checkpoints_secs=60)


def test_replace_secs_none_leaves_both_none():
    config = RunConfig().replace(save_checkpoints_secs=None)
    assert (config.save_checkpoints_steps, config.save_checkpoints_secs) == (None, None)


def test_replace_steps_none_keeps_secs():
    config = RunConfig().replace(save_checkpoints_steps=None)
    assert (config.save_checkpoints_steps, config.save_checkpoints_secs) == (None, 600)


def test_replace_other_fields_keeps_the_frequency():
    assert RunConfig(save_checkpoints_steps=7).replace(model_dir="m").save_checkpoints_steps == 7
    config = RunConfig(save_checkpoints_steps=None, save_checkpoints_secs=None).replace(
        tf_random_seed=3)
    assert (config.save_checkpoints_steps, config.save_checkpoints_secs) == (None, None)


# -- replace --------------------------------------------------------------------------------------


def test_replace_returns_a_new_config():
    config = RunConfig(model_dir="a", tf_random_seed=1)
    replaced = config.replace(model_dir="b", keep_checkpoint_max=9)
    assert replaced is not config
    assert (replaced.model_dir, replaced.keep_checkpoint_max, replaced.tf_random_seed) == ("b", 9, 1)
    assert (config.model_dir, config.keep_checkpoint_max) == ("a", 5)


def _device_fn(op):
    return "/cpu:0"


@pytest.mark.parametrize("name", REPLACEABLE)
def test_every_allowed_property_can_be_replaced(name):
    # device_fn: TF requires a callable taking exactly ``op`` (a string passed before that rule).
    values = {"num_threads": 3, "model_dir": "d", "tf_random_seed": 3, "save_summary_steps": 3,
              "save_checkpoints_steps": 3, "save_checkpoints_secs": 3, "keep_checkpoint_max": 3,
              "keep_checkpoint_every_n_hours": 3, "log_step_count_steps": 3,
              "train_distribute": "strategy", "eval_distribute": "strategy", "device": "cpu",
              "precision": "16-mixed", "compile": True, "session_config": "cfg",
              "session_creation_timeout_secs": 3, "device_fn": _device_fn, "protocol": "grpc",
              "experimental_max_worker_delay_secs": 3, "checkpoint_save_graph_def": False, "progress_bar": True}
    assert getattr(RunConfig().replace(**{name: values[name]}), name) == values[name]


@pytest.mark.parametrize("name", ["master", "task_type", "is_chief", "evaluation_master",
                                  "num_ps_replicas", "unknown_name", "world_size"])
def test_replace_not_supported(name):
    with pytest.raises(ValueError, match=f"Replacing {name} is not supported") as info:
        RunConfig().replace(**{name: 1})
    assert "Allowed properties are" in str(info.value)
    assert "'model_dir'" in str(info.value)


# -- frozen ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["model_dir", "save_checkpoints_steps", "device"])
def test_config_is_frozen(name):
    config = RunConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(config, name, "x")
    assert getattr(config, name) == getattr(RunConfig(), name)


def test_derived_properties_are_read_only():
    config = RunConfig()
    for name in ("is_chief", "task_type", "task_id", "num_worker_replicas", "global_id_in_cluster"):
        with pytest.raises(AttributeError):
            setattr(config, name, 1)


def test_config_is_hashable():
    assert hash(RunConfig(model_dir="m")) == hash(RunConfig(model_dir="m"))


# -- devices --------------------------------------------------------------------------------------


def test_resolved_device_auto_without_cuda_is_cpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert RunConfig().resolved_device() == torch.device("cpu")
    assert RunConfig(device=None).resolved_device() == torch.device("cpu")


def test_resolved_device_auto_with_cuda_is_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert RunConfig().resolved_device() == torch.device("cuda")


def test_resolved_device_auto_here():
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert RunConfig().resolved_device().type == expected


@pytest.mark.parametrize(("device", "expected"), [
    ("cpu", torch.device("cpu")), ("cuda:1", torch.device("cuda:1")), ("mps", torch.device("mps")),
])
def test_resolved_device_explicit(device, expected):
    assert RunConfig(device=device).resolved_device() == expected


def test_resolved_device_cpu_stays_cpu_when_distributed(monkeypatch):
    _launched(monkeypatch, world_size=2, rank=1, local_rank=1)
    assert RunConfig(device="cpu").resolved_device() == torch.device("cpu")


def test_resolved_device_cuda_uses_local_rank_when_distributed(monkeypatch):
    _launched(monkeypatch, world_size=4, rank=3, local_rank=1)
    assert RunConfig(device="cuda").resolved_device() == torch.device("cuda:1")
    assert RunConfig(device="cuda:0").resolved_device() == torch.device("cuda:0")  # explicit wins


def test_resolved_device_auto_uses_local_rank_when_distributed(monkeypatch):
    _launched(monkeypatch, world_size=2, rank=1, local_rank=1)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert RunConfig().resolved_device() == torch.device("cuda:1")


def test_resolved_device_single_process_cuda_has_no_index(monkeypatch):
    monkeypatch.setenv("LOCAL_RANK", "3")
    assert RunConfig(device="cuda").resolved_device() == torch.device("cuda")


# -- distributed properties from the torchrun environment ---------------------------------------


def test_chief_of_a_cluster(monkeypatch):
    _launched(monkeypatch, world_size=4, rank=0, local_rank=0)
    config = RunConfig()
    assert config.is_chief is True
    assert config.task_type == "chief"
    assert config.task_id == 0
    assert config.num_worker_replicas == 4
    assert config.global_id_in_cluster == 0
    assert config.num_ps_replicas == 0


@pytest.mark.parametrize("rank", [1, 2, 3])
def test_workers_of_a_cluster(monkeypatch, rank):
    # TF's global id ordering: chief 0, then worker 0..n-1 -> 1..n.
    _launched(monkeypatch, world_size=4, rank=rank, local_rank=rank % 2)
    config = RunConfig()
    assert config.is_chief is False
    assert config.task_type == "worker"
    assert config.task_id == rank - 1
    assert config.num_worker_replicas == 4
    assert config.global_id_in_cluster == rank
    assert config.world_size == 4


def test_properties_follow_the_environment_of_the_moment(monkeypatch):
    config = RunConfig()
    assert config.is_chief
    _launched(monkeypatch, world_size=2, rank=1)
    assert not config.is_chief
    assert config.task_type == "worker"


def test_world_size_one_with_rank_zero_is_a_lone_worker(monkeypatch):
    _launched(monkeypatch, world_size=1, rank=0, local_rank=0)
    config = RunConfig()
    assert (config.task_type, config.task_id, config.is_chief) == ("worker", 0, True)


# -- copies ---------------------------------------------------------------------------------------


def test_pickle_and_deepcopy_round_trip():
    import copy
    import pickle

    config = RunConfig(model_dir="m", save_checkpoints_steps=3, device="cpu")
    assert pickle.loads(pickle.dumps(config)) == config
    assert copy.deepcopy(config) == config
    assert copy.deepcopy(config).save_checkpoints_secs is None


def test_non_path_model_dir_is_rejected():
    with pytest.raises(TypeError):
        RunConfig(model_dir=5)


def test_tf_session_arguments_are_accepted_and_said_to_do_nothing(caplog):
    """TF code that builds RunConfig(session_config=..., protocol=...) runs unchanged."""
    with caplog.at_level("WARNING", logger="estimator_engine"):
        assert RunConfig(session_creation_timeout_secs=7200, checkpoint_save_graph_def=True).protocol is None
    assert caplog.records == []
    with caplog.at_level("WARNING", logger="estimator_engine"):
        config = RunConfig(session_config={"allow_soft_placement": True}, protocol="grpc")
    assert config.session_config == {"allow_soft_placement": True} and config.evaluation_master == ""
    assert [r.getMessage() for r in caplog.records] == [
        "RunConfig: session_config, protocol configure TF sessions and graphs and have no effect on PyTorch."]
    assert config.replace(device_fn=None).protocol == "grpc"


# -- TF's session arguments are validated as TF does (run_config_test's test_init_invalid_values) --


@pytest.mark.parametrize(("kwargs", "fragment"), [
    ({"device_fn": lambda x, y: 0}, 'device_fn must be callable with exactly one argument "op"'),
    ({"device_fn": lambda x: "/cpu:0"}, 'device_fn must be callable with exactly one argument "op"'),
    ({"device_fn": "/cpu:0"}, 'device_fn must be callable with exactly one argument "op"'),
    ({"experimental_max_worker_delay_secs": "5"}, "experimental_max_worker_delay_secs must be an integer if set"),
    ({"experimental_max_worker_delay_secs": 5.0}, "experimental_max_worker_delay_secs must be an integer if set"),
    ({"session_creation_timeout_secs": 0}, "session_creation_timeout_secs should be > 0"),
    ({"session_creation_timeout_secs": -1}, "session_creation_timeout_secs should be > 0"),
    ({"protocol": "http"}, "protocol should be grpc or grpc\\+verbs"),
    ({"num_threads": 0}, "num_threads should be an int >= 1"),
    ({"num_threads": 1.5}, "num_threads should be an int >= 1"),
    ({"session_config": {"intra_op_parallelism_threads": -1}},
     "session_config.intra_op_parallelism_threads should be an int >= 0"),
    ({"session_config": {"inter_op_parallelism_threads": "2"}},
     "session_config.inter_op_parallelism_threads should be an int >= 0"),
])
def test_tf_session_arguments_are_validated(kwargs, fragment):
    with pytest.raises(ValueError, match=fragment):
        RunConfig(**kwargs)
    with pytest.raises(ValueError, match=fragment):
        RunConfig().replace(**kwargs)


def test_valid_tf_session_arguments_are_kept():
    import functools

    def device_fn(op):
        return "/cpu:0"

    class Placer:
        def __call__(self, op):
            return "/cpu:0"

    for fn in (device_fn, Placer(), functools.partial(lambda a, op: a, 1)):
        assert RunConfig(device_fn=fn).device_fn is fn
    config = RunConfig(experimental_max_worker_delay_secs=10, session_creation_timeout_secs=18,
                       protocol="grpc+verbs", num_threads=3)
    assert (config.experimental_max_worker_delay_secs, config.session_creation_timeout_secs) == (10, 18)
    assert (config.protocol, config.num_threads) == ("grpc+verbs", 3)


def test_session_config_with_only_threads_is_not_said_to_do_nothing(caplog):
    with caplog.at_level("WARNING", logger="estimator_engine"):
        RunConfig(session_config={"intra_op_parallelism_threads": 2, "inter_op_parallelism_threads": 0})
    assert caplog.records == []


# -- threads: session_config's intra/inter-op settings and num_threads map to torch's ------------


@pytest.fixture
def torch_threads(monkeypatch):
    """torch's thread counts, recorded instead of changed (they are process-wide)."""
    from estimator_engine import run_config

    state = {"intra": 8, "inter": 4, "intra_calls": [], "inter_calls": []}
    monkeypatch.setattr(run_config, "_TORCH_DEFAULT_THREADS", 8)
    monkeypatch.setattr(run_config, "_chosen_threads", [])
    monkeypatch.setattr(run_config, "_interop_warned", set())
    monkeypatch.setattr(torch, "get_num_threads", lambda: state["intra"])
    monkeypatch.setattr(torch, "get_num_interop_threads", lambda: state["inter"])

    def set_intra(n):
        state["intra_calls"].append(n)
        state["intra"] = n

    def set_inter(n):
        state["inter_calls"].append(n)
        if state.get("inter_locked"):
            raise RuntimeError("Error: cannot set number of interop threads after parallel work has started")
        state["inter"] = n

    monkeypatch.setattr(torch, "set_num_threads", set_intra)
    monkeypatch.setattr(torch, "set_num_interop_threads", set_inter)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    monkeypatch.setattr(os, "getloadavg", lambda: (1.0, 1.0, 1.0), raising=False)
    for name in ("OMP_NUM_THREADS", "LOCAL_WORLD_SIZE", "TF_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    return state


class _ConfigProto:
    """Stands in for tf.compat.v1.ConfigProto: a protobuf message listing the fields it sets."""

    def __init__(self, **fields):
        self.__dict__.update(fields)

    def ListFields(self):
        return [(type("Field", (), {"name": name}), value) for name, value in vars(self).items()]


def test_num_threads_is_applied(torch_threads):
    from estimator_engine.run_config import apply_thread_settings

    assert apply_thread_settings(RunConfig(num_threads=3)) == 3
    assert torch_threads["intra_calls"] == [3]
    apply_thread_settings(RunConfig(num_threads=3))
    assert torch_threads["intra_calls"] == [3]  # already set: not set again


@pytest.mark.parametrize("session_config", [
    {"intra_op_parallelism_threads": 2, "inter_op_parallelism_threads": 1},
    _ConfigProto(intra_op_parallelism_threads=2, inter_op_parallelism_threads=1)])
def test_session_config_threads_map_to_torch(torch_threads, session_config, caplog):
    from estimator_engine.run_config import apply_thread_settings

    with caplog.at_level("WARNING", logger="estimator_engine"):
        config = RunConfig(session_config=session_config)
    assert caplog.records == []  # thread settings act on torch: not "no effect"
    assert apply_thread_settings(config) == 2
    assert (torch_threads["intra_calls"], torch_threads["inter_calls"]) == ([2], [1])


def test_num_threads_wins_over_session_config_and_zero_means_unset(torch_threads):
    from estimator_engine.run_config import thread_settings

    session = {"intra_op_parallelism_threads": 2, "inter_op_parallelism_threads": 0}
    assert thread_settings(RunConfig(num_threads=1, session_config=session)) == (1, None)
    assert thread_settings(RunConfig(session_config={"intra_op_parallelism_threads": 0})) == (None, None)


def test_interop_threads_after_parallel_work_warn_once(torch_threads, caplog):
    from estimator_engine.run_config import apply_thread_settings

    torch_threads["inter_locked"] = True
    config = RunConfig(session_config={"inter_op_parallelism_threads": 1})
    with caplog.at_level("WARNING", logger="estimator_engine"):
        apply_thread_settings(config)
        apply_thread_settings(config)
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 1 and "call torch.set_num_interop_threads(1) at the start" in messages[0]


@pytest.mark.parametrize(("load", "local_processes", "expected"), [
    (1.0, None, 4),   # idle 4-core mask: torch's default (8) capped at the 4 cores
    (4.0, None, 1),   # 3 other runnable processes on 4 cores: 1 thread
    (2.5, None, 2),
    (2.0, "2", 2),    # 2 data-parallel processes on this host share the 4 cores
    (9.0, "2", 1),
])
def test_default_threads_follow_the_cores_this_process_can_use(torch_threads, monkeypatch, load,
                                                               local_processes, expected):
    from estimator_engine.run_config import apply_thread_settings

    monkeypatch.setattr(os, "getloadavg", lambda: (load, load, load), raising=False)
    if local_processes:
        monkeypatch.setenv("LOCAL_WORLD_SIZE", local_processes)
    assert apply_thread_settings(RunConfig()) == expected


def test_default_threads_come_back_when_the_machine_is_free_again(torch_threads, monkeypatch):
    from estimator_engine.run_config import apply_thread_settings

    monkeypatch.setattr(os, "getloadavg", lambda: (6.0, 6.0, 6.0), raising=False)
    assert apply_thread_settings(RunConfig()) == 1
    monkeypatch.setattr(os, "getloadavg", lambda: (0.5, 0.5, 0.5), raising=False)
    assert apply_thread_settings(RunConfig()) == 4


def test_user_choices_outside_the_config_are_left_alone(torch_threads, monkeypatch):
    from estimator_engine.run_config import apply_thread_settings

    monkeypatch.setenv("OMP_NUM_THREADS", "6")
    torch_threads["intra"] = 6
    assert apply_thread_settings(RunConfig()) == 6
    monkeypatch.delenv("OMP_NUM_THREADS")
    torch_threads["intra"] = 5  # torch.set_num_threads(5) called by the user
    assert apply_thread_settings(RunConfig()) == 5
    assert torch_threads["intra_calls"] == []


def test_estimator_applies_the_threads_when_a_call_starts(torch_threads, tmp_path):
    import estimator_engine as ee

    def model_fn(features, labels, mode):
        net = ee.get_module("linear", lambda: torch.nn.Linear(1, 1))
        loss = torch.nn.functional.mse_loss(net(features["x"]), labels)
        optimizer = ee.get_optimizer("sgd", lambda: torch.optim.SGD(net.parameters(), lr=0.1))
        return ee.EstimatorSpec(mode, loss=loss, train_op=ee.minimize(optimizer, loss),
                                predictions={"y": loss})

    est = ee.Estimator(model_fn, model_dir=str(tmp_path), config=RunConfig(num_threads=2))
    est.train(ee.inputs.numpy_input_fn({"x": torch.ones(4, 1)}, torch.ones(4, 1), shuffle=False), steps=1)
    assert torch_threads["intra_calls"] == [2, 8]  # set for the call, the caller's 8 back after it


def _threads_model_fn(features, labels, mode):
    net = ee.get_module("linear", lambda: torch.nn.Linear(1, 1))
    predictions = net(features["x"])
    if mode == ee.ModeKeys.PREDICT:
        return ee.EstimatorSpec(mode, predictions={"y": predictions, "threads": torch.full_like(
            predictions, float(torch.get_num_threads()))})
    loss = torch.nn.functional.mse_loss(predictions, labels)
    optimizer = ee.get_optimizer("sgd", lambda: torch.optim.SGD(net.parameters(), lr=0.1))
    return ee.EstimatorSpec(mode, loss=loss, train_op=ee.minimize(optimizer, loss))


def test_train_evaluate_and_predict_put_the_callers_thread_count_back(torch_threads, tmp_path, monkeypatch):
    """A busy machine (load 3 on 4 cores: 2 usable) makes a call run on 2 threads; the caller keeps its 8."""
    monkeypatch.setattr(os, "getloadavg", lambda: (3.0, 3.0, 3.0), raising=False)
    est = ee.Estimator(_threads_model_fn, model_dir=str(tmp_path), config=RunConfig(log_step_count_steps=None))
    data = ee.inputs.numpy_input_fn({"x": np.ones((4, 1), np.float32)}, np.ones((4, 1), np.float32),
                                    batch_size=2, shuffle=False)
    est.train(data, steps=2)
    assert torch_threads["intra_calls"] == [2, 8] and torch_threads["intra"] == 8
    est.evaluate(data)
    assert torch_threads["intra_calls"] == [2, 8, 2, 8]
    predictions = est.predict(data)
    first = next(predictions)
    assert first["threads"][0] == 2  # the batch itself ran on the lowered count
    assert torch_threads["intra"] == 8  # between two batches the caller's code runs with its own
    list(predictions)
    assert torch_threads["intra"] == 8


def test_a_count_the_caller_chose_is_kept_and_restored(torch_threads, tmp_path):
    torch.set_num_threads(3)  # the user's own choice: not the default, not ours
    est = ee.Estimator(_threads_model_fn, model_dir=str(tmp_path), config=RunConfig(num_threads=1, log_step_count_steps=None))
    data = ee.inputs.numpy_input_fn({"x": np.ones((2, 1), np.float32)}, np.ones((2, 1), np.float32),
                                    batch_size=2, shuffle=False)
    est.train(data, steps=1)
    assert torch_threads["intra_calls"][-2:] == [1, 3] and torch_threads["intra"] == 3
