"""``labkit.compare``: run Recipes side by side and measure what each buys and costs."""

from __future__ import annotations

import copy
import sys
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from labkit._interleave import interleaved
from labkit._tensors import model_device, split_batch
from labkit.optimize import _cpu, _deploy
from labkit.optimize._random import stochastic_modules
from labkit.optimize._run import _batch_size, _Run
from labkit.optimize.comparison import Comparison, RecipeResult
from labkit.optimize.recipe import Recipe

__all__ = ["MEASURED", "Comparison", "RecipeResult", "compare"]

MODES = ("train", "inference")
Progress = Callable[[float, str], None]
Sized = tuple[int, tuple[Any, ...], dict[str, Any]]  # batch size, args, kwargs


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
) -> Comparison:
    """Run ``recipes`` interleaved on copies of ``model`` and measure each against fp32.

    Every recipe gets its own :func:`~labkit.optimize.apply` copy of the model with
    the same starting weights. Steps run interleaved (A B C A B C ...) so machine
    drift hits all alike; figures are medians. The first call is timed apart, so
    compile time and its break-even are reported separately. Peak memory, output
    deviation and per-layer drift come from extra untimed passes.

    Args:
        model: The model; it is not changed.
        batch: Its input: a tensor, a tuple of positional inputs or a dict of keyword inputs.
        recipes: Recipes to measure (a dict names the rows).
        loss: ``loss(output) -> scalar`` used for training steps; without it, the mean
            of the outputs is used.
        mode: ``"train"`` (forward, backward, SGD step) or ``"inference"`` (eval, no_grad).
        steps: Timed steps per recipe.
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
    recipe_map = _check(model, recipes, mode, steps, warmup, tolerance, baseline)
    if not isinstance(loss_steps, int) or loss_steps < 1:
        raise ValueError(f"compare(loss_steps=...) must be an int >= 1, got {loss_steps!r}")
    batch_sizes = tuple(batch_sizes)
    if batch_sizes and mode != "inference":
        raise ValueError("compare(batch_sizes=...) times inference only: pass mode='inference'")
    if not all(isinstance(n, int) and n >= 1 for n in batch_sizes):
        raise ValueError(f"compare(batch_sizes=...) must be ints >= 1, got {batch_sizes!r}")
    report = _progress_fn(progress)
    args, kwargs = split_batch(batch, strict="compare(batch=...)")
    metric_name, metric_fn = _metric(metric, val)
    base_model = copy.deepcopy(model)
    base_model.train(mode == "train")
    device = str(model_device(base_model))
    runs = [
        _Run(label, recipe, base_model, mode, args, kwargs, loss, lr, seed, loss_steps)
        for label, recipe in recipe_map.items()
    ]
    batch = _batch_size(args, kwargs)
    if batch_sizes and batch is None:
        raise ValueError("compare(batch_sizes=...) needs a tensor input with a batch dimension")
    total = len(runs) * (3 + warmup + steps + len(batch_sizes) * (1 + steps))
    done = 0

    def tick(msg: str) -> None:
        nonlocal done
        done += 1
        report(min(done / total, 1.0), msg)

    report(0.0, "applying recipes")
    for run in runs:
        run.setup()
        tick(f"{run.label}: first call")
        run.first()

    def step(run: _Run, i: int, timed: bool) -> None:
        run.step(timed=timed)  # the run keeps its own times (and errors)
        what = f"step {i + 1}/{steps}" if timed else f"warm-up {i + 1}/{warmup}"
        tick(f"{what}: {run.label}")

    interleaved(runs, step, warmup=warmup, rounds=steps)
    for n in batch_sizes:
        b_args, b_kwargs = _deploy.resize_batch(args, kwargs, n, batch)

        def at_size(run: _Run, i: int, timed: bool, size: Sized = (n, b_args, b_kwargs)) -> None:
            run.timed_at(*size, timed=timed)
            tick(f"batch {size[0]}, step {i + 1 + timed}/{1 + steps}: {run.label}")

        interleaved(runs, at_size, warmup=1, rounds=steps)
    results = []
    base_run = runs[0]
    for run in runs:
        tick(f"{run.label}: controlled pass (dropout off)")
        run.controlled()
    for run in runs:
        tick(f"{run.label}: memory, drift and validation")
        results.append(run.result(base_run, memory, drift, tolerance, val, metric_fn, base_model))
    report(1.0, "done")
    notes = [_cpu.describe(), *_cpu.implications()] if device.startswith("cpu") else []
    _remember(device, mode, results)
    notes.append(f"torch threads: {torch.get_num_threads()}")
    if mode == "train" and loss is None:
        notes.append("no loss given: training steps minimise the mean of the outputs")
    return Comparison(
        randomness=_randomness(base_model, mode, seed, loss_steps),
        mode=mode,
        steps=steps,
        warmup=warmup,
        baseline=runs[0].label,
        batch_size=_batch_size(args, kwargs),
        device=device,
        tolerance=tolerance,
        metric=metric_name,
        results=tuple(results),
        notes=tuple(notes),
    )


# recipe JSON -> (speedup, mode, device, graph breaks) from the last compare() in this
# process that measured it: advise() reads it so that it never suggests, without saying
# so, what was measured slower here
MEASURED: dict[str, tuple[float, str, str, tuple[dict[str, Any], ...]]] = {}


def _remember(device: str, mode: str, results: list[RecipeResult]) -> None:
    for r in results:
        if r.speedup is not None and r.error is None:
            key = Recipe.from_dict(r.recipe).to_json()
            MEASURED[key] = (r.speedup, mode, device, r.graph_breaks)


def _randomness(model: torch.nn.Module, mode: str, seed: int, loss_steps: int) -> str:
    if mode == "inference":
        return (
            f"randomness: inference runs the model in eval mode (no dropout mask is drawn), "
            f"seed {seed} and the same batch for every recipe"
        )
    found = stochastic_modules(model)
    kinds = Counter(type(m).__name__ for _, m in found)
    what = (
        f"dropout off in {len(found)} modules ("
        + ", ".join(f"{k} x{n}" for k, n in sorted(kinds.items()))
        + ") and in functional calls"
        if found
        else "dropout off in functional calls (no dropout module found)"
    )
    passes = f"deviation, drift and loss ({loss_steps} controlled steps from the starting weights)"
    timed = "timed steps run in training mode" + (" with dropout on" if found else "")
    return (
        f"randomness: {passes} figures: {what}, seed {seed} and the same batch for every "
        f"recipe; {timed}"
    )


# ---------------------------------------------------------------------- helpers
def _check(
    model: Any, recipes: Any, mode: str, steps: int, warmup: int, tolerance: float, baseline: Any
) -> dict[str, Recipe]:
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"compare() needs a torch.nn.Module as model, got {type(model).__name__}")
    if mode not in MODES:
        raise ValueError(f"compare(mode=...) must be one of {MODES}, got {mode!r}")
    if not isinstance(steps, int) or steps < 1:
        raise ValueError(f"compare(steps=...) must be an int >= 1, got {steps!r}")
    if not isinstance(warmup, int) or warmup < 0:
        raise ValueError(f"compare(warmup=...) must be an int >= 0, got {warmup!r}")
    if not tolerance > 0:
        raise ValueError(f"compare(tolerance=...) must be > 0, got {tolerance!r}")
    named: dict[Any, Recipe]  # keyed by label; an item without one is reported below
    if isinstance(recipes, Recipe):
        named = {recipes.label: recipes}
    elif isinstance(recipes, Mapping):
        named = dict(recipes)
    elif isinstance(recipes, Sequence) and not isinstance(recipes, str):
        named = {}
        for r in recipes:
            label = getattr(r, "label", None)
            if label in named:
                raise ValueError(
                    f"compare(): recipe {label!r} given twice; pass a dict to name rows"
                )
            named[label] = r
    else:
        raise TypeError(
            f"compare(recipes=...) must be a Recipe, a list of them or a dict "
            f"name -> Recipe, got {type(recipes).__name__}"
        )
    for name, r in named.items():
        if not isinstance(r, Recipe):
            raise TypeError(
                f"compare(): recipe {name!r} is a {type(r).__name__}, not a labkit.optimize.Recipe"
            )
    base = baseline if baseline is not None else Recipe()
    if not isinstance(base, Recipe):
        raise TypeError(f"compare(baseline=...) must be a Recipe, got {type(base).__name__}")
    out = {base.label: base}
    # a row equal to the baseline is kept only under its own name (a control row)
    out.update({k: v for k, v in named.items() if v != base or k != base.label})
    return out


def _metric(metric: Any, val: Any) -> tuple[str | None, Callable[[Any, Any], float] | None]:
    if val is None:
        if metric is not None:
            raise ValueError("compare(metric=...) needs val=(inputs, targets) to score on")
        return None, None
    if not (isinstance(val, (tuple, list)) and len(val) == 2):
        raise ValueError("compare(val=...) must be a pair (inputs, targets)")
    if callable(metric):
        return getattr(metric, "__name__", "metric"), metric
    if metric is None:
        metric = "accuracy" if not val[1].is_floating_point() else "mse"
    if metric == "accuracy":
        return "accuracy", lambda out, y: float((out.argmax(-1) == y).float().mean())
    if metric == "mse":
        return "mse", lambda out, y: float(torch.nn.functional.mse_loss(out.float(), y.float()))
    raise ValueError(f"compare(metric=...) must be callable, 'accuracy' or 'mse', got {metric!r}")


def _progress_fn(progress: Progress | bool | None) -> Progress:
    if callable(progress):
        return progress
    if progress:

        def bar(frac: float, msg: str) -> None:
            filled = int(frac * 30)
            sys.stderr.write(f"\r[{'#' * filled}{'.' * (30 - filled)}] {frac:4.0%} {msg[:60]:<60}")
            if frac >= 1.0:
                sys.stderr.write("\n")
            sys.stderr.flush()

        return bar
    return lambda frac, msg: None
