"""``TraceDiff.explain``: which modules explain the change between two traces, and is it real.

Rows are modules (matched as ``labkit.diff`` matches them) with their change in one
metric, ranked by their contribution to the total change. A module's figure is its self
figure (what ran in it, not in its child modules), so the rows add up to the total;
``depth=k`` folds everything below depth ``k`` into its ancestor there.

Times carry a 95% interval: each trace keeps every module's time in each timing pass, and
the interval is a bootstrap over those passes. A pass is resampled whole (every module's
figure from one pass stays together, as ``labkit.compare`` keeps a round's variants
together), each trace's passes apart, since two traces' passes were not interleaved (a
trace diffed with itself is resampled paired: its delta is exactly 0). A row whose
interval spans 0 is within noise and ranked after the rows that are not.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from labkit._format import fmt_bytes, fmt_count
from labkit.trace._explain_figures import METRICS, Figures, batch_size, figures, memory_source
from labkit.trace._explain_match import Match
from labkit.trace.model import Trace

_WHAT = {"time": "step", "memory": "memory", "flops": "FLOPs", "params": "params"}


@dataclass(frozen=True)
class ExplainRow:
    """One module's share of the change.

    Args:
        module: Module path (the base trace's; the other trace's for an added module).
        type: Its class name.
        match: How it was matched with the other trace (``"path"``, ``"added"``...).
        status: ``"changed"``, ``"added"``, ``"removed"`` or ``"same"`` (no change).
        a: Its figure in the base trace.
        b: Its figure in the other trace.
        delta: ``b - a`` (for times, the difference of the medians over the passes).
        share: ``delta`` over the total change (None when the total did not change).
        low: Lower end of the delta's interval (times with per-pass samples; else None).
        high: Upper end.
        within_noise: The interval spans 0.
    """

    module: str
    type: str
    match: str
    status: str
    a: float
    b: float
    delta: float
    share: float | None = None
    low: float | None = None
    high: float | None = None
    within_noise: bool = False


@dataclass(frozen=True)
class Explanation:
    """What explains the change in one metric between a base trace and another.

    Args:
        metric: ``"time"``, ``"memory"``, ``"flops"`` or ``"params"``.
        labels: Names of the base and the other trace.
        total_a: The base's total (time: forward + backward of the step).
        total_b: The other's total.
        delta: ``total_b - total_a``.
        low: Lower end of the total's interval (times with per-pass samples; else None).
        high: Upper end.
        rows: Ranked rows: changes beyond noise by size, then those within noise.
        notes: How the figures were taken and what differs between the traces.
        headline: The one-sentence answer (the summary's first line).
        per_sample: Figures are per sample (the traces' batch sizes differ).
        level: The intervals' confidence level.

    Example:
        >>> import torch, labkit
        >>> a = labkit.trace(torch.nn.Sequential(torch.nn.Linear(4, 8)), torch.randn(2, 4))
        >>> b = labkit.trace(torch.nn.Sequential(torch.nn.Linear(4, 16)), torch.randn(2, 4))
        >>> from labkit.trace.diff import diff  # labkit.diff
        >>> e = diff(a, b).explain("params")
        >>> e.headline
        'params +100.0% (+40): 0 explains 100% (+40)'
        >>> e.rows[0].module, e.rows[0].delta
        ('0', 40.0)
    """

    metric: str
    labels: tuple[str, str]
    total_a: float
    total_b: float
    delta: float
    low: float | None
    high: float | None
    rows: tuple[ExplainRow, ...]
    notes: tuple[str, ...]
    headline: str
    per_sample: bool = False
    level: float = 0.95

    def real(self) -> list[ExplainRow]:
        """Rows that changed beyond noise."""
        return [r for r in self.rows if r.delta != 0 and not r.within_noise]

    def summary(self, max_lines: int = 40) -> str:
        """The headline, the notes and the top rows, in at most ``max_lines`` lines."""
        lines = [self.headline, *(f"  note: {n}" for n in self.notes)][: max(1, max_lines - 4)]
        room = max_lines - len(lines) - 3
        shown = [r for r in self.rows if r.delta != 0 or r.status != "same"][: max(0, room)]
        if shown:
            lines += self._table(shown, start=1)
        left = sum(1 for r in self.rows if r.delta != 0 or r.status != "same") - len(shown)
        if left > 0:
            lines.append(f"... {left} more rows: .table(page=2) or .to_pandas()")
        return "\n".join(lines[:max_lines])

    def table(self, page: int = 1, per_page: int = 25) -> str:
        """One page of the ranked rows (unchanged ones last) as a text table, with
        ``page i of n`` at its foot."""
        rows = list(self.rows)
        pages = max(1, math.ceil(len(rows) / per_page))
        if not 1 <= page <= pages:
            raise ValueError(f"page must be 1..{pages} ({len(rows)} rows, {per_page} a page)")
        start = (page - 1) * per_page
        body = self._table(rows[start : start + per_page], start=start + 1)
        return "\n".join([*body, f"page {page} of {pages} ({len(rows)} rows)"])

    def _table(self, rows: list[ExplainRow], start: int) -> list[str]:
        f = formatter(self.metric)
        a, b = self.labels
        head = [
            "#",
            "module",
            "type",
            a,
            b,
            "delta",
            f"{self.level:.0%} interval",
            "share",
            "match",
        ]
        body = []
        for i, r in enumerate(rows, start):
            iv = "" if r.low is None else _range(r.low, r.high or 0.0, f)
            iv += " (noise)" if r.within_noise else ""
            body.append(
                [
                    str(i),
                    r.module or "(root)",
                    r.type,
                    f(r.a),
                    f(r.b),
                    _signed(r.delta, f),
                    iv,
                    "" if r.share is None else f"{r.share:.0%}" if abs(r.share) >= 0.005 else "0%",
                    r.match,
                ]
            )
        widths = [max(len(x) for x in col) for col in zip(head, *body, strict=True)]
        fmt = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True))  # noqa: E731
        return [
            fmt(head).rstrip(),
            fmt(["-" * w for w in widths]),
            *(fmt(c).rstrip() for c in body),
        ]

    def to_pandas(self) -> Any:
        """The ranked rows as a ``pandas.DataFrame``."""
        from dataclasses import asdict

        import pandas as pd

        return pd.DataFrame([asdict(r) for r in self.rows])

    def __repr__(self) -> str:
        return f"Explanation({self.metric}: {self.headline!r}, rows={len(self.rows)})"

    def _repr_html_(self, max_rows: int = 25) -> str:
        """The headline, notes and top rows as a static HTML table (survives without a
        kernel); rows within noise are marked."""
        from html import escape

        f = formatter(self.metric)
        a, b = self.labels
        head = "".join(
            f"<th>{escape(h)}</th>"
            for h in (
                "module",
                "type",
                a,
                b,
                "delta",
                f"{self.level:.0%} interval",
                "share",
                "match",
            )
        )
        body = []
        for r in self.rows[:max_rows]:
            iv = "" if r.low is None else _range(r.low, r.high or 0.0, f)
            cells = (
                r.module or "(root)",
                r.type,
                f(r.a),
                f(r.b),
                _signed(r.delta, f),
                iv + (" (noise)" if r.within_noise else ""),
                "" if r.share is None else f"{r.share:.0%}",
                r.match,
            )
            style = ' style="opacity:0.6"' if r.within_noise else ""
            body.append(f"<tr{style}>" + "".join(f"<td>{escape(c)}</td>" for c in cells) + "</tr>")
        more = len(self.rows) - max_rows
        foot = f"<p>... {more} more rows: .table(page=2)</p>" if more > 0 else ""
        notes = "".join(f"<li>{escape(n)}</li>" for n in self.notes)
        return (
            f"<div class='labkit-explain'><p><b>{escape(self.headline)}</b></p><ul>{notes}"
            f"</ul><table><tr>{head}</tr>{''.join(body)}</table>{foot}</div>"
        )

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(self.summary())


def formatter(metric: str) -> Callable[[float], str]:
    """How a figure of ``metric`` is written."""
    if metric == "time":
        return _fmt_time
    if metric == "memory":
        return lambda v: ("-" if v < 0 else "") + fmt_bytes(abs(v))
    if metric == "flops":
        return lambda v: ("-" if v < 0 else "") + _flop(abs(v))
    return lambda v: ("-" if v < 0 else "") + fmt_count(abs(v))


def _flop(v: float) -> str:
    text = fmt_count(v)
    return text + ("FLOP" if text[-1].isalpha() else " FLOP")


def _fmt_time(v: float) -> str:
    a = abs(v)
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "us")):
        if a >= scale:
            return f"{v / scale:.3g} {unit}"
    return f"{v / 1e-6:.3g} us" if a >= 1e-9 else "0 s"


def _signed(v: float, f: Callable[[float], str]) -> str:
    return ("+" if v > 0 else "") + f(v)


def _range(low: float, high: float, f: Callable[[float], str]) -> str:
    """``3.6-4.6 ms`` when both ends share a sign and a unit, else ``-20 us to 1.2 ms``."""
    lo, hi = f(low), f(high)
    lo_num, _, lo_unit = lo.partition(" ")
    hi_num, _, hi_unit = hi.partition(" ")
    if lo_unit and lo_unit == hi_unit and low >= 0 and high >= 0:
        return f"{lo_num}-{hi_num} {hi_unit}"
    return f"{lo} to {hi}"


def explain_pair(
    a: Trace,
    b: Trace,
    matches: list[Match],
    metric: str,
    *,
    labels: tuple[str, str] = ("a", "b"),
    depth: int | None = None,
    level: float = 0.95,
    resamples: int = 1000,
    seed: int = 0,
) -> Explanation:
    """Rank what explains the change in ``metric`` from ``a`` to ``b``; see :class:`Explanation`."""
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {', '.join(map(repr, METRICS))}; got {metric!r}")
    notes = _check(a, b, metric, labels)
    src = memory_source(a, b)
    fa, fb = figures(a, metric, src), figures(b, metric, src)
    for label, fig in zip(labels, (fa, fb), strict=True):
        notes += [f"{label} lacks {m}" for m in fig.missing]
    _refuse(a, b, metric, src, labels, (fa, fb))
    peaks = [t.memory_meta is not None and bool(t.memory_meta.peak_by_module) for t in (a, b)]
    if metric == "memory" and src != "peak" and any(peaks):
        who = labels[peaks.index(False)]
        notes.append(
            f"{who} lacks a memory recording's peak by module: memory compares {fa.source} instead"
        )
    scale_a, scale_b, per_sample = 1.0, 1.0, False
    na, nb = batch_size(a), batch_size(b)
    if metric != "params" and na and nb and na != nb:
        scale_a, scale_b, per_sample = 1.0 / na, 1.0 / nb, True
        notes.append(
            f"batch sizes differ ({labels[0]} {na}, {labels[1]} {nb}): figures are per sample"
        )
    how = f"; {fig_interval_note(fa, fb, a is b)}" if metric == "time" else ""
    notes.insert(0, f"{metric}: {fa.source}{how}")
    groups = _groups(a, b, matches, fa, fb, depth)
    keys = list(groups)
    va = np.array([groups[k]["a"] for k in keys]) * scale_a
    vb = np.array([groups[k]["b"] for k in keys]) * scale_b
    tot_a = float(va.sum() + fa.outside * scale_a)
    tot_b = float(vb.sum() + fb.outside * scale_b)
    low = high = None
    lows = highs = None
    if fa.passes is not None and fb.passes is not None:
        sa = _matrix(groups, keys, "pa") * scale_a
        sb = _matrix(groups, keys, "pb") * scale_b
        va, vb = np.median(sa, axis=0), np.median(sb, axis=0)
        tot_a = float(np.median(sa.sum(axis=1))) + fa.outside * scale_a
        tot_b = float(np.median(sb.sum(axis=1))) + fb.outside * scale_b
        (lows, highs), (low, high) = _bootstrap(sa, sb, a is b, level, resamples, seed)
    total = tot_b - tot_a
    rows = []
    for i, k in enumerate(keys):
        g = groups[k]
        d = float(vb[i] - va[i])
        status = "added" if not g["in_a"] else "removed" if not g["in_b"] else "changed"
        lo = None if lows is None else float(lows[i])
        hi = None if highs is None else float(highs[i])
        noise = lo is not None and hi is not None and lo <= 0 <= hi
        rows.append(
            ExplainRow(
                k,
                g["type"],
                g["match"] or "(folded)",
                "same" if d == 0 and status == "changed" else status,
                float(va[i]),
                float(vb[i]),
                d,
                d / total if total else None,
                lo,
                hi,
                noise,
            )
        )
    rows.sort(key=lambda r: (r.within_noise, r.delta == 0 and r.status == "same", -abs(r.delta)))
    out_d = fb.outside * scale_b - fa.outside * scale_a
    if out_d:
        rows.append(
            ExplainRow(
                "(outside modules)",
                "",
                "",
                "changed",
                fa.outside * scale_a,
                fb.outside * scale_b,
                out_d,
                out_d / total if total else None,
            )
        )
    noise = low is not None and high is not None and low <= 0 <= high
    head = _headline(metric, tot_a, low, high, noise, rows, total, per_sample)
    return Explanation(
        metric,
        labels,
        tot_a,
        tot_b,
        total,
        low,
        high,
        tuple(rows),
        tuple(notes),
        head,
        per_sample,
        level,
    )


def _refuse(
    a: Trace,
    b: Trace,
    metric: str,
    src: str,
    labels: tuple[str, str],
    figs: tuple[Figures, Figures],
) -> None:
    """Errors naming what to record instead, for a metric the traces cannot answer."""
    if metric == "time":
        who = [
            lb
            for lb, f in zip(labels, figs, strict=True)
            if any(m.startswith("times (recorded") for m in f.missing)
        ]
        if who:
            raise ValueError(
                f"explain('time'): trace {' and '.join(who)} has no times (recorded with "
                "repeat=0, or a plan); record it with labkit.trace(..., repeat=5), or explain "
                "'flops', 'memory' or 'params'"
            )
    if metric == "flops" and "timing" in (a.meta.mode, b.meta.mode):
        raise ValueError(
            "explain('flops'): a trace of mode 'timing' counts no FLOPs; record "
            "both with labkit.trace(..., mode='full')"
        )
    if metric == "memory" and src != "peak" and "timing" in (a.meta.mode, b.meta.mode):
        raise ValueError(
            "explain('memory'): a trace of mode 'timing' keeps no saved or output "
            "bytes; record both with mode='full' or with labkit.memory"
        )


def _groups(
    a: Trace, b: Trace, matches: list[Match], fa: Figures, fb: Figures, depth: int | None
) -> dict[str, dict[str, Any]]:
    """Each matched module's figures (per pass too), folded below ``depth`` into its
    ancestor there."""
    types_a = {m.path: m.type for m in a.modules}
    types_b = {m.path: m.type for m in b.modules}
    groups: dict[str, dict[str, Any]] = {}
    for m in matches:
        path = m.a if m.a is not None else m.b
        assert path is not None
        key = path if depth is None or not path else ".".join(path.split(".")[:depth])
        typ = (types_a.get(key) if m.a is not None else types_b.get(key)) or ""
        g = groups.setdefault(
            key,
            {
                "type": typ,
                "match": "",
                "a": 0.0,
                "b": 0.0,
                "pa": None,
                "pb": None,
                "in_a": False,
                "in_b": False,
            },
        )
        if key == path:
            g["match"] = m.rule
        for side, p, fig in (("a", m.a, fa), ("b", m.b, fb)):
            if p is None:
                continue
            g[f"in_{side}"] = True
            g[side] += fig.values.get(p, 0.0)
            if fig.passes is not None and p in fig.passes:
                prev = g[f"p{side}"]
                g[f"p{side}"] = fig.passes[p] + (0 if prev is None else prev)
    return groups


def fig_interval_note(fa: Figures, fb: Figures, same: bool) -> str:
    """How the time intervals were made, in words."""
    if fa.passes is None or fb.passes is None:
        return "no intervals (a trace lacks per-pass times)"
    pa = len(next(iter(fa.passes.values()), ()))
    pb = len(next(iter(fb.passes.values()), ()))
    how = "paired (the same trace)" if same else "each trace's passes apart"
    return f"medians of {pa} and {pb} timing passes, 95% bootstrap intervals over passes, {how}"


def _matrix(groups: dict[str, dict[str, Any]], keys: list[str], side: str) -> np.ndarray:
    n = next((len(groups[k][side]) for k in keys if groups[k][side] is not None), 1)
    cols = [groups[k][side] if groups[k][side] is not None else np.zeros(n) for k in keys]
    return np.stack(cols, axis=1) if cols else np.zeros((n, 0))


def _bootstrap(
    sa: np.ndarray, sb: np.ndarray, paired: bool, level: float, resamples: int, seed: int
) -> tuple[tuple[np.ndarray, np.ndarray], tuple[float, float]]:
    """Percentile intervals of each column's median difference and of the row sums'."""
    rng = np.random.default_rng(seed)
    ia = rng.integers(0, sa.shape[0], size=(resamples, sa.shape[0]))
    ib = (
        ia
        if paired and sa.shape == sb.shape
        else rng.integers(0, sb.shape[0], size=(resamples, sb.shape[0]))
    )
    q = [(1 - level) / 2, (1 + level) / 2]
    lows, highs = np.zeros(sa.shape[1]), np.zeros(sa.shape[1])
    chunk = max(1, 2_000_000 // max(1, resamples * max(sa.shape[0], sb.shape[0])))
    for s in range(0, sa.shape[1], chunk):
        d = np.median(sb[:, s : s + chunk][ib], axis=1) - np.median(
            sa[:, s : s + chunk][ia], axis=1
        )
        lows[s : s + chunk], highs[s : s + chunk] = np.quantile(d, q, axis=0)
    tot = np.median(sb.sum(axis=1)[ib], axis=1) - np.median(sa.sum(axis=1)[ia], axis=1)
    lo, hi = np.quantile(tot, q)
    return (lows, highs), (float(lo), float(hi))


def _headline(
    metric: str,
    tot_a: float,
    low: float | None,
    high: float | None,
    noise: bool,
    rows: list[ExplainRow],
    total: float,
    per_sample: bool,
) -> str:
    f = formatter(metric)
    what = _WHAT[metric] + (" per sample" if per_sample else "")
    pct = f"{total / tot_a:+.1%}" if tot_a else "from 0"
    iv = f", 95% {_range(low, high, f)}" if low is not None and high is not None else ""
    if total == 0 and not any(r.delta for r in rows):
        return (
            f"{what}: no change ({f(tot_a)} in both)"
            if low is None
            else (f"{what} {pct} ({_signed(total, f)}{iv}): no change beyond noise")
        )
    head = f"{what} {pct} ({_signed(total, f)}{iv})"
    real = [
        r for r in rows if r.delta != 0 and not r.within_noise and r.module != "(outside modules)"
    ]
    if noise or not real:
        if not real:
            return f"{head}: no change beyond noise"
        r = real[0]
        name = r.module or "(root)"
        return f"{head}: within noise in total, but {name} changed {_signed(r.delta, f)}"
    name, d = _explaining(rows, total)
    share = f"{d / total:.0%}" if total else "all"
    return f"{head}: {name or '(root)'} explains {share} ({_signed(d, f)})"


def _explaining(rows: list[ExplainRow], total: float) -> tuple[str, float]:
    """The deepest module whose subtree holds at least half of the change (same sign), else
    the top row: found by summing the rows' deltas up their paths."""
    incl: dict[str, float] = {}
    for r in rows:
        if r.module == "(outside modules)":
            continue
        parts = r.module.split(".") if r.module else []
        for i in range(len(parts) + 1):
            k = ".".join(parts[:i])
            incl[k] = incl.get(k, 0.0) + r.delta
    here = ""
    while True:
        kids = [k for k in incl if k and (k.rsplit(".", 1)[0] if "." in k else "") == here]
        best = max(kids, key=lambda k: incl[k] * math.copysign(1, total), default=None)
        if best is None or incl[best] * math.copysign(1, total) <= 0.6 * abs(total):
            break
        here = best
    if here == "":
        top = next((r for r in rows if r.delta and not r.within_noise), rows[0])
        return top.module, top.delta
    return here, incl[here]


def _check(a: Trace, b: Trace, metric: str, labels: tuple[str, str]) -> list[str]:
    """What differs between the traces beyond the model, in words."""
    notes = []
    la, lb = labels
    if a is b:
        notes.append("a trace diffed with itself")
    if a.meta.mode != b.meta.mode:
        kind = {"plan": "a plan (predicted on fake tensors, no times)"}
        notes.append(
            f"modes differ: {la} is {kind.get(a.meta.mode, a.meta.mode)}, "
            f"{lb} is {kind.get(b.meta.mode, b.meta.mode)}"
        )
        if metric == "time" and "plan" in (a.meta.mode, b.meta.mode):
            who = la if a.meta.mode == "plan" else lb
            raise ValueError(
                f"explain('time'): trace {who} is a plan (labkit.plan) and has no "
                "times; explain 'flops', 'memory' or 'params', or record it with "
                "labkit.trace"
            )
    if a.meta.device != b.meta.device:
        notes.append(
            f"devices differ ({la} {a.meta.device}, {lb} {b.meta.device})"
            + (": the change in time includes the device's" if metric == "time" else "")
        )
    if (
        a.meta.torch_version != b.meta.torch_version
        and a.meta.torch_version
        and b.meta.torch_version
    ):
        notes.append(f"torch {a.meta.torch_version} -> {b.meta.torch_version}")
    if a.meta.backward != b.meta.backward:
        who = la if not a.meta.backward else lb
        notes.append(
            f"only one trace recorded backward ({who} did not): its backward figures are absent"
        )
    return notes
