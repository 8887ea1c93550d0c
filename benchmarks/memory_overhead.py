"""Cost of recording the memory of a training step, side by side with torch.profiler.

Run: ``python -m benchmarks.memory_overhead [--device cuda]`` (``make bench`` runs every script).
Each round times one training step (zero_grad, forward, backward, ``optimizer.step``) of
each variant, interleaved: bare, ``labkit.memory`` (timeline, attribution, and on CUDA
the allocator's figures), ``torch.profiler.profile(profile_memory=True)`` (results
collected, as a user would), and a full-mode ``labkit.trace`` recorder (graph, FLOPs
and memory together) for reference. Target (issue 5): labkit.memory below the profiler.
"""

from __future__ import annotations

import argparse
import copy
from collections.abc import Callable

import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile

import labkit
from benchmarks._harness import Bench, report
from benchmarks.trace_overhead import residual_cnn, transformer
from labkit.trace import Recorder


def _loss(out: torch.Tensor) -> torch.Tensor:
    return out.float().pow(2).mean()


def bench_model(name: str, model: nn.Module, x: torch.Tensor, rounds: int) -> None:
    """Each variant trains its own copy of the model, so hooks of one never slow another."""
    cuda = x.is_cuda

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    def copy_with_opt() -> tuple[nn.Module, torch.optim.Optimizer]:
        m = copy.deepcopy(model)
        return m, torch.optim.SGD(m.parameters(), lr=1e-3, momentum=0.9)

    def stepper(m: nn.Module, opt: torch.optim.Optimizer) -> Callable[[], None]:
        def step() -> None:
            opt.zero_grad(set_to_none=True)
            _loss(m(x)).backward()
            opt.step()
            sync()

        return step

    bare = stepper(*copy_with_opt())

    m_mem, opt_mem = copy_with_opt()

    def recorded() -> None:
        opt_mem.zero_grad(set_to_none=True)
        labkit.memory(m_mem, x, loss=_loss, optimizer=opt_mem)
        sync()

    prof_step = stepper(*copy_with_opt())
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])

    def profiled() -> None:
        with profile(activities=acts, profile_memory=True) as prof:
            prof_step()
        prof.key_averages()  # collect the results, as a user reading them would

    m_full, opt_full = copy_with_opt()
    full = Recorder(m_full, mode="full").attach()
    full_step = stepper(m_full, opt_full)

    def full_trace() -> None:
        full.start()
        try:
            full_step()
        finally:
            full.stop()

    bench = Bench(f"memory_overhead_{name}", baseline="bare", warmup=2, rounds=rounds)
    bench.add("bare", bare, anchor="1.00x")
    bench.add("labkit.memory", recorded, anchor="target: below torch.profiler")
    bench.add(
        "torch.profiler(profile_memory)",
        profiled,
        anchor="~1.6x CNN step with shapes+memory+stacks (ANCHORS)",
    )
    bench.add("labkit.trace full (graph+FLOPs+memory)", full_trace, anchor="reference")
    try:
        result = bench.run()
    finally:
        full.detach()
    result.meta.update(
        {
            "device": str(x.device),
            "model": name,
            "torch": torch.__version__,
            "threads": torch.get_num_threads(),
        }
    )
    report(result)
    mem = result.row("labkit.memory").ratio
    prof = result.row("torch.profiler(profile_memory)").ratio
    verdict = "below" if mem < prof else "NOT below"
    print(f"labkit.memory {mem:.2f}x vs torch.profiler {prof:.2f}x: {verdict} the profiler\n")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--models", default="cnn,transformer")
    args = p.parse_args()
    dev = torch.device(args.device)
    torch.manual_seed(0)
    makers = {"cnn": residual_cnn, "transformer": transformer}
    for name in args.models.split(","):
        model, x = makers[name]()
        if dev.type == "cuda":  # a bigger batch so the GPU has work to hide host overhead behind
            x = torch.cat([x] * 8)
        bench_model(f"{name}_{dev.type}", model.to(dev), x.to(dev), args.rounds)


if __name__ == "__main__":
    main()
