"""LinearClassifier: TF's canned ``tf.estimator.LinearClassifier`` as a no-code template.

Pick it, set the params in the form and train: the feature columns are built from the dataset's
column roles (numeric columns standardised with the train statistics, categorical columns over
their train vocabulary). Copy it to change anything the form does not offer.
"""


import estimator_engine as ee
from estimator_workbench.data.model_inputs import feature_columns, optimizer_arg, require_task

DESCRIPTION = (
    "A linear (logistic) classifier (tf.estimator.LinearClassifier): one weight per "
    "standardised number and per category value, trained with FTRL by default."
)

PARAMS = {
    "optimizer": {"type": "choice", "default": "Ftrl", "choices": ["Adagrad", "Adam", "Ftrl", "RMSProp", "SGD"], "help": "The optimizer of the weights."},
    "learning_rate": {"type": "float", "default": 0.0, "min": 0.0, "max": 10.0, "help": "0 keeps TF 2's default for the estimator and optimizer (0.2 for a named optimizer)."},
    "standardize_numeric": {"type": "bool", "default": True, "help": "Standardise numeric columns with the train split's mean and std; off reads the raw values, as TF's numeric_column(name) does (importing a TF model trained on raw values)."},
}


def model_fn(features, labels, mode, params, config):
    task = require_task(params["task"], "classification", "LinearClassifier")
    estimator = ee.canned.LinearClassifier(
        feature_columns=feature_columns(task, "categorical", standardize=params["standardize_numeric"]),
        n_classes=task["n_classes"],
        weight_column=task.get("weight"),
        optimizer=optimizer_arg(params["optimizer"], params["learning_rate"]),
        model_dir=config.model_dir,
        config=config,
    )
    return estimator.model_fn(features, labels, mode, config)
