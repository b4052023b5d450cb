"""DNNClassifier: TF's canned ``tf.estimator.DNNClassifier`` as a no-code template.

Pick it, set the params in the form and train: the feature columns are built from the dataset's
column roles (numeric columns standardised with the train statistics, categorical columns over
their train vocabulary). Copy it to change anything the form does not offer.
"""

import torch

import estimator_engine as ee
from estimator_workbench.data.model_inputs import feature_columns, optimizer_arg, require_task

DESCRIPTION = (
    "A feed-forward neural network classifier (tf.estimator.DNNClassifier): hidden layers on "
    "standardised numbers and embedded (or one-hot) categories, trained with Adagrad by default."
)

PARAMS = {
    "hidden_units": {"type": "str", "default": "64,32", "help": "Sizes of the hidden layers, comma separated."},
    "categorical_encoding": {"type": "choice", "default": "embedding", "choices": ["embedding", "indicator"], "help": "Categorical columns as embedding_column or one-hot indicator_column."},
    "embedding_dim": {"type": "int", "default": 8, "min": 1, "max": 256, "help": "Size of each categorical embedding."},
    "activation": {"type": "choice", "default": "relu", "choices": ["relu", "tanh", "elu", "sigmoid"], "help": "activation_fn after each hidden layer."},
    "dropout": {"type": "float", "default": 0.0, "min": 0.0, "max": 0.9, "help": "Probability of dropping a hidden unit while training (0: none)."},
    "batch_norm": {"type": "bool", "default": False, "help": "Batch-normalise after each hidden layer."},
    "optimizer": {"type": "choice", "default": "Adagrad", "choices": ["Adagrad", "Adam", "Ftrl", "RMSProp", "SGD"], "help": "The optimizer of every layer."},
    "learning_rate": {"type": "float", "default": 0.0, "min": 0.0, "max": 10.0, "help": "0 keeps TF 2's default for the estimator and optimizer (Keras' rate: 0.001, SGD 0.01)."},
    "standardize_numeric": {"type": "bool", "default": True, "help": "Standardise numeric columns with the train split's mean and std; off reads the raw values, as TF's numeric_column(name) does (importing a TF model trained on raw values)."},
}

ACTIVATIONS = {"relu": torch.relu, "tanh": torch.tanh, "elu": torch.nn.functional.elu, "sigmoid": torch.sigmoid}


def model_fn(features, labels, mode, params, config):
    task = require_task(params["task"], "classification", "DNNClassifier")
    estimator = ee.canned.DNNClassifier(
        hidden_units=[int(u) for u in params["hidden_units"].split(",") if u.strip()],
        feature_columns=feature_columns(task, params["categorical_encoding"], params["embedding_dim"],
                                        standardize=params["standardize_numeric"]),
        n_classes=task["n_classes"],
        weight_column=task.get("weight"),
        optimizer=optimizer_arg(params["optimizer"], params["learning_rate"]),
        activation_fn=ACTIVATIONS[params["activation"]],
        dropout=params["dropout"] or None,
        batch_norm=params["batch_norm"],
        model_dir=config.model_dir,
        config=config,
    )
    return estimator.model_fn(features, labels, mode, config)
