"""One step of a Recipe's model: the only code in labkit that measures a step.

:func:`labkit.optimize.apply` puts autocast, the float32 matmul precision,
``torch.compile`` and activation checkpointing *inside* the model; what is left
for a step is the loop body: zero the gradients, run forward, reduce the output
to a loss, backward (through a GradScaler for ``16-mixed``), and the optimizer
step (``scaler.step`` and ``scaler.update`` with a scaler). ``labkit.compare``
(timed steps, the controlled loss pass, validation), the peak-memory pass and the
benchmarks all call :class:`RecipeStep`, so they cannot drift apart.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import torch

from labkit._tensors import model_device
from labkit.optimize._random import held_randomness
from labkit.optimize.apply import grad_scaler
from labkit.optimize.recipe import Recipe
from labkit.trace.errors import scalar_loss
from labkit.trace.step import default_loss

MODES = ("train", "inference")


class RecipeStep:
    """Run one training or inference step of a model made by :func:`~labkit.optimize.apply`.

    Args:
        model: The (applied) model.
        recipe: Its Recipe: ``16-mixed`` gets a ``torch.amp.GradScaler``.
        mode: ``"train"`` (forward, backward, optimizer step) or ``"inference"``
            (forward under ``torch.no_grad()``).
        loss: ``loss(output) -> scalar tensor``; default:
            :func:`labkit.trace.step.default_loss`, the sum of the means of the output's
            floating-point tensors (the loss ``labkit.trace``, ``memory`` and ``plan`` use).
        lr: Learning rate of the SGD optimizer made for training.
        optimizer: Use this optimizer instead of making an SGD one.

    Example:
        >>> import torch
        >>> from labkit.optimize import Recipe
        >>> from labkit.optimize.apply import apply
        >>> model, x = torch.nn.Linear(8, 4), torch.randn(32, 8)
        >>> step = RecipeStep(apply(model, Recipe()), Recipe(), mode="train")
        >>> out, loss = step(x, seed=0)
        >>> tuple(out.shape), isinstance(loss, float)
        ((32, 4), True)
    """

    def __init__(
        self,
        model: torch.nn.Module,
        recipe: Recipe,
        *,
        mode: str = "train",
        loss: Callable[[Any], torch.Tensor] | None = None,
        lr: float = 1e-2,
        optimizer: torch.optim.Optimizer | None = None,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"RecipeStep(mode=...) must be one of {MODES}, got {mode!r}")
        self.model, self.recipe, self.mode, self.loss_fn = model, recipe, mode, loss
        self.device_type = model_device(model).type
        self.scaler = grad_scaler(recipe, self.device_type) if mode == "train" else None
        self.opt = optimizer
        if mode == "train" and optimizer is None:
            params = [p for p in model.parameters() if p.requires_grad]
            if not params:
                raise ValueError("the model has no parameters that require grad to train")
            self.opt = torch.optim.SGD(params, lr=lr)

    def __call__(
        self, *args: Any, seed: int | None = None, hold_random: bool = False, **kwargs: Any
    ) -> tuple[Any, float | None]:
        """One step on ``args`` / ``kwargs``.

        Args:
            *args: Positional inputs.
            seed: Seed set just before the forward, when given.
            hold_random: Run with dropout switched off (see ``held_randomness``).
            **kwargs: Keyword inputs.

        Returns:
            (the output, the loss as a float; ``None`` in inference without a loss).
        """
        held = held_randomness(self.model) if hold_random else contextlib.nullcontext()
        with held:
            if seed is not None:
                torch.manual_seed(seed)
            if self.mode == "inference":
                with torch.no_grad():
                    out = self.model(*args, **kwargs)
                return out, float(self.loss_fn(out)) if self.loss_fn is not None else None
            assert self.opt is not None
            self.opt.zero_grad(set_to_none=True)
            out = self.model(*args, **kwargs)
            value = loss_of(out, self.loss_fn)
            if self.scaler is not None:
                self.scaler.scale(value).backward()
                self.scaler.step(self.opt)
                self.scaler.update()
            else:
                value.backward()
                self.opt.step()
            return out, float(value.detach())

    def __repr__(self) -> str:
        scaler = ", GradScaler" if self.scaler is not None else ""
        opt = f", {type(self.opt).__name__}" if self.opt is not None else ""
        return f"RecipeStep({self.recipe.label}, mode={self.mode!r}{opt}{scaler})"


def loss_of(out: Any, loss_fn: Callable[[Any], torch.Tensor] | None) -> torch.Tensor:
    """``loss_fn(out)`` checked to be a scalar (:class:`~labkit.trace.LossError` if not), or
    :func:`~labkit.trace.step.default_loss` (the sum of the means of ``out``'s floats that
    require grad), as ``labkit.trace`` trains."""
    if loss_fn is not None:
        return scalar_loss(loss_fn(out)).float()
    value = default_loss(out)
    if value is None:
        raise ValueError(
            "the model output has no floating-point tensor that requires grad to train on; "
            "pass loss="
        )
    return value
