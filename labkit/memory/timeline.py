"""The memory timeline: raw tracker events turned into compact ``MemorySample`` rows.

Pure functions on plain data. A step of a large model produces tens of thousands of
allocation events; :func:`downsample` keeps the shape (each bucket's highest and
lowest point, every phase change, the first and last event and the global peak) so
the widget stays fast and the peak is never lost.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from labkit.trace.model import MEMORY_CATEGORIES, MemorySample

CATEGORIES = MEMORY_CATEGORIES  # labkit.memory.CATEGORIES

MAX_SAMPLES = 4000


def downsample(events: Sequence[tuple[Any, ...]], max_samples: int = MAX_SAMPLES) -> list[Any]:
    """At most about ``max_samples`` events, keeping peaks, troughs and phase changes.

    Args:
        events: ``(time, phase, module, *bytes per category)`` tuples in time order.
        max_samples: Target size (phase changes are always kept, so it may exceed it
            when phases alternate more often than that).

    Returns:
        The kept events, in time order.

    Example:
        >>> ev = [(i, "forward", "", 0, 0, 0, i % 7, 0, 0) for i in range(100)]
        >>> len(downsample(ev, 20)) <= 22
        True
    """
    n = len(events)
    if max_samples < 2:
        raise ValueError(f"max_samples must be at least 2, got {max_samples}")
    if n <= max_samples:
        return list(events)
    totals = [sum(e[3:]) for e in events]
    keep = {0, n - 1, max(range(n), key=totals.__getitem__)}
    for i in range(1, n):
        if events[i][1] != events[i - 1][1]:
            keep.add(i)
    buckets = max(1, (max_samples - len(keep)) // 2)
    size = n / buckets
    for b in range(buckets):
        lo = int(b * size)
        hi = max(lo + 1, min(n, int((b + 1) * size)))
        seg = range(lo, hi)
        keep.add(max(seg, key=totals.__getitem__))
        keep.add(min(seg, key=totals.__getitem__))
    return [events[i] for i in sorted(keep)]


def to_samples(
    events: Sequence[tuple[Any, ...]], max_samples: int = MAX_SAMPLES
) -> tuple[MemorySample, ...]:
    """Events as :class:`~labkit.trace.MemorySample` rows (down-sampled when many)."""
    return tuple(
        MemorySample(round(e[0], 9), e[1], e[2], dict(zip(CATEGORIES, e[3:], strict=True)))
        for e in downsample(events, max_samples)
    )


def totals(samples: Sequence[MemorySample]) -> list[int]:
    """Live bytes (all categories) of each sample."""
    return [sum(s.bytes.values()) for s in samples]


def phase_spans(samples: Sequence[MemorySample]) -> list[tuple[str, float, float]]:
    """``(phase, start, end)`` for each run of consecutive samples in one phase."""
    spans: list[tuple[str, float, float]] = []
    for s in samples:
        if spans and spans[-1][0] == s.phase:
            spans[-1] = (s.phase, spans[-1][1], s.time)
        else:
            spans.append((s.phase, s.time, s.time))
    return spans


def sparkline(samples: Sequence[MemorySample], width: int = 60) -> str:
    """A one-line text picture of live bytes over the samples, for terminals and reprs."""
    vals = totals(samples)
    if not vals:
        return ""
    bars = " ▁▂▃▄▅▆▇█"
    hi = max(vals) or 1
    step = max(1, len(vals) // width)
    cols = [max(vals[i : i + step]) for i in range(0, len(vals), step)][:width]
    return "".join(bars[min(8, round(8 * v / hi))] for v in cols)
