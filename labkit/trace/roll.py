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
    """Runs of at least ``min_count`` identical consecutive sibling module calls."""
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
