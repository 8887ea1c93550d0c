"""Activation checkpointing: pick modules by path, glob or class name and recompute them."""

from __future__ import annotations

import fnmatch
from collections.abc import Callable
from typing import Any

import torch
from torch.utils.checkpoint import checkpoint


class CheckpointForward:
    """Callable that runs a module's forward under non-reentrant checkpointing.

    Activations inside the module are dropped after forward and recomputed in
    backward, so forward hooks of its children fire twice per step. Without
    gradients (``no_grad``, inference) it calls the forward directly.

    Args:
        fn: The module's original bound forward.
        path: The module's path, for reprs and reports.
    """

    def __init__(self, fn: Callable[..., Any], path: str) -> None:
        self.fn = fn
        self.path = path

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not torch.is_grad_enabled():
            return self.fn(*args, **kwargs)
        return checkpoint(self.fn, *args, use_reentrant=False, **kwargs)

    def __repr__(self) -> str:
        return f"CheckpointForward(path={self.path!r})"


def select(model: torch.nn.Module, patterns: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """Module paths matching ``patterns`` (outermost only) and the patterns that matched nothing.

    A pattern matches a module when it equals the module's path, matches it as a glob,
    or equals its class name. The root module is never selected.
    """
    matched: list[str] = []
    hits = dict.fromkeys(patterns, 0)
    for path, mod in model.named_modules():
        if not path:
            continue
        for pat in patterns:
            if path == pat or fnmatch.fnmatchcase(path, pat) or type(mod).__name__ == pat:
                hits[pat] += 1
                matched.append(path)
                break
    outer = [p for p in matched if not any(p.startswith(q + ".") for q in matched)]
    return outer, [p for p, n in hits.items() if n == 0]


def wrap(model: torch.nn.Module, paths: list[str]) -> None:
    """Replace the forward of each module at ``paths`` with a :class:`CheckpointForward`."""
    for path in paths:
        mod = model.get_submodule(path)
        mod.forward = CheckpointForward(mod.forward, path)


def example_paths(model: torch.nn.Module, n: int = 4) -> str:
    """A few child paths with their types, to show in a 'no module matches' message."""
    shown = [f"{p} ({type(m).__name__})" for p, m in model.named_modules() if p][:n]
    return ", ".join(shown) or "(the model has no submodules)"
