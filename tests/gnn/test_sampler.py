"""Neighbour sampling in plain torch inside PyG's real NeighborLoader."""

from __future__ import annotations

import pytest
import torch

from labkit.gnn import GAT, GraphDataModule, sbm
from labkit.gnn.sampler import TorchNeighborSampler, neighbor_loader, sample_neighbors


@pytest.fixture(scope="module")
def graph():
    return sbm(600, 3, seed=1, avg_degree=8)


def test_full_neighbourhoods_give_the_full_batch_output(graph):
    model = GAT(16, 8, 3, heads=2).eval()
    with torch.no_grad():
        full = model(graph.x, graph.edge_index)
        for batch in neighbor_loader(graph, [-1, -1], batch_size=97, input_nodes=graph.train_mask):
            seeds = batch.n_id[: batch.batch_size]
            out = model(batch.x, batch.edge_index)[: batch.batch_size]
            torch.testing.assert_close(out, full[seeds], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("fanout", [[3], [4, 2], [1, 1, 1]])
def test_sampled_edges_are_real_and_respect_the_fanout(graph, fanout):
    torch.manual_seed(0)
    batch = next(iter(neighbor_loader(graph, fanout, batch_size=50)))
    # every sampled edge exists in the graph, with its PyG edge id
    assert torch.equal(graph.edge_index[:, batch.e_id], batch.n_id[batch.edge_index])
    assert batch.num_sampled_nodes[0] == 50 and len(batch.num_sampled_edges) == len(fanout)
    # hop by hop, no node receives more than its fanout
    start = 0
    for hop, k in enumerate(fanout):
        n = batch.num_sampled_edges[hop]
        dst = batch.edge_index[1, start : start + n]
        assert int(torch.bincount(dst).max()) <= k
        start += n
    assert len(set(batch.n_id.tolist())) == batch.num_nodes  # no node twice


def test_sampling_is_seeded_by_torch_manual_seed(graph):
    def draw():
        torch.manual_seed(5)
        return next(iter(neighbor_loader(graph, [5, 5], batch_size=64))).n_id

    assert torch.equal(draw(), draw())


def test_sample_neighbors_example():
    colptr, row = torch.tensor([0, 1, 2, 4]), torch.tensor([1, 2, 0, 1])
    node, r, c, e, nn, ne = sample_neighbors(colptr, row, torch.tensor([2]), [-1, -1], 3)
    assert (node.tolist(), r.tolist(), c.tolist(), e.tolist()) == (
        [2, 0, 1],
        [1, 2, 2, 0],
        [0, 0, 1, 2],
        [2, 3, 0, 1],
    )
    assert (nn, ne) == ([1, 2, 0], [2, 2])


def test_repr_and_unsupported_options(graph):
    assert repr(TorchNeighborSampler(graph, [5, 2])) == (
        "TorchNeighborSampler(num_nodes=600, num_neighbors=[5, 2])"
    )
    with pytest.raises(ValueError, match="disjoint sampling needs pyg-lib"):
        TorchNeighborSampler(graph, [2], disjoint=True)


def test_datamodule_splits_seeds_per_rank_like_one_process(graph):
    class FakeTrainer:  # the two attributes a DataModule reads from its Trainer
        def __init__(self, world, rank):
            self.world_size, self.global_rank = world, rank

    def batches(world, rank):
        dm = GraphDataModule(graph, batch_size=60, num_neighbors=[2], seed=7)
        dm.trainer = FakeTrainer(world, rank)
        loader = dm.train_dataloader()
        loader.sampler.set_epoch(1)
        return [b.n_id[: b.batch_size].tolist() for b in loader]

    one = batches(1, 0)
    r0, r1 = batches(2, 0), batches(2, 1)
    assert len(one) == len(r0) == len(r1) == 5  # 300 training nodes, 60 per global step
    for b, a0, a1 in zip(one, r0, r1, strict=True):
        assert len(a0) == len(a1) == 30 and sorted(a0 + a1) == sorted(b)
    with pytest.raises(ValueError, match="batch_size=60 does not split evenly over 7"):
        batches(7, 0)
