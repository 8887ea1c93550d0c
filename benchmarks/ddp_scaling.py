"""DDP on this machine: 1 vs 2 CPU processes (gloo), and the cost of the per-rank timing.

Run: ``python -m benchmarks.ddp_scaling`` (``--quick`` for a short run).

Three figures (issue 22):

- **Scaling**: ``lab.scaling(devices=[1, 2])`` on an MLP (784-256-256-10, batch 64 per
  process, one intra-op thread per process): throughput, efficiency against one process
  and where the step goes (all-reduce wait, buckets in flight, data wait). Anchor:
  practitioners report DDP's ring all-reduce keeping multi-GPU scaling efficiency above
  90% on BERT (GPUs with their own memory and links); here two processes share two CPU
  cores, memory bandwidth and a loopback gloo ring, so the figure says where the rest goes.
- **Overhead of the recording**: 2-process fits with ``rank_stats`` on and off,
  interleaved (A B B A ...); each sample is rank 0's median time between step starts after
  warm-up (Trainer start-up not counted), on the wall clock and on the training thread's
  CPU clock (blind to waiting for a core on a busy machine). Target: on / off <= 1.02
  (paired: the median over rounds of the ratio within one round; best: the fastest round
  of each, since contention from other tenants only adds time).
- **The hook alone**: the thread CPU of forward + backward under DDP with the built-in
  all-reduce and with labkit's timed hook, interleaved in the same two processes.
"""

from __future__ import annotations

import argparse
import itertools
import json
import socket
import statistics
import tempfile
import time
from pathlib import Path

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import TensorDataset

from benchmarks._harness import BenchResult, Row, report
from labkit.train import Lab

BS = 64
SKIP = 3  # warm-up steps dropped from each overhead sample
CLOCKS = ("wall", "thread CPU")


def mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10)
    )


def data(n: int) -> TensorDataset:
    g = torch.Generator().manual_seed(0)
    return TensorDataset(torch.randn(n, 784, generator=g), torch.randint(0, 10, (n,), generator=g))


class StepClock(pl.Callback):
    """Rank 0's step starts on two clocks, written to ``path`` at the end of the fit."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.starts: list[tuple[float, float]] = []

    def on_train_batch_start(self, trainer: pl.Trainer, *args: object) -> None:
        self.starts.append((time.perf_counter(), time.thread_time()))

    def on_train_end(self, trainer: pl.Trainer, *args: object) -> None:
        if trainer.is_global_zero:
            self.path.write_text(json.dumps(self.starts))


def _gaps(path: Path) -> dict[str, float]:
    starts = json.loads(path.read_text())[SKIP:]
    return {
        clock: statistics.median(b[i] - a[i] for a, b in itertools.pairwise(starts))
        for i, clock in enumerate(CLOCKS)
    }


def overhead(steps: int, rounds: int, root: Path) -> dict[str, dict[str, list[float]]]:
    """Interleaved 2-process fits, rank_stats on and off: rank 0's median step, per clock."""
    lab = Lab(mlp(), data(2 * BS * steps), loss=F.cross_entropy, batch_size=BS, logdir=root)
    samples: dict[str, dict[str, list[float]]] = {c: {"off": [], "on": []} for c in CLOCKS}
    for i in range(rounds):
        for name in ("off", "on") if i % 2 == 0 else ("on", "off"):
            clock = root / f"clock_{name}_{i}.json"
            run = lab.fit(
                max_steps=steps,
                devices=2,
                accelerator="cpu",
                dashboard=False,
                dry_run=False,
                limit_val_batches=0,
                rank_stats=name == "on",
                logdir=str(root / f"{name}_{i}"),
                trainer_kwargs={"enable_progress_bar": False, "callbacks": [StepClock(clock)]},
            )
            assert bool(run.ranks) == (name == "on"), "rank_stats did not take effect"
            for c, v in _gaps(clock).items():
                samples[c][name].append(v)
    return samples


def _hook_steps(steps: int) -> dict[str, float]:
    """Median thread CPU of forward + backward: DDP's built-in all-reduce vs the hook."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    from labkit.train._ranks import RankStats

    stats = RankStats(lambda e: None)
    models = {"built-in": DDP(mlp()), "labkit hook": DDP(mlp())}
    models["labkit hook"].register_comm_hook(None, stats._hook)
    x, y = torch.randn(BS, 784), torch.randint(0, 10, (BS,))
    cpu: dict[str, list[float]] = {k: [] for k in models}
    for i in range(steps):
        for name in list(models)[:: 1 if i % 2 else -1]:  # A B B A ...
            t0 = time.thread_time()
            F.cross_entropy(models[name](x), y).backward()
            cpu[name].append(time.thread_time() - t0)
            models[name].zero_grad()
            stats._launches.clear()
            stats._done.clear()
    return {k: statistics.median(v[2:]) for k, v in cpu.items()}


def _hook_worker(rank: int, port: int, steps: int, out: str) -> None:
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    try:
        cpu = _hook_steps(steps)  # the DDP models are gone before the group is destroyed
        if rank == 0:
            Path(out).write_text(json.dumps(cpu))
        dist.barrier()
    finally:
        dist.destroy_process_group()


def hook_cost(steps: int, root: Path) -> dict[str, float]:
    """Rank 0's median thread CPU of forward + backward: built-in all-reduce vs the hook."""
    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = root / "hook_cost.json"
    mp.start_processes(_hook_worker, args=(port, steps, str(out)), nprocs=2, start_method="fork")
    return json.loads(out.read_text())


def bench(
    *, steps: int, rounds: int, scaling_steps: int, hook_steps: int = 200
) -> tuple[BenchResult, object]:
    threads = torch.get_num_threads()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        lab = Lab(
            mlp(),
            data(2 * BS * scaling_steps),
            loss=F.cross_entropy,
            batch_size=BS,
            logdir=root / "scaling",
        )
        scale = lab.scaling(devices=[1, 2], steps=scaling_steps, threads=1)
        (root / "overhead").mkdir()
        torch.set_num_threads(1)  # as lab.scaling: one intra-op thread per process
        try:
            samples = overhead(steps, rounds, root / "overhead")
        finally:
            torch.set_num_threads(threads)
        hook = hook_cost(hook_steps, root)
    rows, ratios = [], {}
    for clock, by in samples.items():
        off = statistics.median(by["off"])
        for k, v in by.items():
            rows.append(
                Row(
                    name=f"2 processes, rank_stats {k} ({clock})",
                    median_s=statistics.median(v),
                    min_s=min(v),
                    max_s=max(v),
                    ratio=statistics.median(v) / off,
                    samples=len(v),
                    anchor="1.00x" if k == "off" else "<= 1.02x",
                )
            )
        pairs = [a / b for a, b in zip(by["on"], by["off"], strict=True)]
        ratios[clock] = {"paired": statistics.median(pairs), "best": min(by["on"]) / min(by["off"])}
    two = scale.point(2)  # type: ignore[attr-defined]
    meta = {
        "on_off": ratios,
        "hook_cost_thread_cpu_s": hook,
        "steps": steps,
        "rounds": rounds,
        "scaling": scale.to_dict(),  # type: ignore[attr-defined]
        "efficiency_2": two.efficiency,
        "comm_share_2": two.comm_share,
        "anchor": "DDP ring all-reduce > 90% scaling efficiency on BERT (multi-GPU)",
    }
    result = BenchResult("ddp_scaling", baseline=rows[0].name, rows=tuple(rows), meta=meta)
    return result, scale


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="fewer steps and rounds")
    args = ap.parse_args()
    steps, rounds, scaling_steps, hook_steps = (20, 3, 20, 60) if args.quick else (60, 8, 80, 300)
    result, scale = bench(
        steps=steps, rounds=rounds, scaling_steps=scaling_steps, hook_steps=hook_steps
    )
    print(scale.summary())  # type: ignore[attr-defined]
    print(
        f"anchor: {result.meta['anchor']}; here: {result.meta['efficiency_2']:.0%} with "
        f"{result.meta['comm_share_2']:.0%} of the step waiting in the all-reduce"
    )
    report(result)
    for clock, r in result.meta["on_off"].items():
        print(
            f"rank_stats on / off ({clock}): paired {r['paired']:.3f}x, best {r['best']:.3f}x "
            "(target <= 1.02x)"
        )
    h = result.meta["hook_cost_thread_cpu_s"]
    print(
        f"forward + backward, rank 0 thread CPU: built-in all-reduce "
        f"{1e3 * h['built-in']:.3f} ms, labkit's timed hook {1e3 * h['labkit hook']:.3f} ms "
        f"({1e3 * (h['labkit hook'] - h['built-in']):+.3f} ms per step)"
    )


if __name__ == "__main__":
    main()
