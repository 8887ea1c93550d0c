"""Times that are the model's: timing-only passes, warm-up, medians, labkit's cost removed.

The figures are checked by construction: a hand-set clock stands in for ``perf_counter``
in the three places labkit reads it (module hooks, the hook-free pass's clock, op
dispatch), and only the test's own code moves it. A model's time is then exactly what
the test put in, and labkit's own time exactly zero unless an observer moves the clock;
whether the real figures are the model's is measured by benchmarks/trace_overhead.py.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
import torch
from torch import nn

import labkit
from labkit.trace import Recorder, _dispatch, _plain, instrument
from labkit.trace.instrument import Instrumentation, Observer
from tests.trace._models import MLP
from tests.trace.conftest import assert_clean


class HandClock:
    """A clock that stands still until told to move (seconds)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> HandClock:
    hand = HandClock()
    for module in (instrument, _plain, _dispatch):
        monkeypatch.setattr(module, "_perf", hand)
    return hand


class SlowOnCall(nn.Module):
    """Moves the clock on the listed call numbers (0 = the first call), else adds one."""

    def __init__(self, clock: HandClock, slow_calls: set[int], seconds: float = 0.3) -> None:
        super().__init__()
        self.clock, self.slow_calls, self.seconds, self.calls = clock, slow_calls, seconds, 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.calls in self.slow_calls:
            self.clock.advance(self.seconds)
        self.calls += 1
        return x + 1


def _model(clock: HandClock, slow_calls: set[int]) -> nn.Module:
    return nn.Sequential(nn.Linear(4, 4), SlowOnCall(clock, slow_calls))


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


def test_the_hand_clock_times_what_the_model_spent(clock: HandClock) -> None:
    # the reference for the tests below: every call takes 0.3 s and nothing else moves
    t = labkit.trace(_model(clock, set(range(100))), torch.randn(2, 4), warmup=0, repeat=3)
    assert t.calls_of("1")[0].fwd_time == pytest.approx(0.3)
    assert t.meta.forward_time == pytest.approx(0.3)
    assert t.calls_of("0")[0].fwd_time == 0  # the Linear took no time on this clock


def test_warm_up_passes_are_not_kept(clock: HandClock) -> None:
    # call 0 is the full recording; then each pass is a hook-free one and a hooked one:
    # calls 1 and 2 the warm-up pair, calls 3 and 4 the kept pair
    warm = labkit.trace(_model(clock, {1, 2}), torch.randn(2, 4), warmup=1, repeat=1)
    cold = labkit.trace(_model(clock, {1, 2}), torch.randn(2, 4), warmup=0, repeat=1)
    assert warm.calls_of("1")[0].fwd_time == 0 and warm.meta.forward_time == 0
    assert cold.calls_of("1")[0].fwd_time == pytest.approx(0.3)
    assert cold.meta.forward_time == pytest.approx(0.3)


def test_the_median_ignores_one_slow_pass(clock: HandClock) -> None:
    # call 3 is the first kept hook-free pass, call 4 its hooked twin
    for slow in (3, 4):
        t = labkit.trace(
            _model(clock, {slow}), torch.randn(2, 4), warmup=1, repeat=5, time_budget=None
        )
        assert t.calls_of("1")[0].fwd_time == 0 and t.meta.forward_time == 0
    # against a slow majority (three passes of five) the median is the slow figure
    t = labkit.trace(
        _model(clock, {4, 6, 8}), torch.randn(2, 4), warmup=1, repeat=5, time_budget=None
    )
    assert t.calls_of("1")[0].fwd_time == pytest.approx(0.3)


def test_the_recorders_own_cost_is_not_in_the_times(clock: HandClock) -> None:
    class Slow(Observer):
        """An observer that costs 20 ms per module call: none of it may show as model time."""

        def call(self, node: Any, module: Any, args: Any, kwargs: Any) -> None:
            clock.advance(0.02)

    model = nn.Sequential(*[nn.Linear(4, 4) for _ in range(5)])
    rec = Recorder(model, mode="step", observers=[Slow()])
    t0 = clock()
    with rec:
        model(torch.randn(2, 4)).sum().backward()
    assert clock() - t0 == pytest.approx(6 * 0.02)  # the observer ran on each of 6 calls
    assert rec.trace is not None and rec.trace.meta.forward_time == 0
    assert all(n.fwd_time == 0 for n in rec.trace.nodes)
    assert_clean(model)


def test_timing_passes_draw_no_random_numbers_the_user_sees() -> None:
    model = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.5))
    torch.manual_seed(0)
    labkit.trace(model, torch.randn(4, 8), repeat=0)
    after_one = torch.rand(3)
    torch.manual_seed(0)
    labkit.trace(model, torch.randn(4, 8), repeat=4)
    assert torch.equal(torch.rand(3), after_one)


class SleepOnCall(nn.Module):
    """Sleeps (real time: the budget reads the wall clock) from call 2 on, else adds one."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.calls >= 2:
            time.sleep(0.05)
        self.calls += 1
        return x + 1


def test_time_budget_stops_repeating_after_three_passes() -> None:
    # each kept pass sleeps 0.05 s at least, so three passes are past a 0.1 s budget
    model = nn.Sequential(nn.Linear(4, 4), SleepOnCall())
    t = labkit.trace(model, torch.randn(2, 4), warmup=0, repeat=20, time_budget=0.1, mode="timing")
    assert "of 3 timing-only passes" in t.meta.timing


def test_bad_counts_are_refused() -> None:
    with pytest.raises(ValueError, match="warmup and repeat must be >= 0"):
        labkit.trace(MLP(), torch.randn(2, 8), repeat=-1)


def test_lost_time_is_what_the_hooks_took() -> None:
    inst = Instrumentation(MLP())
    with inst:
        MLP()(torch.randn(2, 8))  # not the instrumented model: nothing recorded
    assert inst.lost == 0.0 and inst.nodes == []
