"""Storages the memory tracker adopts rather than sees made by an op.

Parameters, buffers and their ``.grad``, the batch's inputs, optimizer state and a
GradScaler's scale existed before the step (or were made earlier in it and became
something else): they are counted into their category here, and state that an optimizer
or a GradScaler made during the recording moves to ``optimizer`` as of its allocation
(the timeline and the peak's breakdown with it). Module-level functions of a
:class:`~labkit.memory.tracker.MemoryTracker` (its bookkeeping, not its per-op path).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from labkit._tensors import is_wrapper, named_tensors, plain_tensors
from labkit.trace.model import MEMORY_CATEGORIES

if TYPE_CHECKING:
    from labkit.memory.tracker import MemoryTracker, _Rec

INPUTS = MEMORY_CATEGORIES.index("inputs")
GRADS = MEMORY_CATEGORIES.index("gradients")
OPT = MEMORY_CATEGORIES.index("optimizer")
TEMPS = MEMORY_CATEGORIES.index("temporaries")
_COUNTS = 3  # event[_COUNTS + category]: an event is (time, phase, module, *counts)
_OPT = "optimizer"  # the phase


def extent_bytes(t: torch.Tensor) -> int:
    """Bytes of storage a tensor spans: its own extent, not the whole storage of a view."""
    if t.numel() == 0:
        return 0
    if t.is_contiguous():
        return t.numel() * t.element_size()
    span = 1 + sum((n - 1) * abs(s) for n, s in zip(t.shape, t.stride(), strict=True))
    return span * t.element_size()


def track(tr: MemoryTracker, t: torch.Tensor, cat: int, module: str, phase: str) -> _Rec | None:
    """Count ``t``'s storage as ``cat`` (moving it there if already counted)."""
    if is_wrapper(t):
        rec = None
        for inner in plain_tensors(t):  # e.g. torchao's int8 data, scales and zero points
            rec = track(tr, inner, cat, module, phase)
        return rec
    try:
        st = t.untyped_storage()
    except (RuntimeError, NotImplementedError):
        return None
    rec = tr._by_sid.get(id(st))
    if rec is None:
        dev = t.device.type
        if dev == "meta":
            return None
        n = st.nbytes()
        if cat == INPUTS:  # the bytes the batch uses; the rest of its storage is apart
            used = min(n, extent_bytes(t))
            tr.resident_before += n - used
            n = used
        rec = tr._add(st, cat, module, phase, t.dtype == torch.float32, n, dev != "cpu")
    elif rec.category != cat:
        tr._move(rec, cat, module)
    return rec


def reclassify(tr: MemoryTracker, recs: list[tuple[_Rec, str]], cat: int) -> None:
    """Move storages to ``cat`` as of their creation (the timeline and the peak too).

    For what a storage *became*: state an optimizer or a GradScaler made counts as
    such from the moment it was allocated, not from the end of the step.
    """
    recs = [(r, m) for r, m in recs if r.category != cat and tr._by_sid.get(r.storage_id) is r]
    if not recs:
        return
    if tr._dirty or tr._journal is not None:
        tr._snapshot()
    delta = [0] * (len(tr._events) + 1)
    for rec, module in recs:
        old = rec.category
        n = rec.nbytes
        if rec.born_event <= tr._peak_ev:  # alive at the peak: the peak's breakdown moves too
            tr.peak_cat[old] -= n
            tr.peak_cat[cat] += n
            for table, on in ((tr.peak_mod, True), (tr.peak_fp32, rec.fp32)):
                if on:
                    table[(rec.module, old)] = table.get((rec.module, old), 0) - n
                    table[(module, cat)] = table.get((module, cat), 0) + n
        tr._count(rec, -n)
        rec.category, rec.module = cat, module
        tr._count(rec, n)
        delta[rec.born_event] += n
    events, moved = tr._events, 0
    for i in range(min(r.born_event for r, _ in recs), len(events)):
        moved += delta[i]
        if moved:  # they counted as temporaries until now
            e = list(events[i])
            e[_COUNTS + TEMPS] -= moved
            e[_COUNTS + cat] += moved
            events[i] = tuple(e)
    tr._sample(tr._phase(), tr._module())


def adopt_optimizer(tr: MemoryTracker, opt: torch.optim.Optimizer) -> None:
    """Count an optimizer's state as ``optimizer``, by the parameter it belongs to."""
    made: list[tuple[_Rec, str]] = []  # made during the recording, counted as temporaries
    for p, state in opt.state.items():
        owner = tr._inst.param_owner(p)
        for _, t in named_tensors(state):
            _adopt(tr, t, owner, made)
    reclassify(tr, made, OPT)


def adopt_scalers(tr: MemoryTracker) -> None:
    """Count the GradScalers' scale and growth tracker as ``optimizer`` state."""
    made: list[tuple[_Rec, str]] = []
    for scaler in tr._scalers:
        for name in ("_scale", "_growth_tracker"):
            t = getattr(scaler, name, None)
            if isinstance(t, torch.Tensor):
                _adopt(tr, t, "", made)
    reclassify(tr, made, OPT)


def _adopt(tr: MemoryTracker, t: torch.Tensor, owner: str, made: list[tuple[_Rec, str]]) -> None:
    for inner in plain_tensors(t):
        try:
            rec = tr._by_sid.get(id(inner.untyped_storage()))
        except (RuntimeError, NotImplementedError):
            continue
        if rec is not None and rec.category == TEMPS:
            made.append((rec, owner))
        else:
            track(tr, inner, OPT, owner, _OPT)


def optimizer_step(tr: MemoryTracker, opt: torch.optim.Optimizer, entering: bool) -> None:
    """Around ``opt.step()``: grads count as such on entry, new state as state on exit."""
    if not tr.active:
        return
    if entering:
        for group in opt.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    track(tr, p.grad, GRADS, tr._inst.param_owner(p), _OPT)
        adopt_optimizer(tr, opt)
        tr._sample(_OPT, "")
    else:
        adopt_optimizer(tr, opt)  # state made in step() counts as state from its allocation
        adopt_scalers(tr)
        tr._sample(tr._phase(), tr._module())
