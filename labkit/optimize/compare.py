"""``labkit.compare``: run Recipes side by side and measure what each buys and costs."""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from labkit._progress import ProgressOption
from labkit._progress import progress as progress_of
from labkit.optimize._bench_checks import MODES, named_recipes
from labkit.optimize.bench import MEASURED, Bench
from labkit.optimize.bench_options import BenchOptions
from labkit.optimize.comparison_result import Comparison, RecipeResult
from labkit.optimize.recipe import Recipe
from labkit.trace.entry import StepOptions

__all__ = ["MEASURED", "MODES", "Bench", "BenchOptions", "Comparison", "RecipeResult", "compare"]


# ---------------------------------------------------------------------- compare
def compare(
    model: torch.nn.Module,
    batch: Any,
    recipes: Recipe | Sequence[Recipe] | Mapping[str, Recipe],
    options: BenchOptions | None = None,
    *,
    progress: ProgressOption = StepOptions.progress,
    **overrides: Any,
) -> Comparison:
    """Run ``recipes`` interleaved on copies of ``model`` and measure each against fp32.

    Every recipe gets its own :func:`~labkit.optimize.apply` copy of the model with
    the same starting weights. Steps run interleaved (A B C A B C ...) so machine
    drift hits all alike; figures are medians. Each speedup has a 95% interval from a
    paired bootstrap over the interleaved rounds; one whose interval spans 1.0 is
    "within noise" and is not ranked. Rounds go on after ``steps`` until every
    interval is within ``+-target`` or ``budget_s`` is spent (``Comparison.ended_by``
    says which). The first call is timed apart, so compile time and its break-even
    are reported separately. Peak memory, output deviation and per-layer drift come
    from extra untimed passes. It is a :class:`~labkit.optimize.Bench` used once; to
    measure more recipes against the same baseline later (measured once, reused), keep
    the Bench.

    The user's model is not run (every recipe runs on a copy); the inputs (values and
    ``.grad``) and the random number generators are as they were when it returns.

    Args:
        model: The model; it is not changed.
        batch: Its input: a tensor, a tuple of positional inputs or a dict of keyword inputs.
        recipes: Recipes to measure (a dict names the rows).
        options: A :class:`~labkit.optimize.BenchOptions` (default: its defaults), or its
            settings as keywords:
            {bench_options}
        progress: Show progress (a bar in a notebook; on a terminal one line on stderr
            after 2 s: ``compare: round 4: 3 recipes interleaved [40%]``); ``False``:
            nothing; a function ``(fraction, message)`` receives it instead.

    Randomness: the timed steps run the model as it is (dropout on in train mode).
    Output deviation, per-layer drift and the losses come from separate untimed passes
    from the same starting weights, with the same seed and batch for every recipe and
    with dropout switched off (``nn.Dropout`` modules, attention dropout, functional
    dropout), so a difference shown is the recipe's, not the dropout masks'.
    ``Comparison.randomness`` says what was switched off.

    Returns:
        A :class:`Comparison`.

    Example:
        >>> cmp = labkit.compare(model, x, {"bf16": Recipe(precision="bf16-mixed")},
        ...     loss=lambda out: F.cross_entropy(out, y), steps=5)  # doctest: +SKIP
        >>> print(cmp.summary())  # doctest: +SKIP
    """
    settings = BenchOptions.build(options, overrides, where="compare")
    named_recipes(recipes)  # a bad recipe list fails before anything is copied
    after = "the model was not run; the inputs and RNG are as they were"
    bar = progress_of("compare", progress, after=after)
    with bar:
        return Bench(model, batch, settings).compare(recipes, progress=bar)


# compare's keywords and their docs are BenchOptions' fields (written once, in bench_options.py)
_P = inspect.Parameter
compare.__signature__ = BenchOptions.signature(  # type: ignore[attr-defined]  # inspect reads it
    [_P(n, _P.POSITIONAL_OR_KEYWORD) for n in ("model", "batch", "recipes")]
    + [_P("options", _P.POSITIONAL_OR_KEYWORD, default=None)],
    [_P("progress", _P.KEYWORD_ONLY, default=StepOptions.progress)],
)
compare.__doc__ = (compare.__doc__ or "").replace(
    " " * 12 + "{bench_options}", BenchOptions.args_doc(" " * 12)
)
