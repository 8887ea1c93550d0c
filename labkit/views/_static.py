"""Static pictures of the views (matplotlib PNG and SVG, text tables) for exports and plain
viewers, and the inline HTML of ``to_html()``.

Uses ``matplotlib.figure.Figure`` with the Agg canvas directly, so no pyplot state and no
backend switch leak into the user's session.
"""

from __future__ import annotations

import html
import io
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import TYPE_CHECKING

from labkit._format import fmt_bytes, fmt_count, fmt_time
from labkit.trace.graph import DEFAULT_DEPTH, VisibleGraph
from labkit.views._keep import MONO, SVG_MAX, picture_bundle
from labkit.views._payload import (
    METRIC_UNITS,
    METRICS,
    PROFILE_METRIC_COLUMNS,
    box_values,
    canon_of,
    memory_payload,
    node_label,
    opened_at,
    tensor_text,
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


def _svg(fig: Figure) -> str | None:
    """The figure as SVG text, or None when it is longer than ``SVG_MAX`` (a dense chart)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    text = buf.getvalue()
    return text if len(text) <= SVG_MAX else None


def figure_bundle(fig: Figure, text: str) -> dict[str, str]:
    """A matplotlib figure as a view's static picture: PNG, SVG when small, and ``text``.

    Args:
        fig: The figure (``matplotlib.figure.Figure``, no pyplot).
        text: Its figures as plain text.

    Returns:
        ``{mimetype: data}`` (:func:`labkit.views.picture_bundle`).
    """
    return picture_bundle(_png(fig), text, svg=_svg(fig))


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
    unrolled: Collection[str] = (),
) -> bytes:
    """The graph at a set of expanded calls, boxes coloured by ``metric``, as a PNG.

    Drawn as the live view draws it (``_graph_picture``): expanded calls as frames,
    rolled blocks as stacked boxes and frames with an ``xN`` badge, the same labels,
    type or shape lines and colours, at 2x resolution. A graph of more than
    ``_graph_picture.MAX_BOXES`` boxes is drawn with its deeper calls collapsed, and
    the picture says so. ``marks`` (``GraphView.marks``: trace node id -> graph-break
    texts) outline the box that shows each marked call, with the count beside it.
    """
    from labkit.views._graph_picture import MAX_BOXES, collapse_to_fit, count_boxes, draw

    canon = canon_of(trace, rolled=rolled, unrolled=unrolled)  # shared with the live view's
    opened = opened_at(trace, depth, canon) if expanded is None else expanded
    g, kept = collapse_to_fit(trace, opened, canon)
    values = box_values(trace, canon, metric)
    drawn = [*g.boxes, *g.groups]
    marked = marked_boxes(g, marks or {})
    title = f"{trace.meta.model}: colour = {METRICS[metric]}"
    if marked:
        count = sum(marked.values())
        title += f"; {count} graph break{'s' if count != 1 else ''} outlined in red"
    note = ""
    if kept is not None:
        full = count_boxes(trace, canon, set(opened))
        note = (
            f"{full} boxes live; drawn here with calls from depth {kept} collapsed "
            f"(at most {MAX_BOXES} boxes)"
        )
    return draw(
        trace,
        g,
        canon,
        labels={k: node_label(trace, k, canon) for k in drawn},
        subs={k: sub_line(trace, k) for k in g.boxes},
        values=values,
        title=title,
        note=note,
        marked=marked,
    )


def sub_line(trace: Trace, k: int) -> str:
    """A box's second line, as the browser's ``subOf``: a module's type, an op's or
    input's first output shape, the output's first input shape."""
    n = trace.nodes[k]
    if n.kind == "module":
        return n.type
    if n.kind in ("op", "input"):
        if n.outputs:
            return tensor_text(n.outputs[0]).split(" ")[0]
        return "op" if n.kind == "op" else ""
    return tensor_text(n.inputs[0]).split(" ")[0] if n.inputs else ""


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


ink_on = _ink_on  # public for the panels (AttentionView's node ids)


def profile_png(trace: Trace, *, metric: str = "fwd_time", top: int = 10) -> bytes:
    """Horizontal bars of the ``top`` modules by ``metric``'s self figure."""
    return _png(profile_figure(trace, metric=metric, top=top))


def profile_figure(trace: Trace, *, metric: str = "fwd_time", top: int = 10) -> Figure:
    """The figure of :func:`profile_png`."""
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
    return fig


def profile_text(trace: Trace) -> str:
    """Every module's figures as a monospace text table (the profile's ``text/plain``)."""
    head = ("Module", "Type", "Params", "Fwd", "Bwd", "FLOPs")
    rows = [
        (
            r["path"] or trace.meta.model,
            r["type"],
            fmt_count(r["params"]),
            fmt_time(r["fwd_time"]),
            fmt_time(r["bwd_time"]),
            fmt_count(r["flops_fwd"] + r["flops_bwd"]),
        )
        for r in trace.rows()
    ]
    return text_table(head, rows)


def text_table(head: Iterable[str], rows: Iterable[Iterable[object]]) -> str:
    """Columns padded to their widest cell: the first left-aligned, the others right."""
    table = [[str(c) for c in head], *([str(c) for c in r] for r in rows)]
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
    return "\n".join(
        "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        ).rstrip()
        for r in table
    )


def profile_html(
    trace: Trace, *, metric: str = "fwd_time", top: int = 10, png: bytes | None = None
) -> str:
    """The bar chart (``png`` when already drawn) plus a monospace table of every module."""
    from labkit.views._base import png_img

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
    return _png(memory_figure(trace))


def memory_figure(trace: Trace) -> Figure:
    """The figure of :func:`memory_png`: phase names in a strip above the stacked areas
    (as the live view puts them), never on the fill."""
    from labkit.views.memory import EMPTY_MESSAGE

    m = memory_payload(trace)
    fig = _figure(8, 3.2)
    ax = fig.add_subplot()
    if not m["time"]:
        ax.text(0.5, 0.5, EMPTY_MESSAGE, ha="center", va="center", fontsize=9, color="#555")
        ax.set_axis_off()
        return fig
    t = m["time"]
    span = (t[-1] - t[0]) or 1.0
    start = 0
    for i in range(1, len(t) + 1):
        if i == len(t) or m["phase"][i] != m["phase"][start]:
            a, b = t[start], t[min(i, len(t) - 1)]
            shade = PHASE_COLORS.get(m["phase"][start], "#f6f6f6")
            ax.axvspan(a, b, color=shade, zorder=0)
            if (b - a) / span >= 0.012 * len(m["phase"][start]):  # room for the word
                ax.text(
                    (a + b) / 2,
                    0.985,
                    m["phase"][start],
                    ha="center",
                    va="top",
                    fontsize=7,
                    color="#444",
                    zorder=5,
                    transform=ax.get_xaxis_transform(),
                )
            start = i
    mib = [[b / 2**20 for b in col] for col in m["bytes"]]
    ax.stackplot(t, mib, labels=m["categories"], step="post", colors=m["colors"])
    totals = [sum(col[i] for col in m["bytes"]) for i in range(len(t))]
    p = max(range(len(t)), key=totals.__getitem__)
    ax.set_ylim(0, totals[p] / 2**20 / 0.86 or 1.0)  # the top strip holds the phase names
    ax.axvline(t[p], color="#c00", lw=1, ls="--")
    where = m["peak_where"] or m["module"][p] or "-"  # as the summary names it
    ax.annotate(
        f"peak {fmt_bytes(totals[p])}\n{where}",
        (t[p], totals[p] / 2**20),
        fontsize=7,
        color="#c00",
        xytext=(4, -10),
        textcoords="offset points",
    )
    ax.set_xlabel("time (s)", fontsize=8)
    ax.set_ylabel("MiB", fontsize=8)
    ax.tick_params(labelsize=7)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    ax.set_title(f"{trace.meta.model}: memory through the step", fontsize=9)
    return fig


def trace_picture(trace: Trace, graph: bytes | None = None) -> dict[str, str]:
    """A trace's static picture (``trace.show()``'s and a displayed Trace's): its graph
    (``graph``: the PNG when already drawn) with its memory timeline under it, as one PNG,
    and its repr and summary table as ``text/plain``."""
    png = graph or graph_png(trace)
    if trace.memory:  # drawn at 2x, as the graph is
        fig = memory_figure(trace)
        fig.set_dpi(200)
        png = stack_png(png, _png(fig))
    return picture_bundle(png, f"{trace!r}\n\n{trace.summary(depth=DEFAULT_DEPTH)}")


def stack_png(*pngs: bytes) -> bytes:
    """PNGs one under another on white (one PNG where a viewer shows one image)."""
    from PIL import Image

    images = [Image.open(io.BytesIO(png)).convert("RGB") for png in pngs]
    out = Image.new(
        "RGB", (max(im.width for im in images), sum(im.height for im in images)), "white"
    )
    y = 0
    for im in images:
        out.paste(im, (0, y))
        y += im.height
    buf = io.BytesIO()
    out.save(buf, format="PNG", optimize=True)
    return buf.getvalue()


def trace_html(trace: Trace, graph: bytes | None = None) -> str:
    """A trace's notebook HTML: its graph (``graph``: the PNG when already drawn) and its
    memory timeline as pictures, and its summary table; each picture stored once."""
    from labkit.views._base import png_img
    from labkit.views._keep import pre

    memory = png_img(memory_png(trace), alt="memory") if trace.memory else ""
    return (
        f"<div>{pre(repr(trace))}"
        + png_img(graph or graph_png(trace), alt="graph")
        + memory
        + f"{pre(trace.summary(depth=DEFAULT_DEPTH))}</div>"
    )
