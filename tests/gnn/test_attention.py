"""Attention weights as plain data: per head they sum to 1 over a node's incoming edges."""

from __future__ import annotations

import json

import pytest
import torch

from labkit.gnn import GAT, GATv2, attention_map, node_attention


@pytest.fixture(scope="module", params=[GAT, GATv2])
def amap(request, karate_graph):
    torch.manual_seed(0)
    model = request.param(karate_graph.num_features, 4, 4, heads=3, out_heads=2)
    return attention_map(model, karate_graph)


@pytest.mark.parametrize("node", [0, 5, 33])
def test_hop1_weights_sum_to_one_per_head(amap, node):
    view = node_attention(amap, node, hops=1)
    assert view.heads == [2]
    assert view.head_sums() == pytest.approx([1.0, 1.0], abs=1e-5)
    # every incoming edge of the node is shown, its self loop included
    assert {e["src"] for e in view.edges} == {node} | {
        s for s, d in zip(amap.src[-1], amap.dst[-1], strict=True) if d == node
    }
    assert all(e["dst"] == node for e in view.edges)


def test_two_hops_use_the_layer_that_consumes_each_edge(amap):
    view = node_attention(amap, 0, hops=2)
    assert view.heads == [2, 3] and view.nodes[0] == 0
    for e in view.edges:
        assert e["layer"] == 2 - e["hop"]
        assert len(e["weights"]) == view.heads[e["hop"] - 1]
        assert e["mean"] == pytest.approx(sum(e["weights"]) / len(e["weights"]))
    # hop-2 edges: for each hop-1 neighbour, its incoming weights sum to 1 per head
    by_dst: dict[int, list[float]] = {}
    for e in view.edges:
        if e["hop"] == 2:
            acc = by_dst.setdefault(e["dst"], [0.0] * 3)
            for h, w in enumerate(e["weights"]):
                acc[h] += w
    assert by_dst and all(s == pytest.approx([1.0] * 3, abs=1e-5) for s in by_dst.values())
    assert set(view.nodes) >= {e["src"] for e in view.edges}


def test_payload_is_json_and_repr(amap):
    view = node_attention(amap, 3, hops=2)
    payload = json.loads(json.dumps(view.to_dict()))
    assert payload["node"] == 3 and len(payload["labels"]) == len(payload["nodes"])
    assert repr(view).startswith("NodeAttention(node=3, hops=2, nodes=")
    assert repr(amap) == (
        f"AttentionMap(model={amap.model!r}, num_nodes=34, layers=2, heads=[3, 2], edges=190)"
    )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"node": 34}, r"node must be an int in \[0, 34\), got 34"),
        ({"node": 0, "hops": 3}, r"hops must be in \[1, 2\] \(the model has 2 attention layers\)"),
    ],
)
def test_bad_node_or_hops(amap, kwargs, message):
    kwargs = dict(kwargs)
    node = kwargs.pop("node")
    with pytest.raises(ValueError, match=message):
        node_attention(amap, node, **kwargs)


def test_attention_map_needs_a_gat():
    with pytest.raises(TypeError, match="Linear has no attention_weights"):
        attention_map(torch.nn.Linear(2, 2), None)
