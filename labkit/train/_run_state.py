"""What a run folder is now: ``running``, ``crashed``, or as its record says it ended.

A fit writes ``events.jsonl`` as it goes and its final record (``run.json`` and
``series.bin``) only at its end, holding ``.labkit.lock`` from start to end
(:mod:`labkit.train._lock`). So a folder read while a fit writes it, or after the fit was
killed, has events (and maybe a checkpoint) but no final record, or an older record from
an earlier fit it resumed. :func:`observe` tells these apart by the lock:

- the lock names a live process (this host: pid, start time, boot id; another host
  cannot be checked and counts as live): ``running``, its figures so far read from
  ``events.jsonl``;
- the lock names a process that is gone (or an earlier process with a reused pid), or
  there is no lock and no final record but events or a checkpoint: ``crashed``, with the
  last step, epoch and time named;
- otherwise the record's own status (``finished``, ``stopped``, ``failed``). A record
  that ended after the lock was taken is final even while its fit still releases the lock.

Reading never blocks nor fails on a folder being written: only complete lines of
``events.jsonl`` are read, a line that is not JSON (torn by a kill, then appended to by a
resumed fit) is skipped and counted, and the lock and record are read once each (both are
replaced atomically by their writers).
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from labkit._paths import InputFileError, open_input
from labkit.train._events import EVENTS_FILE, _restore
from labkit.train._lock import LOCK_FILE, _describe, _identity, _mtime, _read, _stale
from labkit.train.checkpoint import CHECKPOINTS, LAST

MAX_EVENTS_BYTES = 1 << 30
"""Largest ``events.jsonl`` read for a run without a final record (1 GiB)."""
ENDED = ("finished", "stopped", "failed")
STATES = ("running", "crashed", *ENDED, "created")


@dataclass(frozen=True)
class Observed:
    """A run folder's state and, for a run without a final record, its events' record.

    Args:
        state: ``running``, ``crashed``, ``finished``, ``stopped``, ``failed`` or ``created``.
        note: The state in a sentence (who holds the lock, the last step, epoch and time);
            empty for a run that ended with its record.
        record: ``Run.to_dict()`` rebuilt from ``events.jsonl`` when the state is
            ``running`` or ``crashed`` (None: read the final record instead).
        last_step: The last optimizer step recorded (None: none yet).
        last_epoch: Its epoch.
        last_time: Wall-clock time of the last event (seconds since the epoch).
    """

    state: str
    note: str = ""
    record: dict[str, Any] | None = None
    last_step: int | None = None
    last_epoch: int | None = None
    last_time: float | None = None


def has_run_files(folder: Path) -> bool:
    """Whether ``folder`` holds a fit's traces without a final record (events, a lock, a
    checkpoint): a run folder even before its fit ends."""
    return (
        any(os.path.lexists(folder / n) for n in (EVENTS_FILE, LOCK_FILE))
        or (folder / CHECKPOINTS / LAST).is_file()
    )


def observe(folder: Path, meta: dict[str, Any] | None) -> Observed:
    """The state of the run in ``folder`` (see the module docstring).

    Args:
        folder: The run folder.
        meta: Its final record without steps (``read_series``'s), or None when it has none
            (or it cannot be read).

    Returns:
        :class:`Observed`; its ``record`` is set when the figures come from the events.
    """
    lock = _lock_state(folder)
    if meta is not None and _final(meta, lock):
        return Observed(state=str(meta.get("status", "created")))
    if lock is None and meta is not None:  # a record without an end (an old labkit's)
        return Observed(state=str(meta.get("status", "created")))
    record, torn = read_event_record(folder)
    steps = record["steps"]
    last = steps[-1] if steps else {}
    step = last.get("step") if isinstance(last.get("step"), int) else None
    epoch = last.get("epoch") if isinstance(last.get("epoch"), int) else None
    t = record.pop("_last_t", None)
    if t is None:
        t = _newest_mtime(folder)
    where = _where(step, epoch, t)
    torn_note = f"; {torn} torn line(s) of {EVENTS_FILE} skipped" if torn else ""
    if record["status"] in ENDED:  # its end event came; the record is being saved (or failed to be)
        note = f"{record['status']} (read from {EVENTS_FILE}: no final run.json yet){torn_note}"
        return Observed(
            state=record["status"],
            note=note,
            record=record,
            last_step=step,
            last_epoch=epoch,
            last_time=t,
        )
    if lock is not None and lock[0] == "running":
        state, note = "running", f"running: {lock[1]}; {where} so far{torn_note}"
        record["status"] = "running"
    else:
        why = lock[1] if lock is not None else f"no {LOCK_FILE} and no run.json"
        ckpt = folder / CHECKPOINTS / LAST
        resume = (
            f"; its last checkpoint {ckpt} resumes it (Lab.fit(resume=True))"
            if ckpt.is_file()
            else ""
        )
        state = "crashed"
        note = f"crashed: {why}, without ending its run; {where}{resume}{torn_note}"
        record["status"] = "crashed"
    return Observed(
        state=state, note=note, record=record, last_step=step, last_epoch=epoch, last_time=t
    )


def _final(meta: dict[str, Any], lock: tuple[str, str, float | None] | None) -> bool:
    """Whether the record is the run's final one: it ended, and after the lock was taken
    (a fit saves its record, then releases the lock; a resumed fit's lock is newer than the
    record of the fit before it)."""
    if meta.get("status") not in ENDED:
        return False
    if lock is None:
        return True
    ended, taken = meta.get("ended"), lock[2]
    return isinstance(ended, int | float) and taken is not None and ended >= taken


def _lock_state(folder: Path) -> tuple[str, str, float | None] | None:
    """``(running or crashed, who in words, when the lock was taken)``, or None: no lock."""
    path = folder / LOCK_FILE
    if not os.path.lexists(path):
        return None
    info = _read(path)
    if info is None:  # being written (its writer is between open and write), or torn
        if time.time() - _mtime(path) <= 5.0:
            return "running", f"its lock {path} is being written", None
        return "crashed", f"its lock {path} is unreadable (its writer died)", None
    started = info.get("started")
    taken = float(started) if isinstance(started, int | float) else None
    me = _identity()
    who = _describe(info)
    if info.get("host") != me["host"]:
        return "running", f"held by {who} (another machine: not checked from here)", taken
    stale = _stale(info, me)
    if stale is not None:
        return "crashed", f"its lock was left by {stale}", taken
    if isinstance(info.get("pid"), int) and _zombie(info["pid"]):
        return "crashed", f"its lock was left by {who}, which has exited (not yet reaped)", taken
    return "running", f"held by {who}", taken


@dataclass
class _Tail:
    """How far one events file was read, and the record folded from it so far."""

    file: tuple[int, int]  # (st_dev, st_ino): a replaced file is read again from its start
    offset: int
    run: Any
    torn: int = 0
    last_t: float | None = None


_TAILS: OrderedDict[str, _Tail] = OrderedDict()
_TAILS_KEPT = 16  # events files whose record is kept between calls (the latest read)
_TAILS_LOCK = threading.Lock()


def _zombie(pid: int) -> bool:
    """Whether ``pid`` has exited but its parent has not collected it yet (state ``Z`` in
    ``/proc/<pid>/stat``): it still answers ``kill(pid, 0)`` but holds nothing."""
    try:
        data = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return data[data.rfind(b")") + 2 : data.rfind(b")") + 3] == b"Z"


def read_event_record(folder: Path) -> tuple[dict[str, Any], int]:
    """The run record rebuilt from ``<folder>/events.jsonl`` (``Run.to_dict()`` form, plus
    ``_last_t``: the last event's time) and the number of lines skipped as not JSON.

    Only complete lines count (a writer's half-written last line is left for later). A
    missing or unreadable events file gives an empty record. The record of the last 16
    files read is kept, so reading a run again (polling a live fit) reads only the events
    written since.
    """
    from labkit.train.run import Run

    path = folder / EVENTS_FILE
    key = os.path.abspath(path)
    with _TAILS_LOCK:
        try:
            st = os.stat(path)
        except OSError:
            st = None
        tail = _TAILS.pop(key, None)
        file = (st.st_dev, st.st_ino) if st is not None else (0, 0)
        if tail is None or tail.file != file or (st is not None and st.st_size < tail.offset):
            tail = _Tail(file=file, offset=0, run=Run(logdir=str(folder)))
        if st is not None:
            _fold(path, tail)
            _TAILS[key] = tail
            while len(_TAILS) > _TAILS_KEPT:
                _TAILS.popitem(last=False)
        record = tail.run.to_dict()
        record.update(
            steps=list(record["steps"]),
            epochs=list(record["epochs"]),
            config=dict(record["config"]),
            _last_t=tail.last_t,
        )
        return record, tail.torn


def _fold(path: Path, tail: _Tail) -> None:
    """Fold the complete lines of ``path`` after ``tail.offset`` into ``tail.run``."""
    try:
        with open_input(path, what="events file", max_bytes=MAX_EVENTS_BYTES) as fh:
            fh.seek(tail.offset)
            data = fh.read(MAX_EVENTS_BYTES - tail.offset)
    except (InputFileError, OSError):
        return
    end = data.rfind(b"\n")
    if end < 0:
        return
    tail.offset += end + 1
    for event in _events(data[: end + 1]):
        if event is None:
            tail.torn += 1
            continue
        try:
            tail.run.add_event(event)
        except (KeyError, TypeError, ValueError, AttributeError):
            tail.torn += 1  # a JSON line that is not a well-formed event
            continue
        if isinstance(event.get("t"), int | float):
            tail.last_t = float(event["t"])
        if event.get("type") == "start" and isinstance(event.get("source"), str):
            tail.run.config.setdefault("source", event["source"])


def _events(data: bytes) -> list[dict[str, Any] | None]:
    """Each non-blank line of ``data`` as an event, None for a line that is not one. All
    lines are parsed as one JSON array when they can be (a torn line: one by one)."""
    lines = [line for line in data.splitlines() if line.strip()]
    try:
        parsed: list[Any] = json.loads(b"[" + b",".join(lines) + b"]")
        if len(parsed) != len(lines):
            raise ValueError("a line held more than one value")
    except ValueError:
        parsed = []
        for line in lines:
            try:
                parsed.append(json.loads(line))
            except ValueError:
                parsed.append(None)
    special = b'"nan"' in data or b'"inf"' in data or b'"-inf"' in data
    out: list[dict[str, Any] | None] = []
    for event in parsed:
        if not isinstance(event, dict) or not isinstance(event.get("type"), str):
            out.append(None)
        else:
            out.append(_restore(event) if special else event)
    return out


def _newest_mtime(folder: Path) -> float | None:
    times = [_mtime(folder / n) for n in (EVENTS_FILE, f"{CHECKPOINTS}/{LAST}")]
    return max(times) or None


def _where(step: int | None, epoch: int | None, t: float | None) -> str:
    what = (
        f"last step {step}" + (f" (epoch {epoch})" if epoch is not None else "")
        if step is not None
        else "no step recorded"
    )
    if t is None:
        return what
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))
    return f"{what}, at {when}"
