"""One step recorded for structure, then timed by timing-only passes.

The full recording (graph, FLOPs, memory) pays for per-op capture, so its clock says
more about labkit than about the model. The times a trace shows come instead from
passes that carry module hooks only, after a warm-up, repeated; each figure is the
median over the passes, with its interquartile range. Op times come from passes that
add the op-level hook alone.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Callable

import torch

from labkit.trace.model import Node, Trace
from labkit.trace.recorder import Recorder

Step = Callable[[list[str]], None]  # runs forward (+ backward); appends notes


def record_step(model: torch.nn.Module, step: Step, *, mode: str, warmup: int, repeat: int,
                budget: float | None = None) -> Trace:  # fmt: skip
    """Record ``step`` once in ``mode``, then time it with timing-only passes.

    Args:
        model: The model ``step`` runs.
        step: Runs one forward (and backward) pass; may append notes to its argument.
        mode: ``"full"`` or ``"timing"``: what the structural recording keeps.
        warmup: Timing passes run first and thrown away.
        repeat: Timing passes kept (0: no times in a full trace; one pass in timing mode).
        budget: Stop repeating once this many seconds were spent timing (at least 3 kept).

    Returns:
        The recorded Trace with times replaced by medians over the timing passes.
    """
    if warmup < 0 or repeat < 0:
        raise ValueError(f"warmup and repeat must be >= 0, got warmup={warmup}, repeat={repeat}")
    rec = Recorder(model, mode=mode)
    with rec:
        step(rec.notes)
    base = rec.trace
    assert base is not None
    return time_step(model, step, base, mode=mode, warmup=warmup, repeat=repeat, budget=budget)


def time_step(model: torch.nn.Module, step: Step, base: Trace, *, mode: str, warmup: int,
              repeat: int, budget: float | None = None) -> Trace:  # fmt: skip
    """``base`` (one recording of ``step``) with its times from timing-only passes of ``step``.

    Args:
        model: The model ``step`` runs.
        step: Runs one forward (and backward) pass; may append notes to its argument.
        base: The structural recording of ``step`` (mode ``mode``).
        mode: The recording's mode: op times are taken for ``"full"`` on the CPU.
        warmup: Timing passes run first and thrown away.
        repeat: Timing passes kept (0: ``base`` as it is).
        budget: Stop repeating once this many seconds were spent timing (at least 3 kept).

    Returns:
        ``base`` with times replaced by medians over the timing passes.
    """
    if warmup < 0 or repeat < 0:
        raise ValueError(f"warmup and repeat must be >= 0, got warmup={warmup}, repeat={repeat}")
    if repeat == 0:
        return base
    devices = [p.device.index or 0 for p in model.parameters() if p.is_cuda][:1]
    with torch.random.fork_rng(devices=devices):  # the passes draw no numbers the user sees
        steps = _passes(model, step, "step", warmup, repeat, budget)
        # op times are host times around each op: meaningful on the CPU only
        cuda = any(p.is_cuda for p in model.parameters())
        ops = _passes(model, step, "ops", 0, repeat, budget) if mode == "full" and not cuda else []
    return _with_times(base, steps, ops, warmup)


def _passes(model: torch.nn.Module, step: Step, mode: str, warmup: int, repeat: int,
            budget: float | None) -> list[Trace]:  # fmt: skip
    rec = Recorder(model, mode=mode).attach()
    out: list[Trace] = []
    t_end = None if budget is None else time.perf_counter() + budget
    try:
        for i in range(warmup + repeat):
            for p in model.parameters():
                p.grad = None  # each pass is the same step: gradients made, not accumulated
            rec.start()
            try:
                step([])
            finally:
                trace = rec.stop()
            if i >= warmup:
                out.append(trace)
                if t_end is not None and len(out) >= 3 and time.perf_counter() > t_end:
                    break
    finally:
        rec.detach()
    return out


def _stats(values: list[float]) -> tuple[float, float]:
    """``(median, interquartile range)``; the range is 0 below two values."""
    if not values:
        return 0.0, 0.0
    if len(values) < 2:
        return values[0], 0.0
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return statistics.median(values), q3 - q1


def _by_key(traces: list[Trace], kind: str) -> dict[str, dict[str, list[float]]]:
    out: dict[str, dict[str, list[float]]] = {}
    for t in traces:
        for n in t.nodes:
            if n.kind == kind:
                d = out.setdefault(n.key, {"fwd": [], "bwd": [], "bwd_self": []})
                d["fwd"].append(n.fwd_time)
                d["bwd"].append(n.bwd_time if kind == "module" else n.bwd_self_time)
                d["bwd_self"].append(n.bwd_self_time)
    return out


def _with_times(base: Trace, steps: list[Trace], ops: list[Trace], warmup: int) -> Trace:
    calls, op_times = _by_key(steps, "module"), _by_key(ops, "op")

    def timed(n: Node) -> Node:
        src = calls if n.kind == "module" else op_times if n.kind == "op" else None
        d = src.get(n.key) if src is not None else None
        if d is None:
            return dataclasses.replace(n, fwd_time=0.0, bwd_time=0.0, bwd_self_time=0.0)
        fwd, fwd_iqr = _stats(d["fwd"])
        _, bwd_iqr = _stats(d["bwd"])
        bwd_self, _ = _stats(d["bwd_self"])
        return dataclasses.replace(n, fwd_time=fwd, fwd_iqr=fwd_iqr, bwd_time=bwd_self,
                                   bwd_iqr=bwd_iqr, bwd_self_time=bwd_self)  # fmt: skip

    nodes = [timed(n) for n in base.nodes]
    # a call's backward is its own median plus its children's, so the figures add up
    inclusive = [n.bwd_self_time if n.kind == "module" else n.bwd_time for n in nodes]
    for n in reversed(nodes):  # children come after parents
        if n.parent is not None and n.kind == "module":
            inclusive[n.parent] += inclusive[n.id]
    nodes = [dataclasses.replace(n, bwd_time=inclusive[n.id]) if n.kind == "module" else n
             for n in nodes]  # fmt: skip

    fwd, fwd_iqr = _stats([t.meta.forward_time for t in steps])
    bwd, bwd_iqr = _stats([t.meta.backward_time for t in steps])
    outside, _ = _stats([t.meta.outside_bwd_time for t in steps])
    clock = "CUDA events (GPU time)" if "CUDA events" in steps[0].meta.timing else (
        "host clock, labkit's hook cost subtracted")  # fmt: skip
    how = (f"median (IQR) of {len(steps)} timing-only passes after {warmup} warm-up; {clock}"
           + (f"; op times from {len(ops)} op-only passes" if ops else
              "; op nodes untimed (on CUDA only module times are GPU times)"
              if "CUDA" in clock and base.meta.mode == "full" else ""))  # fmt: skip
    meta = dataclasses.replace(base.meta, forward_time=fwd, backward_time=bwd,
                               outside_bwd_time=outside, forward_iqr=fwd_iqr,
                               backward_iqr=bwd_iqr, timing=how)  # fmt: skip
    return base.replace(meta=meta, nodes=tuple(nodes))
