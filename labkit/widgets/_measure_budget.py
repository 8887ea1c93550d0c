"""How the optimize panel sizes and summarises a measurement: steps from a time budget,
step-time spread (median and IQR), and what its loss column holds."""

from __future__ import annotations

import time
from typing import Any


def spread(times: Any) -> dict[str, float | int | None]:
    """Median and quartiles of the timed steps (``statistics.quantiles``, inclusive)."""
    import statistics

    times = [float(x) for x in times]
    if not times:
        return {"step_median": None, "step_q1": None, "step_q3": None, "step_n": 0}
    q1, med, q3 = statistics.quantiles(times, n=4, method="inclusive") if len(times) > 1 else (
        times[0], times[0], times[0])  # fmt: skip
    return {"step_median": med, "step_q1": q1, "step_q3": q3, "step_n": len(times)}


def loss_label(mode: str, loss: Any) -> str:
    """What the results' loss column holds ("" when it holds nothing)."""
    if loss is not None:
        return "loss (your loss)" if mode == "train" else "loss(output)"
    if mode == "train":
        return "objective (no loss given: mean of the outputs)"
    return ""


def probe_step_s(model: Any, batch: Any, mode: str, repeats: int = 3) -> float:
    """Seconds of one step, estimated from the median forward pass under ``no_grad``.

    A training step (forward, backward, optimizer) is counted as three forwards.
    """
    import statistics

    import torch

    from labkit._tensors import split_batch  # torch stays unimported until a probe runs

    args, kwargs = split_batch(batch)  # as labkit.compare splits it
    times = []
    with torch.no_grad():
        model(*args, **kwargs)  # warm-up
        for _ in range(repeats):
            t0 = time.perf_counter()
            model(*args, **kwargs)
            times.append(time.perf_counter() - t0)
    return statistics.median(times) * (3 if mode == "train" else 1)


def steps_for_budget(budget_s: float, step_s: float, recipes: int, *, lo: int = 5,
                     hi: int = 500) -> int:  # fmt: skip
    """Timed steps per recipe so ``recipes`` recipes fill ``budget_s``, within [lo, hi]."""
    if budget_s <= 0:
        raise ValueError(f"OptimizePanel(budget_s=...) must be > 0 seconds, got {budget_s}")
    return max(lo, min(hi, int(budget_s / max(step_s, 1e-9) / max(recipes, 1))))
