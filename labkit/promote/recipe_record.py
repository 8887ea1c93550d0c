"""Read back the Recipe a notebook recorded: the outputs ``labkit promote`` looks for.

The writing side, :func:`record_recipe` (and :data:`RECIPE_MIME`), lives with the Recipe in
:mod:`labkit.optimize.recipe_record`, below ``train`` which calls it from ``Lab.fit``; both
names are still importable from here. The reading side, :func:`recorded_recipe`, takes the
last such output in the kernel's execution order.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from labkit.optimize.recipe_record import RECIPE_MIME as RECIPE_MIME
from labkit.optimize.recipe_record import record_recipe as record_recipe
from labkit.promote.notebook import Cell

__all__ = ["RECIPE_MIME", "record_recipe", "recorded_recipe"]


def recorded_recipe(cells: Iterable[Cell]) -> tuple[dict[str, Any], Cell] | None:
    """The last recorded Recipe in ``cells`` (give them in execution order).

    Args:
        cells: Code cells, in the order the kernel ran them.

    Returns:
        ``(recipe dict, cell that recorded it)``, or ``None`` when no cell recorded one.
    """
    found = None
    for cell in cells:
        for output in cell.outputs:
            data = output.get("data") or {}
            if isinstance(data, dict) and isinstance(data.get(RECIPE_MIME), dict):
                found = (dict(data[RECIPE_MIME]), cell)
    return found
