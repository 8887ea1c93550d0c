"""Plan: predict a training step's memory and FLOPs on fake tensors, before running it.

``labkit.plan(model, batch, loss=..., optimizer=...)`` returns a :class:`Plan` (the
graph, FLOPs per module and the memory timeline of the step, labelled "predicted");
:func:`max_batch_size` finds the largest batch whose predicted peak fits a budget.
"""

from __future__ import annotations

import sys
import types
from typing import Any

from labkit.plan.api import plan
from labkit.plan.batch import BatchSearch, max_batch_size, search
from labkit.plan.errors import PlanError, PlanTooLarge
from labkit.plan.model import Plan
from labkit.plan.recipe import PlanRecipe

__all__ = [
    "BatchSearch",
    "Plan",
    "PlanError",
    "PlanRecipe",
    "PlanTooLarge",
    "max_batch_size",
    "plan",
    "search",
]


class _CallableModule(types.ModuleType):
    """Lets ``labkit.plan(...)`` work whether it resolves to the package or the function."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return plan(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
