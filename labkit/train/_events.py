"""Training events: rank 0 appends JSON lines to ``<logdir>/events.jsonl``; the kernel tails it.

The file is the one channel that works for every launch: in the kernel's own process, in
processes forked by ``ddp_notebook``, in a subprocess (CUDA already initialised) and under
``torchrun``. Writers append whole lines and flush; readers only consume complete lines,
so a reader never sees half an event.
"""

from __future__ import annotations

import json
import math
import os
import stat
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from labkit._paths import InputFileError, OutputPathError, open_input

EVENTS_FILE = "events.jsonl"
STOP_FILE = "STOP"


def _clean(value: Any) -> Any:
    """JSON cannot hold NaN/Inf: write them as strings that :func:`_restore` turns back."""
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


def _restore(value: Any) -> Any:
    if isinstance(value, str) and value in ("nan", "inf", "-inf"):
        return float(value)
    if isinstance(value, dict):
        return {k: _restore(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_restore(v) for v in value]
    return value


class EventLog:
    """Appends events to a JSON-lines file (rank 0 only), each line flushed at once.

    Args:
        path: The ``events.jsonl`` file.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._fh: Any = None
        self._pid = -1
        self._lock = threading.Lock()

    def __call__(self, event: dict[str, Any]) -> None:
        try:  # the common case, all finite, at C speed; NaN/Inf become strings (_clean)
            line = json.dumps(event, separators=(",", ":"), allow_nan=False) + "\n"
        except ValueError:
            line = json.dumps(_clean(event), separators=(",", ":")) + "\n"
        with self._lock:
            if self._pid != os.getpid():  # (re)open in each process: forked ranks write too
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._fh = _open_append(self.path)
                self._pid = os.getpid()
            self._fh.write(line)
            self._fh.flush()

    def close(self) -> None:
        with self._lock:
            if self._fh is not None and self._pid == os.getpid():
                self._fh.close()
            self._fh, self._pid = None, -1

    def __getstate__(self) -> dict[str, Any]:
        return {"path": self.path}

    def __setstate__(self, state: dict[str, Any]) -> None:
        type(self).__init__(self, state["path"])

    def __repr__(self) -> str:
        return f"EventLog(path={str(self.path)!r})"


def _open_append(path: Path) -> Any:
    """Open the events file to append; a FIFO, device or folder is refused, never waited on."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags, 0o666)
    except OSError as exc:  # ENXIO: a FIFO nobody reads; EISDIR: a folder
        raise OutputPathError(
            f"cannot write the events file {path}: {exc.strerror}; it must be "
            "a regular file: remove it",
            path,
        ) from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OutputPathError(f"the events file {path} is not a regular file; remove it", path)
    os.set_blocking(fd, True)
    return os.fdopen(fd, "a", encoding="utf-8")


MAX_EVENTS_READ = 64 << 20
"""Most bytes one :func:`read_events` call reads; the rest comes on the next call."""


class EventsFileError(ValueError):
    """The events file holds a line that is not a JSON event; names the file and line."""


def read_events(
    path: str | os.PathLike[str], offset: int = 0, *, limit: int = MAX_EVENTS_READ
) -> tuple[list[dict[str, Any]], int]:
    """Complete events after byte ``offset``; returns them and the offset to read from next.

    At most ``limit`` bytes are read per call. The file must be a regular file (a FIFO or
    device is refused unopened, so a reader never hangs).

    Raises:
        labkit._paths.InputFileError: the events file is not a regular file.
        EventsFileError: a complete line is not a JSON object (names the byte offset).
    """
    try:
        with open_input(path, what="events file", max_bytes=1 << 62) as fh:
            fh.seek(offset)
            data = fh.read(limit)
    except InputFileError:
        if not os.path.lexists(path):
            return [], offset
        raise
    end = data.rfind(b"\n")
    if end < 0:
        return [], offset
    events = []
    at = offset
    for line in data[: end + 1].splitlines(keepends=True):
        if line.strip():
            try:
                event = json.loads(line)
            except ValueError:
                event = None
            if not isinstance(event, dict):
                raise EventsFileError(
                    f"{path}: the line at byte {at} is not a JSON event "
                    f"({line[:60]!r}); the events file is corrupt"
                )
            events.append(_restore(event))
        at += len(line)
    return events, offset + end + 1


class EventTail:
    """A thread that follows ``events.jsonl`` and hands each new event to ``handler``.

    Args:
        path: The events file (it may not exist yet).
        handler: Called with each event, in order, from the tail thread.
        interval: Seconds between two looks at the file.
        offset: Byte offset to start from (events before it were seen already).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        handler: Callable[[dict[str, Any]], None],
        *,
        interval: float = 0.1,
        offset: int = 0,
    ) -> None:
        self.path = Path(path)
        self.handler = handler
        self.interval = interval
        self.offset = offset
        self.error: Exception | None = None  # why following stopped early (a corrupt file)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="labkit-event-tail", daemon=True)

    def start(self) -> EventTail:
        self._thread.start()
        return self

    def _poll(self) -> None:
        if self.error is not None:
            return
        try:
            events, self.offset = read_events(self.path, self.offset)
        except (InputFileError, EventsFileError) as exc:  # kept; training goes on
            self.error = exc
            return
        for ev in events:
            self.handler(ev)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self._poll()

    def stop(self) -> None:
        """Stop following, after delivering every complete event written so far."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        self._poll()

    def __repr__(self) -> str:
        return f"EventTail(path={str(self.path)!r}, offset={self.offset})"
