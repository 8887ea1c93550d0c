"""FlopObserver: FLOPs per op node and module call, forward and backward.

Counts with ``torch.utils.flop_counter``'s formulas over the layer's dispatch mode (ops
without a formula are decomposed, as ``FlopCounterMode`` does), so the total equals
``FlopCounterMode``'s for the same step. Forward FLOPs go to the op running and to its
module call; backward FLOPs go to the op (or module call) that created the autograd node
running, found by its sequence number, and to that op's module call. So the ops inside
a module add up to the module's figures, forward and backward.

An op that ran without a formula although it computes (a custom op, a quantized or fused
matmul kernel) is kept in :meth:`FlopObserver.missing` with the op or module call that
ran it, so a trace can say which FLOPs it could not count and what share of the time
those ops took.
"""

from __future__ import annotations

from typing import Any

import torch
from torch._ops import OpOverload

from labkit.trace._dispatch import FlopFormula, flop_formula, uncounted
from labkit.trace._raw import RawNode
from labkit.trace.instrument import Instrumentation, Observer

_current_task = torch._C._current_graph_task_id
# per aten overload, by id (the overload kept alive by the entry): (its FLOP formula or None,
# computes without one, the overload): one dict lookup per op (an OpOverload's own
# ``__hash__`` is Python code)
_PER_OP: dict[int, tuple[FlopFormula | None, bool, OpOverload]] = {}


class FlopObserver(Observer):
    """FLOPs per node; ``outside_fwd`` / ``outside_bwd`` hold what ran outside any module."""

    needs_dispatch = True
    decompose = True

    def __init__(self) -> None:
        self.outside_fwd = 0
        self.outside_bwd = 0
        self._inst: Instrumentation | None = None
        # op name -> [calls, module path where first seen, the nodes that ran it]
        self._missing: dict[str, list[Any]] = {}

    def __repr__(self) -> str:
        return f"FlopObserver(outside_fwd={self.outside_fwd}, outside_bwd={self.outside_bwd})"

    def start(self, inst: Instrumentation) -> None:
        self._inst = inst
        self.outside_fwd = self.outside_bwd = 0
        self._missing = {}

    def missing(self) -> tuple[dict[str, Any], ...]:
        """Ops that computed without a FLOP formula: ``op``, ``calls``, ``module`` (where
        first seen) and ``nodes`` (keys of the op nodes or module calls that ran them)."""
        out = []
        for name, (calls, module, owners) in self._missing.items():
            keys = list(dict.fromkeys(o.key for o in owners.values() if o.key))
            out.append({"op": name, "calls": calls, "module": module, "nodes": keys})
        return tuple(out)

    def _uncounted(self, func: OpOverload) -> None:
        inst = self._inst
        assert inst is not None
        name = str(func._overloadpacket)
        entry = self._missing.get(name)
        if entry is None:
            entry = self._missing[name] = [0, inst.module_now(), {}]
        entry[0] += 1
        owner: RawNode | None
        if _current_task() != -1:
            owner = inst.backward_owner()
        else:
            owner = inst.op or (inst.stack[-1] if inst.stack else None)
        if owner is not None:
            entry[2].setdefault(id(owner), owner)

    def dispatch(
        self, func: OpOverload, args: tuple[object, ...], kwargs: dict[str, object], out: object
    ) -> None:
        hit = _PER_OP.get(id(func))
        if hit is None:
            formula = flop_formula(func)
            hit = _PER_OP[id(func)] = (formula, formula is None and uncounted(func), func)
        formula, missing, _ = hit
        if formula is None:
            if missing:
                self._uncounted(func)
            return
        n = int(formula(*args, **kwargs, out_val=out))
        if not n:
            return
        inst = self._inst
        assert inst is not None
        if _current_task() != -1:  # inside backward
            owner = inst.backward_owner()
            if owner is None:
                self.outside_bwd += n
                return
            owner.flops_bwd += n
            if owner.kind == "op" and owner.parent is not None:
                owner.parent.flops_bwd += n
            return
        op = inst.op
        if op is not None:
            op.flops_fwd += n
        if inst.stack:
            inst.stack[-1].flops_fwd += n
        else:
            self.outside_fwd += n
