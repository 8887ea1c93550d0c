"""The per-module figures ``TraceDiff.explain`` ranks: additive self figures of one trace.

Every figure is a module's *self* share (what ran in it, not in its child modules), so the
rows of one trace add up to its total: time (forward self + backward self, and per timing
pass when the trace kept them), FLOPs (forward + backward), parameters (counted once),
memory (what the module holds at the peak: by a memory recording's attribution, else the
bytes its own ops saved for backward, else its output bytes for a leaf).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from labkit.trace.model import Trace

METRICS = ("time", "memory", "flops", "params")


@dataclass
class Figures:
    """One trace's self figure per module path for one metric.

    Args:
        values: Module path -> self figure (seconds, FLOPs, bytes or elements).
        passes: Module path -> the figure in each timing pass (time only; None when the
            trace kept no per-pass times).
        outside: What the trace counts outside any module (the loss's FLOPs and backward).
        source: What the figure is, in words, for the notes.
        missing: Figures this trace lacks, in words (an older file, no backward...).
    """

    values: dict[str, float]
    passes: dict[str, np.ndarray] | None = None
    outside: float = 0.0
    source: str = ""
    missing: list[str] = field(default_factory=list)


def batch_size(trace: Trace) -> int | None:
    """The leading dimension of the trace's first input tensor (None: no tensor input)."""
    for n in trace.nodes:
        if n.kind == "input" and n.outputs and n.outputs[0].shape:
            return int(n.outputs[0].shape[0])
    return None


def figures(trace: Trace, metric: str, memory_source: str) -> Figures:
    """The self figures of ``trace`` for ``metric`` (``memory_source`` as :func:`memory_source`)."""
    if metric == "params":
        return Figures({m.path: float(m.params) for m in trace.modules}, source="parameters")
    if metric == "flops":
        vals = _sum_calls(trace, lambda n: float(n.flops_fwd + n.flops_bwd))
        outside = float(trace.meta.outside_flops_fwd + trace.meta.outside_flops_bwd)
        return Figures(vals, outside=outside, source="FLOPs, forward + backward")
    if metric == "memory":
        return _memory(trace, memory_source)
    return _time(trace)


def memory_source(a: Trace, b: Trace) -> str:
    """``"peak"`` when both traces hold a memory recording's per-module peak, ``"saved"``
    when both recorded backward, else ``"outputs"``."""
    if all(t.memory_meta is not None and t.memory_meta.peak_by_module for t in (a, b)):
        return "peak"
    if all(t.meta.backward for t in (a, b)):
        return "saved"
    return "outputs"


def _sum_calls(trace: Trace, value: object) -> dict[str, float]:
    out: dict[str, float] = {m.path: 0.0 for m in trace.modules}
    for n in trace.nodes:
        if n.kind == "module":
            out[n.module or ""] = out.get(n.module or "", 0.0) + value(n)  # type: ignore[operator]
    return out


def _memory(trace: Trace, source: str) -> Figures:
    if source == "peak":
        mm = trace.memory_meta
        assert mm is not None
        vals = {m.path: 0.0 for m in trace.modules}
        for path, cats in mm.peak_by_module.items():
            vals[path] = vals.get(path, 0.0) + float(sum(cats.values()))
        outside = float(mm.peak_bytes) - sum(vals.values())
        return Figures(
            vals, outside=max(0.0, outside), source="bytes each module holds at the step's peak"
        )
    if source == "saved":
        vals = _sum_calls(trace, lambda n: float(n.saved_bytes))
        return Figures(vals, source="bytes each module's own ops saved for backward")
    leaf = {n.parent for n in trace.nodes if n.kind == "module" and n.parent is not None}
    vals = _sum_calls(trace, lambda n: 0.0 if n.id in leaf else float(n.activation_bytes))
    return Figures(vals, source="output bytes of leaf modules (no backward recorded)")


def _time(trace: Trace) -> Figures:
    nodes = trace.nodes
    kids: dict[int, list[int]] = {}
    calls = [n for n in nodes if n.kind == "module"]
    for n in calls:
        if n.parent is not None:
            kids.setdefault(n.parent, []).append(n.id)
    vals: dict[str, float] = {m.path: 0.0 for m in trace.modules}
    for n in calls:
        own = n.fwd_time - sum(nodes[c].fwd_time for c in kids.get(n.id, ())) + n.bwd_self_time
        vals[n.module or ""] = vals.get(n.module or "", 0.0) + own
    fig = Figures(vals, outside=trace.meta.outside_bwd_time, source="forward + backward self time")
    lengths = {len(n.fwd_pass_times) for n in calls} | {len(n.bwd_pass_times) for n in calls}
    merged = trace.meta.runs > 1 or any(n.runs > 1 for n in calls)
    if merged:
        fig.missing.append("per-pass times (a merged trace holds per-run means)")
    elif len(lengths) != 1 or 0 in lengths:
        fig.missing.append(
            "per-pass times (a trace file from an older labkit, or a call that "
            "did not run in every pass), so its times carry no interval"
        )
    else:
        (p,) = lengths
        fw = {n.id: np.asarray(n.fwd_pass_times) for n in calls}
        per: dict[str, np.ndarray] = {m.path: np.zeros(p) for m in trace.modules}
        for n in calls:
            own = fw[n.id] - sum((fw[c] for c in kids.get(n.id, ())), np.zeros(p))
            key = n.module or ""
            per[key] = per.get(key, np.zeros(p)) + own + np.asarray(n.bwd_pass_times)
        fig.passes = per
    if not any(n.fwd_time or n.bwd_time for n in calls):
        fig.missing.append("times (recorded without timing passes: repeat=0, or a plan)")
    elif not trace.meta.backward:
        fig.missing.append("backward times (no backward pass recorded)")
    return fig
