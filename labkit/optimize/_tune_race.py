"""Timing the set-ups that fit, side by side, until the leader is separated or time ends.

Rounds are interleaved (A B C A B C ...) by :func:`labkit._interleave.interleaved_until`,
the machinery ``labkit.compare`` times with. Each sample is seconds per sample (a step's
time over its batch size), so set-ups at different batch sizes compare. After the minimum
rounds, and then every ~10% more, each runner-up is compared with the leader (the lowest
median seconds per sample) by :func:`~labkit._interleave.ratio_interval`, the paired
bootstrap over the rounds both ran: one whose interval lies wholly above 1 (the leader is
measurably faster) drops out of further rounds, and comes back if a new leader is not
measurably faster than it. Rounds end when no runner-up is left
(``"separated"``), when ``budget_s`` is spent (``"budget"``) or on KeyboardInterrupt
(``"interrupted"``: the rounds so far are kept).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from labkit._interleave import Interval, interleaved_until, median_interval, ratio_interval


@dataclass
class Entry:
    """One set-up in the race: ``run()`` takes one step and returns its seconds.

    Args:
        key: Its index among the candidates.
        batch_size: Samples per step.
        run: One training step; returns wall seconds.
        times: Seconds per sample, one per timed round (``None``: not run that round).
        out: Why it left the race early (``"slower"``), or ``""``.
        error: Why its step failed, if it did.
    """

    key: int
    batch_size: int
    run: Callable[[], float]
    times: list[float | None] = field(default_factory=list)
    out: str = ""
    error: str = ""

    def timed(self) -> list[float]:
        return [t for t in self.times if t is not None]

    def median(self) -> float | None:
        got = self.timed()
        return statistics.median(got) if got else None


@dataclass(frozen=True)
class RaceResult:
    """What the race found.

    Args:
        leader: The key of the fastest set-up (lowest median seconds per sample), or None.
        ended_by: ``"separated"``, ``"budget"``, ``"one candidate"`` or ``"interrupted"``.
        rounds: Timed rounds run.
    """

    leader: int | None
    ended_by: str
    rounds: int


def race(
    entries: Sequence[Entry], *, warmup: int, rounds: int, budget_s: float, level: float
) -> RaceResult:
    """Time ``entries`` interleaved, dropping the measurably slower, until one is left."""
    live = [e for e in entries if not e.error]

    def sample(e: Entry, i: int, timed: bool) -> float | None:
        t = None
        if not (e.out or e.error):
            try:
                t = e.run() / e.batch_size
            except Exception as exc:  # KeyboardInterrupt is not an Exception: it ends the race
                e.error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        if not timed:
            return None
        del e.times[i:]  # kept here too, so an interrupt keeps every finished round
        e.times.append(t)
        return t

    def narrow(times: list[list[float | None]]) -> bool:
        lead = leader(live)
        if lead is None:
            return True
        for e in live:  # judged against today's leader: one dropped against an earlier
            if e is lead or e.error:  # leader comes back if the new one is not faster
                continue
            iv = versus(lead, e, level)
            e.out = "slower" if iv is not None and iv.low > 1.0 else ""
        return all(e is lead or e.out or e.error for e in live)

    if len(live) <= 1:
        for e in live:  # one set-up: time it anyway, for its samples/s
            _fixed(e, sample, warmup, rounds)
        return RaceResult(live[0].key if live else None, "one candidate", rounds if live else 0)
    try:
        _, why = interleaved_until(
            live, sample, warmup=warmup, rounds=rounds, narrow=narrow, budget_s=budget_s
        )
        ended = "separated" if why == "target" else why
    except KeyboardInterrupt:
        ended = "interrupted"  # each entry keeps its finished rounds
        n = min(len(e.times) for e in live)
        for e in live:  # a round the interrupt cut short is dropped for everyone
            del e.times[n:]
    lead = leader(live)
    n = max((len(e.times) for e in live), default=0)
    return RaceResult(lead.key if lead is not None else None, ended, n)


def _fixed(
    e: Entry, sample: Callable[[Entry, int, bool], float | None], warmup: int, rounds: int
) -> None:
    for i in range(warmup):
        sample(e, i, False)
    for i in range(rounds):
        sample(e, i, True)


def leader(entries: Sequence[Entry]) -> Entry | None:
    """The entry with the lowest median seconds per sample (failed and dropped ones left out)."""
    timed = [
        (m, e.key, e) for e in entries if not (e.error or e.out) and (m := e.median()) is not None
    ]
    return min(timed, key=lambda x: (x[0], x[1]))[2] if timed else None


MIN_PAIRS = 5  # a percentile bootstrap over fewer rounds gives intervals too narrow to trust


def versus(lead: Entry, other: Entry, level: float) -> Interval | None:
    """``other``'s median seconds per sample over ``lead``'s, on the rounds both ran, with
    its paired-bootstrap interval (above 1: the leader is faster); None under
    :data:`MIN_PAIRS` rounds."""
    pairs = [
        (o, a)
        for o, a in zip(other.times, lead.times, strict=False)
        if o is not None and a is not None
    ]
    if len(pairs) < MIN_PAIRS:
        return None
    o, a = zip(*pairs, strict=True)
    return ratio_interval(o, a, level=level, resamples=1000)


def speed_interval(e: Entry, level: float) -> tuple[float, float, float] | None:
    """Samples per second: ``(median, low, high)`` from the median's bootstrap interval."""
    got = e.timed()
    if not got:
        return None
    iv = median_interval(got, level=level, resamples=1000)
    low = 1.0 / iv.high if iv.high > 0 and iv.high != float("inf") else 0.0
    high = 1.0 / iv.low if iv.low > 0 else float("inf")
    return 1.0 / iv.estimate, low, high
