"""Activation checkpointing: pick modules by path, glob or class name and recompute them."""

from __future__ import annotations

import contextlib
import difflib
import fnmatch
from collections.abc import Callable
from typing import Any

import torch
from torch.overrides import TorchFunctionMode, _get_current_function_mode_stack
from torch.utils.checkpoint import checkpoint


class CheckpointForward:
    """Callable that runs a module's forward under non-reentrant checkpointing.

    Activations inside the module are dropped after forward and recomputed in
    backward, so forward hooks of its children fire twice per step. Without
    gradients (``no_grad``, inference) it calls the forward directly. Function modes
    that ask for it (``replay_in_recompute = True``: labkit's dropout-off mode) are
    active in the recompute as they were in the forward, so it takes the same kernels.

    Under ``torch.compile`` the call passes no ``context_fn``: compile accepts only a pair
    of ``TorchDispatchMode`` s there (selective-checkpoint policies), and it needs none.
    Dynamo traces the function modes active at the call (dropout off included) into the
    graph, and the compiled backward recomputes from that same graph, so the recompute
    sees what the forward saw without replaying anything.

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
        if torch.compiler.is_compiling():
            return checkpoint(self.fn, *args, use_reentrant=False, **kwargs)
        return checkpoint(self.fn, *args, use_reentrant=False, context_fn=_forward_modes, **kwargs)

    def __repr__(self) -> str:
        return f"CheckpointForward(path={self.path!r})"


def _forward_modes() -> tuple[contextlib.AbstractContextManager[None], Any]:
    """Checkpoint's ``context_fn``: nothing for the forward; the recompute re-enters the
    function modes that were active in the forward and want it.

    Backward runs with such a mode popped (a mode is off while it handles ``backward``
    itself), so without this the recompute would run without it: dropout back on, another
    attention kernel, and checkpoint's "recomputed values have different metadata".
    """
    modes = [
        m for m in _get_current_function_mode_stack() if getattr(m, "replay_in_recompute", False)
    ]
    return contextlib.nullcontext(), _Entered(modes)


class _Entered:
    """Enters ``modes`` (those not active already) on each ``with``: checkpoint enters its
    recompute context once per recompute, and a double backward (``torch.autograd.grad(...,
    create_graph=True)`` then ``.backward()``, a gradient penalty) recomputes twice, which a
    one-shot ``@contextmanager`` refuses."""

    def __init__(self, modes: list[TorchFunctionMode]) -> None:
        self.modes = modes
        self.stacks: list[contextlib.ExitStack] = []

    def __enter__(self) -> None:
        live = _get_current_function_mode_stack()
        stack = contextlib.ExitStack()
        for m in self.modes:
            if not any(m is x for x in live):
                stack.enter_context(m)
        self.stacks.append(stack)

    def __exit__(self, *exc: Any) -> None:
        self.stacks.pop().__exit__(*exc)


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
        hit = [
            p
            for p in patterns
            if path == p or fnmatch.fnmatchcase(path, p) or type(mod).__name__ == p
        ]
        for pat in hit:  # every pattern that names the module counts as matching
            hits[pat] += 1
        if hit:
            matched.append(path)
    outer = [p for p in matched if not any(p.startswith(q + ".") for q in matched)]
    return outer, [p for p, n in hits.items() if n == 0]


def wrap(model: torch.nn.Module, paths: list[str]) -> None:
    """Replace the forward of each module at ``paths`` with a :class:`CheckpointForward`."""
    for path in paths:
        mod = model.get_submodule(path)
        mod.forward = CheckpointForward(mod.forward, path)


def nearest_paths(model: torch.nn.Module, pattern: str, n: int = 4) -> list[str]:
    """The module paths (and class names) closest to ``pattern`` (``difflib``), for a
    "no module matches" message: a misspelt path or class name finds its intended one."""
    names: dict[str, None] = {}
    for path, mod in model.named_modules():
        if path:
            names[path] = None
            names[type(mod).__name__] = None
    plain = pattern.replace("*", "").replace("?", "").strip(".") or pattern
    near = difflib.get_close_matches(pattern, list(names), n=n, cutoff=0.5)
    near += [
        p for p in difflib.get_close_matches(plain, list(names), n=n, cutoff=0.5) if p not in near
    ]
    return near[:n]


def unmatched_message(model: torch.nn.Module, missing: list[str]) -> str:
    """Why ``Recipe(checkpoint=...)`` cannot apply: each pattern matching no module, with the
    nearest module paths, and a few paths the model has."""
    parts = []
    for pat in missing:
        near = nearest_paths(model, pat)
        parts.append(f"{pat!r} (nearest: {', '.join(near)})" if near else repr(pat))
    return (
        f"Recipe(checkpoint=...): no module matches {'; '.join(parts)}. A pattern is a module "
        "path ('blocks.0'), a glob over paths ('blocks.*') or a class name ('Block'); this "
        f"model's paths look like: {example_paths(model)}"
    )


def example_paths(model: torch.nn.Module, n: int = 4) -> str:
    """A few child paths with their types, to show in a 'no module matches' message."""
    shown = [f"{p} ({type(m).__name__})" for p, m in model.named_modules() if p][:n]
    return ", ".join(shown) or "(the model has no submodules)"
