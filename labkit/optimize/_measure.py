"""Peak memory of one step of a Recipe's model.

On CUDA it is the caching allocator's peak (``torch.cuda.max_memory_allocated``).
On CPU there is no allocator statistic, so torch's dispatch-level ``MemTracker``
(``torch.distributed._tools.mem_tracker``) counts live tensor bytes, parameters
and optimizer state included. It cannot see inside compiled graphs, so compiled
recipes are measured on their eager equivalent (and the note says so).
"""

from __future__ import annotations

import copy
import warnings
from typing import Any

import torch

from labkit._format import fmt_bytes
from labkit._tensors import held_bytes, model_device
from labkit.optimize.step import RecipeStep


def peak_memory(run: Any, eager_recipe: Any) -> tuple[int | None, str | None]:
    """(peak bytes of one step, note) for a ``compare`` run; ``(None, why)`` when unmeasurable."""
    from labkit.optimize.apply import apply

    model = run.model if not run.recipe.compile else apply(run.base_model, eager_recipe)
    if _has_subclass_weights(model):
        return None, (
            f"peak memory not measured (torch's MemTracker cannot follow torchao's int8 weight "
            f"tensors); weights: {fmt_bytes(weight_bytes(model))} vs "
            f"{fmt_bytes(weight_bytes(run.base_model))} in fp32"
        )
    note = None
    if run.recipe.compile:
        note = "peak memory measured on the eager model (compiled graphs are opaque to the tracker)"
    device = model_device(model)
    try:
        if device.type == "cuda":
            return _cuda_peak(run, model, device), note
        return _tracked_peak(run, model), note
    except Exception as exc:
        return None, f"peak memory not measured ({type(exc).__name__}: {exc})"


def _has_subclass_weights(model: torch.nn.Module) -> bool:
    return any(type(p) not in (torch.Tensor, torch.nn.Parameter) for p in model.parameters())


def weight_bytes(model: torch.nn.Module) -> int:
    """Bytes held by parameters, looking inside tensor subclasses (torchao int8 weights)."""
    return sum(held_bytes(p) for p in model.parameters())


def _fresh_step(run: Any, model: torch.nn.Module) -> RecipeStep:
    """The run's step on a copy of ``model`` (so the step does not move the weights being
    compared), with its own optimizer and GradScaler."""
    model = copy.deepcopy(model) if model is run.model else model
    return RecipeStep(model, run.recipe, mode=run.mode, loss=run.loss_fn, lr=run.lr)


def _tracked_peak(run: Any, model: torch.nn.Module) -> int:
    from torch.distributed._tools.mem_tracker import MemTracker

    step = _fresh_step(run, model)
    tracker = MemTracker()
    tracker.track_external(step.model, *([step.opt] if step.opt is not None else []))
    with warnings.catch_warnings():
        # MemTracker's own always_call hook re-raises as a UserWarning when forward fails;
        # the failure itself is reported below.
        warnings.filterwarnings(
            "ignore", message=r".*always_call=True.*raised an exception", category=UserWarning
        )
        with tracker:
            step(*run.inputs, seed=run.seed, **run.kwargs)
    snapshot = tracker.get_tracker_snapshot("peak")
    return int(sum(v.get("Total", 0) for v in snapshot.values() if isinstance(v, dict)))


def _cuda_peak(run: Any, model: torch.nn.Module, device: torch.device) -> int:
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
