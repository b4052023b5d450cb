"""DDP through torchrun (2 CPU processes, gloo), device and precision logic without CUDA."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest
import torch

import estimator_engine as ee
from estimator_engine import distribute
from estimator_engine.distribute import DDPStrategy, InputContext, strategy_for

WORKER = os.path.join(os.path.dirname(__file__), "ddp_worker.py")


def _torchrun(model_dir, out_dir, steps):
    out_dir.mkdir(exist_ok=True)
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
               WORKER, str(model_dir), str(out_dir), str(steps)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.getcwd()}
    done = subprocess.run(command, capture_output=True, text=True, timeout=240, env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return [json.loads((out_dir / f"rank{r}.json").read_text()) for r in (0, 1)]


@pytest.mark.slow
def test_two_process_training_resume_and_evaluate(tmp_path):
    model_dir = tmp_path / "model"
    first = _torchrun(model_dir, tmp_path / "first", steps=4)
    chief, worker = first
    assert (chief["is_chief"], chief["task_type"]) == (True, "chief")
    assert (worker["is_chief"], worker["task_type"]) == (False, "worker")
    # Identical parameters on both ranks after DDP training.
    assert chief["state"] == worker["state"] and chief["state"]["global_step"] == 4
    # Only the chief writes checkpoints (the initial one and the final one).
    assert chief["saves"] == [0, 4] and worker["saves"] == []
    # One epoch is 4 steps per rank: the shards together cover every example exactly once.
    assert sorted(chief["seen_ids"] + worker["seen_ids"]) == list(range(64))
    assert not set(chief["seen_ids"]) & set(worker["seen_ids"])

    # evaluate under DDP (each rank a shard, states summed) equals one process on all the data.
    single = ee.Estimator(_single_model_fn, model_dir=str(model_dir))
    x = torch.linspace(-1, 1, 64).reshape(64, 1)
    expected = single.evaluate(ee.inputs.numpy_input_fn({"x": x, "id": torch.arange(64)}, 2 * x + 3,
                                                        batch_size=8, shuffle=False))
    for rank in first:
        assert rank["eval"]["global_step"] == expected["global_step"] == 4
        assert rank["eval"]["mae"] == pytest.approx(expected["mae"], rel=1e-9)
        # loss is the mean of float32 batch losses, and the shards batch other examples together.
        assert rank["eval"]["loss"] == pytest.approx(expected["loss"], rel=1e-6)

    # A second 2-process run resumes from the chief's checkpoint and continues the global step.
    second = _torchrun(model_dir, tmp_path / "second", steps=3)
    assert second[0]["state"] == second[1]["state"]
    assert second[0]["state"]["global_step"] == 7
    # The resumed run's first save is the checkpoint it restored (step 4): not written again.
    assert second[0]["saves"] == [7] and second[1]["saves"] == []


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tf_config_processes(model_dir, out_dir, steps):
    """Two plain python processes, each told its task by TF_CONFIG alone (as a TFJob starts them)."""
    out_dir.mkdir(exist_ok=True)
    cluster = {"chief": [f"127.0.0.1:{_free_port()}"], "worker": [f"127.0.0.1:{_free_port()}"],
               "ps": ["127.0.0.1:1"]}  # ps tasks do not take part in data-parallel training
    base = {k: v for k, v in os.environ.items()
            if k not in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE")}
    processes = []
    for task in ({"type": "chief", "index": 0}, {"type": "worker", "index": 0}):
        env = {**base, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.getcwd(),
               "TF_CONFIG": json.dumps({"cluster": cluster, "task": task})}
        processes.append(subprocess.Popen([sys.executable, WORKER, str(model_dir), str(out_dir), str(steps)],
                                          env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    try:
        outputs = [p.communicate(timeout=240)[0] for p in processes]
    finally:
        for p in processes:
            if p.poll() is None:
                p.kill()
                p.wait()
    for p, output in zip(processes, outputs):
        assert p.returncode == 0, output[-3000:]
    return [json.loads((out_dir / f"rank{r}.json").read_text()) for r in (0, 1)]


@pytest.mark.slow
def test_two_processes_from_tf_config_train_data_parallel(tmp_path):
    model_dir = tmp_path / "model"
    chief, worker = _tf_config_processes(model_dir, tmp_path / "first", steps=4)
    assert (chief["is_chief"], chief["task_type"], chief["world_size"]) == (True, "chief", 2)
    assert (worker["is_chief"], worker["task_type"], worker["world_size"]) == (False, "worker", 2)
    assert chief["state"] == worker["state"] and chief["state"]["global_step"] == 4
    assert chief["saves"] == [0, 4] and worker["saves"] == []  # only the chief writes checkpoints
    assert sorted(chief["seen_ids"] + worker["seen_ids"]) == list(range(64))  # sharded by rank
    assert chief["eval"] == pytest.approx(worker["eval"])
    # The same cluster again resumes from the chief's checkpoint, as under torchrun.
    again = _tf_config_processes(model_dir, tmp_path / "second", steps=3)
    assert again[0]["state"] == again[1]["state"] and again[0]["state"]["global_step"] == 7


def _single_model_fn(features, labels, mode):
    net = ee.get_module("linear", lambda: torch.nn.Linear(1, 1))
    predictions = net(features["x"])
    loss = torch.nn.functional.mse_loss(predictions, labels)
    return ee.EstimatorSpec(mode, loss=loss, eval_metric_ops={
        "mae": ee.metrics.mean_absolute_error(labels=labels, predictions=predictions)})


class TestStrategyAndContext:
    def test_input_context(self):
        ctx = InputContext(num_input_pipelines=4, input_pipeline_id=3, num_replicas_in_sync=4)
        assert ctx.get_per_replica_batch_size(64) == 16
        with pytest.raises(ValueError, match="is not divisible by `num_replicas_in_sync`"):
            ctx.get_per_replica_batch_size(10)
        with pytest.raises(ValueError, match=r"input_pipeline_id must be in \[0, 2\)"):
            InputContext(num_input_pipelines=2, input_pipeline_id=2)

    def test_strategy_selection(self, monkeypatch):
        monkeypatch.delenv("WORLD_SIZE", raising=False)
        assert strategy_for(None) is None
        explicit = DDPStrategy(backend="gloo")
        assert strategy_for(explicit) is explicit
        monkeypatch.setenv("WORLD_SIZE", "2")
        assert isinstance(strategy_for(None), DDPStrategy)
        with pytest.raises(TypeError, match=r"must be an ee\.distribute\.DDPStrategy"):
            strategy_for("mirrored")
        with pytest.raises(ValueError, match="backend must be 'gloo', 'nccl', 'mpi' or None"):
            DDPStrategy(backend="tcp")

    @pytest.mark.parametrize(("task", "distributed", "rank"), [
        ({"type": "chief", "index": 0}, True, 0), ({"type": "worker", "index": 1}, True, 2),
        ({"type": "ps", "index": 0}, False, 0), ({"type": "evaluator", "index": 0}, False, 0)])
    def test_strategy_from_tf_config(self, monkeypatch, task, distributed, rank):
        for name in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE"):
            monkeypatch.delenv(name, raising=False)
        cluster = {"chief": ["h0:1"], "worker": ["h1:1", "h2:1"], "ps": ["h3:1"]}
        monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": cluster, "task": task}))
        strategy = strategy_for(None)
        assert isinstance(strategy, DDPStrategy) is distributed
        if distributed:
            assert (strategy.world_size, strategy.rank) == (3, rank)
        monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": {"chief": ["h0:1"]}, "task": {"type": "chief", "index": 0}}))
        assert strategy_for(None) is None  # a lone chief trains alone

    def test_setup_refuses_a_ps_task(self, monkeypatch):
        for name in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": {"chief": ["h0:1"], "ps": ["h3:1"]},
                                                    "task": {"type": "ps", "index": 0}}))
        with pytest.raises(RuntimeError, match="A TF_CONFIG task of type 'ps' or 'evaluator' does not train"):
            DDPStrategy().setup(torch.device("cpu"))

    def test_setup_without_torchrun_environment(self, monkeypatch):
        for name in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE"):
            monkeypatch.delenv(name, raising=False)
        with pytest.raises(RuntimeError, match="needs the environment torchrun sets"):
            DDPStrategy().setup(torch.device("cpu"))

    def test_input_fn_gets_the_input_context(self, monkeypatch, tmp_path):
        captured = []

        class FakeStrategy(DDPStrategy):
            def setup(self, device):
                pass

            def input_context(self):
                return InputContext(num_input_pipelines=2, input_pipeline_id=1, num_replicas_in_sync=2)

            def all_reduce_sum(self, tensors):
                return tensors

            def barrier(self):
                pass

            def wrap(self, name, module):
                return module

        def input_fn(input_context):
            captured.append(input_context)
            return ee.inputs.numpy_input_fn({"x": torch.ones(8, 1)}, torch.ones(8, 1), shuffle=False)(
                input_context=input_context)

        config = ee.RunConfig(train_distribute=FakeStrategy())
        est = ee.Estimator(_single_model_fn_train, model_dir=str(tmp_path), config=config)
        est.train(input_fn, steps=1)
        assert captured[0].input_pipeline_id == 1


class TestExitWithIdleGlooWorkers:
    """The exit handler waits for gloo's worker threads to sleep before the interpreter finalises."""

    @staticmethod
    def _thread(task_dir, tid, name, state):
        (task_dir / str(tid)).mkdir()
        (task_dir / str(tid) / "comm").write_text(name + "\n")
        # The name sits in parentheses and may itself hold ") ": the state follows the last one.
        (task_dir / str(tid) / "stat").write_text(f"{tid} ({name}) {state} 1 1 1 0 -1\n")

    def test_workers_are_read_by_name_and_state(self, tmp_path):
        self._thread(tmp_path, 10, "python", "R")  # the main thread runs: not a gloo worker
        self._thread(tmp_path, 11, "pt_gloo_runloop", "S")
        self._thread(tmp_path, 12, "odd) R name", "S")
        assert distribute._gloo_workers_sleeping(str(tmp_path))
        self._thread(tmp_path, 13, "pt_gloo_runloop", "R")  # descheduled while finishing a collective
        assert not distribute._gloo_workers_sleeping(str(tmp_path))

    def test_a_worker_that_never_sleeps_delays_exit_by_the_timeout_only(self, monkeypatch):
        checks = []
        monkeypatch.setattr(distribute, "_gloo_workers_sleeping", lambda task_dir: checks.append(1) or False)
        distribute._wait_for_idle_gloo_workers(timeout_s=0.05)
        assert len(checks) >= 1

    def test_waits_for_consecutive_idle_samples(self, monkeypatch):
        states = iter([False, True, False, True, True, True, False])
        monkeypatch.setattr(distribute, "_gloo_workers_sleeping", lambda task_dir: next(states))
        distribute._wait_for_idle_gloo_workers(timeout_s=10, idle_samples=3)
        assert next(states) is False  # stopped right after the third idle sample in a row


def _single_model_fn_train(features, labels, mode):
    net = ee.get_module("linear", lambda: torch.nn.Linear(1, 1))
    loss = torch.nn.functional.mse_loss(net(features["x"]), labels)
    optimizer = ee.get_optimizer("sgd", lambda: torch.optim.SGD(net.parameters(), lr=0.1))
    return ee.EstimatorSpec(mode, loss=loss, train_op=ee.minimize(optimizer, loss))


class TestDeviceAndPrecision:
    def test_auto_device_is_cpu_without_cuda(self, monkeypatch):
        monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
        assert ee.RunConfig().resolved_device() == torch.device("cpu")

    def test_auto_device_uses_local_rank_under_torchrun(self, monkeypatch):
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setenv("WORLD_SIZE", "2")
        monkeypatch.setenv("LOCAL_RANK", "1")
        assert ee.RunConfig().resolved_device() == torch.device("cuda:1")

    def test_bf16_autocast_runs_the_forward_in_bfloat16(self, tmp_path):
        dtypes = []

        def model_fn(features, labels, mode):
            net = ee.get_module("linear", lambda: torch.nn.Linear(1, 1))
            out = net(features["x"])
            dtypes.append(out.dtype)
            loss = torch.nn.functional.mse_loss(out.float(), labels)
            optimizer = ee.get_optimizer("sgd", lambda: torch.optim.SGD(net.parameters(), lr=0.1))
            return ee.EstimatorSpec(mode, loss=loss, train_op=ee.minimize(optimizer, loss))

        est = ee.Estimator(model_fn, model_dir=str(tmp_path),
                           config=ee.RunConfig(device="cpu", precision="bf16-mixed"))
        est.train(ee.inputs.numpy_input_fn({"x": torch.ones(8, 1)}, torch.ones(8, 1), shuffle=False), steps=1)
        assert dtypes == [torch.bfloat16]
        # Parameters stay float32: autocast changes the computation, not the stored weights.
        assert est.get_variable_value("linear/weight").dtype.name == "float32"

    def test_fp16_uses_a_grad_scaler_saved_in_checkpoints(self, tmp_path):
        est = ee.Estimator(_single_model_fn_train, model_dir=str(tmp_path),
                           config=ee.RunConfig(device="cpu", precision="16-mixed"))
        est.train(ee.inputs.numpy_input_fn({"x": torch.ones(8, 1)}, torch.ones(8, 1), shuffle=False), steps=2)
        saved = ee.checkpoints.load_checkpoint(est.latest_checkpoint())
        assert "scale" in saved["grad_scaler"]

    def test_compile_option_wraps_modules(self, tmp_path, monkeypatch):
        compiled = []
        monkeypatch.setattr(torch, "compile", lambda module: compiled.append(module) or module)
        est = ee.Estimator(_single_model_fn_train, model_dir=str(tmp_path), config=ee.RunConfig(compile=True))
        est.train(ee.inputs.numpy_input_fn({"x": torch.ones(8, 1)}, torch.ones(8, 1), shuffle=False), steps=1)
        assert len(compiled) == 2  # the training view and the inference view of the one module

    @pytest.mark.requires_gpu
    @pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
    def test_cuda_training_moves_batches(self, tmp_path):
        est = ee.Estimator(_single_model_fn_train, model_dir=str(tmp_path), config=ee.RunConfig(device="cuda"))
        # num_epochs=None: one epoch of 8 rows is a single batch, and the input's end stops training.
        est.train(ee.inputs.numpy_input_fn({"x": torch.ones(8, 1)}, torch.ones(8, 1), batch_size=4,
                                           num_epochs=None, shuffle=False), steps=2)
        assert est.get_variable_value("global_step") == 2
        assert est.get_variable_value("linear/weight").shape == (1, 1)  # restored from the CUDA run's checkpoint
