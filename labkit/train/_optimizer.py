"""The optimizer a fit steps, bound to the model the fit trains, and checked before a step.

Researchers build optimizers that reach the model they built: a nanoGPT-style factory
``lambda ps: model.configure_optimizers(...)`` (AdamW groups with and without weight
decay), PyG's per-layer groups ``[dict(params=model.conv1.parameters(), ...), ...]``, or an
optimizer instance made before the Lab. Such an optimizer holds the *user's* parameters.
``Lab.fit`` trains the user's module itself when the Recipe changes nothing, so those are
the trained parameters; when a Recipe made a copy, :func:`bind` maps each parameter the
optimizer holds onto the copy's parameter of the same name (its state with it).

Then :func:`check_covers` refuses, before the first step, an optimizer that misses some
of the trained parameters (they would never change) or holds parameters that are not the
model's (they would be stepped with no gradient), naming them.
"""

from __future__ import annotations

import copy
from collections import defaultdict
from collections.abc import Iterable

import torch

__all__ = ["OptimizerCoverageError", "bind", "check_covers"]


class OptimizerCoverageError(ValueError):
    """The optimizer does not hold exactly the trained parameters; names the ones missed."""


def _held(optimizer: torch.optim.Optimizer) -> list[torch.Tensor]:
    return [p for g in optimizer.param_groups for p in g["params"]]


def bind(
    optimizer: torch.optim.Optimizer, original: torch.nn.Module, trained: torch.nn.Module
) -> torch.optim.Optimizer:
    """``optimizer`` with every parameter of ``original`` it holds replaced by ``trained``'s.

    ``trained`` is a copy of ``original`` (same parameter names). Returns ``optimizer``
    itself when nothing needs mapping; else a shallow copy whose groups and state refer to
    ``trained``'s parameters (the optimizer the user holds is left as it was).

    Raises:
        OptimizerCoverageError: a parameter of ``original`` has no counterpart in ``trained``
            (a Recipe that replaces parameters, e.g. quantization).
    """
    if original is trained:
        return optimizer
    names = {id(p): n for n, p in original.named_parameters(remove_duplicate=False)}
    if not any(id(p) in names for p in _held(optimizer)):
        return optimizer
    new_params = dict(trained.named_parameters(remove_duplicate=False))
    mapping: dict[int, torch.Tensor] = {}
    for p in _held(optimizer):
        name = names.get(id(p))
        if name is None:
            continue
        target = new_params.get(name)
        if target is None or target.shape != p.shape:
            raise OptimizerCoverageError(
                f"the optimizer holds the model's parameter {name!r}, which the Recipe "
                "replaced in the trained copy; build the optimizer from the params the "
                "factory is given (optimizer=lambda params: ...)"
            )
        mapping[id(p)] = target
    bound = copy.copy(optimizer)
    bound.param_groups = [
        {**g, "params": [mapping.get(id(p), p) for p in g["params"]]}
        for g in optimizer.param_groups
    ]
    bound.state = defaultdict(dict, {mapping.get(id(p), p): s for p, s in optimizer.state.items()})
    return bound


def check_covers(
    optimizer: object, trained: torch.nn.Module, *, where: str = "the optimizer"
) -> None:
    """Refuse an optimizer that misses trainable parameters of ``trained`` or holds others.

    Args:
        optimizer: The optimizer (or what ``configure_optimizers`` returned: checked when
            it is an optimizer, a list of them or Lightning's dict form).
        trained: The module being trained.
        where: How to name the optimizer in the message.

    Raises:
        OptimizerCoverageError: naming the parameters missed (or the foreign ones).
    """
    optimizers = list(_optimizers(optimizer))
    if not optimizers:
        return
    held = {id(p) for opt in optimizers for p in _held(opt)}
    named = list(trained.named_parameters())
    ours = {id(p) for _, p in trained.named_parameters(remove_duplicate=False)}
    missing = [n for n, p in named if p.requires_grad and id(p) not in held]
    foreign = [p for opt in optimizers for p in _held(opt) if id(p) not in ours]
    if missing:
        trainable = sum(1 for _, p in named if p.requires_grad)
        what = "none" if len(missing) == trainable else f"{trainable - len(missing)} of {trainable}"
        shown = ", ".join(missing[:8]) + (
            f" (and {len(missing) - 8} more)" if len(missing) > 8 else ""
        )
        raise OptimizerCoverageError(
            f"{where} holds {what} of the model's trainable parameters; it misses {shown}, "
            "which would never change. Build it from the model being trained (a factory "
            "optimizer=lambda params: ... gets them), or freeze what should not train "
            "(p.requires_grad_(False))"
        )
    if foreign:
        shapes = ", ".join(str(list(p.shape)) for p in foreign[:5])
        raise OptimizerCoverageError(
            f"{where} holds {len(foreign)} parameter(s) that are not the trained model's "
            f"(shapes {shapes}): another model's, or a copy's. Build it from the model you "
            "gave the Lab"
        )


def _optimizers(value: object) -> Iterable[torch.optim.Optimizer]:
    if isinstance(value, torch.optim.Optimizer):
        yield value
    elif isinstance(value, dict) and "optimizer" in value:
        yield from _optimizers(value["optimizer"])
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _optimizers(v)
