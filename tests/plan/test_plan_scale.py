"""A plan of a big model costs the same per module call as a small one's (issue 41 item 3:
~15 ms a module call; 100,000 calls not done in 20 minutes).

CPU seconds of this process, the best of two runs, compared as a ratio within one run;
``benchmarks/trace_scale.py`` prints the figures per module call beside the model's step.
"""

from __future__ import annotations

import gc
import time

import pytest
import torch
from torch import nn

import labkit


class Chain(nn.Module):
    """``n`` tiny Linear modules called in a Python loop: labkit's cost is all there is."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(2, 2) for _ in range(n))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return x


@pytest.mark.slow
def test_a_plan_costs_the_same_per_module_call_at_4x_the_modules() -> None:
    x = torch.randn(4, 2)
    labkit.plan(Chain(3), x)  # the first fake mode's one-time costs before the clock
    per_call = {}
    for n in (150, 600):
        model = Chain(n)
        best = float("inf")
        for _ in range(2):
            gc.collect()
            start = time.process_time()
            plan = labkit.plan(model, x)
            best = min(best, time.process_time() - start)
        assert sum(1 for node in plan.trace.nodes if node.kind == "module") == n + 1
        per_call[n] = best / n
    # linear: the same per call (fixed costs make the small model's dearer); quadratic
    # work would make the big one's 4x
    assert per_call[600] / per_call[150] < 1.6, per_call
