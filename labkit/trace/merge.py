"""Union of several traces' graphs, with how often each node ran."""

from __future__ import annotations

import dataclasses

from labkit.trace.model import Edge, ModuleInfo, Node, Trace

_MEANS = ("fwd_time", "bwd_time", "bwd_self_time", "flops_fwd", "flops_bwd", "saved_bytes")
_META_MEANS = (
    "forward_time",
    "backward_time",
    "outside_flops_fwd",
    "outside_flops_bwd",
    "outside_bwd_time",
)


def merge(*traces: Trace) -> Trace:
    """Merge traces of the same model (e.g. inputs that took different branches).

    Nodes are matched by ``key``; a node present in several traces is kept once.
    ``meta.runs`` is how many runs the merged trace stands for and ``Node.runs`` in how
    many of them each node ran (a branch taken once in three runs: 1 of 3); ``count``
    sums how many times it ran. Times, FLOPs and bytes are *per-run means* over all the
    runs (a node that did not run in a run counts 0 there), so the merged totals are
    what one run costs on average. Nodes appear in first-seen order, so parents still
    come before their children.

    Args:
        *traces: Traces of the same model class (merged traces too: their runs count).

    Returns:
        A new Trace.
    """
    if not traces:
        raise ValueError("merge needs at least one trace")
    models = {t.meta.model for t in traces}
    if len(models) > 1:
        raise ValueError(f"cannot merge traces of different models: {sorted(models)}")
    total_runs = sum(t.meta.runs for t in traces)
    nodes: dict[str, Node] = {}
    sums: dict[str, dict[str, float]] = {}
    edges: dict[tuple[str, str, tuple[int, ...], str], None] = {}
    for t in traces:
        w = t.meta.runs  # a merged input's figures are means over its runs
        for n in t.nodes:
            parent = None if n.parent is None else nodes[t.nodes[n.parent].key].id
            acc = sums.setdefault(n.key, dict.fromkeys(_MEANS, 0.0))
            for a in _MEANS:
                acc[a] += getattr(n, a) * w
            if n.key in nodes:
                old = nodes[n.key]
                nodes[n.key] = dataclasses.replace(
                    old, count=old.count + n.count, runs=old.runs + n.runs
                )
            else:
                nodes[n.key] = dataclasses.replace(
                    n, id=len(nodes), parent=parent, fwd_iqr=0.0, bwd_iqr=0.0
                )
    for key, n in nodes.items():
        acc = sums[key]
        nodes[key] = dataclasses.replace(
            n, **{a: (type(getattr(n, a))(acc[a] / total_runs)) for a in _MEANS}
        )
        for e in t.edges:
            edges.setdefault((t.nodes[e.src].key, t.nodes[e.dst].key, e.shape, e.dtype))
    merged_edges = tuple(Edge(nodes[s].id, nodes[d].id, shape, dt) for s, d, shape, dt in edges)
    calls: dict[str, int] = {}
    for n in nodes.values():
        if n.kind == "module":
            calls[n.module or ""] = calls.get(n.module or "", 0) + n.count
    first = traces[0]
    modules = tuple(dataclasses.replace(m, calls=calls.get(m.path, 0)) for m in first.modules)
    means = {
        a: type(getattr(first.meta, a))(
            sum(getattr(t.meta, a) * t.meta.runs for t in traces) / total_runs
        )
        for a in _META_MEANS
    }
    timings = tuple(dict.fromkeys(t.meta.timing for t in traces if t.meta.timing))
    meta = dataclasses.replace(
        first.meta,
        backward=any(t.meta.backward for t in traces),
        calls=sum(t.meta.calls for t in traces),
        runs=total_runs,
        forward_iqr=0.0,
        backward_iqr=0.0,
        timing=f"per-run means over {total_runs} merged runs"
        + (f"; each run: {'; '.join(timings)}" if timings else ""),
        notes=tuple(dict.fromkeys(n for t in traces for n in t.meta.notes)),
        **means,
    )
    return Trace(meta, _union_modules(modules, traces), tuple(nodes.values()), merged_edges)


def _union_modules(
    modules: tuple[ModuleInfo, ...], traces: tuple[Trace, ...]
) -> tuple[ModuleInfo, ...]:
    known = {m.path for m in modules}
    extra = [m for t in traces[1:] for m in t.modules if m.path not in known]
    return modules + tuple(dict((m.path, m) for m in extra).values())
