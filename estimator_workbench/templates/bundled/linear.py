"""Linear model: logistic regression for a categorical label, linear regression for a numeric one."""

import functools

import torch
from torch import nn

import estimator_engine as ee
from estimator_workbench.data.model_inputs import InputLayer

DESCRIPTION = (
    "Linear model: one-hot categorical and standardised numeric columns into one linear layer; "
    "softmax (logistic) regression for a categorical label, least squares for a numeric label. "
    "Optional L1/L2 penalties, trained with SGD (FTRL-free counterpart of TF's LinearEstimator)."
)

PARAMS = {
    "learning_rate": {"type": "float", "default": 0.05, "min": 1e-6, "max": 10.0, "help": "SGD learning rate."},
    "optimizer": {"type": "choice", "default": "sgd", "choices": ["sgd", "adam", "adagrad"], "help": "Optimizer."},
    "l1": {"type": "float", "default": 0.0, "min": 0.0, "max": 10.0, "help": "L1 penalty on the weights."},
    "l2": {"type": "float", "default": 0.0, "min": 0.0, "max": 10.0, "help": "L2 penalty on the weights."},
}

# fused Adam: one kernel per parameter (torch loops over tensors in Python by default on CPU); SGD's
# loop is already the fastest here, and fused Adagrad is CPU-only, so the template keeps its default.
_OPTIMIZERS = {"sgd": torch.optim.SGD, "adam": functools.partial(torch.optim.Adam, fused=True),
               "adagrad": torch.optim.Adagrad}


def model_fn(features, labels, mode, params):
    task = params["task"]
    classification = task["task"] == "classification"
    n_out = task["n_classes"] if classification else 1

    def build():
        inputs = InputLayer(task, embedding_dim=0)  # one-hot: a linear model has one weight per category
        return nn.Sequential(inputs, nn.Linear(inputs.out_dim, n_out))

    net = ee.get_module("linear", build)
    logits = net(features)
    if classification:
        probabilities = torch.softmax(logits, dim=1)
        class_ids = torch.argmax(logits, dim=1)
        predictions = {"class_ids": class_ids, "probabilities": probabilities}
    else:
        predictions = {"predictions": logits.squeeze(1)}
    if mode == ee.ModeKeys.PREDICT:
        return ee.EstimatorSpec(mode, predictions=predictions)

    weights = features[task["weight"]].float() if task.get("weight") else None
    if classification:
        per_example = nn.functional.cross_entropy(logits, labels.long(), reduction="none")
        metrics = {"accuracy": ee.metrics.accuracy(labels=labels, predictions=class_ids, weights=weights)}
        if n_out == 2:
            metrics["auc"] = ee.metrics.auc(labels=labels, predictions=probabilities[:, 1].contiguous(), weights=weights)
    else:
        labels = labels.float().reshape(-1)
        per_example = (predictions["predictions"] - labels) ** 2
        metrics = {
            "mean_squared_error": ee.metrics.mean_squared_error(labels=labels, predictions=predictions["predictions"], weights=weights),
            "mean_absolute_error": ee.metrics.mean_absolute_error(labels=labels, predictions=predictions["predictions"], weights=weights),
        }
    loss = (per_example * weights).sum() / weights.sum().clamp_min(1e-12) if weights is not None else per_example.mean()
    kernel = net[1].weight
    if params["l1"]:
        loss = loss + params["l1"] * kernel.abs().sum()
    if params["l2"]:
        loss = loss + params["l2"] * (kernel ** 2).sum()
    if mode == ee.ModeKeys.EVAL:
        return ee.EstimatorSpec(mode, loss=loss, predictions=predictions, eval_metric_ops=metrics)

    optimizer = ee.get_optimizer("optimizer", lambda: _OPTIMIZERS[params["optimizer"]](
        net.parameters(), lr=params["learning_rate"]))
    return ee.EstimatorSpec(mode, loss=loss, train_op=ee.minimize(optimizer, loss), predictions=predictions,
                            eval_metric_ops=metrics)
