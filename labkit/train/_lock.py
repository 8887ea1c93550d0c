"""One fit per logdir: a lock file holding the fit's pid and host.

``Lab.fit`` takes ``<logdir>/.labkit.lock`` before it writes anything there and releases
it on every exit path (finished, failed, stopped, interrupted). A second fit into the same
logdir, from this process or another one on this machine, is refused naming the holder.
A lock left by a process that no longer runs (killed with SIGKILL, a crashed kernel) is
taken over, and the run's notes say so. A lock held from another host cannot be checked:
the message says how to remove it when that fit is known to be gone.

Under a launcher (torchrun, SLURM) only global rank 0 takes the lock; a fit run in a
subprocess on behalf of this process (``launch="subprocess"``) inherits its parent's lock.

Example:
    >>> with LogdirLock.acquire("runs/a") as lock:     # doctest: +SKIP
    ...     lock.notes                                  # a stale lock taken over, if any
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
from pathlib import Path
from types import TracebackType
from typing import Any

from labkit._paths import InputFileError, read_input

LOCK_FILE = ".labkit.lock"
INHERIT_ENV = "LABKIT_LOGDIR_LOCK"  # set for a subprocess fitting for the lock's holder


class LogdirBusyError(RuntimeError):
    """Another fit holds the logdir; the message names it (pid, host, since when)."""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it exists
        return True
    return True


def _describe(info: dict[str, Any]) -> str:
    since = info.get("started")
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(since)) if isinstance(
        since, int | float) else "an unknown time"  # fmt: skip
    return f"pid {info.get('pid')} on {info.get('host')!r}, since {when}"


class LogdirLock:
    """The lock of one logdir, held by this process (see the module docstring).

    Args:
        logdir: The run directory.
        notes: Sentences for the Run's notes (a stale lock taken over).
        held: Whether this object created the lock file (and so removes it).
    """

    def __init__(self, logdir: Path, notes: list[str], held: bool) -> None:
        self.logdir = logdir
        self.path = logdir / LOCK_FILE
        self.notes = notes
        self.held = held

    @classmethod
    def acquire(cls, logdir: str | os.PathLike[str]) -> LogdirLock:
        """Take the lock of ``logdir`` (which exists), or refuse naming its holder.

        Raises:
            LogdirBusyError: a live process (or another host) holds it.
        """
        logdir = Path(logdir)
        path = logdir / LOCK_FILE
        if _not_rank_zero() or os.environ.get(INHERIT_ENV) == str(path.resolve()):
            return cls(logdir, [], held=False)
        notes: list[str] = []
        me = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.time()}
        for _ in range(3):
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                info = _read(path)
                if info is not None and info.get("host") == me["host"] and isinstance(
                        info.get("pid"), int) and not _alive(info["pid"]):  # fmt: skip
                    notes.append(f"took over a stale lock of {path} left by a fit that no "
                                 f"longer runs ({_describe(info)})")  # fmt: skip
                    path.unlink(missing_ok=True)
                    continue
                if info is None:  # unreadable or half-written: its writer died mid-write
                    if time.time() - _mtime(path) > 5.0:
                        notes.append(f"took over an unreadable lock file {path}")
                        path.unlink(missing_ok=True)
                        continue
                    info = {"pid": "?", "host": "?"}
                raise LogdirBusyError(_busy(logdir, path, info, me)) from None
            with os.fdopen(fd, "w") as fh:
                json.dump(me, fh)
            return cls(logdir, notes, held=True)
        raise LogdirBusyError(f"could not take the lock {path}: other fits keep taking it")

    def release(self) -> None:
        """Remove the lock file if this process holds it (idempotent)."""
        if not self.held:
            return
        self.held = False
        info = _read(self.path)
        if info is None or info.get("pid") == os.getpid():
            with contextlib.suppress(OSError):
                self.path.unlink()

    def __enter__(self) -> LogdirLock:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:  # fmt: skip
        self.release()

    def __repr__(self) -> str:
        return f"LogdirLock(path={str(self.path)!r}, held={self.held})"


def _busy(logdir: Path, path: Path, info: dict[str, Any], me: dict[str, Any]) -> str:
    who = _describe(info)
    if info.get("pid") == me["pid"] and info.get("host") == me["host"]:
        return (f"another fit in this process is still running in the logdir {logdir} "
                f"({who}); wait for it (run.wait()) or stop it (lab.stop()) first, or fit "
                "into another logdir")  # fmt: skip
    if info.get("host") != me["host"]:
        return (f"the logdir {logdir} is held by a fit on another machine ({who}); if that "
                f"fit is gone, delete {path}, or fit into another logdir")  # fmt: skip
    return (f"the logdir {logdir} is held by another running fit ({who}); wait for it to "
            "end, stop it, or fit into another logdir")  # fmt: skip


def _read(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(read_input(path, what="lock file", max_bytes=1 << 16))
    except (InputFileError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _not_rank_zero() -> bool:
    """Under torchrun/SLURM, ranks other than 0 share rank 0's lock."""
    for name in ("RANK", "SLURM_PROCID"):
        value = os.environ.get(name)
        if value is not None and value.strip() not in ("", "0"):
            return True
    return False
