"""labkit.tune: the fastest set-up that fits a memory budget, and how long finding it took.

Run: ``python -m benchmarks.tune [--device cuda] [--budget-s 60] [--plan-s 30]
[--models resmlp,gpt] [--threads 1]`` (one thread steadies the timing on a loaded machine).

For each model (a residual MLP stack and nanoGPT from ``tests/realworld/models.py``), the
budget is set between the planned peak of the largest batch with and without
checkpointing its blocks, so the budget binds: the largest batch fits only checkpointed.
Prints tune's table (every candidate: predicted peak, samples/s with its 95% interval,
FLOP/s, why it lost), the pick's measured peak against the budget, and the wall time of
tuning with the plans and timed set-ups it took. On CUDA the default budget (free memory
less the allocator margin) is used unless ``--budget-mib`` is given.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import torch
from torch import nn

import labkit
from labkit._format import fmt_bytes, fmt_time
from labkit.optimize import Recipe
from tests.realworld.models import gpt


class Residual(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.mlp(self.norm(x))


class ResMLP(nn.Module):
    def __init__(self, d_in: int = 32, d: int = 64, depth: int = 6) -> None:
        super().__init__()
        self.inp = nn.Linear(d_in, d)
        self.blocks = nn.ModuleList([Residual(d) for _ in range(depth)])
        self.head = nn.Linear(d, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.inp(x)
        for b in self.blocks:
            x = b(x)
        return self.head(x)


def cases(device: str) -> dict[str, tuple[nn.Module, tuple[Any, ...], Any, Any, str]]:
    """name -> (model, batch, loss, optimizer, glob of its blocks)."""
    torch.manual_seed(0)
    mlp = ResMLP().to(device)
    x = torch.randn(64, 32, device=device)
    case = gpt(0, batch=8, block=64, vocab=256, n_embd=64, n_layer=4)
    g = case.model.to(device)
    batch = tuple(t.to(device) for t in case.args)
    return {
        "resmlp": (mlp, (x,), None, torch.optim.AdamW(mlp.parameters()), "blocks.*"),
        "gpt": (g, batch, case.loss, case.make_optimizer(g), "transformer.h.*"),
    }


def binding_budget(
    model: nn.Module, batch: tuple[Any, ...], loss: Any, opt: Any, blocks: str, biggest: int
) -> int:
    """Halfway between the largest batch's planned peak with and without checkpointing."""
    n = batch[0].shape[0]
    big = tuple(torch.cat([t] * (biggest // n)) for t in batch)
    plain = labkit.plan(model, big, loss=loss, optimizer=opt).peak_bytes
    ckpt = labkit.plan(
        model, big, loss=loss, optimizer=opt, recipe=Recipe(checkpoint=(blocks,))
    ).peak_bytes
    return (plain + ckpt) // 2


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--budget-s", type=float, default=60.0)
    ap.add_argument("--plan-s", type=float, default=None, help="default: half of --budget-s")
    ap.add_argument("--budget-mib", type=float, default=None)
    ap.add_argument("--models", default="resmlp,gpt")
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    print(
        f"labkit.tune on {a.device}, torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads, budget_s={a.budget_s:g}"
    )
    for name, (model, batch, loss, opt, blocks) in cases(a.device).items():
        if name not in a.models.split(","):
            continue
        n = batch[0].shape[0]
        sizes = [n // 2, n, 2 * n, 4 * n]
        if a.budget_mib is not None:
            budget: int | None = int(a.budget_mib * 2**20)
        elif a.device == "cuda":
            budget = None
        else:
            budget = binding_budget(model, batch, loss, opt, blocks, sizes[-1])
        space = {"precision": ["32", "bf16-mixed"], "checkpoint": ["none", "auto", "blocks"]}
        t0 = time.perf_counter()
        choice = labkit.tune(
            model,
            batch,
            budget,
            loss=loss,
            optimizer=opt,
            space=space,
            batch_sizes=sizes,
            budget_s=a.budget_s,
            plan_s=a.plan_s,
            progress=True,
        )
        took = time.perf_counter() - t0
        print(
            f"\n== {name}: {sum(p.numel() for p in model.parameters()):,} parameters, "
            f"batch {n}, sizes {sizes}"
        )
        print(choice.summary())
        m = choice.measured_peak
        kept = m is not None and m <= choice.budget
        print(
            f"\n{name}: picked {choice.label} in {fmt_time(took)} (budget_s {a.budget_s:g}); "
            f"measured peak {fmt_bytes(m) if m is not None else '-'} <= budget "
            f"{fmt_bytes(choice.budget)}: {kept}"
        )


if __name__ == "__main__":
    main()
