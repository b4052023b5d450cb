"""RunConfig reads TF_CONFIG as TF 2.15 does: TF's own ``run_config_test.py`` cases, ported as
known-answer tests (cluster spec, task type and index, is_chief, master, replica counts, global id
ordering, model_dir, service, and the errors with TF's messages), plus the torch.distributed
variables a data-parallel run derives from the cluster."""

from __future__ import annotations

import json
import pickle

import pytest

from estimator_engine.run_config import ClusterSpec, RunConfig, TaskType, tf_config_process_group

CLUSTER = {"chief": ["host0:0"], "ps": ["host1:1", "host2:2"], "worker": ["host3:3", "host4:4", "host5:5"]}
MASTER_CLUSTER = {"master": ["host0:0"], "ps": ["host1:1", "host2:2"],
                  "worker": ["host3:3", "host4:4", "host5:5"]}


@pytest.fixture(autouse=True)
def _no_launcher_environment(monkeypatch):
    for name in ("TF_CONFIG", "WORLD_SIZE", "RANK", "LOCAL_RANK"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def tf_config(monkeypatch):
    """``make(dict, **run_config_kwargs)``: a RunConfig built with TF_CONFIG set to ``dict``."""
    def make(config, **kwargs):
        monkeypatch.setenv("TF_CONFIG", json.dumps(config))
        return RunConfig(**kwargs)
    return make


def _properties(config):
    return {"cluster_spec": config.cluster_spec.as_dict(), "task_type": config.task_type,
            "task_id": config.task_id, "master": config.master,
            "evaluation_master": config.evaluation_master, "is_chief": config.is_chief,
            "num_worker_replicas": config.num_worker_replicas, "num_ps_replicas": config.num_ps_replicas}


LOCAL = {"cluster_spec": {}, "task_type": "worker", "task_id": 0, "master": "", "evaluation_master": "",
         "is_chief": True, "num_worker_replicas": 1, "num_ps_replicas": 0}


# -- local mode (no cluster) --------------------------------------------------------------------


def test_default_values():
    config = RunConfig()
    assert _properties(config) == LOCAL
    assert config.global_id_in_cluster == 0 and config.service is None


def test_tf_config_for_local(tf_config):
    config = tf_config({"task": {"type": "worker", "index": 0}})
    assert _properties(config) == LOCAL
    assert config.global_id_in_cluster == 0
    assert config.session_config is None


def test_session_master_for_local(tf_config):
    assert _properties(tf_config({"session_master": "_my_master"})) == {**LOCAL, "master": "_my_master"}


def test_eval_session_master_for_local(tf_config):
    config = tf_config({"eval_session_master": "_my_eval_master"})
    assert _properties(config) == {**LOCAL, "evaluation_master": "_my_eval_master"}


@pytest.mark.parametrize(("task", "message"), [
    ({"type": "chief", "index": 0}, 'If "cluster" is not set in TF_CONFIG, task type must be WORKER.'),
    ({"type": "master", "index": 0}, 'If "cluster" is not set in TF_CONFIG, task type must be WORKER.'),
    ({"type": "worker", "index": 1}, 'If "cluster" is not set in TF_CONFIG, task index must be 0.'),
])
def test_invalid_task_for_local(tf_config, task, message):
    with pytest.raises(ValueError, match=message.replace(".", r"\.")):
        tf_config({"task": task})


# -- cluster with a chief -----------------------------------------------------------------------


def test_chief_tf_config(tf_config):
    config = tf_config({"cluster": CLUSTER, "task": {"type": "chief", "index": 0}})
    assert _properties(config) == {
        "cluster_spec": CLUSTER, "task_type": "chief", "task_id": 0, "master": "grpc://host0:0",
        "evaluation_master": "", "is_chief": True, "num_worker_replicas": 4, "num_ps_replicas": 2}
    assert config.global_id_in_cluster == 0


def test_worker_tf_config(tf_config):
    config = tf_config({"cluster": CLUSTER, "task": {"type": "worker", "index": 1}})
    assert _properties(config) == {
        "cluster_spec": CLUSTER, "task_type": "worker", "task_id": 1, "master": "grpc://host4:4",
        "evaluation_master": "", "is_chief": False, "num_worker_replicas": 4, "num_ps_replicas": 2}


def test_ps_tf_config(tf_config):
    config = tf_config({"cluster": CLUSTER, "task": {"type": "ps", "index": 0}})
    assert _properties(config) == {
        "cluster_spec": CLUSTER, "task_type": "ps", "task_id": 0, "master": "grpc://host1:1",
        "evaluation_master": "", "is_chief": False, "num_worker_replicas": 4, "num_ps_replicas": 2}


def test_evaluator_tf_config(tf_config):
    config = tf_config({"cluster": CLUSTER, "task": {"type": "evaluator", "index": 12}})
    assert _properties(config) == {
        "cluster_spec": {}, "task_type": "evaluator", "task_id": 12, "master": "",
        "evaluation_master": "", "is_chief": False, "num_worker_replicas": 0, "num_ps_replicas": 0}
    assert config.global_id_in_cluster is None
    assert config.world_size == 1  # it evaluates on its own


def test_eval_master_for_evaluator(tf_config):
    config = tf_config({"cluster": CLUSTER, "task": {"type": "evaluator", "index": 12},
                        "eval_session_master": "grpc://123"})
    assert config.evaluation_master == "grpc://123"


def test_single_chief_node(tf_config):
    config = tf_config({"cluster": {"chief": ["host0:0"]}, "task": {"type": "chief", "index": 0}})
    assert _properties(config) == {**LOCAL, "cluster_spec": {"chief": ["host0:0"]}, "task_type": "chief"}


@pytest.mark.parametrize("cluster", [{"chief": ["host0:0"]}, {"chief": ["host0:0"], "ps": ["h1:1", "h2:2"]}])
def test_session_master_from_tf_config(tf_config, cluster):
    config = tf_config({"cluster": cluster, "task": {"type": "chief", "index": 0}, "session_master": "_my_master"})
    assert config.master == "_my_master"


@pytest.mark.parametrize(("config", "error", "message"), [
    ({"cluster": {"chief": ["host0:0", "host:6:6"], "worker": ["host3:3"]}}, ValueError,
     r'The "cluster" in TF_CONFIG must have only one "chief" node\.'),
    ({"cluster": {"worker": ["host3:3", "host4:4"]}}, ValueError,
     r'If "cluster" is set .* it must have one "chief" node'),
    ({"cluster": {"chief": ["host3:3"]}}, ValueError, r'If "cluster" is set .* task type must be set'),
    ({"cluster": {"chief": ["host3:3"]}, "task": {"type": "chief"}}, ValueError,
     r'If "cluster" is set .* task index must be set'),
    ({"cluster": {"chief": ["host3:3"]}, "task": {"type": "chief", "index": 1}}, ValueError,
     "1 is not a valid task_id for task_type chief in the cluster_spec"),
    ({"cluster": {"chief": ["host3:3"]}, "task": {"type": "chief", "index": -1}}, ValueError,
     r"Task index must be non-negative number\."),
    ({"cluster": {"chief": ["host3:3"]}, "task": {"type": "evaluator", "index": -1}}, ValueError,
     r"Task index must be non-negative number\."),
    ({"cluster": {"chief": ["host3:3"]}, "task": {"type": "worker", "index": 0}}, ValueError,
     "worker is not a valid task_type in the cluster_spec"),
    ({"service": 789}, TypeError, 'If "service" is set in TF_CONFIG, it must be a dict. Given'),
    ({"model_dir": ""}, ValueError, "model_dir in TF_CONFIG should be non-empty"),
])
def test_invalid_tf_config(tf_config, config, error, message):
    with pytest.raises(error, match=message):
        tf_config(config)


def test_invalid_json_is_named():
    import os

    os.environ["TF_CONFIG"] = "{cluster: oops"
    try:
        with pytest.raises(ValueError, match="TF_CONFIG must be a JSON object"):
            RunConfig()
    finally:
        del os.environ["TF_CONFIG"]


# -- global ids: chief first, other jobs alphabetically, ps last --------------------------------


@pytest.mark.parametrize("chief", ["chief", "master"])
@pytest.mark.parametrize(("task", "expected"), [
    ({"type": "CHIEF", "index": 0}, 0), ({"type": "worker", "index": 2}, 3), ({"type": "ps", "index": 1}, 5)])
def test_global_id_in_cluster(tf_config, chief, task, expected):
    task = {**task, "type": chief if task["type"] == "CHIEF" else task["type"]}
    cluster = {chief: ["host0:0"], "worker": ["host3:3", "host4:4", "host5:5"],
               "ps": ["host6:3", "host7:4", "host8:5"]}
    assert tf_config({"cluster": cluster, "task": task}).global_id_in_cluster == expected


@pytest.mark.parametrize("chief", ["chief", "master"])
def test_global_id_in_cluster_for_multiple_worker_types(tf_config, chief):
    # 'other_type' sorts before 'worker': the order is chief, other_type, worker, ps.
    cluster = {chief: ["host0:0"], "worker": ["host3:3", "host4:4", "host5:5"],
               "other_type": ["host3:1", "host4:2"], "ps": ["host6:3", "host7:4", "host8:5"]}
    assert tf_config({"cluster": cluster, "task": {"type": "other_type", "index": 1}}).global_id_in_cluster == 2


# -- legacy cluster with a master ---------------------------------------------------------------


def test_master_node(tf_config):
    config = tf_config({"cluster": MASTER_CLUSTER, "task": {"type": "master", "index": 0}})
    assert _properties(config) == {
        "cluster_spec": MASTER_CLUSTER, "task_type": "master", "task_id": 0, "master": "grpc://host0:0",
        "evaluation_master": "", "is_chief": True, "num_worker_replicas": 4, "num_ps_replicas": 2}


def test_single_master_node(tf_config):
    config = tf_config({"cluster": {"master": ["host0:0"]}, "task": {"type": "master", "index": 0}})
    assert _properties(config) == {**LOCAL, "cluster_spec": {"master": ["host0:0"]}, "task_type": "master"}


@pytest.mark.parametrize(("task", "expected"), [
    ({"type": "worker", "index": 1}, ("grpc://host4:4", False)), ({"type": "ps", "index": 0}, ("grpc://host1:1", False))])
def test_worker_and_ps_with_master(tf_config, task, expected):
    config = tf_config({"cluster": MASTER_CLUSTER, "task": task})
    assert (config.master, config.is_chief) == expected
    assert (config.num_worker_replicas, config.num_ps_replicas) == (4, 2)


@pytest.mark.parametrize(("config", "message"), [
    ({"cluster": {"master": ["host0:0", "host:6:6"], "worker": ["host3:3"]}},
     r'The "cluster" in TF_CONFIG must have only one "master" node\.'),
    ({"cluster": {"master": ["host3:3"]}}, r'If "cluster" is set .* task type must be set'),
    ({"cluster": {"master": ["host3:3"]}, "task": {"type": "master"}}, r'If "cluster" is set .* task index must be set'),
    ({"cluster": {"master": ["host3:3"]}, "task": {"type": "master", "index": 1}}, "is not a valid task_id"),
    ({"cluster": {"master": ["host3:3"]}, "task": {"type": "master", "index": -1}},
     r"Task index must be non-negative number\."),
    ({"cluster": {"master": ["host3:3"]}, "task": {"type": "worker", "index": 0}}, "is not a valid task_type"),
    ({"cluster": MASTER_CLUSTER, "task": {"type": "evaluator", "index": 1}},
     "If `master` node exists in `cluster`, task_type `evaluator` is not supported."),
    ({"cluster": {**MASTER_CLUSTER, "chief": ["host3:3"]}, "task": {"type": "ps", "index": 1}},
     "If `master` node exists in `cluster`, job `chief` is not supported."),
])
def test_invalid_tf_config_with_master(tf_config, config, message):
    with pytest.raises(ValueError, match=message):
        tf_config(config)


# -- service and model_dir ----------------------------------------------------------------------


def test_service_arbitrary_key_value_pairs(tf_config):
    service = {"key1": [1, 2], "key2": {"a": 3, "b": 4}, "key3": 789}
    assert tf_config({"service": service}).service == service


def test_missing_service_key(tf_config):
    assert tf_config({"model_dir": "/tmp/123"}).service is None


def test_model_dir_in_tf_config(tf_config):
    assert tf_config({"model_dir": "/tmp/123"}).model_dir == "/tmp/123"
    assert tf_config({"model_dir": "/tmp/123"}, model_dir="/tmp/123").model_dir == "/tmp/123"


def test_model_dir_different_in_constructor_and_tf_config(tf_config):
    with pytest.raises(ValueError, match=r"`model_dir` provided in RunConfig construct, if set, must have the "
                                         r"same value as the model_dir in TF_CONFIG\. "):
        tf_config({"model_dir": "/tmp/123"}, model_dir="/tmp/456")


def test_empty_model_dir_in_constructor_is_still_reported(tf_config):
    with pytest.raises(ValueError, match="model_dir should be non-empty"):
        tf_config({"model_dir": "/tmp/123"}, model_dir="")


def test_replace_does_not_read_tf_config_again(tf_config, monkeypatch):
    # TF's replace copies the config: the Estimator may give it another model_dir.
    config = tf_config({"cluster": CLUSTER, "task": {"type": "worker", "index": 2}, "model_dir": "/tmp/123"})
    monkeypatch.delenv("TF_CONFIG")
    replaced = config.replace(model_dir="/tmp/456", tf_random_seed=1)
    assert replaced.model_dir == "/tmp/456"
    assert (replaced.task_type, replaced.task_id, replaced.global_id_in_cluster) == ("worker", 2, 3)
    copied = pickle.loads(pickle.dumps(replaced))
    assert (copied.task_type, copied.task_id, copied.cluster_spec) == ("worker", 2, CLUSTER)


def test_tf_config_wins_over_the_torchrun_environment(tf_config, monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "8")
    monkeypatch.setenv("RANK", "0")
    config = tf_config({"cluster": CLUSTER, "task": {"type": "worker", "index": 0}})
    assert (config.is_chief, config.world_size, config.global_id_in_cluster) == (False, 4, 1)


def test_cluster_spec_reads_like_tfs():
    spec = ClusterSpec({"chief": ["a:1"], "worker": {"1": "c:3", "0": "b:2"}})  # TF's sparse form too
    assert spec.jobs == ["chief", "worker"] and spec.job_tasks("worker") == ["b:2", "c:3"]
    assert spec.num_tasks("worker") == 2 and spec.task_address("chief", 0) == "a:1"
    assert spec.as_dict() == {"chief": ["a:1"], "worker": ["b:2", "c:3"]} and bool(ClusterSpec()) is False
    with pytest.raises(TypeError, match="must map job 'worker' to a list of \"host:port\" addresses"):
        ClusterSpec({"worker": "b:2"})


def test_task_type_names():
    assert TaskType.MASTER == "master"


# -- the torch.distributed variables a data-parallel run derives from TF_CONFIG ---------------------


def _process_group(monkeypatch, cluster, task):
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": cluster, "task": task}))
    return tf_config_process_group()


def test_process_group_of_chief_and_workers(monkeypatch):
    cluster = {"chief": ["10.0.0.1:2222"], "worker": ["10.0.0.2:2222", "10.0.0.3:2222"], "ps": ["10.0.0.9:2222"]}
    expected = {"MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "2222", "WORLD_SIZE": "3",
                "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1"}
    assert _process_group(monkeypatch, cluster, {"type": "chief", "index": 0}) == {**expected, "RANK": "0"}
    assert _process_group(monkeypatch, cluster, {"type": "worker", "index": 1}) == {**expected, "RANK": "2"}
    # ps and evaluator tasks do not take part in data-parallel training.
    assert _process_group(monkeypatch, cluster, {"type": "ps", "index": 0}) is None
    assert _process_group(monkeypatch, cluster, {"type": "evaluator", "index": 0}) is None


def test_process_group_local_ranks_on_one_host(monkeypatch):
    cluster = {"master": ["127.0.0.1:4000"], "worker": ["127.0.0.1:4001", "[::1]:4002", "127.0.0.1:4003"]}
    group = _process_group(monkeypatch, cluster, {"type": "worker", "index": 2})
    assert (group["RANK"], group["LOCAL_RANK"], group["LOCAL_WORLD_SIZE"]) == ("3", "2", "3")
    assert _process_group(monkeypatch, cluster, {"type": "worker", "index": 1})["LOCAL_RANK"] == "0"


def test_process_group_without_tf_config(monkeypatch):
    assert tf_config_process_group() is None
    monkeypatch.setenv("TF_CONFIG", json.dumps({"task": {"type": "worker", "index": 0}}))
    assert tf_config_process_group() is None


def test_malformed_chief_address_is_named(monkeypatch):
    with pytest.raises(ValueError, match=r"Address 'host0' in the \"cluster\" of TF_CONFIG must be \"host:port\""):
        _process_group(monkeypatch, {"chief": ["host0"], "worker": ["h:1"]}, {"type": "chief", "index": 0})
