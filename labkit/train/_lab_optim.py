"""A Lab's optimizer and Recipe binding: the loss, the Recipe, the module that trains.

:class:`LabBinding` is one of the parts :class:`~labkit.train.Lab` delegates to: it turns
the Lab's model, loss, optimizer, lr and Recipe into the LightningModule ``fit`` trains
(the Recipe applied by :func:`labkit.optimize.apply`, the one place it is), and copies the
trained weights back. It keeps no state of its own.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    import lightning.pytorch as pl

    from labkit.optimize.recipe import Recipe
    from labkit.train.lab import Lab
    from labkit.train.module import StepFn

LossFn = Callable[[Any, Any], torch.Tensor]
LossArg = LossFn | str | None  # a loss, "model" (the model returns its own), or none


def as_recipe(value: object) -> Recipe:
    """A Lab's Recipe from what was given: None (the default Recipe), a Recipe or its dict.

    Raises:
        TypeError: anything else, named.
    """
    from labkit.optimize.recipe import Recipe

    if value is None:
        return Recipe()
    if isinstance(value, Mapping):
        return Recipe.from_dict(dict(value))
    if not isinstance(value, Recipe):
        raise TypeError(f"recipe must be a labkit.Recipe or a dict, got {type(value).__name__}")
    return value


def model_loss(loss: LossArg, step: StepFn | None) -> tuple[LossFn | None, StepFn | None]:
    """``(loss, step)`` for ``loss="model"`` (the model returns its own loss); other losses
    as given.

    Raises:
        ValueError: a string other than ``"model"``.
    """
    if not isinstance(loss, str):
        return loss, step
    if loss != "model":
        raise ValueError(
            f'Lab(loss={loss!r}): a loss is fn(output, target), or "model" when the '
            "model returns its own loss"
        )
    from labkit.train.module import model_step, output_loss

    return output_loss, step or model_step


def is_lightning(model: torch.nn.Module) -> bool:
    """Whether ``model`` is the user's own ``LightningModule`` (trained as it is)."""
    return any(
        c.__name__ == "LightningModule" and c.__module__.startswith("lightning")
        for c in type(model).__mro__
    )


class LabBinding:
    """The optimizer/Recipe side of a :class:`~labkit.train.Lab` (see the module docstring).

    Args:
        lab: The Lab whose model, loss, optimizer and Recipe this binds.
    """

    def __init__(self, lab: Lab) -> None:
        self.lab = lab

    def plain_loss(self) -> Callable[[Any, Any], torch.Tensor]:
        """The loss of a plain ``nn.Module`` (``Lab.__init__`` requires one for it)."""
        loss = self.lab.loss
        if loss is None or isinstance(loss, str):
            raise ValueError("this Lab has no loss: Lab(model, data, loss=...)")
        return loss

    def module(self, *, copy: bool = True) -> pl.LightningModule:
        """The LightningModule ``fit`` trains (see ``Lab.module``)."""
        from labkit.optimize import apply
        from labkit.train.module import LabModule

        lab = self.lab
        recipe = lab.recipe
        net = lab.model if not copy and recipe.is_default else apply(lab.model, recipe)
        if is_lightning(lab.model):
            module: pl.LightningModule = net  # type: ignore[assignment]  # the user's own
            return module
        return LabModule(
            net,
            loss=self.plain_loss(),
            optimizer=lab.optimizer,
            lr=lab.lr,
            optimizer_kwargs=lab.optimizer_kwargs,
            metrics=lab.metrics,
            step=lab.step,
            recipe=recipe.to_dict(),
            original=lab.model,
        )

    def take_weights(self, module: pl.LightningModule) -> None:
        """Keep the trained model as ``lab.trained_model`` and copy its weights into
        ``lab.model`` (unless it was trained in place)."""
        lab = self.lab
        net = getattr(module, "net", module) if not is_lightning(lab.model) else module
        lab.trained_model = net
        if net is lab.model:  # trained in place
            return
        try:
            lab.model.load_state_dict(net.state_dict())
        except Exception as exc:  # e.g. a quantized model's state_dict: keep the trained copy
            warnings.warn(
                f"the trained weights could not be copied back into lab.model ({exc}); the "
                "trained model is lab.trained_model",
                stacklevel=4,
            )

    def builds_lr(self) -> bool:
        """Whether ``lab.lr`` reaches the optimizer (a name or class; not a factory/instance)."""
        return isinstance(self.lab.optimizer, str | type)

    def optimizer_name(self) -> str:
        """The optimizer's name for the run record."""
        optimizer = self.lab.optimizer
        if isinstance(optimizer, str):
            return optimizer
        if isinstance(optimizer, torch.optim.Optimizer):
            return type(optimizer).__name__
        return str(getattr(optimizer, "__name__", type(optimizer).__name__))
