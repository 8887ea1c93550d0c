"""Node-classification data for Lightning: full-batch, or NeighborLoader mini-batches per rank.

A batch is a PyG ``Data``; :func:`node_step` turns it into ``(logits, labels)`` of the
nodes that count: the mask's nodes in full-batch mode, the first ``batch_size`` (seed)
nodes of a NeighborLoader mini-batch. Under DDP the training seed nodes are split per
rank by a ``DistributedSampler`` (rank ``r`` takes every ``world``-th node of one
seeded permutation), so with the same *global* batch size the union of the ranks'
batches is exactly the single-process batch.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence, Sized
from typing import TYPE_CHECKING, Any, TypeVar

import lightning.pytorch as pl
import torch
from torch import Tensor
from torch.utils.data import DataLoader, Dataset, DistributedSampler

from labkit.gnn.validate import validate_graph

if TYPE_CHECKING:
    from torch_geometric.data import Data

T = TypeVar("T")


def node_step(net: torch.nn.Module, batch: Data) -> tuple[Tensor, Tensor]:
    """``(logits, labels)`` of the nodes a node-classification batch is about.

    Args:
        net: A model called as ``net(x, edge_index)``.
        batch: A full graph carrying ``seed_mask`` (full-batch) or a NeighborLoader batch
            (its first ``batch_size`` nodes are the seeds).

    Returns:
        Logits and labels of the selected nodes.

    Example:
        >>> out, y = node_step(model, batch)  # doctest: +SKIP
    """
    out = net(batch.x, batch.edge_index)
    sel = getattr(batch, "seed_mask", None)
    if sel is None:
        sel = slice(0, int(batch.batch_size))
    return out[sel], batch.y[sel]


def _first(items: list[T]) -> T:
    return items[0]


def _as_graph(data: object) -> Data:
    """A single ``Data`` from a ``Data`` or a one-graph PyG dataset."""
    if hasattr(data, "edge_index") and hasattr(data, "x"):
        return data
    n = len(data) if isinstance(data, Sized) else None
    if n == 1 and isinstance(data, Sequence | Dataset):
        return data[0]
    raise TypeError(
        f"node classification needs one graph (a PyG Data or a dataset of one "
        f"graph), got {type(data).__name__}" + (f" of {n} graphs" if n else "")
    )


class GraphDataModule(pl.LightningDataModule):
    """Node classification on one graph: full-batch, or NeighborLoader mini-batches.

    Training uses the nodes of ``train_mask``; validation runs full-batch on
    ``val_mask`` (skipped when the graph has none). With ``batch_size=None`` an epoch is
    one full-graph step. With a ``batch_size``, the training seeds are drawn by a
    ``DistributedSampler`` seeded with ``seed`` (set per epoch by Lightning) and their
    ``num_neighbors`` neighbourhoods sampled by PyG's ``NeighborLoader``. ``batch_size``
    is the *global* batch: each of ``world`` processes takes ``batch_size // world`` seeds.

    Args:
        data: A PyG ``Data`` (or a one-graph PyG dataset) with ``x``, ``edge_index``, ``y``
            and ``train_mask``; checked by :func:`~labkit.gnn.validate_graph` first.
        batch_size: Global seed nodes per step, or ``None`` for full-batch.
        num_neighbors: Neighbours sampled per hop (``-1``: all), mini-batch only.
        shuffle: Shuffle the seed nodes every epoch.
        seed: Seed of the shuffle.
        drop_last: Drop a last, smaller batch.

    Returns:
        A ``LightningDataModule`` whose batches :func:`node_step` understands.

    Example:
        >>> from labkit.gnn import sbm
        >>> dm = GraphDataModule(sbm(1000, 4), batch_size=128, num_neighbors=[10, 5])
        >>> dm.full_batch, dm.num_neighbors
        (False, [10, 5])
    """

    lab_step = staticmethod(node_step)  # read by labkit.Lab as its default step

    def __init__(
        self,
        data: object,
        *,
        batch_size: int | None = None,
        num_neighbors: Sequence[int] = (10, 10),
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = False,
    ) -> None:
        super().__init__()
        graph = _as_graph(data)
        validate_graph(graph)
        if batch_size is not None and (not isinstance(batch_size, int) or batch_size < 1):
            raise ValueError(
                f"GraphDataModule: batch_size must be a positive int or None, got {batch_size!r}"
            )
        if batch_size is not None and not all(isinstance(k, int) for k in num_neighbors):
            raise ValueError(f"GraphDataModule: num_neighbors must be ints, got {num_neighbors!r}")
        self.data = graph
        self.batch_size = batch_size
        self.num_neighbors = [int(k) for k in num_neighbors]
        self.shuffle = shuffle
        self.seed = seed
        self.drop_last = drop_last

    @property
    def full_batch(self) -> bool:
        """Whether every step sees the whole graph."""
        return self.batch_size is None

    def _world(self) -> tuple[int, int]:
        trainer = getattr(self, "trainer", None)
        if trainer is None:
            return 1, 0
        return int(trainer.world_size), int(trainer.global_rank)

    def _masked(self, mask: Tensor) -> DataLoader[Any]:
        graph = copy.copy(self.data)
        graph.seed_mask = mask
        world, rank = self._world()
        # one item; every rank gets it (the sampler pads), so Lightning adds no sampler of its own
        # a sampler needs only len() and a loader only [i]: range and list do (not Dataset types)
        sampler: DistributedSampler[int] = DistributedSampler(
            range(1),  # type: ignore[arg-type]
            num_replicas=world,
            rank=rank,
            shuffle=False,
        )
        return DataLoader([graph], batch_size=1, sampler=sampler, collate_fn=_first)  # type: ignore[arg-type]

    def train_dataloader(self) -> Iterable[Data]:
        if self.full_batch:
            return self._masked(self.data.train_mask)
        from labkit.gnn.sampler import neighbor_loader

        world, rank = self._world()
        batch_size = self.batch_size
        assert batch_size is not None  # not full_batch
        if batch_size % world:
            raise ValueError(
                f"GraphDataModule: the global batch_size={self.batch_size} does not "
                f"split evenly over {world} processes"
            )
        seeds = self.data.train_mask.nonzero().view(-1)
        sampler: DistributedSampler[int] = DistributedSampler(
            range(seeds.numel()),  # type: ignore[arg-type]  # a sampler needs only len()
            num_replicas=world,
            rank=rank,
            shuffle=self.shuffle,
            seed=self.seed,
            drop_last=self.drop_last,
        )
        return neighbor_loader(
            self.data,
            self.num_neighbors,
            input_nodes=seeds,
            batch_size=batch_size // world,
            sampler=sampler,
            drop_last=self.drop_last,
        )

    def val_dataloader(self) -> Iterable[Data]:
        mask = getattr(self.data, "val_mask", None)
        return [] if mask is None else self._masked(mask)

    def test_dataloader(self) -> Iterable[Data]:
        mask = getattr(self.data, "test_mask", None)
        return [] if mask is None else self._masked(mask)

    def __repr__(self) -> str:
        d = self.data
        parts = [f"nodes={d.num_nodes}", f"edges={d.num_edges}", f"batch_size={self.batch_size}"]
        if not self.full_batch:
            parts.append(f"num_neighbors={self.num_neighbors}")
        for name in ("train", "val"):
            mask = getattr(d, f"{name}_mask", None)
            if mask is not None:
                parts.append(f"{name}={int(mask.sum())}")
        return f"GraphDataModule({', '.join(parts)})"


def is_node_graph(data: object) -> bool:
    """Whether ``data`` is one PyG graph with a ``train_mask`` (or a dataset of one such graph)."""
    mod = type(data).__module__
    if not mod.startswith("torch_geometric."):
        return False
    try:
        graph = _as_graph(data)
    except (TypeError, IndexError):
        return False
    return getattr(graph, "train_mask", None) is not None


def for_lab(data: object) -> object:
    """What ``labkit.Lab`` trains on for PyG data: a :class:`GraphDataModule` for one graph
    with a ``train_mask`` (checked now, before training), anything else unchanged.

    Args:
        data: What the user gave ``Lab``.

    Returns:
        A full-batch :class:`GraphDataModule`, or ``data`` itself.

    Example:
        >>> for_lab(sbm(100, 2))  # doctest: +SKIP
        GraphDataModule(nodes=100, edges=..., batch_size=None, train=50, val=25)
    """
    return GraphDataModule(data) if is_node_graph(data) else data
