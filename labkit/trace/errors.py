"""Errors raised by the recorder and the trace file format."""

from __future__ import annotations

import torch


class TraceError(RuntimeError):
    """A traced model failed; the message names the module path and its input shapes."""


class TraceFileError(ValueError):
    """A trace file could not be read; the message names the file and the problem."""


class LossError(ValueError):
    """The loss function returned something that cannot start a backward pass (not a
    scalar tensor); the message says what it returned."""


def scalar_loss(value: object) -> torch.Tensor:
    """``value`` when it is a one-element tensor a backward pass can start from.

    The one check of "the loss must be a scalar" (``labkit.trace``, ``labkit.memory``,
    ``labkit.compare``'s steps and ``Lab.fit``'s dry run all call it).

    Raises:
        LossError: naming the shape (or the type) that was returned.

    Example:
        >>> scalar_loss(torch.ones(2, 3))
        Traceback (most recent call last):
        ...
        labkit.trace.errors.LossError: loss must return a scalar tensor, got (2, 3)
    """
    if not isinstance(value, torch.Tensor) or value.numel() != 1:
        got = tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
        raise LossError(f"loss must return a scalar tensor, got {got}")
    return value
