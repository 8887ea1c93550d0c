"""Side-by-side timing: every variant once per round (A B C A B C ...), warm-up rounds first.

Drift in the machine (thermal, other processes, allocator state) then hits every variant
alike, and each figure is the median of its timed rounds. ``labkit.compare`` and the
benchmark harness (``benchmarks/_harness.py``) both time this way, through this module.

How sure a figure is: :func:`ratio_interval` gives a 95% interval for a speedup (the
ratio of two variants' medians) by a paired bootstrap over the interleaved rounds: a
round is resampled whole, so the drift both variants saw in it stays paired, and the
interval is the 2.5th and 97.5th percentiles of the resampled ratios of medians.
:func:`median_interval` does the same for one variant's median, and
:func:`interleaved_until` keeps adding rounds until every interval is narrower than a
target or a time budget is spent.

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

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

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


@dataclass(frozen=True)
class Interval:
    """A figure with its confidence interval, e.g. a speedup of 1.12x (1.05x to 1.19x).

    Args:
        estimate: The figure (a median, or a ratio of medians).
        low: Lower end of the interval.
        high: Upper end of the interval.
        level: Confidence level, e.g. 0.95.
        rounds: Rounds (samples, or pairs) it was computed from.

    Example:
        >>> iv = Interval(1.10, 1.04, 1.17, 0.95, 30)
        >>> iv.spans(1.0), round(iv.half_width, 3)
        (False, 0.064)
        >>> iv
        Interval(1.1 [1.04, 1.17], 95%, 30 rounds)
    """

    estimate: float
    low: float
    high: float
    level: float
    rounds: int

    def spans(self, value: float = 1.0) -> bool:
        """Whether ``value`` lies inside the interval (a speedup spanning 1.0 is noise)."""
        return self.low <= value <= self.high

    @property
    def half_width(self) -> float:
        """The interval's larger distance from the estimate, relative to it (0.03 = +-3%)."""
        if self.estimate == 0 or not math.isfinite(self.estimate):
            return math.inf
        return max(self.high / self.estimate - 1.0, 1.0 - self.low / self.estimate)

    def __repr__(self) -> str:
        return (
            f"Interval({self.estimate:.4g} [{self.low:.4g}, {self.high:.4g}], "
            f"{self.level:.0%}, {self.rounds} rounds)"
        )


def ratio_interval(
    base: Sequence[float],
    new: Sequence[float],
    *,
    level: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> Interval:
    """``median(base) / median(new)`` (a speedup: above 1 is faster) with its interval.

    Paired bootstrap: ``base[i]`` and ``new[i]`` are round ``i`` of an interleaved run; a
    resample draws rounds with replacement and keeps each round's pair, so the interval
    holds what the machine's drift does to both variants alike and what it does to one.
    The interval is the percentile interval of the resampled ratios of medians. Tested by
    construction (``tests/test_interleave.py``): on synthetic rounds with a known ratio it
    covers that ratio at the stated rate. It uses its own random generator (``seed``),
    never the caller's.

    Args:
        base: The baseline's seconds, one per round.
        new: The other variant's seconds, one per round (as many as ``base``).
        level: Confidence level.
        resamples: Bootstrap resamples.
        seed: Seed of the bootstrap's own generator (the same rounds give the same interval).

    Returns:
        An :class:`Interval` of the speedup.

    Example:
        >>> base = [2.0, 2.1, 1.9, 2.2, 2.0, 2.05]
        >>> iv = ratio_interval(base, [t / 2 for t in base])
        >>> iv.estimate, iv.low, iv.high
        (2.0, 2.0, 2.0)
    """
    a, b = _pairs(base, new)
    n = len(a)
    est = float(np.median(a) / np.median(b))
    if n == 1:
        return Interval(est, -math.inf, math.inf, level, 1)
    idx = np.random.default_rng(seed).integers(0, n, size=(resamples, n))
    ratios = np.median(a[idx], axis=1) / np.median(b[idx], axis=1)
    return _percentiles(est, ratios, level, n)


def median_interval(
    times: Sequence[float], *, level: float = 0.95, resamples: int = 2000, seed: int = 0
) -> Interval:
    """The median of ``times`` with its bootstrap percentile interval (see :func:`ratio_interval`).

    Example:
        >>> median_interval([1.0, 1.0, 1.0]).high
        1.0
    """
    a = np.asarray(times, dtype=float)
    if a.size == 0:
        raise ValueError("median_interval() needs at least one time")
    est = float(np.median(a))
    if a.size == 1:
        return Interval(est, -math.inf, math.inf, level, 1)
    idx = np.random.default_rng(seed).integers(0, a.size, size=(resamples, a.size))
    return _percentiles(est, np.median(a[idx], axis=1), level, int(a.size))


def _pairs(base: Sequence[float], new: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    a, b = np.asarray(base, dtype=float), np.asarray(new, dtype=float)
    if a.shape != b.shape or a.ndim != 1 or a.size == 0:
        raise ValueError(
            f"ratio_interval() needs two equally long, non-empty lists of round times; "
            f"got {a.size} and {b.size}"
        )
    if (b <= 0).any() or (a <= 0).any():
        raise ValueError("ratio_interval() needs positive times")
    return a, b


def _percentiles(est: float, values: np.ndarray, level: float, n: int) -> Interval:
    if not 0 < level < 1:
        raise ValueError(f"level must be between 0 and 1, got {level!r}")
    lo, hi = np.quantile(values, [(1 - level) / 2, (1 + level) / 2])
    return Interval(est, min(float(lo), est), max(float(hi), est), level, n)


def interleaved_until(
    variants: Sequence[T],
    sample: Callable[[T, int, bool], float | None],
    *,
    warmup: int,
    rounds: int,
    narrow: Callable[[list[list[float | None]]], bool] | None = None,
    budget_s: float | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> tuple[list[list[float | None]], str]:
    """Like :func:`interleaved`, then more rounds until ``narrow(times)`` or the budget ends.

    After ``rounds`` timed rounds, ``narrow`` is asked after each further batch of rounds
    (every ~10% more rounds, so the bootstrap's cost stays small) whether the figures are
    sure enough; rounds stop when it says yes or when the timed rounds have used
    ``budget_s`` seconds of wall time.

    Args:
        variants: What to time, in the order each round visits them.
        sample: As for :func:`interleaved`.
        warmup: Untimed rounds first.
        rounds: Timed rounds before ``narrow`` is asked (the minimum).
        narrow: ``narrow(times) -> bool``: True when the intervals are narrow enough.
            None: exactly ``rounds`` rounds.
        budget_s: Wall-clock seconds for the timed rounds (None: no limit; then
            ``narrow`` alone ends the rounds).
        clock: The clock the budget is read from.

    Returns:
        (per variant, its seconds per timed round, ``None`` where it had no time, so that
        round ``i`` of every variant lines up), and what ended the rounds: ``"target"``
        (``narrow`` said yes), ``"budget"`` (time ran out first) or ``"rounds"`` (no
        ``narrow``: the fixed number of rounds).

    Example:
        >>> times, why = interleaved_until(["a", "b"], lambda v, i, timed: 1.0, warmup=0,
        ...                                rounds=3, narrow=lambda t: len(t[0]) >= 5, budget_s=60)
        >>> len(times[0]), why
        (5, 'target')
    """
    if narrow is not None and budget_s is None:
        raise ValueError("interleaved_until(narrow=...) needs a budget_s to end by")
    for i in range(warmup):
        for v in variants:
            sample(v, i, False)
    times: list[list[float | None]] = [[] for _ in variants]
    start = clock()
    i = 0
    check_at = rounds
    while True:
        if i >= rounds and narrow is None:
            return times, "rounds"
        if i >= check_at:
            if narrow is not None and narrow(times):
                return times, "target"
            check_at = i + max(1, i // 10)
        if i >= rounds and budget_s is not None and clock() - start >= budget_s:
            return times, "budget"
        for k, v in enumerate(variants):
            times[k].append(sample(v, i, True))
        i += 1
