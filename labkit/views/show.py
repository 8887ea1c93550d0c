"""TraceView: the graph, profile and memory views of one Trace in linked tabs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import ipywidgets

from labkit.views._keep import KeepsPicture
from labkit.views.graph import GraphView
from labkit.views.memory import MemoryTimeline
from labkit.views.profile import ProfileView

if TYPE_CHECKING:
    from labkit.trace.model import Trace


class TraceView(KeepsPicture, ipywidgets.Tab):
    """Graph, Profile and Memory tabs over one Trace, with the selection linked.

    Selecting a node in the graph highlights its row in the profile and the other way
    round (linked in the browser, synced to the kernel).

    Args:
        trace: The trace to show.
        metric: Metric the graph colours by and the profile ranks by.
        **graph_kwargs: Passed on to :class:`GraphView` (``depth``, ``rolled``, ``height``).

    Returns:
        A tab widget; ``view.graph``, ``view.profile`` and ``view.memory`` are the views.

    Example:
        >>> view = labkit.trace(model, x).show()  # doctest: +SKIP
        >>> view.graph.selected                   # doctest: +SKIP
    """

    def __init__(self, trace: Trace, *, metric: str = "fwd_time", **graph_kwargs: Any) -> None:
        self.graph = GraphView(trace, metric=metric, **graph_kwargs)
        self.profile = ProfileView(trace, metric=metric)
        self.memory = MemoryTimeline(trace)
        super().__init__(
            children=[self.graph, self.profile, self.memory],
            titles=["Graph", "Profile", "Memory"],
        )
        self._links = [
            ipywidgets.jslink((self.graph, "selected"), (self.profile, "selected")),
            ipywidgets.jslink((self.graph, "selected"), (self.memory, "selected")),
            ipywidgets.jslink((self.graph, "metric"), (self.profile, "metric")),
        ]

    def update(self, trace: Trace) -> None:
        """Show a newer trace in every tab (throttled; see :meth:`GraphView.update`)."""
        for view in (self.graph, self.profile, self.memory):
            view.update(trace)

    _picture_scale = 2  # the graph's 2x picture, the memory timeline under it at 2x too

    def _picture(self) -> dict[str, str]:
        from labkit.views._static import trace_picture

        # the graph as drawn now with the memory timeline under it, one PNG
        return trace_picture(self.graph.trace, graph=self.graph.to_png())

    def __repr__(self) -> str:
        return (
            f"TraceView(model={self.graph.trace.meta.model}, tabs=['Graph', 'Profile', 'Memory'])"
        )
