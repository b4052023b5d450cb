"""Worker for test_distribute.py, run as `torchrun --nproc-per-node 2 ddp_worker.py MODEL_DIR OUT_DIR STEPS`,
or as 2 plain `python ddp_worker.py ...` processes, each with a TF_CONFIG naming its task.

Each rank trains the known linear model under DDP (gloo), evaluates, and writes what it saw to
OUT_DIR/rank<R>.json: the example ids it trained on, its parameters after training, the
checkpoints it wrote, and the evaluation result.
"""

import json
import os
import sys

import torch

import estimator_engine as ee
from estimator_engine import checkpoints

model_dir, out_dir, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
saves = []
real_save = checkpoints.save_checkpoint


def recording_save(directory, state, global_step, **kwargs):
    saves.append(global_step)
    return real_save(directory, state, global_step, **kwargs)


checkpoints.save_checkpoint = recording_save
seen_ids = []


def model_fn(features, labels, mode):
    if mode == ee.ModeKeys.TRAIN:
        seen_ids.extend(features["id"].tolist())
    net = ee.get_module("linear", lambda: torch.nn.Linear(1, 1))
    predictions = net(features["x"])
    loss = torch.nn.functional.mse_loss(predictions, labels)
    if mode == ee.ModeKeys.EVAL:
        return ee.EstimatorSpec(mode, loss=loss, eval_metric_ops={
            "mae": ee.metrics.mean_absolute_error(labels=labels, predictions=predictions)})
    optimizer = ee.get_optimizer("sgd", lambda: torch.optim.SGD(net.parameters(), lr=0.1))
    return ee.EstimatorSpec(mode, loss=loss, train_op=ee.minimize(optimizer, loss))


n = 64
x = torch.linspace(-1, 1, n).reshape(n, 1)
data = {"x": x, "id": torch.arange(n)}
labels = 2 * x + 3
estimator = ee.Estimator(model_fn, model_dir=model_dir, config=ee.RunConfig(tf_random_seed=3))
final_state = {}


class CaptureParameters(ee.SessionRunHook):
    def end(self, session):
        final_state.update({k: v.tolist() for k, v in session.state.variables().items()})
        final_state["global_step"] = session.global_step


# 64 rows over 2 ranks, batch 8: one epoch is exactly 4 steps per rank.
estimator.train(ee.inputs.numpy_input_fn(data, labels, batch_size=8, num_epochs=None, shuffle=True),
                steps=steps, hooks=[CaptureParameters()])
result = estimator.evaluate(ee.inputs.numpy_input_fn(data, labels, batch_size=8, shuffle=False))
rank = estimator.config.global_id_in_cluster  # torchrun's RANK, or TF's global id from TF_CONFIG
with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
    json.dump({"seen_ids": seen_ids, "state": final_state, "saves": saves, "eval": result,
               "is_chief": estimator.config.is_chief, "task_type": estimator.config.task_type,
               "world_size": torch.distributed.get_world_size()}, f)
