"""Neighbour sampling in plain PyTorch, for PyG's ``NeighborLoader`` without pyg-lib.

PyG's ``NeighborSampler`` calls compiled routines from ``pyg-lib`` or ``torch-sparse``
and raises ``ImportError`` when neither is installed (the case for the CPU wheels this
project uses). :class:`TorchNeighborSampler` is a drop-in subclass whose homogeneous
``_sample`` does the same directed sampling with tensor operations, so the real
``NeighborLoader`` (batching, filtering, ``batch_size``, ``n_id``) runs unchanged.
:func:`neighbor_loader` uses PyG's own sampler when a compiled backend is present.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

import torch
from torch import Tensor

if TYPE_CHECKING:
    from torch_geometric.data import Data
    from torch_geometric.loader import NeighborLoader
    from torch_geometric.sampler import SamplerOutput


def _sampler_base() -> type:
    from torch_geometric.sampler import NeighborSampler

    return NeighborSampler


def has_compiled_sampler() -> bool:
    """Whether ``pyg-lib`` or ``torch-sparse`` provides PyG's compiled neighbour sampling."""
    import torch_geometric.typing as t

    return bool(t.WITH_PYG_LIB or t.WITH_TORCH_SPARSE)


def sample_neighbors(
    colptr: Tensor, row: Tensor, seed: Tensor, num_neighbors: list[int], num_nodes: int
) -> tuple[Tensor, Tensor, Tensor, Tensor, list[int], list[int]]:
    """Directed k-hop neighbour sampling over a CSC graph, without replacement.

    Hop ``i`` draws up to ``num_neighbors[i]`` incoming edges (all when negative) of each
    node added in hop ``i - 1`` (the seeds for hop 0), uniformly, with ``torch.rand``
    (so ``torch.manual_seed`` makes it reproducible).

    Args:
        colptr: CSC pointers ``[num_nodes + 1]`` (incoming edges of node ``v`` are
            ``row[colptr[v]:colptr[v + 1]]``).
        row: Source node of each CSC edge.
        seed: Distinct seed nodes (global ids).
        num_neighbors: Edges to draw per node and hop.
        num_nodes: Nodes of the graph.

    Returns:
        ``(node, row, col, edge, num_sampled_nodes, num_sampled_edges)``: global ids of the
        sampled nodes (seeds first), local source and target of each sampled edge, its CSC
        position, and the counts per hop, as PyG's ``SamplerOutput`` expects.

    Example:
        >>> colptr, row = torch.tensor([0, 1, 2, 4]), torch.tensor([1, 2, 0, 1])
        >>> node, r, c, e, nn, ne = sample_neighbors(colptr, row, torch.tensor([2]), [-1], 3)
        >>> node.tolist(), r.tolist(), c.tolist()
        ([2, 0, 1], [1, 2], [0, 0])
    """
    seed = seed.long()
    local = torch.full((num_nodes,), -1, dtype=torch.long)
    local[seed] = torch.arange(seed.numel())
    nodes, rows, cols, edges = [seed], [], [], []
    n_nodes, n_edges = [seed.numel()], []
    frontier_g, frontier_l = seed, torch.arange(seed.numel())
    total = seed.numel()
    for k in num_neighbors:
        start = colptr[frontier_g]
        deg = colptr[frontier_g + 1] - start
        n = int(deg.sum())
        seg = torch.repeat_interleave(torch.arange(frontier_g.numel()), deg)
        first = torch.repeat_interleave(torch.cumsum(deg, 0) - deg, deg)
        rank = torch.arange(n) - first
        pos = torch.repeat_interleave(start, deg) + rank
        if k >= 0 and n and bool((deg > k).any()):
            # shuffle inside each node's segment (seg is sorted; rand < 1 keeps segments apart)
            order = torch.argsort(seg.double() + torch.rand(n, dtype=torch.double))
            keep = rank < k
            pos, seg = pos[order][keep], seg[keep]
        nbr = row[pos]
        fresh = nbr[local[nbr] < 0].unique()
        local[fresh] = torch.arange(total, total + fresh.numel())
        total += fresh.numel()
        rows.append(local[nbr])
        cols.append(frontier_l[seg])
        edges.append(pos)
        nodes.append(fresh)
        n_nodes.append(fresh.numel())
        n_edges.append(pos.numel())
        frontier_g, frontier_l = fresh, local[fresh]
    return (torch.cat(nodes), torch.cat(rows), torch.cat(cols), torch.cat(edges), n_nodes, n_edges)


class TorchNeighborSampler(_sampler_base()):  # type: ignore[misc]  # PyG base, found at run time
    """PyG's ``NeighborSampler`` with its homogeneous sampling done in plain PyTorch.

    Args:
        data: A homogeneous PyG ``Data``.
        num_neighbors: Neighbours per hop (``-1`` for all), as for ``NeighborLoader``.
        **kwargs: Other ``NeighborSampler`` arguments (``subgraph_type="directional"``,
            no temporal or weighted sampling, no ``disjoint``).

    Returns:
        A sampler to pass as ``NeighborLoader(..., neighbor_sampler=...)``.

    Example:
        >>> from torch_geometric.loader import NeighborLoader
        >>> s = TorchNeighborSampler(data, [10, 10])                     # doctest: +SKIP
        >>> NeighborLoader(data, [10, 10], neighbor_sampler=s, batch_size=64)  # doctest: +SKIP
    """

    def __init__(self, data: Data, num_neighbors: list[int], **kwargs: object) -> None:
        for key in ("time_attr", "weight_attr"):
            if kwargs.get(key) is not None:
                raise ValueError(f"TorchNeighborSampler: {key} needs pyg-lib")
        if kwargs.get("disjoint"):
            raise ValueError("TorchNeighborSampler: disjoint sampling needs pyg-lib")
        with warnings.catch_warnings():
            # PyG warns that sampling without pyg-lib is deprecated: this class is the fallback
            warnings.filterwarnings("ignore", message=".*without a 'pyg-lib' installation")
            super().__init__(data, num_neighbors, **kwargs)
        if isinstance(getattr(self, "num_nodes", None), dict):
            raise ValueError("TorchNeighborSampler: heterogeneous graphs need pyg-lib")

    def _sample(
        self, seed: Tensor, seed_time: Tensor | None = None, **kwargs: object
    ) -> SamplerOutput:
        from torch_geometric.sampler import SamplerOutput

        if isinstance(seed, dict) or seed_time is not None:
            raise ValueError("TorchNeighborSampler: only homogeneous, non-temporal sampling")
        if str(getattr(self.subgraph_type, "value", self.subgraph_type)) == "induced":
            raise ValueError("TorchNeighborSampler: subgraph_type='induced' needs torch-sparse")
        node, row, col, edge, n_nodes, n_edges = sample_neighbors(
            self.colptr, self.row, seed, self.num_neighbors.get_mapped_values(), self.num_nodes
        )
        if self.sample_direction == "backward":
            row, col = col, row
        return SamplerOutput(
            node=node,
            row=row,
            col=col,
            edge=edge,
            batch=None,
            num_sampled_nodes=n_nodes,
            num_sampled_edges=n_edges,
        )

    def __repr__(self) -> str:
        return (
            f"TorchNeighborSampler(num_nodes={self.num_nodes}, "
            f"num_neighbors={self.num_neighbors.get_mapped_values()})"
        )


def neighbor_loader(data: Data, num_neighbors: list[int], **kwargs: object) -> NeighborLoader:
    """PyG's ``NeighborLoader``, sampling with pyg-lib/torch-sparse when present, else in torch.

    Args:
        data: A homogeneous PyG ``Data``.
        num_neighbors: Neighbours per hop (``-1`` for all).
        **kwargs: ``NeighborLoader`` arguments (``input_nodes``, ``batch_size``,
            ``sampler``, ...).

    Returns:
        A ``torch_geometric.loader.NeighborLoader``.

    Example:
        >>> loader = neighbor_loader(data, [10, 10], batch_size=256)  # doctest: +SKIP
    """
    from torch_geometric.loader import NeighborLoader

    if not has_compiled_sampler() and "neighbor_sampler" not in kwargs:
        kwargs["neighbor_sampler"] = TorchNeighborSampler(data, list(num_neighbors))
    return NeighborLoader(data, list(num_neighbors), **kwargs)
