"""Backward segments: where each module call's (or op's) share of a backward pass begins.

On the CPU (and per device on CUDA) autograd runs a graph's nodes in decreasing
sequence number, which is reverse creation order; so the nodes one module call (or op)
created run as contiguous *segments*, and one pre-hook on the first node of each segment
marks every boundary. A segment lasts until the next begins or the pass ends.

Module-level functions of an :class:`~labkit.trace.instrument.Instrumentation`: it hooks
the graph of each top-level call's output (:func:`hook_graph`); the hooks it leaves go
in its ``_bwd_handles`` and are removed with its other per-recording hooks.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import torch

from labkit._tensors import named_tensors

if TYPE_CHECKING:
    from labkit.trace._raw import RawNode
    from labkit.trace.instrument import Instrumentation

# an autograd node's pre-hook: marks where a backward segment begins
SegmentHook = Callable[[tuple[torch.Tensor | None, ...]], None]
_perf = time.perf_counter
_current_task = torch._C._current_graph_task_id
_NO_CALL = object()
_ACCUMULATES: dict[type, bool] = {}  # autograd node type -> holds a leaf (AccumulateGrad)


def hook_graph(inst: Instrumentation, output: object) -> None:
    """Put a segment pre-hook on the first autograd node of each segment of ``output``'s graph."""
    roots = [t.grad_fn for _, t in named_tensors(output) if t.grad_fn is not None]
    found: list[tuple[int, RawNode | None, torch.autograd.graph.Node]] = []
    # next_functions hold None for inputs without grad
    todo: list[torch.autograd.graph.Node | None] = list(roots)
    hooked = inst._hooked_seq
    while todo:
        fn = todo.pop()
        if fn is None:
            continue
        kind = type(fn)
        acc = _ACCUMULATES.get(kind)
        if acc is None:  # hasattr raises and catches on every other node: once per C++ type
            acc = hasattr(fn, "variable")
            if kind.__dictoffset__ == 0:  # no attributes of its own (a custom Function's have)
                _ACCUMULATES[kind] = acc
        if acc:  # AccumulateGrad: no segment of its own
            continue
        seq = fn._sequence_nr()
        if seq in hooked:
            continue
        hooked.add(seq)
        if seq < inst.seq_start:  # made before the recording: runs after all of ours
            found.append((seq, None, fn))
            continue
        found.append((seq, inst.index.find(seq), fn))
        todo.extend(nf for nf, _ in fn.next_functions)
    found.sort(key=lambda item: -item[0])
    prev: object = _NO_CALL
    for _, owner, fn in found:
        if owner is not prev:
            inst._bwd_handles.append(fn.register_prehook(segment_hook(inst, owner)))
            prev = owner


def segment_hook(inst: Instrumentation, owner: RawNode | None) -> SegmentHook:
    """The pre-hook that starts ``owner``'s segment (one per owner and recording)."""
    key = id(owner)
    hook = inst._seg_hooks.get(key)
    if hook is None:
        end = functools.partial(end_backward, inst)

        def hook(grad_outputs: tuple[torch.Tensor | None, ...]) -> None:
            t_in = _perf()
            close_segment(inst, t_in)
            task = _current_task()
            if task != inst._bwd_task:  # first segment of this backward pass
                inst._bwd_task = task
                torch.autograd.Variable._execution_engine.queue_callback(end)
            inst._seg_owner = owner
            inst._last_phase = "backward"
            for o in inst._seg_start_obs:
                o.segment_start(owner)
            t_out = _perf()
            inst.lost += t_out - t_in
            inst._seg_t0 = t_out
            inst._seg_lost = inst.lost

        inst._seg_hooks[key] = hook
    return hook


def close_segment(inst: Instrumentation, now: float) -> None:
    """Pass the running segment's time (less labkit's own) to the observers."""
    if inst._seg_t0 is None:
        return
    dt = (now - inst._seg_t0) - (inst.lost - inst._seg_lost)
    for o in inst._seg_obs:
        o.segment(inst._seg_owner, dt)


def end_backward(inst: Instrumentation) -> None:
    """Autograd's callback at the end of a backward pass: close its last segment."""
    t_in = _perf()
    close_segment(inst, t_in)
    inst._seg_t0 = None
    inst._seg_owner = None
    inst._bwd_task = None
    inst.backward_passes += 1
    for o in inst.observers:
        o.backward_end()
    inst.lost += _perf() - t_in
