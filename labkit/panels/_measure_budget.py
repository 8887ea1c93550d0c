"""How the optimize panel summarises a measurement: the step-time spread (median and IQR)
and what its loss column holds. (How long it measures is ``labkit.compare``'s budget.)"""

from __future__ import annotations

from collections.abc import Iterable


def spread(times: Iterable[float]) -> dict[str, float | int | None]:
    """Median and quartiles of the timed steps (``statistics.quantiles``, inclusive)."""
    import statistics

    times = [float(x) for x in times]
    if not times:
        return {"step_median": None, "step_q1": None, "step_q3": None, "step_n": 0}
    q1, med, q3 = (
        statistics.quantiles(times, n=4, method="inclusive")
        if len(times) > 1
        else (times[0], times[0], times[0])
    )
    return {"step_median": med, "step_q1": q1, "step_q3": q3, "step_n": len(times)}


def loss_label(mode: str, loss: object) -> str:
    """What the results' loss column holds ("" when it holds nothing)."""
    if loss is not None:
        return "loss (your loss)" if mode == "train" else "loss(output)"
    if mode == "train":
        return "objective (no loss given: mean of the outputs)"
    return ""
