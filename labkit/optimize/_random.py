"""Hold a model's randomness still, so two recipes see the same numbers.

Dropout draws a fresh mask per call, and the draws depend on the dtype and the
kernel (a bf16 dropout on CUDA consumes the generator differently from an fp32
one), so an output compared across recipes in training mode mostly measures the
masks. :func:`held_randomness` switches the stochastic parts off for a pass and
leaves everything else (BatchNorm batch statistics, ``model.training``) as it was:

- ``nn.Dropout`` and its relatives (``Dropout1d/2d/3d``, ``AlphaDropout``,
  ``FeatureAlphaDropout``) and ``nn.RReLU`` are put in eval mode;
- ``nn.MultiheadAttention``'s attention dropout is set to 0;
- functional calls are neutralized by a ``TorchFunctionMode``: ``F.dropout`` and
  its relatives return their input, ``F.scaled_dot_product_attention`` runs with
  ``dropout_p=0`` (it works inside ``torch.compile`` too), also where labkit's
  checkpointing recomputes a forward during ``backward`` (``replay_in_recompute``).

Everything is restored on exit, also on error.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.overrides import TorchFunctionMode

_MODULES: tuple[type[nn.Module], ...] = (nn.modules.dropout._DropoutNd, nn.RReLU)
_IDENTITY = frozenset(
    {
        F.dropout,
        F.dropout1d,
        F.dropout2d,
        F.dropout3d,
        F.alpha_dropout,
        F.feature_alpha_dropout,
        torch.dropout,
        torch.alpha_dropout,
        torch.feature_dropout,
        torch.feature_alpha_dropout,
    }
)


@dataclass
class Held:
    """What :func:`held_randomness` switched off: module class name -> count."""

    modules: Counter[str] = field(default_factory=Counter)
    functional_calls: int = 0

    def describe(self) -> str:
        """One phrase, e.g. ``'dropout off in 6 modules (Dropout x4, MultiheadAttention x2)'``."""
        parts = []
        if self.modules:
            kinds = ", ".join(f"{k} x{n}" for k, n in sorted(self.modules.items()))
            parts.append(f"dropout off in {sum(self.modules.values())} modules ({kinds})")
        if self.functional_calls:
            parts.append(f"{self.functional_calls} functional dropout calls made identity")
        return "; ".join(parts) if parts else "no dropout or other stochastic module found"


class _NoDropout(TorchFunctionMode):
    #: labkit's checkpointing re-enters this mode when it recomputes a forward in backward
    replay_in_recompute = True

    def __init__(self, held: Held) -> None:
        super().__init__()
        self.held = held

    def __torch_function__(
        self,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        if func in _IDENTITY:
            p = args[1] if len(args) > 1 else kwargs.get("p", 0.5)
            training = args[2] if len(args) > 2 else kwargs.get("training", kwargs.get("train"))
            if p and training in (True, None):  # a call that would have drawn a mask
                self.held.functional_calls += 1
            return args[0] if args else kwargs["input"]
        if func is F.scaled_dot_product_attention and (
            kwargs.get("dropout_p", args[4] if len(args) > 4 else 0.0) or 0.0
        ):
            self.held.functional_calls += 1
            if len(args) > 4:
                args = (*args[:4], 0.0, *args[5:])
            else:
                kwargs = {**kwargs, "dropout_p": 0.0}
        return func(*args, **kwargs)


def stochastic_modules(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """(path, module) of every module that draws random numbers in training mode."""
    out = []
    for path, m in model.named_modules():
        dropout = isinstance(m, nn.modules.dropout._DropoutNd) and m.p > 0
        attention = isinstance(m, nn.MultiheadAttention) and float(m.dropout) > 0
        if dropout or attention or isinstance(m, nn.RReLU):
            out.append((path, m))
    return out


@contextlib.contextmanager
def held_randomness(model: nn.Module, *, functional: bool = True) -> Iterator[Held]:
    """Switch ``model``'s dropout (modules and functional calls) off for the ``with`` block.

    Args:
        model: The model; its modules are restored on exit.
        functional: Also neutralize functional dropout calls (``F.dropout``, SDPA's
            ``dropout_p``) made while the block runs (when ``model.training``).

    Yields:
        A :class:`Held` that counts what was switched off.
    """
    held = Held()
    modes: list[tuple[nn.Module, bool]] = []
    rates: list[tuple[nn.Module, Any]] = []
    try:
        for _, m in stochastic_modules(model):
            held.modules[type(m).__name__] += 1
            if isinstance(m, nn.MultiheadAttention):
                rates.append((m, m.dropout))
                m.dropout = 0.0
            elif isinstance(m, _MODULES):
                modes.append((m, m.training))
                m.training = False
        # an eval model draws no mask; a function mode would also turn off fast paths
        # (nn.MultiheadAttention's) and change which kernels run
        quiet = functional and model.training
        with _NoDropout(held) if quiet else contextlib.nullcontext():
            yield held
    finally:
        for m, was in modes:
            m.training = was
        for m, rate in rates:
            m.dropout = rate
