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
