"""What the widgets send for a given Trace."""

from __future__ import annotations

import json

import pytest
import torch

from labkit.optimize import Recipe
from labkit.panels import AttentionView, OptimizePanel
from labkit.trace.graph import visible_graph
from labkit.trace.merge import merge
from labkit.trace.model import MEMORY_CATEGORIES, MemorySample
from labkit.views import GraphView, MemoryTimeline, ProfileView
from labkit.views._contract import (
    UNITS,
    AttentionPayload,
    Curve,
    DashboardSeries,
    DashboardStats,
    GraphMarks,
    GraphPayload,
    MemoryPayload,
    NodeMetrics,
    OptimizeRow,
    ProfilePayload,
    RecipeChoices,
    RecipeField,
    RecipeLocks,
    RecipeState,
    problems,
)
from labkit.views._payload import (
    MEMORY_COLORS,
    METRIC_UNITS,
    METRICS,
    OTHER_COLOR,
    PROFILE_COLUMNS,
    PROFILE_HEADERS,
    PROFILE_METRIC_COLUMNS,
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
    assert m["colors"] == [MEMORY_COLORS[c] for c in m["categories"]]
    assert len(set(MEMORY_COLORS.values())) == len(MEMORY_CATEGORIES)  # one colour each
    odd = memory_trace.replace(memory=(MemorySample(0.0, "forward", "", {"cuda_graphs": 8}),))
    assert memory_payload(odd)["colors"] == [OTHER_COLOR]
    empty = memory_payload(cnn_trace.replace(memory=(), memory_meta=None))
    assert empty == {
        "time": [],
        "phase": [],
        "module": [],
        "categories": [],
        "bytes": [],
        "colors": [],
        "largest": [],
        "peak_where": "",
    }
    # the header names where the peak is as the summary does (a backward sample has no module)
    real = memory_payload(cnn_trace)["peak_where"]
    assert real and real == cnn_trace.memory_meta.peak_where, real


def test_bytes_per_node_stay_small(cnn_trace):
    g, m, _ = graph_state(cnn_trace)
    per_node = payload_bytes(g, m) / len(g["ids"])
    assert per_node < 200, per_node


# ------------------------------------------------------------------ the written contract
# Every dict trait a view sends, on real recordings, against its TypedDict in _contract.


def _conforms(value, tp, where):
    wrong = problems(value, tp, where)
    assert not wrong, "\n".join(wrong[:10])


def test_trace_views_send_what_the_contract_says(cnn_trace):
    assert len(cnn_trace.memory) > 10 and cnn_trace.memory_meta.largest  # really recorded
    graph, profile, memory = GraphView(cnn_trace), ProfileView(cnn_trace), MemoryTimeline(cnn_trace)
    _conforms(graph.graph, GraphPayload, "GraphView.graph")
    _conforms(graph.metrics, NodeMetrics, "GraphView.metrics")
    marked = GraphView(cnn_trace, breaks=[{"module": "blocks.1.conv1", "reason": "print()"}])
    _conforms(marked.marks, GraphMarks, "GraphView.marks")
    assert marked.marks  # the break's call is marked
    _conforms(graph_payload(cnn_trace, rolled=False), GraphPayload, "flat graph")
    _conforms(profile.table, ProfilePayload, "ProfileView.table")
    _conforms(memory.samples, MemoryPayload, "MemoryTimeline.samples")
    merged = merge(cnn_trace, cnn_trace)
    table = profile_payload(merged)
    _conforms(table, ProfilePayload, "merged ProfileView.table")
    assert list(table["headers"])[2:4] == ["calls", "runs"]  # shown after calls


def test_labels_and_units_are_sent_once_from_python(cnn_trace):
    g, p = graph_payload(cnn_trace), profile_payload(cnn_trace)
    expected = {m: [label, METRIC_UNITS[m]] for m, label in METRICS.items()}
    assert g["metrics"] == p["metrics"] == expected
    assert p["metric_columns"] == {m: list(c) for m, c in PROFILE_METRIC_COLUMNS.items()}
    units = {u for _, u in PROFILE_HEADERS.values()} | set(METRIC_UNITS.values())
    assert units <= set(UNITS), units - set(UNITS)
    assert set(PROFILE_HEADERS) <= {*PROFILE_COLUMNS, "runs"}
    # shown in PROFILE_HEADERS order, only the columns the rows carry (no runs: one run)
    assert list(p["headers"]) == [c for c in PROFILE_HEADERS if c != "runs"]
    assert p["headers"]["saved_bytes"] == ["Saved", "bytes"]


# PyG 2.8 calls torch.jit.script when imported; torch 2.13 deprecates it (not labkit's to fix)
@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
def test_attention_view_sends_what_the_contract_says():
    from labkit.gnn import GAT, karate

    torch.manual_seed(0)
    data = karate()
    view = AttentionView(GAT(data.num_features, 4, 4, heads=2), data, node=0, hops=2)
    _conforms(view.view, AttentionPayload, "AttentionView.view")
    assert {e["hop"] for e in view.view["edges"]} == {1, 2}


def test_dashboard_sends_what_the_contract_says(tmp_path):
    from labkit import Lab
    from tests.train._helpers import LOSS, datasets, mlp

    lab = Lab(mlp(), datasets(), loss=LOSS, logdir=tmp_path)
    lab.fit(max_epochs=2, histogram_every=3, dashboard=True)
    dash = lab.dashboard
    _conforms(dash.stats, DashboardStats, "Dashboard.stats")
    _conforms(dash.series, DashboardSeries, "Dashboard.series")
    _conforms(dash.grad_norms, dict[str, float], "Dashboard.grad_norms")
    assert dash.stats["step"] == 6 and set(dash.series) == {"train_loss", "val_loss"}
    assert dash.grad_norms  # histogram_every=3 sent gradient norms


def test_optimize_panel_sends_what_the_contract_says():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    panel = OptimizePanel(
        model,
        torch.randn(8, 16),
        recipe=Recipe(channels_last=True),
        mode="inference",
        steps=5,
        warmup=0,
        drift=False,
        memory=False,
        batch_sizes=(2, 4),
    )
    _conforms(panel.recipe_state, RecipeState, "OptimizePanel.recipe_state")
    _conforms(panel.choices, RecipeChoices, "OptimizePanel.choices")
    _conforms(panel.locks, RecipeLocks, "OptimizePanel.locks")
    assert "checkpoint" in panel.locks  # no backward in inference
    panel.measure().join(timeout=120)
    assert panel.error == "", panel.error
    assert len(panel.results) == 2
    _conforms(panel.results, list[OptimizeRow], "OptimizePanel.results")
    assert [b["batch_size"] for b in panel.results[1]["per_batch"]] == [2, 4]


def test_the_checker_names_what_is_wrong(cnn_trace):
    g = dict(graph_payload(cnn_trace))
    assert problems(g, GraphPayload) == []
    del g["metrics"]
    g["extra"] = 1
    g["parent"] = [*g["parent"][:-1], None]
    g["total_runs"] = True  # a bool is not an int in the contract
    assert problems(g, GraphPayload) == [
        "payload: no 'metrics' (GraphPayload needs it)",
        "payload: 'extra' is not a field of GraphPayload",
        f"payload['parent'][{len(g['parent']) - 1}]: None is not an int",
        "payload['total_runs']: True is not an int",
    ]
    assert problems({"x": [1], "y": [None]}, Curve) == ["payload['y'][0]: None is not a float"]
    assert problems({"a": [0.5, 2]}, NodeMetrics) == []
    check = {
        "name": "fuse_conv_bn",
        "label": "fuse conv bn",
        "kind": "check",
        "modes": [],
        "hints": {},
        "with_export": True,
    }
    assert problems(check, RecipeField) == []  # options, sets_mode, placeholder: optional
    assert problems({**check, "options": [{}]}, RecipeField)[0] == (
        "payload['options'][0]: no 'value' (SelectOption needs it)"
    )
    del check["modes"]
    assert problems(check, RecipeField) == ["payload: no 'modes' (RecipeField needs it)"]
