"""``labkit.compare``: run Recipes side by side and measure what each buys and costs."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from labkit.optimize._bench_checks import MODES, Progress, named_recipes
from labkit.optimize.bench import MEASURED, Bench
from labkit.optimize.comparison_result import Comparison, RecipeResult
from labkit.optimize.recipe import Recipe

__all__ = ["MEASURED", "MODES", "Bench", "Comparison", "RecipeResult", "compare"]


# ---------------------------------------------------------------------- compare
def compare(
    model: torch.nn.Module,
    batch: Any,
    recipes: Recipe | Sequence[Recipe] | Mapping[str, Recipe],
    *,
    loss: Callable[[Any], torch.Tensor] | None = None,
    mode: str = "train",
    steps: int = 10,
    warmup: int = 2,
    baseline: Recipe | None = None,
    val: tuple[Any, torch.Tensor] | None = None,
    metric: Callable[[Any, torch.Tensor], float] | str | None = None,
    tolerance: float = 1e-2,
    lr: float = 1e-2,
    memory: bool = True,
    drift: bool = True,
    seed: int = 0,
    loss_steps: int = 3,
    batch_sizes: Sequence[int] = (),
    progress: Progress | bool | None = None,
    target: float | None = 0.03,
    budget_s: float = 5.0,
    level: float = 0.95,
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
    from extra untimed passes. To measure more recipes against the same baseline
    later (measured once, reused), use a :class:`~labkit.optimize.Bench`.

    The user's model is not run (every recipe runs on a copy); the inputs (values and
    ``.grad``) and the random number generators are as they were when it returns.

    Args:
        model: The model; it is not changed.
        batch: Its input: a tensor, a tuple of positional inputs or a dict of keyword inputs.
        recipes: Recipes to measure (a dict names the rows).
        loss: ``loss(output) -> scalar`` used for training steps; without it, the mean
            of the outputs is used.
        mode: ``"train"`` (forward, backward, SGD step) or ``"inference"`` (eval, no_grad).
        steps: Timed rounds per recipe before the interval is first checked (the minimum).
        warmup: Untimed steps per recipe after the first call.
        baseline: The reference Recipe (default: fp32 eager, ``Recipe()``).
        val: ``(inputs, targets)`` to score each model on after its steps.
        metric: ``metric(output, targets) -> float``, ``"accuracy"`` or ``"mse"``;
            default accuracy for integer targets, else mse.
        tolerance: Relative error past which a layer's output counts as drifted.
        lr: SGD learning rate in train mode.
        memory: Measure peak memory (an extra step per recipe).
        drift: Find the first drifting layer (an extra forward per recipe).
        seed: Seed set before every step (the same for every recipe).
        loss_steps: Training steps of the controlled pass that gives ``loss`` and
            ``losses`` (train mode).
        batch_sizes: Inference only: also time every recipe at these batch sizes (the
            batch cut or repeated along dim 0), reported in ``RecipeResult.per_batch``.
        progress: ``progress(fraction, message)`` callback, or True for a terminal bar.
        target: Rounds continue until every speedup's interval is within +-target of it
            (default 0.03: +-3%); None: exactly ``steps`` rounds.
        budget_s: Wall-clock seconds of timed rounds at most, once ``steps`` are done.
        level: Confidence level of the intervals (default 0.95).

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
    named_recipes(recipes)  # a bad recipe list fails before anything is copied
    bench = Bench(
        model, batch, loss=loss, mode=mode, steps=steps, warmup=warmup, baseline=baseline,
        val=val, metric=metric, tolerance=tolerance, lr=lr, memory=memory, drift=drift,
        seed=seed, loss_steps=loss_steps, batch_sizes=batch_sizes, target=target,
        budget_s=budget_s, level=level,
    )  # fmt: skip
    return bench.compare(recipes, progress=progress)
