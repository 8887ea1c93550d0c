"""The diff view: the base trace's graph coloured by each module's change, live and static.

A diverging scale (blue: smaller or faster, white: unchanged, red: bigger or slower),
symmetric about 0 up to the largest change drawn; a module whose change is within noise
(its interval spans 0) is hatched. :class:`DiffView` (``labkit.diff(a, b).show()``) is the
live view (``widgets/src/diff.js``): the graph drawn once, the ranked table linked to it
(select a row: the graph opens the frames around that module, pans to it and highlights
it; each call of a repeated block is its own box and row) and a toggle between the
metrics. Its kept picture is the static one (``image/png`` and the ranked table as
``text/plain``), so a reopened notebook, nbviewer or an HTML export shows it without a
kernel; :func:`diff_html` is the static HTML with a section per metric.
"""

from __future__ import annotations

import base64
import html
import io
from typing import TYPE_CHECKING, Any

import anywidget
import traitlets as t

from labkit._assets import bundle_path
from labkit.trace.explain import formatter
from labkit.trace.graph import DEFAULT_DEPTH, canonicalize
from labkit.views._contract import DiffMetric, DiffRow, GraphPayload
from labkit.views._keep import KeepsPicture
from labkit.views._payload import graph_state, node_label, opened_at, packed_json
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


def diff_png(
    d: TraceDiff,
    metric: str = "time",
    *,
    against: int | str | None = None,
    depth: int = DEFAULT_DEPTH,
) -> bytes:
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


def diff_html(
    d: TraceDiff,
    metric: str = "time",
    *,
    against: int | str | None = None,
    metrics: tuple[str, ...] = METRICS,
) -> str:
    """Picture and ranked table per metric, the chosen one open (a ``<details>`` each: the
    metric toggle works without a kernel or script); a metric the traces cannot answer
    says why."""
    parts = []
    for m in dict.fromkeys((metric, *metrics)):
        try:
            e = d.explain(m, against=against)
            png = base64.b64encode(diff_png(d, m, against=against)).decode()
            body = (
                f"<img alt='{html.escape(e.headline)}' style='max-width:100%' "
                f"src='data:image/png;base64,{png}'/>{e._repr_html_()}"
            )
            head = e.headline
        except ValueError as exc:
            body, head = f"<p>{html.escape(str(exc))}</p>", f"{m}: not answerable"
        opened = " open" if m == metric else ""
        parts.append(
            f"<details{opened}><summary><b>{html.escape(m)}</b>: "
            f"{html.escape(head)}</summary>{body}</details>"
        )
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


#: What each metric's change is called in the legend: (worse, better).
_WORDS = {
    "time": ("slower", "faster"),
    "memory": ("more", "less"),
    "flops": ("more", "fewer"),
    "params": ("more", "fewer"),
}
_UNITS = {"time": "time", "memory": "bytes", "flops": "count", "params": "count"}


def diff_changes(
    d: TraceDiff,
    graph: GraphPayload,
    *,
    against: int | str | None = None,
    metrics: tuple[str, ...] = METRICS,
) -> dict[str, DiffMetric]:
    """Per metric, what :class:`DiffView` draws: each payload node's change (its module's,
    everything under it included) and whether it is within noise, and the ranked rows,
    each naming the payload node that draws its module (-1: not in the base graph, an
    added module). A metric the traces cannot answer carries the reason in ``error``."""
    where: dict[str, int] = {}
    for k, (kind, name) in enumerate(zip(graph["kind"], graph["name"], strict=True)):
        if kind == "m":
            where.setdefault(name, k)
    out: dict[str, DiffMetric] = {}
    for m in metrics:
        worse, better = _WORDS[m]
        empty: DiffMetric = {
            "headline": f"{m}: not answerable",
            "error": "",
            "unit": _UNITS[m],
            "worse": worse,
            "better": better,
            "delta": [],
            "noise": [],
            "rows": [],
            "notes": [],
        }
        try:
            e = d.explain(m, against=against)
        except ValueError as exc:
            out[m] = {**empty, "error": str(exc)}
            continue
        delta, noise = inclusive(e)
        per_node = [
            float(delta.get(name, 0.0)) if kind == "m" else 0.0
            for kind, name in zip(graph["kind"], graph["name"], strict=True)
        ]
        hatched = [
            int(kind == "m" and noise.get(name, False))
            for kind, name in zip(graph["kind"], graph["name"], strict=True)
        ]
        out[m] = {
            **empty,
            "headline": e.headline,
            "delta": per_node,
            "noise": hatched,
            "rows": _rows(e, where),
            "notes": list(e.notes),
        }
    return out


def _rows(e: Explanation, where: dict[str, int]) -> list[DiffRow]:
    f = formatter(e.metric)
    rows: list[DiffRow] = []
    for r in e.rows:
        iv = "" if r.low is None else f"{f(r.low)} .. {f(r.high or 0.0)}"
        node = where.get(r.module, -1) if r.status != "added" else -1
        share = "" if r.share is None else f"{r.share:.0%}" if abs(r.share) >= 0.005 else "0%"
        rows.append(
            {
                "module": r.module,
                "type": r.type,
                "status": r.status,
                "match": r.match,
                "a": f(r.a),
                "b": f(r.b),
                "delta": ("+" if r.delta > 0 else "") + f(r.delta),
                "interval": iv,
                "share": share,
                "value": float(r.delta),
                "noise": bool(r.within_noise),
                "node": node,
            }
        )
    return rows


class DiffView(KeepsPicture, anywidget.AnyWidget):
    """The live diff view: the base trace's graph, each module coloured by its change, the
    ranked table linked to it, and a toggle between metrics.

    The graph is laid out once (the base trace's, each call of a repeated block its own
    box); the colours follow the metric chosen: a diverging scale symmetric about 0 up to
    the largest change drawn, blue for less or faster, red for more or slower, a box
    hatched when its change is within noise (its interval spans 0), with a legend.
    Selecting a table row opens the frames around that module, pans the graph to it and
    highlights it (``selected`` is its path); clicking a box selects its row. A metric
    the traces cannot answer (no timing passes, no memory recording) is offered
    disabled, saying why. Where no widget runs, the output keeps the static picture
    (:func:`diff_png`) and the ranked table as text.

    Args:
        d: The diff (``labkit.diff(a, b)``).
        metric: The metric shown first: ``"time"``, ``"memory"``, ``"flops"`` or
            ``"params"``.
        against: The trace compared with the base (index or label; default: the other).
        depth: Module calls above this depth start expanded (as ``GraphView``'s).
        height: Height of the graph in pixels.

    Example:
        >>> import torch, labkit
        >>> a = labkit.trace(torch.nn.Sequential(torch.nn.Linear(4, 8)), torch.randn(2, 4))
        >>> b = labkit.trace(torch.nn.Sequential(torch.nn.Linear(4, 16)), torch.randn(2, 4))
        >>> view = DiffView(labkit.diff(a, b), metric="params")
        >>> view
        DiffView(params +100.0% (+40): 0 explains 100% (+40), rows=2, selected=None)
        >>> view.changes["params"]["rows"][0]["module"], view.changes["params"]["rows"][0]["delta"]
        ('0', '+40')
    """

    _picture_scale = 2  # the picture is drawn at 2x (``_graph_picture.SCALE``)

    #: The base trace's graph (a GraphView payload, nothing rolled); sent as one buffer.
    graph = t.Dict().tag(sync=True, to_json=packed_json)
    #: Metric -> its per-node changes and ranked rows (``_contract.DiffMetric``).
    changes = t.Dict().tag(sync=True, to_json=packed_json)
    metric = t.Enum(list(METRICS), default_value="time").tag(sync=True)
    expanded = t.List(t.Int()).tag(sync=True)
    selected = t.Unicode(None, allow_none=True).tag(sync=True)
    labels = t.List(t.Unicode()).tag(sync=True)
    height = t.Int(480).tag(sync=True)

    @property
    def _esm(self) -> str:  # read by AnyWidget.__init__
        return bundle_path("diff").read_text()

    def __init__(
        self,
        d: TraceDiff,
        *,
        metric: str = "time",
        against: int | str | None = None,
        depth: int = DEFAULT_DEPTH,
        height: int = 480,
    ) -> None:
        if metric not in METRICS:
            raise ValueError(f"DiffView(metric=...) must be one of {METRICS}, got {metric!r}")
        self._diff, self._against = d, against
        trace = d.traces[d.base] if d.traces else None
        if trace is None:
            raise ValueError(
                "this TraceDiff holds no traces (built by hand): use labkit.diff(a, b)"
            )
        graph, _, expanded = graph_state(trace, rolled=False, depth=depth)
        changes = diff_changes(d, graph, against=against)
        if changes[metric]["error"]:  # open on a metric the traces answer
            metric = next((m for m in METRICS if not changes[m]["error"]), metric)
        answered = [m for m in ("params", "flops", "memory", "time") if not changes[m]["error"]]
        labels = list(d.explain(answered[0], against=against).labels) if answered else []
        super().__init__(
            graph=graph,
            changes=changes,
            metric=metric,
            expanded=expanded,
            labels=labels,
            height=height,
        )

    @property
    def explanation(self) -> Explanation:
        """The ranked explanation of the metric shown."""
        return self._diff.explain(self.metric, against=self._against)

    def to_png(self) -> bytes:
        """The static picture of the metric shown (:func:`diff_png`)."""
        return diff_png(self._diff, self.metric, against=self._against)

    def _picture(self) -> dict[str, str]:
        """The static picture as ``image/png`` and the ranked table as ``text/plain``."""
        from labkit.views._keep import picture_bundle

        return picture_bundle(self.to_png(), f"{self!r}\n\n{self.explanation.summary()}")

    @t.observe("metric")
    def _metric_changed(self, change: dict[str, Any]) -> None:
        self.refresh_output()  # the kept picture follows the metric shown

    def __repr__(self) -> str:
        info = self.changes.get(self.metric, {})
        return (
            f"DiffView({info.get('headline', self.metric)}, rows={len(info.get('rows', []))}, "
            f"selected={self.selected!r})"
        )


def show_diff(d: TraceDiff, metric: str = "time", *, against: int | str | None = None) -> DiffView:
    """The diff view (registered as the ``"diff.show"`` display)."""
    return DiffView(d, metric=metric, against=against)
