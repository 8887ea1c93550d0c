"""GAT and GATv2 node-classification models over PyTorch Geometric's attention layers."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn
from torch.nn import functional as F


def _check_edges(model: str, edge_index: object) -> None:
    """The shape of a dense ``edge_index`` (metadata only: no device sync)."""
    if not isinstance(edge_index, Tensor) or edge_index.layout != torch.strided:
        return  # a SparseTensor / adjacency: PyG checks those itself
    from labkit.gnn.validate import GraphDataError

    shape = tuple(edge_index.shape)
    if edge_index.dim() != 2 or shape[0] != 2:
        hint = " (an [E, 2] list of pairs? pass edge_index.t())" if shape[-1:] == (2,) else ""
        raise GraphDataError(
            f"{model}(x, edge_index): edge_index must have shape [2, E] "
            f"(source row, target row), got {list(shape)}{hint}"
        )


def _conv_class(v2: bool) -> type[nn.Module]:
    from torch_geometric.nn import GATConv, GATv2Conv

    return GATv2Conv if v2 else GATConv


class GAT(nn.Module):
    r"""A stack of graph attention layers (PyG's ``GATConv``) for node classification.

    Hidden layers use ``heads`` attention heads (concatenated, or averaged when
    ``concat=False``) followed by ELU and dropout; the last layer uses ``out_heads``
    heads, averaged, and returns one logit per class for every node.

    Args:
        in_channels: Features per node.
        hidden_channels: Features per head in each hidden layer.
        out_channels: Number of classes.
        num_layers: Attention layers in total (at least 1).
        heads: Attention heads of each hidden layer.
        out_heads: Attention heads of the output layer (always averaged).
        dropout: Dropout on the input features, hidden features and attention
            coefficients (as in the GAT paper).
        residual: Add a residual (skip) projection inside every layer (PyG's ``residual``).
        concat: Concatenate the hidden heads (``True``) or average them.
        add_self_loops: Let every node attend to itself.
        negative_slope: LeakyReLU slope of the attention scores.
        edge_dim: Edge-feature size when edges carry features, else ``None``.

    Returns:
        Calling the model with ``(x, edge_index)`` returns logits ``[num_nodes, out_channels]``.

    Example:
        >>> from labkit.gnn import GAT, karate
        >>> data = karate()
        >>> model = GAT(data.num_features, 8, 4, heads=4)
        >>> model(data.x, data.edge_index).shape
        torch.Size([34, 4])
    """

    v2: bool = False

    def __init__(
        self,
        in_channels: int,
        hidden_channels: int,
        out_channels: int,
        *,
        num_layers: int = 2,
        heads: int = 8,
        out_heads: int = 1,
        dropout: float = 0.6,
        residual: bool = False,
        concat: bool = True,
        add_self_loops: bool = True,
        negative_slope: float = 0.2,
        edge_dim: int | None = None,
    ) -> None:
        super().__init__()
        for name, value in (
            ("in_channels", in_channels),
            ("hidden_channels", hidden_channels),
            ("out_channels", out_channels),
            ("num_layers", num_layers),
            ("heads", heads),
            ("out_heads", out_heads),
        ):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(
                    f"{type(self).__name__}: {name} must be a positive int, got {value!r}"
                )
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"{type(self).__name__}: dropout must be in [0, 1), got {dropout!r}")
        self.config: dict[str, Any] = {
            "in_channels": in_channels,
            "hidden_channels": hidden_channels,
            "out_channels": out_channels,
            "num_layers": num_layers,
            "heads": heads,
            "out_heads": out_heads,
            "dropout": dropout,
            "residual": residual,
            "concat": concat,
            "add_self_loops": add_self_loops,
            "negative_slope": negative_slope,
            "edge_dim": edge_dim,
        }
        self.dropout = dropout
        conv = _conv_class(self.v2)
        common = {
            "dropout": dropout,
            "residual": residual,
            "add_self_loops": add_self_loops,
            "negative_slope": negative_slope,
            "edge_dim": edge_dim,
        }
        self.convs = nn.ModuleList()
        width = in_channels
        for _ in range(num_layers - 1):
            self.convs.append(conv(width, hidden_channels, heads=heads, concat=concat, **common))
            width = hidden_channels * heads if concat else hidden_channels
        self.convs.append(conv(width, out_channels, heads=out_heads, concat=False, **common))

    def forward(self, x: Tensor, edge_index: Tensor, edge_attr: Tensor | None = None) -> Tensor:
        """Logits for every node.

        Args:
            x: Node features ``[num_nodes, in_channels]``.
            edge_index: Edges ``[2, num_edges]`` (source row, target row), int64.
            edge_attr: Edge features ``[num_edges, edge_dim]`` when ``edge_dim`` is set.

        Returns:
            Logits ``[num_nodes, out_channels]``.
        """
        _check_edges(type(self).__name__, edge_index)
        for i, conv in enumerate(self.convs):
            x = F.dropout(x, p=self.dropout, training=self.training)
            x = conv(x, edge_index, edge_attr=edge_attr)
            if i < len(self.convs) - 1:
                x = F.elu(x)
        return x

    @torch.no_grad()
    def attention_weights(
        self, x: Tensor, edge_index: Tensor, edge_attr: Tensor | None = None
    ) -> list[tuple[Tensor, Tensor]]:
        """Attention coefficients of every layer, computed in eval mode.

        Args:
            x: Node features.
            edge_index: Edges ``[2, num_edges]``.
            edge_attr: Edge features when ``edge_dim`` is set.

        Returns:
            One ``(edge_index, alpha)`` pair per layer: the edges the layer attended over
            (self loops included when ``add_self_loops``) and ``alpha`` of shape
            ``[num_edges', heads]``; for every target node and head the weights over its
            incoming edges sum to 1.
        """
        _check_edges(type(self).__name__, edge_index)
        was_training = self.training
        self.eval()
        try:
            out: list[tuple[Tensor, Tensor]] = []
            for i, conv in enumerate(self.convs):
                x, (ei, alpha) = conv(
                    x, edge_index, edge_attr=edge_attr, return_attention_weights=True
                )
                out.append((ei, alpha))
                if i < len(self.convs) - 1:
                    x = F.elu(x)
            return out
        finally:
            self.train(was_training)

    def __repr__(self) -> str:
        defaults = _DEFAULTS
        extra = ", ".join(
            f"{k}={v!r}" for k, v in self.config.items() if k in defaults and defaults[k] != v
        )
        c = self.config
        head = f"{c['in_channels']}, {c['hidden_channels']}, {c['out_channels']}"
        return f"{type(self).__name__}({head}{', ' + extra if extra else ''})"


_DEFAULTS: dict[str, Any] = {
    "num_layers": 2,
    "heads": 8,
    "out_heads": 1,
    "dropout": 0.6,
    "residual": False,
    "concat": True,
    "add_self_loops": True,
    "negative_slope": 0.2,
    "edge_dim": None,
}


class GATv2(GAT):
    r"""GAT with PyG's ``GATv2Conv`` ("How Attentive are Graph Attention Networks?").

    Same arguments and outputs as :class:`GAT`; the attention score is computed after
    the non-linearity, so its ranking of neighbours can depend on the query node.

    Args:
        *args: As :class:`GAT`.
        **kwargs: As :class:`GAT`.

    Returns:
        Logits ``[num_nodes, out_channels]`` when called with ``(x, edge_index)``.

    Example:
        >>> from labkit.gnn import GATv2, sbm
        >>> data = sbm(200, 4, seed=0)
        >>> GATv2(data.num_features, 8, 4, heads=2, residual=True)
        GATv2(16, 8, 4, heads=2, residual=True)
    """

    v2 = True
