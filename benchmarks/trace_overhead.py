"""Cost of recording a training step, side by side with torch.profiler and FlopCounterMode.

Run: ``python -m benchmarks.trace_overhead`` (``make bench`` runs every script).
Targets (issue 3): timing <= 1.10x bare; full <= 1.3x bare and below torch.profiler;
attached-but-disabled <= 1.01x.
"""

from __future__ import annotations

import argparse
import copy
import os
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn
from torch.profiler import ProfilerActivity, profile
from torch.utils.flop_counter import FlopCounterMode

from benchmarks._harness import Bench, report
from labkit.trace import Recorder


class Block(nn.Module):
    def __init__(self, c: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x))))) + x)


def residual_cnn() -> tuple[nn.Module, torch.Tensor]:
    c = 64
    model = nn.Sequential(
        nn.Conv2d(3, c, 3, padding=1), nn.BatchNorm2d(c), nn.ReLU(),
        *[Block(c) for _ in range(4)],
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c, 10),
    )  # fmt: skip
    return model, torch.randn(16, 3, 32, 32)


def transformer() -> tuple[nn.Module, torch.Tensor]:
    layer = nn.TransformerEncoderLayer(256, 4, 1024, batch_first=True)
    model = nn.Sequential(nn.TransformerEncoder(layer, 4, enable_nested_tensor=False))
    return model, torch.randn(16, 64, 256)


def bench_model(
    name: str, model: nn.Module, x: torch.Tensor, rounds: int, timer: Callable[[], float]
) -> None:
    """Each variant steps its own copy of the model, so hooks of one never slow another."""

    def stepper(m: nn.Module):  # type: ignore[no-untyped-def]
        def step() -> None:
            m.zero_grad(set_to_none=True)
            m(x).float().pow(2).mean().backward()

        return step

    def recorded(rec: Recorder):  # type: ignore[no-untyped-def]
        step = stepper(rec.model)

        def run() -> None:
            rec.start()
            try:
                step()
            finally:
                rec.stop()

        return run

    timing = Recorder(copy.deepcopy(model), mode="timing").attach()
    full = Recorder(copy.deepcopy(model), mode="full").attach()
    disabled = Recorder(copy.deepcopy(model), mode="full").attach()
    bare = stepper(model)

    def profiled() -> None:
        acts = [ProfilerActivity.CPU]
        with profile(activities=acts, record_shapes=True, profile_memory=True, with_stack=True):
            bare()

    def flops() -> None:
        with FlopCounterMode(display=False):
            bare()

    bench = Bench(f"trace_overhead_{name}", baseline="bare", warmup=3, rounds=rounds, timer=timer)
    bench.add("bare", bare, anchor="1.00x")
    bench.add("labkit timing", recorded(timing), anchor="<= 1.10x (target)")
    bench.add("labkit full", recorded(full), anchor="<= 1.30x and < torch.profiler (target)")
    bench.add("attached, disabled", stepper(disabled.model), anchor="<= 1.01x (target)")
    bench.add("torch.profiler shapes+memory+stack", profiled, anchor="~1.6x on a CNN (ANCHORS)")
    bench.add("FlopCounterMode", flops, anchor="FLOPs reference")
    try:
        result = bench.run()
    finally:
        for rec in (timing, full, disabled):
            rec.detach()
    report(result)
    calls = sum(1 for n in full.trace.nodes if n.kind == "module") if full.trace else 0
    t_bare = result.row("bare").median_s
    per_call = {
        v: (result.row(v).median_s - t_bare) / max(calls, 1) * 1e6
        for v in ("labkit timing", "labkit full", "attached, disabled")
    }
    print(
        f"\n{name}: {calls} module calls per step; added per module call: "
        + ", ".join(f"{k} {v:+.1f} us" for k, v in per_call.items())
        + "\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument(
        "--threads", type=int, default=1, help="torch intra-op threads (default 1: see --clock)"
    )
    parser.add_argument(
        "--clock",
        choices=("cpu", "wall"),
        default="cpu",
        help="cpu: this thread's CPU time, which other processes' load barely moves "
        "(holds the whole step with 1 thread); wall: perf_counter",
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    timer = time.thread_time if args.clock == "cpu" else time.perf_counter
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, clock={args.clock}, "
        f"load average {load:.1f} on {os.cpu_count()} CPUs\n"
    )
    for name, build in (("residual_cnn", residual_cnn), ("transformer", transformer)):
        model, x = build()
        bench_model(name, model, x, args.rounds, timer)


if __name__ == "__main__":
    main()
