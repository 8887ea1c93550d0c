"""Bad graphs fail before training with an error naming the tensor and the bad value."""

from __future__ import annotations

import copy
import re

import pytest
import torch

from labkit.gnn import GraphDataError, GraphDataModule, karate, validate_graph


def _broken(change):
    data = copy.copy(karate())
    change(data)
    return data


def _set(name, value):
    return lambda d: setattr(d, name, value(d) if callable(value) else value)


def _poke(d, value):
    ei = d.edge_index.clone()
    ei[1, 7] = value
    d.edge_index = ei


CASES = [
    (
        lambda d: _poke(d, 34),
        "data.edge_index: value 34 at [1, 7] is out of range; node indices "
        "must lie in [0, 34) for 34 nodes (1 bad entries in all)",
    ),
    (lambda d: _poke(d, -1), "data.edge_index: value -1 at [1, 7] is out of range"),
    (
        _set("edge_index", lambda d: d.edge_index.int()),
        "data.edge_index: must have dtype torch.int64 (long), got torch.int32",
    ),
    (
        _set("edge_index", lambda d: d.edge_index.float()),
        "data.edge_index: must have dtype torch.int64 (long), got torch.float32",
    ),
    (
        _set("edge_index", lambda d: d.edge_index.t()),
        "data.edge_index: must have shape [2, num_edges], got (156, 2) (transposed? use "
        "edge_index.t())",
    ),
    (
        _set("edge_index", lambda d: d.edge_index[0]),
        "data.edge_index: must have shape [2, num_edges], got (156,)",
    ),
    (
        _set("y", lambda d: d.y[:30]),
        "data.y: has 30 labels but data.x has 34 nodes (features and labels must have the same "
        "length)",
    ),
    (_set("y", lambda d: d.y.float()), "data.y: class indices must be an integer tensor"),
    (_set("x", lambda d: d.x.long()), "data.x: must be a floating tensor, got dtype torch.int64"),
    (_set("x", lambda d: d.x[0]), "data.x: must be 2-D [num_nodes, num_features], got shape (34,)"),
    (
        _set("train_mask", lambda d: torch.zeros(34, dtype=torch.bool)),
        "data.train_mask: selects no nodes (all 34 entries are False)",
    ),
    (
        _set("test_mask", lambda d: torch.zeros(34, dtype=torch.bool)),
        "data.test_mask: selects no nodes",
    ),
    (
        _set("train_mask", lambda d: d.train_mask.long()),
        "data.train_mask: must be a boolean tensor, got torch.int64",
    ),
    (
        _set("train_mask", lambda d: d.train_mask[:10]),
        "data.train_mask: has shape (10,), expected (34,) (one entry per node)",
    ),
    (_set("train_mask", None), "data.train_mask: missing"),
]


@pytest.mark.parametrize(("change", "message"), CASES)
def test_bad_graph_is_named(change, message):
    with pytest.raises(GraphDataError, match="^" + re.escape(message)):
        validate_graph(_broken(change))


@pytest.mark.parametrize(("change", "message"), CASES[:3])
def test_datamodule_checks_before_any_training(change, message):
    with pytest.raises(GraphDataError, match=re.escape(message)):
        GraphDataModule(_broken(change), batch_size=8)


def test_error_is_a_value_error_with_a_custom_name():
    with pytest.raises(ValueError, match=r"^graph\.y: label -2 at node 5 is negative"):
        validate_graph(
            _broken(_set("y", lambda d: d.y.index_fill(0, torch.tensor([5]), -2))), name="graph"
        )


def test_good_graphs_pass(sbm_small, karate_graph):
    validate_graph(sbm_small)
    validate_graph(karate_graph)
