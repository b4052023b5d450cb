"""Small CNN for the 8x8 digits images (64 pixel columns pixel_<row>_<col>, values 0-16)."""

import torch
from torch import nn

import estimator_engine as ee
from estimator_workbench.data.model_inputs import numeric_matrix

DESCRIPTION = (
    "Small convolutional network for 8x8 grey images stored as 64 numeric pixel columns "
    "(the bundled 'digits' dataset): two 3x3 conv layers, max-pooling, a dense layer, softmax."
)

PARAMS = {
    "channels": {"type": "int", "default": 16, "min": 1, "max": 256, "help": "Filters of the first conv layer (the second has twice as many)."},
    "dense_units": {"type": "int", "default": 64, "min": 1, "max": 1024, "help": "Units of the dense layer."},
    "dropout": {"type": "float", "default": 0.2, "min": 0.0, "max": 0.9, "help": "Dropout before the output layer."},
    "learning_rate": {"type": "float", "default": 0.002, "min": 1e-6, "max": 1.0, "help": "Adam learning rate."},
    "pixel_max": {"type": "float", "default": 16.0, "min": 1e-6, "max": 65535.0, "help": "Pixels are divided by this (16 for digits, 255 for 8-bit images)."},
}


def build_network(params, n_classes):
    c = params["channels"]
    return nn.Sequential(
        nn.Conv2d(1, c, 3, padding=1), nn.ReLU(),
        nn.Conv2d(c, 2 * c, 3, padding=1), nn.ReLU(),
        nn.MaxPool2d(2),  # 8x8 -> 4x4
        nn.Flatten(),
        nn.Linear(2 * c * 16, params["dense_units"]), nn.ReLU(), nn.Dropout(params["dropout"]),
        nn.Linear(params["dense_units"], n_classes),
    )


def model_fn(features, labels, mode, params):
    task = params["task"]
    pixels = task["numeric_features"]
    if len(pixels) != 64:
        raise ValueError(f"cnn_digits needs 64 numeric pixel columns (8x8), the dataset has {len(pixels)}.")
    net = ee.get_module("cnn", lambda: build_network(params, task["n_classes"]))
    device = next(net.parameters()).device
    images = numeric_matrix(features, pixels, device).reshape(-1, 1, 8, 8) / params["pixel_max"]
    logits = net(images)
    probabilities = torch.softmax(logits, dim=1)
    class_ids = torch.argmax(logits, dim=1)
    predictions = {"class_ids": class_ids, "probabilities": probabilities}
    if mode == ee.ModeKeys.PREDICT:
        return ee.EstimatorSpec(mode, predictions=predictions)

    loss = nn.functional.cross_entropy(logits, labels.long())
    metrics = {"accuracy": ee.metrics.accuracy(labels=labels, predictions=class_ids)}
    if mode == ee.ModeKeys.EVAL:
        return ee.EstimatorSpec(mode, loss=loss, predictions=predictions, eval_metric_ops=metrics)

    optimizer = ee.get_optimizer("adam", lambda: torch.optim.Adam(net.parameters(), lr=params["learning_rate"],
                                                                  fused=True))
    return ee.EstimatorSpec(mode, loss=loss, train_op=ee.minimize(optimizer, loss), predictions=predictions,
                            eval_metric_ops=metrics)
