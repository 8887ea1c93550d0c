"""Graph-network workloads: GAT/GATv2 node classification, datasets that need no download.

``import labkit.gnn`` is light: PyTorch Geometric loads on first use of a name.

Example:
    >>> from labkit.gnn import GAT, sbm
    >>> data = sbm(1000, 4, seed=0)
    >>> model = GAT(data.num_features, 8, 4, heads=4)
    >>> model(data.x, data.edge_index).shape
    torch.Size([1000, 4])
"""

from __future__ import annotations

from labkit._lazy import lazy_exports

_LAZY = {
    "GAT": "labkit.gnn.models",
    "GATv2": "labkit.gnn.models",
    "karate": "labkit.gnn.datasets",
    "sbm": "labkit.gnn.datasets",
    "fake": "labkit.gnn.datasets",
    "planetoid_from_files": "labkit.gnn.datasets",
    "num_classes": "labkit.gnn.datasets",
    "validate_graph": "labkit.gnn.validate",
    "GraphDataError": "labkit.gnn.validate",
    "attention_map": "labkit.gnn.attention",
    "node_attention": "labkit.gnn.attention",
    "AttentionMap": "labkit.gnn.attention",
    "NodeAttention": "labkit.gnn.attention",
    "GraphDataModule": "labkit.gnn.data",
    "node_step": "labkit.gnn.data",
    "TorchNeighborSampler": "labkit.gnn.sampler",
}

__all__ = list(_LAZY)


__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
