"""BaselineClassifier: TF's canned ``tf.estimator.BaselineClassifier`` as a no-code template.

Pick it, set the params in the form and train: it reads only the labels (and the weight column).
Copy it to change anything the form does not offer.
"""

import estimator_engine as ee
from estimator_workbench.data.model_inputs import optimizer_arg, require_task

DESCRIPTION = (
    "A baseline classifier (tf.estimator.BaselineClassifier): ignores the features and learns "
    "the class distribution of the labels, the score any real model must beat."
)

PARAMS = {
    "optimizer": {"type": "choice", "default": "Ftrl", "choices": ["Adagrad", "Adam", "Ftrl", "RMSProp", "SGD"], "help": "The optimizer of the bias."},
    "learning_rate": {"type": "float", "default": 0.0, "min": 0.0, "max": 10.0, "help": "0 keeps TF's default for the estimator and optimizer (Ftrl at 0.3)."},
}


def model_fn(features, labels, mode, params, config):
    task = require_task(params["task"], "classification", "BaselineClassifier")
    estimator = ee.canned.BaselineClassifier(
        n_classes=task["n_classes"],
        weight_column=task.get("weight"),
        optimizer=optimizer_arg(params["optimizer"], params["learning_rate"]),
        model_dir=config.model_dir,
        config=config,
    )
    return estimator.model_fn(features, labels, mode, config)
