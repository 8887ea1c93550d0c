"""How large a step ``labkit.plan`` takes by default: a limit on module calls.

A plan runs the step on torch's fake tensors, whose ops are Python: measured with
``benchmarks/trace_scale.py`` (``Linear(2, 2)`` modules called in a loop, the cheapest
call there is; 2026-12-03, 2 shared CPU cores at load 5-7), a plan cost 3.8-4.1 ms a
module call at 3,000 and 10,000 calls, torch's ``FakeTensorMode`` alone (fake parameters,
forward, backward) 3.3-3.8 ms. :data:`SECONDS_PER_CALL` is that cost, and
:data:`MAX_MODULE_CALLS` is set so a step just over the limit would take more than 2
minutes at it. A larger step is refused before the fake copy is made when the model has
more modules that can be called (each is called once at least when it is used), and while
the step runs when its calls pass the limit (a loop that calls one module many times).
``max_module_calls=`` allows more (``None``: no limit).
"""

from __future__ import annotations

import torch

from labkit.plan.errors import PlanTooLarge
from labkit.trace.instrument import Observer, RawNode

SECONDS_PER_CALL = 4e-3
"""CPU seconds a plan costs per module call (``benchmarks/trace_scale.py``, 10,000 calls)."""
MAX_MODULE_CALLS = 30_000
"""Module calls a plan makes at most by default: 2 minutes at :data:`SECONDS_PER_CALL`."""

_NO_FORWARD = torch.nn.Module.forward  # containers (ModuleList, ModuleDict) cannot be called


def check_limit(limit: object) -> int | None:
    """``limit`` as ``max_module_calls`` takes it: a positive int, or ``None`` (no limit)."""
    if limit is None:
        return None
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValueError(
            f"max_module_calls must be a positive number of module calls or None (no limit), "
            f"got {limit!r}"
        )
    return limit


def callable_modules(model: torch.nn.Module) -> int:
    """The modules of ``model`` that can be called (``model`` itself included): each one
    used by the step is called once at least. Containers without a ``forward``
    (``ModuleList``, ``ModuleDict``) do not count; a module shared by two parents counts
    once."""
    return sum(1 for m in model.modules() if _has_forward(type(m)))


def _has_forward(cls: type) -> bool:
    """The class defines ``forward`` (read from the classes' dicts: a TorchScript module's
    ``forward`` is a descriptor that fails on the class)."""
    for klass in cls.__mro__:
        f = klass.__dict__.get("forward")
        if f is not None:
            return f is not _NO_FORWARD
    return False


def refuse_before(model: torch.nn.Module, limit: int | None, *, real: bool) -> None:
    """Raise :class:`PlanTooLarge` when ``model`` has more modules that can be called than
    ``limit`` (nothing made yet)."""
    if limit is None:
        return
    n = callable_modules(model)
    if n > limit:
        name = type(model).__name__
        raise PlanTooLarge(
            f"labkit.plan refused {name}: it has {n:,} modules that can be called, above "
            f"max_module_calls={limit:,}. " + _advice(n, limit, real=real),
            calls=n,
            limit=limit,
        )


class CallLimit(Observer):
    """Counts the module calls of a plan's step and stops it with :class:`PlanTooLarge` at
    the first call past ``limit`` (a loop calling one module many times is found here).

    Args:
        limit: The most module calls allowed.
        model: The user's model (named in the message).
        real: The model has real parameters (:func:`labkit.memory` can measure it).
    """

    def __init__(self, limit: int, model: torch.nn.Module, *, real: bool) -> None:
        self.limit = limit
        self.name = type(model).__name__
        self.real = real
        self.calls = 0
        self.most: tuple[int, str] = (0, "")  # the most calls of one module, and its path

    def __repr__(self) -> str:
        return f"CallLimit(limit={self.limit}, calls={self.calls})"

    def call(
        self,
        node: RawNode,
        module: torch.nn.Module,
        args: tuple[object, ...],
        kwargs: dict[str, object],
    ) -> None:
        self.calls += 1
        if node.call >= self.most[0]:
            self.most = (node.call + 1, node.module or "")
        if self.calls > self.limit:
            raise self.refusal()

    @property
    def passed(self) -> bool:
        """The step made more module calls than the limit."""
        return self.calls > self.limit

    def refusal(self) -> PlanTooLarge:
        """The error the step is stopped with."""
        times, path = self.most
        loop = (
            f" (module '{path}' alone was called {times:,} times: a loop)"
            if times > 1 and path
            else ""
        )
        return PlanTooLarge(
            f"labkit.plan stopped {self.name}'s step at module call {self.calls:,}, above "
            f"max_module_calls={self.limit:,}{loop}; nothing was changed. "
            + _advice(self.calls, self.limit, real=self.real),
            calls=self.calls,
            limit=self.limit,
        )


def _advice(calls: int, limit: int, *, real: bool) -> str:
    """The expected time, the option that allows it and the faster way, in words."""
    expected = _minutes(calls * SECONDS_PER_CALL)
    text = (
        f"A plan costs ~{SECONDS_PER_CALL * 1e3:.1f} ms a module call (torch's fake tensors run "
        f"in Python), so at least {calls:,} calls take {expected}. To plan it anyway, "
        "pass a larger "
        f"max_module_calls= (e.g. max_module_calls={max(calls, limit) * 2:_}) or "
        "max_module_calls=None (no limit)"
    )
    if real:
        return text + (
            "; or measure the real step with labkit.memory(model, batch): the same memory "
            "categories, measured, at about a fifth of a plan's cost a module call (~0.8 ms)"
        )
    return text + (
        "; labkit.memory measures the real step much faster, but needs real parameters "
        "(this model is on the meta device)"
    )


def _minutes(seconds: float) -> str:
    """A duration in words: ``'0.074 s'``, ``'45 s'``, ``'6 minutes'``, ``'2.5 hours'``."""
    if seconds < 90:
        return f"{seconds:.2g} s" if seconds < 10 else f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} minutes"
    return f"{seconds / 3600:.1f} hours"
