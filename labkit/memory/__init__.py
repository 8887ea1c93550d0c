"""Memory: where every byte of a training step goes, which module to blame, what would help.

``labkit.memory(model, batch, loss=..., optimizer=...)`` records one step and returns a
:class:`MemoryReport`; :func:`find_growth` finds storages that pile up across steps;
:meth:`MemoryReport.whatif` estimates checkpointing and bf16 savings. Full-mode traces
(``labkit.trace``) carry the same timeline in ``trace.memory``.
"""

from __future__ import annotations

import sys
import types
from typing import Any

from labkit.memory.api import memory
from labkit.memory.attribution import MemoryReport
from labkit.memory.errors import MemoryRecordError
from labkit.memory.growth import GrowthReport, GrowthSite, find_growth
from labkit.memory.timeline import CATEGORIES, downsample, phase_spans
from labkit.memory.tracker import MemoryTracker
from labkit.memory.whatif import Estimate, WhatIf, whatif

__all__ = [
    "CATEGORIES",
    "Estimate",
    "GrowthReport",
    "GrowthSite",
    "MemoryRecordError",
    "MemoryReport",
    "MemoryTracker",
    "WhatIf",
    "downsample",
    "find_growth",
    "memory",
    "phase_spans",
    "whatif",
]


class _CallableModule(types.ModuleType):
    """Lets ``labkit.memory(...)`` work whether it resolves to the package or the function."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return memory(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
