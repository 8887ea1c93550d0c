"""Inputs that carry an autograd graph from code before the call, cut there.

``labkit.trace(model, z)`` where ``z = encoder(x)`` (or ``a * 2`` of a leaf that requires
grad) still holds the graph that made it: the step's backward would flow through it into
the encoder's ``.grad``, and the second pass labkit runs fails (the graph was freed by the
first: "Trying to backward through the graph a second time"). The measured step is the
model's, so such an input is given to it detached, still requiring grad: backward stops
at the input, what came before it is left as it was, and the notes say so. The detached
tensor shares the input's storage (an in-place change reaches the user's tensor, and the
snapshot puts it back as for any input).

Plain containers are walked (a tensor, lists, tuples, named tuples, dicts); a tensor inside
another object is left as it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

__all__ = ["cut_graphs", "cut_note"]


def _cut(obj: Any, name: str, cut: list[str], depth: int = 0) -> Any:
    if isinstance(obj, torch.Tensor):
        if obj.grad_fn is None:
            return obj
        cut.append(f"{name} ({type(obj.grad_fn).__name__})")
        return obj.detach().requires_grad_(True)
    if depth > 8:
        return obj
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        values = [_cut(getattr(obj, f), f"{name}.{f}", cut, depth + 1) for f in obj._fields]
        same = all(a is b for a, b in zip(values, obj, strict=True))
        return obj if same else type(obj)(*values)
    if isinstance(obj, (list, tuple)):
        values = [_cut(v, f"{name}[{i}]", cut, depth + 1) for i, v in enumerate(obj)]
        if all(a is b for a, b in zip(values, obj, strict=True)):
            return obj
        return type(obj)(values) if type(obj) in (list, tuple) else obj
    if type(obj) is dict:
        new = {k: _cut(v, f"{name}[{k!r}]", cut, depth + 1) for k, v in obj.items()}
        return obj if all(new[k] is obj[k] for k in obj) else new
    return obj


def cut_graphs(
    args: tuple[Any, ...], kwargs: Mapping[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any], list[str]]:
    """``(args, kwargs, cut)``: the inputs with each tensor that has a ``grad_fn`` replaced
    by a detached tensor that requires grad, and the inputs cut, named (``[0] (MulBackward0)``,
    ``['z'] (AddmmBackward0)``).

    Example:
        >>> a = torch.ones(2, requires_grad=True)
        >>> args, kwargs, cut = cut_graphs((a * 2,), {})
        >>> args[0].grad_fn is None, args[0].requires_grad, cut
        (True, True, ['[0] (MulBackward0)'])
    """
    cut: list[str] = []
    new_args = tuple(_cut(a, f"[{i}]", cut) for i, a in enumerate(args))
    new_kwargs = {k: _cut(v, k, cut) for k, v in kwargs.items()}
    return new_args, new_kwargs, cut


def cut_note(cut: list[str]) -> str:
    """The note for inputs cut from the graph that made them."""
    return (
        f"input{'s' if len(cut) > 1 else ''} {', '.join(cut)} carried the graph of code "
        "before the call: measured detached there (requiring grad), so backward stops at "
        "the input and what came before it is left as it was; the figures are the step's "
        "from the input on"
    )
