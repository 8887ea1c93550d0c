"""``no_gc()``: Python's cyclic garbage collector held off for a span (reference counting
still frees everything), as ``timeit`` does. Used around timed passes (collections would
land in the hooked passes more often: they allocate more) and around building large
payloads (a collection mid-build walks every object made so far)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["no_gc"]


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
