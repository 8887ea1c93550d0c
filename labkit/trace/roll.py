"""Find identical repeated blocks (``x N``) among consecutive sibling module calls."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from labkit.trace.model import Trace


@dataclass(frozen=True)
class RolledBlock:
    """A run of consecutive sibling calls that did the same thing on the same shapes.

    Args:
        parent: Id of the enclosing call (``None`` at the top).
        node_ids: The calls, in order.
        type: Their module class.
        name: Display name, e.g. ``"layers.0-5"``.
    """

    parent: int | None
    node_ids: tuple[int, ...]
    type: str
    name: str

    @property
    def count(self) -> int:
        """How many calls the block rolls up."""
        return len(self.node_ids)


def signatures(trace: Trace) -> list[int]:
    """Per node, a structural hash: type, input shapes and children's signatures."""
    kids = trace.children
    sig = [0] * len(trace.nodes)
    for n in reversed(trace.nodes):
        child = tuple(sig[c] for c in kids.get(n.id, ()))
        sig[n.id] = hash((n.kind, n.type, tuple(t.shape for t in n.inputs), child))
    return sig


def roll_repeats(trace: Trace, min_count: int = 2) -> tuple[RolledBlock, ...]:
    """Runs of at least ``min_count`` identical consecutive sibling module calls.

    Kept with the trace (it is immutable): a graph view asks for them several times per
    drawing, 0.5 s each at 100,000 nodes.
    """
    cache: dict[int, tuple[RolledBlock, ...]] = trace.__dict__.setdefault("_rolled_cache", {})
    if min_count not in cache:
        cache[min_count] = _roll_repeats(trace, min_count)
    return cache[min_count]


def _roll_repeats(trace: Trace, min_count: int) -> tuple[RolledBlock, ...]:
    sig = signatures(trace)
    blocks: list[RolledBlock] = []
    for parent, kids in trace.children.items():
        calls = [c for c in kids if trace.nodes[c].kind == "module"]
        i = 0
        while i < len(calls):
            j = i + 1
            while j < len(calls) and sig[calls[j]] == sig[calls[i]]:
                j += 1
            if j - i >= min_count:
                ids = tuple(calls[i:j])
                names = [trace.nodes[k].name for k in ids]
                blocks.append(RolledBlock(parent, ids, trace.nodes[ids[0]].type, range_name(names)))
            i = j
    return tuple(sorted(blocks, key=lambda b: b.node_ids[0]))


_INDEXED = re.compile(r"^(.*?)(\d+)$")


def range_name(paths: list[str]) -> str:
    """``['layers.0', 'layers.1', 'layers.2'] -> 'layers.0-2'``; otherwise ``'first (xN)'``."""
    first, last = _INDEXED.match(paths[0]), _INDEXED.match(paths[-1])
    if first and last and first.group(1) == last.group(1):
        return f"{first.group(1)}{first.group(2)}-{last.group(2)}"
    return f"{paths[0]} (x{len(paths)})"


#: One level of a call's place in rolled blocks: (block head id, which call 0-based, calls).
Level = tuple[int, int, int]


def instance_levels(trace: Trace, skip: frozenset[str] = frozenset()) -> dict[int, list[Level]]:
    """Which instance of which rolled block each module call is, outermost block first.

    A call inside the 5th call of ``blocks.0-5`` is ``[(blocks.0's id, 4, 6)]``; a call in
    a block nested inside another has one level per block. Calls outside rolled blocks
    are absent. The rule is :func:`labkit.trace.graph.canonicalize`'s: a block inside a
    call that is itself rolled away is not a block of its own (its calls are located by
    their counterpart in the block's first call).

    Args:
        trace: The trace.
        skip: Names of blocks drawn unrolled (``"blocks.0-5"``).

    Returns:
        ``{module call id: [(block head id, member index, member count), ...]}``.

    Example:
        >>> import torch, labkit
        >>> net = torch.nn.Sequential(*[torch.nn.Linear(4, 4) for _ in range(3)])
        >>> t = labkit.trace(net, torch.randn(2, 4))
        >>> [(t.nodes[i].name, lv[0][1:]) for i, lv in instance_levels(t).items()]
        [('0', (0, 3)), ('1', (1, 3)), ('2', (2, 3))]
    """
    kids = trace.children
    member: dict[int, Level] = {}
    step: dict[int, int] = {}  # a node inside a later call -> its counterpart in the first
    for block in trace.rolled():
        rep = block.node_ids[0]
        if rep in step or block.name in skip:
            continue  # inside a call rolled away, or drawn unrolled
        for m, call in enumerate(block.node_ids):
            member[call] = (rep, m, block.count)
            if m:
                pairs = [(call, rep)]
                while pairs:
                    x, y = pairs.pop()
                    step[x] = y
                    pairs.extend(zip(kids.get(x, ()), kids.get(y, ()), strict=True))
    if not member:
        return {}
    out: dict[int, list[Level]] = {}
    for n in trace.nodes:
        if n.kind != "module":
            continue
        levels = _levels(trace, n.id, member, step)
        if levels:
            out[n.id] = levels
    return out


def _levels(trace: Trace, node: int, member: dict[int, Level], step: dict[int, int]) -> list[Level]:
    out: list[Level] = []
    cur, start = node, 0
    while True:
        chain = [cur]
        while (p := trace.nodes[chain[-1]].parent) is not None:
            chain.append(p)
        chain.reverse()  # top first
        i = next((j for j in range(start, len(chain)) if chain[j] in member), -1)
        if i < 0:
            return out
        level = member[chain[i]]
        out.append(level)
        if level[1]:
            cur = step[cur]  # the same place in the block's first call (same depth)
        start = i + 1
