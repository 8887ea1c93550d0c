"""Run a command in a process group of its own, and end the group with it.

``labkit promote --verify`` runs the promoted script (and ``labkit run`` a notebook's
kernel) as a child; what the child starts in turn (``subprocess.Popen(["sleep",
"1000"])``, a server, a worker) must neither outlive it nor keep verify waiting for an
output pipe it holds. The child gets a new session (its own process group), ``/dev/null``
as stdin (a ``sys.stdin.readline()`` reads EOF at once) and files, not pipes, for its
output; when it ends or runs past its limit, its whole group is killed.

Example:
    >>> import sys
    >>> done = run_in_group([sys.executable, "-c", "import sys; print(repr(sys.stdin.read()))"],
    ...                     cwd=".", timeout=60)
    >>> done.returncode, done.stdout
    (0, "''\\n")
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import IO

__all__ = ["Finished", "GroupTimeout", "kill_group", "run_in_group"]


class GroupTimeout(Exception):
    """The command ran past its limit; its group was killed. ``output`` holds what it wrote."""

    def __init__(self, timeout: float, output: str) -> None:
        super().__init__(f"ran past {timeout:g} s")
        self.timeout = timeout
        self.output = output


@dataclass(frozen=True)
class Finished:
    """A command that ended: its exit status and what it wrote."""

    returncode: int
    stdout: str
    stderr: str


def kill_group(pgid: int | None) -> None:
    """SIGKILL every process of group ``pgid`` (never this process's own group)."""
    if not pgid or pgid <= 1 or not hasattr(os, "killpg"):
        return
    if pgid == os.getpgrp():
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def run_in_group(
    cmd: Sequence[str],
    *,
    cwd: str | os.PathLike[str],
    timeout: float,
    env: Mapping[str, str] | None = None,
) -> Finished:
    """Run ``cmd`` in a new session with stdin from ``/dev/null``; kill its process group
    when it ends (what it started goes too) or after ``timeout`` seconds.

    Raises:
        GroupTimeout: it ran past ``timeout`` (the group is killed first).
    """
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            list(cmd),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,
            env=None if env is None else dict(env),
        )
        try:
            ended = _wait_unreaped(proc, timeout)
        finally:
            kill_group(proc.pid)  # before reaping: the group's id cannot have been reused
            proc.wait()
        text = [_read(f) for f in (out, err)]
        if not ended:
            raise GroupTimeout(timeout, text[1] or text[0])
        return Finished(proc.returncode, text[0], text[1])


def _wait_unreaped(proc: subprocess.Popen[bytes], timeout: float) -> bool:
    """Wait until ``proc`` exits, leaving it a zombie (so its pid, the group's id, stays
    taken); False after ``timeout``."""
    deadline = time.monotonic() + timeout
    if not hasattr(os, "waitid"):  # no WNOWAIT: reap, and accept the tiny reuse window
        try:
            proc.wait(timeout=timeout)
            return True
        except subprocess.TimeoutExpired:
            return False
    delay = 0.005
    while True:
        found = os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        if found is not None:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(delay)
        delay = min(delay * 2, 0.1)


def _read(handle: IO[bytes]) -> str:
    handle.seek(0)
    return handle.read().decode("utf-8", "replace")
