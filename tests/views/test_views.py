"""The widgets' traits, reprs, static fallbacks and throttled updates (real comm objects)."""

from __future__ import annotations

import base64
import dataclasses
import io
import json
import subprocess
import sys
import time

import comm
import pytest
import torch
from comm.base_comm import BaseComm
from torch.utils.flop_counter import FlopCounterMode

from labkit.trace.graph import visible_graph
from labkit.views import GraphView, MemoryTimeline, ProfileView, TraceView
from labkit.views._keep import LABKIT_MIME
from labkit.views._payload import graph_state, profile_payload
from labkit.views.graph import _ids_of
from labkit.views.memory import EMPTY_MESSAGE
from tests.trace._models import ResCNN

PNG = b"\x89PNG"


class RecordingComm(BaseComm):
    """A comm that keeps every message the widget publishes instead of sending it."""

    sent: list[dict] = []

    def publish_msg(self, msg_type, data=None, metadata=None, buffers=None, **keys):
        data = dict(data or {})
        if buffers and "state" in data:  # GraphView's graph and metrics: one buffer of JSON
            data["state"] = dict(data["state"])
            for path, buf in zip(data["buffer_paths"], buffers, strict=True):
                assert len(path) == 1, path
                key = path[0]  # expanded: one buffer of int32
                data["state"][key] = _ids_of(buf) if key == "expanded" else json.loads(bytes(buf))
        RecordingComm.sent.append({"type": msg_type, "data": data, "time": time.monotonic()})


@pytest.fixture
def comms(monkeypatch):
    RecordingComm.sent = []
    monkeypatch.setattr(comm, "create_comm", RecordingComm)
    return RecordingComm.sent


def updates(sent, key):
    return [m for m in sent if m["data"].get("method") == "update" and key in m["data"]["state"]]


def slower(trace, factor):
    nodes = tuple(dataclasses.replace(n, fwd_time=n.fwd_time * factor) for n in trace.nodes)
    return trace.replace(nodes=nodes)


def test_graph_traits(cnn_trace, comms):
    view = GraphView(cnn_trace, metric="flops")
    graph, metrics, expanded = graph_state(cnn_trace)
    assert view.graph == graph and view.metrics == metrics and view.expanded == expanded
    assert view.metric == "flops" and view.selected is None and view.selected_node == -1
    opened = next(m for m in comms if m["type"] == "comm_open" and "graph" in m["data"]["state"])
    # the graph and its metrics travel as buffers of JSON (no per-list walk by ipywidgets)
    assert ["graph"] in opened["data"]["buffer_paths"]
    assert ["metrics"] in opened["data"]["buffer_paths"]
    opened = opened["data"]["state"]
    assert opened["graph"]["ids"] == graph["ids"] and opened["expanded"] == expanded
    assert view.visible() == visible_graph(cnn_trace)
    # the traits hold the model's own figures: FLOPs as torch's FlopCounterMode counts them
    # (forward and backward), parameters from the model, the three blocks rolled into one
    torch.manual_seed(0)
    model, x = ResCNN(blocks=3), torch.randn(2, 3, 16, 16)
    with FlopCounterMode(display=False) as counter:
        model(x).sum().backward()
    counts = counter.get_flop_counts()
    names = view.graph["name"]
    for path, scope in (
        ("", "ResCNN"),
        ("stem", "ResCNN.stem"),
        ("blocks", "ResCNN.blocks"),
        ("head", "ResCNN.head"),
    ):
        reference = sum(counts[scope].values())
        assert view.metrics["flops"][names.index(path)] == pytest.approx(reference, rel=1e-3)
    assert view.metrics["params"][names.index("")] == sum(p.numel() for p in model.parameters())
    assert view.graph["rolled"] == [[names.index("blocks.0"), 3, "blocks.0-2"]]


def test_graph_depth_recomputes_expanded(cnn_trace, comms):
    view = GraphView(cnn_trace)
    view.depth = 0
    assert view.expanded == []
    view.depth = 9
    assert len(view.visible().groups) == 3


def test_reprs(cnn_trace, memory_trace, comms):
    g = GraphView(cnn_trace)
    assert repr(g) == "GraphView(model=ResCNN, nodes=52, boxes=7, groups=2, metric='fwd_time')"
    g.selected = "head"
    assert repr(g).endswith("metric='fwd_time', selected='head')")
    p = ProfileView(cnn_trace, metric="flops", top=5)
    assert (
        repr(p) == "ProfileView(model=ResCNN, modules=19, metric='flops', sort='fwd_time', top=5)"
    )
    m = MemoryTimeline(memory_trace)
    assert repr(m) == (
        "MemoryTimeline(model=ResCNN, samples=4, categories=['parameters', 'gradients', "
        "'optimizer', 'activations', 'temporaries'], peak=4000 B at '-')"
    )
    assert (
        repr(TraceView(cnn_trace)) == "TraceView(model=ResCNN, tabs=['Graph', 'Profile', 'Memory'])"
    )


def test_profile_sorting_and_top(cnn_trace, comms):
    p = ProfileView(cnn_trace, sort="params", metric="params", top=3)
    assert p.table == profile_payload(cnn_trace)
    assert p.sorted_paths()[0] == ""
    p.descending = False
    assert p.sorted_paths()[-1] == ""
    top = p.top_rows()
    assert len(top) == 3 and top[0][1] >= top[1][1] >= top[2][1]


def test_memory_peak_and_empty(memory_trace, cnn_trace, comms):
    m = MemoryTimeline(memory_trace)
    assert m.peak() == (0.3, 4000, "optimizer", "")
    empty = MemoryTimeline(cnn_trace.replace(memory=()))
    assert empty.peak() is None and empty.empty_message == EMPTY_MESSAGE
    assert "labkit.memory(...)" in EMPTY_MESSAGE and "mode='full'" in EMPTY_MESSAGE


def test_same_structure_update_sends_only_metrics(cnn_trace, comms):
    view = GraphView(cnn_trace, throttle=0)
    comms.clear()
    view.update(slower(cnn_trace, 2.0))
    assert updates(comms, "metrics") and not updates(comms, "graph")
    assert not updates(comms, "expanded")


def test_changed_structure_update_sends_a_new_graph(cnn_trace, comms):
    import torch

    import labkit
    from tests.trace._models import MLP

    view = GraphView(cnn_trace, throttle=0)
    comms.clear()
    view.update(labkit.trace(MLP(), torch.randn(2, 8)))
    assert updates(comms, "graph") and view.graph["model"] == "MLP"


def test_live_updates_are_throttled_and_end_on_the_final_state(cnn_trace, comms):
    view = GraphView(cnn_trace, throttle=0.1)
    traces = [slower(cnn_trace, 1 + i / 100) for i in range(100)]
    comms.clear()
    start = time.monotonic()
    for tr in traces:  # a tight loop: the trainer never waits on the browser
        view.update(tr)
    loop = time.monotonic() - start
    assert loop < 30  # a hang guard only; the speed is benchmarks/widget_layout's
    # events, not wall time: during the loop at most one message per 0.1 s went out
    assert len(updates(comms, "metrics")) <= 10 * loop + 2
    deadline = time.monotonic() + 30  # hang guard
    while view._throttle.pending or view.trace is not traces[-1]:
        assert time.monotonic() < deadline, "the last update was never delivered"
        time.sleep(0.01)
    sent = updates(comms, "metrics")
    elapsed = max(sent[-1]["time"] - start, 0.1)
    assert 1 <= len(sent) <= 10 * elapsed + 2 and len(sent) < len(traces)
    assert sent[-1]["data"]["state"]["metrics"] == view.metrics
    assert view.metrics == graph_state(traces[-1])[1]


def test_mimebundle_has_the_picture_as_images_and_text(cnn_trace, memory_trace, comms):
    """Issue 37 item 1: image/png (SVG where small) and text/plain, no text/html (a
    sanitizer would show it as source, and a viewer picks it before the image)."""
    from PIL import Image

    views = (GraphView(cnn_trace), ProfileView(cnn_trace), MemoryTimeline(memory_trace))
    for view in (*views, TraceView(memory_trace)):
        data, meta = view._repr_mimebundle_()
        assert "application/vnd.jupyter.widget-view+json" in data
        assert data[LABKIT_MIME] == {"version": 1, "view": type(view).__name__}
        assert "text/html" not in data, type(view).__name__
        png = base64.b64decode(data["image/png"])
        assert png.startswith(PNG)
        if isinstance(view, GraphView | TraceView):  # drawn at 2x: shown at half its width
            assert meta["image/png"] == {"width": Image.open(io.BytesIO(png)).width // 2}
            assert "image/svg+xml" not in data  # a graph's SVG can be huge: PNG only
            assert "blocks" in data["text/plain"]  # the summary table
        if isinstance(view, ProfileView):  # the chart as SVG too; every module in the text
            assert data["image/svg+xml"].lstrip().startswith("<?xml")
            assert "blocks.0" in data["text/plain"] and "Params" in data["text/plain"]
    # TraceView: the graph with the memory timeline under it, one picture
    data, _ = TraceView(memory_trace)._repr_mimebundle_()
    both = Image.open(io.BytesIO(base64.b64decode(data["image/png"])))
    graph = Image.open(io.BytesIO(memory_trace.plot("graph")))
    assert both.height > graph.height + 300 and both.width >= graph.width


def test_static_pictures(cnn_trace, memory_trace):
    assert cnn_trace.plot("graph", metric="flops").startswith(PNG)
    assert cnn_trace.plot("profile").startswith(PNG)
    assert memory_trace.plot("memory").startswith(PNG)
    assert cnn_trace.replace(memory=()).plot("memory").startswith(PNG)
    with pytest.raises(ValueError, match="graph"):
        cnn_trace.plot("sunburst")
    html = cnn_trace._repr_html_()  # outside IPython's formatters (which use the PNG)
    assert "data:image/png;base64," in html and "blocks" in html


def test_show_links_the_views(cnn_trace, comms):
    view = cnn_trace.show(metric="bwd_time", depth=1)
    assert isinstance(view, TraceView)
    assert view.graph.metric == view.profile.metric == "bwd_time"
    assert len(view.graph.visible().groups) == 1
    assert view.titles == ("Graph", "Profile", "Memory")


def test_missing_bundle_names_the_fix(cnn_trace, comms, tmp_path, monkeypatch):
    monkeypatch.setenv("LABKIT_WIDGET_ASSETS", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="npm --prefix widgets"):
        GraphView(cnn_trace)


def test_import_labkit_stays_light():
    code = (
        "import sys, labkit, labkit.views; "
        "heavy = [m for m in ('anywidget', 'ipywidgets', 'matplotlib') if m in sys.modules]; "
        "print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_explicit_expanded_survives_init(cnn_trace, comms):
    calls = [n.id for n in cnn_trace.nodes if n.kind == "module"]
    view = GraphView(cnn_trace, expanded=calls, rolled=False)
    assert view.expanded == sorted(calls)
    assert len(view.visible().groups) == len(calls)


def test_big_graph_picture_shows_the_top_levels_and_says_so(comms):
    from benchmarks.widget_layout import synthetic_trace

    t = synthetic_trace(1000)
    view = GraphView(t, expanded=[n.id for n in t.nodes if n.kind == "module"], rolled=False)
    start = time.monotonic()
    data, _ = view._repr_mimebundle_()
    assert time.monotonic() - start < 60  # a hang guard (the speed: benchmarks/widget_layout.py)
    assert "text/html" not in data and base64.b64decode(data["image/png"]).startswith(PNG)


def test_memory_picture_puts_phase_names_above_the_fill(memory_trace):
    """Issue 37 item 7: the phase names sit in a strip above the stacked areas (walkthrough
    02's picture had them at y=0, on the fill)."""
    from labkit.views._payload import memory_payload
    from labkit.views._static import memory_figure

    ax = memory_figure(memory_trace).axes[0]
    phases = set(memory_payload(memory_trace)["phase"])
    names = [t for t in ax.texts if t.get_text() in phases]
    assert names, [t.get_text() for t in ax.texts]
    m = memory_payload(memory_trace)
    top = max(sum(col[i] for col in m["bytes"]) for i in range(len(m["time"]))) / 2**20
    fill_top = top / ax.get_ylim()[1]  # the highest fill, as a fraction of the axes
    fills = [c.get_zorder() for c in ax.collections]
    for t in names:
        assert t.get_transform() == ax.get_xaxis_transform()  # y in axes fractions
        assert t.get_position()[1] - 0.03 > fill_top  # the text's bottom above the fill
        assert t.get_zorder() > max(fills)
