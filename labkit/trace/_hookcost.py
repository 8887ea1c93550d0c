"""What labkit's timing hooks still add to a recorded time, measured on this machine.

The instrumentation layer subtracts the time spent *inside* its hooks, but a hooked module
call costs more than that: PyTorch's hooked call path (``Module._call_impl`` builds a
closure, walks the hook dicts, checks compile state) runs before the pre-hook's clock and
after the post-hook's, and an autograd pre-hook's call from C++ lands in the backward
segment it closes. Those costs are constant per call, so they are measured once per trace
on a probe (a module with many trivial children, hooked as the timing passes hook, next to
an unhooked twin timed by :class:`~labkit.trace._plain.PlainClock`) and subtracted per
call:

- ``call``: in a module call's own time, per call (between its two hook clocks);
- ``child``: in the time of every call that encloses a hooked module call, per such call;
- ``segment``: in a call's backward time, per backward segment it owns.

Each figure is the fastest of a few repetitions (noise on a busy machine only adds time).
``call`` may be below zero: a plain call's own entry cost lies outside the hooked span.

Among a real model's kernels a hooked call costs more than in the probe's tight loop (the
hooks' code and objects evict the model's from the caches), so the timing passes raise
``child`` and ``segment`` to what the model itself shows: the hooked passes' root time
over the hook-free passes' (same step, interleaved), per call inside it
(:meth:`HookCost.on_model`).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

import torch

from labkit._gc import no_gc
from labkit.trace._plain import PlainClock


@dataclass(frozen=True)
class HookCost:
    """Per-call cost of the timing hooks that a recorded time still holds, in seconds.

    Args:
        call: In a module call's own recorded time, per call.
        child: In an enclosing call's recorded time, per module call inside it.
        segment: In a call's recorded backward time, per backward segment it owns.
        probe_child: ``child`` as the probe measured it, when the model's own passes
            showed more (a hooked call among real kernels costs more than in a tight loop:
            caches); 0 when ``child`` is the probe's.
        probe_segment: ``segment`` as the probe measured it, likewise.
    """

    call: float = 0.0
    child: float = 0.0
    segment: float = 0.0
    probe_child: float = 0.0
    probe_segment: float = 0.0

    def forward(self, descendants: int) -> float:
        """Seconds to subtract from a call with ``descendants`` module calls inside it."""
        return self.call + descendants * self.child

    def on_model(self, *, child: float, segment: float) -> HookCost:
        """These costs raised to what the model's own passes showed (never lowered).

        Args:
            child: Per module call inside, from the hooked passes' excess over the hook-free
                ones on the model itself.
            segment: Per backward segment, likewise.
        """
        return HookCost(
            call=self.call,
            child=max(self.child, child),
            segment=max(self.segment, segment),
            probe_child=self.child if child > self.child else 0.0,
            probe_segment=self.segment if segment > self.segment else 0.0,
        )

    def describe(self) -> str:
        """The figures in words, as a trace's timing line states them."""

        def us(s: float) -> str:
            return f"{s * 1e6:.2f} us"

        on_model = (
            " (a probe: {}; the rest is this model's hooked passes' excess over its hook-free ones)"
        )
        # a negative per-call figure: the recorder's own-time subtraction (Instrumentation.lost)
        # already took more than the hooks cost, so that much is given back
        own = (
            f"{us(self.call)} per module call"
            if self.call >= 0
            else f"{us(-self.call)} per module call given back (labkit's own-time subtraction "
            "had taken that much more)"
        )
        return (
            f"hook cost subtracted: {own}, {us(self.child)} per "
            "call inside it"
            + (on_model.format(us(self.probe_child)) if self.probe_child else "")
            + f", {us(self.segment)} per backward segment"
            + (on_model.format(us(self.probe_segment)) if self.probe_segment else "")
            + " (measured at trace time)"
        )

    def as_dict(self) -> dict[str, float]:
        """``{"call": s, "child": s, "segment": s, ...}``, as :class:`TraceMeta` keeps it
        (``probe_child`` and ``probe_segment`` when the model's passes raised them)."""
        out = {"call": self.call, "child": self.child, "segment": self.segment}
        if self.probe_child:
            out["probe_child"] = self.probe_child
        if self.probe_segment:
            out["probe_segment"] = self.probe_segment
        return out


class _Leaf(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 1.0  # one autograd node: one backward segment per call


class _Probe(torch.nn.Module):
    def __init__(self, n: int) -> None:
        super().__init__()
        self.kids = torch.nn.ModuleList(_Leaf() for _ in range(n))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for kid in self.kids:
            x = kid(x)
        return x


def calibrate(*, calls: int = 64, reps: int = 5) -> HookCost:
    """Measure :class:`HookCost` on this machine with a probe of ``calls`` trivial modules.

    Args:
        calls: Child module calls of the probe.
        reps: Repetitions; each figure is the fastest.

    Returns:
        The per-call costs (about 10 ms to measure).
    """
    from labkit.trace.recorder import Recorder  # the recorder imports the timing modules

    if calls < 1 or reps < 1:
        raise ValueError(f"calls and reps must be >= 1, got calls={calls}, reps={reps}")
    hooked, plain = _Probe(calls), _Probe(calls)
    rec = Recorder(hooked, mode="step")
    clock = PlainClock(plain).attach()
    fwd_plain, bwd_plain, fwd_rec, bwd_rec, leaf = [], [], [], [], []
    # the user's no_grad or inference_mode does not reach the probe
    with torch.inference_mode(False), torch.enable_grad():
        x = torch.zeros(4, requires_grad=True)
    try:
        with torch.inference_mode(False), torch.enable_grad(), no_gc():
            for _ in range(reps + 1):  # the first round warms up
                clock.start()
                plain(x).sum().backward()
                clock.stop()
                rec.start()
                try:
                    hooked(x).sum().backward()
                finally:
                    trace = rec.stop()
                calls_ = [n for n in trace.nodes if n.kind == "module"]
                root, kids = calls_[0], calls_[1:]
                fwd_plain.append(clock.forward[0])
                bwd_plain.append(clock.backward[0] if clock.backward else 0.0)
                fwd_rec.append(root.fwd_time)
                bwd_rec.append(root.bwd_time)
                leaf.append(statistics.median(k.fwd_time for k in kids))
    finally:
        rec.detach()
        clock.detach()
        x.grad = None
    u, r = min(fwd_plain[1:]), min(fwd_rec[1:])
    call = min(leaf[1:]) - u / calls  # a leaf's recorded span against its plain call's cost
    child = (r - call - u) / calls
    segment = (min(bwd_rec[1:]) - min(bwd_plain[1:])) / calls
    return HookCost(call=call, child=max(child, 0.0), segment=max(segment, 0.0))
