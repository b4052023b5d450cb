"""Canned estimators and heads (TF's ``tf.estimator.DNNClassifier``, ``LinearRegressor``, ...).

Each canned estimator is an ``Estimator`` whose ``model_fn`` is a closure over a head (loss,
predictions, metrics) and a logit builder (DNN, linear, both, or a bias), with TF's variable names.

Example:
    >>> from estimator_engine.canned import DNNClassifier, BinaryClassHead
    >>> BinaryClassHead().logits_dimension
    1
"""

from __future__ import annotations

from estimator_engine.canned.baseline import BaselineClassifier, BaselineRegressor
from estimator_engine.canned.dnn import DNNClassifier, DNNEstimator, DNNRegressor
from estimator_engine.canned.dnn_linear_combined import (
    DNNLinearCombinedClassifier,
    DNNLinearCombinedEstimator,
    DNNLinearCombinedRegressor,
)
from estimator_engine.canned.extenders import add_metrics, forward_features
from estimator_engine.canned.heads import (
    BinaryClassHead,
    Head,
    LogisticRegressionHead,
    LossReduction,
    MetricKeys,
    MultiClassHead,
    MultiHead,
    MultiLabelHead,
    PoissonRegressionHead,
    PredictionKeys,
    RegressionHead,
)
from estimator_engine.canned.linear import LinearClassifier, LinearEstimator, LinearRegressor
from estimator_engine.canned.optimizers import Ftrl

__all__ = [
    "BaselineClassifier",
    "BaselineRegressor",
    "BinaryClassHead",
    "DNNClassifier",
    "DNNEstimator",
    "DNNLinearCombinedClassifier",
    "DNNLinearCombinedEstimator",
    "DNNLinearCombinedRegressor",
    "DNNRegressor",
    "Ftrl",
    "Head",
    "LinearClassifier",
    "LinearEstimator",
    "LinearRegressor",
    "LogisticRegressionHead",
    "LossReduction",
    "MetricKeys",
    "MultiClassHead",
    "MultiHead",
    "MultiLabelHead",
    "PoissonRegressionHead",
    "PredictionKeys",
    "RegressionHead",
    "add_metrics",
    "forward_features",
]
