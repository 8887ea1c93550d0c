"""Record the graph that ran and what each part cost, as a plain-data :class:`Trace`.

The package itself is callable: ``labkit.trace(model, x)`` is :func:`labkit.trace.api.trace`.
"""

from __future__ import annotations

import sys
import types
from typing import Any

from labkit.trace.api import trace
from labkit.trace.diff import TraceDiff, diff
from labkit.trace.errors import LossError, TraceError, TraceFileError
from labkit.trace.model import (
    SCHEMA_VERSION,
    Edge,
    MemoryMeta,
    MemorySample,
    ModuleInfo,
    Node,
    TensorMeta,
    Trace,
    TraceMeta,
)
from labkit.trace.recorder import MemoryObserver, Recorder
from labkit.trace.state import StepState
from labkit.trace.step import Step, record_step

__all__ = [
    "SCHEMA_VERSION",
    "Edge",
    "LossError",
    "MemoryMeta",
    "MemoryObserver",
    "MemorySample",
    "ModuleInfo",
    "Node",
    "Recorder",
    "Step",
    "StepState",
    "TensorMeta",
    "Trace",
    "TraceDiff",
    "TraceError",
    "TraceFileError",
    "TraceMeta",
    "diff",
    "record_step",
    "trace",
]


class _CallableModule(types.ModuleType):
    """Makes ``labkit.trace(...)`` work whether it resolves to the package or the function."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return trace(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
