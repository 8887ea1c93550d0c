"""Throttle for live views: at most a few sends per second, the last state always sent.

Jupyter drops output past ~1000 messages/s or 1 MB/s, and a training loop must never
wait on the browser. :class:`Throttle` sends the first update at once, then at most one
per ``interval``; updates arriving in between replace each other, and a timer thread
delivers the latest one when the interval has passed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

_NOTHING = object()


class Throttle:
    """Calls ``send(value)`` at most once per ``interval`` seconds, always ending on the latest.

    Args:
        send: Called with the value to deliver (from the caller's thread or a timer thread).
        interval: Minimum seconds between two sends.
        clock: Monotonic clock in seconds.

    Example:
        >>> sent = []
        >>> th = Throttle(sent.append, interval=0.1)
        >>> for i in range(100):
        ...     th.submit(i)
        >>> th.flush()
        >>> sent
        [0, 99]
    """

    def __init__(
        self,
        send: Callable[[Any], None],
        interval: float = 0.25,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if interval < 0:
            raise ValueError(f"interval must be >= 0 seconds, got {interval}")
        self.send = send
        self.interval = interval
        self.clock = clock
        self.sends = 0
        self._lock = threading.Lock()
        self._pending: Any = _NOTHING
        self._last = -float("inf")
        self._timer: threading.Timer | None = None

    def submit(self, value: Any) -> None:
        """Deliver ``value`` now if the interval has passed, else schedule it (replacing older)."""
        with self._lock:
            now = self.clock()
            wait = self._last + self.interval - now
            if wait <= 0 and self._timer is None:
                self._last = now
                self._pending = _NOTHING
                deliver = True
            else:
                self._pending = value
                deliver = False
                if self._timer is None:
                    self._timer = threading.Timer(max(wait, 0.0), self._fire)
                    self._timer.daemon = True
                    self._timer.start()
        if deliver:
            self._deliver(value)

    def _fire(self) -> None:
        with self._lock:
            self._timer = None
            value, self._pending = self._pending, _NOTHING
            if value is not _NOTHING:
                self._last = self.clock()
        if value is not _NOTHING:
            self._deliver(value)

    def _deliver(self, value: Any) -> None:
        self.sends += 1
        self.send(value)

    def flush(self) -> None:
        """Send the pending value now (if any), cancelling the timer."""
        with self._lock:
            timer, self._timer = self._timer, None
            value, self._pending = self._pending, _NOTHING
            if value is not _NOTHING:
                self._last = self.clock()
        if timer is not None:
            timer.cancel()
        if value is not _NOTHING:
            self._deliver(value)

    @property
    def pending(self) -> bool:
        """Whether a value waits for its slot."""
        return self._pending is not _NOTHING

    def __repr__(self) -> str:
        return f"Throttle(interval={self.interval}, sends={self.sends}, pending={self.pending})"
