"""Visibility, rolling and edge lifting of labkit.trace.graph."""

from __future__ import annotations

import pytest
import torch

import labkit
from labkit.trace.graph import (
    canonicalize,
    default_expanded,
    expandable,
    module_depths,
    visible_graph,
)
from tests.trace._models import MLP, ResCNN


@pytest.fixture(scope="module")
def cnn():
    torch.manual_seed(0)
    return labkit.trace(ResCNN(blocks=3), torch.randn(2, 3, 16, 16))


def names(trace, ids):
    return [trace.nodes[i].name for i in ids]


def test_default_depth_shows_leaf_modules_as_boxes(cnn):
    g = visible_graph(cnn)
    assert names(cnn, g.groups) == ["", "blocks"]
    shown = names(cnn, g.boxes)
    assert shown[:3] == ["x", "stem", "blocks.0"] and shown[-2:] == ["head", "output"]
    assert "blocks.1" not in shown  # rolled into blocks.0


def test_edges_are_lifted_deduplicated_and_acyclic(cnn):
    g = visible_graph(cnn)
    assert len(set(g.edges)) == len(g.edges)
    assert all(s != d for s, d in g.edges)
    assert all(s < d for s, d in g.edges)  # execution order stays a topological order
    by_name = {(cnn.nodes[s].name, cnn.nodes[d].name) for s, d in g.edges}
    assert ("x", "stem") in by_name and ("stem", "blocks.0") in by_name
    boxes = set(g.boxes)
    assert all(s in boxes and d in boxes for s, d in g.edges)


def test_rolled_block_counts_and_drops_cross_call_edges(cnn):
    c = canonicalize(cnn)
    head = next(n.id for n in cnn.nodes if n.name == "blocks.0")
    assert c.count[head] == 3 and c.block_name[head] == "blocks.0-2"
    # expand the rolled block: its internals appear once, with no edge back into it
    opened = visible_graph(cnn, expanded=set(visible_graph(cnn).groups) | {head}, canon=c)
    inner = [i for i in opened.boxes if cnn.nodes[i].name.startswith("blocks.0.")]
    assert len(inner) == 4  # conv1 bn1 conv2 bn2
    assert all(s < d for s, d in opened.edges)
    skip = [(s, d) for s, d in opened.edges if cnn.nodes[d].name == "add"]
    assert len(skip) == 2  # residual: from bn2 and from the block's input


def test_unrolled_graph_keeps_every_call(cnn):
    g = visible_graph(cnn, rolled=False)
    assert {"blocks.0", "blocks.1", "blocks.2"} <= set(names(cnn, g.boxes))
    assert ("blocks.0", "blocks.1") in {(cnn.nodes[s].name, cnn.nodes[d].name) for s, d in g.edges}


@pytest.mark.parametrize("depth, groups", [(0, 0), (1, 1), (2, 2), (9, 3)])
def test_depth_controls_which_calls_open(cnn, depth, groups):
    g = visible_graph(cnn, depth=depth)
    assert len(g.groups) == groups


def test_collapsed_everything_is_input_model_output(cnn):
    g = visible_graph(cnn, expanded=())
    assert names(cnn, g.boxes) == ["x", "", "output"]
    assert len(g.edges) == 2


def test_box_of_maps_every_node_to_a_drawn_item(cnn):
    g = visible_graph(cnn)
    drawn = set(g.boxes) | set(g.groups)
    assert all(b in drawn for b in g.box_of)


def test_depths_and_expandable():
    t = labkit.trace(MLP(), torch.randn(2, 8))
    depth = module_depths(t)
    fc1 = next(n.id for n in t.nodes if n.name == "fc1")
    assert depth[fc1] == 1
    assert fc1 in expandable(t)  # it has its linear op inside
    assert default_expanded(t, depth=2) == {next(n.id for n in t.nodes if n.kind == "module")}
