"""Hooks of the engine: the ``SessionRunHook`` protocol and TF's standard hooks."""

from __future__ import annotations

from estimator_engine.hooks.base import (
    CheckpointSaverListener,
    OnDevice,
    ScheduledHook,
    Session,
    SessionRunArgs,
    SessionRunContext,
    SessionRunHook,
    SessionRunValues,
    map_fetches,
)
from estimator_engine.hooks.basic import (
    FinalOpsHook,
    GlobalStepWaiterHook,
    LoggingTensorHook,
    NanTensorHook,
    StepCounterHook,
    StopAtStepHook,
    SummarySaverHook,
)
from estimator_engine.hooks.checkpoint import CheckpointSaverHook, check_listeners_type
from estimator_engine.hooks.progress import ProgressBarHook, progress_bar_enabled
from estimator_engine.hooks.timer import NEVER, NeverTriggerTimer, SecondOrStepTimer

__all__ = [
    "NEVER",
    "CheckpointSaverHook",
    "CheckpointSaverListener",
    "FinalOpsHook",
    "GlobalStepWaiterHook",
    "LoggingTensorHook",
    "NanTensorHook",
    "NeverTriggerTimer",
    "OnDevice",
    "ProgressBarHook",
    "ScheduledHook",
    "SecondOrStepTimer",
    "Session",
    "SessionRunArgs",
    "SessionRunContext",
    "SessionRunHook",
    "SessionRunValues",
    "StepCounterHook",
    "StopAtStepHook",
    "SummarySaverHook",
    "check_listeners_type",
    "map_fetches",
    "progress_bar_enabled",
]
