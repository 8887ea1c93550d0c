"""TimingObserver: forward and backward time per module call (and op), host or GPU.

On the CPU the layer's own clock gives each call's time with labkit's hook cost
subtracted. On CUDA, CUDA events are recorded on the current stream at the hooks (call
start and end, each backward segment's start, the end of backward) and resolved once,
when the recording stops: no synchronize per module, and backward times are GPU times.
"""

from __future__ import annotations

from typing import Any

import torch

from labkit.trace._raw import RawNode
from labkit.trace.instrument import Instrumentation, Observer


class TimingObserver(Observer):
    """Times of every call; ``forward``, ``backward`` and ``outside_bwd`` hold the totals.

    Args:
        cuda: Time with CUDA events (GPU times) instead of the host clock.
    """

    needs_segments = True

    def __init__(self, *, cuda: bool = False) -> None:
        self.cuda = cuda
        self._reset()

    def __repr__(self) -> str:
        return f"TimingObserver(cuda={self.cuda})"

    def _reset(self) -> None:
        self.forward = 0.0
        self.backward = 0.0
        self.outside_bwd = 0.0
        self._fwd: list[tuple[RawNode, Any, Any]] = []  # (call, start event, end event)
        self._open: dict[int, Any] = {}
        self._segs: list[tuple[RawNode | None, Any]] = []  # (owner or None, start event); None
        self._inst: Instrumentation | None = None
        # backward segments per owning call's key ("" for those outside any call): each
        # holds one autograd pre-hook's cost, which the timing passes subtract
        self.segments: dict[str, int] = {}

    def start(self, inst: Instrumentation) -> None:
        self._reset()
        self._inst = inst

    # ------------------------------------------------------------ forward
    def call(
        self,
        node: RawNode,
        module: torch.nn.Module,
        args: tuple[object, ...],
        kwargs: dict[str, object],
    ) -> None:
        if self.cuda:
            ev = torch.cuda.Event(enable_timing=True)
            ev.record()
            self._open[node.id] = ev

    def ret(self, node: RawNode, module: torch.nn.Module, output: object) -> None:
        if self.cuda:
            end = torch.cuda.Event(enable_timing=True)
            end.record()
            start = self._open.pop(node.id, None)
            if start is not None:
                self._fwd.append((node, start, end))
        elif node.parent is None:
            self.forward += node.fwd_time

    # ------------------------------------------------------------ backward
    def segment_start(self, node: RawNode | None) -> None:
        if self.cuda:
            ev = torch.cuda.Event(enable_timing=True)
            ev.record()
            self._segs.append((node, ev))

    def segment(self, node: RawNode | None, seconds: float) -> None:
        if self.cuda:
            return
        self.backward += seconds
        key = "" if node is None else node.key
        self.segments[key] = self.segments.get(key, 0) + 1
        if node is None:
            self.outside_bwd += seconds
        else:
            node.bwd_self += seconds

    def backward_end(self) -> None:
        if self.cuda:
            ev = torch.cuda.Event(enable_timing=True)
            ev.record()
            self._segs.append((_END, ev))

    # ------------------------------------------------------------ resolve
    def stop(self, inst: Instrumentation) -> None:
        if not self.cuda:
            return
        torch.cuda.synchronize()  # once per recording
        for node, start, end in self._fwd:
            node.fwd_time = start.elapsed_time(end) / 1e3
            if node.parent is None:
                self.forward += node.fwd_time
        for n in inst.nodes:
            if n.kind == "op":
                n.fwd_time = 0.0  # op times come from host-side op passes; none on CUDA
        for (owner, start), (_, end) in zip(self._segs, self._segs[1:], strict=False):
            if owner is _END:
                continue
            dt = start.elapsed_time(end) / 1e3
            self.backward += dt
            if owner is None:
                self.outside_bwd += dt
            else:
                owner.bwd_self += dt
        self._open = {}


_END: Any = object()
