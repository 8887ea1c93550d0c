"""Which nodes of a Trace a graph view draws, and the edges between them.

A graph view shows the tree of module calls with some calls *expanded* (drawn as a
frame around their children) and the others *collapsed* (drawn as one box). Edges in
a Trace join leaf-level nodes only, so a view lifts each edge to the boxes that hold
its ends, drops the edges that fall inside one box and merges duplicates.

Repeated blocks (see :mod:`labkit.trace.roll`) are *rolled*: the first call of a
block stands for all of them (drawn with an ``x N`` badge) and every node inside the
other calls is an alias of the corresponding node inside the first call. Edges from
one call of a block to the next are dropped, so a rolled block reads as one step.

The same rules run in the browser (``widgets/src/_graphcore.js``) for interactive
expand and collapse; this module is what the PNG renderer and the tests use.

Example:
    >>> import torch, labkit
    >>> from labkit.trace.graph import visible_graph
    >>> model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU())
    >>> g = visible_graph(labkit.trace(model, torch.randn(2, 4)), depth=1)
    >>> len(g.boxes)  # input, the two layers, output
    4
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from labkit.trace.model import Trace

DEFAULT_DEPTH = 2


@dataclass(frozen=True)
class Canon:
    """The rolled form of a trace's node tree.

    Args:
        alias: Per node id, the node that stands for it (itself when not rolled away).
        count: Per node id, how many calls a block representative stands for (1 else).
        block_name: Per node id, the block's display name (``""`` when not a block head).
        edges: The trace's edges mapped onto representatives, without the edges that
            join two calls of one block, deduplicated, as ``(src, dst, edge index)``.
    """

    alias: tuple[int, ...]
    count: tuple[int, ...]
    block_name: tuple[str, ...]
    edges: tuple[tuple[int, int, int], ...]

    def is_canonical(self, node_id: int) -> bool:
        """Whether the node is drawn at all (not rolled into another call)."""
        return self.alias[node_id] == node_id


@dataclass(frozen=True)
class VisibleGraph:
    """What a graph view draws for one choice of expanded calls.

    Args:
        boxes: Node ids drawn as boxes, in execution order.
        groups: Module calls drawn as frames around their children, in order.
        edges: ``(src box, dst box)`` pairs, deduplicated, without self-loops.
        box_of: For every node id, the box or frame that shows it (``-1`` when the
            node is rolled into another call and has no visible counterpart).
    """

    boxes: tuple[int, ...]
    groups: tuple[int, ...]
    edges: tuple[tuple[int, int], ...]
    box_of: tuple[int, ...]


def canonicalize(trace: Trace, *, rolled: bool = True, unrolled: Collection[str] = ()) -> Canon:
    """Map every node onto the node that stands for it when repeated blocks are rolled.

    Args:
        trace: The trace.
        rolled: Roll repeated blocks; with ``False`` every node stands for itself.
        unrolled: Names of blocks drawn call by call (``"blocks.0-5"``) though rolled.

    Returns:
        A :class:`Canon`.
    """
    n = len(trace.nodes)
    alias = list(range(n))
    count = [1] * n
    names = [""] * n
    member: dict[int, tuple[int, int]] = {}  # call id -> (block index, member index)
    if rolled:
        kids = trace.children
        for b, block in enumerate(trace.rolled()):
            rep = block.node_ids[0]
            if alias[rep] != rep or block.name in unrolled:
                continue  # inside a call that is itself rolled away, or not rolled
            count[rep] = block.count
            names[rep] = block.name
            for m, call in enumerate(block.node_ids):
                member[call] = (b, m)
                if m:
                    _pair_subtrees(call, rep, kids, alias)
    alias = [_resolve(alias, i) for i in range(n)]
    slots = _slots(trace, member) if member else None
    seen: set[tuple[int, int]] = set()
    edges = []
    for k, e in enumerate(trace.edges):
        if slots is not None and _crosses_members(slots[e.src], slots[e.dst]):
            continue
        pair = (alias[e.src], alias[e.dst])
        if pair[0] != pair[1] and pair not in seen:
            seen.add(pair)
            edges.append((pair[0], pair[1], k))
    return Canon(tuple(alias), tuple(count), tuple(names), tuple(edges))


def _pair_subtrees(
    a: int, b: int, kids: dict[int | None, tuple[int, ...]], alias: list[int]
) -> None:
    """Alias ``a`` and its subtree onto ``b``'s, child by child (same structure)."""
    stack = [(a, b)]
    while stack:
        x, y = stack.pop()
        alias[x] = y
        stack.extend(zip(kids.get(x, ()), kids.get(y, ()), strict=True))


def _resolve(alias: list[int], i: int) -> int:
    while alias[i] != i:
        i = alias[i]
    return i


def _slots(trace: Trace, member: dict[int, tuple[int, int]]) -> list[dict[int, int]]:
    """Per node, ``{block index: member index}`` for every rolled call around it."""
    out: list[dict[int, int]] = []
    for node in trace.nodes:
        own = {member[node.id][0]: member[node.id][1]} if node.id in member else {}
        parent = out[node.parent] if node.parent is not None else {}
        out.append({**parent, **own} if own else parent)
    return out


def _crosses_members(a: dict[int, int], b: dict[int, int]) -> bool:
    return any(block in b and b[block] != m for block, m in a.items())


def module_depths(trace: Trace) -> list[int]:
    """Per node, how many module calls enclose it (the root call is at depth 0)."""
    depth = [0] * len(trace.nodes)
    for n in trace.nodes:
        if n.parent is not None:
            p = trace.nodes[n.parent]
            depth[n.id] = depth[n.parent] + (1 if p.kind == "module" else 0)
    return depth


def expandable(trace: Trace) -> set[int]:
    """Module calls that have children to show."""
    return {p for p, kids in trace.children.items() if p is not None and kids}


def default_expanded(
    trace: Trace, depth: int = DEFAULT_DEPTH, canon: Canon | None = None
) -> set[int]:
    """Calls expanded at a given depth: those above ``depth`` that call other modules.

    Leaf modules (whose children are ops only) stay collapsed so a ``Conv2d`` reads as
    one box; expand one by hand to see its ops.
    """
    canon = canon or canonicalize(trace)
    depths = module_depths(trace)
    with_calls = {n.parent for n in trace.nodes if n.kind == "module" and n.parent is not None}
    return {
        n.id
        for n in trace.nodes
        if n.kind == "module"
        and depths[n.id] < depth
        and n.id in with_calls
        and canon.is_canonical(n.id)
    }


def visible_graph(
    trace: Trace,
    depth: int = DEFAULT_DEPTH,
    expanded: Iterable[int] | None = None,
    *,
    rolled: bool = True,
    canon: Canon | None = None,
) -> VisibleGraph:
    """The boxes, frames and lifted edges drawn for a set of expanded calls.

    Args:
        trace: The trace.
        depth: Used when ``expanded`` is None: see :func:`default_expanded`.
        expanded: Ids of the module calls drawn open.
        rolled: Roll repeated blocks into one ``x N`` box.
        canon: A precomputed :func:`canonicalize` result.

    Returns:
        A :class:`VisibleGraph`.
    """
    canon = canon or canonicalize(trace, rolled=rolled)
    opened = set(default_expanded(trace, depth, canon) if expanded is None else expanded)
    box_of = [-1] * len(trace.nodes)
    boxes: list[int] = []
    groups: list[int] = []
    for n in trace.nodes:  # parents come before their children
        if not canon.is_canonical(n.id):
            continue
        p = n.parent
        if p is None or (box_of[p] == p and p in opened):
            box_of[n.id] = n.id
        else:
            box_of[n.id] = box_of[p]
    has_kids = expandable(trace)
    for n in trace.nodes:
        if box_of[n.id] == n.id:
            (groups if n.id in opened and n.id in has_kids else boxes).append(n.id)
    for i, a in enumerate(canon.alias):
        if a != i:
            box_of[i] = box_of[a]
    group_set = set(groups)
    seen: set[tuple[int, int]] = set()
    edges = []
    for s, d, _ in canon.edges:
        pair = (box_of[s], box_of[d])
        if pair[0] != pair[1] and pair not in seen and not (group_set & set(pair)):
            seen.add(pair)
            edges.append(pair)
    return VisibleGraph(tuple(boxes), tuple(groups), tuple(edges), tuple(box_of))
