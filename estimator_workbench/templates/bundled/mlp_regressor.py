"""MLP regressor: a feed-forward network with mean squared error, for a numeric label."""

import torch
from torch import nn

import estimator_engine as ee
from estimator_workbench.data.model_inputs import InputLayer

DESCRIPTION = (
    "Multi-layer perceptron regressor: standardised inputs, ReLU hidden layers with dropout, "
    "mean squared error on a standardised label (predictions are in the label's units), Adam."
)

PARAMS = {
    "hidden_units": {"type": "str", "default": "64,32", "help": "Sizes of the hidden layers, comma-separated."},
    "dropout": {"type": "float", "default": 0.0, "min": 0.0, "max": 0.9, "help": "Dropout rate after each hidden layer."},
    "learning_rate": {"type": "float", "default": 0.001, "min": 1e-6, "max": 1.0, "help": "Adam learning rate."},
    "embedding_dim": {"type": "int", "default": 4, "min": 0, "max": 64, "help": "Embedding size of categorical columns (0: one-hot)."},
    "label_scale": {"type": "float", "default": 1.0, "min": 1e-9, "max": 1e9, "help": "The label is divided by this before the loss (large targets train better scaled)."},
}


def build_network(params):
    inputs = InputLayer(params["task"], embedding_dim=params["embedding_dim"])
    layers, width = [inputs], inputs.out_dim
    for units in [int(u) for u in str(params["hidden_units"]).split(",") if u.strip()]:
        layers += [nn.Linear(width, units), nn.ReLU(), nn.Dropout(params["dropout"])]
        width = units
    layers.append(nn.Linear(width, 1))
    return nn.Sequential(*layers)


def model_fn(features, labels, mode, params):
    task = params["task"]
    scale = params["label_scale"]
    net = ee.get_module("mlp", lambda: build_network(params))
    predicted = net(features).squeeze(1) * scale
    predictions = {"predictions": predicted}
    if mode == ee.ModeKeys.PREDICT:
        return ee.EstimatorSpec(mode, predictions=predictions)

    labels = labels.float().reshape(-1)
    weights = features[task["weight"]].float() if task.get("weight") else None
    per_example = ((predicted - labels) / scale) ** 2
    loss = (per_example * weights).sum() / weights.sum().clamp_min(1e-12) if weights is not None else per_example.mean()
    metrics = {
        "mean_squared_error": ee.metrics.mean_squared_error(labels=labels, predictions=predicted, weights=weights),
        "mean_absolute_error": ee.metrics.mean_absolute_error(labels=labels, predictions=predicted, weights=weights),
    }
    if mode == ee.ModeKeys.EVAL:
        return ee.EstimatorSpec(mode, loss=loss, predictions=predictions, eval_metric_ops=metrics)

    optimizer = ee.get_optimizer("adam", lambda: torch.optim.Adam(net.parameters(), lr=params["learning_rate"],
                                                                  fused=True))
    return ee.EstimatorSpec(mode, loss=loss, train_op=ee.minimize(optimizer, loss), predictions=predictions,
                            eval_metric_ops=metrics)
