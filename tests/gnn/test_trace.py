"""Traces of GAT models: attention internals, FLOPs and the memory of edges x heads."""

from __future__ import annotations

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

import labkit
from labkit.gnn import GAT, GATv2, sbm
from labkit.trace.graph import default_expanded, visible_graph


@pytest.fixture(scope="module")
def graph():
    return sbm(400, 4, seed=0, avg_degree=8)


def _convs(trace):
    return [n for n in trace.nodes if n.type in ("GATConv", "GATv2Conv")]


def _children(trace, parent):
    return [n for n in trace.nodes if n.parent == parent.id]


@pytest.mark.parametrize("cls", [GAT, GATv2])
def test_attention_internals_are_op_nodes_under_each_conv(cls, graph):
    heads = 4
    trace = labkit.trace(
        cls(16, 8, 4, heads=heads, out_heads=2, dropout=0.0), graph.x, graph.edge_index
    )
    attended = graph.num_edges + graph.num_nodes  # edges plus one self loop per node
    convs = _convs(trace)
    assert len(convs) == 2
    for conv, h in zip(convs, (heads, 2), strict=True):
        kids = _children(trace, conv)
        names = {k.name for k in kids}
        # projection, attention scores, softmax over incoming edges, aggregation
        assert any(k.kind == "module" and k.type == "Linear" for k in kids)
        assert {"leaky_relu", "exp", "scatter_add_", "div"} <= names
        assert any(k.type == "SumAggregation" for k in kids)
        # the softmax works on the attention coefficients: one per attended edge and head
        softmax = [k for k in kids if k.name in ("exp", "div")]
        assert softmax and all(k.outputs[0].shape == (attended, h) for k in softmax)
        assert trace.total(conv.id, "flops_fwd") > 0 and conv.fwd_time > 0 and conv.bwd_time > 0


def test_flops_agree_with_flop_counter_mode(graph):
    model = GAT(16, 8, 4, heads=4, dropout=0.0)
    trace = labkit.trace(model, graph.x, graph.edge_index)
    with FlopCounterMode(display=False) as counter:
        model(graph.x, graph.edge_index).sum().backward()
    assert trace.meta.backward
    assert trace.total_flops == counter.get_total_flops() > 0


def test_saved_memory_grows_with_edges_times_heads(graph):
    attended = graph.num_edges + graph.num_nodes
    saved = {}
    for heads in (1, 4):
        torch.manual_seed(0)
        trace = labkit.trace(GAT(16, 8, 4, heads=heads, dropout=0.0), graph.x, graph.edge_index)
        conv = _convs(trace)[0]
        # at least the attention coefficients (edges x heads, fp32) and the per-edge messages
        assert conv.saved_bytes >= attended * heads * 4 * (1 + 8)
        saved[heads] = conv.saved_bytes
    assert saved[4] > 3 * saved[1]


def test_graph_view_expands_a_conv_into_its_internals(graph):
    trace = labkit.trace(GAT(16, 8, 4, heads=2, dropout=0.0), graph.x, graph.edge_index)
    conv = _convs(trace)[0]
    closed = visible_graph(trace, expanded=default_expanded(trace, 2) - {conv.id})
    assert conv.id in closed.boxes
    opened = visible_graph(trace, expanded=default_expanded(trace, 2) | {conv.id})
    assert conv.id in opened.groups
    inside = {trace.nodes[b].name for b in opened.boxes if trace.nodes[b].parent == conv.id}
    assert {"convs.0.lin", "leaky_relu", "exp", "scatter_add_", "convs.0.aggr_module"} <= inside
    assert len(opened.edges) > len(closed.edges)
