"""What the widgets send for a given Trace."""

from __future__ import annotations

import json

from labkit.trace.graph import visible_graph
from labkit.widgets._payload import (
    METRICS,
    PROFILE_COLUMNS,
    graph_payload,
    graph_state,
    memory_payload,
    node_metrics,
    payload_bytes,
    profile_payload,
    structure_key,
)


def test_graph_payload_is_parallel_arrays(cnn_trace):
    g = graph_payload(cnn_trace)
    n = len(g["ids"])
    for key in ("parent", "name", "type", "ins", "outs"):
        assert len(g[key]) == n, key
    assert len(g["kind"]) == n and set(g["kind"]) <= set("iomp")
    assert len(g["edges"]) == 2 * len(g["edge_tensor"])
    assert max(g["edges"]) < n and all(-1 <= p < n for p in g["parent"])
    json.dumps(g)  # JSON-ready


def test_rolled_calls_are_not_sent(cnn_trace):
    g = graph_payload(cnn_trace)
    assert "blocks.1" not in g["name"] and "blocks.0" in g["name"]
    k = g["name"].index("blocks.0")
    assert [k, 3, "blocks.0-2"] in g["rolled"]
    flat = graph_payload(cnn_trace, rolled=False)
    assert "blocks.1" in flat["name"] and flat["rolled"] == []
    assert len(flat["ids"]) == len(cnn_trace.nodes)


def test_shapes_are_interned_text(cnn_trace):
    g = graph_payload(cnn_trace)
    stem = g["name"].index("stem")
    assert [g["tensors"][i] for i in g["ins"][stem]] == ["2x3x16x16 float32"]
    assert [g["tensors"][i] for i in g["outs"][stem]] == ["2x8x16x16 float32"]
    assert len(g["tensors"]) == len(set(g["tensors"]))


def test_metrics_sum_rolled_calls(cnn_trace):
    g, m, expanded = graph_state(cnn_trace)
    assert set(m) == set(METRICS)
    k = g["name"].index("blocks.0")
    calls = [n for n in cnn_trace.nodes if n.name in ("blocks.0", "blocks.1", "blocks.2")]
    assert m["fwd_time"][k] == float(f"{sum(n.fwd_time for n in calls):.4g}")
    params = {r["path"]: r["params"] for r in cnn_trace.rows()}
    assert m["params"][k] == 3 * params["blocks.0"]
    assert m["params"][g["name"].index("")] == cnn_trace.total_params
    assert set(expanded) == set(visible_graph(cnn_trace).groups)


def test_metrics_round_to_four_digits(cnn_trace):
    m = node_metrics(cnn_trace)
    for v in m["fwd_time"]:
        assert v == float(f"{v:.4g}")  # four significant digits, whatever the exponent


def test_structure_key_ignores_figures(cnn_trace):
    slower = cnn_trace.replace(
        nodes=tuple(
            n.__class__(**{**n.__dict__, "fwd_time": n.fwd_time * 2}) for n in cnn_trace.nodes
        )
    )
    assert structure_key(slower) == structure_key(cnn_trace)
    assert structure_key(cnn_trace, rolled=False) != structure_key(cnn_trace)


def test_profile_payload(cnn_trace):
    p = profile_payload(cnn_trace)
    assert p["columns"] == list(PROFILE_COLUMNS)
    assert len(p["rows"]) == len(cnn_trace.modules)
    root = p["rows"][0]
    assert root[0] == "" and root[p["columns"].index("params")] == cnn_trace.total_params
    assert p["output"][0] == "2x10"


def test_memory_payload(memory_trace, cnn_trace):
    m = memory_payload(memory_trace)
    assert m["categories"] == ["parameters", "gradients", "optimizer", "activations", "temporaries"]
    assert m["time"] == [0, 0.1, 0.2, 0.3]
    assert m["bytes"][m["categories"].index("optimizer")] == [0, 0, 0, 2000]
    empty = memory_payload(cnn_trace.replace(memory=(), memory_meta=None))
    assert empty == {"time": [], "phase": [], "module": [], "categories": [], "bytes": [],
                     "largest": []}  # fmt: skip


def test_bytes_per_node_stay_small(cnn_trace):
    g, m, _ = graph_state(cnn_trace)
    per_node = payload_bytes(g, m) / len(g["ids"])
    assert per_node < 200, per_node
