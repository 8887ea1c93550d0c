"""The update throttle, with real time and real threads."""

from __future__ import annotations

import threading
import time

import pytest

from labkit.views._throttle import Throttle


class Recorder:
    """A comm-less sending function: remembers what it got and when."""

    def __init__(self) -> None:
        self.values: list[int] = []
        self.times: list[float] = []
        self.done = threading.Event()

    def __call__(self, value: int) -> None:
        self.values.append(value)
        self.times.append(time.monotonic())
        if value == 99:
            self.done.set()


def test_tight_loop_sends_first_and_last():
    rec = Recorder()
    th = Throttle(rec, interval=0.1)
    start = time.monotonic()
    for i in range(100):
        th.submit(i)
    loop = time.monotonic() - start  # ~1 ms on a quiet machine, more under load
    assert rec.done.wait(30.0), "the final state was never delivered"  # hang guard
    assert rec.values[0] == 0 and rec.values[-1] == 99  # the first at once, the last kept
    assert rec.values == sorted(rec.values)
    # at most one send per interval while the loop ran, plus the final one: [0, 99] when
    # the loop took under 0.1 s, a few more on a loaded machine, never all 100
    assert len(rec.values) <= 10 * loop + 2, (rec.values, loop)
    assert min(b - a for a, b in zip(rec.times, rec.times[1:], strict=False)) >= 0.09


def test_rate_stays_under_ten_per_second_and_ends_on_the_final_state():
    rec = Recorder()
    th = Throttle(rec, interval=0.1)
    start = time.monotonic()
    for i in range(100):  # ~1 s of updates, one every 10 ms
        th.submit(i)
        time.sleep(0.01)
    assert rec.done.wait(30.0)  # hang guard
    elapsed = max(rec.times[-1] - start, 1e-9)
    assert rec.values[-1] == 99
    assert len(rec.values) <= 10 * elapsed + 2, (len(rec.values), elapsed)
    gaps = [b - a for a, b in zip(rec.times, rec.times[1:], strict=False)]
    assert min(gaps) >= 0.09
    assert rec.values == sorted(rec.values)  # never goes back to an older state


def test_flush_delivers_pending_now():
    rec = Recorder()
    th = Throttle(rec, interval=10)
    th.submit(1)
    th.submit(2)
    th.submit(3)
    assert th.pending and rec.values == [1]
    th.flush()
    assert rec.values == [1, 3] and not th.pending


def test_repr_and_validation():
    th = Throttle(lambda v: None, interval=0.5)
    assert repr(th) == "Throttle(interval=0.5, sends=0, pending=False)"
    th.submit(1)
    assert repr(th) == "Throttle(interval=0.5, sends=1, pending=False)"
    with pytest.raises(ValueError, match="interval"):
        Throttle(lambda v: None, interval=-1)
