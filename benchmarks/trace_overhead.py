"""Cost of recording a training step, side by side with torch.profiler and FlopCounterMode,
and whether the forward time a default ``labkit.trace`` shows is the model's.

Run: ``python -m benchmarks.trace_overhead`` (``make bench`` runs every script);
``--device cuda`` on a GPU (wall clock, one synchronize per step).
Targets (issue 14): CPU timing <= 1.05x bare, full <= 1.25x and below torch.profiler;
CUDA timing <= 1.10x, full <= 1.3x; attached-but-disabled <= 1.01x; the shown forward
time of a default trace <= 1.10x the untraced forward (40-block MLP-mixers, one of
issue 27's size, and a transformer), with a module's children plus its self time within
10% of its own time (issue 27).
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

import labkit
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
        nn.Conv2d(3, c, 3, padding=1),
        nn.BatchNorm2d(c),
        nn.ReLU(),
        *[Block(c) for _ in range(4)],
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(c, 10),
    )
    return model, torch.randn(16, 3, 32, 32)


def transformer() -> tuple[nn.Module, torch.Tensor]:
    layer = nn.TransformerEncoderLayer(256, 4, 1024, batch_first=True)
    model = nn.Sequential(nn.TransformerEncoder(layer, 4, enable_nested_tensor=False))
    return model, torch.randn(16, 64, 256)


class MixerBlock(nn.Module):
    def __init__(self, tokens: int = 32, c: int = 64) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(c)
        self.tokens = nn.Sequential(
            nn.Linear(tokens, 2 * tokens), nn.GELU(), nn.Linear(2 * tokens, tokens)
        )
        self.norm2 = nn.LayerNorm(c)
        self.channels = nn.Sequential(nn.Linear(c, 4 * c), nn.GELU(), nn.Linear(4 * c, c))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.tokens(self.norm1(x).transpose(1, 2)).transpose(1, 2)
        return x + self.channels(self.norm2(x))


def mixer() -> tuple[nn.Module, torch.Tensor]:
    """40 blocks, 441 module calls per forward: the model the issue measured (7.2x before)."""
    return nn.Sequential(*[MixerBlock() for _ in range(40)]), torch.randn(16, 32, 64)


def _sync(x: torch.Tensor) -> None:
    if x.is_cuda:
        torch.cuda.synchronize()


def bench_model(
    name: str, model: nn.Module, x: torch.Tensor, rounds: int, timer: Callable[[], float]
) -> None:
    """Each variant steps its own copy of the model, so hooks of one never slow another."""

    def stepper(m: nn.Module):  # type: ignore[no-untyped-def]
        def step() -> None:
            m.zero_grad(set_to_none=True)
            m(x).float().pow(2).mean().backward()
            _sync(x)

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
    passes = Recorder(copy.deepcopy(model), mode="step").attach()
    full = Recorder(copy.deepcopy(model), mode="full").attach()
    disabled = Recorder(copy.deepcopy(model), mode="full").attach()
    bare = stepper(model)

    def profiled() -> None:
        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if x.is_cuda else [])
        with profile(activities=acts, record_shapes=True, profile_memory=True, with_stack=True):
            bare()

    def flops() -> None:
        with FlopCounterMode(display=False):
            bare()

    bench = Bench(f"trace_overhead_{name}", baseline="bare", warmup=3, rounds=rounds, timer=timer)
    bench.add("bare", bare, anchor="1.00x")
    cuda = x.is_cuda
    bench.add(
        "labkit timing", recorded(timing), anchor=f"<= {1.10 if cuda else 1.05:.2f}x (target)"
    )
    bench.add(
        "labkit timing pass (what labkit.trace repeats)",
        recorded(passes),
        anchor=f"<= {1.10 if cuda else 1.05:.2f}x (target)",
    )
    bench.add(
        "labkit full",
        recorded(full),
        anchor=f"<= {1.30 if cuda else 1.25:.2f}x and < torch.profiler (target)",
    )
    bench.add("attached, disabled", stepper(disabled.model), anchor="<= 1.01x (target)")
    bench.add("torch.profiler shapes+memory+stack", profiled, anchor="~1.6x on a CNN (ANCHORS)")
    bench.add("FlopCounterMode", flops, anchor="FLOPs reference")
    try:
        result = bench.run()
    finally:
        for rec in (timing, passes, full, disabled):
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
    parser.add_argument("--device", default="cpu", help="cpu or cuda (wall clock on cuda)")
    parser.add_argument(
        "--models",
        default="residual_cnn,transformer,shown_forward,observer_cost",
        help="comma-separated: residual_cnn, transformer, shown_forward, observer_cost",
    )
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
    parser.add_argument(
        "--shown",
        default="mixer,small_mixer,transformer",
        help="models of shown_forward, comma-separated: mixer, small_mixer, transformer",
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: no CUDA device is visible")
    if device.type == "cuda":
        args.clock = "wall"  # GPU work does not run on this thread's CPU clock
    timer = time.thread_time if args.clock == "cpu" else time.perf_counter
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, clock={args.clock}, "
        f"load average {load:.1f} on {os.cpu_count()} CPUs\n"
    )
    names = [n.strip() for n in args.models.split(",") if n.strip()]
    for name, build in (("residual_cnn", residual_cnn), ("transformer", transformer)):
        if name in names:
            model, x = build()
            bench_model(name, model.to(device), x.to(device), args.rounds, timer)
    if "shown_forward" in names:
        # labkit times with the wall clock, so the untraced reference does too
        for key, name, build in (
            ("mixer", "40-block MLP-mixer, tokens=32, batch 16", mixer),
            (
                "small_mixer",
                "40-block MLP-mixer, tokens=16, channels=64, batch 32 (issue 27)",
                small_call_mixer,
            ),
            ("transformer", "4-layer transformer encoder (d=256, batch 16x64)", transformer),
        ):
            if key not in args.shown.split(","):
                continue
            model, x = build()
            shown_forward(
                name, model.to(device), x.to(device), max(args.rounds // 3, 3), time.perf_counter
            )
    if "observer_cost" in names:
        observer_cost(device, args.rounds)


def observer_cost(device: torch.device, rounds: int, spin: float = 0.002) -> None:
    """An observer that spends ``spin`` seconds per module call: the forward a recording
    shows against the untraced forward (labkit's own time must not show), with the wall
    time of the recorded forward for scale. Moved here from tests/trace/test_timing.py,
    which checks the same subtraction by construction on a hand-set clock.
    """
    import statistics

    from labkit.trace.instrument import Observer

    class Spin(Observer):
        def call(self, node: object, module: object, args: object, kwargs: object) -> None:
            end = time.perf_counter() + spin
            while time.perf_counter() < end:
                pass

    model = nn.Sequential(*[nn.Linear(512, 512) for _ in range(8)]).to(device)
    x = torch.randn(64, 512, device=device)
    shown, wall, bare = [], [], []
    for _ in range(rounds):
        t0 = time.perf_counter()
        model(x)
        _sync(x)
        bare.append(time.perf_counter() - t0)
        rec = Recorder(model, mode="step", observers=[Spin()])
        with rec:
            t0 = time.perf_counter()
            model(x)
            _sync(x)
            wall.append(time.perf_counter() - t0)
        assert rec.trace is not None
        shown.append(rec.trace.meta.forward_time)
    med = statistics.median
    calls = 1 + len(model)
    print(
        f"### observer_cost: {calls} module calls, {spin * 1e3:.0f} ms of observer per call, "
        f"{device}\n\n| figure | value | target |\n| --- | ---: | --- |\n"
        f"| untraced forward | {med(bare) * 1e3:.2f} ms | |\n"
        f"| recorded forward, wall | {med(wall) * 1e3:.2f} ms ({med(wall) / med(bare):.1f}x) | |\n"
        f"| forward shown by the recording | {med(shown) * 1e3:.2f} ms | |\n"
        f"| shown / untraced forward (median of {rounds}) | {med(shown) / med(bare):.2f}x | "
        f"near 1x, far below the wall ratio |\n"
    )


def small_call_mixer() -> tuple[nn.Module, torch.Tensor]:
    """Issue 27's model: 40 blocks at tokens=16, channels=64, batch 32 (~20-35 us calls)."""
    from tests.realworld.models import Mixer

    return Mixer(40, 16, 64), torch.randn(32, 16, 64)


def _adds_up(t: labkit.Trace) -> tuple[float, float]:
    """Over module calls with module children: (median, worst) of
    ``(children + self) / own`` forward time, self being ``max(0, own - children)``."""
    import statistics

    kids: dict[int, float] = {}
    for n in t.nodes:
        if n.kind == "module" and n.parent is not None:
            kids[n.parent] = kids.get(n.parent, 0.0) + n.fwd_time
    ratios = [
        max(t.nodes[i].fwd_time, k) / t.nodes[i].fwd_time
        for i, k in kids.items()
        if t.nodes[i].fwd_time > 0
    ]
    return statistics.median(ratios), max(ratios)


def shown_forward(
    name: str, model: nn.Module, x: torch.Tensor, rounds: int, timer: Callable[[], float]
) -> None:
    """The forward and backward a default ``labkit.trace`` shows against the untraced ones.

    A B A B ...: each round times 5 untraced steps (median forward, median backward) and
    runs one default trace; the ratio is taken per round, then its median over rounds.
    Also: whether a module's children plus its self time add up to its own time.
    """
    import statistics

    def untraced() -> tuple[float, float]:
        fs, bs = [], []
        for _ in range(5):
            model.zero_grad(set_to_none=True)
            t0 = timer()
            out = model(x)
            _sync(x)
            t1 = timer()
            out.float().sum().backward()
            _sync(x)
            fs.append(t1 - t0)
            bs.append(timer() - t1)
        model.zero_grad(set_to_none=True)
        return statistics.median(fs), statistics.median(bs)

    untraced()  # warm-up
    fr, br, shown_f, real_f, adds, worst = [], [], [], [], [], []
    med = statistics.median
    for _ in range(rounds):
        f, b = untraced()
        t = labkit.trace(model, x, loss=lambda out: out.float().sum())
        real_f.append(f)
        shown_f.append(t.meta.forward_time)
        fr.append(t.meta.forward_time / f)
        br.append(t.calls_of("")[0].bwd_time / b)
        a, w = _adds_up(t)
        adds.append(a)
        worst.append(w)
    calls = sum(1 for n in t.nodes if n.kind == "module")
    cost = t.meta.hook_cost
    print(
        f"### shown_forward: {name}, {calls} module calls, {x.device}\n\n"
        f"| figure | value | target |\n| --- | ---: | --- |\n"
        f"| untraced forward (median of 5, per round) | {med(real_f) * 1e3:.2f} ms | |\n"
        f"| forward shown by labkit.trace (default) | {med(shown_f) * 1e3:.2f} ms | |\n"
        f"| shown / untraced forward (median of {rounds} paired rounds) | "
        f"{med(fr):.2f}x (range {min(fr):.2f}-{max(fr):.2f}) | <= 1.10x |\n"
        f"| shown / untraced root backward | {med(br):.2f}x (range {min(br):.2f}-{max(br):.2f})"
        f" | |\n"
        f"| (children + self) / own forward, median over calls | {med(adds):.3f} | <= 1.10 |\n"
        f"| (children + self) / own forward, worst call | {med(worst):.3f} | <= 1.10 |\n"
        f"| hook cost subtracted per call / per call inside / per segment | "
        + " / ".join(f"{cost.get(k, 0.0) * 1e6:.2f} us" for k in ("call", "child", "segment"))
        + " | |\n\n"
        f"timing: {t.meta.timing}\n"
    )


if __name__ == "__main__":
    main()
