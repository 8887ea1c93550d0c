"""GAT node classification through labkit.Lab: full-batch, NeighborLoader, 2-process DDP."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import labkit
from labkit.gnn import GAT, GATv2, GraphDataModule, sbm
from labkit.gnn.data import node_step


def _test_accuracy(model, data):
    model.eval()
    with torch.no_grad():
        pred = model(data.x, data.edge_index).argmax(1)
    return (pred[data.test_mask] == data.y[data.test_mask]).float().mean().item()


@pytest.fixture(scope="module")
def graph():
    # 1000 nodes, 4 communities, 80% of edges inside one: the features alone give ~68%
    return sbm(1000, 4, seed=0)


def test_lab_picks_the_node_step_and_a_full_batch_datamodule(graph, tmp_path):
    lab = labkit.Lab(GAT(16, 8, 4), graph, loss=F.cross_entropy, logdir=tmp_path)
    assert isinstance(lab.data, GraphDataModule) and lab.data.full_batch
    assert lab.step is node_step
    assert repr(lab.data) == (
        "GraphDataModule(nodes=1000, edges=9834, batch_size=None, train=500, val=250)"
    )


@pytest.mark.parametrize("cls", [GAT, GATv2])
def test_full_batch_fit_reaches_90_percent(cls, graph, tmp_path):
    torch.manual_seed(0)
    model = cls(16, 8, 4, heads=4, dropout=0.2)
    lab = labkit.Lab(model, graph, loss=F.cross_entropy, lr=0.02, logdir=tmp_path)
    run = lab.fit(max_epochs=12, seed=0, dashboard=False)
    assert run.status == "finished" and len(run.losses) == 12  # one step per epoch
    assert run.losses[-1] < run.losses[0]
    assert _test_accuracy(lab.model, graph) >= 0.90


def test_neighbor_loader_fit_reaches_90_percent(graph, tmp_path):
    torch.manual_seed(0)
    dm = GraphDataModule(graph, batch_size=125, num_neighbors=[10, 10])
    lab = labkit.Lab(
        GAT(16, 8, 4, heads=4, dropout=0.2), dm, loss=F.cross_entropy, lr=0.02, logdir=tmp_path
    )
    run = lab.fit(max_epochs=3, seed=0, dashboard=False)
    assert len(run.losses) == 3 * 4  # 500 training nodes / 125 per step
    assert _test_accuracy(lab.model, graph) >= 0.90


def test_bad_graph_fails_when_the_lab_is_made(graph, tmp_path):
    from labkit.gnn import GraphDataError

    bad = graph.clone()
    bad.edge_index = bad.edge_index.clone()
    bad.edge_index[0, 0] = 1000
    with pytest.raises(GraphDataError, match=r"data\.edge_index: value 1000 at \[0, 0\]"):
        labkit.Lab(GAT(16, 8, 4), bad, loss=F.cross_entropy, logdir=tmp_path)


@pytest.mark.slow
def test_ddp_two_processes_match_one_process(graph, tmp_path):
    """Same global batch (100 seeds: 50 per rank) and full neighbourhoods, no dropout: the
    two ranks' batches together are the one-process batch, so DDP's averaged gradient is the
    one-process gradient. Validation loss after every epoch and the final weights agree
    within 1e-4 (float summation order differs)."""
    results = {}
    for devices in (1, 2):
        torch.manual_seed(0)
        model = GAT(16, 8, 4, heads=2, dropout=0.0)
        dm = GraphDataModule(graph, batch_size=100, num_neighbors=[-1, -1], seed=3)
        lab = labkit.Lab(model, dm, loss=F.cross_entropy, lr=0.01, logdir=tmp_path / str(devices))
        run = lab.fit(max_epochs=3, devices=devices, accelerator="cpu", seed=0, dashboard=False)
        assert run.status == "finished", run.error
        assert run.config["processes"] == devices
        results[devices] = (run, {k: v.clone() for k, v in lab.model.state_dict().items()})
    (one, w1), (two, w2) = results[1], results[2]
    assert len(one.losses) == 15 and len(two.losses) == 15  # 500 seeds / 100 per global step
    val1 = [e["val_loss"] for e in one.epochs]
    val2 = [e["val_loss"] for e in two.epochs]
    assert len(val1) == 3 and val1[-1] < val1[0]
    assert val2 == pytest.approx(val1, rel=1e-4, abs=1e-5)
    for name in w1:
        torch.testing.assert_close(w2[name], w1[name], rtol=1e-4, atol=1e-5, msg=name)


def test_lab_traces_a_gat_training_step(graph, tmp_path):
    lab = labkit.Lab(GAT(16, 8, 4, heads=2), graph, loss=F.cross_entropy, logdir=tmp_path)
    trace = lab.trace()
    convs = [n for n in trace.nodes if n.type == "GATConv"]
    assert len(convs) == 2 and trace.meta.backward
    assert trace.nodes[convs[0].id].saved_bytes > 0
    assert lab.traces[-1] is trace


def test_lab_takes_a_one_graph_pyg_dataset_and_leaves_graph_classification_alone(tmp_path):
    from torch_geometric.datasets import FakeDataset, KarateClub

    lab = labkit.Lab(GAT(34, 4, 4), KarateClub(), loss=F.cross_entropy, logdir=tmp_path)
    assert isinstance(lab.data, GraphDataModule) and lab.step is node_step
    graphs = FakeDataset(num_graphs=3, avg_num_nodes=10, task="graph")
    lab = labkit.Lab(GAT(64, 4, 4), graphs, loss=F.cross_entropy, logdir=tmp_path)
    assert lab.data is graphs and lab.step is None
