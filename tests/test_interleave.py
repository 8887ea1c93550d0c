"""Intervals of labkit._interleave checked by construction: synthetic round times drawn
from a known distribution, where the true speedup is known exactly."""

from __future__ import annotations

import math

import numpy as np
import pytest

from labkit._interleave import (
    Interval,
    interleaved_until,
    median_interval,
    ratio_interval,
)


def _rounds(rng: np.random.Generator, n: int, ratio: float) -> tuple[np.ndarray, np.ndarray]:
    """n interleaved rounds: both variants share each round's drift (a slow machine moment
    slows both), each has its own lognormal noise and a 5% chance of a 3x outlier. The
    new variant's times are the base's distribution divided by ``ratio``, so the true
    ratio of medians is exactly ``ratio``."""
    drift = np.exp(rng.normal(0.0, 0.05, n))

    def noise() -> np.ndarray:
        return np.exp(rng.normal(0.0, 0.1, n)) * np.where(rng.random(n) < 0.05, 3.0, 1.0)

    return 0.010 * drift * noise(), 0.010 / ratio * drift * noise()


@pytest.mark.parametrize("n", [10, 30])
def test_ratio_interval_covers_the_true_ratio_at_the_stated_rate(n):
    # 400 seeded repetitions: if the true coverage were 95%, the observed rate has a
    # binomial standard error of sqrt(0.95 * 0.05 / 400) = 1.09 points; 3 standard errors
    # below nominal (91.7%) fails the test. Above: a percentile bootstrap of medians is
    # slightly conservative at small n; 99% would mean intervals far too wide.
    rng = np.random.default_rng(12345 + n)
    reps, hits, true = 400, 0, 1.25
    for k in range(reps):
        base, new = _rounds(rng, n, true)
        iv = ratio_interval(base, new, resamples=1000, seed=k)
        hits += iv.spans(true)
    rate = hits / reps
    se = math.sqrt(0.95 * 0.05 / reps)
    assert 0.95 - 3 * se <= rate <= 0.99, rate


def test_equal_variants_are_within_noise_and_a_real_gain_is_not():
    rng = np.random.default_rng(7)
    base, same = _rounds(rng, 40, 1.0)
    assert ratio_interval(base, same).spans(1.0)
    base, fast = _rounds(rng, 40, 1.5)
    iv = ratio_interval(base, fast)
    assert not iv.spans(1.0) and iv.low > 1.3


def test_interval_narrows_with_more_rounds():
    rng = np.random.default_rng(3)
    widths = [ratio_interval(*_rounds(rng, n, 1.1)).half_width for n in (10, 40, 160)]
    assert widths[0] > widths[1] > widths[2]


def test_median_interval_covers_the_true_median():
    rng = np.random.default_rng(11)
    reps, hits = 300, 0
    for k in range(reps):  # lognormal(0, 0.2): the true median is exactly 1
        hits += median_interval(np.exp(rng.normal(0, 0.2, 25)), resamples=1000, seed=k).spans(1)
    se = math.sqrt(0.95 * 0.05 / reps)
    assert 0.95 - 3 * se <= hits / reps <= 0.995


def test_the_callers_random_state_is_untouched():
    state = np.random.get_state()[1].copy()
    ratio_interval([1.0, 1.1, 0.9], [0.5, 0.6, 0.4])
    assert (np.random.get_state()[1] == state).all()


def test_bad_rounds_are_named():
    with pytest.raises(ValueError, match="equally long"):
        ratio_interval([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="positive times"):
        ratio_interval([1.0, 0.0], [1.0, 1.0])
    with pytest.raises(ValueError, match="needs a budget_s"):
        interleaved_until(["a"], lambda v, i, t: 1.0, warmup=0, rounds=1, narrow=lambda t: True)


def test_one_round_has_an_unbounded_interval():
    iv = ratio_interval([2.0], [1.0])
    assert iv.estimate == 2.0 and iv.spans(1.0) and iv.half_width == math.inf
    assert repr(Interval(1.5, 1.4, 1.6, 0.95, 9)) == "Interval(1.5 [1.4, 1.6], 95%, 9 rounds)"


def test_rounds_stop_at_the_target_or_the_budget():
    now = [0.0]

    def clock() -> float:
        return now[0]

    def sample(v: str, i: int, timed: bool) -> float | None:
        now[0] += 1.0  # each sample takes one second of the fake clock
        return None if v == "broken" else 1.0

    times, why = interleaved_until(
        ["a", "broken"],
        sample,
        warmup=1,
        rounds=4,
        narrow=lambda t: len(t[0]) >= 6,
        budget_s=100.0,
        clock=clock,
    )
    assert why == "target" and len(times[0]) == 6 and times[1] == [None] * 6
    times, why = interleaved_until(
        ["a", "b"],
        sample,
        warmup=0,
        rounds=2,
        narrow=lambda t: False,
        budget_s=10.0,
        clock=clock,
    )
    assert why == "budget" and len(times[0]) == 5  # 5 rounds x 2 samples = the 10 s budget
    times, why = interleaved_until(["a"], sample, warmup=0, rounds=3)
    assert why == "rounds" and len(times[0]) == 3
