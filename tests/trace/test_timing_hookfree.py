"""Times that are the model's at any call size: hook-free root passes, hook cost subtracted.

Checked by construction: a module that is slow only while labkit's module hooks are on
shows in its own time but not in the root's (the root's comes from the hook-free
passes); the subtraction is exact arithmetic on known recorded figures; the cost is
measured and stated. No wall-clock thresholds on the model's own speed.
"""

from __future__ import annotations

import dataclasses
import time

import pytest
import torch
from torch import nn

import labkit
from labkit._gc import no_gc
from labkit.trace import _passes
from labkit.trace._hookcost import HookCost, calibrate
from labkit.trace._plain import PlainClock
from labkit.trace.io import trace_from_dict, trace_to_dict
from labkit.trace.model import Trace
from tests.trace.conftest import assert_clean


class SlowWhenHooked(nn.Module):
    """Sleeps while any module hook is on it: what hooks cost, exaggerated."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self._forward_pre_hooks or self._forward_hooks:
            time.sleep(0.05)
        return x + 1


def test_the_roots_times_come_from_the_hook_free_passes() -> None:
    model = nn.Sequential(nn.Linear(4, 4), SlowWhenHooked())
    t = labkit.trace(model, torch.randn(2, 4), warmup=1, repeat=3, time_budget=None)
    assert t.calls_of("1")[0].fwd_time >= 0.05  # the hooked passes gave the module's time
    # the root's forward and the trace's forward were taken with no hook inside the model
    assert t.calls_of("")[0].fwd_time < 0.05
    assert t.meta.forward_time < 0.05
    assert t.meta.forward_time == t.calls_of("")[0].fwd_time
    assert "hook-free passes interleaved" in t.meta.timing
    assert_clean(model)


def test_the_hook_cost_is_measured_and_stated() -> None:
    t = labkit.trace(nn.Sequential(nn.Linear(4, 4), nn.ReLU()), torch.randn(2, 4), repeat=3)
    assert {"call", "child", "segment"} <= set(t.meta.hook_cost)
    assert set(t.meta.hook_cost) <= {"call", "child", "segment", "probe_child", "probe_segment"}
    assert t.meta.hook_cost["child"] >= 0 and t.meta.hook_cost["segment"] >= 0
    assert "hook cost subtracted:" in t.meta.timing
    assert "hook cost subtracted:" in t.summary()  # the Times line says it
    assert trace_from_dict(trace_to_dict(t)).meta.hook_cost == t.meta.hook_cost


def test_calibration_measures_positive_costs_and_cleans_up() -> None:
    cost = calibrate(calls=16, reps=2)
    assert cost.child > 0  # a hooked call always costs something outside the hooks' clocks
    assert cost.segment >= 0
    assert abs(cost.call) < 1e-3  # microseconds, not milliseconds
    with pytest.raises(ValueError, match="calls and reps must be >= 1"):
        calibrate(calls=0)


def _recorded(fwd: dict[str, float], bwd_self: dict[str, float]) -> Trace:
    """A timing recording of a 3-level model with the given figures put in by hand."""
    inner = nn.Sequential(nn.Linear(2, 2), nn.ReLU())
    model = nn.Sequential(inner, nn.Linear(2, 2))
    t = labkit.trace(model, torch.randn(1, 2), mode="timing", repeat=0)
    inclusive = {
        n.key: sum(v for k, v in bwd_self.items() if k.startswith(n.module))
        if n.module
        else sum(bwd_self.values())
        for n in t.nodes
        if n.kind == "module"
    }
    nodes = tuple(
        dataclasses.replace(
            n, fwd_time=fwd[n.key], bwd_self_time=bwd_self[n.key], bwd_time=inclusive[n.key]
        )
        if n.kind == "module"
        else n
        for n in t.nodes
    )
    meta = dataclasses.replace(
        t.meta, forward_time=fwd["#0"], outside_bwd_time=0.004, timing="one pass, host clock"
    )
    return t.replace(nodes=nodes, meta=meta)


def test_the_subtraction_is_per_call_and_per_call_inside() -> None:
    fwd = {"#0": 0.100, "0#0": 0.060, "0.0#0": 0.020, "0.1#0": 0.010, "1#0": 0.020}
    bwd = {"#0": 0.001, "0#0": 0.002, "0.0#0": 0.030, "0.1#0": 0.003, "1#0": 0.020}
    rec = _recorded(fwd, bwd)
    segs = {"#0": 1, "0#0": 1, "0.0#0": 2, "0.1#0": 1, "1#0": 1, "": 2}
    passes = _passes._Passes(steps=[_passes._PassStep.of(rec)], segments=[segs])
    cost = HookCost(call=0.001, child=0.002, segment=0.0005)
    t = _passes._with_times(rec, passes, [], 0, cost)
    got = {n.key: n for n in t.nodes if n.kind == "module"}
    # own call cost off every call, the per-call-inside cost once per module call inside
    assert got["0.0#0"].fwd_time == pytest.approx(0.020 - 0.001)
    assert got["0#0"].fwd_time == pytest.approx(0.060 - 0.001 - 2 * 0.002)
    assert got["#0"].fwd_time == pytest.approx(0.100 - 0.001 - 4 * 0.002)
    assert got["0.0#0"].bwd_self_time == pytest.approx(0.030 - 2 * 0.0005)
    assert got["0#0"].bwd_time == pytest.approx(
        0.002 + 0.030 + 0.003 - (1 + 2 + 1) * 0.0005
    )  # inclusive: its own and its children's, each net of its segments
    assert t.meta.outside_bwd_time == pytest.approx(0.004 - 2 * 0.0005)
    assert t.meta.forward_time == pytest.approx(got["#0"].fwd_time)
    assert t.meta.hook_cost == {"call": 0.001, "child": 0.002, "segment": 0.0005}
    assert "1000.00 us per module call, 2000.00 us per call inside it" in t.meta.timing


def test_hook_free_figures_replace_the_roots() -> None:
    fwd = {"#0": 0.100, "0#0": 0.060, "0.0#0": 0.020, "0.1#0": 0.010, "1#0": 0.020}
    bwd = dict.fromkeys(fwd, 0.001)
    rec = _recorded(fwd, bwd)
    passes = _passes._Passes(
        steps=[_passes._PassStep.of(rec)] * 3,
        segments=[{}, {}, {}],
        plain_fwd=[[0.081], [0.080], [0.090]],
        plain_bwd=[[0.050], [0.040], [0.060]],
    )
    t = _passes._with_times(rec, passes, [], 0, HookCost(call=0.001))
    root = t.calls_of("")[0]
    assert root.fwd_time == pytest.approx(0.081 - 0.001)  # median of the hook-free passes
    assert t.meta.forward_time == pytest.approx(0.080)
    assert t.meta.forward_iqr == pytest.approx(0.0845 - 0.0795)
    assert root.bwd_time == pytest.approx(0.050)
    assert root.bwd_self_time == pytest.approx(0.050 - 4 * 0.001)  # children's stay
    assert t.meta.backward_time == pytest.approx(0.050 + 0.004)  # plus the loss's outside
    assert "from 3 hook-free passes" in t.meta.timing


def test_plain_clock_times_forward_and_backward_and_leaves_nothing() -> None:
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    clock = PlainClock(model).attach()
    assert sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model) == 0
    clock.start()
    with no_gc():
        model(torch.randn(2, 4, requires_grad=True)).sum().backward()
        model(torch.randn(2, 4))
    clock.stop()
    assert len(clock.forward) == 2 and len(clock.backward) == 1
    assert all(t > 0 for t in clock.forward + clock.backward)
    clock.detach()
    model.zero_grad(set_to_none=True)
    assert_clean(model)
    assert "PlainClock(model=Sequential" in repr(clock)


def test_the_models_own_passes_raise_the_per_call_cost() -> None:
    """Hooked root 100 ms, hook-free 80 ms, 4 calls inside: 5 ms a call (the probe's 1 ms
    is too little for this model), so the children add up to the root again."""
    fwd = {"#0": 0.100, "0#0": 0.060, "0.0#0": 0.020, "0.1#0": 0.010, "1#0": 0.020}
    bwd = {"#0": 0.001, "0#0": 0.002, "0.0#0": 0.030, "0.1#0": 0.003, "1#0": 0.020}
    rec = _recorded(fwd, bwd)
    segs = {"#0": 1, "0#0": 1, "0.0#0": 2, "0.1#0": 1, "1#0": 1}  # 6 segments in the root
    passes = _passes._Passes(
        steps=[_passes._PassStep.of(rec)], segments=[segs], plain_fwd=[[0.080]], plain_bwd=[[0.050]]
    )
    probe = HookCost(call=0.0, child=0.001, segment=0.0001)
    t = _passes._with_times(rec, passes, [], 0, probe)
    child = (0.100 - 0.080) / 4
    # the backward keeps the probe's figure: no call bounds a raise there
    assert t.meta.hook_cost == pytest.approx(
        {"call": 0.0, "child": child, "segment": 0.0001, "probe_child": 0.001}
    )
    got = {n.key: n for n in t.nodes if n.kind == "module"}
    assert got["0#0"].fwd_time == pytest.approx(0.060 - 2 * child)
    kids = got["0#0"].fwd_time + got["1#0"].fwd_time
    assert got["#0"].fwd_time == pytest.approx(0.080)
    assert kids == pytest.approx(0.080 - (0.100 - 0.060 - 0.020) + 2 * child)  # root's self
    assert kids <= got["#0"].fwd_time
    assert "(a probe: 1000.00 us; the rest is this model's" in t.meta.timing
    # the probe's figures stand when the model shows less than they do
    low = _passes._Passes(
        steps=[_passes._PassStep.of(rec)],
        segments=[segs],
        plain_fwd=[[0.0999]],
        plain_bwd=[[0.0559]],
    )
    assert _passes._with_times(rec, low, [], 0, probe).meta.hook_cost == pytest.approx(
        probe.as_dict()
    )


def test_the_raise_stops_where_the_models_calls_leave_no_room() -> None:
    """Hook-free root 80 ms against 100 ms hooked would say 5 ms a call, but '0' holds its
    two calls with only 6 ms to spare (3 ms a call): a busy machine's stalls are no hook
    cost, so 3 ms it is."""
    fwd = {"#0": 0.100, "0#0": 0.036, "0.0#0": 0.020, "0.1#0": 0.010, "1#0": 0.020}
    rec = _recorded(fwd, dict.fromkeys(fwd, 0.0))
    passes = _passes._Passes(
        steps=[_passes._PassStep.of(rec)], segments=[{}], plain_fwd=[[0.080]], plain_bwd=[[0.0]]
    )
    t = _passes._with_times(rec, passes, [], 0, HookCost(child=0.001))
    assert t.meta.hook_cost["child"] == pytest.approx((0.036 - 0.030) / 2)
    assert t.meta.hook_cost["probe_child"] == pytest.approx(0.001)


def test_a_negative_per_call_cost_is_said_as_given_back() -> None:
    from labkit.trace._hookcost import HookCost

    text = HookCost(call=-1.5e-6, child=3e-6, segment=4e-6).describe()
    assert "-" not in text.split("per module call")[0]
    assert "1.50 us per module call given back" in text
    assert (
        HookCost(call=2e-6).describe().startswith("hook cost subtracted: 2.00 us per module call,")
    )
