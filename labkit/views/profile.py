"""ProfileView: a sortable per-module table and a bar chart of the costliest modules."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import traitlets as t

from labkit.views._base import TraceWidget
from labkit.views._payload import (
    METRICS,
    PROFILE_COLUMNS,
    PROFILE_METRIC_COLUMNS,
    profile_payload,
)

if TYPE_CHECKING:
    from labkit.trace.model import Trace


class ProfileView(TraceWidget):
    """Per-layer profile of a Trace: sortable table plus top-N bar chart.

    Click a column header to sort (again to reverse); click a row or a bar to select
    the module. Linked to a :class:`~labkit.views.GraphView` (as in ``trace.show()``)
    the selection is shared both ways.

    Args:
        trace: The trace to show.
        metric: Rank the bar chart by this metric's *self* figure (see ``METRICS``).
        top: How many modules the bar chart shows.
        sort: Column the table is sorted by (one of ``PROFILE_COLUMNS``).
        descending: Sort order.
        throttle: Minimum seconds between two :meth:`update` deliveries.

    Returns:
        A widget; ``view.selected`` is the selected module path.

    Example:
        >>> ProfileView(labkit.trace(model, x), metric="flops", top=5)  # doctest: +SKIP
    """

    _bundle = "profile"

    table = t.Dict().tag(sync=True)
    metric = t.Enum(list(METRICS), default_value="fwd_time").tag(sync=True)
    top = t.Int(10).tag(sync=True)
    sort = t.Enum(list(PROFILE_COLUMNS), default_value="fwd_time").tag(sync=True)
    descending = t.Bool(True).tag(sync=True)
    selected = t.Unicode(None, allow_none=True).tag(sync=True)
    height = t.Int(560).tag(sync=True)

    def __init__(
        self,
        trace: Trace,
        *,
        metric: str = "fwd_time",
        top: int = 10,
        sort: str = "fwd_time",
        descending: bool = True,
        throttle: float = 0.25,
    ) -> None:
        super().__init__(
            trace, throttle=throttle, metric=metric, top=top, sort=sort, descending=descending
        )

    def _state(self, trace: Trace, settings: dict[str, Any]) -> dict[str, Any]:
        return {"table": profile_payload(trace)}

    def sorted_paths(self) -> list[str]:
        """Module paths in the table's current order (as the browser sorts them)."""
        cols = self.table["columns"]
        k = cols.index(self.sort)
        rows = sorted(self.table["rows"], key=lambda r: r[k], reverse=self.descending)
        return [r[0] for r in rows]

    def top_rows(self) -> list[tuple[str, float]]:
        """``(path, self figure)`` of the ``top`` costliest modules by ``metric``."""
        k = self.table["columns"].index(PROFILE_METRIC_COLUMNS[self.metric][1])
        rows = [(r[0], r[k]) for r in self.table["rows"] if r[k] > 0]
        return sorted(rows, key=lambda x: x[1], reverse=True)[: self.top]

    def to_png(self) -> bytes:
        """The bar chart as a PNG."""
        from labkit.views._static import profile_png

        return profile_png(self._trace, metric=self.metric, top=self.top)

    def to_html(self) -> str:
        """The bar chart and the table as static HTML."""
        from labkit.views._static import profile_html

        return profile_html(self._trace, metric=self.metric, top=self.top)

    def _fallback(self) -> dict[str, str]:
        """The bar chart (PNG, SVG) and every module's figures as a text table."""
        from labkit.views._static import figure_bundle, profile_figure, profile_text

        fig = profile_figure(self._trace, metric=self.metric, top=self.top)
        return figure_bundle(fig, f"{self!r}\n\n{profile_text(self._trace)}")

    def __repr__(self) -> str:
        return (
            f"ProfileView(model={self._trace.meta.model}, modules={len(self.table['rows'])}, "
            f"metric={self.metric!r}, sort={self.sort!r}, top={self.top})"
        )
