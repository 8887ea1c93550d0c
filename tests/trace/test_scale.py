"""A trace of a big model costs the same per module call as a small one's (issue 41 item 3:
~6.6 ms a module call, 100,000 calls not done in 20 minutes; issue 37 item 3).

Times are CPU seconds of this process (what other processes do to the wall clock does not
count), the best of two runs, compared as ratios within one run;
``benchmarks/trace_scale.py`` prints the figures per module call beside the model's own
step. The memory tracker's peak breakdown is checked for work that grows with the model on
every new peak (a copy of every module's figures: N^2 over a chain of N modules), and for
the same figures as copying it eagerly.
"""

from __future__ import annotations

import gc
import sys
import time
from collections.abc import Callable

import pytest
import torch
from torch import nn

import labkit
from labkit.memory.tracker import MemoryTracker
from labkit.trace.step import Step, record_step


class Chain(nn.Module):
    """``n`` tiny Linear modules called in a Python loop: labkit's cost is all there is."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(2, 2) for _ in range(n))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return x


def _cpu(fn: Callable[[], object], runs: int = 2) -> float:
    best = float("inf")
    for _ in range(runs):
        gc.collect()
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return best


@pytest.mark.slow
def test_a_full_recording_costs_the_same_per_module_call_at_4x_the_modules() -> None:
    x = torch.randn(4, 2)
    labkit.trace(Chain(3), x, repeat=0)  # one-time costs (imports) before the clock
    per_call = {}
    for n in (500, 2000):
        model = Chain(n)
        per_call[n] = _cpu(lambda m=model: labkit.trace(m, x, repeat=0)) / n
    # linear: the same per call (fixed costs make the small model's dearer); quadratic
    # work would make the big one's 4x
    assert per_call[2000] / per_call[500] < 1.6, per_call


class _Eager(MemoryTracker):
    """The tracker as it was: the peak's breakdown copied when the state leaves a peak."""

    def _follow(self) -> None:
        self._snapshot()


def _record(
    tracker_cls: type[MemoryTracker], model: nn.Module, x: torch.Tensor, opt: bool
) -> MemoryTracker:
    optimizer = torch.optim.Adam(model.parameters()) if opt else None
    tracker = tracker_cls(model, optimizers=(optimizer,) if optimizer is not None else ())
    record_step(Step(model, (x,), optimizer=optimizer), mode="full", memory=tracker)
    return tracker


def _peak(t: MemoryTracker) -> tuple[object, ...]:
    nonzero = lambda d: {k: v for k, v in d.items() if v}  # noqa: E731
    return t.peak, list(t.peak_cat), nonzero(t.peak_mod), nonzero(t.peak_fp32), t.peak_module


def _chain() -> tuple[nn.Module, torch.Tensor]:
    return Chain(40), torch.randn(4, 2)


def _conv() -> tuple[nn.Module, torch.Tensor]:
    model = nn.Sequential(
        nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 6 * 6, 3)
    )
    return model, torch.randn(4, 3, 8, 8)


def _transformer() -> tuple[nn.Module, torch.Tensor]:
    layer = nn.TransformerEncoderLayer(16, 2, 32, batch_first=True)
    return nn.TransformerEncoder(layer, 2, enable_nested_tensor=False), torch.randn(2, 5, 16)


@pytest.mark.parametrize("opt", [False, True])
@pytest.mark.parametrize("make", [_chain, _conv, _transformer])
def test_the_peak_breakdown_is_the_one_copied_eagerly(
    make: Callable[[], tuple[nn.Module, torch.Tensor]], opt: bool
) -> None:
    torch.manual_seed(0)
    model, x = make()
    journaled = _peak(_record(MemoryTracker, model, x, opt))
    eager = _peak(_record(_Eager, model, x, opt))
    assert journaled == eager
    assert journaled[0] > 0


class _Counting(MemoryTracker):
    copies = 0

    def _snapshot(self) -> None:
        type(self).copies += 1
        super()._snapshot()


def test_the_peak_breakdown_is_not_copied_per_module_call() -> None:
    x = torch.randn(4, 2)
    copies = {}
    for n in (50, 400):
        _Counting.copies = 0
        _record(_Counting, Chain(n), x, opt=False)
        copies[n] = _Counting.copies
    # each Linear's output raises the peak; a copy per peak was 8x the copies at 8x the calls
    assert copies[400] <= copies[50] + 2, copies


@pytest.mark.skipif(sys.platform == "win32", reason="no RLIMIT_STACK on Windows")
def test_a_recording_raises_the_stack_limit_and_puts_it_back() -> None:
    # freeing the output of 100,000 hooked Linear calls recursed past Linux's 8 MiB stack
    import resource

    from labkit.trace._dispatch import STACK_BYTES
    from labkit.trace.instrument import Instrumentation, Observer

    seen: list[int] = []

    class Stack(Observer):
        def start(self, inst: Instrumentation) -> None:
            seen.append(resource.getrlimit(resource.RLIMIT_STACK)[0])

    before = resource.getrlimit(resource.RLIMIT_STACK)
    record_step(Step(Chain(3), (torch.randn(4, 2),)), mode="timing", observers=[Stack()])
    assert resource.getrlimit(resource.RLIMIT_STACK) == before
    soft, hard = before
    want = STACK_BYTES if hard == resource.RLIM_INFINITY else min(hard, STACK_BYTES)
    assert seen == [max(soft, want) if soft != resource.RLIM_INFINITY else soft]
