"""Batches of other sizes for :func:`labkit.tune`, along the dimension the plan finds.

The rule is ``labkit.plan.max_batch_size``'s (``labkit.plan.batch``): the batch size is the
first dimension of the batch's first tensor, and every tensor whose first dimension equals
it is cut or repeated (rows repeat cyclically) to the new size.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from labkit._tensors import named_tensors
from labkit.plan.batch import batch_size, resize

Inputs = tuple[tuple[Any, ...], dict[str, Any]]

LADDER = (0.25, 0.5, 1, 2, 4, 8, 16)  # default sizes, as multiples of the user's batch


def batch_dim(args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
    """The batch size of ``(args, kwargs)``, or a ValueError naming what was found instead."""
    n = batch_size((args, kwargs))
    if n is not None and n > 0:
        return int(n)
    found = [
        f"{name or 'batch'}: {type(t).__name__} {list(t.shape)}"
        for name, t in named_tensors((args, kwargs))
    ][:4]
    what = "; ".join(found) if found else "no tensor at all (" + _kinds(args, kwargs) + ")"
    raise ValueError(
        "tune cannot find the batch dimension of the batch: it is the first dimension of the "
        f"first tensor (labkit.plan.max_batch_size's rule), and the batch holds {what}. Pass "
        "a tensor (or a tuple/dict of tensors) whose first dimension counts samples"
    )


def _kinds(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    kinds = [type(a).__name__ for a in args] + [
        f"{k}={type(v).__name__}" for k, v in kwargs.items()
    ]
    return ", ".join(kinds) or "empty"


def maker(args: tuple[Any, ...], kwargs: dict[str, Any], n0: int) -> Callable[[int], Inputs]:
    """``n -> (args, kwargs)`` with every batch-sized tensor cut or repeated to ``n`` rows."""

    def make(n: int) -> Inputs:
        if n == n0:
            return args, kwargs
        with torch.no_grad():
            got = resize((args, kwargs), n, n0)
        return tuple(got[0]), dict(got[1])

    return make


def ladder(n0: int, batch_sizes: Sequence[int] | None) -> list[int]:
    """The batch sizes to plan, ascending: ``batch_sizes``, or multiples of ``n0``."""
    if batch_sizes is not None:
        sizes = list(batch_sizes)
        bad = [n for n in sizes if not isinstance(n, int) or isinstance(n, bool) or n < 1]
        if bad or not sizes:
            raise ValueError(
                f"tune(batch_sizes=...) must be a non-empty list of ints >= 1, got {batch_sizes!r}"
            )
        return sorted(set(sizes))
    return sorted({max(1, int(n0 * k)) for k in LADDER})
