"""Step time of a loop watched by ``labkit.watch`` over the same loop unwatched, on CPU.

Run: ``python -m benchmarks.watch_overhead`` (``--quick`` for a short run).
Target (issue 36): watched / unwatched <= 1.02x at the default settings (guard on),
dashboard off and on, for a small MLP (a step of about a millisecond) and a tiny nanoGPT;
the watched loop with ``guard=False`` shows what the guard's own checks cost.

Each variant has its own copy of the model and optimizer (same seed) and its watch stays
open over the whole run; one sample is ``--steps`` consecutive optimizer steps of that
variant (``zero_grad``, forward, loss, backward, ``step`` and, when watched,
``run.step(loss=loss)``). Variants run interleaved (A B C A B C ..., after a warm-up:
:func:`labkit._interleave.interleaved`), and each ratio is the median over rounds of the
watched sample over the unwatched sample, with a paired bootstrap 95% interval
(:func:`labkit._interleave.ratio_interval`). Two clocks: wall time (``perf_counter``)
and the training thread's CPU time (``thread_time``: blind to time spent waiting for a
core, so the steadier one on a shared machine). ``--threads`` sets torch's intra-op
threads (default 1). The dashboard variant builds the live Dashboard widget and pushes
every event to it (in a script nothing displays it; its throttle still runs). The last
variant is the unwatched loop again, on its own copy: its ratio is the noise floor of the
machine and of the position in the round (a shared machine moves it by a few percent).
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

import labkit
from labkit._interleave import interleaved, ratio_interval

VARIANTS = (
    "unwatched",
    "watched (dashboard off)",
    "watched (dashboard on)",
    "watched (guard off)",
    "unwatched again (A/A control)",
)


def mlp_case() -> tuple[Callable[[], nn.Module], Callable[[nn.Module], Any]]:
    x = torch.randn(64, 256)
    y = torch.randint(0, 10, (64,))

    def make() -> nn.Module:
        torch.manual_seed(0)
        return nn.Sequential(
            nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10)
        )

    return make, lambda m: F.cross_entropy(m(x), y)


def gpt_case() -> tuple[Callable[[], nn.Module], Callable[[nn.Module], Any]]:
    from tests.realworld.models import GPT, GPTConfig

    x = torch.randint(0, 128, (8, 32))
    y = torch.randint(0, 128, (8, 32))

    def make() -> nn.Module:
        torch.manual_seed(0)
        return GPT(GPTConfig(block_size=32, vocab_size=128, n_layer=2, n_head=2, n_embd=64))

    return make, lambda m: m(x, y)[1]


def measure(
    name: str, case: Any, *, steps: int, warmup: int, rounds: int, root: Path
) -> dict[str, Any]:
    make, loss_of = case()
    setups = {}
    for k, v in enumerate(VARIANTS):
        model = make()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        run = None
        if v.startswith("watched"):
            run = labkit.watch(
                model,
                opt,
                logdir=root / f"{name}-{k}",
                dashboard="dashboard on" in v,
                guard="guard off" not in v,
            )
        setups[v] = (model, opt, run)
    cpu: dict[str, list[float]] = {v: [] for v in VARIANTS}

    def sample(v: str, i: int, timed: bool) -> float:
        model, opt, run = setups[v]
        t0, c0 = time.perf_counter(), time.thread_time()
        for _ in range(steps):
            opt.zero_grad(set_to_none=True)
            loss = loss_of(model)
            loss.backward()
            opt.step()
            if run is not None:
                run.step(loss=loss)
        wall, thread = time.perf_counter() - t0, time.thread_time() - c0
        if timed:
            cpu[v].append(thread / steps)
        return wall / steps

    wall = dict(
        zip(VARIANTS, interleaved(VARIANTS, sample, warmup=warmup, rounds=rounds), strict=True)
    )
    for _, _, run in setups.values():
        if run is not None:
            run.close()
    out: dict[str, Any] = {"step_ms": 1e3 * sorted(wall["unwatched"])[len(wall["unwatched"]) // 2]}
    for v in VARIANTS[1:]:
        out[v] = {
            "wall": ratio_interval(wall[v], wall["unwatched"]),
            "cpu": ratio_interval(cpu[v], cpu["unwatched"]),
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="a short run (fewer rounds)")
    ap.add_argument("--steps", type=int, default=50, help="optimizer steps per sample")
    ap.add_argument("--rounds", type=int, default=None, help="timed rounds (default 30)")
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    rounds = args.rounds or (8 if args.quick else 30)
    warmup = 2 if args.quick else 4
    print(
        f"# labkit.watch overhead: {platform.processor() or platform.machine()}, "
        f"torch {torch.__version__}, {args.threads} thread(s), {args.steps} steps a sample, "
        f"{rounds} rounds (A B C D E interleaved), paired ratios with bootstrap 95% intervals, "
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    )
    print("| model | step (unwatched) | variant | wall ratio | CPU ratio | target |")
    print("| --- | --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory() as tmp:
        for name, case in (("mlp", mlp_case), ("nanogpt-tiny", gpt_case)):
            res = measure(
                name, case, steps=args.steps, warmup=warmup, rounds=rounds, root=Path(tmp)
            )
            for v in VARIANTS[1:]:
                w, c = res[v]["wall"], res[v]["cpu"]
                target = "<= 1.02x" if v.startswith("watched") else "1 (noise)"
                print(
                    f"| {name} | {res['step_ms']:.2f} ms | {v} | {w.estimate:.3f}x "
                    f"[{w.low:.3f}, {w.high:.3f}] | {c.estimate:.3f}x [{c.low:.3f}, "
                    f"{c.high:.3f}] | {target} |"
                )


if __name__ == "__main__":
    main()
