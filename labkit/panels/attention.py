"""AttentionView: a node's k-hop neighbourhood drawn with the GAT attention on every edge."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any

import anywidget
import traitlets as t

from labkit.views import MONO, KeepsPicture, bundle_path

if TYPE_CHECKING:
    from matplotlib.figure import Figure
    from torch import nn
    from torch_geometric.data import Data

    from labkit.gnn.attention import AttentionMap

#: Node colours by class (``PALETTE`` in widgets/src/attention.js).
PALETTE = [
    "#4e79a7",
    "#f28e2b",
    "#59a14f",
    "#e15759",
    "#b07aa1",
    "#76b7b2",
    "#edc948",
    "#ff9da7",
    "#9c755f",
    "#bab0ac",
]


class AttentionView(KeepsPicture, anywidget.AnyWidget):
    """Pick a node; its k-hop incoming neighbourhood is drawn with edge width and colour
    from the attention weights, per head or averaged over heads.

    The picked node sits in the centre, hop-1 neighbours on the first ring, hop-2 on the
    second. An edge ``h`` hops out carries the coefficients of the layer that consumes it
    (the last layer for the node's own in-edges). Click any drawn node to pick it; the
    toolbar picks the head (or the mean) and the number of hops. The weights come from
    :func:`labkit.gnn.attention_map`, computed once when the view is made; picking a node
    only re-reads them.

    Args:
        model: A :class:`~labkit.gnn.GAT` or :class:`~labkit.gnn.GATv2`.
        data: The graph (``x``, ``edge_index``, optionally ``y`` to colour nodes by class).
        node: The node shown first.
        hops: Hops drawn (1 to the number of layers).
        head: Head whose weights are drawn, or ``-1`` for the mean over heads.
        height: Height in pixels.

    Returns:
        A widget; ``view.node`` is the picked node and ``view.view`` the drawn data.

    Example:
        >>> from labkit.gnn import GAT, karate
        >>> data = karate()
        >>> AttentionView(GAT(data.num_features, 4, 4, heads=2), data, node=0)
        AttentionView(model=GAT, node=0, hops=2, head='mean', nodes=34)
    """

    view = t.Dict().tag(sync=True)
    node = t.Int(0).tag(sync=True)
    hops = t.Int(2).tag(sync=True)
    head = t.Int(-1).tag(sync=True)
    num_nodes = t.Int(0).tag(sync=True)
    max_hops = t.Int(1).tag(sync=True)
    height = t.Int(480).tag(sync=True)

    @property
    def _esm(self) -> str:  # read by AnyWidget.__init__
        return bundle_path("attention").read_text()

    def __init__(
        self,
        model: nn.Module,
        data: Data,
        *,
        node: int = 0,
        hops: int = 2,
        head: int = -1,
        height: int = 480,
    ) -> None:
        from labkit.gnn.attention import attention_map

        amap = attention_map(model, data)
        self._amap = amap
        hops = min(hops, amap.num_layers)
        self._check(node, hops, head, amap)
        super().__init__(
            num_nodes=amap.num_nodes,
            max_hops=amap.num_layers,
            node=node,
            hops=hops,
            head=head,
            height=height,
        )
        self._refresh()
        self.observe(self._on_change, names=["node", "hops"])

    @staticmethod
    def _check(node: int, hops: int, head: int, amap: AttentionMap) -> None:
        if not 0 <= node < amap.num_nodes:
            raise ValueError(f"AttentionView: node must be in [0, {amap.num_nodes}), got {node}")
        if not 1 <= hops <= amap.num_layers:
            raise ValueError(f"AttentionView: hops must be in [1, {amap.num_layers}], got {hops}")
        if head != -1 and not 0 <= head < min(amap.heads):
            raise ValueError(
                f"AttentionView: head must be -1 (mean) or in [0, {min(amap.heads)}), got {head}"
            )

    @property
    def attention(self) -> AttentionMap:
        """The :class:`~labkit.gnn.attention.AttentionMap` behind the view."""
        return self._amap

    def _refresh(self) -> None:
        from labkit.gnn.attention import node_attention

        self.view = node_attention(self._amap, self.node, hops=self.hops).to_dict()

    def _on_change(self, change: dict[str, Any]) -> None:
        try:
            self._check(self.node, self.hops, self.head, self._amap)
        except ValueError:
            with self.hold_trait_notifications():
                setattr(self, change["name"], change["old"])
            raise
        self._refresh()

    def head_sums(self) -> list[float]:
        """Per head, the sum of the drawn weights on the picked node's incoming edges."""
        sums = [0.0] * (self.view["heads"][0] if self.view["heads"] else 0)
        for e in self.view["edges"]:
            if e["hop"] == 1:
                for h, w in enumerate(e["weights"]):
                    sums[h] += w
        return sums

    def to_png(self) -> bytes:
        """The drawn neighbourhood as a PNG (matplotlib), as the browser lays it out."""
        import io

        from matplotlib.backends.backend_agg import FigureCanvasAgg

        fig = self.to_figure()
        FigureCanvasAgg(fig)
        buf = io.BytesIO()
        fig.savefig(buf, format="png", bbox_inches="tight")
        return buf.getvalue()

    def to_figure(self) -> Figure:
        """The figure of :meth:`to_png`: node ids legible (8 pt), a legend of the node
        classes and the edge colour scale."""
        import math

        from matplotlib.colors import LinearSegmentedColormap
        from matplotlib.figure import Figure
        from matplotlib.lines import Line2D

        v = self.view
        pos = ring_layout(v)
        weights = [e["mean"] if self.head < 0 else e["weights"][self.head] for e in v["edges"]]
        top = max(weights, default=1.0) or 1.0
        fig = Figure(figsize=(6, 6), dpi=100)
        ax = fig.add_subplot()
        ax.set_axis_off()
        ax.set_aspect("equal")
        for e, w in sorted(zip(v["edges"], weights, strict=True), key=lambda p: -p[0]["hop"]):
            rel = w / top
            color = (1 - 0.14 * rel, 0.92 - 0.78 * rel, 0.86 - 0.74 * rel)
            (x0, y0), (x1, y1) = pos[e["src"]], pos[e["dst"]]
            if e["src"] != e["dst"]:
                ax.plot(
                    [x0, x1],
                    [y0, y1],
                    color=color,
                    lw=0.4 + 3 * rel,
                    zorder=1,
                    alpha=1.0 if e["hop"] == 1 else 0.55,
                )
        from labkit.views import ink_on

        classes: set[int] = set()
        for i, n in enumerate(v["nodes"]):
            x, y = pos[n]
            label = v["labels"][i] if v["labels"] else None
            fill = "#999999" if label is None else PALETTE[label % len(PALETTE)]
            if label is not None:
                classes.add(label)
            size = 420 if n == v["node"] else 240
            ax.scatter(
                [x],
                [y],
                s=size,
                color=fill,
                edgecolors="#222" if n == v["node"] else "white",
                zorder=2,
            )
            r, g, b = (int(fill[k : k + 2], 16) / 255 for k in (1, 3, 5))
            ax.text(
                x,
                y,
                str(n),
                ha="center",
                va="center",
                fontsize=8,
                zorder=3,
                color=ink_on((r, g, b)),
            )
        head = "mean over heads" if self.head < 0 else f"head {self.head}"
        ax.set_title(f"{self._amap.model}: attention into node {v['node']} ({head})", fontsize=9)
        lim = max((math.hypot(x, y) for x, y in pos.values()), default=1.0) + 0.6
        ax.set_xlim(-lim, lim)
        ax.set_ylim(-lim, lim)
        handles = [
            Line2D(
                [], [], ls="", marker="o", ms=8, color=PALETTE[c % len(PALETTE)], label=f"class {c}"
            )
            for c in sorted(classes)
        ]
        if handles:
            ax.legend(
                handles=handles,
                title="node class",
                fontsize=7,
                title_fontsize=7,
                loc="upper left",
                bbox_to_anchor=(1.0, 1.0),
                frameon=False,
            )
        ends = [(1.0, 0.92, 0.86), (0.86, 0.14, 0.12)]  # the edges' light-to-dark scale above
        cmap = LinearSegmentedColormap.from_list("attention", ends)
        from matplotlib.cm import ScalarMappable
        from matplotlib.colors import Normalize

        bar = fig.colorbar(
            ScalarMappable(Normalize(0, top), cmap),
            ax=ax,
            orientation="horizontal",
            fraction=0.04,
            pad=0.02,
            shrink=0.6,
        )
        bar.set_label("edge attention weight (width and colour)", fontsize=7)
        bar.ax.tick_params(labelsize=7)
        return fig

    def to_html(self) -> str:
        """The picture and the picked node's incoming weights as static HTML (for exports)."""
        from labkit.views import png_img

        v = self.view
        heads = v["heads"][0] if v["heads"] else 0
        head_cells = "".join(f"<th>head {h}</th>" for h in range(heads))
        rows = []
        for e in sorted((e for e in v["edges"] if e["hop"] == 1), key=lambda e: -e["mean"]):
            cells = "".join(f"<td>{w:.3f}</td>" for w in e["weights"])
            rows.append(f"<tr><td>{e['src']}</td>{cells}<td>{e['mean']:.3f}</td></tr>")
        title = html.escape(f"Attention into node {v['node']} ({self._amap.model})")
        style = html.escape(MONO, quote=True)  # MONO's font names are single-quoted
        return (
            f"<div>{png_img(self.to_png(), alt=title)}<br/>"
            f'<b>{title}</b><table style="{style}"><tr><th>from</th>{head_cells}<th>mean</th></tr>'
            + "".join(rows)
            + "</table></div>"
        )

    def weights_text(self) -> str:
        """The picked node's incoming weights (per head and mean) as a text table."""
        from labkit.views import text_table

        v = self.view
        heads = v["heads"][0] if v["heads"] else 0
        incoming = sorted((e for e in v["edges"] if e["hop"] == 1), key=lambda e: -e["mean"])
        rows = [
            (e["src"], *(f"{w:.3f}" for w in e["weights"]), f"{e['mean']:.3f}") for e in incoming
        ]
        head = ("from", *(f"head {h}" for h in range(heads)), "mean")
        return f"Attention into node {v['node']} ({self._amap.model})\n{text_table(head, rows)}"

    def _picture(self) -> dict[str, str]:
        from labkit.views import figure_bundle

        return figure_bundle(self.to_figure(), f"{self!r}\n\n{self.weights_text()}")

    def __repr__(self) -> str:
        head = "mean" if self.head == -1 else self.head
        return (
            f"AttentionView(model={self._amap.model}, node={self.node}, hops={self.hops}, "
            f"head={head!r}, nodes={self.num_nodes})"
        )


def ring_layout(view: dict[str, Any]) -> dict[int, tuple[float, float]]:
    """Positions of a view's nodes: the picked node at 0, hop k on the circle of radius k.

    Nodes of a ring are spread evenly, ordered by the angle of the node they send to (the
    browser uses the same rule, ``layout`` in ``widgets/src/attention.js``).

    Args:
        view: A :meth:`~labkit.gnn.attention.NodeAttention.to_dict` payload.

    Returns:
        ``{node: (x, y)}``.

    Example:
        >>> ring_layout({"node": 0, "edges": [{"src": 1, "dst": 0, "hop": 1}]})
        {0: (0.0, 0.0), 1: (0.0, -1.0)}
    """
    import math

    hop = {view["node"]: 0}
    for e in view["edges"]:
        hop.setdefault(e["src"], e["hop"])
    angle = {view["node"]: 0.0}
    pos = {view["node"]: (0.0, 0.0)}
    for k in range(1, max(hop.values()) + 1):
        ring: list[tuple[float, int]] = []
        seen: set[int] = set()
        for e in view["edges"]:
            if e["hop"] == k and hop[e["src"]] == k and e["src"] not in seen:
                seen.add(e["src"])
                ring.append((angle.get(e["dst"], 0.0), e["src"]))
        ring.sort(key=lambda p: p[0])
        for i, (_, n) in enumerate(ring):
            a = 2 * math.pi * i / max(len(ring), 1) + (ring[0][0] if k > 1 else -math.pi / 2)
            angle[n] = a
            pos[n] = (round(k * math.cos(a), 12) + 0.0, round(k * math.sin(a), 12) + 0.0)
    return pos
