"""DNNLinearCombinedClassifier: TF's canned ``tf.estimator.DNNLinearCombinedClassifier`` as a no-code template.

Pick it, set the params in the form and train: the feature columns are built from the dataset's
column roles (numeric columns standardised with the train statistics, categorical columns over
their train vocabulary). Copy it to change anything the form does not offer.
"""

import torch

import estimator_engine as ee
from estimator_workbench.data.model_inputs import feature_columns, optimizer_arg, require_task

DESCRIPTION = (
    "Wide & deep classifier (tf.estimator.DNNLinearCombinedClassifier): a linear part on every "
    "column's values plus a DNN on standardised numbers and embedded categories, summed into the output."
)

PARAMS = {
    "dnn_hidden_units": {"type": "str", "default": "64,32", "help": "Sizes of the hidden layers, comma separated."},
    "categorical_encoding": {"type": "choice", "default": "embedding", "choices": ["embedding", "indicator"], "help": "Categorical columns as embedding_column or one-hot indicator_column."},
    "embedding_dim": {"type": "int", "default": 8, "min": 1, "max": 256, "help": "Size of each categorical embedding."},
    "dnn_activation": {"type": "choice", "default": "relu", "choices": ["relu", "tanh", "elu", "sigmoid"], "help": "activation_fn after each hidden layer."},
    "dnn_dropout": {"type": "float", "default": 0.0, "min": 0.0, "max": 0.9, "help": "Probability of dropping a hidden unit while training (0: none)."},
    "batch_norm": {"type": "bool", "default": False, "help": "Batch-normalise after each hidden layer."},
    "linear_optimizer": {"type": "choice", "default": "Ftrl", "choices": ["Adagrad", "Adam", "Ftrl", "RMSProp", "SGD"], "help": "Optimizer of the linear (wide) part."},
    "linear_learning_rate": {"type": "float", "default": 0.0, "min": 0.0, "max": 10.0, "help": "0 keeps TF's default (Ftrl at min(0.005, 1/sqrt(number of columns)))."},
    "dnn_optimizer": {"type": "choice", "default": "Adagrad", "choices": ["Adagrad", "Adam", "Ftrl", "RMSProp", "SGD"], "help": "Optimizer of the DNN (deep) part."},
    "dnn_learning_rate": {"type": "float", "default": 0.0, "min": 0.0, "max": 10.0, "help": "0 keeps TF's default (Adagrad at 0.001 in the combined model)."},
    "standardize_numeric": {"type": "bool", "default": True, "help": "Standardise numeric columns with the train split's mean and std; off reads the raw values, as TF's numeric_column(name) does (importing a TF model trained on raw values)."},
}

ACTIVATIONS = {"relu": torch.relu, "tanh": torch.tanh, "elu": torch.nn.functional.elu, "sigmoid": torch.sigmoid}


def model_fn(features, labels, mode, params, config):
    task = require_task(params["task"], "classification", "DNNLinearCombinedClassifier")
    estimator = ee.canned.DNNLinearCombinedClassifier(
        linear_feature_columns=feature_columns(task, "categorical", standardize=params["standardize_numeric"]),
        linear_optimizer=optimizer_arg(params["linear_optimizer"], params["linear_learning_rate"]),
        dnn_feature_columns=feature_columns(task, params["categorical_encoding"], params["embedding_dim"],
                                            standardize=params["standardize_numeric"]),
        dnn_optimizer=optimizer_arg(params["dnn_optimizer"], params["dnn_learning_rate"]),
        dnn_hidden_units=[int(u) for u in params["dnn_hidden_units"].split(",") if u.strip()],
        dnn_activation_fn=ACTIVATIONS[params["dnn_activation"]],
        dnn_dropout=params["dnn_dropout"] or None,
        batch_norm=params["batch_norm"],
        n_classes=task["n_classes"],
        weight_column=task.get("weight"),
        model_dir=config.model_dir,
        config=config,
    )
    return estimator.model_fn(features, labels, mode, config)
