"""Errors raised by the recorder and the trace file format."""

from __future__ import annotations


class TraceError(RuntimeError):
    """A traced model failed; the message names the module path and its input shapes."""


class TraceFileError(ValueError):
    """A trace file could not be read; the message names the file and the problem."""


class LossError(ValueError):
    """The loss function returned something that cannot start a backward pass (not a
    scalar tensor); the message says what it returned."""
