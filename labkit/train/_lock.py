"""One fit per logdir: a lock file holding the fit's pid, host and process identity.

``Lab.fit`` takes ``<logdir>/.labkit.lock`` before it writes anything there and releases
it on every exit path (finished, failed, stopped, interrupted). A second fit into the same
logdir, from this process or another one on this machine, is refused naming the holder.
A lock left by a process that no longer runs (killed with SIGKILL, a crashed kernel) is
taken over, and the run's notes say so. A lock held from another host cannot be checked:
the message says how to remove it when that fit is known to be gone.

Pids repeat (a restarted kernel in a container often gets the pid its predecessor had), so
the lock also holds the process's start time (``/proc/<pid>/stat``, in clock ticks since
boot, with the boot's id) and a token drawn once per process: a lock whose pid runs but
whose start time (or, in this process, token) differs was left by an earlier process and
is taken over with a note. Locks written before these fields existed (pid, host, started)
are still read: their pid alone decides, except that one naming this very process's pid
cannot be this process's own (which writes the new fields) and so is stale.

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
import secrets
import socket
import stat
import time
from pathlib import Path
from types import TracebackType
from typing import Any

from labkit._paths import InputFileError, OutputPathError, read_input

LOCK_FILE = ".labkit.lock"
INHERIT_ENV = "LABKIT_LOGDIR_LOCK"  # set for a subprocess fitting for the lock's holder


class LogdirBusyError(RuntimeError):
    """Another fit holds the logdir; the message names it (pid, host, since when)."""


_TOKEN = secrets.token_hex(8)  # this process's; a forked child draws its own


def _new_token() -> None:
    global _TOKEN
    _TOKEN = secrets.token_hex(8)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_token)


def _process_start(pid: int) -> int | None:
    """When ``pid`` started, in clock ticks since boot (``/proc/<pid>/stat`` field 22), or
    None where there is no ``/proc`` (macOS, Windows) or no such process."""
    try:
        data = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    fields = data[data.rfind(b")") + 2 :].split()  # after the command name, which may hold ")"
    try:
        return int(fields[19])  # field 22; the list starts at field 3
    except (IndexError, ValueError):
        return None


def _boot_id() -> str | None:
    try:
        with open("/proc/sys/kernel/random/boot_id") as fh:
            return fh.read().strip() or None
    except OSError:
        return None


def _identity() -> dict[str, Any]:
    """What this process writes into a lock: pid, host, when, its start time and token."""
    pid = os.getpid()
    return {
        "pid": pid,
        "host": socket.gethostname(),
        "started": time.time(),
        "process_start": _process_start(pid),
        "boot": _boot_id(),
        "token": _TOKEN,
    }


def _earlier_process(info: dict[str, Any], me: dict[str, Any]) -> str | None:
    """Why a lock whose pid runs on this host was left by an earlier process with that pid
    (a sentence), or None when it may be the running process's own."""
    pid = info["pid"]
    start, boot = info.get("process_start"), info.get("boot")
    if isinstance(start, int):
        now = me["process_start"] if pid == me["pid"] else _process_start(pid)
        if boot is not None and me["boot"] is not None and boot != me["boot"]:
            return "it was written before this machine last booted"
        if now is not None and now == start:
            return None  # the very process that wrote it: it holds the lock
        if now is not None:
            return (
                f"the process {pid} running now started at another time than its "
                "writer (pids repeat: a restarted kernel or container)"
            )
    if pid == me["pid"]:
        token = info.get("token")
        if token is None and start is None:
            return (
                "it names this process's pid but has no process token, so an earlier "
                "labkit process with the same pid wrote it"
            )
        if token is not None and token != me["token"]:
            return (
                "it names this process's pid with another process token: an earlier "
                "process with this pid wrote it (a restarted kernel or container)"
            )
    return None


def _stale(info: dict[str, Any] | None, me: dict[str, Any]) -> str | None:
    """Who left a lock that no running fit holds (for the note), or None when it may be held."""
    if info is None or info.get("host") != me["host"] or not isinstance(info.get("pid"), int):
        return None
    if not _alive(info["pid"]):
        return f"a fit that no longer runs ({_describe(info)})"
    earlier = _earlier_process(info, me)
    if earlier is None:
        return None
    return f"an earlier process with the same pid ({_describe(info)}): {earlier}"


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
    when = (
        time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(since))
        if isinstance(since, int | float)
        else "an unknown time"
    )
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
            labkit._paths.OutputPathError: the lock path is not a regular file (a folder),
                named with how to clear it.
        """
        logdir = Path(logdir)
        path = logdir / LOCK_FILE
        if _not_rank_zero() or os.environ.get(INHERIT_ENV) == str(path.resolve()):
            return cls(logdir, [], held=False)
        notes: list[str] = []
        me = _identity()
        for _ in range(3):
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                _check_regular(path, logdir)
                info = _read(path)
                stale = _stale(info, me)
                if stale is not None:
                    notes.append(f"took over a stale lock of {path} left by {stale}")
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
        if info is None or (info.get("pid") == os.getpid() and info.get("token", _TOKEN) == _TOKEN):
            with contextlib.suppress(OSError):
                self.path.unlink()

    def __enter__(self) -> LogdirLock:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"LogdirLock(path={str(self.path)!r}, held={self.held})"


def _busy(logdir: Path, path: Path, info: dict[str, Any], me: dict[str, Any]) -> str:
    who = _describe(info)
    if info.get("pid") == me["pid"] and info.get("host") == me["host"]:
        return (
            f"another fit in this process is still running in the logdir {logdir} "
            f"({who}); wait for it (run.wait()) or stop it (lab.stop()) first, or fit "
            "into another logdir"
        )
    if info.get("host") != me["host"]:
        return (
            f"the logdir {logdir} is held by a fit on another machine ({who}); if that "
            f"fit is gone, delete {path}, or fit into another logdir"
        )
    return (
        f"the logdir {logdir} is held by another running fit ({who}); wait for it to "
        "end, stop it, or fit into another logdir"
    )


def _check_regular(path: Path, logdir: Path) -> None:
    """A lock path that is not a regular file (a folder, a link, a FIFO) is named with how
    to clear it: labkit neither reads it nor removes it."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return  # removed meanwhile: the next attempt creates it
    if stat.S_ISREG(mode):
        return
    kinds = {
        stat.S_ISDIR: "a folder",
        stat.S_ISLNK: "a symbolic link",
        stat.S_ISFIFO: "a FIFO (named pipe)",
        stat.S_ISSOCK: "a socket",
    }
    kind = next((word for test, word in kinds.items() if test(mode)), "not a regular file")
    rm = f"rm -r {str(path)!r}" if stat.S_ISDIR(mode) else f"rm {str(path)!r}"
    raise OutputPathError(
        f"the lock path {path} is {kind}, not the lock file labkit writes there; if no fit "
        f"uses the logdir {logdir}, remove it ({rm}) and fit again, or fit into another "
        "logdir",
        path,
    )


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
