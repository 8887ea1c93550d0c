"""The error a failed memory recording raises: it carries the partial report."""

from __future__ import annotations

from typing import TYPE_CHECKING

from labkit.trace.errors import TraceError

if TYPE_CHECKING:
    from labkit.memory.attribution import MemoryReport


class MemoryRecordError(TraceError):
    """A recording ended by an error (out of memory included).

    The timeline up to the failure is kept in :attr:`report`; :attr:`module` names
    the module that was running (``""`` outside any module).

    Args:
        message: What failed, where, and the memory at that moment.
        report: The partial :class:`~labkit.memory.MemoryReport`.
        module: Path of the module running when it failed.

    Example:
        >>> try:                                           # doctest: +SKIP
        ...     labkit.memory(model, x)
        ... except labkit.MemoryRecordError as e:
        ...     print(e.module, e.report.summary())
    """

    def __init__(self, message: str, report: MemoryReport, module: str | None) -> None:
        super().__init__(message)
        self.report = report
        self.module = module
