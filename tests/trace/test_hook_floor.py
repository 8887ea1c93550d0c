"""The hook-cost subtraction is bounded: a module call that ran never reads 0 (issue 35).

On a busy machine the estimate of what the hooks cost per call grows with the CPU's stalls
and could take a container's figure to zero. Here the estimate is made absurd on purpose
(one second per call inside, per backward segment) so that every bound must hold: each
figure stays above zero, a call's forward is never below the calls inside it, the figures
at their floor are listed in the meta, said in the timing line and marked ``~``.
"""

from __future__ import annotations

import statistics

import pytest
import torch
from torch import nn

import labkit
from labkit.trace import _passes
from labkit.trace._hookcost import HookCost


class _Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(4, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.act = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.act(self.bn(self.conv(x)))


def _model() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 4, 3, padding=1),
        nn.Sequential(_Block(), _Block()),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(4, 2),
    )


@pytest.fixture
def absurd_cost(monkeypatch: pytest.MonkeyPatch) -> HookCost:
    cost = HookCost(call=0.0, child=1.0, segment=1.0)  # far above anything measured
    monkeypatch.setattr(_passes, "calibrate", lambda: cost)
    return cost


@pytest.mark.parametrize("mode", ["full", "timing"])
def test_no_call_that_ran_reads_zero_however_large_the_estimate(absurd_cost, mode) -> None:
    t = labkit.trace(
        _model(), torch.randn(2, 3, 8, 8), mode=mode, warmup=0, repeat=3, time_budget=None
    )
    calls = [n for n in t.nodes if n.kind == "module"]
    assert all(n.fwd_time > 0 for n in calls)
    assert all(all(p > 0 for p in n.fwd_pass_times) for n in calls if n.parent is not None)
    learned = [n for n in calls if t.total(n.id, "flops_bwd") > 0 or n.type == "ReLU"]
    assert learned and all(n.bwd_time > 0 for n in learned)
    # a call holds the calls inside it (up to what it measured itself: medians do not add)
    for n in calls:
        inner = [c for c in t.nodes if c.parent == n.id and c.kind == "module"]
        if inner and n.parent is not None:
            measured = statistics.median(n.fwd_pass_times)  # at least the figure shown
            assert n.fwd_time >= min(sum(c.fwd_time for c in inner), measured) * (1 - 1e-9)
    # the containers were floored (a second per call inside is more than they took), and say so
    blocks = {n.key for n in calls if n.module in ("1", "1.0", "1.1")}
    assert blocks <= set(t.meta.fwd_floored), t.meta.fwd_floored
    assert set(t.meta.bwd_floored) and set(t.meta.bwd_floored) <= {n.key for n in calls}
    assert "at their floor" in t.meta.timing
    text = t.summary()
    assert "lower bound" in text
    rows = {r["path"]: r for r in t.rows()}
    assert rows["1.0"]["fwd_noisy"] and rows["1.0"]["bwd_noisy"]


def test_floors_round_trip_through_a_file(absurd_cost, tmp_path) -> None:
    t = labkit.trace(_model(), torch.randn(2, 3, 8, 8), mode="timing", warmup=0, repeat=2)
    assert t.meta.fwd_floored
    path = tmp_path / "t.json"
    t.save(path)
    back = labkit.Trace.load(path)
    assert back.meta.fwd_floored == t.meta.fwd_floored
    assert back.meta.bwd_floored == t.meta.bwd_floored


@pytest.mark.parametrize(
    ("measured", "off", "inside", "shown", "raised"),
    [
        (10.0, 3.0, 5.0, 7.0, 0.0),  # a sound estimate is left as it is
        (10.0, -1.0, 0.0, 11.0, 0.0),  # a negative per-call cost gives time back
        (10.0, 9.5, 0.0, 1.0, 0.5),  # a leaf keeps a tenth of what was measured
        (10.0, 9.0, 6.0, 6.0, 5.0),  # a container keeps the calls inside it
        (10.0, 9.0, 12.0, 10.0, 9.0),  # ... but never more than was measured
        (0.0, 0.0, 0.0, 0.0, 0.0),  # nothing measured (a clock that stood still): 0
    ],
)
def test_the_bound(measured, off, inside, shown, raised) -> None:
    assert _passes._bounded(measured, off, inside) == pytest.approx((shown, raised))
