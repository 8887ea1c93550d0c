"""Iteration time of Lab.fit against a raw PyTorch loop and plain Lightning, on CPU.

Run: ``python -m benchmarks.trainer_parity`` (``--quick`` for a short run).
Targets (issue 7): labkit / raw loop <= 1.05; labkit / plain Lightning <= 1.02;
dashboard on / off <= 1.02, with the messages the dashboard sent. Attribution rows:
"bare Lightning" (no ``self.log``: the floor of any trainer built on Lightning's loop)
and labkit with its NaN/Inf guard off. After each table the target ratios are printed
twice: *paired* (the median over rounds of the ratio within one round, so that drift
between rounds cancels) and *best* (the fastest round of each variant: on a shared
machine, contention from other tenants only ever adds time).

Each sample is one short fit; its figure is the median time between consecutive
training-step starts (data loading included) after a warm-up, so Trainer start-up is
not counted. Variants run interleaved (A B C D A B C D ...).

Three clocks time every step: wall time (``perf_counter``), the training thread's CPU
time (``thread_time``: the loop's own Python and dispatch work; blind to torch's
intra-op worker threads) and the process's CPU time (``process_time``: every thread,
including the dashboard's event tail and throttle). On a machine loaded by other
work, wall time counts time spent waiting for a core; the CPU clocks do not, so their
ratios are the steadier ones. ``--threads N`` sets torch's intra-op threads (default 1,
so that the training thread's CPU time holds all of a step's compute).
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import tempfile
import time

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from benchmarks._harness import BenchResult, Row, report
from labkit.train import Lab
from labkit.train.lab import _quiet_lightning

SKIP = 5  # warm-up steps dropped from each sample


def mlp() -> nn.Module:
    return nn.Sequential(
        nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10)
    )


def cnn() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(32 * 8 * 8, 10),
    )


def data(kind: str, steps: int, bs: int) -> TensorDataset:
    g = torch.Generator().manual_seed(0)
    shape = (784,) if kind == "mlp" else (3, 32, 32)
    x = torch.randn(steps * bs, *shape, generator=g)
    return TensorDataset(x, torch.randint(0, 10, (steps * bs,), generator=g))


CLOCKS = {
    "wall": time.perf_counter,
    "thread CPU": time.thread_time,
    "process CPU": time.process_time,
}


def _now() -> tuple[float, ...]:
    return tuple(clock() for clock in CLOCKS.values())


class IterTimer(pl.Callback):
    def __init__(self) -> None:
        self.starts: list[tuple[float, ...]] = []

    def on_train_batch_start(self, *args: object) -> None:
        self.starts.append(_now())


def _median_gap(starts: list[tuple[float, ...]]) -> dict[str, float]:
    """Median step-start gap after the warm-up, per clock."""
    return {
        name: statistics.median([b[i] - a[i] for a, b in itertools.pairwise(starts)][SKIP:])
        for i, name in enumerate(CLOCKS)
    }


class PlainModule(pl.LightningModule):
    """What a user writes by hand for plain Lightning (``log=False``: Lightning's floor)."""

    def __init__(self, net: nn.Module, log: bool = True) -> None:
        super().__init__()
        self.net = net
        self.log_loss = log

    def training_step(self, batch, i):  # type: ignore[no-untyped-def]
        x, y = batch
        loss = F.cross_entropy(self.net(x), y)
        if self.log_loss:
            self.log("train_loss", loss)
        return loss

    def configure_optimizers(self):  # type: ignore[no-untyped-def]
        return torch.optim.Adam(self.net.parameters(), lr=1e-3)


def raw(make, ds) -> dict[str, float]:  # type: ignore[no-untyped-def]
    net = make()
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    starts = []
    for x, y in DataLoader(ds, batch_size=BS):
        starts.append(_now())
        opt.zero_grad()
        loss = F.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        loss.item()
    return _median_gap(starts)


def lightning(make, ds, log: bool = True) -> dict[str, float]:  # type: ignore[no-untyped-def]
    timer = IterTimer()
    with _quiet_lightning():
        trainer = pl.Trainer(
            max_epochs=1,
            accelerator="cpu",
            devices=1,
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            callbacks=[timer],
        )
        trainer.fit(PlainModule(make(), log), DataLoader(ds, batch_size=BS))
    return _median_gap(timer.starts)


SENT: dict[str, list[tuple[int, float]]] = {}  # (messages sent, seconds of the fit)


def labkit_fit(make, ds, *, dashboard: bool, name: str, guard: bool = True) -> dict[str, float]:  # type: ignore[no-untyped-def]
    timer = IterTimer()
    with tempfile.TemporaryDirectory() as d:
        lab = Lab(make(), DataLoader(ds, batch_size=BS), loss=F.cross_entropy, logdir=d)
        t0 = time.perf_counter()
        lab.fit(
            max_epochs=1,
            accelerator="cpu",
            dashboard=dashboard,
            dry_run=True,
            guard=guard,
            trainer_kwargs={"callbacks": [timer], "enable_progress_bar": False},
        )
        wall = time.perf_counter() - t0
        if dashboard:
            SENT.setdefault(name, []).append((lab.dashboard.sends, wall))
    return _median_gap(timer.starts)


BS = 64


def bench(kind: str, steps: int, rounds: int) -> dict[str, BenchResult]:
    """One BenchResult per clock, from the same interleaved samples."""
    make = mlp if kind == "mlp" else cnn
    ds = data(kind, steps, BS)
    variants = {
        "raw loop": (lambda: raw(make, ds), "1.00x"),
        "plain Lightning": (lambda: lightning(make, ds), ""),
        # attribution: Lightning's own loop without any self.log
        "bare Lightning (no self.log)": (lambda: lightning(make, ds, log=False), ""),
        "labkit (dashboard off)": (
            lambda: labkit_fit(make, ds, dashboard=False, name=kind),
            "<= 1.05x raw, <= 1.02x Lightning",
        ),
        "labkit (dashboard on)": (
            lambda: labkit_fit(make, ds, dashboard=True, name=kind),
            "<= 1.02x dashboard off",
        ),
        # attribution: what the NaN/Inf guard (a finiteness check of every gradient) costs
        "labkit (dashboard off, guard off)": (
            lambda: labkit_fit(make, ds, dashboard=False, name=kind, guard=False),
            "",
        ),
    }
    samples: dict[str, list[dict[str, float]]] = {k: [] for k in variants}
    for fn, _ in variants.values():
        fn()  # warm-up round
    order = list(variants)
    for r in range(rounds):
        # alternate the order every round (A B C D, D C B A, ...) so that no variant
        # always follows the same one
        for name in order if r % 2 == 0 else order[::-1]:
            samples[name].append(variants[name][0]())
    sent = SENT.get(kind, [(0, 1.0)])
    meta = {
        "model": kind,
        "steps": steps,
        "batch_size": BS,
        "rounds": rounds,
        "threads": torch.get_num_threads(),
        "dashboard_messages": statistics.median(n for n, _ in sent),
        "dashboard_fit_s": statistics.median(w for _, w in sent),
    }
    results = {}
    for clock in CLOCKS:
        per = {k: [s[clock] for s in v] for k, v in samples.items()}
        medians = {k: statistics.median(v) for k, v in per.items()}
        base = medians["raw loop"]
        rows = tuple(
            Row(
                name=k,
                median_s=medians[k],
                min_s=min(v),
                max_s=max(v),
                ratio=medians[k] / base,
                anchor=variants[k][1],
                samples=len(v),
            )
            for k, v in per.items()
        )
        paired = {f"{a} / {b}": paired_ratio(per[a], per[b]) for a, b, _ in COMPARISONS}
        best = {f"{a} / {b}": min(per[a]) / min(per[b]) for a, b, _ in COMPARISONS}
        extra = {f"{a} - {b} (us/step)": 1e6 * (medians[a] - medians[b]) for a, b in EXTRA}
        suffix = "" if clock == "wall" else "_" + clock.replace(" CPU", "_cpu")
        results[clock] = BenchResult(
            name=f"trainer_parity_{kind}{suffix}",
            baseline="raw loop",
            rows=rows,
            meta={
                **meta,
                "clock": clock,
                "paired_ratios": paired,
                "best_ratios": best,
                "added_us_per_step": extra,
            },
        )
    return results


LAB = "labkit (dashboard off)"
LAB_DASH = "labkit (dashboard on)"
LAB_NOGUARD = "labkit (dashboard off, guard off)"
# (numerator, denominator, target) for the paired ratios printed after each table
COMPARISONS = (
    (LAB, "raw loop", "<= 1.05"),
    (LAB, "plain Lightning", "<= 1.02"),
    (LAB_DASH, LAB, "<= 1.02"),
    ("bare Lightning (no self.log)", "raw loop", "Lightning's floor"),
    (LAB, "bare Lightning (no self.log)", "labkit's own work"),
    (LAB, LAB_NOGUARD, "the NaN/Inf guard"),
)
# absolute cost per step of one variant over another, from the medians
EXTRA = (
    ("bare Lightning (no self.log)", "raw loop"),
    (LAB, "bare Lightning (no self.log)"),
    ("plain Lightning", "bare Lightning (no self.log)"),
)


def paired_ratio(a: list[float], b: list[float]) -> float:
    """Median over rounds of a / b within each round (drift between rounds cancels)."""
    return statistics.median(x / y for x, y in zip(a, b, strict=True))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rounds", type=int, default=None, help="interleaved rounds")
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    ap.add_argument("--models", nargs="+", default=["mlp", "cnn"], choices=["mlp", "cnn"])
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    steps, rounds = (30, 3) if a.quick else (80, 9)
    rounds = a.rounds or rounds
    for kind in a.models:
        results = bench(kind, steps, rounds)
        for clock, result in results.items():
            print(f"## {kind}, clock: {clock}")
            report(result)
            print(
                "ratios: paired (median over rounds of the ratio within a round) | best"
                " (fastest round of each: contention on a shared machine only adds time)"
            )
            for (num, den, target), paired, best in zip(
                COMPARISONS,
                result.meta["paired_ratios"].values(),
                result.meta["best_ratios"].values(),
                strict=True,
            ):
                print(f"  {num} / {den}: {paired:.3f}x | {best:.3f}x ({target})")
            for name, us in result.meta["added_us_per_step"].items():
                print(f"  {name}: {us:+.0f}")
            print()
        meta = results["wall"].meta
        print(
            f"dashboard sent {meta['dashboard_messages']:.0f} messages in a "
            f"{meta['dashboard_fit_s']:.2f} s fit (throttle: the first at once, then at most "
            "one per 0.25 s, and the final state when the fit ends)\n"
        )


if __name__ == "__main__":
    main()
