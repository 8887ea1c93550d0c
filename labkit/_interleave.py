"""Side-by-side timing: every variant once per round (A B C A B C ...), warm-up rounds first.

Drift in the machine (thermal, other processes, allocator state) then hits every variant
alike, and each figure is the median of its timed rounds. ``labkit.compare`` and the
benchmark harness (``benchmarks/_harness.py``) both time this way, through this module.

Example:
    >>> seen = []
    >>> times = interleaved(["a", "b"], lambda v, i, timed: seen.append((v, i, timed)) or 1.0,
    ...                     warmup=1, rounds=2)
    >>> seen
    [('a', 0, False), ('b', 0, False), ('a', 0, True), ('b', 0, True), ('a', 1, True), ('b', 1, True)]
    >>> times, medians(times)
    ([[1.0, 1.0], [1.0, 1.0]], [1.0, 1.0])
"""  # noqa: E501

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")


def interleaved(
    variants: Sequence[T],
    sample: Callable[[T, int, bool], float | None],
    *,
    warmup: int,
    rounds: int,
) -> list[list[float]]:
    """Call ``sample(variant, round, timed)`` round by round, each round over every variant.

    Args:
        variants: What to time, in the order each round visits them.
        sample: Runs one variant once; returns its seconds, or None when it has no time
            (it failed, or keeps its own record).
        warmup: Untimed rounds first (``timed=False``; ``round`` counts from 0).
        rounds: Timed rounds (``timed=True``; ``round`` counts from 0 again).

    Returns:
        Per variant, the seconds its timed rounds returned (None left out).
    """
    for i in range(warmup):
        for v in variants:
            sample(v, i, False)
    times: list[list[float]] = [[] for _ in variants]
    for i in range(rounds):
        for k, v in enumerate(variants):
            t = sample(v, i, True)
            if t is not None:
                times[k].append(t)
    return times


def medians(times: Sequence[Sequence[float]]) -> list[float | None]:
    """The median of each variant's times (None for a variant without any)."""
    return [statistics.median(t) if t else None for t in times]
