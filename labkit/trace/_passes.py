"""One step recorded for structure, then timed by timing-only passes.

The full recording (graph, FLOPs, memory) pays for per-op capture, so its clock says
more about labkit than about the model. The times a trace shows come instead from
passes that carry module hooks only, after a warm-up, repeated; each figure is the
median over the passes, with its interquartile range. Op times come from passes that
add the op-level hook alone.

On the host clock, hooked passes alternate with hook-free ones (only the root's own clock,
:class:`~labkit.trace._plain.PlainClock`): the root's forward and backward shown are the
hook-free figures, and every other call's time is net of what the hooks still cost per
call (:mod:`labkit.trace._hookcost`, measured at trace time and stated in the timing line).
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

from labkit._gc import no_gc
from labkit.trace._hookcost import HookCost, calibrate
from labkit.trace._plain import PlainClock
from labkit.trace.model import Node, Trace
from labkit.trace.recorder import Recorder

# what the passes run: one forward (+ backward) that may append notes (a trace.step.Step)
RunStep = Callable[[list[str]], None]


def time_step(
    model: torch.nn.Module,
    step: RunStep,
    base: Trace,
    *,
    mode: str,
    warmup: int,
    repeat: int,
    budget: float | None = None,
) -> Trace:
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
    cuda = any(p.is_cuda for p in model.parameters())
    with torch.random.fork_rng(devices=devices):  # the passes draw no numbers the user sees
        # on the host clock, what the hooks still cost per call is measured and subtracted
        cost = None if cuda else calibrate()
        passes = _step_passes(model, step, warmup, repeat, budget, plain=not cuda)
        # op times are host times around each op: meaningful on the CPU only
        ops = (
            _step_passes(model, step, 0, repeat, budget, plain=False, mode="ops").steps
            if mode == "full" and not cuda
            else []
        )
    return _with_times(base, passes, ops, warmup, cost)


@dataclasses.dataclass
class _Passes:
    """What the timing passes measured: hooked traces, segment counts, hook-free clocks."""

    steps: list[Trace] = dataclasses.field(default_factory=list)
    segments: list[dict[str, int]] = dataclasses.field(default_factory=list)
    plain_fwd: list[list[float]] = dataclasses.field(default_factory=list)
    plain_bwd: list[list[float]] = dataclasses.field(default_factory=list)


def _step_passes(
    model: torch.nn.Module,
    step: RunStep,
    warmup: int,
    repeat: int,
    budget: float | None,
    *,
    plain: bool,
    mode: str = "step",
) -> _Passes:
    """Hooked passes of ``mode`` (``"step"``: module hooks and the timing observer, every
    call's figures; ``"ops"``: op times), interleaved with hook-free ones when ``plain``
    (plain, hooked, plain, hooked, ...).

    The hook-free pass carries only the root's own clock (:class:`PlainClock`): the root's
    forward and backward shown come from it. The garbage collector is held off while a pass
    runs, in both kinds alike.
    """
    rec = Recorder(model, mode=mode)
    clock = PlainClock(model)
    out = _Passes()
    t_end = None if budget is None else time.perf_counter() + budget
    try:
        for i in range(warmup + repeat):
            if plain:
                rec.detach()  # an attached hook sends every call down the slow path
                clock.attach()
                _clear_grads(model)
                clock.start()
                try:
                    with no_gc():
                        step([])
                finally:
                    clock.stop()
                clock.detach()
            rec.attach()
            _clear_grads(model)
            rec.start()
            try:
                with no_gc():
                    step([])
            finally:
                trace = rec.stop()
            if i >= warmup:
                out.steps.append(trace)
                if rec.timing is not None:
                    out.segments.append(dict(rec.timing.segments))
                if plain:
                    out.plain_fwd.append(clock.forward)
                    out.plain_bwd.append(clock.backward)
                if t_end is not None and len(out.steps) >= 3 and time.perf_counter() > t_end:
                    break
    finally:
        clock.detach()
        rec.detach()
    return out


def _clear_grads(model: torch.nn.Module) -> None:
    for p in model.parameters():
        p.grad = None  # each pass is the same step: gradients made, not accumulated


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


def _descendants(trace: Trace) -> dict[str, int]:
    """Module calls inside each module call, by key."""
    counts = [0] * len(trace.nodes)
    for n in reversed(trace.nodes):  # children come after parents
        if n.kind == "module" and n.parent is not None:
            counts[n.parent] += counts[n.id] + 1
    return {n.key: counts[n.id] for n in trace.nodes if n.kind == "module"}


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


def _with_times(
    base: Trace, passes: _Passes, ops: list[Trace], warmup: int, cost: HookCost | None
) -> Trace:
    steps = passes.steps
    calls, op_times = _by_key(steps, "module"), _by_key(ops, "op")
    cost = cost or HookCost()
    inside = _descendants(steps[0])
    segs = {
        k: _median([float(s.get(k, 0)) for s in passes.segments])
        for k in {k for s in passes.segments for k in s}
    }
    if cost != HookCost():
        cost = _on_model(cost, calls, passes, steps[0], inside, segs)

    def timed(n: Node) -> Node:
        src = calls if n.kind == "module" else op_times if n.kind == "op" else None
        d = src.get(n.key) if src is not None else None
        if d is None:
            return dataclasses.replace(n, fwd_time=0.0, bwd_time=0.0, bwd_self_time=0.0)
        fwd, fwd_iqr = _stats(d["fwd"])
        _, bwd_iqr = _stats(d["bwd"])
        bwd_self, _ = _stats(d["bwd_self"])
        # a module call's figures are still hooked here: _net_of_hooks takes the cost off
        return dataclasses.replace(
            n,
            fwd_time=fwd,
            fwd_iqr=fwd_iqr,
            bwd_time=bwd_self,
            bwd_iqr=bwd_iqr,
            bwd_self_time=bwd_self,
        )

    nodes, floored = _net_of_hooks([timed(n) for n in base.nodes], calls, cost, inside, segs)
    # a call's backward is its own median plus its children's, so the figures add up
    inclusive = [n.bwd_self_time if n.kind == "module" else n.bwd_time for n in nodes]
    for n in reversed(nodes):  # children come after parents
        if n.parent is not None and n.kind == "module":
            inclusive[n.parent] += inclusive[n.id]
    nodes = [
        dataclasses.replace(n, bwd_time=inclusive[n.id]) if n.kind == "module" else n for n in nodes
    ]

    outside = max(
        0.0, _stats([t.meta.outside_bwd_time for t in steps])[0] - segs.get("", 0.0) * cost.segment
    )
    fwd, fwd_iqr = _stats([t.meta.forward_time for t in steps])
    bwd, bwd_iqr = _stats([t.meta.backward_time for t in steps])
    roots = [n for n in nodes if n.kind == "module" and n.parent is None]
    if cost != HookCost():  # the roots' figures net of the hook cost
        fwd = sum(n.fwd_time for n in roots)
        bwd = sum(n.bwd_time for n in roots) + outside
    plain = bool(passes.plain_fwd) and all(len(f) == len(roots) for f in passes.plain_fwd)
    if plain:  # the root's own figures from the hook-free passes
        nodes, fwd, fwd_iqr, root_bwd = _plain_roots(nodes, roots, passes, cost)
        if root_bwd is not None:
            bwd, bwd_iqr = root_bwd[0] + outside, root_bwd[1]
    clock = (
        "CUDA events (GPU time)"
        if "CUDA events" in steps[0].meta.timing
        else ("host clock, labkit's hook cost subtracted")
    )
    how = (
        f"median (IQR) of {len(steps)} timing-only passes after {warmup} warm-up; {clock}"
        + (
            f"; the model's forward and backward from {len(passes.plain_fwd)} hook-free "
            "passes interleaved with them"
            if plain
            else ""
        )
        + (f"; {cost.describe()}" if cost != HookCost() else "")
        + (f"; {_floored_words(floored)}" if floored.fwd or floored.bwd else "")
        + (
            f"; op times from {len(ops)} op-only passes"
            if ops
            else "; op nodes untimed (on CUDA only module times are GPU times)"
            if "CUDA" in clock and base.meta.mode == "full"
            else ""
        )
    )
    missing = (
        _missing_shares(base.meta.no_flop_formula, nodes, fwd + bwd)
        if ops
        else (base.meta.no_flop_formula)
    )
    meta = dataclasses.replace(
        base.meta,
        forward_time=fwd,
        backward_time=bwd,
        outside_bwd_time=outside,
        forward_iqr=fwd_iqr,
        backward_iqr=bwd_iqr,
        timing=how,
        no_flop_formula=missing,
        hook_cost=cost.as_dict() if cost != HookCost() else {},
        fwd_floored=floored.fwd,
        bwd_floored=floored.bwd,
    )
    return base.replace(meta=meta, nodes=tuple(nodes))


FLOOR = 0.1
"""The least share of a module call's measured (hooked) time its figure keeps once the
hook cost is taken off.

What the hooks cost per call is an estimate (:mod:`labkit.trace._hookcost`): on a busy
machine the hooked passes catch more of the CPU's stalls than the hook-free ones, the
estimate grows with them, and a container's figure, net of ``child`` cost for every call
inside it, could reach zero (issue 35: ``GATv2Conv`` and a ResCNN block read 0.0 under
load). A call that ran took time, so the subtraction is bounded from below by two floors:

- the calls inside it: a call's span holds its children's, so its figure is never below
  the sum of theirs (a per-call form of the bound :func:`_room` puts on ``child``);
- a tenth of what was measured: even the cheapest module call (``nn.Identity``: about a
  microsecond of Python inside a hooked span of a few) keeps more than that, so the floor
  binds only where the estimate went wrong, never on a quiet machine's figures.

A figure raised to a floor by more than its spread over the passes is a bound, not an
estimate: its key is kept in ``TraceMeta.fwd_floored`` / ``bwd_floored``, the timing line
says how many, and summaries mark it ``~`` as they mark a noisy figure."""


@dataclasses.dataclass(frozen=True)
class _Floored:
    """Keys of module calls whose forward / backward figure is at its floor."""

    fwd: tuple[str, ...] = ()
    bwd: tuple[str, ...] = ()


def _bounded(measured: float, off: float, inside: float) -> tuple[float, float]:
    """``measured - off``, raised to :data:`FLOOR` of ``measured`` and to ``inside`` (the
    figures of the calls inside, never above ``measured``); and by how much it was raised."""
    est = measured - off
    floor = max(FLOOR * measured, min(inside, measured))
    return (est, 0.0) if est >= floor else (floor, floor - est)


def _net_of_hooks(
    nodes: list[Node],
    calls: dict[str, dict[str, list[float]]],
    cost: HookCost,
    inside: dict[str, int],
    segs: dict[str, float],
) -> tuple[list[Node], _Floored]:
    """Module calls' forward and own backward net of what the hooks still cost, bounded below
    (:data:`FLOOR`); per-pass figures net alike. Children before parents, so a call's floor
    holds its children's net figures."""
    kids = [0.0] * len(nodes)
    fwd_floored: list[str] = []
    bwd_floored: list[str] = []
    for n in reversed(nodes):  # children come after parents
        d = calls.get(n.key) if n.kind == "module" else None
        if d is None:
            continue
        off_f = cost.forward(inside.get(n.key, 0))
        off_b = segs.get(n.key, 0.0) * cost.segment
        fwd, raised_f = _bounded(n.fwd_time, off_f, kids[n.id])
        bwd, raised_b = _bounded(n.bwd_self_time, off_b, 0.0)
        if raised_f > n.fwd_iqr:
            fwd_floored.append(n.key)
        if raised_b > _stats(d["bwd_self"])[1]:
            bwd_floored.append(n.key)
        eff_f, eff_b = n.fwd_time - fwd, n.bwd_self_time - bwd  # what was taken off
        nodes[n.id] = dataclasses.replace(
            n,
            fwd_time=fwd,
            bwd_time=bwd,
            bwd_self_time=bwd,
            fwd_pass_times=tuple(max(t - eff_f, FLOOR * t) for t in d["fwd"]),
            bwd_pass_times=tuple(max(t - eff_b, FLOOR * t) for t in d["bwd_self"]),
        )
        if n.parent is not None:
            kids[n.parent] += fwd
    return nodes, _Floored(tuple(reversed(fwd_floored)), tuple(reversed(bwd_floored)))


def _floored_words(floored: _Floored) -> str:
    """The timing line's words for figures at their floor."""
    parts = [
        f"{len(keys)} {what}"
        for what, keys in (("forward", floored.fwd), ("backward", floored.bwd))
        if keys
    ]
    return (
        f"{' and '.join(parts)} module figure(s) at their floor, marked ~ (the hook-cost "
        f"estimate would have left less than the calls inside them or {FLOOR:.0%} of the "
        "measured time: a busy machine; the figure is a lower bound)"
    )


def _missing_shares(
    missing: tuple[dict[str, Any], ...], nodes: list[Node], step: float
) -> tuple[dict[str, Any], ...]:
    """Ops without a FLOP formula, with the measured time of the op nodes that ran them
    (forward + backward) and its share of the step; left without when a module ran them."""
    ops = {n.key: n for n in nodes if n.kind == "op"}
    out = []
    for rec in missing:
        keys = rec.get("nodes", [])
        if keys and all(k in ops for k in keys) and step > 0:
            t = sum(ops[k].fwd_time + ops[k].bwd_time for k in keys)
            rec = {**rec, "time": t, "share": min(1.0, t / step)}
        out.append(rec)
    return tuple(out)


def _on_model(
    cost: HookCost,
    calls: dict[str, dict[str, list[float]]],
    passes: _Passes,
    step: Trace,
    inside: dict[str, int],
    segs: dict[str, float],
) -> HookCost:
    """The forward hook cost per call as this model shows it: the hooked passes' root time
    over the hook-free passes' (interleaved, same step), per module call inside the root;
    never below the probe's figure, never above what the calls leave room for."""
    roots = [n.key for n in step.nodes if n.kind == "module" and n.parent is None]
    if not passes.plain_fwd or any(len(f) != len(roots) for f in passes.plain_fwd):
        return cost
    if not all(k in calls for k in roots):
        return cost
    n = sum(inside.get(k, 0) for k in roots)
    child = 0.0
    if n:
        hooked = sum(_median(calls[k]["fwd"]) for k in roots) - len(roots) * cost.call
        child = (hooked - _median([sum(f) for f in passes.plain_fwd])) / n
        # on a busy machine the longer hooked passes also catch more of the CPU's stalls,
        # which are no hook cost: never more than the calls holding other calls leave
        # unexplained per call inside them (the median over those calls, below the root)
        child = min(child, _room(calls, step))
    # backward: no call holds another's segments, so nothing bounds a raise: the probe's
    return cost.on_model(child=child, segment=0.0)


def _room(calls: dict[str, dict[str, list[float]]], step: Trace) -> float:
    """Lower quartile, over non-root calls with module calls directly inside, of their
    hooked time not covered by those calls, per call inside: what the hooks' outer cost
    can be (a container's own work is little more than that; other calls' is more)."""
    kids: dict[int, list[str]] = {}
    for n in step.nodes:
        if n.kind == "module" and n.parent is not None:
            kids.setdefault(n.parent, []).append(n.key)
    room = []
    for i, keys in kids.items():
        parent = step.nodes[i]
        if parent.parent is None or parent.key not in calls:
            continue
        inner = sum(_median(calls[k]["fwd"]) for k in keys if k in calls)
        room.append((_median(calls[parent.key]["fwd"]) - inner) / len(keys))
    if not room:
        return float("inf")
    return statistics.quantiles(room, n=4, method="inclusive")[0] if len(room) > 1 else room[0]


def _plain_roots(
    nodes: list[Node], roots: list[Node], passes: _Passes, cost: HookCost
) -> tuple[list[Node], float, float, tuple[float, float] | None]:
    """Root calls' forward (and, for one call, backward) from the hook-free passes.

    Returns:
        ``(nodes, forward, forward IQR, (backward, its IQR) or None)``: ``None`` when the
        hook-free backward cannot be given to one root call (several calls, or none ran).
    """
    per_pass = [[max(0.0, t - cost.call) for t in f] for f in passes.plain_fwd]
    for i, root in enumerate(roots):
        f, f_iqr = _stats([p[i] for p in per_pass])
        nodes[root.id] = dataclasses.replace(root, fwd_time=f, fwd_iqr=f_iqr)
    fwd, fwd_iqr = _stats([sum(p) for p in per_pass])
    if len(roots) != 1 or not all(passes.plain_bwd):
        return nodes, fwd, fwd_iqr, None  # several root calls share one backward
    root = nodes[roots[0].id]
    b, b_iqr = _stats([sum(b) for b in passes.plain_bwd])
    kids = root.bwd_time - root.bwd_self_time
    nodes[root.id] = dataclasses.replace(
        root, bwd_time=b, bwd_self_time=max(0.0, b - kids), bwd_iqr=b_iqr
    )
    return nodes, fwd, fwd_iqr, (b, b_iqr)
