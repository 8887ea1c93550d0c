"""Fault table, locks that know their owner (issue 35, item 5): a logdir lock holds pid,
host, the process's start time and a per-process token, so a lock left by an earlier
process with the same pid (a restarted kernel in a container, where pids repeat) is stale
and taken over with a note, while a lock of a process that runs stays refused; locks in
the old format (pid, host, started) are still read; a lock path that is not a regular
file is named with how to clear it, and nothing is written."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from labkit._paths import OutputPathError
from labkit.train._lock import LOCK_FILE, LogdirBusyError, LogdirLock
from tests.faults._lab import FIT, Counting, lab

# a real process takes the lock and waits (or dies holding it): its lock is the real format
HOLD = """
import sys, time, os
from labkit.train._lock import LogdirLock
lock = LogdirLock.acquire(sys.argv[1])
print("held", flush=True)
if sys.argv[2] == "die":
    os._exit(0)  # dies holding it, as a killed kernel does
time.sleep(60)
"""


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[Any]:
    procs: list[subprocess.Popen[str]] = []

    def start(logdir: Path, how: str = "wait") -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            [sys.executable, "-c", HOLD, str(logdir), how], stdout=subprocess.PIPE, text=True
        )
        procs.append(proc)
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        if how == "die":
            proc.wait()
        return proc

    yield start
    for proc in procs:
        proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def _lock(logdir: Path) -> dict[str, Any]:
    return json.loads((logdir / LOCK_FILE).read_text())


def _write(logdir: Path, info: dict[str, Any]) -> None:
    (logdir / LOCK_FILE).write_text(json.dumps(info))


def test_the_lock_holds_pid_host_start_time_and_token(tmp_path: Path) -> None:
    with LogdirLock.acquire(tmp_path):
        info = _lock(tmp_path)
    assert info["pid"] == os.getpid() and info["host"] == socket.gethostname()
    assert isinstance(info["token"], str) and len(info["token"]) >= 16
    if Path(f"/proc/{os.getpid()}/stat").exists():  # Linux: the start time since boot
        stat = Path(f"/proc/{os.getpid()}/stat").read_text()
        assert info["process_start"] == int(stat.rsplit(")", 1)[1].split()[19])
    assert not (tmp_path / LOCK_FILE).exists()  # released


def test_an_earlier_process_with_this_pid_left_a_stale_lock(tmp_path: Path, holder: Any) -> None:
    # a real process took the lock and died holding it; this process got its pid (as a
    # restarted kernel in a container does): the lock names a live pid, ours, yet no fit runs
    holder(tmp_path, "die")
    earlier = _lock(tmp_path)
    _write(tmp_path, {**earlier, "pid": os.getpid()})
    model = Counting()
    run = lab(tmp_path, model).fit(max_epochs=1, **FIT)
    assert run.status == "finished" and model.calls > 0
    (note,) = [n for n in run.notes if "stale lock" in n]
    assert f"left by an earlier process with the same pid (pid {os.getpid()}" in note
    assert not (tmp_path / LOCK_FILE).exists()


def test_a_lock_of_a_running_process_is_still_refused(tmp_path: Path, holder: Any) -> None:
    proc = holder(tmp_path)
    before = (tmp_path / LOCK_FILE).read_bytes()
    model = Counting()
    with pytest.raises(LogdirBusyError, match=f"pid {proc.pid} on"):
        lab(tmp_path, model).fit(max_epochs=1, **FIT)
    assert model.calls == 0 and (tmp_path / LOCK_FILE).read_bytes() == before


def test_a_running_pid_that_started_later_than_the_lock_is_stale(
    tmp_path: Path, holder: Any
) -> None:
    # the lock's pid runs, but it is another process than the writer: its start differs
    proc = holder(tmp_path, "die")
    info = _lock(tmp_path)
    if info.get("process_start") is None:
        pytest.skip("no /proc here: a process's start time cannot be read")
    runner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        _write(tmp_path, {**info, "pid": runner.pid})  # the pid runs: only the start differs
        assert proc.pid != runner.pid
        run = lab(tmp_path).fit(max_epochs=1, **FIT)
        assert any(
            f"an earlier process with the same pid (pid {runner.pid}" in n
            and "started at another time" in n
            for n in run.notes
        )
    finally:
        runner.kill()
        runner.wait()


@pytest.mark.parametrize("whose", ["this process", "a running process"])
def test_old_format_locks_are_still_read(tmp_path: Path, whose: str) -> None:
    import time

    if whose == "this process":  # cannot be this process's own: it writes a token
        _write(tmp_path, {"pid": os.getpid(), "host": socket.gethostname(), "started": 1.0})
        run = lab(tmp_path).fit(max_epochs=1, **FIT)
        assert any(
            "earlier process with the same pid" in n and "no process token" in n for n in run.notes
        )
        return
    runner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        _write(tmp_path, {"pid": runner.pid, "host": socket.gethostname(), "started": time.time()})
        with pytest.raises(LogdirBusyError, match=f"pid {runner.pid} on"):
            lab(tmp_path).fit(max_epochs=1, **FIT)
    finally:
        runner.kill()
        runner.wait()


@pytest.mark.parametrize("kind", ["folder", "fifo", "dangling link"])
def test_a_lock_path_that_is_not_a_file_is_named_with_how_to_clear_it(
    tmp_path: Path, kind: str
) -> None:
    path = tmp_path / LOCK_FILE
    if kind == "folder":
        path.mkdir()
        (path / "x").write_text("kept")
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to(tmp_path / "nowhere")
    model = Counting()
    with pytest.raises(OutputPathError) as err:
        lab(tmp_path, model).fit(max_epochs=1, **FIT)
    msg = str(err.value)
    assert f"the lock path {path} is" in msg and "not the lock file labkit writes" in msg
    assert (f"rm -r '{path}'" if kind == "folder" else f"rm '{path}'") in msg
    assert model.calls == 0 and not (tmp_path / "run.json").exists()
    assert os.path.lexists(path)  # left for the user to clear
    if kind == "folder":
        assert (path / "x").read_text() == "kept"
