"""Optimization choices (:class:`Recipe`), applying them (:func:`apply`) and measuring them.

Example:
    >>> from labkit.optimize import Recipe, apply, compare
    >>> fast = apply(model, Recipe(precision="bf16-mixed"))           # doctest: +SKIP
    >>> print(compare(model, x, [Recipe(quantization="int8-dynamic")],
    ...               mode="inference").summary())                    # doctest: +SKIP
"""

from __future__ import annotations

from labkit.optimize._breaks import GraphBreak
from labkit.optimize._export_errors import ExportError
from labkit.optimize.advise import Advice, Suggestion, advise
from labkit.optimize.apply import Applied, Step, applied, apply, grad_scaler, is_compiled
from labkit.optimize.bench_options import BenchOptions
from labkit.optimize.compare import Bench, Comparison, RecipeResult, compare
from labkit.optimize.drift import LayerDrift, layer_drift
from labkit.optimize.recipe import Recipe, RecipeError
from labkit.optimize.step import RecipeStep

__all__ = [
    "Advice",
    "Applied",
    "Bench",
    "BenchOptions",
    "Comparison",
    "ExportError",
    "GraphBreak",
    "LayerDrift",
    "Recipe",
    "RecipeError",
    "RecipeResult",
    "RecipeStep",
    "Step",
    "Suggestion",
    "advise",
    "applied",
    "apply",
    "compare",
    "grad_scaler",
    "is_compiled",
    "layer_drift",
]
