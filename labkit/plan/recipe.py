"""What :func:`labkit.plan` needs of a recipe: :class:`PlanRecipe`.

A plan runs on a fake copy of the model, so it cannot call ``labkit.optimize.apply`` (a
layer above it) on the real one: it asks the recipe itself for its model changes and its
forward wrapper. :class:`labkit.optimize.Recipe` has both; so may a recipe of your own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

import torch

__all__ = ["PlanRecipe", "check_recipe"]


@runtime_checkable
class PlanRecipe(Protocol):
    """A recipe :func:`labkit.plan` can apply to its fake copy of the model.

    Example:
        >>> from labkit.optimize import Recipe
        >>> isinstance(Recipe(precision="bf16-mixed"), PlanRecipe)
        True
    """

    @property
    def label(self) -> str:
        """A short name for the plan's notes."""
        ...

    def apply_structure(self, model: torch.nn.Module) -> torch.nn.Module:
        """The recipe's model changes (checkpointing, fusion, ...) applied to a copy of
        ``model`` (a meta copy: the copy allocates nothing), without runtime wrappers."""
        ...

    def wrap_forward(self, forward: Callable[..., Any], device_type: str) -> Callable[..., Any]:
        """``forward`` as the recipe runs it on ``device_type`` (autocast, matmul precision)."""
        ...


def check_recipe(recipe: object) -> PlanRecipe:
    """``recipe`` as a :class:`PlanRecipe`, or a TypeError naming what to pass instead."""
    if isinstance(recipe, PlanRecipe):
        return recipe
    fix = ": pass labkit.optimize.Recipe.from_dict(...) of it" if isinstance(recipe, dict) else ""
    raise TypeError(
        f"labkit.plan(recipe=...) needs a labkit.optimize.Recipe (or an object with label, "
        f"apply_structure(model) and wrap_forward(forward, device_type)), got "
        f"{type(recipe).__name__}{fix}"
    )
