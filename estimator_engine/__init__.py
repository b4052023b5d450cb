"""estimator_engine: TensorFlow's Estimator API, eager, on PyTorch.

Example:
    >>> import estimator_engine as ee
    >>> ee.ModeKeys.PREDICT.value
    'infer'
"""

from __future__ import annotations

from estimator_engine import (
    canned,
    checkpoints,
    distribute,
    early_stopping,
    export,
    exporter,
    feature_column,
    inputs,
    learning_rate,
    metrics,
    summary,
    warm_start,
)
from estimator_engine._version import __version__ as __version__
from estimator_engine.canned import (
    BaselineClassifier,
    BaselineRegressor,
    BinaryClassHead,
    DNNClassifier,
    DNNEstimator,
    DNNLinearCombinedClassifier,
    DNNLinearCombinedEstimator,
    DNNLinearCombinedRegressor,
    DNNRegressor,
    Head,
    LinearClassifier,
    LinearEstimator,
    LinearRegressor,
    LogisticRegressionHead,
    MultiClassHead,
    MultiHead,
    MultiLabelHead,
    PoissonRegressionHead,
    RegressionHead,
    add_metrics,
    forward_features,
)
from estimator_engine.errors import (
    CheckpointError,
    CheckpointNotFoundError,
    EstimatorError,
    NanLossDuringTrainingError,
)
from estimator_engine.estimator import Estimator, default_training_hooks
from estimator_engine.exporter import BestExporter, Exporter, FinalExporter, LatestExporter
from estimator_engine.hooks import (
    CheckpointSaverHook,
    CheckpointSaverListener,
    FinalOpsHook,
    GlobalStepWaiterHook,
    LoggingTensorHook,
    NanTensorHook,
    ProgressBarHook,
    ScheduledHook,
    SecondOrStepTimer,
    SessionRunArgs,
    SessionRunContext,
    SessionRunHook,
    SessionRunValues,
    StepCounterHook,
    StopAtStepHook,
    SummarySaverHook,
)
from estimator_engine.keras_estimator import model_to_estimator
from estimator_engine.metric_op import MetricOp
from estimator_engine.mode_keys import ModeKeys
from estimator_engine.model_state import (
    TrainOp,
    get_global_step,
    get_module,
    get_optimizer,
    identity,
    minimize,
    trainable_variables,
)
from estimator_engine.run_config import RunConfig
from estimator_engine.spec import EstimatorSpec, Scaffold
from estimator_engine.summary import read_eval_metrics
from estimator_engine.train_eval import (
    EvalSpec,
    InMemoryEvaluatorHook,
    TrainSpec,
    train_and_evaluate,
)
from estimator_engine.warm_start import VocabInfo, WarmStartSettings

__all__ = [
    "BaselineClassifier",
    "BaselineRegressor",
    "BestExporter",
    "BinaryClassHead",
    "CheckpointError",
    "CheckpointNotFoundError",
    "CheckpointSaverHook",
    "CheckpointSaverListener",
    "DNNClassifier",
    "DNNLinearCombinedClassifier",
    "DNNLinearCombinedRegressor",
    "DNNRegressor",
    "Estimator",
    "EstimatorError",
    "EstimatorSpec",
    "EvalSpec",
    "Exporter",
    "FinalExporter",
    "FinalOpsHook",
    "GlobalStepWaiterHook",
    "InMemoryEvaluatorHook",
    "LatestExporter",
    "LinearClassifier",
    "LinearRegressor",
    "LoggingTensorHook",
    "MetricOp",
    "ModeKeys",
    "MultiClassHead",
    "NanLossDuringTrainingError",
    "NanTensorHook",
    "ProgressBarHook",
    "RegressionHead",
    "RunConfig",
    "Scaffold",
    "ScheduledHook",
    "SecondOrStepTimer",
    "SessionRunArgs",
    "SessionRunContext",
    "SessionRunHook",
    "SessionRunValues",
    "StepCounterHook",
    "StopAtStepHook",
    "SummarySaverHook",
    "TrainOp",
    "TrainSpec",
    "VocabInfo",
    "WarmStartSettings",
    "checkpoints",
    "default_training_hooks",
    "distribute",
    "early_stopping",
    "export",
    "exporter",
    "feature_column",
    "get_global_step",
    "get_module",
    "get_optimizer",
    "identity",
    "inputs",
    "learning_rate",
    "metrics",
    "minimize",
    "model_to_estimator",
    "read_eval_metrics",
    "summary",
    "train_and_evaluate",
    "trainable_variables",
    "warm_start",
]

# Serving exports of string/categorical feature columns, and the exporter error of train_and_evaluate;
# gfile: paths that may be URLs (model_dir="s3://..."), TF's tf.io.gfile (fsspec only for a URL).
from estimator_engine import gfile, serving
from estimator_engine.exporter import ExporterError
from estimator_engine.serving import make_parse_example_spec

__all__ += ["ExporterError", "gfile", "make_parse_example_spec", "serving"]
# TF 2's tf.estimator also holds the head-taking estimators, the extra heads and add_metrics.
__all__ += ["DNNEstimator", "DNNLinearCombinedEstimator", "Head", "LinearEstimator", "LogisticRegressionHead",
            "MultiHead", "MultiLabelHead", "PoissonRegressionHead", "add_metrics", "canned", "forward_features"]
