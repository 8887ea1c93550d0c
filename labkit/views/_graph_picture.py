"""The graph view's static picture: nested frames, rolled blocks and colours as drawn live.

Drawn with Pillow (fast at any size: no matplotlib artists per box) at 2x resolution. The
layout follows the browser's rules (``widgets/src/_layout.js``) in a simpler form: each
expanded call is a frame around its children, laid out in layers along the edges
(execution order is a topological order), boxes sized to their text so labels never
overlap. Above :data:`MAX_BOXES` drawn boxes the picture shows the top levels collapsed
and says so, so it is made in well under a second for any graph.
"""

from __future__ import annotations

import io
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, Any

from labkit.trace.graph import VisibleGraph, module_depths, visible_graph

if TYPE_CHECKING:
    from PIL import ImageFont

    from labkit.trace.graph import Canon
    from labkit.trace.model import Trace

#: Above this many drawn boxes the picture collapses calls from the deepest level up.
MAX_BOXES = 400
#: Resolution: drawing units per pixel (2 = sharp on high-density screens).
SCALE = 2
_PAD, _HEADER, _GAP_X, _GAP_Y, _BOX_H = 10, 22, 16, 26, 36
_STOPS = ((255, 247, 188), (254, 196, 79), (236, 112, 20), (153, 52, 4))  # _graphcore.js
NEUTRAL = (238, 238, 238)
_EDGE, _FRAME, _FRAME_FILL = (154, 163, 173), (170, 170, 187), (246, 247, 249)
_INK2 = (107, 114, 128)
_ERROR = (183, 28, 28)


@cache
def _font(size: int, bold: bool = False) -> ImageFont.FreeTypeFont:
    from importlib.util import find_spec
    from pathlib import Path

    from PIL import ImageFont

    # matplotlib's own copy of DejaVu Sans (found, not imported): on every machine
    spec = find_spec("matplotlib")
    assert spec is not None and spec.origin is not None  # a dependency of labkit
    name = f"DejaVuSans{'-Bold' if bold else ''}.ttf"
    path = Path(spec.origin).parent / "mpl-data" / "fonts" / "ttf" / name
    return ImageFont.truetype(str(path), size * SCALE)


def _width(text: str, size: float, bold: bool = False) -> float:
    return float(_font(round(size), bold).getlength(text)) / SCALE


def heat(values: Iterable[float]) -> Any:
    """The browser's colour scale (``colorScale``): log when the positive values span
    more than a decade, :data:`NEUTRAL` for zero. Returns ``value -> (r, g, b)``."""
    pos = [v for v in values if v > 0]
    if not pos:
        return lambda v: NEUTRAL
    lo, hi = min(pos), max(pos)
    log = hi / lo > 10

    def mix(t: float) -> tuple[int, int, int]:
        x = min(1.0, max(0.0, t)) * (len(_STOPS) - 1)
        i = min(len(_STOPS) - 2, int(x))
        f = x - i
        a, b = _STOPS[i], _STOPS[i + 1]
        r, g, bb = (round(a[j] + (b[j] - a[j]) * f) for j in range(3))
        return (r, g, bb)

    def color(v: float) -> tuple[int, int, int]:
        if not v > 0:
            return NEUTRAL
        if hi == lo:
            return mix(1.0)
        t = (math.log(v) - math.log(lo)) / (math.log(hi) - math.log(lo)) if log else v / hi
        return mix(t)

    return color


def ink_on(rgb: tuple[int, int, int]) -> tuple[int, int, int]:
    """Black or white text, whichever contrasts more with ``rgb`` (WCAG, as ``inkOn``)."""
    lin = [
        (c / 255) / 12.92 if c / 255 <= 0.04045 else ((c / 255 + 0.055) / 1.055) ** 2.4 for c in rgb
    ]
    lum = 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]
    return (0, 0, 0) if (lum + 0.05) / 0.05 >= 1.05 / (lum + 0.05) else (255, 255, 255)


@dataclass
class Laid:
    """Positions of a nested layout: ``pos[node] = (x, y, w, h)`` in drawing units."""

    pos: dict[int, tuple[float, float, float, float]] = field(default_factory=dict)
    width: float = 0.0
    height: float = 0.0


def layout(
    trace: Trace,
    g: VisibleGraph,
    box_size: Mapping[int, tuple[float, float]],
    header: Mapping[int, float],
) -> Laid:
    """Frames around their children, layers along the edges, rows centred in each frame."""
    groups = set(g.groups)
    members, level_edges = _levels(trace, g)
    size: dict[int, tuple[float, float]] = dict(box_size)
    rel: dict[int, dict[int, tuple[float, float]]] = {}
    dims: dict[int, tuple[float, float]] = {}

    def measure(c: int) -> None:
        items = members.get(c, [])
        for k in items:
            if k in groups:
                measure(k)
        rel[c], dims[c] = _rows(items, level_edges.get(c, set()), size)
        if c != -1:
            width, height = dims[c]
            size[c] = (max(width + 2 * _PAD, header.get(c, 90.0), 90.0), height + _HEADER + _PAD)

    measure(-1)
    out = Laid()

    def place(c: int, ox: float, oy: float) -> None:
        for k, (x, y) in rel[c].items():
            w, h = size[k]
            out.pos[k] = (ox + x, oy + y, w, h)
            if k in groups:
                place(k, ox + x + (w - dims[k][0]) / 2, oy + y + _HEADER)

    place(-1, _PAD, _PAD)
    out.width, out.height = dims[-1][0] + 2 * _PAD, dims[-1][1] + 2 * _PAD
    return out


def _levels(
    trace: Trace, g: VisibleGraph
) -> tuple[dict[int, list[int]], dict[int, set[tuple[int, int]]]]:
    """Per frame (``-1``: the top), its drawn children and the edges between them."""
    drawn = sorted([*g.boxes, *g.groups])
    drawn_set = set(drawn)
    members: dict[int, list[int]] = {-1: [], **{gr: [] for gr in g.groups}}
    container: dict[int, int] = {}
    for k in drawn:
        p = trace.nodes[k].parent
        while p is not None and p not in drawn_set:
            p = trace.nodes[p].parent
        container[k] = -1 if p is None else p
        members[container[k]].append(k)

    def chain(k: int) -> list[int]:
        out = [k]
        while (c := container[out[-1]]) != -1:
            out.append(c)
        return [-1, *out[::-1]]

    level_edges: dict[int, set[tuple[int, int]]] = {}
    for s, d in g.edges:
        cs, cd = chain(s), chain(d)
        i = 0
        while i < min(len(cs), len(cd)) and cs[i] == cd[i]:
            i += 1
        if i < len(cs) and i < len(cd):
            level_edges.setdefault(cs[i - 1], set()).add((cs[i], cd[i]))
    return members, level_edges


def _rows(
    items: list[int], edges: set[tuple[int, int]], size: Mapping[int, tuple[float, float]]
) -> tuple[dict[int, tuple[float, float]], tuple[float, float]]:
    """One frame's children in layers (longest path), each row centred: positions
    relative to the frame's inside, and its width and height."""
    preds: dict[int, list[int]] = {k: [] for k in items}
    for a, b in edges:
        preds[b].append(a)
    layer: dict[int, int] = {}
    rows: dict[int, list[int]] = {}
    for k in items:  # execution order: a topological order
        layer[k] = max((layer[p] + 1 for p in preds[k] if p in layer), default=0)
        rows.setdefault(layer[k], []).append(k)
    centre: dict[int, float] = {}
    placed: list[tuple[list[int], float]] = []
    y = width = 0.0
    for r in sorted(rows):
        row = rows[r]
        # under their predecessors (fewer crossings), then in execution order
        row.sort(key=lambda k: (_mean([centre[p] for p in preds[k]]), k))
        w = sum(size[k][0] for k in row) + _GAP_X * (len(row) - 1)
        x = -w / 2
        for k in row:
            centre[k] = x + size[k][0] / 2
            x += size[k][0] + _GAP_X
        placed.append((row, y))
        width = max(width, w)
        y += max(size[k][1] for k in row) + _GAP_Y
    rel = {k: (width / 2 + centre[k] - size[k][0] / 2, ry) for row, ry in placed for k in row}
    return rel, (width, max(0.0, y - _GAP_Y))


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else math.inf


def collapse_to_fit(
    trace: Trace, expanded: Iterable[int], canon: Canon, limit: int = MAX_BOXES
) -> tuple[VisibleGraph, int | None]:
    """The drawn graph, with calls closed from the deepest level up until at most
    ``limit`` boxes are drawn; returns it and the depth kept (None when nothing closed)."""
    opened = set(expanded)
    if count_boxes(trace, canon, opened) <= limit:
        return visible_graph(trace, expanded=opened, canon=canon), None
    depths = module_depths(trace)
    keep: set[int] = set()
    kept = 0
    for d in range(max((depths[i] for i in opened), default=0), -1, -1):
        keep = {i for i in opened if depths[i] < d}
        kept = d
        if count_boxes(trace, canon, keep) <= limit:
            break
    return visible_graph(trace, expanded=keep, canon=canon), kept


def count_boxes(trace: Trace, canon: Canon, opened: set[int]) -> int:
    """How many boxes ``visible_graph`` draws for ``opened`` (one pass, no edges)."""
    n = len(trace.nodes)
    has_kids = [False] * n
    for x in trace.nodes:
        if x.parent is not None:
            has_kids[x.parent] = True
    shown = [False] * n  # drawn as a box or a frame
    count = 0
    for x in trace.nodes:  # parents first
        i = x.id
        if canon.alias[i] != i:
            continue
        p = x.parent
        if p is None or (shown[p] and p in opened and has_kids[p]):
            shown[i] = True
            count += not (i in opened and has_kids[i])
    return count


def draw(
    trace: Trace,
    g: VisibleGraph,
    canon: Canon,
    *,
    labels: Mapping[int, str],
    subs: Mapping[int, str],
    values: Mapping[int, float],
    title: str,
    note: str = "",
    marked: Mapping[int, int] | None = None,
    colors: Mapping[int, tuple[int, int, int]] | None = None,
    hatched: Iterable[int] = (),
) -> bytes:
    """The picture as PNG bytes (2x), frames and boxes as the live view draws them.

    ``colors`` (box -> RGB) replaces the heat colour of ``values`` (a diff's diverging
    scale); boxes in ``hatched`` get diagonal lines (a change within noise)."""
    from PIL import Image, ImageDraw

    marked = marked or {}
    hatch = set(hatched)
    fit = _fit_text
    box_size: dict[int, tuple[float, float]] = {}
    shown: dict[int, tuple[str, str]] = {}
    for k in g.boxes:
        lab, sub = fit(labels[k], 11, 224), fit(subs[k], 9.5, 224)
        shown[k] = (lab, sub)
        w = max(64.0, _width(lab, 11) + 18, _width(sub, 9.5) + 18)
        box_size[k] = (w, _BOX_H)
    head: dict[int, str] = {}
    header: dict[int, float] = {}
    for k in g.groups:
        count = canon.count[k]
        head[k] = f"{labels[k]} · {trace.nodes[k].type}"
        header[k] = 12 + _width(head[k], 11, bold=True) + (40 if count > 1 else 16)
    lay = layout(trace, g, box_size, header)
    top = 22 + (16 if note else 0)
    W = max(lay.width, _width(title, 12, bold=True) + 2 * _PAD, _width(note, 10) + 2 * _PAD)
    H = lay.height + top
    off = (W - lay.width) / 2  # a narrow graph under a wide title: centred
    lay.pos = {k: (x + off, y, w, h) for k, (x, y, w, h) in lay.pos.items()}
    img = Image.new("RGB", (math.ceil(W * SCALE), math.ceil(H * SCALE)), (255, 255, 255))
    dr = ImageDraw.Draw(img)
    S = SCALE

    def rect(x: float, y: float, w: float, h: float, **kw: Any) -> None:
        dr.rounded_rectangle([x * S, (y + top) * S, (x + w) * S, (y + top + h) * S], **kw)

    def text(
        x: float, y: float, s: str, size: float, fill: Any, anchor: str = "mm", bold: bool = False
    ) -> None:
        dr.text((x * S, (y + top) * S), s, font=_font(round(size), bold), fill=fill, anchor=anchor)

    dr.text((_PAD * S, 6 * S), title, font=_font(12, True), fill=(34, 34, 34))
    if note:
        dr.text((_PAD * S, 22 * S), note, font=_font(10), fill=_ERROR)
    for k in g.groups:  # frames, outer first (ids: parents before children)
        x, y, w, h = lay.pos[k]
        n = canon.count[k]
        if n > 1:  # a rolled block: a second frame behind, as a stack
            rect(x + 4, y - 4, w, h, radius=6 * S, outline=_FRAME, width=S, fill=(255, 255, 255))
        rect(
            x,
            y,
            w,
            h,
            radius=6 * S,
            outline=_ERROR if marked.get(k) else _FRAME,
            width=2 * S if marked.get(k) else S,
            fill=_FRAME_FILL,
        )
        text(x + 8, y + 12, head[k], 11, (34, 34, 34), anchor="lm", bold=True)
        if n > 1:
            _badge(dr, (x + w - 20) * S, (y + 12 + top) * S, f"\u00d7{n}")
    color = heat(values.get(k, 0.0) for k in g.boxes)
    for route in edge_routes(trace, g, lay):
        pts = [(px * S, (py + top) * S) for px, py in route]
        dr.line(pts, fill=_EDGE, width=max(1, round(1.2 * S)), joint="curve")
        _arrow(dr, pts[-2], pts[-1])
    for k in g.boxes:
        x, y, w, h = lay.pos[k]
        fill = colors[k] if colors is not None and k in colors else color(values.get(k, 0.0))
        ink = ink_on(fill)
        if canon.count[k] > 1:
            rect(x + 4, y - 4, w, h, radius=4 * S, outline=_INK2, width=S, fill=(255, 255, 255))
        broke = marked.get(k, 0)
        kind = trace.nodes[k].kind
        radius = 12 if kind == "op" else 4
        rect(
            x,
            y,
            w,
            h,
            radius=radius * S,
            fill=fill,
            outline=_ERROR if broke else _INK2,
            width=round(2.5 * S) if broke else S,
        )
        if k in hatch:
            _hatch(dr, (x * S, (y + top) * S, (x + w) * S, (y + top + h) * S), _INK2)
        lab, sub = shown[k]
        text(x + w / 2, y + 12, lab, 11, ink)
        text(x + w / 2, y + 25, sub, 9.5, ink)
        if broke:
            _badge(dr, x * S, (y + top) * S, str(broke), fill=_ERROR)
    buf = io.BytesIO()
    img.save(buf, format="PNG", compress_level=6, dpi=(144, 144))
    return buf.getvalue()


Box = tuple[float, float, float, float]


def edge_routes(trace: Trace, g: VisibleGraph, lay: Laid) -> list[list[tuple[float, float]]]:
    """The points of every drawn edge, as the live view routes them: an edge into a frame
    turns in at the frame's top right corner and runs down its right margin below every
    header it passes (a frame is wide enough that its label ends before that margin), one
    out of a frame runs down its left margin, and one between boxes of a frame goes round
    the boxes and frames in its way. So no edge crosses a frame's label."""
    groups = set(g.groups)
    frames: dict[int, list[int]] = {}  # drawn node -> drawn frames around it, inner first

    def around(k: int) -> list[int]:
        if k not in frames:
            p = trace.nodes[k].parent
            while p is not None and p not in groups:
                p = trace.nodes[p].parent
            frames[k] = [] if p is None else [p, *around(p)]
        return frames[k]

    pos = lay.pos
    boxes = [pos[k] for k in g.boxes]
    out = []
    for s, d in g.edges:
        a, b = pos[s], pos[d]
        fs, fd = around(s), around(d)
        left = [f for f in fs if f not in fd]  # frames the edge leaves, inner first
        entered = [f for f in fd if f not in fs]  # frames it enters
        start, end = (a[0] + a[2] / 2, a[1] + a[3]), (b[0] + b[2] / 2, b[1])
        pts = [start]
        if left:
            x, y, w, h = pos[left[-1]]
            if y + h - start[1] > _PAD + _GAP_Y:
                pts += [(x + _PAD / 2, start[1] + _GAP_Y / 3), (x + _PAD / 2, y + h)]
        if entered:
            x, y, w, h = pos[entered[-1]]
            below = max(pos[f][1] + _HEADER for f in entered)
            xr = x + w - _PAD / 2
            pts += [(xr, y - _GAP_Y / 3), (xr, max(below, end[1] - _GAP_Y / 3))]
        if not left and not entered:
            inner = fd[0] if fd else None
            beside = [pos[f] for f in g.groups if f != inner and f not in fd]
            out.append(edge_points(a, b, [*boxes, *beside]))  # round boxes and frames
            continue
        pts.append(end)
        out.append(pts)
    return out


def edge_points(a: Box, b: Box, boxes: Iterable[Box]) -> list[tuple[float, float]]:
    """From the bottom of box a to the top of box b; an edge that would pass through
    other boxes (a skip connection) runs down beside them, right of the widest."""
    xs, ys, ws, hs = a
    xd, yd, wd, _ = b
    start, end = (xs + ws / 2), (xd + wd / 2)
    lo, hi = min(start, end), max(start, end)
    top, bottom = ys + hs, yd
    right = -math.inf
    for x, y, w, h in boxes:
        if y > top and y + h < bottom and x < hi and x + w > lo:
            right = max(right, x + w)
    if right == -math.inf:
        return [(start, top), (end, bottom)]
    side = right + 8
    return [(start, top), (side, top + _GAP_Y / 2), (side, bottom - _GAP_Y / 2), (end, bottom)]


def _fit_text(s: str, size: float, room: float) -> str:
    """``s`` shortened with an ellipsis to fit ``room`` units (a label never runs over)."""
    if _width(s, size) <= room:
        return s
    while s and _width(s + "…", size) > room:
        s = s[:-1]
    return s + "…"


def _hatch(dr: Any, box: tuple[float, float, float, float], ink: Any, step: float = 14) -> None:
    """Diagonal lines across a box (x0, y0, x1, y1), clipped to it."""
    x0, y0, x1, y1 = box
    h = y1 - y0
    c = x0 - h
    while c < x1:
        a0, a1 = max(x0, c), min(x1, c + h)  # the stretch of x where the line is inside
        if a0 < a1:
            dr.line([(a0, y1 - (a0 - c)), (a1, y1 - (a1 - c))], fill=ink, width=2)
        c += step


def _badge(dr: Any, cx: float, cy: float, label: str, fill: Any = (73, 80, 87)) -> None:
    f = _font(10, True)
    w = max(16 * SCALE, f.getlength(label) + 8 * SCALE)
    h = 16 * SCALE
    dr.rounded_rectangle(
        [cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2],
        radius=h / 2,
        fill=fill,
        outline=(255, 255, 255),
        width=SCALE,
    )
    dr.text((cx, cy), label, font=f, fill=(255, 255, 255), anchor="mm")


def _arrow(dr: Any, a: tuple[float, float], b: tuple[float, float]) -> None:
    dx, dy = b[0] - a[0], b[1] - a[1]
    n = math.hypot(dx, dy) or 1.0
    ux, uy = dx / n, dy / n
    size = 6 * SCALE
    left = (b[0] - ux * size - uy * size * 0.5, b[1] - uy * size + ux * size * 0.5)
    right = (b[0] - ux * size + uy * size * 0.5, b[1] - uy * size - ux * size * 0.5)
    dr.polygon([b, left, right], fill=_EDGE)
