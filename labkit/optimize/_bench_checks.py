"""What :func:`labkit.compare` and :class:`~labkit.optimize.Bench` check before measuring,
and the small helpers they share: settings, recipes by label, the validation metric, a
progress callback, and the sentence that says how randomness was held."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from labkit.optimize._random import stochastic_modules
from labkit.optimize.recipe import Recipe

MODES = ("train", "inference")
Progress = Callable[[float, str], None]


def check_settings(
    model: Any,
    mode: str,
    steps: int,
    warmup: int,
    tolerance: float,
    baseline: Any,
    loss_steps: int,
) -> None:
    """Raise a clear error for a bad model or setting, before anything runs."""
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
    if baseline is not None and not isinstance(baseline, Recipe):
        raise TypeError(f"compare(baseline=...) must be a Recipe, got {type(baseline).__name__}")
    if not isinstance(loss_steps, int) or loss_steps < 1:
        raise ValueError(f"compare(loss_steps=...) must be an int >= 1, got {loss_steps!r}")


def named_recipes(recipes: Any) -> dict[str, Recipe]:
    """Recipes keyed by row label (a dict names them; otherwise each Recipe's label)."""
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
    return named


def metric_fn(metric: Any, val: Any) -> tuple[str | None, Callable[[Any, Any], float] | None]:
    """(name, function) of the validation metric; (None, None) without ``val``."""
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


def progress_fn(progress: Progress | bool | None) -> Progress:
    """The callback itself, a terminal bar for True, or nothing."""
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


def randomness(model: torch.nn.Module, mode: str, seed: int, loss_steps: int) -> str:
    """How randomness was held equal across recipes, in one sentence."""
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
