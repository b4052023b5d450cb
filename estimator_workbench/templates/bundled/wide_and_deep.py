"""Wide & deep: a linear part on one-hot columns plus an MLP on embeddings, for mixed tables."""

import torch
from torch import nn

import estimator_engine as ee
from estimator_workbench.data.model_inputs import InputLayer

DESCRIPTION = (
    "Wide & deep model for mixed numeric and categorical columns: a wide linear part on one-hot "
    "categories and standardised numbers, plus a deep MLP on embedded categories, summed into the "
    "logits. Classification (softmax) or regression (squared error), chosen from the label."
)

PARAMS = {
    "hidden_units": {"type": "str", "default": "32,16", "help": "Sizes of the deep part's hidden layers."},
    "embedding_dim": {"type": "int", "default": 4, "min": 1, "max": 64, "help": "Embedding size of each categorical column in the deep part."},
    "dropout": {"type": "float", "default": 0.0, "min": 0.0, "max": 0.9, "help": "Dropout in the deep part."},
    "learning_rate": {"type": "float", "default": 0.005, "min": 1e-6, "max": 1.0, "help": "Adam learning rate."},
}


class WideAndDeep(nn.Module):
    def __init__(self, task, params, n_out):
        super().__init__()
        self.wide_inputs = InputLayer(task, embedding_dim=0)
        self.wide = nn.Linear(self.wide_inputs.out_dim, n_out)
        self.deep_inputs = InputLayer(task, embedding_dim=params["embedding_dim"])
        layers, width = [], self.deep_inputs.out_dim
        for units in [int(u) for u in str(params["hidden_units"]).split(",") if u.strip()]:
            layers += [nn.Linear(width, units), nn.ReLU(), nn.Dropout(params["dropout"])]
            width = units
        layers.append(nn.Linear(width, n_out))
        self.deep = nn.Sequential(*layers)

    def forward(self, features):
        return self.wide(self.wide_inputs(features)) + self.deep(self.deep_inputs(features))


def model_fn(features, labels, mode, params):
    task = params["task"]
    classification = task["task"] == "classification"
    n_out = task["n_classes"] if classification else 1
    net = ee.get_module("wide_and_deep", lambda: WideAndDeep(task, params, n_out))
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
    else:
        labels = labels.float().reshape(-1)
        per_example = (predictions["predictions"] - labels) ** 2
        metrics = {"mean_squared_error": ee.metrics.mean_squared_error(
            labels=labels, predictions=predictions["predictions"], weights=weights)}
    loss = (per_example * weights).sum() / weights.sum().clamp_min(1e-12) if weights is not None else per_example.mean()
    if mode == ee.ModeKeys.EVAL:
        return ee.EstimatorSpec(mode, loss=loss, predictions=predictions, eval_metric_ops=metrics)

    optimizer = ee.get_optimizer("adam", lambda: torch.optim.Adam(net.parameters(), lr=params["learning_rate"],
                                                                  fused=True))
    return ee.EstimatorSpec(mode, loss=loss, train_op=ee.minimize(optimizer, loss), predictions=predictions,
                            eval_metric_ops=metrics)
