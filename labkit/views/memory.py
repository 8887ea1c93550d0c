"""MemoryTimeline: bytes by category through a recorded step, phases and peak marked."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import traitlets as t

from labkit.views._base import TraceWidget
from labkit.views._payload import memory_payload

if TYPE_CHECKING:
    from labkit.trace.model import Trace

EMPTY_MESSAGE = "no memory samples: record with labkit.memory(...) or mode='full'"


class MemoryTimeline(TraceWidget):
    """Stacked area of live bytes by category over a step, from the Trace's memory samples.

    Forward, backward and optimizer phases are shaded, the peak is marked with the module
    running at that moment, and hovering shows bytes by category. The ``selected`` module
    (linked with the graph and profile in ``trace.show()``) is shaded wherever it, or a
    module inside it, ran, with what memory did meanwhile; clicking the chart selects the
    module running at that moment. A trace without memory samples shows a message saying
    how to record them.

    Args:
        trace: The trace to show.
        height: Height of the chart in pixels.
        throttle: Minimum seconds between two :meth:`update` deliveries.

    Returns:
        A widget; ``view.selected`` is the selected module path.

    Example:
        >>> MemoryTimeline(labkit.trace(model, x))  # doctest: +SKIP
    """

    _bundle = "memory"

    samples = t.Dict().tag(sync=True)
    height = t.Int(360).tag(sync=True)
    empty_message = t.Unicode(EMPTY_MESSAGE).tag(sync=True)
    selected = t.Unicode(None, allow_none=True).tag(sync=True)

    def __init__(self, trace: Trace, *, height: int = 360, throttle: float = 0.25) -> None:
        super().__init__(trace, throttle=throttle, height=height)

    def _state(self, trace: Trace, settings: dict[str, Any]) -> dict[str, Any]:
        return {"samples": memory_payload(trace)}

    def peak(self) -> tuple[float, int, str, str] | None:
        """``(time, total bytes, phase, module)`` at the peak, or None without samples."""
        s = self.samples
        if not s["time"]:
            return None
        totals = [sum(col[i] for col in s["bytes"]) for i in range(len(s["time"]))]
        i = max(range(len(totals)), key=totals.__getitem__)
        return s["time"][i], totals[i], s["phase"][i], s["module"][i]

    def to_png(self) -> bytes:
        """The timeline (or the no-samples message) as a PNG."""
        from labkit.views._static import memory_png

        return memory_png(self._trace)

    def _fallback(self) -> dict[str, str]:
        """The timeline as PNG (and SVG when small) and the view's repr."""
        from labkit.views._static import figure_bundle, memory_figure

        return figure_bundle(memory_figure(self._trace), repr(self))

    def __repr__(self) -> str:
        peak = self.peak()
        where = f", peak={peak[1]} B at {peak[3] or '-'!r}" if peak else ""
        return (
            f"MemoryTimeline(model={self._trace.meta.model}, samples={len(self.samples['time'])}, "
            f"categories={self.samples['categories']}{where})"
        )
