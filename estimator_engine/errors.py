"""Exceptions raised by the engine, beyond the plain ``ValueError``/``TypeError`` of validation."""

from __future__ import annotations

__all__ = [
    "CheckpointError",
    "CheckpointNotFoundError",
    "EstimatorError",
    "NanLossDuringTrainingError",
]


class EstimatorError(Exception):
    """Base class of the engine's own errors."""


class NanLossDuringTrainingError(EstimatorError, RuntimeError):
    """Raised by ``NanTensorHook`` when the training loss is NaN (TF's text: 'NaN loss during training.')."""

    def __init__(self, step: int | None = None, last_finite_loss: float | None = None) -> None:
        self.step = step
        self.last_finite_loss = last_finite_loss
        detail = []
        if step is not None:
            detail.append(f"at global step {step}")
        if last_finite_loss is not None:
            detail.append(f"last finite loss {last_finite_loss:.6g}")
        suffix = f" ({', '.join(detail)})" if detail else ""
        super().__init__(
            f"NaN loss during training.{suffix} Lower the learning rate, clip gradients, or check "
            "the input for NaN/inf values."
        )


class CheckpointError(EstimatorError, ValueError):
    """A checkpoint or checkpoint state file cannot be read or does not fit the model."""


class CheckpointNotFoundError(CheckpointError):
    """No checkpoint exists where one is required."""
