"""``no_gc()``: Python's cyclic garbage collector held off for a span (reference counting
still frees everything), as ``timeit`` does. Used around timed passes (collections would
land in the hooked passes more often: they allocate more) and around building large
payloads (a collection mid-build walks every object made so far).

``young_gc_only()``: no *full* collection while labkit records (the young generations still
run). A recording makes a few dozen Python objects per module call (nodes, memory records,
weak references, timeline events). Python's collector runs a full collection each time the
objects that survived grow by a quarter, and a full collection walks every object of the
process: the model's modules, parameters and dicts, torch itself, the notebook's state.
Over a 10,000-module recording these walks were a third of the call (4.2 of 9.7 s on 2
shared cores). Cyclic garbage a step makes is still collected as it dies young; what
survives into the oldest generation waits for the first full collection after the call, as
it would have waited for the next one anyway."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["OLDEST_THRESHOLD", "no_gc", "young_gc_only"]

OLDEST_THRESHOLD = 1 << 30  # collections of generation 1 before a full one: never, here


@contextmanager
def no_gc() -> Iterator[None]:
    """Hold the cyclic garbage collector off inside; put back as it was (on error too).

    Example:
        >>> import gc
        >>> with no_gc():
        ...     gc.isenabled()
        False
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


class young_gc_only:
    """While entered, the collector makes no full collection (the oldest generation's
    threshold raised); on exit the thresholds are put back, unless the code inside set
    them itself (then what it set stays).

    Example:
        >>> import gc
        >>> before = gc.get_threshold()
        >>> with young_gc_only():
        ...     gc.get_threshold()[2] > before[2]
        True
        >>> gc.get_threshold() == before
        True
    """

    def __init__(self) -> None:
        self.old: tuple[int, ...] | None = None
        self.set: tuple[int, ...] | None = None

    def __enter__(self) -> None:
        old = gc.get_threshold()
        if len(old) < 3 or old[2] >= OLDEST_THRESHOLD:
            return  # an outer recording (or the user) has it already
        self.old = old
        gc.set_threshold(old[0], old[1], OLDEST_THRESHOLD)
        self.set = gc.get_threshold()

    def __exit__(self, *exc: object) -> None:
        old, self.old = self.old, None
        if old is not None and gc.get_threshold() == self.set:
            gc.set_threshold(*old)
