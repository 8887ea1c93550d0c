"""Static pictures of the views (matplotlib PNG, inline HTML) for exports and plain viewers.

Uses ``matplotlib.figure.Figure`` with the Agg canvas directly, so no pyplot state and no
backend switch leak into the user's session.
"""

from __future__ import annotations

import html
import io
import math
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

from labkit._format import fmt_bytes, fmt_count, fmt_time
from labkit.trace.graph import DEFAULT_DEPTH, VisibleGraph, canonicalize, visible_graph
from labkit.widgets._keep import MONO
from labkit.widgets._payload import (
    METRIC_UNITS,
    METRICS,
    PROFILE_METRIC_COLUMNS,
    memory_payload,
    node_label,
    node_metrics,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from labkit.trace.model import Trace

PHASE_COLORS = {"forward": "#e8f0fb", "backward": "#fdf0e6", "optimizer": "#f0f0f0"}
_FORMAT: dict[str, Callable[[float], str]] = {
    "time": fmt_time,
    "count": fmt_count,
    "bytes": fmt_bytes,
}


def fmt_metric(metric: str, value: float) -> str:
    """A metric's value in its unit."""
    return _FORMAT[METRIC_UNITS[metric]](value)


def _figure(w: float, h: float) -> Figure:
    from matplotlib.figure import Figure

    return Figure(figsize=(w, h), dpi=100)


def _png(fig: Figure) -> bytes:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    return buf.getvalue()


def layered(boxes: Iterable[int], edges: Iterable[tuple[int, int]]) -> dict[int, tuple[int, int]]:
    """``{box: (layer, position in layer)}`` by longest path, boxes ordered by id."""
    order = sorted(boxes)
    preds: dict[int, list[int]] = {b: [] for b in order}
    for s, d in edges:
        preds[d].append(s)
    layer: dict[int, int] = {}
    for b in order:  # execution order is a topological order of the lifted graph
        layer[b] = max((layer[p] + 1 for p in preds[b] if p in layer), default=0)
    slots: dict[int, int] = {}
    out = {}
    for b in order:
        out[b] = (layer[b], slots.get(layer[b], 0))
        slots[layer[b]] = out[b][1] + 1
    return out


def graph_png(
    trace: Trace,
    *,
    expanded: Iterable[int] | None = None,
    depth: int = DEFAULT_DEPTH,
    metric: str = "fwd_time",
    rolled: bool = True,
    marks: Mapping[int, list[str]] | None = None,
) -> bytes:
    """The graph at a set of expanded calls, boxes coloured by ``metric``, as a PNG.

    ``marks`` (``GraphView.marks``: trace node id -> graph-break texts) outline the box
    that shows each marked call, or holds it collapsed, with the count beside it.
    """
    from matplotlib import colormaps
    from matplotlib.colors import to_rgb
    from matplotlib.patches import Circle, FancyBboxPatch

    canon = canonicalize(trace, rolled=rolled)
    g = visible_graph(trace, depth, expanded, canon=canon)
    pos = layered(g.boxes, g.edges)
    keep = [i for i in range(len(trace.nodes)) if canon.is_canonical(i)]
    values = dict(zip(keep, node_metrics(trace, rolled=rolled, canon=canon)[metric], strict=True))
    layers = max((p[0] for p in pos.values()), default=0) + 1
    width = max((p[1] for p in pos.values()), default=0) + 1
    fig = _figure(min(2.2 * width + 1, 16), min(0.55 * layers + 1, 40))
    ax = fig.add_subplot()
    ax.set_axis_off()
    per_layer: dict[int, int] = {}
    for p in pos.values():
        per_layer[p[0]] = per_layer.get(p[0], 0) + 1
    xy = {b: (p[1] - (per_layer[p[0]] - 1) / 2, -p[0]) for b, p in pos.items()}
    vmax = max((values.get(b, 0) for b in g.boxes), default=0)
    cmap = colormaps["YlOrRd"]
    marked = marked_boxes(g, marks or {})
    for s, d in g.edges:
        (x0, y0), (x1, y1) = xy[s], xy[d]
        ax.annotate("", (x1, y1 + 0.18), (x0, y0 - 0.18),
                    arrowprops={"arrowstyle": "-|>", "color": "#888", "lw": 0.8})  # fmt: skip
    for b in g.boxes:
        n = trace.nodes[b]
        x, y = xy[b]
        v = values.get(b, 0)
        color = (
            cmap(0.15 + 0.8 * math.log1p(v) / math.log1p(vmax)) if vmax > 0 and v > 0 else "#eee"
        )
        broke = marked.get(b, 0)
        ax.add_patch(FancyBboxPatch((x - 0.42, y - 0.17), 0.84, 0.34, boxstyle="round,pad=0.02",
                                    fc=color, ec="#c62828" if broke else "#555",
                                    lw=2.0 if broke else 0.8))  # fmt: skip
        ink = _ink_on(to_rgb(color))  # legible on light and dark fills
        label = node_label(trace, b, canon)  # as the browser labels it
        ax.text(x, y + 0.04, label, ha="center", va="center", fontsize=8, color=ink)
        ax.text(x, y - 0.09, n.type if n.kind == "module" else fmt_metric(metric, v),
                ha="center", va="center", fontsize=6, color=ink)  # fmt: skip
        if broke:
            ax.add_patch(Circle((x - 0.42, y + 0.17), 0.07, fc="#c62828", ec="white", lw=0.8))
            ax.text(x - 0.42, y + 0.17, str(broke), ha="center", va="center", fontsize=6,
                    color="white", fontweight="bold")  # fmt: skip
    half = max(abs(x) for x, _ in xy.values()) if xy else 0
    ax.set_xlim(-half - 0.6, half + 0.6)
    ax.set_ylim(-layers + 0.4, 0.6)
    title = f"{trace.meta.model}: colour = {METRICS[metric]}"
    if marked:
        count = sum(marked.values())
        title += f"; {count} graph break{'s' if count != 1 else ''} outlined in red"
    ax.set_title(title, fontsize=9)
    return _png(fig)


def marked_boxes(g: VisibleGraph, marks: Mapping[int, list[str]]) -> dict[int, int]:
    """Drawn box -> how many graph breaks it shows: its own, and those of the calls it
    holds collapsed (a mark on an expanded call's frame is not a box: not counted)."""
    out: dict[int, int] = {}
    boxes = set(g.boxes)
    for nid, texts in marks.items():
        box = g.box_of[nid] if 0 <= nid < len(g.box_of) else -1
        if box in boxes:
            out[box] = out.get(box, 0) + len(texts)
    return out


def _ink_on(rgb: tuple[float, float, float]) -> str:
    """Black or white text, whichever contrasts more with ``rgb`` (WCAG luminance), as the
    browser's ``inkOn`` picks it."""
    lin = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb]
    lum = 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]
    return "#000" if (lum + 0.05) / 0.05 >= 1.05 / (lum + 0.05) else "#fff"


def profile_png(trace: Trace, *, metric: str = "fwd_time", top: int = 10) -> bytes:
    """Horizontal bars of the ``top`` modules by ``metric``'s self figure."""
    col = PROFILE_METRIC_COLUMNS[metric][1]
    src = {"flops_self": ("flops_fwd_self", "flops_bwd_self")}.get(col, (col,))
    rows = [(r["path"] or trace.meta.model, sum(r[c] for c in src)) for r in trace.rows()]
    rows = sorted((r for r in rows if r[1] > 0), key=lambda r: r[1], reverse=True)[:top]
    fig = _figure(7, 0.3 * max(len(rows), 2) + 0.8)
    ax = fig.add_subplot()
    if rows:
        ax.barh(range(len(rows)), [v for _, v in rows], color="#4e79a7")
        ax.set_yticks(range(len(rows)), [p for p, _ in rows], fontsize=8)
        ax.invert_yaxis()
        for i, (_, v) in enumerate(rows):
            ax.text(v, i, " " + fmt_metric(metric, v), va="center", fontsize=7)
    else:
        ax.text(0.5, 0.5, f"no module has a {METRICS[metric]} figure", ha="center", va="center")
        ax.set_axis_off()
    ax.set_title(f"{trace.meta.model}: top {top} modules by self {METRICS[metric]}", fontsize=9)
    ax.tick_params(axis="x", labelsize=7)
    return _png(fig)


def profile_html(
    trace: Trace, *, metric: str = "fwd_time", top: int = 10, png: bytes | None = None
) -> str:
    """The bar chart (``png`` when already drawn) plus a monospace table of every module."""
    from labkit.widgets._base import png_img

    rows = trace.rows()
    cells = "".join(
        f"<tr><td style='text-align:left'>{html.escape(r['path'] or trace.meta.model)}</td>"
        f"<td>{html.escape(r['type'])}</td><td>{fmt_count(r['params'])}</td>"
        f"<td>{fmt_time(r['fwd_time'])}</td><td>{fmt_time(r['bwd_time'])}</td>"
        f"<td>{fmt_count(r['flops_fwd'] + r['flops_bwd'])}</td></tr>"
        for r in rows
    )
    head = "".join(f"<th>{h}</th>" for h in ("Module", "Type", "Params", "Fwd", "Bwd", "FLOPs"))
    return (
        png_img(png or profile_png(trace, metric=metric, top=top), alt="profile")
        + f'<table style="{MONO}"><thead><tr>{head}</tr></thead><tbody>{cells}</tbody></table>'
    )


def memory_png(trace: Trace) -> bytes:
    """Stacked bytes by category over time, phases shaded, peak marked; or the empty message."""
    from labkit.widgets.memory import EMPTY_MESSAGE

    m = memory_payload(trace)
    fig = _figure(8, 3.2)
    ax = fig.add_subplot()
    if not m["time"]:
        ax.text(0.5, 0.5, EMPTY_MESSAGE, ha="center", va="center", fontsize=9, color="#555")
        ax.set_axis_off()
        return _png(fig)
    t = m["time"]
    start = 0
    for i in range(1, len(t) + 1):
        if i == len(t) or m["phase"][i] != m["phase"][start]:
            shade = PHASE_COLORS.get(m["phase"][start], "#f6f6f6")
            ax.axvspan(t[start], t[min(i, len(t) - 1)], color=shade, zorder=0)
            ax.text((t[start] + t[min(i, len(t) - 1)]) / 2, 0, m["phase"][start], ha="center",
                    va="bottom", fontsize=7, color="#666")  # fmt: skip
            start = i
    mib = [[b / 2**20 for b in col] for col in m["bytes"]]
    ax.stackplot(t, mib, labels=m["categories"], step="post",
                 colors=m["colors"])  # fmt: skip
    totals = [sum(col[i] for col in m["bytes"]) for i in range(len(t))]
    p = max(range(len(t)), key=totals.__getitem__)
    ax.axvline(t[p], color="#c00", lw=1, ls="--")
    ax.annotate(f"peak {fmt_bytes(totals[p])}\n{m['module'][p] or '-'}", (t[p], totals[p] / 2**20),
                fontsize=7, color="#c00", xytext=(4, -10), textcoords="offset points")  # fmt: skip
    ax.set_xlabel("time (s)", fontsize=8)
    ax.set_ylabel("MiB", fontsize=8)
    ax.tick_params(labelsize=7)
    ax.legend(fontsize=7, loc="upper left")
    ax.set_title(f"{trace.meta.model}: memory through the step", fontsize=9)
    return _png(fig)


def trace_html(trace: Trace) -> str:
    """A trace's notebook HTML: its graph as a picture and its summary table."""
    from labkit.widgets._base import png_img
    from labkit.widgets._keep import pre

    return (
        f"<div>{pre(repr(trace))}"
        + png_img(graph_png(trace), alt="graph")
        + f"{pre(trace.summary(depth=DEFAULT_DEPTH))}</div>"
    )
