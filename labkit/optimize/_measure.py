"""Peak memory of one step of a Recipe's model.

On CUDA it is the caching allocator's peak (``torch.cuda.max_memory_allocated``).
On CPU there is no allocator statistic, so labkit's own
:class:`~labkit.memory.MemoryTracker` (what ``labkit.memory`` reports) counts live
tensor storages, parameters, gradients, optimizer state and the batch included. It
cannot see inside compiled graphs, so compiled recipes are measured on their eager
equivalent (and the note says so).

:func:`step_flops` counts a recipe's step FLOPs once, with labkit's FLOP counter (a full
:class:`~labkit.trace.Recorder`, ``FlopCounterMode``'s formulas), on a copy of the model:
``compare`` divides them by the median step time for each row's achieved FLOP/s.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING

import torch

from labkit._format import fmt_bytes
from labkit._tensors import held_bytes, model_device
from labkit.memory.tracker import MemoryTracker
from labkit.optimize.step import RecipeStep
from labkit.trace import MemoryMeta, MemoryObserver, MemorySample
from labkit.trace.recorder import Recorder

if TYPE_CHECKING:
    from labkit.optimize._run import _Run
    from labkit.optimize.recipe import Recipe


def peak_memory(run: _Run, eager_recipe: Recipe) -> tuple[int | None, str | None]:
    """(peak bytes of one step, note) for a ``compare`` run; ``(None, why)`` when unmeasurable."""
    from labkit.optimize.apply import apply

    model = run.model if not run.recipe.compile else apply(run.base_model, eager_recipe)
    note = None
    if run.recipe.compile:
        note = "peak memory measured on the eager model (compiled graphs are opaque to the tracker)"
    elif any(type(p) not in (torch.Tensor, torch.nn.Parameter) for p in model.parameters()):
        note = (
            f"weights: {fmt_bytes(weight_bytes(model))} vs "
            f"{fmt_bytes(weight_bytes(run.base_model))} in fp32 (the peak adds what the "
            "quantized kernels unpack, e.g. a weight dequantized for its matmul)"
        )
    device = model_device(model)
    try:
        if device.type == "cuda":
            return _cuda_peak(run, model, device), note
        return _tracked_peak(run, model), note
    except Exception as exc:
        return None, f"peak memory not measured ({type(exc).__name__}: {exc})"


def step_flops(run: _Run, eager_recipe: Recipe) -> tuple[int | None, str]:
    """(FLOPs of one step, how they were counted) for a ``compare`` run; ``(None, why)`` when
    they could not be counted.

    The step runs once on a copy of the recipe's model (its own optimizer and GradScaler),
    so nothing that is timed or compared moves. Compiled and exported recipes are counted on
    their eager equivalent: the counter cannot see inside compiled graphs, and the FLOPs of
    the same math are the same.
    """
    from labkit.optimize.apply import apply

    eager = eager_recipe.replace(export=None, export_kwargs=())
    opaque = bool(run.recipe.compile or run.recipe.export)
    how = "once, on a copy of the model"
    if opaque:
        how += ", run eagerly: compiled graphs are opaque to the counter"
    try:
        model = apply(run.base_model, eager) if opaque else run.model
        step = _fresh_step(run, model)
        with Recorder(step.model, mode="full", memory=_NoMemory()) as rec:
            step(*run.inputs, seed=run.seed, **run.kwargs)
    except Exception as exc:
        return None, f"FLOPs not counted ({type(exc).__name__}: {exc})"
    trace = rec.trace
    assert trace is not None
    missing = [m["op"] for m in trace.meta.no_flop_formula]
    if missing:
        ops = ", ".join(missing[:4]) + (f" (+{len(missing) - 4})" if len(missing) > 4 else "")
        how += f"; ops without a FLOP formula, not counted (FLOP/s is a lower bound): {ops}"
    return trace.total_flops, how


class _NoMemory(MemoryObserver):
    """A memory observer that keeps nothing: counting FLOPs needs no memory timeline."""

    def result(self) -> tuple[tuple[MemorySample, ...], MemoryMeta | None]:
        return (), None


def weight_bytes(model: torch.nn.Module) -> int:
    """Bytes held by parameters, looking inside tensor subclasses (torchao int8 weights)."""
    return sum(held_bytes(p) for p in model.parameters())


def _fresh_step(run: _Run, model: torch.nn.Module) -> RecipeStep:
    """The run's step on a copy of ``model`` (so the step does not move the weights being
    compared), with its own optimizer and GradScaler."""
    model = copy.deepcopy(model) if model is run.model else model
    return RecipeStep(model, run.recipe, mode=run.mode, loss=run.loss_fn, lr=run.lr)


def _tracked_peak(run: _Run, model: torch.nn.Module) -> int:
    """The step's peak of live tensor storages, by labkit's own MemoryTracker (the figure
    ``labkit.memory`` reports for the same step)."""
    step = _fresh_step(run, model)
    tracker = MemoryTracker(
        step.model,
        optimizers=(step.opt,) if step.opt is not None else (),
        inputs=(run.inputs, run.kwargs),
        scalers=(step.scaler,) if step.scaler is not None else (),
    )
    with Recorder(step.model, mode="timing", observers=[tracker]):
        step(*run.inputs, seed=run.seed, **run.kwargs)
    return int(tracker.peak)


def _cuda_peak(run: _Run, model: torch.nn.Module, device: torch.device) -> int:
    """Weights of this model plus the step's rise over what was allocated before it.

    Other recipes' models share the device, so the allocator's absolute peak would
    count their weights too.
    """
    step = _fresh_step(run, model)
    torch.cuda.synchronize(device)
    before = torch.cuda.memory_allocated(device)
    torch.cuda.reset_peak_memory_stats(device)
    step(*run.inputs, seed=run.seed, **run.kwargs)
    torch.cuda.synchronize(device)
    return int(torch.cuda.max_memory_allocated(device) - before + weight_bytes(step.model))
