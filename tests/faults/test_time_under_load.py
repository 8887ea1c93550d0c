"""Fault row: a module that ran never reads a time of 0, on a machine busy with other work.

Under load (``make test`` on a loaded machine, a busy laptop) the estimate of what labkit's
hooks cost per call grew with the CPU's stalls, and the subtraction took real layers to
exactly 0.0 (``GATv2Conv``, a ResCNN block). Here one busy-loop process per core runs while
models are traced; every module call that ran has a forward time above zero, and every
module with a backward has a backward time above zero. The busy processes are killed in
``finally`` however the test ends.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import labkit

pytestmark = pytest.mark.slow


@pytest.fixture
def busy_machine() -> Iterator[int]:
    """One busy-loop process per core while the test runs (a fresh interpreter each: no
    fork of this multi-threaded process), killed however the test ends."""
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for _ in range(os.cpu_count() or 1):
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-c", "while True: pass"], stdin=subprocess.DEVNULL
                )
            )
        yield len(procs)
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait(timeout=10)


class _Block(nn.Module):
    def __init__(self, c: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(x + self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x))))))


class _ResCNN(nn.Module):
    def __init__(self, c: int = 8) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, c, 3, padding=1)
        self.blocks = nn.Sequential(*[_Block(c) for _ in range(3)])
        self.head = nn.Linear(c, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.blocks(self.stem(x))
        return self.head(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def _nested() -> nn.Module:
    def mlp() -> nn.Module:
        return nn.Sequential(nn.Linear(16, 16), nn.GELU(), nn.Dropout(0.0), nn.Linear(16, 16))

    return nn.Sequential(*[nn.Sequential(nn.LayerNorm(16), mlp(), nn.Identity()) for _ in range(4)])


MODELS = {
    "rescnn": (_ResCNN, (2, 3, 8, 8)),
    "nested": (_nested, (4, 16)),
}


def _check(t: labkit.Trace, model: nn.Module) -> None:
    calls = [n for n in t.nodes if n.kind == "module"]
    zero = [(n.module, n.type) for n in calls if n.fwd_time <= 0]
    assert not zero, f"forward time 0 under load: {zero}; {t.meta.timing}"
    modules = dict(model.named_modules())
    has_bwd = [n for n in calls if any(True for _ in modules[n.module or ""].parameters())]
    zero = [(n.module, n.type) for n in has_bwd if n.bwd_time <= 0]
    assert has_bwd and not zero, f"backward time 0 under load: {zero}; {t.meta.timing}"
    floored = set(t.meta.fwd_floored) | set(t.meta.bwd_floored)
    assert floored <= {n.key for n in calls}
    if floored:  # a figure at its floor is shown as a bound
        assert "at their floor" in t.meta.timing and "lower bound" in t.summary()


@pytest.mark.parametrize("mode", ["full", "timing"])
@pytest.mark.parametrize("name", list(MODELS))
def test_no_module_that_ran_reads_zero_under_load(busy_machine, name, mode) -> None:
    build, shape = MODELS[name]
    torch.manual_seed(0)
    model, x = build(), torch.randn(*shape)
    _check(labkit.trace(model, x, mode=mode, warmup=1, repeat=5, time_budget=1.0), model)
