"""One Recipe's copy of the model for :func:`labkit.tune`: its optimizer, timed steps and peak.

Every set-up runs on its own :func:`~labkit.optimize.apply` copy, with an optimizer of the
user's class, param groups, hyperparameters and state rebuilt for the copy (state deep-
copied), so nothing the user owns takes a step. Candidates of one Recipe at several batch
sizes share its copy.
"""

from __future__ import annotations

import copy
import inspect
import time
from collections.abc import Callable, Iterable
from typing import Any

import torch

from labkit.memory import memory
from labkit.optimize.apply import apply, grad_scaler
from labkit.optimize.recipe import Recipe
from labkit.optimize.step import RecipeStep

DEFAULT_LR = 1e-2  # the SGD made when no optimizer is given (no state: its peak is the step's)

LossFn = Callable[[Any], torch.Tensor]
"""``loss(output) -> scalar``."""

OptimizerChoice = torch.optim.Optimizer | Callable[..., torch.optim.Optimizer] | None
"""What ``tune(optimizer=...)`` takes: an optimizer of the model (rebuilt for each copy), a
factory ``params -> optimizer`` (or ``module -> optimizer``), or ``None`` (plain SGD)."""


def default_optimizer(params: Iterable[torch.nn.Parameter]) -> torch.optim.Optimizer:
    """What tune plans and times without ``optimizer=``: plain SGD (no state)."""
    return torch.optim.SGD(params, lr=DEFAULT_LR)


def optimizer_for(
    work: torch.nn.Module, model: torch.nn.Module, optimizer: OptimizerChoice
) -> torch.optim.Optimizer:
    """The user's optimizer made again for ``work`` (an :func:`apply` copy of ``model``).

    An optimizer instance is rebuilt with the same class, param groups (parameters matched
    by name: ``apply`` keeps module paths) and hyperparameters, and a deep copy of its
    state; a factory is called on ``work``'s parameters (or on ``work`` itself, as
    ``labkit.plan`` does for ``lambda m: m.configure_optimizers(...)``).
    """
    if optimizer is None:
        return default_optimizer(work.parameters())
    if not isinstance(optimizer, torch.optim.Optimizer):
        try:
            return optimizer(work.parameters())
        except (AttributeError, TypeError) as e:
            try:
                return optimizer(work)
            except Exception:
                raise e from None
    names = {id(p): n for n, p in model.named_parameters()}
    groups = []
    for g in optimizer.param_groups:
        missing = [p for p in g["params"] if id(p) not in names]
        if missing:
            raise ValueError(
                f"{type(optimizer).__name__} holds {len(missing)} tensor(s) that are not "
                "parameters of the model: give tune a factory instead (optimizer=lambda ps: ...)"
            )
        groups.append({**g, "params": [work.get_parameter(names[id(p)]) for p in g["params"]]})
    cls = type(optimizer)
    accepted = inspect.signature(cls.__init__).parameters
    defaults = {k: v for k, v in optimizer.defaults.items() if k in accepted}
    new = cls(groups, **defaults)
    new.load_state_dict(copy.deepcopy(optimizer.state_dict()))  # the state, never shared
    return new


def plan_optimizer(optimizer: OptimizerChoice) -> OptimizerChoice:
    """The optimizer to give ``labkit.plan`` (the user's, or the SGD tune times without one)."""
    return optimizer if optimizer is not None else default_optimizer


class Runner:
    """One Recipe's copy of the model, its optimizer and its step.

    Args:
        model: The user's model (copied by :func:`apply`, never run).
        recipe: The Recipe.
        optimizer: The user's optimizer, a factory, or ``None`` (SGD).
        loss: ``loss(output) -> scalar``.
    """

    def __init__(
        self,
        model: torch.nn.Module,
        recipe: Recipe,
        optimizer: OptimizerChoice,
        loss: LossFn | None,
    ) -> None:
        self.recipe = recipe
        self.model = apply(model, recipe)
        self.model.train()
        opt = optimizer_for(self.model, model, optimizer)
        self.step = RecipeStep(self.model, recipe, mode="train", loss=loss, optimizer=opt)
        self.cuda = next((p.device for p in self.model.parameters() if p.is_cuda), None)

    def seconds(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> float:
        """Wall seconds of one training step (CUDA: synchronised before and after)."""
        if self.cuda is not None:
            torch.cuda.synchronize(self.cuda)
        t0 = time.perf_counter()
        self.step(*args, **kwargs)
        if self.cuda is not None:
            torch.cuda.synchronize(self.cuda)
        return time.perf_counter() - t0

    def __repr__(self) -> str:
        return f"Runner({self.recipe.label})"


def channels_last(args: tuple[Any, ...], recipe: Recipe) -> tuple[Any, ...]:
    """4-D inputs in channels-last order for a ``channels_last`` Recipe (as compare does)."""
    if not recipe.channels_last:
        return args
    return tuple(
        a.contiguous(memory_format=torch.channels_last)
        if isinstance(a, torch.Tensor) and a.dim() == 4
        else a
        for a in args
    )


def measured_peak(
    model: torch.nn.Module,
    recipe: Recipe,
    optimizer: OptimizerChoice,
    loss: LossFn | None,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> tuple[int, str]:
    """``(bytes, how)``: the peak of one real step of ``recipe`` on a fresh copy.

    CPU: labkit's memory tracker, the figure ``labkit.memory`` reports (live tensor
    storages: weights, gradients, optimizer state, the batch and activations). CUDA: the
    caching allocator's reserved bytes, from before the copy is made to the step's peak.
    A compiled Recipe is measured on its eager equivalent (compiled graphs are opaque to
    the tracker), and ``how`` says so.
    """
    how = ""
    if recipe.compile is not None:
        recipe = recipe.replace(compile=None)
        how = "; measured on the eager model (compiled graphs are opaque to the tracker)"
    device = next((p.device for p in model.parameters() if p.is_cuda), None)
    args = channels_last(args, recipe)
    if device is not None:
        return _cuda_peak(model, recipe, optimizer, loss, args, kwargs, device), (
            "the caching allocator's reserved bytes, copy of the model included" + how
        )
    work = apply(model, recipe)
    work.train()
    opt = optimizer_for(work, model, optimizer)
    scaler = grad_scaler(recipe, "cpu")
    rep = memory(work, args, loss=loss, optimizer=opt, scaler=scaler, model_kwargs=kwargs)
    return int(rep.peak_bytes), "labkit's memory tracker, as labkit.memory" + how


def _cuda_peak(
    model: torch.nn.Module,
    recipe: Recipe,
    optimizer: OptimizerChoice,
    loss: LossFn | None,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    device: torch.device,
) -> int:
    import gc

    gc.collect()
    torch.cuda.synchronize(device)
    torch.cuda.empty_cache()
    before = torch.cuda.memory_reserved(device)
    torch.cuda.reset_peak_memory_stats(device)
    runner = Runner(model, recipe, optimizer, loss)
    runner.step(*args, **kwargs)
    torch.cuda.synchronize(device)
    peak = torch.cuda.max_memory_reserved(device) - before
    del runner
    gc.collect()
    torch.cuda.empty_cache()
    return int(peak)
