"""The largest batch that fits: bisection over predicted peaks against a memory budget."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from labkit._format import fmt_bytes
from labkit._progress import ProgressOption
from labkit._progress import progress as progress_of
from labkit._tensors import model_device
from labkit.memory.api import memory
from labkit.plan._batch_dim import batch_size, resize
from labkit.plan._fake import OptimizerArg
from labkit.plan._limit import MAX_MODULE_CALLS
from labkit.plan.api import plan
from labkit.plan.model import Plan
from labkit.plan.recipe import PlanRecipe
from labkit.trace.entry import StepOptions

# batch_size and resize are the batch-dimension rule labkit.tune makes other batch sizes by
__all__ = [
    "DEFAULT_MARGIN",
    "BatchSearch",
    "batch_size",
    "max_batch_size",
    "resize",
    "resolve_budget",
    "search",
]

DEFAULT_MARGIN = 0.08  # of CUDA free memory: the allocator's rounding and cache, kernels' workspace


@dataclass(frozen=True)
class BatchSearch:
    """Result of :func:`max_batch_size`.

    Args:
        batch: The largest batch size whose predicted peak fits (0: not even one).
        peak_bytes: Its predicted peak.
        budget: The bytes the peak had to fit in.
        how: Where the budget came from.
        tried: ``{batch size: predicted peak}`` for every plan made.
        measured_bytes: With ``verify=True``, the peak measured in one real step at ``batch``.

    Example:
        >>> r = labkit.plan.max_batch_size(model, x, budget=2**30)   # doctest: +SKIP
        >>> r.batch, r.tried                                          # doctest: +SKIP
    """

    batch: int
    peak_bytes: int
    budget: int
    how: str
    tried: dict[int, int] = field(default_factory=dict)
    measured_bytes: int | None = None

    def __repr__(self) -> str:
        s = (
            f"BatchSearch(batch={self.batch}, peak={fmt_bytes(self.peak_bytes)}, "
            f"budget={fmt_bytes(self.budget)} ({self.how}), plans={len(self.tried)}"
        )
        if self.measured_bytes is not None:
            err = (self.peak_bytes - self.measured_bytes) / max(1, self.measured_bytes)
            s += f", measured={fmt_bytes(self.measured_bytes)} ({err:+.1%} predicted)"
        return s + ")"

    def __int__(self) -> int:
        return self.batch


def resolve_budget(budget: int | None, device: str, margin: float) -> tuple[int, str]:
    """The bytes a step may use on ``device`` and how that was decided."""
    if budget is not None:
        if budget <= 0:
            raise ValueError(f"budget must be a positive number of bytes, got {budget}")
        return int(budget), "given"
    dev = torch.device(device)
    if dev.type != "cuda":
        raise ValueError(
            f"planning for {dev}: give budget= in bytes (e.g. budget=8 * 2**30); only on CUDA "
            "is the budget read from the device"
        )
    free, total = torch.cuda.mem_get_info(dev)
    return int(free * (1 - margin)), (
        f"{fmt_bytes(free)} free of {fmt_bytes(total)} on {dev}, less {margin:.0%} for the "
        "allocator's rounding and cache and kernels' workspace"
    )


def search(
    replan: Callable[[int], Any],
    budget: int | None,
    device: str,
    *,
    margin: float = DEFAULT_MARGIN,
    limit: int = 1 << 20,
    report: Callable[[float, str], None] | None = None,
) -> BatchSearch:
    """Bisection over ``replan(n).peak_bytes`` (assumed to grow with ``n``); ``report(share,
    message)`` hears of each plan before it is made."""
    cap, how = resolve_budget(budget, device, margin)
    tried: dict[int, int] = {}
    bounds = [1, limit + 1]  # lo fits, hi does not: what bisection has left

    def peak(n: int) -> int:
        if n not in tried:
            if report is not None:  # plans left: about log2 of the bracket, +1 to find it
                left = math.log2(max(2, bounds[1] - bounds[0])) + (bounds[1] > limit)
                report(len(tried) / (len(tried) + left), f"batch {n}")
            tried[n] = replan(n).peak_bytes
        return tried[n]

    # two plans give the line peak ~ a + b n; widen steps from its answer until the
    # largest size that fits is bracketed, then bisect
    p1, p2 = peak(1), peak(2)
    if p1 > cap:
        return BatchSearch(0, p1, cap, how, tried)
    slope = max(1, p2 - p1)
    guess = max(1, min(limit, 1 + (cap - p1) // slope))
    lo, hi = 1, limit + 1  # lo fits; hi does not
    step = max(1, guess // 50)
    if peak(guess) <= cap:
        lo = bounds[0] = guess
        while lo < limit:
            n = min(limit, lo + step)
            if peak(n) > cap:
                hi = bounds[1] = n
                break
            lo, step = n, step * 2
            bounds[0] = lo
    else:
        hi = bounds[1] = guess
        while hi - 1 > lo:
            n = max(lo, hi - step)
            if peak(n) <= cap:
                lo = bounds[0] = n
                break
            hi, step = n, step * 2
            bounds[1] = hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if peak(mid) <= cap:
            lo = bounds[0] = mid
        else:
            hi = bounds[1] = mid
    return BatchSearch(lo, peak(lo), cap, how, tried)


def max_batch_size(
    model: torch.nn.Module,
    batch: Any,
    budget: int | None = None,
    *,
    loss: Callable[[Any], torch.Tensor] | None = None,
    optimizer: OptimizerArg = None,
    recipe: PlanRecipe | None = None,
    device: str | torch.device | None = None,
    margin: float = DEFAULT_MARGIN,
    limit: int = 1 << 20,
    verify: bool = False,
    keep_output: bool = True,
    inputs: dict[str, Any] | None = None,
    progress: ProgressOption = StepOptions.progress,
    max_module_calls: int | None = MAX_MODULE_CALLS,
) -> BatchSearch:
    """The largest batch whose predicted training-step peak fits a memory budget.

    Plans the step (:func:`labkit.plan`) at a few batch sizes: two give the line the peak
    follows, then bisection finds the exact largest size that fits.

    Args:
        model: The model (it may live on the meta device).
        batch: One batch (its tensors' first dimension is the batch size and is scaled),
            or a function ``n -> batch``.
        budget: Bytes the step's peak may use. On CUDA, default: the device's free memory
            less ``margin``. On CPU it must be given.
        loss, optimizer, recipe, device, keep_output: As for :func:`labkit.plan`. A loss that closes
            over targets of one batch size cannot follow the batch: build the targets from
            the output's shape instead.
        margin: Fraction of CUDA free memory kept back for the caching allocator's
            rounding and cache and kernels' workspace (only when ``budget`` is ``None``).
        limit: The largest batch size considered.
        inputs: Keyword inputs of the model beside ``batch`` (resized with it).
        verify: Run one real step at the answer with :func:`labkit.memory` and keep its
            measured peak in ``measured_bytes`` (needs a real model and batch); the model
            and optimizer are left as they were.
        progress: Show progress (a bar in a notebook; on a terminal one line on stderr
            after 2 s: ``labkit.plan.max_batch_size: batch 64 [40%]``); ``False``: nothing;
            a function ``(share, message)`` receives it instead.
        max_module_calls: As for :func:`labkit.plan`: the most module calls a plan's step
            may make (``None``: no limit); each plan of the search is held to it.

    Returns:
        A :class:`BatchSearch`; ``int(result)`` is the batch size.

    Example:
        >>> r = labkit.plan.max_batch_size(model, torch.Size([1, 3, 224, 224]),
        ...                                budget=4 * 2**30, optimizer=opt)  # doctest: +SKIP
        >>> r.batch                                                         # doctest: +SKIP
    """
    if callable(batch):
        make = batch
    else:
        size = batch_size((batch, inputs or {}))
        make = lambda n: resize((batch, inputs or {}), n, size)  # noqa: E731
    dev = torch.device(device) if device is not None else model_device(model)

    def replan(n: int) -> Plan:
        b, kw = _split(make(n), callable(batch))
        return plan(
            model,
            b,
            loss=loss,
            optimizer=optimizer,
            recipe=recipe,
            device=dev,
            keep_output=keep_output,
            model_kwargs=kw,
            max_module_calls=max_module_calls,
        )

    with progress_of("labkit.plan.max_batch_size", progress) as bar:
        result = search(replan, budget, str(dev), margin=margin, limit=limit, report=bar)
        if verify and result.batch:
            bar(0.95, f"verifying batch {result.batch} with labkit.memory")
            opt = optimizer
            if opt is not None and not isinstance(opt, torch.optim.Optimizer):
                opt = opt(model.parameters())
            # labkit.memory puts the model and optimizer back as they were afterwards
            b, kw = _split(make(result.batch), callable(batch))
            real = memory(
                model, b, loss=loss, optimizer=opt, keep_output=keep_output, model_kwargs=kw
            )
            result = replace(result, measured_bytes=real.peak_bytes)
    return result


def _split(made: Any, from_function: bool) -> tuple[Any, dict[str, Any]]:
    """``(batch, keyword inputs)`` of a resized batch (a function's batch has no keywords)."""
    return (made, {}) if from_function else made
