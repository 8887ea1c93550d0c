"""The diff view's static picture: the base trace's graph coloured by each module's change.

A diverging scale (blue: smaller or faster, white: unchanged, red: bigger or slower),
symmetric about 0 up to the largest change drawn; a module whose change is within noise
(its interval spans 0) is hatched. The ranked table sits under the picture, and the HTML
holds a section per metric the traces can answer (the metric toggle), so a reopened
notebook, nbviewer or an HTML export shows it without a kernel.
"""

from __future__ import annotations

import base64
import html
import io
from typing import TYPE_CHECKING, Any

from labkit.trace.explain import formatter
from labkit.trace.graph import DEFAULT_DEPTH, canonicalize
from labkit.views._payload import node_label, opened_at
from labkit.views._static import sub_line

if TYPE_CHECKING:
    from labkit.trace.diff import TraceDiff
    from labkit.trace.explain import Explanation

RED, BLUE, WHITE = (178, 24, 43), (33, 102, 172), (247, 247, 247)
METRICS = ("time", "memory", "flops", "params")


def diverging(value: float, scale: float) -> tuple[int, int, int]:
    """White at 0, red for a rise, blue for a fall, full at ``scale`` (and beyond)."""
    if scale <= 0 or value == 0:
        return WHITE
    t = max(-1.0, min(1.0, value / scale))
    end = RED if t > 0 else BLUE
    t = abs(t)
    return tuple(round(w + (e - w) * t) for w, e in zip(WHITE, end, strict=True))  # type: ignore[return-value]


def inclusive(e: Explanation) -> tuple[dict[str, float], dict[str, bool]]:
    """Each module path's change with everything under it, and whether all of it is
    within noise (no row under it changed beyond noise)."""
    delta: dict[str, float] = {}
    real: dict[str, bool] = {}
    for r in e.rows:
        if r.module == "(outside modules)":
            continue
        parts = r.module.split(".") if r.module else []
        for i in range(len(parts) + 1):
            k = ".".join(parts[:i])
            delta[k] = delta.get(k, 0.0) + r.delta
            real[k] = real.get(k, False) or (r.delta != 0 and not r.within_noise)
    noise = {k: not v and any(r.within_noise for r in e.rows) for k, v in real.items()}
    return delta, noise


def diff_png(d: TraceDiff, metric: str = "time", *, against: int | str | None = None,
             depth: int = DEFAULT_DEPTH) -> bytes:  # fmt: skip
    """The base trace's graph, each module box coloured by its change in ``metric`` (its
    whole subtree's when collapsed), within-noise boxes hatched, with a legend.

    Example:
        >>> import torch, labkit
        >>> from labkit.views.diff import diff_png
        >>> a = labkit.trace(torch.nn.Sequential(torch.nn.Linear(4, 8)), torch.randn(2, 4))
        >>> b = labkit.trace(torch.nn.Sequential(torch.nn.Linear(4, 16)), torch.randn(2, 4))
        >>> diff_png(labkit.diff(a, b), "params")[:4]
        b'\\x89PNG'
    """
    from labkit.views._graph_picture import collapse_to_fit, draw

    e = d.explain(metric, against=against)
    trace = d.traces[d.base]
    canon = canonicalize(trace, rolled=False)
    g, _ = collapse_to_fit(trace, opened_at(trace, depth, canon), canon)
    delta, noise = inclusive(e)
    paths = {k: trace.nodes[k].module for k in g.boxes if trace.nodes[k].kind == "module"}
    scale = max((abs(delta.get(p or "", 0.0)) for p in paths.values()), default=0.0)
    colors = {k: diverging(delta.get(p or "", 0.0), scale) for k, p in paths.items()}
    hatched = [k for k, p in paths.items() if noise.get(p or "", False)]
    drawn = [*g.boxes, *g.groups]
    png = draw(
        trace,
        g,
        canon,
        labels={k: node_label(trace, k, canon) for k in drawn},
        subs={k: sub_line(trace, k) for k in g.boxes},
        values={},
        title=e.headline,
        colors=colors,
        hatched=hatched,
    )
    return _with_legend(png, scale, formatter(metric), metric)


def _with_legend(png: bytes, scale: float, f: Any, metric: str) -> bytes:
    from PIL import Image, ImageDraw

    from labkit.views._graph_picture import SCALE, _font, _hatch

    S = SCALE
    img = Image.open(io.BytesIO(png)).convert("RGB")
    w, h = img.size
    out = Image.new("RGB", (max(w, 520 * S), h + 44 * S), (255, 255, 255))
    out.paste(img, (0, 0))
    dr = ImageDraw.Draw(out)
    x0, y0, bw, bh = 10 * S, h + 8 * S, 200 * S, 12 * S
    for i in range(bw):  # the scale: -scale .. 0 .. +scale
        dr.line([(x0 + i, y0), (x0 + i, y0 + bh)], fill=diverging((2 * i / bw - 1) * scale, scale))
    ink = (34, 34, 34)
    font = _font(9)
    worse = "slower" if metric == "time" else "more"
    dr.text((x0, y0 + bh + 2 * S), f"-{f(scale)}" if scale else "0", font=font, fill=ink)
    dr.text((x0 + bw // 2, y0 + bh + 2 * S), "0", font=font, fill=ink, anchor="ma")
    dr.text((x0 + bw, y0 + bh + 2 * S), f"+{f(scale)} {worse}", font=font, fill=ink, anchor="ra")
    hx = x0 + bw + 24 * S
    dr.rectangle([hx, y0, hx + 28 * S, y0 + bh], fill=WHITE, outline=(107, 114, 128))
    _hatch(dr, (hx, y0, hx + 28 * S, y0 + bh), (107, 114, 128), step=8 * S)
    dr.text((hx + 34 * S, y0), "within noise (95% interval spans 0)", font=font, fill=ink)
    buf = io.BytesIO()
    out.save(buf, format="PNG", compress_level=6, dpi=(144, 144))
    return buf.getvalue()


def diff_html(d: TraceDiff, metric: str = "time", *, against: int | str | None = None,
              metrics: tuple[str, ...] = METRICS) -> str:  # fmt: skip
    """Picture and ranked table per metric, the chosen one open (a ``<details>`` each: the
    metric toggle works without a kernel or script); a metric the traces cannot answer
    says why."""
    parts = []
    for m in dict.fromkeys((metric, *metrics)):
        try:
            e = d.explain(m, against=against)
            png = base64.b64encode(diff_png(d, m, against=against)).decode()
            body = (f"<img alt='{html.escape(e.headline)}' style='max-width:100%' "
                    f"src='data:image/png;base64,{png}'/>{e._repr_html_()}")  # fmt: skip
            head = e.headline
        except ValueError as exc:
            body, head = f"<p>{html.escape(str(exc))}</p>", f"{m}: not answerable"
        opened = " open" if m == metric else ""
        parts.append(f"<details{opened}><summary><b>{html.escape(m)}</b>: "
                     f"{html.escape(head)}</summary>{body}</details>")  # fmt: skip
    return f"<div class='labkit-diff'>{''.join(parts)}</div>"


class DiffPicture:
    """What ``TraceDiff.show()`` returns: the static diff view (HTML with the picture and
    the ranked table per metric; plain text in a terminal).

    Args:
        d: The diff.
        metric: The metric shown first.
        against: The trace compared with the base.

    Example:
        >>> view = labkit.diff(a, b).show("time")  # doctest: +SKIP
    """

    def __init__(self, d: TraceDiff, metric: str = "time", against: int | str | None = None):
        self.d, self.metric, self.against = d, metric, against

    def _repr_html_(self) -> str:
        return diff_html(self.d, self.metric, against=self.against)

    def _repr_png_(self) -> bytes:
        return diff_png(self.d, self.metric, against=self.against)

    def __repr__(self) -> str:
        return self.d.explain(self.metric, against=self.against).summary()


def show_diff(
    d: TraceDiff, metric: str = "time", *, against: int | str | None = None
) -> DiffPicture:
    """The diff view (registered as the ``"diff.show"`` display)."""
    return DiffPicture(d, metric, against)
