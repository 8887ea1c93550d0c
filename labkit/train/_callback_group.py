"""CallbackGroup: several Lightning callbacks registered as one.

Lightning dispatches every hook to every callback, overridden or not, each time through
a profiler context and a state-key string (``trainer/call.py``): a few microseconds per
callback per hook, about six hooks per training step. A Lab fit has four callbacks of
its own (events and Stop, epoch seeding, checkpoints, the NaN/Inf guard); registered as
one group, Lightning dispatches once per hook and the group calls only the members that
override it, in their order. The members stay ordinary callbacks, usable on their own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import lightning.pytorch as pl

_BASE = pl.Callback
HOOKS = tuple(
    name
    for name, fn in vars(_BASE).items()
    if callable(fn) and (name.startswith("on_") or name in ("setup", "teardown"))
)


def _overrides(callback: pl.Callback, hook: str) -> bool:
    return getattr(type(callback), hook) is not getattr(_BASE, hook)


def _fan_out(methods: list[Callable[..., Any]]) -> Callable[..., None]:
    def call_all(*args: object, **kwargs: object) -> None:
        for method in methods:
            method(*args, **kwargs)

    return call_all


class CallbackGroup(pl.Callback):
    """Registers ``callbacks`` with Lightning as one callback (see the module docstring).

    Args:
        callbacks: The members, called in this order for every hook they override.

    Example:
        >>> group = CallbackGroup([EpochSeed(0), NonFiniteGuard()])  # doctest: +SKIP
        >>> pl.Trainer(callbacks=[group])  # doctest: +SKIP
    """

    def __init__(self, callbacks: Iterable[pl.Callback]) -> None:
        self.callbacks = list(callbacks)
        keys = [cb.state_key for cb in self.callbacks]
        if len(set(keys)) != len(keys):
            raise ValueError(f"callbacks in one group need distinct state keys, got {keys}")
        for hook in HOOKS:
            methods = [getattr(cb, hook) for cb in self.callbacks if _overrides(cb, hook)]
            if len(methods) == 1:
                setattr(self, hook, methods[0])  # Lightning calls the member's method directly
            elif methods:
                setattr(self, hook, _fan_out(methods))

    def state_dict(self) -> dict[str, Any]:
        return {cb.state_key: state for cb in self.callbacks if (state := cb.state_dict())}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        for cb in self.callbacks:
            if cb.state_key in state_dict:
                cb.load_state_dict(state_dict[cb.state_key])

    def __repr__(self) -> str:
        return f"CallbackGroup({self.callbacks!r})"
