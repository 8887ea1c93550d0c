"""A recorder and a memory tracker entered together, the tracker innermost."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from labkit.memory.tracker import MemoryTracker
from labkit.trace.recorder import Recorder


@contextmanager
def recording(rec: Recorder, tracker: MemoryTracker) -> Iterator[None]:
    """Enter ``rec`` then ``tracker``; both are always removed, innermost first."""
    with rec:
        # module times are not what a memory recording is for: no CUDA synchronize at every
        # module boundary (it would serialise the GPU and inflate the step several times)
        if rec._sync:
            rec._sync = False
            rec._notes.append("memory recording: module times are host-side (no CUDA sync)")
        with tracker:
            yield
