"""Turn a Trace into the compact, JSON-ready traits the widgets send to the browser.

Pure functions of plain data: no widget, no traitlets. Arrays rather than one dict
per node keep the payload small (the layout benchmark reports bytes per node).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from labkit._gc import no_gc
from labkit.trace.graph import DEFAULT_DEPTH, Canon, canonicalize, default_expanded
from labkit.trace.model import MEMORY_CATEGORIES
from labkit.trace.roll import instance_levels
from labkit.views._contract import (
    GraphPayload,
    LargestStorage,
    MemoryPayload,
    NodeMetrics,
    ProfilePayload,
)

if TYPE_CHECKING:
    from labkit.trace.model import TensorMeta, Trace

# The labels and units of every figure the views show are written here, once, and sent
# in the payloads (the JS formats by unit: widgets/src/_units.js; units: _contract.UNITS).

#: Metrics a view can colour or rank by: key -> label.
METRICS: dict[str, str] = {
    "fwd_time": "forward time",
    "bwd_time": "backward time",
    "flops": "FLOPs (fwd + bwd)",
    "params": "parameters",
    "activations": "activation memory",
}
#: The unit of each metric (:data:`labkit.views._contract.UNITS`).
METRIC_UNITS: dict[str, str] = {
    "fwd_time": "time",
    "bwd_time": "time",
    "flops": "count",
    "params": "count",
    "activations": "bytes",
}
KIND_CODES = {"input": "i", "output": "o", "module": "m", "op": "p"}
#: The colour of each memory category, in every view (sent as ``memory_payload``'s colors).
MEMORY_COLORS: dict[str, str] = dict(
    zip(
        MEMORY_CATEGORIES,
        ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948"),
        strict=True,
    )
)
OTHER_COLOR = "#bab0ac"  #: a category labkit does not know


#: The last few :func:`canon_of` results: ``(trace, rolled, unrolled, canon)``, newest last.
_CANONS: list[tuple[Trace, bool, tuple[str, ...], Canon]] = []
_CANONS_KEPT = 4


def canon_of(trace: Trace, *, rolled: bool = True, unrolled: Collection[str] = ()) -> Canon:
    """:func:`~labkit.trace.graph.canonicalize`, remembered for the last few traces.

    A GraphView's payload, its picture, its repr and its marks each need the same
    rolling; at 100,000 nodes one ``canonicalize`` takes seconds. A Trace is immutable,
    so the result is looked up by the trace object itself (identity, not equality).
    """
    key = tuple(sorted(unrolled))
    for t, r, u, canon in _CANONS:
        if t is trace and r == rolled and u == key:
            return canon
    canon = canonicalize(trace, rolled=rolled, unrolled=key)
    _CANONS.append((trace, rolled, key, canon))
    del _CANONS[:-_CANONS_KEPT]
    return canon


def metric_table() -> dict[str, list[str]]:
    """``{metric key: [label, unit]}``, as the graph and profile payloads send it."""
    return {m: [label, METRIC_UNITS[m]] for m, label in METRICS.items()}


def _round(x: float) -> float | int:
    """Four significant digits: enough for colours and tables, short in JSON."""
    if x == 0:
        return 0
    if type(x) is int and -10_000 < x < 10_000:
        return x  # four digits or fewer already
    r = round(x, 3 - math.floor(math.log10(abs(x))))  # as f"{x:.4g}", a third faster
    if type(r) is int:
        return r
    return int(r) if r.is_integer() and abs(r) < 2**53 else r


def tensor_text(t: TensorMeta) -> str:
    """``(2, 8, 16, 16) float32 -> '2x8x16x16 float32'``."""
    return f"{'x'.join(map(str, t.shape)) or 'scalar'} {t.dtype}"


def node_label(trace: Trace, node_id: int, canon: Canon) -> str:
    """The short label a graph draws on a node (the browser's ``labelOf`` draws the same).

    A rolled block reads ``"blocks.0-2 x3"`` (with a multiplication sign, U+00D7), the
    root call the model's name, a numbered child of a container keeps the container's name
    (``"layers.0"``, not a bare ``"0"``), any other call the last part of its path, and an
    op its name.
    """
    n = trace.nodes[node_id]
    if n.kind != "module":
        return n.name
    if canon.count[node_id] > 1:
        return f"{canon.block_name[node_id]} \u00d7{canon.count[node_id]}"  # U+00D7
    if n.name == "":
        return trace.meta.model or n.type
    *parts, last = n.name.split(".")
    return f"{parts[-1]}.{last}" if parts and last.isascii() and last.isdigit() else last


def structure_key(trace: Trace, *, rolled: bool = True, unrolled: Collection[str] = ()) -> str:
    """A short hash of what the layout depends on (nodes, nesting, edges, rolling)."""
    h = hashlib.sha1(usedforsecurity=False)
    h.update("".join([f"{n.kind}|{n.name}|{n.type}|{n.parent}\n" for n in trace.nodes]).encode())
    h.update("".join([f"{e.src}>{e.dst}\n" for e in trace.edges]).encode())
    h.update(b"rolled" if rolled else b"flat")
    h.update("|".join(sorted(unrolled)).encode())
    return h.hexdigest()[:16]


def graph_payload(
    trace: Trace,
    *,
    rolled: bool = True,
    canon: Canon | None = None,
    unrolled: Collection[str] = (),
) -> GraphPayload:
    """The structure a GraphView lays out: nodes, nesting, shapes and lifted-ready edges.

    Only nodes that are drawn at some expansion are sent (calls rolled into a block's
    first call are not). Node ``k`` of the payload is trace node ``ids[k]``.

    Args:
        trace: The trace.
        rolled: Roll repeated blocks into one ``x N`` node.
        canon: A precomputed :func:`labkit.trace.graph.canonicalize` result.
        unrolled: Names of blocks drawn call by call though ``rolled``.

    Returns:
        A :class:`~labkit.views._contract.GraphPayload`: JSON-ready parallel arrays.
    """
    canon = canon or canonicalize(trace, rolled=rolled, unrolled=unrolled)
    keep = [n.id for n in trace.nodes if canon.is_canonical(n.id)]
    index = {nid: k for k, nid in enumerate(keep)}
    tensors: dict[str, int] = {}
    known: dict[tuple[tuple[int, ...], str], int] = {}  # the same shape and dtype: once
    seen: dict[int, int] = {}  # by object: a trace shares one TensorMeta between uses

    def tid(t: TensorMeta) -> int:
        i = seen.get(id(t))
        if i is None:
            key = (t.shape, t.dtype)
            i = known.get(key)
            if i is None:
                i = known[key] = tensors.setdefault(tensor_text(t), len(tensors))
            seen[id(t)] = i
        return i

    nodes = [trace.nodes[i] for i in keep]
    edges: list[int] = []
    edge_tensor: list[int] = []
    for s, d, k in canon.edges:
        e = trace.edges[k]
        edges += [index[s], index[d]]
        edge_tensor.append(
            tensors.setdefault(f"{'x'.join(map(str, e.shape))} {e.dtype}", len(tensors))
        )
    heads = [i for i in keep if canon.count[i] > 1]
    entry = {h: j for j, h in enumerate(heads)}
    levels = instance_levels(trace, frozenset(unrolled)) if rolled and heads else {}
    return {
        "key": structure_key(trace, rolled=rolled, unrolled=unrolled),
        "model": trace.meta.model,
        "ids": keep,
        "kind": "".join(KIND_CODES[n.kind] for n in nodes),
        "parent": [index[n.parent] if n.parent is not None else -1 for n in nodes],
        "name": [n.name for n in nodes],
        "type": [n.type for n in nodes],
        "ins": [[seen[i] if (i := id(t)) in seen else tid(t) for t in n.inputs] for n in nodes],
        "outs": [[seen[i] if (i := id(t)) in seen else tid(t) for t in n.outputs] for n in nodes],
        "rolled": [[index[i], canon.count[i], canon.block_name[i]] for i in heads],
        "instances": {
            "name": [trace.nodes[i].name for i in levels],
            "node": [index[canon.alias[i]] for i in levels],
            "where": [[x for h, m, _ in lv for x in (entry[h], m)] for lv in levels.values()],
        },
        "edges": edges,
        "edge_tensor": edge_tensor,
        "tensors": list(tensors),
        "runs": [n.runs for n in nodes],
        "total_runs": trace.meta.runs,
        "metrics": metric_table(),  # the browser's names and formatters come from here
    }


def _inclusive(trace: Trace, own: list[float]) -> list[float]:
    """Per node, ``own`` summed over its subtree as :meth:`Trace.total` sums it (a module
    call's value adds into its parent's), in one pass."""
    vals = list(own)
    nodes = trace.nodes
    for n in reversed(nodes):  # children come after parents
        if n.parent is not None and n.kind == "module":
            vals[n.parent] += vals[n.id]
    return vals


def _params(trace: Trace) -> dict[str, int]:
    """Parameters per module path, its submodules' included (``rows()``'s ``params``),
    without building the whole profile table."""
    out: dict[str, int] = {}
    for m in trace.modules:
        if not m.params:
            continue
        parts = m.path.split(".") if m.path else []
        for i in range(len(parts) + 1):
            key = ".".join(parts[:i])
            out[key] = out.get(key, 0) + m.params
    return out


def _own(trace: Trace, metric: str) -> list[float]:
    """One metric per node, inclusive for a module call (what a box shows); kept with the
    (immutable) trace: the box figures and the rolled instances' figures read the same."""
    cache: dict[str, list[float]] = trace.__dict__.setdefault("_box_figures", {})
    if metric not in cache:
        cache[metric] = _own_figures(trace, metric)
    return cache[metric]


def _own_figures(trace: Trace, metric: str) -> list[float]:
    nodes = trace.nodes
    if metric == "params":
        params = _params(trace)
        return [params.get(x.module or "", 0) if x.kind == "module" else 0 for x in nodes]
    if metric == "fwd_time":
        return [x.fwd_time for x in nodes]
    if metric == "bwd_time":
        return [x.bwd_time if x.kind == "module" else x.bwd_self_time for x in nodes]
    if metric == "flops":
        fwd = _inclusive(trace, [x.flops_fwd for x in nodes])
        bwd = _inclusive(trace, [x.flops_bwd for x in nodes])
        return [a + b for a, b in zip(fwd, bwd, strict=True)]
    return _inclusive(trace, [x.saved_bytes for x in nodes])


def box_values(trace: Trace, canon: Canon, metric: str) -> dict[int, float]:
    """One metric per drawn node (rolled calls summed into their block), reading only that
    metric: what a static picture colours by, fast on big traces."""
    out = _summed(canon, _own(trace, metric))
    alias = canon.alias
    return {i: out[i] for i in range(len(alias)) if alias[i] == i}


def _summed(canon: Canon, own: list[float], *, flat: bool | None = None) -> list[float]:
    """Each node's value plus those of the calls rolled into it (``flat``: nothing rolled)."""
    alias = canon.alias
    if flat is None:
        flat = all(a == i for i, a in enumerate(alias))
    if flat:
        return own
    out = [0.0] * len(own)
    for i, a in enumerate(alias):
        out[a] += own[i]
    return out


def node_metrics(
    trace: Trace, *, rolled: bool = True, canon: Canon | None = None, unrolled: Collection[str] = ()
) -> NodeMetrics:
    """Per drawn node, each metric of :data:`METRICS` (rolled calls summed into their block).

    Returns:
        ``{metric: [value per payload node]}`` in the order of :func:`graph_payload`'s ``ids``.
    """
    canon = canon or canonicalize(trace, rolled=rolled, unrolled=unrolled)
    alias = canon.alias
    keep = [i for i in range(len(alias)) if alias[i] == i]
    flat = len(keep) == len(alias)
    out: NodeMetrics = {}
    for m in METRICS:
        values = _summed(canon, _own(trace, m), flat=flat)
        out[m] = [_round(values[i]) for i in keep] if not flat else list(map(_round, values))
    return out


def instance_metrics(trace: Trace, graph: GraphPayload) -> NodeMetrics:
    """Each metric of one call, per entry of ``graph["instances"]`` (one instance's figures).

    Returns:
        ``{metric: [value per instance entry]}``.
    """
    if not graph["instances"]["name"]:
        return {m: [] for m in METRICS}  # nothing rolled: no module table to build
    own = {m: _own(trace, m) for m in METRICS}
    by_name: dict[str, list[int]] = {}
    for n in trace.nodes:
        if n.kind == "module":
            by_name.setdefault(n.name, []).append(n.id)
    seen: dict[str, int] = {}
    out: dict[str, list[float | int]] = {m: [] for m in METRICS}
    for name in graph["instances"]["name"]:
        calls = by_name[name]  # a path called twice has two entries, in call order
        i = calls[min(seen.get(name, 0), len(calls) - 1)]
        seen[name] = seen.get(name, 0) + 1
        for m in METRICS:
            out[m].append(_round(own[m][i]))
    return out


#: A library layer's calls nest at most this deep below it (its sublayers and theirs).
LAYER_HEIGHT = 2


def library_layers(trace: Trace) -> set[int]:
    """Calls of library layers: drawn collapsed at the default depth, their insides being
    the library's, not the researcher's (PyG's ``GATConv``, ``nn.MultiheadAttention``,
    Hugging Face's attention classes).

    The rule is structural, not by class name. A call is a library layer when its class
    comes from an installed library (:attr:`ModuleInfo.library`: site-packages or the
    standard library, not ``__main__`` or the user's package), something ran inside it,
    its calls nest at most :data:`LAYER_HEIGHT` deep (a layer, not a model or a stack of
    blocks), and it either computes itself (ops of its own) or sits inside another
    library call (a container the library built, not the user's ``nn.Sequential``). The
    model itself is never one.
    """
    nodes = trace.nodes
    lib = {m.path: m.library for m in trace.modules}
    if not any(lib.values()):
        return set()
    height = [0] * len(nodes)  # how deep calls nest below a call (0: no calls inside)
    own_ops = [False] * len(nodes)
    below = [False] * len(nodes)
    for n in reversed(nodes):  # children come after their parents
        p = n.parent
        if p is None or nodes[p].kind != "module":
            continue
        below[p] = True
        if n.kind == "module":
            height[p] = max(height[p], height[n.id] + 1)
        elif n.kind == "op":
            own_ops[p] = True
    out = set()
    for n in nodes:
        if n.kind != "module" or n.parent is None or n.name == "":
            continue
        if not lib.get(n.module or "") or not below[n.id] or height[n.id] > LAYER_HEIGHT:
            continue
        parent = nodes[n.parent]
        in_library = parent.kind == "module" and bool(lib.get(parent.module or ""))
        if own_ops[n.id] or in_library:
            out.add(n.id)
    return out


def opened_at(trace: Trace, depth: int, canon: Canon) -> list[int]:
    """The calls a graph opens at ``depth``: ``default_expanded`` less library layers
    (:func:`library_layers`) and every call inside one; expand them by hand to see inside."""
    opened = default_expanded(trace, depth, canon)
    layers = library_layers(trace)
    closed: set[int] = set()
    for n in trace.nodes:  # parents come before their children
        if n.kind == "module" and (n.id in layers or n.parent in closed):
            closed.add(n.id)
    return sorted(opened - closed)


def graph_state(
    trace: Trace, *, rolled: bool = True, depth: int = DEFAULT_DEPTH, unrolled: Collection[str] = ()
) -> tuple[GraphPayload, NodeMetrics, list[int]]:
    """``(graph, metrics, expanded ids)`` for a GraphView, computing the rolling once.

    Python's cyclic garbage collector is paused while the arrays are built: they are
    hundreds of thousands of new lists at 100,000 nodes, and each collection it starts
    walks the whole trace (a third of the time, measured by benchmarks/widget_layout.py).
    """
    with no_gc():
        canon = canon_of(trace, rolled=rolled, unrolled=unrolled)
        graph = graph_payload(trace, rolled=rolled, canon=canon, unrolled=unrolled)
        metrics = node_metrics(trace, rolled=rolled, canon=canon)
        expanded = opened_at(trace, depth, canon)
    return graph, metrics, expanded


PROFILE_COLUMNS = (
    "path",
    "type",
    "depth",
    "calls",
    "params",
    "params_self",
    "fwd_time",
    "fwd_iqr",
    "fwd_self_time",
    "bwd_time",
    "bwd_iqr",
    "bwd_self_time",
    "flops",
    "flops_self",
    "activation_bytes",
    "saved_bytes",
    "saved_bytes_self",
)
#: Per metric, the (inclusive, self) profile columns it reads.
PROFILE_METRIC_COLUMNS = {
    "fwd_time": ("fwd_time", "fwd_self_time"),
    "bwd_time": ("bwd_time", "bwd_self_time"),
    "flops": ("flops", "flops_self"),
    "params": ("params", "params_self"),
    "activations": ("saved_bytes", "saved_bytes_self"),
}
#: The columns the profile table shows, in order: column -> (header, unit). The others
#: (depth, the self figures the bar chart reads) are sent but not shown.
PROFILE_HEADERS: dict[str, tuple[str, str]] = {
    "path": ("Module", "text"),
    "type": ("Type", "text"),
    "calls": ("Calls", "int"),
    "runs": ("Runs", "int"),
    "params": ("Params", "count"),
    "fwd_time": ("Fwd", "time"),
    "fwd_iqr": ("Fwd IQR", "time"),
    "fwd_self_time": ("Fwd self", "time"),
    "bwd_time": ("Bwd", "time"),
    "bwd_iqr": ("Bwd IQR", "time"),
    "bwd_self_time": ("Bwd self", "time"),
    "flops": ("FLOPs", "count"),
    "activation_bytes": ("Out bytes", "bytes"),
    "saved_bytes": ("Saved", "bytes"),
}


def profile_payload(trace: Trace) -> ProfilePayload:
    """Per-module rows for a ProfileView, as columns plus one row array per module.

    Returns:
        A :class:`~labkit.views._contract.ProfilePayload`: ``columns``, one row list per
        module, the headers and units of the shown columns and the metrics' labels.
    """
    rows = [
        dict(
            r,
            flops=r["flops_fwd"] + r["flops_bwd"],
            flops_self=r["flops_fwd_self"] + r["flops_bwd_self"],
        )
        for r in trace.rows()
    ]
    out_rows: list[list[str | int | float]] = []
    shapes = []
    for r in rows:
        out_rows.append([r[c] if isinstance(r[c], str) else _round(r[c]) for c in PROFILE_COLUMNS])
        shapes.append("x".join(map(str, r["output_shapes"][0])) if r["output_shapes"] else "")
    columns = list(PROFILE_COLUMNS)
    if trace.meta.runs > 1:  # a merged trace: in how many runs each module ran
        columns.insert(columns.index("calls") + 1, "runs")
    for row, r in zip(out_rows, rows, strict=True):
        if trace.meta.runs > 1:
            row.insert(columns.index("runs"), r["runs"])
    return {
        "model": trace.meta.model,
        "columns": columns,
        "rows": out_rows,
        "output": shapes,
        "timing": trace.meta.timing,
        "runs": trace.meta.runs,
        # times whose spread exceeds half their median, by module path (summary.is_noisy)
        "noisy": {
            r["path"]: [m for m in ("fwd_time", "bwd_time") if r[m.replace("time", "noisy")]]
            for r in rows
            if r["fwd_noisy"] or r["bwd_noisy"]
        },
        "headers": {c: list(PROFILE_HEADERS[c]) for c in PROFILE_HEADERS if c in columns},
        "metrics": metric_table(),
        "metric_columns": {m: list(cols) for m, cols in PROFILE_METRIC_COLUMNS.items()},
    }


def memory_payload(trace: Trace) -> MemoryPayload:
    """Memory samples as parallel arrays: times, phases, modules and bytes per category.

    Categories are the known ones present in the samples, in :data:`MEMORY_CATEGORIES`
    order, then any others in the order they first appear.
    """
    samples = trace.memory
    cats: list[str] = [c for c in MEMORY_CATEGORIES if any(c in s.bytes for s in samples)]
    for s in samples:
        cats += [c for c in s.bytes if c not in cats]
    return {
        "time": [_round(s.time) for s in samples],
        "phase": [s.phase for s in samples],
        "module": [s.module for s in samples],
        "categories": cats,
        "bytes": [[int(s.bytes.get(c, 0)) for s in samples] for c in cats],
        "colors": [MEMORY_COLORS.get(c, OTHER_COLOR) for c in cats],
        # the biggest storages with their lifetimes: what was live in a selected range
        "largest": [_storage(r) for r in trace.memory_meta.largest] if trace.memory_meta else [],
        "peak_where": _peak_where(trace),
    }


def _peak_where(trace: Trace) -> str:
    """The module or call at the peak, in the summary's words (``""`` without a recording)."""
    m = trace.memory_meta
    if m is None:
        return ""
    return m.peak_where or (f"module '{m.peak_module}'" if m.peak_module else "")


def _storage(r: dict[str, Any]) -> LargestStorage:
    """One ``MemoryMeta.largest`` record as the contract types it (a trace file may lack
    ``site``, written only with stacks)."""
    return {
        "bytes": int(r["bytes"]),
        "category": str(r["category"]),
        "module": str(r.get("module") or ""),
        "op": str(r.get("op") or ""),
        "phase": str(r.get("phase") or ""),
        "start": float(r.get("start") or 0.0),
        "end": None if r.get("end") is None else float(r["end"]),
        "site": str(r.get("site") or ""),
    }


def packed_json(value: Any, widget: Any = None) -> memoryview:
    """A trait's value as one binary buffer of compact JSON (a trait's ``to_json``).

    ipywidgets walks every list and dict of a synced value looking for binary buffers: a
    100,000-node graph is 200,000 small lists, 1.7 s of that walk. One buffer is not
    walked, is not escaped into the comm message's JSON, and the front end decodes it with
    ``JSON.parse`` (``widgets/src/_graphcore.js``: ``unpacked``); the value is the same.
    """
    del widget  # the traitlets serializer signature
    return memoryview(json.dumps(value, separators=(",", ":")).encode())


def payload_bytes(*parts: Any) -> int:
    """Size of the parts as compact JSON, as the comm sends them."""
    return sum(len(json.dumps(p, separators=(",", ":"))) for p in parts)
