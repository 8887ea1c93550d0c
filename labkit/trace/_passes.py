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
from labkit.trace._raw import parameters_of
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
    op_times: bool | None = None,
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
        op_times: Time the op nodes (op-timed passes): ``None`` up to
            :data:`OP_TIMES_MAX_CALLS` module calls (above it, a note says why not and how
            to ask), ``True`` always, ``False`` never.

    Returns:
        ``base`` with times replaced by medians over the timing passes.
    """
    if warmup < 0 or repeat < 0:
        raise ValueError(f"warmup and repeat must be >= 0, got warmup={warmup}, repeat={repeat}")
    if repeat == 0:
        return base
    params = parameters_of(model)
    devices = [p.device.index or 0 for p in params if p.is_cuda][:1]
    cuda = bool(devices)
    with torch.random.fork_rng(devices=devices):  # the passes draw no numbers the user sees
        # on the host clock, what the hooks still cost per call is measured and subtracted
        cost = None if cuda else calibrate()
        passes = _step_passes(model, step, warmup, repeat, budget, plain=not cuda, params=params)
        # op times are host times around each op: meaningful on the CPU only
        too_many = op_times is None and too_many_for_op_times(base)
        ops = (
            _step_passes(
                model, step, 0, repeat, budget, plain=False, mode="ops", params=params
            ).steps
            if mode == "full" and not cuda and op_times is not False and not too_many
            else []
        )
    if too_many and mode == "full" and not cuda:
        base = base.replace(
            meta=dataclasses.replace(base.meta, notes=(*base.meta.notes, _op_note(base)))
        )
    return _with_times(base, passes, ops, warmup, cost)


OP_TIMES_MAX_CALLS = 20_000
"""Module calls above which ``labkit.trace`` takes no op times unless asked (``op_times=True``).

The op-timed pass runs every torch call of the step through a function mode with a clock
and a backward segment per op: about as much again as the module timing passes, for a
figure per op that a graph of that many calls shows only zoomed in. Measured with
``benchmarks/trace_scale.py``: ~17% of a trace of 10,000 ``Linear`` calls."""


def _module_calls(base: Trace) -> int:
    return sum(1 for n in base.nodes if n.kind == "module")


def too_many_for_op_times(base: Trace) -> bool:
    """Whether ``base`` has more module calls than :data:`OP_TIMES_MAX_CALLS` (and op nodes
    to time)."""
    return _module_calls(base) > OP_TIMES_MAX_CALLS and any(n.kind == "op" for n in base.nodes)


def _op_note(base: Trace) -> str:
    calls = _module_calls(base)
    return (
        f"op nodes untimed: {calls:,} module calls is above {OP_TIMES_MAX_CALLS:,}, where "
        "the op-timed pass would cost about as much again as the module timing; "
        "labkit.trace(..., op_times=True) times them"
    )


class _PassNode:
    """What the timing passes keep of one node of a hooked pass: its key, kind, parent and
    times (``bwd_time``: a module call's own backward plus its module calls'; an op's 0),
    as a :class:`~labkit.trace.model.Node` of its trace would say, without building one."""

    __slots__ = ("bwd_self_time", "bwd_time", "fwd_time", "id", "key", "kind", "parent")

    def __init__(
        self,
        id: int,
        key: str,
        kind: str,
        parent: int | None,
        fwd: float,
        bwd_self: float,
        bwd: float | None = None,
    ) -> None:
        self.id, self.key, self.kind, self.parent = id, key, kind, parent
        self.fwd_time, self.bwd_self_time = fwd, bwd_self
        if bwd is None:  # the call's own until its module calls' are added
            bwd = bwd_self if kind == "module" else 0.0
        self.bwd_time = bwd


@dataclasses.dataclass
class _PassStep:
    """One hooked timing pass: its nodes' times and the step's totals (what its Trace's
    meta would hold)."""

    nodes: list[_PassNode]
    forward_time: float
    backward_time: float
    outside_bwd_time: float
    cuda: bool

    @classmethod
    def of(cls, trace: Trace) -> _PassStep:
        """The pass a recorded ``trace`` (mode ``"step"`` or ``"ops"``) would have given."""
        nodes = [
            _PassNode(n.id, n.key, n.kind, n.parent, n.fwd_time, n.bwd_self_time, n.bwd_time)
            for n in trace.nodes
        ]
        m = trace.meta
        cuda = "CUDA events" in m.timing
        return cls(nodes, m.forward_time, m.backward_time, m.outside_bwd_time, cuda=cuda)


def _end_pass(rec: Recorder) -> _PassStep:
    """Stop ``rec``'s pass and keep its times: the recording's bookkeeping (shapes, module
    infos, a frozen Trace) is the structural recording's, not redone per pass."""
    inst = rec.inst
    inst.stop()
    timing = rec.timing
    raw = inst.nodes
    ids = {r.id: i for i, r in enumerate(raw)}
    nodes = [
        _PassNode(
            i,
            r.key,
            r.kind,
            None if r.parent is None else ids[r.parent.id],
            r.fwd_time if timing is not None else 0.0,
            r.bwd_self,
        )
        for i, r in enumerate(raw)
    ]
    for n in reversed(nodes):  # children come after parents: inclusive module backward
        if n.parent is not None and n.kind == "module":
            nodes[n.parent].bwd_time += n.bwd_time
    if timing is None:
        return _PassStep(nodes, 0.0, 0.0, 0.0, cuda=False)
    return _PassStep(nodes, timing.forward, timing.backward, timing.outside_bwd, cuda=timing.cuda)


@dataclasses.dataclass
class _Passes:
    """What the timing passes measured: hooked passes, segment counts, hook-free clocks."""

    steps: list[_PassStep] = dataclasses.field(default_factory=list)
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
    params: list[torch.nn.Parameter] | None = None,
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
    if params is None:
        params = parameters_of(model)
    t_end = None if budget is None else time.perf_counter() + budget
    try:
        for i in range(warmup + repeat):
            if plain:
                rec.detach()  # an attached hook sends every call down the slow path
                clock.attach()
                _clear_grads(params)
                clock.start()
                try:
                    with no_gc():
                        step([])
                finally:
                    clock.stop()
                clock.detach()
            rec.attach()
            _clear_grads(params)
            rec.start()
            try:
                with no_gc():
                    step([])
            finally:
                done = _end_pass(rec)
            if i >= warmup:
                out.steps.append(done)
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


def _clear_grads(params: list[torch.nn.Parameter]) -> None:
    for p in params:
        p.grad = None  # each pass is the same step: gradients made, not accumulated


def _stats(values: list[float]) -> tuple[float, float]:
    """``(median, interquartile range)``; the range is 0 below two values."""
    if not values:
        return 0.0, 0.0
    if len(values) < 2:
        return values[0], 0.0
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return statistics.median(values), q3 - q1


def _by_key(traces: list[_PassStep], kind: str) -> dict[str, dict[str, list[float]]]:
    out: dict[str, dict[str, list[float]]] = {}
    for t in traces:
        for n in t.nodes:
            if n.kind == kind:
                d = out.setdefault(n.key, {"fwd": [], "bwd": [], "bwd_self": []})
                d["fwd"].append(n.fwd_time)
                d["bwd"].append(n.bwd_time if kind == "module" else n.bwd_self_time)
                d["bwd_self"].append(n.bwd_self_time)
    return out


def _descendants(trace: _PassStep) -> dict[str, int]:
    """Module calls inside each module call, by key."""
    counts = [0] * len(trace.nodes)
    for n in reversed(trace.nodes):  # children come after parents
        if n.kind == "module" and n.parent is not None:
            counts[n.parent] += counts[n.id] + 1
    return {n.key: counts[n.id] for n in trace.nodes if n.kind == "module"}


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


def _with_times(
    base: Trace, passes: _Passes, ops: list[_PassStep], warmup: int, cost: HookCost | None
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

    drafts = [_Draft(n, calls if n.kind == "module" else op_times) for n in base.nodes]
    floored = _net_of_hooks(drafts, calls, cost, inside, segs)
    # a call's backward is its own median plus its children's, so the figures add up
    for d in reversed(drafts):  # children come after parents
        if d.kind == "module":
            d.bwd_time = d.bwd_self_time
    for d in reversed(drafts):
        if d.parent is not None and d.kind == "module":
            drafts[d.parent].bwd_time += d.bwd_time

    outside = max(
        0.0, _stats([t.outside_bwd_time for t in steps])[0] - segs.get("", 0.0) * cost.segment
    )
    fwd, fwd_iqr = _stats([t.forward_time for t in steps])
    bwd, bwd_iqr = _stats([t.backward_time for t in steps])
    roots = [d for d in drafts if d.kind == "module" and d.parent is None]
    if cost != HookCost():  # the roots' figures net of the hook cost
        fwd = sum(d.fwd_time for d in roots)
        bwd = sum(d.bwd_time for d in roots) + outside
    plain = bool(passes.plain_fwd) and all(len(f) == len(roots) for f in passes.plain_fwd)
    if plain:  # the root's own figures from the hook-free passes
        fwd, fwd_iqr, root_bwd = _plain_roots(roots, passes, cost)
        if root_bwd is not None:
            bwd, bwd_iqr = root_bwd[0] + outside, root_bwd[1]
    nodes = [d.node() for d in drafts]
    clock = (
        "CUDA events (GPU time)" if steps[0].cuda else "host clock, labkit's hook cost subtracted"
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
            else f"; op nodes untimed (op_times=False, or over {OP_TIMES_MAX_CALLS:,} module calls)"
            if base.meta.mode == "full" and any(n.kind == "op" for n in base.nodes)
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
    nodes: list[_Draft],
    calls: dict[str, dict[str, list[float]]],
    cost: HookCost,
    inside: dict[str, int],
    segs: dict[str, float],
) -> _Floored:
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
        n.fwd_time, n.bwd_time, n.bwd_self_time = fwd, bwd, bwd
        n.fwd_pass_times = tuple(max(t - eff_f, FLOOR * t) for t in d["fwd"])
        n.bwd_pass_times = tuple(max(t - eff_b, FLOOR * t) for t in d["bwd_self"])
        if n.parent is not None:
            kids[n.parent] += fwd
    return _Floored(tuple(reversed(fwd_floored)), tuple(reversed(bwd_floored)))


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
    step: _PassStep,
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


def _room(calls: dict[str, dict[str, list[float]]], step: _PassStep) -> float:
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
    roots: list[_Draft], passes: _Passes, cost: HookCost
) -> tuple[float, float, tuple[float, float] | None]:
    """Root calls' forward (and, for one call, backward) from the hook-free passes (set on
    their drafts).

    Returns:
        ``(forward, forward IQR, (backward, its IQR) or None)``: ``None`` when the
        hook-free backward cannot be given to one root call (several calls, or none ran).
    """
    per_pass = [[max(0.0, t - cost.call) for t in f] for f in passes.plain_fwd]
    for i, root in enumerate(roots):
        root.fwd_time, root.fwd_iqr = _stats([p[i] for p in per_pass])
    fwd, fwd_iqr = _stats([sum(p) for p in per_pass])
    if len(roots) != 1 or not all(passes.plain_bwd):
        return fwd, fwd_iqr, None  # several root calls share one backward
    root = roots[0]
    b, b_iqr = _stats([sum(b) for b in passes.plain_bwd])
    kids = root.bwd_time - root.bwd_self_time
    root.bwd_time, root.bwd_self_time, root.bwd_iqr = b, max(0.0, b - kids), b_iqr
    return fwd, fwd_iqr, (b, b_iqr)


class _Draft:
    """A node of the trace while its times are worked out: the medians over the passes
    (``calls``: the module calls' or the ops' figures by key), then net of the hook cost;
    :meth:`node` makes the :class:`Node` once, at the end."""

    __slots__ = (
        "base",
        "bwd_iqr",
        "bwd_pass_times",
        "bwd_self_time",
        "bwd_time",
        "fwd_iqr",
        "fwd_pass_times",
        "fwd_time",
        "id",
        "key",
        "kind",
        "parent",
    )

    def __init__(self, n: Node, calls: dict[str, dict[str, list[float]]]) -> None:
        self.base, self.id, self.key, self.kind, self.parent = n, n.id, n.key, n.kind, n.parent
        self.fwd_iqr, self.bwd_iqr = n.fwd_iqr, n.bwd_iqr
        self.fwd_pass_times, self.bwd_pass_times = n.fwd_pass_times, n.bwd_pass_times
        d = calls.get(n.key) if n.kind in ("module", "op") else None
        if d is None:  # ran in no pass (an input, an output): untimed
            self.fwd_time = self.bwd_time = self.bwd_self_time = 0.0
            return
        self.fwd_time, self.fwd_iqr = _stats(d["fwd"])
        self.bwd_iqr = _stats(d["bwd"])[1]
        self.bwd_self_time = self.bwd_time = _stats(d["bwd_self"])[0]
        # a module call's figures are still hooked here: _net_of_hooks takes the cost off

    def node(self) -> Node:
        """The node with these times (the same object when none changed)."""
        n = self.base
        new = (
            self.fwd_time,
            self.bwd_time,
            self.bwd_self_time,
            self.fwd_iqr,
            self.bwd_iqr,
            self.fwd_pass_times,
            self.bwd_pass_times,
        )
        old = (
            n.fwd_time,
            n.bwd_time,
            n.bwd_self_time,
            n.fwd_iqr,
            n.bwd_iqr,
            n.fwd_pass_times,
            n.bwd_pass_times,
        )
        if new == old:
            return n
        return _with_node_times(n, new)


_TIME_FIELDS = (
    "fwd_time",
    "bwd_time",
    "bwd_self_time",
    "fwd_iqr",
    "bwd_iqr",
    "fwd_pass_times",
    "bwd_pass_times",
)
_FAST_COPY = not hasattr(Node, "__slots__") and not hasattr(Node, "__post_init__")


def _with_node_times(n: Node, times: tuple[Any, ...]) -> Node:
    """``dataclasses.replace(n, **dict(zip(_TIME_FIELDS, times)))``: the frozen dataclass
    copied field table and all (its ``__init__`` sets each of 21 fields through
    ``object.__setattr__``: ~15 us a node, 0.3 s for 20,000), then the times set."""
    if not _FAST_COPY:
        return dataclasses.replace(n, **dict(zip(_TIME_FIELDS, times, strict=True)))
    new = object.__new__(Node)
    d = new.__dict__
    d.update(n.__dict__)
    d.update(zip(_TIME_FIELDS, times, strict=True))
    return new
