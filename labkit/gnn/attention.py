"""Attention weights of a GAT model as plain data, and the k-hop view of one node.

:func:`attention_map` runs the model once (eval mode, ``return_attention_weights``) and
keeps every layer's coefficients as lists of numbers. :func:`node_attention` picks a node
and returns its k-hop incoming neighbourhood: the edge that carries a message ``h`` hops
away from the node is weighted with the layer that consumes it (the last layer for the
node's own in-edges, the one before for their in-edges, ...). Both are pure data; the
:class:`~labkit.panels.AttentionView` widget only draws them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from torch import nn

if TYPE_CHECKING:
    from torch_geometric.data import Data


@dataclass(frozen=True)
class AttentionMap:
    """Every layer's attention coefficients over a whole graph (plain data).

    Args:
        num_nodes: Nodes of the graph.
        src: Per layer, the source node of each attended edge (self loops included).
        dst: Per layer, the target node of each attended edge.
        weights: Per layer, ``[num_edges][heads]`` coefficients; per target node and
            head they sum to 1 over the target's incoming edges.
        labels: Class label of each node, or ``None``.
        model: The model's class name.

    Returns:
        A frozen dataclass; :func:`node_attention` reads it.

    Example:
        >>> from labkit.gnn import GAT, karate
        >>> data = karate()
        >>> amap = attention_map(GAT(data.num_features, 4, 4, heads=2), data)
        >>> amap.num_layers, amap.heads
        (2, [2, 1])
    """

    num_nodes: int
    src: list[list[int]]
    dst: list[list[int]]
    weights: list[list[list[float]]]
    labels: list[int] | None = None
    model: str = ""
    _incoming: dict[int, dict[int, list[int]]] = field(
        default_factory=dict, repr=False, compare=False
    )

    @property
    def num_layers(self) -> int:
        """Number of attention layers."""
        return len(self.weights)

    @property
    def heads(self) -> list[int]:
        """Attention heads of each layer."""
        return [len(w[0]) if w else 0 for w in self.weights]

    def incoming(self, layer: int) -> dict[int, list[int]]:
        """Edge ids of each node's incoming edges at ``layer`` (built once, cached)."""
        layer = range(self.num_layers)[layer]
        if layer not in self._incoming:
            index: dict[int, list[int]] = {}
            for e, d in enumerate(self.dst[layer]):
                index.setdefault(d, []).append(e)
            self._incoming[layer] = index
        return self._incoming[layer]

    def __repr__(self) -> str:
        edges = len(self.src[0]) if self.src else 0
        return (
            f"AttentionMap(model={self.model!r}, num_nodes={self.num_nodes}, "
            f"layers={self.num_layers}, heads={self.heads}, edges={edges})"
        )


def attention_map(model: nn.Module, data: Data) -> AttentionMap:
    """Run ``model`` once on ``data`` and collect every layer's attention coefficients.

    Args:
        model: A :class:`~labkit.gnn.GAT` / :class:`~labkit.gnn.GATv2` (anything with an
            ``attention_weights(x, edge_index)`` method returning ``(edge_index, alpha)``
            per layer).
        data: The graph (``x``, ``edge_index``, optionally ``y``).

    Returns:
        An :class:`AttentionMap`.

    Example:
        >>> from labkit.gnn import GAT, karate
        >>> data = karate()
        >>> amap = attention_map(GAT(data.num_features, 4, 4, heads=2), data)
        >>> amap.heads
        [2, 1]
    """
    if not hasattr(model, "attention_weights"):
        raise TypeError(
            f"attention_map: {type(model).__name__} has no attention_weights(x, "
            f"edge_index) method; use labkit.gnn.GAT or GATv2"
        )
    # hasattr checked above; nn.Module.__getattr__ is typed as returning a Tensor or Module
    layers = model.attention_weights(data.x, data.edge_index)  # type: ignore[operator]
    y = getattr(data, "y", None)
    return AttentionMap(
        num_nodes=int(data.num_nodes),
        src=[ei[0].tolist() for ei, _ in layers],
        dst=[ei[1].tolist() for ei, _ in layers],
        weights=[alpha.reshape(alpha.size(0), -1).tolist() for _, alpha in layers],
        labels=y.tolist() if y is not None and y.dim() == 1 else None,
        model=type(model).__name__,
    )


@dataclass(frozen=True)
class NodeAttention:
    """The k-hop incoming neighbourhood of one node with attention weights (plain data).

    Args:
        node: The picked node.
        hops: Hops drawn.
        nodes: Nodes in the neighbourhood (the picked node first).
        labels: Their class labels (``None`` when the graph has none).
        edges: One dict per edge: ``src``, ``dst``, ``hop`` (1 = into the node),
            ``layer`` (whose coefficients these are), ``weights`` (one per head) and
            ``mean`` (their average).
        heads: Heads of the layers used, per hop.

    Returns:
        A frozen dataclass; :meth:`to_dict` gives the widget payload.

    Example:
        >>> from labkit.gnn import GAT, karate
        >>> data = karate()
        >>> amap = attention_map(GAT(data.num_features, 4, 4, heads=2), data)
        >>> view = node_attention(amap, 0, hops=2)
        >>> [round(s, 6) for s in view.head_sums()]
        [1.0]
    """

    node: int
    hops: int
    nodes: list[int]
    labels: list[int] | None
    edges: list[dict[str, Any]]
    heads: list[int]

    def head_sums(self) -> list[float]:
        """Per head, the sum of the weights on the node's own incoming edges (hop 1)."""
        sums = [0.0] * (self.heads[0] if self.heads else 0)
        for e in self.edges:
            if e["hop"] == 1:
                for h, w in enumerate(e["weights"]):
                    sums[h] += w
        return sums

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready payload for the widget."""
        return {
            "node": self.node,
            "hops": self.hops,
            "nodes": list(self.nodes),
            "labels": None if self.labels is None else list(self.labels),
            "edges": [dict(e) for e in self.edges],
            "heads": list(self.heads),
        }

    def __repr__(self) -> str:
        return (
            f"NodeAttention(node={self.node}, hops={self.hops}, nodes={len(self.nodes)}, "
            f"edges={len(self.edges)}, heads={self.heads})"
        )


def node_attention(amap: AttentionMap, node: int, *, hops: int = 2) -> NodeAttention:
    """The ``hops``-hop incoming neighbourhood of ``node``, weighted layer by layer.

    Args:
        amap: Attention of the whole graph, from :func:`attention_map`.
        node: The node to look at.
        hops: How many hops to draw (1 to the number of layers).

    Returns:
        A :class:`NodeAttention`; for every head the weights of its hop-1 edges sum to 1.

    Example:
        >>> from labkit.gnn import GAT, karate
        >>> data = karate()
        >>> amap = attention_map(GAT(data.num_features, 4, 4, heads=2, out_heads=2), data)
        >>> [round(s, 6) for s in node_attention(amap, 0, hops=1).head_sums()]
        [1.0, 1.0]
    """
    if not isinstance(node, int) or isinstance(node, bool) or not 0 <= node < amap.num_nodes:
        raise ValueError(
            f"node_attention: node must be an int in [0, {amap.num_nodes}), got {node!r}"
        )
    if not isinstance(hops, int) or not 1 <= hops <= amap.num_layers:
        raise ValueError(
            f"node_attention: hops must be in [1, {amap.num_layers}] (the model "
            f"has {amap.num_layers} attention layers), got {hops!r}"
        )
    order = [node]
    seen = {node}
    frontier = [node]
    edges: list[dict[str, Any]] = []
    heads: list[int] = []
    for hop in range(1, hops + 1):
        layer = amap.num_layers - hop
        heads.append(amap.heads[layer])
        incoming = amap.incoming(layer)
        src, dst, weights = amap.src[layer], amap.dst[layer], amap.weights[layer]
        nxt: list[int] = []
        for target in frontier:
            for e in incoming.get(target, []):
                w = weights[e]
                s = src[e]
                edges.append(
                    {
                        "src": s,
                        "dst": dst[e],
                        "hop": hop,
                        "layer": layer,
                        "weights": w,
                        "mean": sum(w) / len(w),
                    }
                )
                if s not in seen:
                    seen.add(s)
                    order.append(s)
                    nxt.append(s)
        frontier = nxt
    labels = None if amap.labels is None else [amap.labels[n] for n in order]
    return NodeAttention(node=node, hops=hops, nodes=order, labels=labels, edges=edges, heads=heads)
