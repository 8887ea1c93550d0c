"""GAT / GATv2 models: shapes for every option, repr, argument checks."""

from __future__ import annotations

import re

import pytest
import torch

from labkit.gnn import GAT, GATv2


@pytest.mark.parametrize("cls", [GAT, GATv2])
@pytest.mark.parametrize(
    "options",
    [
        {},
        {"residual": True},
        {"concat": False},
        {"num_layers": 3, "heads": 2, "out_heads": 3},
        {"num_layers": 1},
        {"add_self_loops": False, "dropout": 0.0},
    ],
)
def test_forward_shape_and_backward(cls, options, karate_graph):
    d = karate_graph
    model = cls(d.num_features, 8, 4, **options)
    out = model(d.x, d.edge_index)
    assert out.shape == (34, 4)
    out.sum().backward()
    assert all(p.grad is not None for p in model.parameters())


def test_layers_are_pyg_attention_convs():
    from torch_geometric.nn import GATConv, GATv2Conv

    assert all(type(c) is GATConv for c in GAT(4, 8, 2, num_layers=3).convs)
    assert all(type(c) is GATv2Conv for c in GATv2(4, 8, 2).convs)
    hidden = GAT(4, 8, 2, heads=3).convs[0]
    assert (hidden.heads, hidden.concat) == (3, True)
    assert GAT(4, 8, 2, heads=3).convs[1].in_channels == 24
    assert GAT(4, 8, 2, heads=3, concat=False).convs[1].in_channels == 8


@pytest.mark.parametrize(
    ("model", "text"),
    [
        (GAT(16, 8, 4), "GAT(16, 8, 4)"),
        (GATv2(16, 8, 4, heads=2, residual=True), "GATv2(16, 8, 4, heads=2, residual=True)"),
        (
            GAT(3, 5, 2, num_layers=3, dropout=0.1, concat=False),
            "GAT(3, 5, 2, num_layers=3, dropout=0.1, concat=False)",
        ),
    ],
)
def test_repr(model, text):
    assert repr(model) == text


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"heads": 0}, "heads must be a positive int, got 0"),
        ({"num_layers": 2.0}, "num_layers must be a positive int, got 2.0"),
        ({"dropout": 1.0}, "dropout must be in [0, 1), got 1.0"),
    ],
)
def test_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        GAT(4, 8, 2, **kwargs)


def test_attention_weights_restore_training_mode(karate_graph):
    model = GAT(karate_graph.num_features, 4, 4, heads=2)
    model.train()
    layers = model.attention_weights(karate_graph.x, karate_graph.edge_index)
    assert model.training
    assert [alpha.shape[1] for _, alpha in layers] == [2, 1]
    assert not torch.is_grad_enabled() or all(not a.requires_grad for _, a in layers)
