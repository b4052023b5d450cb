"""MLP classifier: a feed-forward network with softmax cross-entropy, for any table.

params['task'] (filled in by the workbench) gives the feature columns, their statistics and the
class names; the user params are described in PARAMS.
"""

import torch
from torch import nn

import estimator_engine as ee
from estimator_workbench.data.model_inputs import InputLayer

DESCRIPTION = (
    "Multi-layer perceptron classifier: standardised numeric columns and embedded categorical "
    "columns, ReLU hidden layers with dropout, softmax cross-entropy, Adam."
)

PARAMS = {
    "hidden_units": {"type": "str", "default": "64,32", "help": "Sizes of the hidden layers, comma-separated."},
    "dropout": {"type": "float", "default": 0.1, "min": 0.0, "max": 0.9, "help": "Dropout rate after each hidden layer."},
    "learning_rate": {"type": "float", "default": 0.001, "min": 1e-6, "max": 1.0, "help": "Adam learning rate."},
    "weight_decay": {"type": "float", "default": 0.0, "min": 0.0, "max": 1.0, "help": "L2 penalty (AdamW)."},
    "embedding_dim": {"type": "int", "default": 4, "min": 0, "max": 64, "help": "Embedding size of categorical columns (0: one-hot)."},
    "clip_grad_norm": {"type": "float", "default": 0.0, "min": 0.0, "max": 100.0, "help": "Clip the gradient norm (0: off)."},
}


def build_network(params):
    task = params["task"]
    inputs = InputLayer(task, embedding_dim=params["embedding_dim"])
    layers, width = [inputs], inputs.out_dim
    for units in [int(u) for u in str(params["hidden_units"]).split(",") if u.strip()]:
        layers += [nn.Linear(width, units), nn.ReLU(), nn.Dropout(params["dropout"])]
        width = units
    layers.append(nn.Linear(width, task["n_classes"]))
    return nn.Sequential(*layers)


def model_fn(features, labels, mode, params):
    task = params["task"]
    net = ee.get_module("mlp", lambda: build_network(params))
    logits = net(features)
    probabilities = torch.softmax(logits, dim=1)
    class_ids = torch.argmax(logits, dim=1)
    predictions = {"class_ids": class_ids, "probabilities": probabilities}
    if mode == ee.ModeKeys.PREDICT:
        return ee.EstimatorSpec(mode, predictions=predictions)

    weights = features[task["weight"]].float() if task.get("weight") else None
    per_example = nn.functional.cross_entropy(logits, labels.long(), reduction="none")
    loss = (per_example * weights).sum() / weights.sum().clamp_min(1e-12) if weights is not None else per_example.mean()
    metrics = {"accuracy": ee.metrics.accuracy(labels=labels, predictions=class_ids, weights=weights)}
    if task["n_classes"] == 2:
        metrics["auc"] = ee.metrics.auc(labels=labels, predictions=probabilities[:, 1].contiguous(), weights=weights)
        metrics["precision"] = ee.metrics.precision(labels=labels, predictions=class_ids, weights=weights)
        metrics["recall"] = ee.metrics.recall(labels=labels, predictions=class_ids, weights=weights)
    if mode == ee.ModeKeys.EVAL:
        return ee.EstimatorSpec(mode, loss=loss, predictions=predictions, eval_metric_ops=metrics)

    optimizer = ee.get_optimizer("adam", lambda: torch.optim.AdamW(
        net.parameters(), lr=params["learning_rate"], weight_decay=params["weight_decay"], fused=True))
    train_op = ee.minimize(optimizer, loss, clip_grad_norm=params["clip_grad_norm"] or None)
    return ee.EstimatorSpec(mode, loss=loss, train_op=train_op, predictions=predictions, eval_metric_ops=metrics)
