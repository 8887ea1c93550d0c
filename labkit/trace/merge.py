"""Union of several traces' graphs, with how often each node ran."""

from __future__ import annotations

import dataclasses

from labkit.trace.model import Edge, ModuleInfo, Node, Trace

_ADDED = ("count", "fwd_time", "bwd_time", "bwd_self_time", "flops_fwd", "flops_bwd", "saved_bytes")


def merge(*traces: Trace) -> Trace:
    """Merge traces of the same model (e.g. inputs that took different branches).

    Nodes are matched by ``key``; a node present in several traces is kept once with
    its figures and ``count`` summed. Nodes appear in first-seen order, so parents
    still come before their children.

    Args:
        *traces: Traces of the same model class.

    Returns:
        A new Trace; ``meta.calls`` and the time totals are summed too.
    """
    if not traces:
        raise ValueError("merge needs at least one trace")
    models = {t.meta.model for t in traces}
    if len(models) > 1:
        raise ValueError(f"cannot merge traces of different models: {sorted(models)}")
    nodes: dict[str, Node] = {}
    edges: dict[tuple[str, str, tuple[int, ...], str], None] = {}
    for t in traces:
        for n in t.nodes:
            parent = None if n.parent is None else nodes[t.nodes[n.parent].key].id
            if n.key in nodes:
                old = nodes[n.key]
                nodes[n.key] = dataclasses.replace(
                    old, **{a: getattr(old, a) + getattr(n, a) for a in _ADDED}
                )
            else:
                nodes[n.key] = dataclasses.replace(n, id=len(nodes), parent=parent)
        for e in t.edges:
            edges.setdefault((t.nodes[e.src].key, t.nodes[e.dst].key, e.shape, e.dtype))
    merged_edges = tuple(Edge(nodes[s].id, nodes[d].id, shape, dt) for s, d, shape, dt in edges)
    calls: dict[str, int] = {}
    for n in nodes.values():
        if n.kind == "module":
            calls[n.module or ""] = calls.get(n.module or "", 0) + n.count
    first = traces[0]
    modules = tuple(dataclasses.replace(m, calls=calls.get(m.path, 0)) for m in first.modules)
    meta = dataclasses.replace(
        first.meta,
        backward=any(t.meta.backward for t in traces),
        calls=sum(t.meta.calls for t in traces),
        forward_time=sum(t.meta.forward_time for t in traces),
        backward_time=sum(t.meta.backward_time for t in traces),
        outside_flops_fwd=sum(t.meta.outside_flops_fwd for t in traces),
        outside_flops_bwd=sum(t.meta.outside_flops_bwd for t in traces),
        outside_bwd_time=sum(t.meta.outside_bwd_time for t in traces),
        notes=tuple(dict.fromkeys(n for t in traces for n in t.meta.notes)),
    )
    return Trace(meta, _union_modules(modules, traces), tuple(nodes.values()), merged_edges)


def _union_modules(
    modules: tuple[ModuleInfo, ...], traces: tuple[Trace, ...]
) -> tuple[ModuleInfo, ...]:
    known = {m.path for m in modules}
    extra = [m for t in traces[1:] for m in t.modules if m.path not in known]
    return modules + tuple(dict((m.path, m) for m in extra).values())
