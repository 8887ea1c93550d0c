"""The graph's static picture draws what the live view draws: frames, rolled blocks, labels."""

from __future__ import annotations

import io
import itertools

import torch
from PIL import Image

import labkit
from labkit.trace.graph import canonicalize, visible_graph
from labkit.views import GraphView
from labkit.views._graph_picture import (
    MAX_BOXES,
    SCALE,
    collapse_to_fit,
    count_boxes,
    edge_points,
    heat,
    ink_on,
    layout,
)
from labkit.views._static import graph_png, sub_line


def _overlap(a, b):
    return a[0] < b[0] + b[2] and b[0] < a[0] + a[2] and a[1] < b[1] + b[3] and b[1] < a[1] + a[3]


def test_frames_hold_their_children_and_boxes_never_overlap(cnn_trace):
    canon = canonicalize(cnn_trace)
    calls = {n.id for n in cnn_trace.nodes if n.kind == "module"}
    g = visible_graph(cnn_trace, expanded=calls, canon=canon)
    lay = layout(cnn_trace, g, {k: (80.0, 36.0) for k in g.boxes}, {})
    for k in g.boxes:  # inside every frame around it
        p = cnn_trace.nodes[k].parent
        while p is not None:
            if p in lay.pos:
                x, y, w, h = lay.pos[p]
                bx, by, bw, bh = lay.pos[k]
                assert x <= bx and bx + bw <= x + w and y < by and by + bh <= y + h, (k, p)
            p = cnn_trace.nodes[p].parent
    boxes = [lay.pos[k] for k in g.boxes]
    for i, a in enumerate(boxes):
        assert not any(_overlap(a, b) for b in boxes[i + 1 :])
    for s, d in g.edges:  # every edge goes down, round the boxes between
        pts = edge_points(lay.pos[s], lay.pos[d], boxes)
        assert pts[0][1] < pts[-1][1]
        for p in pts[1:-1]:
            assert not any(x < p[0] < x + w and y < p[1] < y + h for x, y, w, h in boxes)


def test_picture_is_2x_and_has_the_rolled_frame(cnn_trace):
    png = graph_png(cnn_trace, depth=9)
    img = Image.open(io.BytesIO(png))
    assert round(img.info["dpi"][0]) == 72 * SCALE
    # the rolled block is drawn as a frame (expanded at depth 9) with its x3 badge: the
    # badge's dark fill is there
    colors = {c for _, c in img.convert("RGB").getcolors(maxcolors=1 << 20)}
    assert (73, 80, 87) in colors


def test_second_lines_are_types_and_shapes_not_figures(cnn_trace):
    subs = {cnn_trace.nodes[k].name: sub_line(cnn_trace, k) for k in range(len(cnn_trace.nodes))}
    assert subs["stem"] == "Conv2d"
    assert subs["x"] == "2x3x16x16" and subs["output"] == "2x10"
    relu = next(n for n in cnn_trace.nodes if n.kind == "op" and n.name == "relu")
    assert sub_line(cnn_trace, relu.id) == "2x8x16x16"


def test_a_big_graph_is_drawn_collapsed_fast_and_says_so():
    from benchmarks.widget_layout import synthetic_trace

    t = synthetic_trace(5000)
    calls = [n.id for n in t.nodes if n.kind == "module"]
    canon = canonicalize(t, rolled=False)
    assert count_boxes(t, canon, set(calls)) > MAX_BOXES
    g, kept = collapse_to_fit(t, calls, canon)
    assert kept is not None and len(g.boxes) <= MAX_BOXES
    view = GraphView(t, expanded=calls, rolled=False)
    assert Image.open(io.BytesIO(view.to_png())).width > 0


def test_counting_boxes_agrees_with_visible_graph(cnn_trace):
    canon = canonicalize(cnn_trace)
    every = {n.id for n in cnn_trace.nodes if n.kind == "module"}
    for opened in (set(), set(visible_graph(cnn_trace).groups), every):
        want = len(visible_graph(cnn_trace, expanded=opened, canon=canon).boxes)
        assert count_boxes(cnn_trace, canon, opened) == want


def test_colours_and_ink_follow_the_live_view():
    color = heat([1.0, 1000.0])  # spans more than a decade: log scale
    assert color(0) == (238, 238, 238)
    assert color(1000.0) == (153, 52, 4) and color(1.0) == (255, 247, 188)
    assert ink_on((153, 52, 4)) == (255, 255, 255) and ink_on((255, 247, 188)) == (0, 0, 0)


def test_unrolled_view_draws_every_call():
    torch.manual_seed(0)
    net = torch.nn.Sequential(*[torch.nn.Linear(4, 4) for _ in range(3)])
    t = labkit.trace(net, torch.randn(2, 4))
    view = GraphView(t)
    rolled = Image.open(io.BytesIO(view.to_png())).height
    view.rolled = False
    assert Image.open(io.BytesIO(view.to_png())).height > rolled  # three boxes, not one


def _crosses(p, q, rect, step=1.0):
    """Whether the segment p-q passes through the rectangle (x, y, w, h) (sampled)."""
    x, y, w, h = rect
    n = max(1, int(max(abs(q[0] - p[0]), abs(q[1] - p[1])) / step))
    for i in range(n + 1):
        t = i / n
        px, py = p[0] + (q[0] - p[0]) * t, p[1] + (q[1] - p[1]) * t
        if x < px < x + w and y < py < y + h:
            return True
    return False


def test_edges_never_cross_a_frame_label(cnn_trace):
    from labkit.views._graph_picture import _HEADER, _width, edge_routes

    canon = canonicalize(cnn_trace)
    calls = {n.id for n in cnn_trace.nodes if n.kind == "module"}
    g = visible_graph(cnn_trace, expanded=calls, canon=canon)
    head = {
        k: f"{cnn_trace.nodes[k].name or 'ResCNN'} · {cnn_trace.nodes[k].type}" for k in g.groups
    }
    header = {k: 12 + _width(head[k], 11, bold=True) + 16 for k in g.groups}
    lay = layout(cnn_trace, g, {k: (80.0, 36.0) for k in g.boxes}, header)
    # each frame's label, where draw() writes it: from x + 8, across the header's height
    labels = {
        k: (lay.pos[k][0] + 8, lay.pos[k][1], _width(head[k], 11, bold=True), _HEADER)
        for k in g.groups
    }
    routes = edge_routes(cnn_trace, g, lay)
    assert len(routes) == len(g.edges) and len(g.groups) >= 3
    entering = 0
    for (s, d), pts in zip(g.edges, routes, strict=True):
        assert pts[0] == (lay.pos[s][0] + lay.pos[s][2] / 2, lay.pos[s][1] + lay.pos[s][3])
        assert pts[-1] == (lay.pos[d][0] + lay.pos[d][2] / 2, lay.pos[d][1])
        entering += len(pts) > 2
        for k, rect in labels.items():
            for p, q in itertools.pairwise(pts):
                assert not _crosses(p, q, rect), (
                    cnn_trace.nodes[s].name,
                    cnn_trace.nodes[d].name,
                    head[k],
                )
    assert entering  # some edges turn into frames: the rule is exercised
    # the old straight route crossed a label here (what this test guards)
    boxes = [lay.pos[k] for k in g.boxes]
    straight = [edge_points(lay.pos[s], lay.pos[d], boxes) for s, d in g.edges]
    assert any(
        _crosses(p, q, rect)
        for pts in straight
        for p, q in itertools.pairwise(pts)
        for rect in labels.values()
    )
