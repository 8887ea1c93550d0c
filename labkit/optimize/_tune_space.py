"""The set-ups :func:`labkit.tune` searches: a Recipe space, its refused combinations named.

A space is a dict of Recipe fields to the values to try (their product is searched) or a
list of Recipes (or their dicts). ``checkpoint`` may also be ``"auto"`` (the modules
:mod:`labkit.optimize._tune_ckpt` chooses at each batch size) or ``"blocks"`` (every block
of the model's repeated stack); ``"none"`` is no checkpointing.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from labkit.optimize import _cpu
from labkit.optimize.recipe import Recipe, RecipeError

CKPT_MODES = ("none", "auto", "blocks")

Space = Mapping[str, object] | Sequence[Recipe | Mapping[str, object]] | Recipe | None
"""What ``tune(space=...)`` takes: Recipe fields to the values to try (one value or a list
of them), a list of Recipes or of their dicts, one Recipe, or ``None`` (the default)."""


@dataclass(frozen=True)
class SetUp:
    """A Recipe to try and how its checkpointing is decided.

    Args:
        recipe: The Recipe (its ``checkpoint`` empty unless ``ckpt == "fixed"``).
        ckpt: ``"none"``, ``"auto"`` (chosen per batch size), ``"blocks"`` (the repeated
            stack) or ``"fixed"`` (the Recipe's own ``checkpoint``).
    """

    recipe: Recipe
    ckpt: str = "none"

    @property
    def label(self) -> str:
        if self.ckpt in ("auto", "blocks"):
            base = self.recipe.label
            return f"{base} + ckpt({self.ckpt})" if base != "fp32" else f"fp32 + ckpt({self.ckpt})"
        return self.recipe.label


def default_space(device: torch.device) -> dict[str, list[Any]]:
    """What ``space=None`` searches on ``device``: fp32 and the reduced precision the
    device runs natively, no checkpointing and the chosen set, and compile on CUDA."""
    precisions: list[Any] = ["32"]
    compiles: list[Any] = [None]
    if device.type == "cuda":
        bf16 = torch.cuda.is_bf16_supported()
        precisions.append("bf16-mixed" if bf16 else "16-mixed")
        compiles.append("default")
    elif _cpu.native_bf16():
        precisions.append("bf16-mixed")
    return {"precision": precisions, "compile": compiles, "checkpoint": ["none", "auto"]}


def expand(space: Space, device: torch.device) -> tuple[list[SetUp], list[tuple[str, str]]]:
    """``(set-ups, refused)``: ``refused`` holds ``(combination, the Recipe's reason)``."""
    if space is None:
        space = default_space(device)
    if isinstance(space, Recipe):
        space = [space]
    if isinstance(space, Mapping):
        return _product(space)
    if isinstance(space, Sequence) and not isinstance(space, (str, bytes)):
        setups: list[SetUp] = []
        refused: list[tuple[str, str]] = []
        for item in space:
            if isinstance(item, Recipe):
                setups.append(SetUp(item, "fixed" if item.checkpoint else "none"))
            elif isinstance(item, Mapping):
                got, bad = _product({k: [v] for k, v in item.items()})
                setups += got
                refused += bad
            else:
                raise TypeError(
                    f"tune(space=[...]) holds Recipes or dicts of Recipe fields, got "
                    f"{type(item).__name__}"
                )
        return _dedupe(setups), refused
    raise TypeError(
        "tune(space=...) must be a dict of Recipe fields to the values to try, e.g. "
        "{'precision': ['32', 'bf16-mixed'], 'checkpoint': ['none', 'auto']}, or a list of "
        f"Recipes; got {type(space).__name__}"
    )


def _product(space: Mapping[str, Any]) -> tuple[list[SetUp], list[tuple[str, str]]]:
    names = list(space)
    values = [_values(space[n], n) for n in names]
    setups: list[SetUp] = []
    refused: list[tuple[str, str]] = []
    for combo in itertools.product(*values):
        fields = dict(zip(names, combo, strict=True))
        ck = fields.pop("checkpoint", "none")
        mode, patterns = _ckpt(ck)
        shown = ", ".join(f"{k}={v!r}" for k, v in {**fields, "checkpoint": ck}.items())
        try:
            recipe = Recipe(**fields, checkpoint=patterns)  # validated as any Recipe is
        except RecipeError as exc:
            refused.append((shown, str(exc)))
            continue
        except TypeError as exc:  # a name that is not a Recipe field
            raise RecipeError(f"tune(space=...): {exc}") from None
        setups.append(SetUp(recipe, mode))
    return _dedupe(setups), refused


def _values(v: object, name: str) -> list[Any]:
    if isinstance(v, (list, tuple, set, frozenset)) and not (
        name == "checkpoint"
        and isinstance(v, tuple)
        and all(isinstance(x, str) for x in v)
        and v
        and v[0] not in CKPT_MODES
    ):
        return list(v)
    return [v]


def _ckpt(value: object) -> tuple[str, tuple[str, ...]]:
    if value in (None, "none", (), []):
        return "none", ()
    if isinstance(value, str):
        return (value, ()) if value in ("auto", "blocks") else ("fixed", (value,))
    if isinstance(value, Iterable):
        return "fixed", tuple(value)  # the Recipe checks each pattern
    raise TypeError(
        "tune(space=...): checkpoint takes 'none', 'auto', 'blocks', a module pattern or a "
        f"tuple of them, got {value!r}"
    )


def _dedupe(setups: list[SetUp]) -> list[SetUp]:
    seen: dict[tuple[Recipe, str], SetUp] = {}
    for s in setups:
        seen.setdefault((s.recipe, s.ckpt), s)
    return list(seen.values())
