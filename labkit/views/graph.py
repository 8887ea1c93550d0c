"""GraphView: the graph that ran, as nested, collapsible, colour-coded boxes."""

from __future__ import annotations

import sys
from array import array
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import traitlets as t

from labkit.trace.graph import (
    DEFAULT_DEPTH,
    VisibleGraph,
    visible_graph,
)
from labkit.views._base import TraceWidget
from labkit.views._contract import GraphMarks, GraphPayload
from labkit.views._graph_marks import break_dicts, break_marks
from labkit.views._payload import (
    METRICS,
    canon_of,
    graph_state,
    instance_metrics,
    opened_at,
    packed_json,
)

if TYPE_CHECKING:
    from labkit.trace.model import Trace


def _packed_ids(value: Iterable[int], widget: Any = None) -> memoryview:
    """Trace node ids as one buffer of little-endian int32 (``expanded``'s ``to_json``).

    A list of 40,000 open ids costs the page 25-80 ms a toggle (anywidget copies it,
    ipywidgets walks it for buffers, the message is JSON, the kernel's echo is compared
    element by element); one buffer is copied whole (``widgets/src/graph.js``:
    ``openIds``). In the order given, so the kernel's check for an unchanged value
    (``Widget._should_send_property``) sees the bytes the page sent.
    """
    del widget  # the traitlets serializer signature
    ids = array("i", value)
    if sys.byteorder == "big":
        ids.byteswap()
    return memoryview(ids.tobytes())


def _ids_of(value: Any, widget: Any = None) -> list[int]:
    """``expanded`` from the page (``from_json``): a buffer of int32, or a list (a widget
    state saved in a notebook before the buffer form)."""
    del widget
    if not isinstance(value, bytes | bytearray | memoryview):
        return [int(v) for v in value]
    raw = bytes(value)
    if len(raw) % 4:
        raise ValueError(
            f"GraphView.expanded: {len(raw)} bytes is not a whole number of int32 node ids; "
            "the page sends 4 bytes a call (widgets/src/graph.js packedIds)"
        )
    ids = array("i")
    ids.frombytes(raw)
    if sys.byteorder == "big":
        ids.byteswap()
    return ids.tolist()


#: Above this many modules the picture's text/plain leaves out the summary table.
SUMMARY_MAX_MODULES = 2000


class GraphView(TraceWidget):
    """Interactive layered graph of a Trace: modules as groups that expand on click.

    Nested module calls are frames you open and close (``+`` / ``-``), repeated blocks
    are rolled into one box with an ``x N`` badge, boxes are coloured by the chosen
    metric, hovering shows path, type, shapes and figures, clicking selects. Search,
    zoom, pan, fit and SVG/PNG export are in the toolbar. Given a compile comparison's
    graph breaks, the modules where the graph broke carry a badge (a collapsed call
    counts the breaks inside it) and the tooltip gives each reason and source line.

    Args:
        trace: The trace to show.
        metric: Colour by one of ``"fwd_time"``, ``"bwd_time"``, ``"flops"``, ``"params"``,
            ``"activations"``.
        depth: Module calls above this depth start expanded (the root is depth 0); leaf
            modules (ops only inside) and library layers (PyG convs, attention classes:
            ``_payload.library_layers``, a structural rule) start collapsed.
        expanded: Ids of the module calls to start expanded, instead of ``depth``'s.
        rolled: Roll repeated blocks into one box.
        height: Height of the view in pixels.
        throttle: Minimum seconds between two :meth:`update` deliveries.
        breaks: Graph breaks to mark (see :meth:`mark_breaks`): a ``labkit.compare``
            result with a compile recipe, one of its rows, or a list of break dicts.

    Returns:
        A widget; ``view.selected`` is the module path of the clicked node.

    Example:
        >>> view = GraphView(labkit.trace(model, x), metric="flops")  # doctest: +SKIP
        >>> view                                                        # doctest: +SKIP
        >>> view.selected                                               # doctest: +SKIP
        'blocks.0.conv1'
        >>> cmp = labkit.compare(model, x, Recipe(compile="default"))  # doctest: +SKIP
        >>> labkit.trace(model, x).show(breaks=cmp)                     # doctest: +SKIP
    """

    _bundle = "graph"
    _picture_scale = 2  # the picture is drawn at 2x (``_graph_picture.SCALE``)

    #: Sent as one buffer of JSON (``packed_json``): cheap at 100,000 nodes.
    graph = t.Dict().tag(sync=True, to_json=packed_json)
    metrics = t.Dict().tag(sync=True, to_json=packed_json)
    metric = t.Enum(list(METRICS), default_value="fwd_time").tag(sync=True)
    depth = t.Int(DEFAULT_DEPTH).tag(sync=True)
    #: Sent as one buffer of int32 (``_packed_ids``); a list of ints here, as ever. A toggle
    #: from the page is not echoed back (ipywidgets echoes every synced change by default:
    #: 170 KB back to the page per toggle at 100,000 nodes); a change made here is sent.
    expanded = t.List(t.Int()).tag(
        sync=True, to_json=_packed_ids, from_json=_ids_of, echo_update=False
    )
    selected = t.Unicode(None, allow_none=True).tag(sync=True)
    selected_node = t.Int(-1).tag(sync=True)
    height = t.Int(560).tag(sync=True)
    #: Graph-break marks: ``{trace node id (as text): [one line per break]}``.
    marks = t.Dict().tag(sync=True)
    #: Roll repeated blocks into one ``x N`` box (the toolbar's Unroll all / Roll).
    rolled = t.Bool(True).tag(sync=True)
    #: Names of rolled blocks drawn call by call (``"blocks.0-5"``; the breadcrumb's Unroll).
    unrolled = t.List(t.Unicode()).tag(sync=True)
    #: One call's figures per entry of ``graph["instances"]`` (the breadcrumb's instance).
    instance_metrics = t.Dict().tag(sync=True)

    def __init__(
        self,
        trace: Trace,
        *,
        metric: str = "fwd_time",
        depth: int = DEFAULT_DEPTH,
        expanded: Iterable[int] | None = None,
        rolled: bool = True,
        height: int = 560,
        throttle: float = 0.25,
        breaks: Any = None,
    ) -> None:
        self._breaks = [] if breaks is None else break_dicts(breaks)
        self._depth = depth
        self._first_expanded = None if expanded is None else sorted(expanded)
        super().__init__(
            trace, throttle=throttle, metric=metric, depth=depth, height=height, rolled=rolled
        )
        self._ready = True

    @property
    def _rolled(self) -> bool:
        return bool(self.rolled)

    def _state(self, trace: Trace, settings: dict[str, Any]) -> dict[str, Any]:
        depth = settings.get("depth", self._depth)
        rolled = settings.get("rolled", self.rolled)
        unrolled = settings.get("unrolled", self.unrolled)
        graph, metrics, expanded = graph_state(trace, rolled=rolled, depth=depth, unrolled=unrolled)
        marks = self._marks_of(trace, rolled, unrolled)
        figures = instance_metrics(trace, graph)
        if graph["key"] == self.graph.get("key"):  # same structure: no new layout
            return {"metrics": metrics, "marks": marks, "instance_metrics": figures}
        if self._first_expanded is not None:  # the caller's choice, once
            expanded, self._first_expanded = self._first_expanded, None
        elif self.graph.get("ids"):  # a re-roll: keep what is open, by module path
            expanded = self._same_opened(trace, graph, expanded)
        return {
            "graph": graph,
            "metrics": metrics,
            "expanded": expanded,
            "marks": marks,
            "instance_metrics": figures,
        }

    def _same_opened(self, trace: Trace, graph: GraphPayload, default: list[int]) -> list[int]:
        """The calls open before a re-roll, found by path in the new drawing, plus defaults."""
        ids = set(graph["ids"])
        names = {trace.nodes[i].name for i in self.expanded if i < len(trace.nodes)}
        kept = {n.id for n in trace.nodes if n.kind == "module" and n.name in names}
        return sorted((kept | set(default)) & ids)

    @t.observe("rolled", "unrolled")
    def _rolling_changed(self, change: dict[str, Any]) -> None:
        if getattr(self, "_ready", False) and change["old"] != change["new"]:
            with self.hold_sync():
                for name, value in self._state(self._trace, {}).items():
                    setattr(self, name, value)

    def _marks_of(
        self, trace: Trace, rolled: bool | None = None, unrolled: list[str] | None = None
    ) -> GraphMarks:
        rolled = self._rolled if rolled is None else rolled
        unrolled = self.unrolled if unrolled is None else unrolled
        if not (rolled and unrolled):
            marks = break_marks(trace, self._breaks, rolled=rolled)
        else:  # some blocks drawn call by call: each call's marks onto what draws it now
            alias = canon_of(trace, rolled=True, unrolled=unrolled).alias
            marks = {}
            for nid, texts in break_marks(trace, self._breaks, rolled=False).items():
                shown = marks.setdefault(alias[nid], [])
                shown += [t for t in texts if t not in shown]
        return {str(nid): texts for nid, texts in sorted(marks.items())}

    def mark_breaks(self, breaks: Any) -> GraphView:
        """Mark the module calls where ``torch.compile``'s graph broke.

        Every call of each break's module gets a badge; a collapsed call shows how many
        breaks are inside it, and the tooltip gives each reason and source line. A break
        whose module has no call in this view's trace is not marked: a warning names it.

        Args:
            breaks: A ``labkit.compare`` result with a compile recipe (every compiled
                row's breaks), one :class:`~labkit.optimize.RecipeResult`, or a list of
                break dicts (``reason``, ``module``, ``module_type``, ``source``,
                ``count``); ``[]`` clears the marks.

        Returns:
            The view, so ``GraphView(trace).mark_breaks(cmp)`` shows it.

        Raises:
            ValueError: A comparison or row without a compiled recipe.
        """
        self._breaks = break_dicts(breaks)
        self.marks = self._marks_of(self._trace)
        return self

    def _apply(self, trace: Trace) -> None:
        self._depth = self.depth
        super()._apply(trace)

    @t.observe("depth")
    def _depth_changed(self, change: dict[str, Any]) -> None:
        if getattr(self, "_ready", False) and change["old"] != change["new"]:
            canon = canon_of(self._trace, rolled=self._rolled, unrolled=self.unrolled)
            self.expanded = opened_at(self._trace, change["new"], canon)

    def visible(self) -> VisibleGraph:
        """What the view draws now (the same rules the browser applies)."""
        key = (self._trace, tuple(self.expanded), self._rolled, tuple(self.unrolled))
        last = getattr(self, "_visible_last", None)  # the repr asks twice per display
        if last is not None and last[0][0] is key[0] and last[0][1:] == key[1:]:
            return last[1]
        canon = canon_of(self._trace, rolled=self._rolled, unrolled=self.unrolled)
        shown = visible_graph(self._trace, expanded=self.expanded, canon=canon)
        self._visible_last = (key, shown)
        return shown

    def to_png(self) -> bytes:
        """The graph as drawn now (expanded calls, metric colours) as a PNG."""
        from labkit.views._static import graph_png

        return graph_png(
            self._trace,
            expanded=self.expanded,
            metric=self.metric,
            rolled=self._rolled,
            marks={int(k): v for k, v in self.marks.items()},
            unrolled=self.unrolled,
        )

    def _fallback(self) -> dict[str, str]:
        """The graph as drawn now as ``image/png`` (no SVG: a graph's can be large), and
        the view's repr with the trace's summary as ``text/plain``."""
        from labkit.views._keep import picture_bundle

        modules = len(self._trace.modules)
        if modules <= SUMMARY_MAX_MODULES:
            summary = self._trace.summary(depth=DEFAULT_DEPTH)
        else:  # the table would take seconds and fill the notebook with its lines
            summary = (
                f"{modules:,} modules: trace.summary() prints their table "
                f"(left out here above {SUMMARY_MAX_MODULES:,} modules)"
            )
        return picture_bundle(self.to_png(), f"{self!r}\n\n{summary}")

    def __repr__(self) -> str:
        g = self.visible()
        sel = f", selected={self.selected!r}" if self.selected is not None else ""
        marked = f", marked={len(self.marks)}" if self.marks else ""
        return (
            f"GraphView(model={self._trace.meta.model}, nodes={len(self._trace.nodes)}, "
            f"boxes={len(g.boxes)}, groups={len(g.groups)}, metric={self.metric!r}{sel}{marked})"
        )
