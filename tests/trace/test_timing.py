"""Times that are the model's: timing-only passes, warm-up, medians, labkit's cost removed."""

from __future__ import annotations

import time
from typing import Any

import pytest
import torch
from torch import nn

import labkit
from labkit.trace import Recorder
from labkit.trace.instrument import Instrumentation, Observer
from tests.trace._models import MLP
from tests.trace.conftest import assert_clean


class SlowOnCall(nn.Module):
    """Sleeps on the listed call numbers (0 = the first call), else adds one."""

    def __init__(self, slow_calls: set[int], seconds: float = 0.3) -> None:
        super().__init__()
        self.slow_calls, self.seconds, self.calls = slow_calls, seconds, 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.calls in self.slow_calls:
            time.sleep(self.seconds)
        self.calls += 1
        return x + 1


def _model(slow_calls: set[int]) -> nn.Module:
    return nn.Sequential(nn.Linear(4, 4), SlowOnCall(slow_calls))


def test_times_come_from_timing_passes_and_say_so() -> None:
    t = labkit.trace(MLP(), torch.randn(8, 8), warmup=1, repeat=3)
    assert "median (IQR) of 3 timing-only passes after 1 warm-up" in t.meta.timing
    assert "op times from 3 op-only passes" in t.meta.timing
    assert t.meta.forward_time > 0 and t.meta.backward_time > 0
    assert all(n.fwd_iqr >= 0 and n.bwd_iqr >= 0 for n in t.nodes)
    assert any(n.kind == "op" and n.fwd_time > 0 for n in t.nodes)
    assert "Times: median (IQR)" in t.summary()


def test_no_timing_passes_means_no_times_in_a_full_trace() -> None:
    t = labkit.trace(MLP(), torch.randn(8, 8), repeat=0)
    assert t.meta.forward_time == 0 and t.meta.backward_time == 0
    assert all(n.fwd_time == 0 and n.bwd_time == 0 for n in t.nodes)
    assert t.meta.timing.startswith("not timed")
    assert t.total_flops > 0  # the full recording still has its graph and FLOPs


def test_warm_up_passes_are_not_kept() -> None:
    # call 0 is the full recording; then each pass is a hook-free one and a hooked one:
    # calls 1 and 2 the warm-up pair, calls 3 and 4 the kept pair
    warm = labkit.trace(_model({1, 2}), torch.randn(2, 4), warmup=1, repeat=1)
    cold = labkit.trace(_model({1, 2}), torch.randn(2, 4), warmup=0, repeat=1)
    assert warm.calls_of("1")[0].fwd_time < 0.15 and warm.meta.forward_time < 0.15
    assert cold.calls_of("1")[0].fwd_time >= 0.3 and cold.meta.forward_time >= 0.3


def test_the_median_ignores_one_slow_pass() -> None:
    t = labkit.trace(_model({3}), torch.randn(2, 4), warmup=1, repeat=5, time_budget=None)
    node = t.calls_of("1")[0]
    assert node.fwd_time < 0.15
    assert t.meta.forward_time < 0.15


def test_the_recorders_own_cost_is_not_in_the_times() -> None:
    class Slow(Observer):
        """An observer that costs 20 ms per module call: none of it may show as model time."""

        def call(self, node: Any, module: Any, args: Any, kwargs: Any) -> None:
            time.sleep(0.02)

    model = nn.Sequential(*[nn.Linear(4, 4) for _ in range(5)])
    rec = Recorder(model, mode="step", observers=[Slow()])
    t0 = time.perf_counter()
    with rec:
        model(torch.randn(2, 4)).sum().backward()
    wall = time.perf_counter() - t0
    assert wall >= 6 * 0.02  # the hooks really cost that much
    assert rec.trace is not None and rec.trace.meta.forward_time < 0.05
    assert_clean(model)


def test_timing_passes_draw_no_random_numbers_the_user_sees() -> None:
    model = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.5))
    torch.manual_seed(0)
    labkit.trace(model, torch.randn(4, 8), repeat=0)
    after_one = torch.rand(3)
    torch.manual_seed(0)
    labkit.trace(model, torch.randn(4, 8), repeat=4)
    assert torch.equal(torch.rand(3), after_one)


def test_time_budget_stops_repeating_after_three_passes() -> None:
    t = labkit.trace(_model({2, 3, 4, 5, 6}), torch.randn(2, 4), warmup=0, repeat=20,
                     time_budget=0.1, mode="timing")  # fmt: skip
    assert "of 3 timing-only passes" in t.meta.timing


def test_bad_counts_are_refused() -> None:
    with pytest.raises(ValueError, match="warmup and repeat must be >= 0"):
        labkit.trace(MLP(), torch.randn(2, 8), repeat=-1)


def test_lost_time_is_what_the_hooks_took() -> None:
    inst = Instrumentation(MLP())
    with inst:
        MLP()(torch.randn(2, 8))  # not the instrumented model: nothing recorded
    assert inst.lost == 0.0 and inst.nodes == []
