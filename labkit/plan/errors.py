"""The error a plan raises when the step cannot run on fake tensors."""

from __future__ import annotations

from labkit.trace.errors import TraceError


class PlanError(TraceError):
    """The step could not be predicted: an op has no fake kernel or a value-dependent
    result (``nonzero``, ``.item()``), or the step itself failed on fake tensors.

    The message names the op, the module running and what to do instead (measure a
    small batch with :func:`labkit.memory`).

    Example:
        >>> try:                                   # doctest: +SKIP
        ...     labkit.plan(model, x)
        ... except labkit.PlanError as e:
        ...     print(e)
    """


class PlanTooLarge(PlanError):
    """The step is too large to plan in reasonable time: it has (or, running, made) more
    module calls than ``max_module_calls`` allows. Nothing was changed.

    A plan costs a few milliseconds a module call (torch's fake tensors are Python), so a
    model of 100,000 module calls plans in minutes. The message names the size, the time
    it would take at the cost measured per module call, the option that allows it
    (``max_module_calls=``) and, for a real model, the faster way (:func:`labkit.memory`
    measures the real step).

    Args:
        message: What was refused and what to do.
        calls: The module calls counted (or the modules that can be called, before the step).
        limit: The limit that refused them.

    Example:
        >>> try:                                   # doctest: +SKIP
        ...     labkit.plan(model, x)
        ... except labkit.plan.PlanTooLarge as e:
        ...     p = labkit.plan(model, x, max_module_calls=e.calls * 2)
    """

    def __init__(self, message: str, *, calls: int = 0, limit: int = 0) -> None:
        super().__init__(message)
        self.calls = calls
        self.limit = limit
